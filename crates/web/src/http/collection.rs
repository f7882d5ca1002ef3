//! The collection envelope of every list endpoint: request parsing (query string or JSON
//! body), `items` / `_links` / `_meta`, the `X-Pagination-*` and `Link` headers, HEAD, and
//! Yii's `fields` / `expand` selection of each record (docs/api.md, "Collections").

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::{CONTENT_TYPE, LINK};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use devicecloud_query::{Attribute, CollectionQuery, CollectionSpec, Page, Params, fields, link_header};
use serde_json::{Map, Value};

use devicecloud_store::ListArgs;
use devicecloud_store::Listing as Rows;

use crate::caller::Caller;
use crate::http::error::ApiError;
use crate::origin::Origin;
use crate::state::AppState;
use devicecloud_engine::page_cache::{CachedPage, PageCache};

/// The page sizes of a collection outside the data endpoints: 20 by default (Yii's), at most
/// 1000 (docs/api.md, "Reading").
pub const fn spec(attributes: &'static [Attribute], sortable: &'static [&'static str]) -> CollectionSpec {
    CollectionSpec {
        attributes,
        sortable,
        default_per_page: 20,
        max_per_page: 1000,
    }
}

/// A collection of the API, declared once: its attributes and page sizes, its expand options,
/// where its rows come from and how each is shown. [`CollectionGet::serve`] is the one flow every
/// collection GET shares.
pub trait Listed: Sync {
    type Row: Send + Sync;
    /// The attributes a filter and a sort may name, and the page sizes.
    const SPEC: CollectionSpec;
    /// The expand options in declaration order, listed as the envelope's `expand`.
    const EXPANDS: &'static [&'static str] = &[];
    /// The name its pages are remembered under (`page_cache`); `None`: always read afresh.
    const CACHED_AS: Option<&'static str> = None;

    /// Whether the caller may list it at all, checked before the query is read (Yii answers
    /// 401 before 422).
    fn allowed(&self, _caller: &Caller) -> Result<(), ApiError> {
        Ok(())
    }

    /// The page `args` asks for, of the rows the caller may see.
    fn list(
        &self,
        state: &AppState,
        args: ListArgs<'_>,
    ) -> impl Future<Output = Result<Rows<Self::Row>, ApiError>> + Send;

    /// The records of a page, with what `selection` asks for.
    fn render(
        &self,
        state: &AppState,
        rows: &[Self::Row],
        selection: &Selection,
    ) -> impl Future<Output = Rendered> + Send;

    /// The records of a page asked for with no `fields` and no `expand`, written straight to
    /// JSON text when the collection knows how: the same text as [`Listed::render`] gives,
    /// without a map per record. `None`: rendered through [`Listed::render`].
    fn plain_json(&self, _rows: &[Self::Row]) -> Option<String> {
        None
    }

    /// Top-level keys after `expand` (`labels`, `deviceStatuses`).
    fn extra(&self) -> Vec<(&'static str, Value)> {
        Vec::new()
    }
}

/// A page's records as the API shows them, or why they could not be read.
pub type Rendered = Result<Vec<Value>, ApiError>;

/// A collection GET: the state, the authenticated caller (401 comes first) and the request.
pub struct CollectionGet {
    pub state: AppState,
    pub caller: Caller,
    pub raw: RawCollection,
}

impl FromRequest<AppState> for CollectionGet {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<CollectionGet, ApiError> {
        let (mut parts, body) = req.into_parts();
        let caller = Caller::from_request_parts(&mut parts, state).await?;
        let raw = RawCollection::from_request(Request::from_parts(parts, body), state).await?;
        Ok(CollectionGet {
            state: state.clone(),
            caller,
            raw,
        })
    }
}

impl CollectionGet {
    /// Parses the request against `C` (a bad filter is a 422), fetches one page and renders it
    /// into the envelope; a remembered page is served as it was rendered.
    pub async fn serve<C: Listed>(self, collection: &C) -> Result<CollectionPage, ApiError> {
        let CollectionGet { state, caller, raw } = self;
        collection.allowed(&caller)?;
        let query = raw.parse(&C::SPEC)?;
        let key = C::CACHED_AS.and_then(|name| {
            PageCache::key(
                name,
                &caller.id_user,
                caller.is_admin,
                raw.query_bytes(),
                &raw.body_text(),
            )
        });
        let cached = match key.as_deref().and_then(|key| state.pages.get(key)) {
            Some(hit) => hit,
            None => {
                let version = state.pages.version();
                let listing = collection.list(&state, raw.list_args(&caller, &query)).await?;
                let plain = query.fields.is_none() && query.expand.is_empty();
                let items = match plain.then(|| collection.plain_json(&listing.items)).flatten() {
                    Some(text) => text.into(),
                    None => items_json(
                        &collection
                            .render(&state, &listing.items, &Selection::of(&query))
                            .await?,
                    ),
                };
                let page = Arc::new(CachedPage {
                    page: listing.page,
                    items,
                });
                // HEAD counts only (no rows fetched): such a page is not remembered.
                if let Some(key) = key.filter(|_| !raw.head) {
                    state.pages.put(key, version, page.clone());
                }
                page
            }
        };
        let mut page = CollectionPage::new(&raw, &query, cached.page, cached.items.clone())
            .with("expand", serde_json::json!(C::EXPANDS));
        page.extra.extend(collection.extra());
        Ok(page)
    }
}

/// The routes of collections: Yii answers a collection at its path and at `<path>/index` alike.
pub trait CollectionRoutes {
    /// Serves `list` at `path` and at `path/index`.
    fn collection(self, path: &str, list: MethodRouter<AppState>) -> Self;
}

impl CollectionRoutes for Router<AppState> {
    fn collection(self, path: &str, list: MethodRouter<AppState>) -> Self {
        self.route(path, list.clone()).route(&format!("{path}/index"), list)
    }
}

/// Renders each row through `render`, one after the other, for records whose relations are
/// read per record.
pub async fn each<'a, T, F>(rows: &'a [T], render: impl Fn(&'a T) -> F) -> Result<Vec<Value>, ApiError>
where
    F: Future<Output = Result<Value, ApiError>>,
{
    let mut items = Vec::with_capacity(rows.len());
    for row in rows {
        items.push(render(row).await?);
    }
    Ok(items)
}

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

    /// A page of records kept in memory rather than in the store (formatters, event types),
    /// already filtered and sorted: the page `query` asks for, each record with its `fields`.
    pub fn in_memory(&self, query: &CollectionQuery, records: Vec<Map<String, Value>>) -> CollectionPage {
        let page = query.page.resolve(u64::try_from(records.len()).unwrap_or(u64::MAX));
        let selection = Selection::of(query);
        let items: Vec<Value> = records
            .into_iter()
            .skip(usize::try_from(page.offset).unwrap_or(usize::MAX))
            .take(usize::try_from(page.per_page).unwrap_or(usize::MAX))
            .map(|record| selection.render(record, Vec::new(), None))
            .collect();
        CollectionPage::new(self, query, page, items_json(&items)).with("expand", serde_json::json!([]))
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
    /// Entries of list relations the whole answer holds so far, shared by every nested
    /// selection of one request (docs/operations.md, "Limits": `expand_max_entries`).
    spent: Arc<AtomicUsize>,
}

impl Selection {
    pub fn from_query(query: Option<&str>) -> Selection {
        let params = Params::parse_query(query.unwrap_or("").as_bytes());
        let list = |key: &str| params.get_scalar(key).map(fields::parse_list);
        Selection {
            fields: list("fields"),
            expand: list("expand").unwrap_or_default(),
            spent: Arc::default(),
        }
    }

    pub fn of(query: &CollectionQuery) -> Selection {
        Selection {
            fields: query.fields.clone(),
            expand: query.expand.clone(),
            spent: Arc::default(),
        }
    }

    /// Records without relations or links, each with its `fields`.
    pub fn plain<T>(&self, rows: &[T], fields: impl Fn(&T) -> Map<String, Value>) -> Vec<Value> {
        rows.iter()
            .map(|row| self.render(fields(row), Vec::new(), None))
            .collect()
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
            spent: Arc::clone(&self.spent),
        }
    }

    /// Counts `entries` more list entries (series, templates) into the answer, before they are
    /// loaded: past `max` in all the request is refused with a 400 naming `expand`, so that no
    /// answer is built whose size a caller chose.
    pub fn spend(&self, entries: usize, max: usize) -> Result<(), ApiError> {
        let before = self.spent.fetch_add(entries, Ordering::Relaxed);
        let total = before.saturating_add(entries);
        if total > max {
            return Err(ApiError::BadRequest(format!(
                "Invalid expand: the expanded relations would hold {total} entries or more; at most {max} are \
                 allowed. Ask for fewer records (per-page) or fewer relations."
            )));
        }
        Ok(())
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

/// The largest `Link` header sent (docs/operations.md, "Limits").
const MAX_LINK_HEADER_BYTES: usize = 8 * 1024;

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
        // A long filter repeats itself in every link; past the header limit the `Link` header
        // is left out (proxies refuse large heads) and the body's `_links` stay the reference.
        let link = link_header(&self.links);
        if link.len() <= MAX_LINK_HEADER_BYTES
            && let Ok(link) = HeaderValue::from_str(&link)
        {
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
