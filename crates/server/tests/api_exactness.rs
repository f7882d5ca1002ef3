//! Faults an audit of the API against its specification found (docs/api.md), each over real
//! HTTP on SQLite, and on PostgreSQL when `DEVICECLOUD_TEST_DATABASE_URL` is set.

mod common;

use common::gateway_client::TestGateway;
use common::{TestApp, send};
use serde_json::{Value, json};

/// A JSON-body filter holding null keeps its meaning in the `_links` a client follows: the
/// next page of `id_parent: null` is gateways again, not every device.
#[tokio::test]
async fn null_in_a_body_filter_survives_in_the_links() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    for n in 0..3 {
        let mut gw = TestGateway::connect(&app, &admin, &group, &format!("GW-N{n}"), "PLUS").await;
        let assets: Vec<Value> = (0..4)
            .map(|a| json!({"device": format!("A-{n}-{a}"), "values": {"1": a}}))
            .collect();
        gw.measurements(&Value::Array(assets)).await;
    }
    for filter in [json!({"id_parent": null}), json!({"id_parent": {"in": [null]}})] {
        let first = send(
            app.get("/api/v2/physical-device", &admin)
                .json(&json!({"filter": filter, "per-page": 2})),
        )
        .await
        .expect(200)
        .json();
        assert_eq!(first["_meta"]["totalCount"], 3, "{filter} {first}");
        let next = first["_links"]["next"]["href"].as_str().unwrap().to_string();
        assert!(next.contains("NULL"), "{next}");
        let second = send(app.http.get(&next).bearer_auth(&admin)).await.expect(200).json();
        assert_eq!(second["_meta"]["totalCount"], 3, "{next}");
        let items = second["items"].as_array().unwrap();
        assert_eq!(items.len(), 1);
        assert!(items.iter().all(|d| d["id_parent"].is_null()), "{second}");
    }
    // `neq: null` matches nothing (a comparison with NULL), in the body and through its links.
    let none = send(
        app.get("/api/v2/physical-device", &admin)
            .json(&json!({"filter": {"id_parent": {"neq": null}}, "per-page": 2})),
    )
    .await
    .expect(200)
    .json();
    let own = none["_links"]["self"]["href"].as_str().unwrap().to_string();
    let again = send(app.http.get(&own).bearer_auth(&admin)).await.expect(200).json();
    assert_eq!(again["_meta"]["totalCount"], none["_meta"]["totalCount"]);
}

/// A command read with GET never lists HEAD in `Allow`, whichever method is refused, and HEAD
/// itself is refused (it would send the command).
#[tokio::test]
async fn command_routes_answer_405_alike_for_head_and_post() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    let gw = TestGateway::connect(&app, &admin, &group, "GW-405", "PLUS").await;
    for (command, allow) in [("ping", "GET"), ("status", "GET"), ("wifi", "GET, PUT, DELETE")] {
        let path = format!("/api/v2/physical-device/{}/{command}", gw.id);
        for method in [reqwest::Method::HEAD, reqwest::Method::POST, reqwest::Method::PATCH] {
            let reply = send(app.request(method.clone(), &path, &admin)).await;
            assert_eq!(reply.status, 405, "{method} {command}");
            assert_eq!(reply.header("allow"), Some(allow), "{method} {command}");
        }
    }
}

/// On downsampled data a session is chosen by equality; every other form over
/// `id_data_session` is a 422 rather than "no filter" or "nothing".
#[tokio::test]
async fn a_session_on_downsampled_data_is_chosen_by_equality_or_refused() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "field").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "GO-SES", "GO").await;
    gw.hello("GO", json!({})).await;
    gw.measurements(&json!([{"ts": 1_763_726_400, "values": {"4": 1.5}}]))
        .await;
    gw.power_off().await;
    let sessions = send(app.get("/api/v2/data-session", &admin)).await.expect(200).json();
    let id = sessions["items"][0]["id_data_session"].as_str().unwrap().to_string();
    let base = format!("/api/v2/data-downsampled?filter[id_group]={group}");
    let chosen = send(app.get(&format!("{base}&filter[id_data_session]={id}"), &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(chosen["_meta"]["totalCount"], 1);
    for form in [
        format!("filter[id_data_session][neq]={id}"),
        format!("filter[id_data_session][in][]={id}&filter[id_data_session][in][]=other"),
        format!("filter[or][0][id_data_session]={id}&filter[or][1][datatype]=4"),
        format!("filter[not][id_data_session]={id}"),
    ] {
        let reply = send(app.get(&format!("{base}&{form}"), &admin)).await;
        assert_eq!(reply.status, 422, "{form}: {}", reply.text);
        assert_eq!(reply.json()[0]["field"], "filter", "{form}");
    }
}

/// The device collection answers at `/index` too, as every other collection does.
#[tokio::test]
async fn the_device_collection_answers_at_index() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    let _gw = TestGateway::connect(&app, &admin, &group, "GW-IDX", "CORE").await;
    let plain = send(app.get("/api/v2/physical-device", &admin))
        .await
        .expect(200)
        .json();
    let index = send(app.get("/api/v2/physical-device/index", &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(plain["items"], index["items"]);
    assert_eq!(index["_meta"]["totalCount"], 1);
}

/// Every operation of the served OpenAPI document has a summary and a description that says
/// who may call it, and every JSON answer it lists a schema and an example: a client generator
/// types it, a reader sees it.
#[tokio::test]
async fn every_operation_is_described() {
    let app = TestApp::spawn().await;
    let document = send(app.http.get(app.url("/api/v2/openapi.json")))
        .await
        .expect(200)
        .json();
    let (mut bare, mut untyped) = (Vec::new(), Vec::new());
    for (path, operations) in document["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            let summary = operation["summary"].as_str().unwrap_or_default();
            let description = operation["description"].as_str().unwrap_or_default();
            if summary.is_empty() || description.is_empty() {
                bare.push(format!("{method} {path}"));
            }
            for (status, answer) in operation["responses"].as_object().unwrap() {
                let json = &answer["content"]["application/json"];
                let error = status.as_str() >= "400";
                if (!json.is_null() || error) && (!json["schema"].is_object() || json["example"].is_null()) {
                    untyped.push(format!("{method} {path} {status}"));
                }
            }
        }
    }
    assert!(
        bare.is_empty(),
        "operations without a summary or a description: {bare:?}"
    );
    assert!(
        untyped.is_empty(),
        "JSON answers without a schema or an example: {untyped:#?}"
    );
}
