//! One collection request read whole: filter, sort, page, fields and expand from the query
//! string and an optional JSON body, with the precedence of docs/api.md, "Collections" (the URL
//! wins, the two filters are never merged).

use std::borrow::Cow;

use serde_json::Value;

use crate::error::QueryError;
use crate::fields::parse_list;
use crate::filter::{Attribute, Filter, parse_filter};
use crate::links::page_links;
use crate::pagination::{Page, PageRequest};
use crate::params::{Param, Params};
use crate::sort::{SortKey, parse_sort};

/// Body parameters that may stand in for missing URL ones.
const BODY_PARAMS: [&str; 4] = ["filter", "page", "per-page", "sort"];

/// What an endpoint accepts.
#[derive(Clone, Copy, Debug)]
pub struct CollectionSpec {
    /// Filterable attributes (the search model).
    pub attributes: &'static [Attribute],
    /// Names `sort` accepts.
    pub sortable: &'static [&'static str],
    /// `per-page` when absent; links leave it out when the size equals it.
    pub default_per_page: u64,
    /// Largest `per-page`; larger requests are clamped.
    pub max_per_page: u64,
}

/// A collection request, parsed.
#[derive(Clone, Debug)]
pub struct CollectionQuery {
    /// The condition, `None` for no condition.
    pub filter: Option<Filter>,
    /// The requested order; `None` means the endpoint's default order.
    pub sort: Option<SortKey>,
    /// Page and size asked for.
    pub page: PageRequest,
    /// `fields` from the URL only, split; `None` when absent or not a scalar.
    pub fields: Option<Vec<String>>,
    /// `expand` from the URL only, split; empty when absent.
    pub expand: Vec<String>,
    /// The effective parameters to rebuild links from: the URL's, plus the body's `page`,
    /// `per-page`, `sort` and `filter` where the URL lacks them (appended in body order).
    pub link_params: Params,
    /// The filter source actually used, untyped (for callers reading special keys such as
    /// `id_group` before typing).
    pub raw_filter: Option<Value>,
}

impl CollectionQuery {
    /// Parses a request. `query` is the raw query string; `body` a parsed JSON body, when the
    /// request had one (GET with `Content-Type: application/json`).
    ///
    /// The filter comes from the URL when it has a `filter` parameter at all, else from
    /// `body["filter"]` (a null member counts as absent); `page`, `per-page` and `sort` from the
    /// URL, else from the body. Errors: a body that is not a JSON object →
    /// [`QueryError::BadBody`]; an invalid filter → [`QueryError::Filter`].
    ///
    /// `max_list_values` bounds each `in` / `nin` list ([`crate::DEFAULT_MAX_LIST_VALUES`]
    /// unless configured).
    pub fn parse(
        query: &[u8],
        body: Option<&Value>,
        spec: &CollectionSpec,
        max_list_values: usize,
    ) -> Result<CollectionQuery, QueryError> {
        // A filter attribute is never ignored, whatever bytes its name holds (docs/api.md,
        // "Collections"); PHP would drop the whole filter for such a name.
        if let Some(name) = Params::mangled_filter_name(query) {
            return Err(QueryError::Filter(format!("Unknown filter attribute \"{name}\"")));
        }
        let url = Params::parse_query(query);
        if body.is_some_and(|b| !b.is_object()) {
            return Err(QueryError::BadBody(
                "Invalid JSON data in request body: a JSON object is expected.".to_owned(),
            ));
        }

        let mut link_params = url.clone();
        // A body filter's nulls mean SQL NULL; PHP would drop them from the links, which would
        // then lead to other records. In a URL, "NULL" means the same (docs/api.md, "Collections").
        let body = body.map(null_filters_as_text);
        if let Some(body_params) = body.as_deref().and_then(Params::from_json) {
            for (key, value) in body_params.iter() {
                if BODY_PARAMS.contains(&key) && !url.contains_key(key) {
                    link_params.set(key, value.clone());
                }
            }
        }

        let raw_filter = match url.get("filter") {
            Some(from_url) => Some(from_url.to_json()),
            None => body
                .as_deref()
                .and_then(|b| b.get("filter"))
                .filter(|v| !v.is_null())
                .cloned(),
        };
        let filter = match &raw_filter {
            Some(raw) => parse_filter(raw, spec.attributes, max_list_values)?,
            None => None,
        };

        let list = |key: &str| url.get(key).and_then(Param::as_scalar).map(parse_list);
        Ok(CollectionQuery {
            filter,
            sort: parse_sort(link_params.get("sort"), spec.sortable),
            page: PageRequest::from_params(&link_params, spec.default_per_page, spec.max_per_page),
            fields: list("fields"),
            expand: list("expand").unwrap_or_default(),
            link_params,
            raw_filter,
        })
    }

    /// The `_links` of `page` under `base` (scheme, host and canonical path).
    pub fn links(&self, base: &str, page: &Page) -> Vec<(&'static str, String)> {
        page_links(base, &self.link_params, page, self.page.default_per_page)
    }
}

/// `body` with every null inside its `filter` written as the text `"NULL"`, which the filter
/// reads alike and which survives in a link's query string; borrowed as it is when its filter
/// holds no null (the common case costs no copy). A `filter` that is null itself stays null: no
/// filter.
fn null_filters_as_text(body: &Value) -> Cow<'_, Value> {
    fn holds_null(value: &Value) -> bool {
        match value {
            Value::Null => true,
            Value::Array(items) => items.iter().any(holds_null),
            Value::Object(map) => map.values().any(holds_null),
            _ => false,
        }
    }
    fn texts(value: &Value) -> Value {
        match value {
            Value::Null => Value::String("NULL".into()),
            Value::Array(items) => Value::Array(items.iter().map(texts).collect()),
            Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), texts(v))).collect()),
            other => other.clone(),
        }
    }
    match body {
        Value::Object(map) if map.get("filter").is_some_and(|f| !f.is_null() && holds_null(f)) => {
            Cow::Owned(Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), if k == "filter" { texts(v) } else { v.clone() }))
                    .collect(),
            ))
        }
        other => Cow::Borrowed(other),
    }
}

#[cfg(test)]
mod tests;
