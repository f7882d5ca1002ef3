//! The collection envelope of every list endpoint: request parsing (query string or JSON
//! body), `items` / `_links` / `_meta`, the `X-Pagination-*` and `Link` headers, HEAD, and
//! Yii's `fields` / `expand` selection of each record (docs/api.md, "Collections").

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header::{CONTENT_TYPE, LINK};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method};
use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use devicecloud_query::{CollectionQuery, CollectionSpec, Page, Params, fields, link_header};
use serde_json::{Map, Value};

use devicecloud_store::{ListArgs, Listing};

use super::origin::Origin;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// A list request before it is checked against a collection's attributes: the handler
/// authenticates first (401 comes before 422, Yii's check order) and then parses.
#[derive(Debug)]
pub struct RawCollection {
    pub head: bool,
    base: String,
    query: Vec<u8>,
    body: Option<Value>,
    /// Most values of one `in` / `nin` list (the configured limit).
    max_list_values: usize,
}

impl RawCollection {
    /// Parses against the collection's attributes and page limits.
    pub fn parse(&self, spec: &CollectionSpec) -> Result<CollectionQuery, ApiError> {
        Ok(CollectionQuery::parse(
            &self.query,
            self.body.as_ref(),
            spec,
            self.max_list_values,
        )?)
    }

    /// The store's view of this request for `caller`: their groups, the parsed filter, sort and
    /// page, and whether only the count is wanted (HEAD).
    pub fn list_args<'a>(&self, caller: &'a Caller, query: &'a CollectionQuery) -> ListArgs<'a> {
        ListArgs {
            scope: caller.group_scope(),
            filter: query.filter.as_ref(),
            sort: query.sort.as_ref(),
            page: query.page,
            count_only: self.head,
        }
    }

    /// The raw query string.
    pub fn query_bytes(&self) -> &[u8] {
        &self.query
    }

    /// The JSON body as compact text (empty without a body).
    pub fn body_text(&self) -> String {
        self.body.as_ref().map(Value::to_string).unwrap_or_default()
    }

    /// The flow every collection GET shares: parse against `spec` (a bad filter is a 422),
    /// fetch one page through `list`, render its rows with `render` and wrap them in the
    /// envelope, whose `expand` member lists `expands` (empty where there are none).
    pub async fn page<T>(
        &self,
        spec: &CollectionSpec,
        expands: &[&str],
        list: impl AsyncFnOnce(&CollectionQuery) -> Result<Listing<T>, ApiError>,
        render: impl AsyncFnOnce(&[T], &Selection) -> Result<Vec<Value>, ApiError>,
    ) -> Result<CollectionPage, ApiError> {
        let query = self.parse(spec)?;
        let listing = list(&query).await?;
        let items = render(&listing.items, &Selection::of(&query)).await?;
        Ok(CollectionPage::new(self, &query, listing.page, items_json(&items))
            .with("expand", serde_json::json!(expands)))
    }

    /// Absolute base of the `_links` hrefs: scheme, `Host` and the requested path.
    pub fn base_url(&self) -> &str {
        &self.base
    }
}

impl FromRequest<AppState> for RawCollection {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<RawCollection, ApiError> {
        let head = req.method() == Method::HEAD;
        let base = Origin::of(&state.settings, req.headers(), req.extensions()).url(req.uri().path());
        let query = req.uri().query().unwrap_or("").as_bytes().to_vec();
        let is_json = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("application/json"));
        let body = if is_json {
            let bytes = read_body(req, state.settings.max_body_bytes).await?;
            if bytes.iter().all(u8::is_ascii_whitespace) {
                None
            } else {
                // Yii's message for a body its JSON parser refuses (docs/api.md, "Errors").
                Some(
                    serde_json::from_slice::<Value>(&bytes)
                        .map_err(|_| ApiError::BadRequest("Invalid JSON data in request body: Syntax error".into()))?,
                )
            }
        } else {
            None
        };
        Ok(RawCollection {
            head,
            base,
            query,
            body,
            max_list_values: state.settings.limits.filter_max_values,
        })
    }
}

/// Reads a whole body up to `limit` bytes; a larger one is a 413.
pub async fn read_body(req: Request, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(req.into_body(), limit).await.map_err(|_| {
        ApiError::Status(
            axum::http::StatusCode::PAYLOAD_TOO_LARGE,
            format!("The request body is larger than {limit} bytes."),
        )
    })
}

/// `fields` and `expand` of a single-record request, from the query string.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub fields: Option<Vec<String>>,
    pub expand: Vec<String>,
}

impl Selection {
    pub fn from_query(query: Option<&str>) -> Selection {
        let params = Params::parse_query(query.unwrap_or("").as_bytes());
        let list = |key: &str| params.get_scalar(key).map(fields::parse_list);
        Selection {
            fields: list("fields"),
            expand: list("expand").unwrap_or_default(),
        }
    }

    pub fn of(query: &CollectionQuery) -> Selection {
        Selection {
            fields: query.fields.clone(),
            expand: query.expand.clone(),
        }
    }

    /// Whether relation `name` was asked for (first segment of an `expand` entry).
    pub fn expands(&self, name: &str) -> bool {
        self.expand.iter().any(|e| e.split('.').next() == Some(name))
    }

    /// The selection inside relation `root`: `fields=group.label` gives `label` to the group
    /// (no nested names: every field), `expand=group.latestData` gives `latestData`.
    pub fn nested(&self, root: &str) -> Selection {
        let nested_fields = self.fields.as_deref().map(|f| fields::nested(f, root));
        Selection {
            fields: nested_fields.filter(|f| !f.is_empty()),
            expand: fields::nested(&self.expand, root),
        }
    }

    /// The expand options asked for, among `declared`, in declaration order (Yii's order).
    pub fn expanded<'a>(&self, declared: &[&'a str]) -> Vec<&'a str> {
        declared.iter().copied().filter(|name| self.expands(name)).collect()
    }

    /// Applies `fields` to a record's regular fields, appends the expanded relations and then
    /// the record's `_links` (Yii's Linkable adds them after the selected fields, so a linkable
    /// record with no selected field is `{"_links": …}`, and only others are `[]`).
    pub fn render(&self, regular: Map<String, Value>, expanded: Vec<(String, Value)>, links: Option<Value>) -> Value {
        let value = fields::select(regular, self.fields.as_deref(), expanded);
        match (links, value) {
            (Some(links), Value::Object(mut map)) => {
                map.insert("_links".into(), links);
                Value::Object(map)
            }
            (Some(links), _) => serde_json::json!({"_links": links}),
            (None, value) => value,
        }
    }
}

/// A finished page of a collection, ready to be sent.
pub struct CollectionPage {
    pub head: bool,
    pub links: Vec<(&'static str, String)>,
    pub page: Page,
    /// The records as a JSON array text (pages are remembered rendered, see `page_cache`).
    pub items: Arc<str>,
    /// Extra top-level keys after `_meta` (`expand`, `labels`, …).
    pub extra: Vec<(&'static str, Value)>,
}

impl CollectionPage {
    pub fn new(raw: &RawCollection, query: &CollectionQuery, page: Page, items: Arc<str>) -> CollectionPage {
        CollectionPage {
            head: raw.head,
            links: query.links(raw.base_url(), &page),
            page,
            items,
            extra: Vec::new(),
        }
    }

    pub fn with(mut self, key: &'static str, value: Value) -> CollectionPage {
        self.extra.push((key, value));
        self
    }
}

/// Renders records into the JSON array text a [`CollectionPage`] carries.
pub fn items_json(items: &[Value]) -> Arc<str> {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".into()).into()
}

const TOTAL: HeaderName = HeaderName::from_static("x-pagination-total-count");
const PAGES: HeaderName = HeaderName::from_static("x-pagination-page-count");
const CURRENT: HeaderName = HeaderName::from_static("x-pagination-current-page");
const PER_PAGE: HeaderName = HeaderName::from_static("x-pagination-per-page");

impl IntoResponse for CollectionPage {
    fn into_response(self) -> Response {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            (TOTAL, self.page.total),
            (PAGES, self.page.page_count),
            (CURRENT, self.page.current_page),
            (PER_PAGE, self.page.per_page),
        ] {
            headers.insert(name, HeaderValue::from(value));
        }
        if let Ok(link) = HeaderValue::from_str(&link_header(&self.links)) {
            headers.insert(LINK, link);
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if self.head {
            return headers.into_response();
        }
        let mut links = Map::new();
        for (rel, href) in self.links {
            links.insert(rel.to_string(), serde_json::json!({ "href": href }));
        }
        let meta = serde_json::json!({
            "totalCount": self.page.total,
            "pageCount": self.page.page_count,
            "currentPage": self.page.current_page,
            "perPage": self.page.per_page,
        });
        // The envelope is written around the already rendered items, in Yii's key order.
        let mut body = String::with_capacity(self.items.len() + 512);
        body.push_str("{\"items\":");
        body.push_str(&self.items);
        body.push_str(",\"_links\":");
        body.push_str(&Value::Object(links).to_string());
        body.push_str(",\"_meta\":");
        body.push_str(&meta.to_string());
        for (key, value) in self.extra {
            body.push(',');
            body.push_str(&Value::String(key.to_string()).to_string());
            body.push(':');
            body.push_str(&value.to_string());
        }
        body.push('}');
        (headers, body).into_response()
    }
}
