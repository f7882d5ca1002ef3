//! The collection engine on the group collection: envelope, `_links`, `_meta`, the pagination
//! headers, page clamping, sort, `fields`, filters from the URL and from a JSON body, and the
//! filter errors (docs/api.md, "Collections").

mod common;

use common::{Reply, TestApp, enc, keys, send};
use reqwest::Method;
use serde_json::{Value, json};

const INDEX: &str = "/api/v2/group/index";

async fn list(app: &TestApp, token: &str, query: &str) -> Reply {
    send(app.get(&format!("{INDEX}?{query}"), token)).await
}

async fn list_ok(app: &TestApp, token: &str, query: &str) -> (Reply, Value) {
    let reply = list(app, token, query).await;
    assert_eq!(reply.status, 200, "{query}: {}", reply.text);
    let body = reply.json();
    (reply, body)
}

/// A GET with a JSON body.
async fn list_with_body(app: &TestApp, token: &str, query: &str, body: &Value) -> Reply {
    send(
        app.get(&format!("{INDEX}?{query}"), token)
            .header("Content-Type", "application/json")
            .body(body.to_string()),
    )
    .await
}

fn ids(body: &Value) -> Vec<String> {
    body["items"]
        .as_array()
        .expect("items is a list")
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect()
}

fn labels(body: &Value) -> Vec<String> {
    body["items"]
        .as_array()
        .expect("items is a list")
        .iter()
        .map(|i| i["label"].as_str().unwrap().to_string())
        .collect()
}

/// The query part of an href.
fn query_of(href: &str) -> &str {
    href.split_once('?').map_or("", |(_, q)| q)
}

fn rels(body: &Value) -> Vec<String> {
    keys(&body["_links"])
}

/// 45 groups created one second apart, labelled "Group 00" … "Group 44"; ids in creation order.
async fn seed_45(app: &TestApp) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..45 {
        ids.push(app.seed_group(&format!("Group {i:02}"), 1_000 + i, None).await);
    }
    ids
}

/// Asserts the `_links`, the `Link` header and the `_meta` of a page against the headers.
fn assert_consistent(app: &TestApp, reply: &Reply, body: &Value) {
    assert_eq!(keys(body), ["items", "_links", "_meta", "expand"]);
    let meta = &body["_meta"];
    assert_eq!(keys(meta), ["totalCount", "pageCount", "currentPage", "perPage"]);
    for key in ["totalCount", "pageCount", "currentPage", "perPage"] {
        assert!(meta[key].is_u64(), "{key} is an integer: {meta}");
    }
    for (header, key) in [
        ("x-pagination-total-count", "totalCount"),
        ("x-pagination-page-count", "pageCount"),
        ("x-pagination-current-page", "currentPage"),
        ("x-pagination-per-page", "perPage"),
    ] {
        assert_eq!(reply.header(header), Some(meta[key].to_string().as_str()), "{header}");
    }
    let links = body["_links"].as_object().unwrap();
    let mut header = Vec::new();
    for (rel, link) in links {
        assert_eq!(keys(link), ["href"]);
        let href = link["href"].as_str().unwrap();
        assert!(
            href.starts_with(&format!("{}/api/v2/group", app.base)),
            "absolute href: {href}"
        );
        header.push(format!("<{href}>; rel={rel}"));
    }
    assert_eq!(
        reply.header("link"),
        Some(header.join(", ").as_str()),
        "Link header equals _links"
    );
    // Presence rules (docs/api.md, "Collections").
    let (total, pages, current) = (
        meta["totalCount"].as_u64().unwrap(),
        meta["pageCount"].as_u64().unwrap(),
        meta["currentPage"].as_u64().unwrap(),
    );
    let mut expected = vec!["self"];
    if total > 0 {
        expected.extend(["first", "last"]);
        if current > 1 {
            expected.push("prev");
        }
        if current < pages {
            expected.push("next");
        }
    }
    assert_eq!(rels(body), expected);
}

#[tokio::test]
async fn page_and_per_page_are_clamped() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let all = seed_45(&app).await;
    // (query, currentPage, perPage, pageCount, rows)
    let table: &[(&str, u64, u64, u64, std::ops::Range<usize>)] = &[
        ("", 1, 20, 3, 0..20),
        ("per-page=5000", 1, 1000, 1, 0..45),
        ("per-page=1000", 1, 1000, 1, 0..45),
        ("per-page=0", 1, 1, 45, 0..1),
        ("per-page=-5", 1, 1, 45, 0..1),
        ("per-page=abc", 1, 1, 45, 0..1),
        ("page=99", 3, 20, 3, 40..45),
        ("page=abc", 1, 20, 3, 0..20),
        ("page=0", 1, 20, 3, 0..20),
        ("page=-3", 1, 20, 3, 0..20),
        ("page=2", 2, 20, 3, 20..40),
        ("per-page=20&page=2", 2, 20, 3, 20..40),
        ("page=2&per-page=10", 2, 10, 5, 10..20),
        ("per-page=3&page=99", 15, 3, 15, 42..45),
        ("per-page=0&page=-3", 1, 1, 45, 0..1),
        ("page=1.9&per-page=5abc", 1, 5, 9, 0..5),
        ("per-page=7&page=7", 7, 7, 7, 42..45),
        ("page=-9223372036854775808", 1, 20, 3, 0..20),
        ("per-page=99999999999999999999", 1, 1000, 1, 0..45),
    ];
    for (query, current, per, count, rows) in table {
        let (reply, body) = list_ok(&app, &admin, query).await;
        assert_eq!(
            body["_meta"],
            json!({"totalCount": 45, "pageCount": count, "currentPage": current, "perPage": per}),
            "{query}"
        );
        assert_eq!(ids(&body), all[rows.clone()].to_vec(), "{query}");
        assert_consistent(&app, &reply, &body);
    }
}

#[tokio::test]
async fn huge_page_numbers_are_clamped() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let all = seed_45(&app).await;
    let table: &[(&str, u64, u64, u64, std::ops::Range<usize>)] = &[
        ("page=9223372036854775807", 3, 20, 3, 40..45),
        ("page=9223372036854775807&per-page=1000", 1, 1000, 1, 0..45),
        ("page=99999999999999999999&per-page=2", 23, 2, 23, 44..45),
        ("page=4611686018427387904&per-page=7", 7, 7, 7, 42..45),
    ];
    for (query, current, per, count, rows) in table {
        let (reply, body) = list_ok(&app, &admin, query).await;
        assert_eq!(
            body["_meta"],
            json!({"totalCount": 45, "pageCount": count, "currentPage": current, "perPage": per}),
            "{query}"
        );
        assert_eq!(ids(&body), all[rows.clone()].to_vec(), "{query}");
        assert_consistent(&app, &reply, &body);
    }
    // An empty result too.
    let (_, body) = list_ok(&app, &admin, "filter[label]=none&page=9223372036854775807").await;
    assert_eq!(
        body["_meta"],
        json!({"totalCount": 0, "pageCount": 0, "currentPage": 1, "perPage": 20})
    );
}

#[tokio::test]
async fn links_carry_the_request_and_follow_the_presence_rules() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    seed_45(&app).await;
    let href = |body: &Value, rel: &str| query_of(body["_links"][rel]["href"].as_str().unwrap()).to_string();

    let (_, body) = list_ok(&app, &admin, "page=2&per-page=10&sort=-created_at&fields=id,label").await;
    assert_eq!(rels(&body), ["self", "first", "last", "prev", "next"]);
    let q = |p: u32| format!("page={p}&per-page=10&sort=-created_at&fields=id%2Clabel");
    assert_eq!(href(&body, "self"), q(2));
    assert_eq!(href(&body, "first"), q(1));
    assert_eq!(href(&body, "last"), q(5));
    assert_eq!(href(&body, "prev"), q(1));
    assert_eq!(href(&body, "next"), q(3));

    // The default size is left out of the links.
    let (_, body) = list_ok(&app, &admin, "per-page=20&page=2").await;
    assert_eq!(href(&body, "self"), "page=2");
    assert_eq!(href(&body, "next"), "page=3");
    // A size other than the default is written, after the page when the request had none.
    let (_, body) = list_ok(&app, &admin, "per-page=2").await;
    assert_eq!(href(&body, "self"), "per-page=2&page=1");
    // The clamped size is written.
    let (_, body) = list_ok(&app, &admin, "per-page=5000").await;
    assert_eq!(href(&body, "self"), "per-page=1000&page=1");
    assert_eq!(rels(&body), ["self", "first", "last"]);
    // First page: no prev; the page is appended.
    let (_, body) = list_ok(&app, &admin, "").await;
    assert_eq!(rels(&body), ["self", "first", "last", "next"]);
    assert_eq!(href(&body, "self"), "page=1");
    assert_eq!(href(&body, "last"), "page=3");
    // A page past the end shows the clamped page; no next.
    let (_, body) = list_ok(&app, &admin, "page=99").await;
    assert_eq!(rels(&body), ["self", "first", "last", "prev"]);
    assert_eq!(href(&body, "self"), "page=3");
    assert_eq!(href(&body, "prev"), "page=2");
    // Filters are carried, re-encoded.
    let (reply, body) = list_ok(&app, &admin, "filter[label][like]=Group 1&per-page=5").await;
    assert_eq!(body["_meta"]["totalCount"], 10);
    assert_eq!(
        href(&body, "self"),
        "filter%5Blabel%5D%5Blike%5D=Group+1&per-page=5&page=1"
    );
    assert_consistent(&app, &reply, &body);
    // An empty result: only self.
    let (reply, body) = list_ok(&app, &admin, "filter[label]=nothing").await;
    assert_eq!(body["items"], json!([]));
    assert_eq!(
        body["_meta"],
        json!({"totalCount": 0, "pageCount": 0, "currentPage": 1, "perPage": 20})
    );
    assert_eq!(rels(&body), ["self"]);
    assert_eq!(href(&body, "self"), "filter%5Blabel%5D=nothing&page=1");
    assert_consistent(&app, &reply, &body);
    // The links are built from the request's Host.
    let reply = send(
        app.get(&format!("{INDEX}?per-page=10"), &admin)
            .header("Host", "api.example.com:8443"),
    )
    .await
    .expect(200);
    let body = reply.json();
    for rel in ["self", "first", "last", "next"] {
        let href = body["_links"][rel]["href"].as_str().unwrap();
        assert!(href.starts_with("http://api.example.com:8443/api/v2/group"), "{href}");
    }
    assert!(
        reply
            .header("link")
            .unwrap()
            .starts_with("<http://api.example.com:8443/api/v2/group")
    );
    // Following next from the first page walks the whole collection.
    let mut url = format!("{}{INDEX}?per-page=10", app.base);
    let mut pages = 0;
    loop {
        let reply = send(app.http.get(&url).bearer_auth(&admin)).await.expect(200);
        let body = reply.json();
        assert_consistent(&app, &reply, &body);
        pages += 1;
        match body["_links"]["next"]["href"].as_str() {
            Some(next) => url = next.to_string(),
            None => break,
        }
    }
    assert_eq!(pages, 5);
}

#[tokio::test]
async fn sort_by_one_attribute() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    for (i, label) in ["delta", "Alpha", "charlie", "Bravo", "echo"].iter().enumerate() {
        app.seed_group(label, 1_000 + i as i64, None).await;
    }
    let created = ["delta", "Alpha", "charlie", "Bravo", "echo"];
    let by_label = ["Alpha", "Bravo", "charlie", "delta", "echo"];
    let rev = |v: &[&'static str]| -> Vec<&'static str> { v.iter().rev().copied().collect() };
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("", created.to_vec()),
        ("sort=label", by_label.to_vec()),
        ("sort=-label", rev(&by_label)),
        ("sort=bogus", created.to_vec()),
        ("sort=", created.to_vec()),
        ("sort=LABEL", created.to_vec()),
        ("sort=bogus,-label", rev(&by_label)),
        ("sort=label,-created_at", by_label.to_vec()),
        ("sort=-created_at", rev(&created)),
        ("sort=created_at", created.to_vec()),
        ("sort[]=label", created.to_vec()),
    ];
    for (query, expected) in cases {
        let (reply, body) = list_ok(&app, &admin, query).await;
        assert_eq!(labels(&body), expected, "{query}");
        assert_consistent(&app, &reply, &body);
    }
    // The sort is carried into the links.
    let (_, body) = list_ok(&app, &admin, "sort=-label&per-page=2").await;
    assert_eq!(
        query_of(body["_links"]["next"]["href"].as_str().unwrap()),
        "sort=-label&per-page=2&page=2"
    );
}

#[tokio::test]
async fn ties_are_broken_so_that_pages_never_overlap() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let mut seeded = Vec::new();
    for i in 0..45 {
        // Everything created in the same second, three labels differing only in case.
        let label = ["same", "Same", "SAME", "other"][i % 4];
        seeded.push(app.seed_group(label, 5_000, None).await);
    }
    seeded.sort();
    for sort in [
        "",
        "sort=label",
        "sort=-label",
        "sort=created_at",
        "sort=-created_at",
        "sort=type",
        "sort=-id_country",
        "sort=bogus",
    ] {
        let mut walked = Vec::new();
        let mut walked_labels = Vec::new();
        for page in 1..=7 {
            let (_, body) = list_ok(&app, &admin, &format!("{sort}&per-page=7&page={page}")).await;
            assert_eq!(body["_meta"]["pageCount"], 7);
            walked.extend(ids(&body));
            walked_labels.extend(labels(&body));
        }
        let mut sorted = walked.clone();
        sorted.sort();
        assert_eq!(sorted, seeded, "{sort}: every group exactly once");
        if sort.ends_with("label") {
            let lower: Vec<String> = walked_labels.iter().map(|l| l.to_lowercase()).collect();
            let mut expected = lower.clone();
            expected.sort();
            if sort.contains('-') {
                expected.reverse();
            }
            assert_eq!(lower, expected, "{sort}: case-insensitive order");
        }
        // The same request twice gives the same order.
        let (_, again) = list_ok(&app, &admin, &format!("{sort}&per-page=7&page=3")).await;
        assert_eq!(ids(&again), walked[14..21].to_vec(), "{sort}: stable");
    }
}

#[tokio::test]
async fn fields_select_in_declaration_order() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    seed_45(&app).await;
    let first = |body: &Value| body["items"][0].clone();
    for query in [
        "fields=id,label",
        "fields=label,id",
        "fields=label, id",
        "fields=id,label,nonexistent",
        "fields=label,id,label",
    ] {
        let (_, body) = list_ok(&app, &admin, query).await;
        assert_eq!(keys(&first(&body)), ["id", "label", "_links"], "{query}");
        assert!(first(&body)["_links"]["self"]["href"].is_string());
    }
    let (_, body) = list_ok(&app, &admin, "fields=created_at,type").await;
    assert_eq!(keys(&first(&body)), ["type", "created_at", "_links"]);
    assert!(first(&body)["created_at"].is_i64());
    // Nothing matches: a group is linkable, so each item keeps only its `_links` (Yii's
    // Linkable adds them whatever `fields` selects).
    let (reply, body) = list_ok(&app, &admin, "fields=nonexistent&per-page=3").await;
    for item in body["items"].as_array().unwrap() {
        assert_eq!(keys(item), ["_links"]);
        assert!(item["_links"]["self"]["href"].is_string());
    }
    assert_eq!(body["items"].as_array().unwrap().len(), 3);
    assert_consistent(&app, &reply, &body);
    // Everything.
    for query in ["fields=*", "fields=", "expand=bogus"] {
        let (_, body) = list_ok(&app, &admin, query).await;
        assert_eq!(keys(&first(&body)).len(), 10, "{query}");
        assert_eq!(body["expand"], json!([]), "{query}");
    }
}

/// Eight groups for the filter tests; returns (label → id) in creation order, and the two
/// countries.
async fn seed_filterable(app: &TestApp) -> (Vec<(String, String)>, String, String) {
    let (c1, c2) = (uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string());
    let rows: [(&str, Option<&str>); 8] = [
        ("Alpha", Some(&c1)),
        ("Bravo", None),
        ("charlie", Some(&c1)),
        ("100% pure", None),
        ("100 pure", None),
        ("a_b", Some(&c2)),
        ("axb", None),
        ("Delta", None),
    ];
    let mut out = Vec::new();
    for (i, (label, country)) in rows.iter().enumerate() {
        out.push((
            label.to_string(),
            app.seed_group(label, 1_000 + i as i64, *country).await,
        ));
    }
    (out, c1, c2)
}

#[tokio::test]
async fn filters_from_the_query_string() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let (seeded, c1, c2) = seed_filterable(&app).await;
    let all: Vec<&str> = seeded.iter().map(|(l, _)| l.as_str()).collect();
    let except = |out: &[&str]| all.iter().copied().filter(|l| !out.contains(l)).collect::<Vec<_>>();
    let bravo_id = &seeded[1].1;
    let cases: Vec<(String, Vec<&str>)> = vec![
        ("filter[label]=Alpha".into(), vec!["Alpha"]),
        ("filter[label][eq]=Bravo".into(), vec!["Bravo"]),
        ("filter[label][neq]=Alpha".into(), except(&["Alpha"])),
        ("filter[label][like]=ALP".into(), vec!["Alpha"]),
        ("filter[label][like]=CHAR".into(), vec!["charlie"]),
        ("filter[label][like]=pure".into(), vec!["100% pure", "100 pure"]),
        (format!("filter[label][like]={}", enc("0%")), vec!["100% pure"]),
        ("filter[label][like]=a_b".into(), vec!["a_b"]),
        ("filter[label][like]=".into(), all.clone()),
        ("filter[label]=".into(), vec![]),
        ("filter[created_at]=1003".into(), vec!["100% pure"]),
        ("filter[created_at][lt]=1002".into(), vec!["Alpha", "Bravo"]),
        ("filter[created_at][lte]=1002".into(), vec!["Alpha", "Bravo", "charlie"]),
        ("filter[created_at][gt]=1005".into(), vec!["axb", "Delta"]),
        ("filter[created_at][gte]=1005".into(), vec!["a_b", "axb", "Delta"]),
        (
            "filter[created_at][gt]=1001&filter[created_at][lt]=1004".into(),
            vec!["charlie", "100% pure"],
        ),
        (
            "filter[label][in][]=Alpha&filter[label][in][]=Delta".into(),
            vec!["Alpha", "Delta"],
        ),
        (
            "filter[label][in][0]=Alpha&filter[label][in][1]=Bravo".into(),
            vec!["Alpha", "Bravo"],
        ),
        ("filter[label][in][]=Bravo".into(), vec!["Bravo"]),
        (
            "filter[label][nin][]=Alpha&filter[label][nin][]=Bravo".into(),
            except(&["Alpha", "Bravo"]),
        ),
        (
            "filter[or][0][label]=Alpha&filter[or][1][created_at][gte]=1007".into(),
            vec!["Alpha", "Delta"],
        ),
        (
            "filter[or][][label]=Alpha&filter[or][][label]=Bravo".into(),
            vec!["Alpha", "Bravo"],
        ),
        (
            "filter[and][0][created_at][gte]=1001&filter[and][1][created_at][lte]=1002".into(),
            vec!["Bravo", "charlie"],
        ),
        (
            "filter[and][0][label][like]=a&filter[and][1][not][label][like]=pure".into(),
            vec!["Alpha", "Bravo", "charlie", "a_b", "axb", "Delta"],
        ),
        ("filter[not][created_at][lt]=1006".into(), vec!["axb", "Delta"]),
        (
            "filter[created_at][gte]=1001&filter[label][like]=a".into(),
            vec!["Bravo", "charlie", "a_b", "axb", "Delta"],
        ),
        (
            "filter[id_country]=NULL".into(),
            vec!["Bravo", "100% pure", "100 pure", "axb", "Delta"],
        ),
        (format!("filter[id_country]={c1}"), vec!["Alpha", "charlie"]),
        (
            format!("filter[id_country][in][]={c1}&filter[id_country][in][]={c2}"),
            vec!["Alpha", "charlie", "a_b"],
        ),
        // neq and nin leave NULLs out (SQL three-valued logic).
        (format!("filter[id_country][nin][]={c1}"), vec!["a_b"]),
        (format!("filter[id_country][neq]={c1}"), vec!["a_b"]),
        (
            format!("filter[id_country][in][]={c2}&filter[id_country][in][]=NULL"),
            vec!["Bravo", "100% pure", "100 pure", "a_b", "axb", "Delta"],
        ),
        ("filter[deleted_at]=NULL".into(), all.clone()),
        ("filter[type]=0".into(), all.clone()),
        (format!("filter[id]={bravo_id}"), vec!["Bravo"]),
        (format!("filter[id_group]={bravo_id}"), vec!["Bravo"]),
    ];
    for (query, expected) in cases {
        let (reply, body) = list_ok(&app, &admin, &query).await;
        assert_eq!(labels(&body), expected, "{query}");
        assert_eq!(body["_meta"]["totalCount"], expected.len(), "{query}");
        assert_consistent(&app, &reply, &body);
    }
}

#[tokio::test]
async fn filters_from_a_json_body() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    seed_filterable(&app).await;
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        ("", json!({"filter": {"label": "Alpha"}}), vec!["Alpha"]),
        (
            "",
            json!({"filter": {"created_at": {"gte": 1006}}}),
            vec!["axb", "Delta"],
        ),
        (
            "",
            json!({"filter": {"created_at": {"gte": "1006"}}}),
            vec!["axb", "Delta"],
        ),
        (
            "",
            json!({"filter": {"id_country": null}}),
            vec!["Bravo", "100% pure", "100 pure", "axb", "Delta"],
        ),
        (
            "",
            json!({"filter": {"or": [{"label": "Alpha"}, {"label": {"like": "brav"}}]}}),
            vec!["Alpha", "Bravo"],
        ),
        (
            "",
            json!({"filter": {"label": {"in": ["Alpha", "Delta"]}}}),
            vec!["Alpha", "Delta"],
        ),
        (
            "",
            json!({"filter": null}),
            vec![
                "Alpha",
                "Bravo",
                "charlie",
                "100% pure",
                "100 pure",
                "a_b",
                "axb",
                "Delta",
            ],
        ),
        // The URL's filter wins; the two are not merged.
        (
            "filter[label]=Bravo",
            json!({"filter": {"label": "Alpha"}}),
            vec!["Bravo"],
        ),
        (
            "filter[created_at][gte]=1006",
            json!({"filter": {"label": "Alpha"}}),
            vec!["axb", "Delta"],
        ),
        // Other URL parameters do not hide the body's filter.
        (
            "sort=-label",
            json!({"filter": {"label": {"like": "a"}}}),
            vec!["Delta", "charlie", "Bravo", "axb", "Alpha", "a_b"],
        ),
        // The body's sort applies when the URL has none; the URL's wins otherwise.
        (
            "",
            json!({"filter": {"created_at": {"lte": 1002}}, "sort": "-label"}),
            vec!["charlie", "Bravo", "Alpha"],
        ),
        (
            "sort=label",
            json!({"filter": {"created_at": {"lte": 1002}}, "sort": "-label"}),
            vec!["Alpha", "Bravo", "charlie"],
        ),
    ];
    for (query, body, expected) in cases {
        let reply = list_with_body(&app, &admin, query, &body).await;
        assert_eq!(reply.status, 200, "{query} {body}: {}", reply.text);
        let page = reply.json();
        assert_eq!(labels(&page), expected, "{query} {body}");
        assert_consistent(&app, &reply, &page);
    }
    // The body's per-page is used when the URL lacks it, and shows in the links.
    let reply = list_with_body(&app, &admin, "", &json!({"per-page": 3}))
        .await
        .expect(200);
    let body = reply.json();
    assert_eq!(
        body["_meta"],
        json!({"totalCount": 8, "pageCount": 3, "currentPage": 1, "perPage": 3})
    );
    assert_eq!(ids(&body).len(), 3);
    assert!(
        query_of(body["_links"]["next"]["href"].as_str().unwrap()).contains("per-page=3"),
        "{body}"
    );
    assert_consistent(&app, &reply, &body);
    // The URL's per-page and page win over the body's.
    let reply = list_with_body(&app, &admin, "per-page=2&page=2", &json!({"per-page": 3, "page": 3}))
        .await
        .expect(200);
    assert_eq!(
        reply.json()["_meta"],
        json!({"totalCount": 8, "pageCount": 4, "currentPage": 2, "perPage": 2})
    );
    // The body's page applies when the URL has none.
    let reply = list_with_body(&app, &admin, "", &json!({"per-page": 3, "page": 2}))
        .await
        .expect(200);
    assert_eq!(reply.json()["_meta"]["currentPage"], 2);
    // A charset in the content type is fine.
    let reply = send(
        app.get(INDEX, &admin)
            .header("Content-Type", "application/json; charset=UTF-8")
            .body(json!({"filter": {"label": "Alpha"}}).to_string()),
    )
    .await
    .expect(200);
    assert_eq!(labels(&reply.json()), ["Alpha"]);
    // HEAD with a JSON body counts the filtered rows.
    let head = send(
        app.request(Method::HEAD, INDEX, &admin)
            .header("Content-Type", "application/json")
            .body(json!({"filter": {"label": {"like": "pure"}}}).to_string()),
    )
    .await
    .expect(200);
    assert_eq!(head.header("x-pagination-total-count"), Some("2"));
    assert_eq!(head.text, "");
    // An empty JSON body is no body.
    let reply = send(app.get(INDEX, &admin).header("Content-Type", "application/json"))
        .await
        .expect(200);
    assert_eq!(reply.json()["_meta"]["totalCount"], 8);
}

fn assert_filter_error(reply: &Reply, message: &str, what: &str) {
    assert_eq!(reply.status, 422, "{what}: {}", reply.text);
    assert_eq!(reply.json(), json!([{"field": "filter", "message": message}]), "{what}");
    assert_eq!(keys(&reply.json()[0]), ["field", "message"]);
    for header in [
        "x-pagination-total-count",
        "x-pagination-page-count",
        "x-pagination-current-page",
        "x-pagination-per-page",
        "link",
    ] {
        assert!(reply.header(header).is_none(), "{what}: no {header} on an error");
    }
}

#[tokio::test]
async fn filter_errors_are_422_lists() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    seed_filterable(&app).await;
    let cases = [
        ("filter[foo]=1", "Unknown filter attribute \"foo\""),
        ("filter[Label]=x", "Unknown filter attribute \"Label\""),
        ("filter[]=x", "Unknown filter attribute \"0\""),
        ("filter[type_label]=Default", "Unknown filter attribute \"type_label\""),
        ("filter[created_at]=abc", "Created At must be an integer."),
        ("filter[created_at][gt]=x", "Created At must be an integer."),
        ("filter[created_at][GT]=5", "Created At must be an integer."),
        (
            "filter[created_at][in][]=1&filter[created_at][in][]=abc",
            "Created At must be an integer.",
        ),
        ("filter[deleted_at][lt]=soon", "Deleted At must be an integer."),
        ("filter[label][like][]=a", "Label must be a string."),
        (
            "filter[created_at][like]=1",
            "\"created_at\" does not support operator \"like\".",
        ),
        ("filter[label][in]=x", "Operator \"in\" requires multiple operands."),
        ("filter[label][nin]=x", "Operator \"nin\" requires multiple operands."),
        ("filter[and]=1", "Operator \"and\" requires multiple operands."),
        (
            "filter[and][x][label]=1",
            "Operator \"and\" requires multiple operands.",
        ),
        ("filter[or]=1", "Operator \"or\" requires multiple operands."),
        ("filter[eq]=5", "Operator \"eq\" must be used with a search attribute."),
        (
            "filter[like]=5",
            "Operator \"like\" must be used with a search attribute.",
        ),
        (
            "filter[created_at][gt]=1&filter[created_at][bogus]=2",
            "Condition for \"created_at\" should be either a value or valid operator specification.",
        ),
        ("filter=abc", "The format of Filter is invalid."),
        ("filter=", "The format of Filter is invalid."),
        ("filter[and][]=", "The format of Filter is invalid."),
    ];
    for (query, message) in cases {
        let reply = list(&app, &admin, query).await;
        assert_filter_error(&reply, message, query);
        // The same on the other list path and with HEAD.
        let reply = send(app.get(&format!("/api/v2/group?{query}"), &admin)).await;
        assert_filter_error(&reply, message, query);
        let head = send(app.request(Method::HEAD, &format!("{INDEX}?{query}"), &admin)).await;
        assert_eq!(head.status, 422, "HEAD {query}");
        assert!(head.header("x-pagination-total-count").is_none());
    }
    // Authentication comes before the filter: no token, a 401 and no 422.
    let reply = send(app.http.get(app.url(&format!("{INDEX}?filter=abc")))).await;
    common::assert_invalid_credentials(&reply);
    // The same errors from a JSON body.
    let body_cases = [
        (json!({"filter": {"foo": 1}}), "Unknown filter attribute \"foo\""),
        (
            json!({"filter": {"created_at": "abc"}}),
            "Created At must be an integer.",
        ),
        (json!({"filter": {"label": 5}}), "Label must be a string."),
        (
            json!({"filter": {"created_at": {"like": 1}}}),
            "\"created_at\" does not support operator \"like\".",
        ),
        (
            json!({"filter": {"label": {"in": "x"}}}),
            "Operator \"in\" requires multiple operands.",
        ),
        (
            json!({"filter": {"and": 1}}),
            "Operator \"and\" requires multiple operands.",
        ),
        (
            json!({"filter": {"eq": 5}}),
            "Operator \"eq\" must be used with a search attribute.",
        ),
        (json!({"filter": "abc"}), "The format of Filter is invalid."),
    ];
    for (body, message) in body_cases {
        let reply = list_with_body(&app, &admin, "", &body).await;
        assert_filter_error(&reply, message, &body.to_string());
    }
}

#[tokio::test]
async fn a_malformed_json_body_is_400() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    for text in [
        "{",
        "{\"filter\": }",
        "not json",
        "{\"filter\": {\"label\": \"x\"}} trailing",
    ] {
        let reply = send(
            app.get(INDEX, &admin)
                .header("Content-Type", "application/json")
                .body(text),
        )
        .await;
        assert_eq!(reply.status, 400, "{text}: {}", reply.text);
        assert_eq!(
            reply.json(),
            json!({"name": "Bad Request", "message": "Invalid JSON data in request body: Syntax error", "code": 0, "status": 400}),
            "{text}"
        );
        assert!(reply.header("x-pagination-total-count").is_none());
    }
}

#[tokio::test]
async fn like_matches_non_ascii_text() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    app.seed_group("Äpfel Süd", 1_000, None).await;
    app.seed_group("Apfel Nord", 1_001, None).await;
    for (value, expected) in [
        ("Äpfel", vec!["Äpfel Süd"]),
        ("Süd", vec!["Äpfel Süd"]),
        ("äpfel", vec!["Äpfel Süd"]),
        ("SÜD", vec!["Äpfel Süd"]),
        ("pfel", vec!["Äpfel Süd", "Apfel Nord"]),
    ] {
        let (_, body) = list_ok(&app, &admin, &format!("filter[label][like]={}", enc(value))).await;
        assert_eq!(labels(&body), expected, "like {value}");
    }
}

/// HEAD counts and fetches no rows (pagination rule 6): it leaves no remembered page behind,
/// so a GET right after it reads the store (a group added directly to the store, which no
/// cache hears of, shows at once).
#[tokio::test]
async fn head_counts_without_fetching_a_page() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    seed_45(&app).await;
    let path = "/api/v2/group?per-page=50";
    let head = send(app.request(Method::HEAD, path, &admin)).await.expect(200);
    assert_eq!(head.header("x-pagination-total-count"), Some("45"));
    assert!(head.text.is_empty());
    app.seed_group("Group 45", 2_000, None).await;
    let body = send(app.get(path, &admin)).await.expect(200).json();
    assert_eq!(body["_meta"]["totalCount"], 46);
    assert_eq!(body["items"].as_array().unwrap().len(), 46);
}
