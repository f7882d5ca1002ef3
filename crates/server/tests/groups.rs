//! The Group resource (specification, Groups): every field with its JSON type, the item
//! `_links`, both list paths, HEAD, a single record and 404.

mod common;

use common::{TestApp, assert_error, keys, send};
use serde_json::{Value, json};

const GROUP_KEYS: [&str; 10] = [
    "id",
    "id_group",
    "label",
    "type",
    "type_label",
    "subtype",
    "id_country",
    "created_at",
    "deleted_at",
    "_links",
];

/// Asserts a Group record: keys in the specification's order and their JSON types.
fn assert_group(item: &Value) {
    assert_eq!(keys(item), GROUP_KEYS, "{item}");
    let id = item["id"].as_str().expect("id is a string");
    assert_eq!(id.len(), 36, "a UUID: {id}");
    assert!(uuid::Uuid::parse_str(id).is_ok(), "a UUID: {id}");
    assert_eq!(item["id_group"], item["id"]);
    assert!(item["label"].is_string());
    assert!(item["type"].is_string(), "type is the numeric code as text: {item}");
    assert!(
        item["type"].as_str().unwrap().parse::<i64>().is_ok(),
        "type is numeric text: {item}"
    );
    assert!(item["type_label"].as_str().is_some_and(|l| !l.is_empty()));
    assert!(item["subtype"].is_string());
    assert!(item["id_country"].is_null() || item["id_country"].is_string());
    assert!(item["created_at"].is_i64(), "created_at is an integer: {item}");
    assert!(item["deleted_at"].is_null() || item["deleted_at"].is_i64());
    let links = &item["_links"];
    assert_eq!(keys(links), ["self", "index", "data", "downsampled_data", "raw_data"]);
    for (_, link) in links.as_object().unwrap() {
        assert_eq!(keys(link), ["href"]);
        let href = link["href"].as_str().unwrap();
        assert!(href.starts_with("/api/v2/"), "relative href: {href}");
    }
    let decoded = |rel: &str| {
        links[rel]["href"]
            .as_str()
            .unwrap()
            .replace("%5B", "[")
            .replace("%5D", "]")
    };
    assert_eq!(links["self"]["href"], format!("/api/v2/group/{id}"));
    assert_eq!(links["index"]["href"], "/api/v2/group/index");
    assert_eq!(decoded("data"), format!("/api/v2/data?filter[id_group]={id}"));
    assert_eq!(
        decoded("downsampled_data"),
        format!("/api/v2/data-downsampled?filter[id_group]={id}")
    );
    assert_eq!(decoded("raw_data"), format!("/api/v2/data/index?filter[id_group]={id}"));
}

#[tokio::test]
async fn a_group_record_has_every_field_of_the_specification() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let before = devicecloud_store::unix_now();
    let id = app.create_group(&admin, "Plant North").await;
    let record = send(app.get(&format!("/api/v2/group/{id}"), &admin)).await.expect(200);
    assert!(record.header("content-type").unwrap().starts_with("application/json"));
    let record = record.json();
    assert_group(&record);
    assert_eq!(record["id"], id);
    assert_eq!(record["label"], "Plant North");
    assert_eq!(record["type"], "0");
    assert_eq!(record["subtype"], "");
    assert!(record["id_country"].is_null());
    assert!(record["deleted_at"].is_null());
    let created = record["created_at"].as_i64().unwrap();
    assert!(
        created >= before && created <= devicecloud_store::unix_now(),
        "created_at is now: {created}"
    );

    // With a type, a subtype and a country.
    let country = uuid::Uuid::new_v4().to_string();
    let created = send(
        app.request(reqwest::Method::POST, "/api/v2/group", &admin)
            .json(&json!({"label": "Site A", "type": "3", "subtype": "pumping", "id_country": country})),
    )
    .await
    .expect(201)
    .json();
    assert_group(&created);
    assert_eq!(created["type"], "3");
    assert_eq!(created["type_label"], "Site");
    assert_eq!(created["subtype"], "pumping");
    assert_eq!(created["id_country"], country);
    let fetched = send(app.get(&format!("/api/v2/group/{}", created["id"].as_str().unwrap()), &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(fetched, created);
}

#[tokio::test]
async fn both_list_paths_list_the_groups() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let a = app.create_group(&admin, "First").await;
    let b = app.create_group(&admin, "Second").await;
    for path in ["/api/v2/group/index", "/api/v2/group"] {
        let reply = send(app.get(path, &admin)).await.expect(200);
        let body = reply.json();
        assert_eq!(keys(&body), ["items", "_links", "_meta", "expand"], "{path}");
        let items = body["items"].as_array().unwrap();
        assert_eq!(items.len(), 2);
        for item in items {
            assert_group(item);
        }
        let ids: Vec<&str> = items.iter().map(|i| i["id"].as_str().unwrap()).collect();
        let mut expected = vec![a.as_str(), b.as_str()];
        // Creation time ascending; two groups created in the same second tie on it.
        if ids != expected {
            expected.sort();
            let mut sorted = ids.clone();
            sorted.sort();
            assert_eq!(sorted, expected, "{path}");
        }
        assert_eq!(
            body["_meta"],
            json!({"totalCount": 2, "pageCount": 1, "currentPage": 1, "perPage": 20})
        );
        assert_eq!(body["expand"], json!([]));
        assert_eq!(reply.header("x-pagination-total-count"), Some("2"));
    }
}

#[tokio::test]
async fn head_returns_the_pagination_headers_only() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    for i in 0..5 {
        app.seed_group(&format!("g{i}"), 1_000 + i, None).await;
    }
    for path in ["/api/v2/group", "/api/v2/group/index"] {
        let get = send(app.get(&format!("{path}?per-page=2&page=2"), &admin))
            .await
            .expect(200);
        let head = send(app.request(reqwest::Method::HEAD, &format!("{path}?per-page=2&page=2"), &admin))
            .await
            .expect(200);
        assert_eq!(head.text, "", "HEAD has no body");
        for (name, value) in [
            ("x-pagination-total-count", "5"),
            ("x-pagination-page-count", "3"),
            ("x-pagination-current-page", "2"),
            ("x-pagination-per-page", "2"),
        ] {
            assert_eq!(head.header(name), Some(value), "{path} {name}");
            assert_eq!(get.header(name), Some(value), "{path} {name}");
        }
        let link = head.header("link").expect("Link header on HEAD");
        assert_eq!(Some(link), get.header("link"));
        assert!(
            link.contains("rel=self") && link.contains("rel=prev") && link.contains("rel=next"),
            "{link}"
        );
    }
    // HEAD with a filter counts the filtered rows.
    let head = send(app.request(reqwest::Method::HEAD, "/api/v2/group?filter[label]=g1", &admin))
        .await
        .expect(200);
    assert_eq!(head.header("x-pagination-total-count"), Some("1"));
    assert_eq!(head.text, "");
}

#[tokio::test]
async fn an_unknown_group_is_404() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    for id in [
        uuid::Uuid::new_v4().to_string(),
        "not-a-uuid".to_string(),
        "12345".to_string(),
    ] {
        let reply = send(app.get(&format!("/api/v2/group/{id}"), &admin)).await;
        assert_eq!(reply.status, 404, "{id}: {}", reply.text);
        let body = reply.json();
        assert_error(&body, 404);
        assert_eq!(body["name"], "Not Found");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
}

#[tokio::test]
async fn fields_apply_to_a_single_record() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let id = app.create_group(&admin, "Only").await;
    let body = send(app.get(&format!("/api/v2/group/{id}?fields=label,id"), &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(keys(&body), ["id", "label", "_links"]);
    assert_eq!(body["label"], "Only");
}

#[tokio::test]
async fn head_on_a_record() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let id = app.create_group(&admin, "Headed").await;
    let reply = send(app.request(reqwest::Method::HEAD, &format!("/api/v2/group/{id}"), &admin))
        .await
        .expect(200);
    assert_eq!(reply.text, "");
    let reply = send(app.request(
        reqwest::Method::HEAD,
        &format!("/api/v2/group/{}", uuid::Uuid::new_v4()),
        &admin,
    ))
    .await
    .expect(404);
    assert_eq!(reply.text, "");
}
