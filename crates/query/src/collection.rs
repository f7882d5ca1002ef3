//! One collection request read whole: filter, sort, page, fields and expand from the query
//! string and an optional JSON body, with the precedence of docs/api.md, "Collections" (the URL
//! wins, the two filters are never merged).

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
        if let Some(body_params) = body.and_then(Params::from_json) {
            for (key, value) in body_params.iter() {
                if BODY_PARAMS.contains(&key) && !url.contains_key(key) {
                    link_params.set(key, value.clone());
                }
            }
        }

        let raw_filter = match url.get("filter") {
            Some(from_url) => Some(from_url.to_json()),
            None => body.and_then(|b| b.get("filter")).filter(|v| !v.is_null()).cloned(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::{AttrKind, CompareOp, Scalar};
    use serde_json::json;

    const ATTRS: &[Attribute] = &[
        Attribute::new("id", AttrKind::Integer),
        Attribute::new("name", AttrKind::String),
        Attribute::new("id_group", AttrKind::Integer),
    ];
    const SPEC: CollectionSpec = CollectionSpec {
        attributes: ATTRS,
        sortable: &["id", "name"],
        default_per_page: 20,
        max_per_page: 50,
    };

    fn parse(query: &str, body: Option<Value>) -> Result<CollectionQuery, QueryError> {
        CollectionQuery::parse(query.as_bytes(), body.as_ref(), &SPEC, crate::DEFAULT_MAX_LIST_VALUES)
    }

    fn id_eq(v: i64) -> Option<Filter> {
        Some(Filter::Compare {
            attr: "id",
            op: CompareOp::Eq,
            value: Scalar::Int(v),
        })
    }

    #[test]
    fn a_plain_url() {
        let q = parse(
            "page=2&per-page=10&sort=-id&fields=id,name&expand=group&filter[id]=3",
            None,
        )
        .unwrap();
        assert_eq!(q.filter, id_eq(3));
        assert_eq!(
            q.sort,
            Some(SortKey {
                attr: "id",
                descending: true
            })
        );
        assert_eq!(
            q.page,
            PageRequest {
                page: 2,
                per_page: 10,
                default_per_page: 20
            }
        );
        assert_eq!(q.fields, Some(vec!["id".to_owned(), "name".to_owned()]));
        assert_eq!(q.expand, ["group"]);
        assert_eq!(q.raw_filter, Some(json!({"id": "3"})));
        assert_eq!(
            q.link_params,
            Params::parse_query(b"page=2&per-page=10&sort=-id&fields=id,name&expand=group&filter[id]=3")
        );
    }

    #[test]
    fn nothing_given() {
        let q = parse("", None).unwrap();
        assert_eq!(q.filter, None);
        assert_eq!(q.sort, None);
        assert_eq!(
            q.page,
            PageRequest {
                page: 1,
                per_page: 20,
                default_per_page: 20
            }
        );
        assert_eq!(q.fields, None);
        assert!(q.expand.is_empty());
        assert_eq!(q.raw_filter, None);
    }

    #[test]
    fn unknown_sort_means_default_order() {
        assert_eq!(parse("sort=bogus", None).unwrap().sort, None);
        assert_eq!(parse("sort[]=id", None).unwrap().sort, None);
    }

    #[test]
    fn a_filter_name_php_would_mangle_is_refused() {
        for query in [
            "filter[%00abc]=1",
            "filter[abc%00]=1",
            "filter[name=1",
            "filter[name][%00]=1",
        ] {
            match parse(query, None) {
                Err(QueryError::Filter(message)) => {
                    assert!(message.starts_with("Unknown filter attribute"), "{message}")
                }
                other => panic!("{query}: {other:?}"),
            }
        }
        assert!(parse("filter[name]=a%00b", None).is_ok(), "NUL in a value is fine");
    }

    #[test]
    fn fields_and_expand_only_from_the_url() {
        let q = parse("fields[]=id&expand=", Some(json!({"fields": "id", "expand": "group"}))).unwrap();
        assert_eq!(q.fields, None);
        assert!(q.expand.is_empty());
        assert_eq!(parse("fields=", None).unwrap().fields, Some(vec![]));
    }

    #[test]
    fn the_body_fills_what_the_url_lacks() {
        // A JSON-body request (docs/api.md, "Collections"): URL page and sort win, the body's
        // filter and per-page apply.
        let body = json!({"filter": {"id": {"in": [2, 5]}}, "per-page": 1});
        let q = parse("sort=-id&page=2", Some(body)).unwrap();
        assert_eq!(
            q.filter,
            Some(Filter::In {
                attr: "id",
                values: vec![Scalar::Int(2), Scalar::Int(5)],
                or_null: false,
                negated: false
            })
        );
        assert_eq!(
            q.sort,
            Some(SortKey {
                attr: "id",
                descending: true
            })
        );
        assert_eq!(
            q.page,
            PageRequest {
                page: 2,
                per_page: 1,
                default_per_page: 20
            }
        );
        assert_eq!(q.raw_filter, Some(json!({"id": {"in": [2, 5]}})));
        let page = q.page.resolve(2);
        assert_eq!(page.current_page, 2);
        let links = q.links("http://h/items", &page);
        assert_eq!(
            links.first().map(|(_, h)| h.as_str()),
            Some(
                "http://h/items?sort=-id&page=2&filter%5Bid%5D%5Bin%5D%5B0%5D=2&filter%5Bid%5D%5Bin%5D%5B1%5D=5&per-page=1"
            )
        );
    }

    #[test]
    fn the_url_filter_beats_the_body_filter_without_merging() {
        let body = json!({"filter": {"name": "x"}, "page": 3, "per-page": 5, "sort": "name"});
        let q = parse("filter[id]=1&per-page=7", Some(body)).unwrap();
        assert_eq!(q.filter, id_eq(1));
        assert_eq!(q.raw_filter, Some(json!({"id": "1"})));
        assert_eq!(
            q.page,
            PageRequest {
                page: 3,
                per_page: 7,
                default_per_page: 20
            }
        );
        assert_eq!(
            q.sort,
            Some(SortKey {
                attr: "name",
                descending: false
            })
        );
        assert_eq!(
            q.link_params,
            Params::parse_query(b"filter[id]=1&per-page=7&page=3&sort=name")
        );
    }

    #[test]
    fn any_url_filter_counts_even_an_invalid_one() {
        let body = json!({"filter": {"id": 1}});
        assert_eq!(
            parse("filter=", Some(body)).unwrap_err(),
            QueryError::Filter("The format of Filter is invalid.".into())
        );
    }

    #[test]
    fn body_values_are_typed() {
        let q = parse(
            "",
            Some(json!({"filter": {"id": 4, "name": null}, "page": true, "per-page": 2.7})),
        )
        .unwrap();
        assert_eq!(
            q.filter,
            Some(Filter::And(vec![
                Filter::Compare {
                    attr: "id",
                    op: CompareOp::Eq,
                    value: Scalar::Int(4)
                },
                Filter::IsNull { attr: "name" },
            ]))
        );
        assert_eq!(
            q.page,
            PageRequest {
                page: 1,
                per_page: 2,
                default_per_page: 20
            }
        );
        assert_eq!(
            parse("", Some(json!({"filter": {"name": 5}}))).unwrap_err(),
            QueryError::Filter("Name must be a string.".into())
        );
    }

    #[test]
    fn a_null_body_filter_is_absent() {
        let q = parse("", Some(json!({"filter": null}))).unwrap();
        assert_eq!(q.filter, None);
        assert_eq!(q.raw_filter, None);
        assert_eq!(parse("", Some(json!({}))).unwrap().filter, None);
    }

    #[test]
    fn a_body_must_be_an_object() {
        for body in [json!([1]), json!("x"), json!(5), json!(null), json!([])] {
            assert!(matches!(parse("", Some(body)), Err(QueryError::BadBody(_))));
        }
    }

    #[test]
    fn filter_errors_surface() {
        assert_eq!(
            parse("filter[foo]=1", None).unwrap_err(),
            QueryError::Filter("Unknown filter attribute \"foo\"".into())
        );
    }
}
