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
