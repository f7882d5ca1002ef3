use super::*;
use crate::pagination::PageRequest;
use serde_json::json;

const BASE: &str = "http://h/items";

/// Links of a request to /items with Yii's defaults (20 per page, at most 50).
fn links(query: &str, total: u64) -> Vec<(&'static str, String)> {
    let params = Params::parse_query(query.as_bytes());
    let page = PageRequest::from_params(&params, 20, 50).resolve(total);
    page_links(BASE, &params, &page, 20)
}

fn href<'a>(links: &'a [(&'static str, String)], rel: &str) -> Option<&'a str> {
    links.iter().find(|(r, _)| *r == rel).map(|(_, h)| h.as_str())
}

fn rels(links: &[(&'static str, String)]) -> Vec<&'static str> {
    links.iter().map(|(r, _)| *r).collect()
}

#[test]
fn the_envelope_example() {
    let l = links("page=2&per-page=10&sort=-id&fields=id,name", 45);
    assert_eq!(rels(&l), ["self", "first", "last", "prev", "next"]);
    let q = |p: u32| format!("http://h/items?page={p}&per-page=10&sort=-id&fields=id%2Cname");
    assert_eq!(href(&l, "self"), Some(q(2).as_str()));
    assert_eq!(href(&l, "first"), Some(q(1).as_str()));
    assert_eq!(href(&l, "last"), Some(q(5).as_str()));
    assert_eq!(href(&l, "prev"), Some(q(1).as_str()));
    assert_eq!(href(&l, "next"), Some(q(3).as_str()));
}

#[test]
fn page_is_appended_after_a_present_per_page() {
    let l = links("per-page=2", 45);
    assert_eq!(href(&l, "self"), Some("http://h/items?per-page=2&page=1"));
}

#[test]
fn the_default_size_is_dropped() {
    let l = links("per-page=20&page=2", 45);
    assert_eq!(href(&l, "self"), Some("http://h/items?page=2"));
}

#[test]
fn a_clamped_size_is_written() {
    let l = links("per-page=100&x=1", 45);
    assert_eq!(href(&l, "self"), Some("http://h/items?per-page=50&x=1&page=1"));
    let l = links("per-page=abc", 45);
    assert_eq!(href(&l, "self"), Some("http://h/items?per-page=1&page=1"));
}

#[test]
fn an_empty_result_has_only_self() {
    let l = links("filter[id]=9999", 0);
    assert_eq!(rels(&l), ["self"]);
    assert_eq!(href(&l, "self"), Some("http://h/items?filter%5Bid%5D=9999&page=1"));
}

#[test]
fn presence_rules() {
    assert_eq!(rels(&links("", 45)), ["self", "first", "last", "next"]);
    assert_eq!(rels(&links("page=3", 45)), ["self", "first", "last", "prev"]);
    assert_eq!(rels(&links("", 5)), ["self", "first", "last"]);
    // A page past the end shows the clamped page.
    let l = links("per-page=3&page=99", 45);
    assert_eq!(href(&l, "self"), Some("http://h/items?per-page=3&page=15"));
    assert_eq!(rels(&l), ["self", "first", "last", "prev"]);
}

#[test]
fn other_params_are_carried_and_reencoded() {
    let l = links("PAGE=7&_format=json&access-token=abc&a[]=1&a[]=2&q=x+y&e&a.b=1", 45);
    assert_eq!(
        href(&l, "self"),
        Some("http://h/items?PAGE=7&_format=json&access-token=abc&a%5B0%5D=1&a%5B1%5D=2&q=x+y&e=&a_b=1&page=1")
    );
}

#[test]
fn params_the_url_manager_consumes_are_left_out() {
    let l = links("r=items&0=x&%23=frag&sort=id", 45);
    assert_eq!(href(&l, "self"), Some("http://h/items?sort=id&page=1"));
}

#[test]
fn a_non_scalar_page_is_replaced_in_place() {
    let l = links("page[]=2&x=1", 45);
    assert_eq!(href(&l, "self"), Some("http://h/items?page=1&x=1"));
}

#[test]
fn links_from_body_params_as_yii_builds_them() {
    // docs/api.md, "Collections", Yii's own behaviour when the body is the parameter source.
    let body = json!({"filter": {"id": {"in": [2, 5]}}, "per-page": 1});
    let params = Params::from_json(&body).unwrap();
    let page = PageRequest::from_params(&params, 20, 50).resolve(2);
    assert_eq!(page.current_page, 1);
    let l = page_links(BASE, &params, &page, 20);
    assert_eq!(
        href(&l, "self"),
        Some("http://h/items?filter%5Bid%5D%5Bin%5D%5B0%5D=2&filter%5Bid%5D%5Bin%5D%5B1%5D=5&per-page=1&page=1")
    );
}

#[test]
fn header_format() {
    let l = links("page=2&per-page=10", 45);
    assert_eq!(
        link_header(&l),
        "<http://h/items?page=2&per-page=10>; rel=self, <http://h/items?page=1&per-page=10>; rel=first, \
         <http://h/items?page=5&per-page=10>; rel=last, <http://h/items?page=1&per-page=10>; rel=prev, \
         <http://h/items?page=3&per-page=10>; rel=next"
    );
    assert_eq!(link_header(&[]), "");
}
