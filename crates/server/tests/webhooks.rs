//! Webhooks end to end: data sent by a gateway (HTTP gateway endpoint and MQTT) reaches a real
//! HTTP receiver on loopback, signed, in order, batched, retried after 500s and refused
//! connections with the same delivery id and body; the webhook API's rights, validation,
//! masking and attempt log. The rules on addresses, limits, failing webhooks and secrets are in
//! `webhook_rules.rs`.

mod common;

use std::time::Duration;

use axum::body::Bytes;
use common::webhook_receiver::*;
use common::{TestApp, assert_error, send};
use devicecloud_server::Settings;
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn measurements_arrive_signed_in_order_with_the_fields_of_the_data_endpoint() {
    let s = setup().await;
    let (receiver, url) = Receiver::start(Vec::new()).await;
    let created = s.webhook(s.hook_body("measurements", "json", &url)).await;
    let secret = created["secret"].as_str().unwrap().to_string();
    assert_eq!(secret.len(), 64);
    let id = created["id_webhook"].as_str().unwrap();

    for n in 0..20 {
        s.measure_n(n).await;
    }
    let got = receiver.until("20 items", |got| all_items(got).len() >= 20).await;
    let all = all_items(&got);
    assert_eq!(values(&all), (0..20).collect::<Vec<_>>(), "order of the data");
    let first = &all[0];
    assert_eq!(
        common::keys(first),
        [
            "id_container_data_latest",
            "id_group",
            "datatype",
            "source_device",
            "timestamp_seconds",
            "microseconds",
            "value"
        ]
    );
    assert_eq!(first["id_group"], s.group.as_str());
    assert_eq!(first["source_device"], s.device.as_str());
    assert_eq!(first["datatype"], 1);
    assert_eq!(first["timestamp_seconds"], 1_763_726_400);
    assert_eq!(first["microseconds"], 0);
    let mut deliveries = Vec::new();
    for r in &got {
        assert_eq!(header(r, "authorization"), "Bearer 0123456789abcdef-TOKEN");
        assert_eq!(header(r, "content-type"), "application/json");
        assert_signed(r, &secret);
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["webhook"]["id_webhook"], id);
        assert_eq!(body["webhook"]["forwarding_type"], "measurements");
        deliveries.push(header(r, "x-devicecloud-delivery").to_string());
    }
    deliveries.dedup();
    assert_eq!(deliveries.len(), got.len(), "a new delivery id per batch");

    // A signature made with another key does not verify.
    let mut forged = got[0].clone();
    forged.body = Bytes::from_static(b"{}");
    let result = std::panic::catch_unwind(|| assert_signed(&forged, &secret));
    assert!(result.is_err(), "a changed body must not verify");

    // The attempt log has one successful attempt per request, every field of docs/api.md,
    // "Webhooks".
    let log = s.logged_attempts(id, "", got.len()).await;
    let list = log["items"].as_array().unwrap();
    assert_eq!(list.len(), got.len());
    assert_eq!(
        common::keys(&list[0]),
        [
            "id_attempt",
            "id_webhook",
            "id_delivery",
            "attempted_at",
            "status_code",
            "duration_ms",
            "error",
            "item_count",
            "attempt"
        ]
    );
    assert_eq!(list[0]["status_code"], 200);
    assert_eq!(list[0]["attempt"], 1);
    assert_eq!(list[0]["error"], Value::Null);
    let counted: i64 = list.iter().map(|a| a["item_count"].as_i64().unwrap()).sum();
    assert_eq!(counted, 20);
}

#[tokio::test]
async fn resent_points_are_forwarded_once() {
    let s = setup().await;
    let (receiver, url) = Receiver::start(Vec::new()).await;
    s.webhook(s.hook_body("measurements", "ndjson", &url)).await;
    s.measure_n(1).await;
    s.measure_n(1).await;
    s.measure_n(2).await;
    let got = receiver.until("2 items", |got| all_items(got).len() >= 2).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(values(&all_items(&receiver.requests())), [1, 2]);
    assert!(!got.is_empty());
}

#[tokio::test]
async fn retries_after_500_keep_the_delivery_id_and_body_and_then_batch_the_rest() {
    let s = setup().await;
    let (receiver, url) = Receiver::start(vec![500, 503]).await;
    let created = s.webhook(s.hook_body("measurements", "ndjson", &url)).await;
    let secret = created["secret"].as_str().unwrap().to_string();
    let id = created["id_webhook"].as_str().unwrap();

    s.measure_n(0).await;
    receiver.until("first try", |got| !got.is_empty()).await;
    // While the first batch waits out its backoff, more data comes: it makes one later batch.
    for n in 1..10 {
        s.measure_n(n).await;
    }
    let got = receiver
        .until("all items accepted", |got| {
            got.len() >= 4 && all_items(&got[2..]).len() >= 10
        })
        .await;
    let (a, b, c) = (&got[0], &got[1], &got[2]);
    assert_eq!(header(a, "x-devicecloud-delivery"), header(b, "x-devicecloud-delivery"));
    assert_eq!(header(a, "x-devicecloud-delivery"), header(c, "x-devicecloud-delivery"));
    assert_eq!(a.body, b.body);
    assert_eq!(a.body, c.body);
    for r in &got {
        assert_eq!(header(r, "content-type"), "application/x-ndjson");
        assert_signed(r, &secret);
    }
    assert_eq!(values(&items(a)), [0]);
    let rest = all_items(&got[3..]);
    assert_eq!(
        values(&rest),
        (1..10).collect::<Vec<_>>(),
        "order kept after the retries"
    );
    let sizes: Vec<usize> = got.iter().map(|r| items(r).len()).collect();
    assert!(
        items(&got[3]).len() > 1,
        "the waiting records went out as a batch: {sizes:?}"
    );

    let log = s.attempts(id, "?sort=id_attempt").await;
    let list = log["items"].as_array().unwrap();
    let statuses: Vec<Value> = list.iter().take(3).map(|a| a["status_code"].clone()).collect();
    assert_eq!(statuses, [json!(500), json!(503), json!(200)]);
    let numbers: Vec<Value> = list.iter().take(3).map(|a| a["attempt"].clone()).collect();
    assert_eq!(numbers, [json!(1), json!(2), json!(3)]);
    assert_eq!(list[0]["error"], "status");
    let failed = s.attempts(id, "?filter[status_code][gte]=500&sort=-id_attempt").await;
    let failed = failed["items"].as_array().unwrap();
    assert_eq!(failed.len(), 2);
    assert_eq!(failed[0]["status_code"], 503);
    let bad = send(
        s.app
            .get(&format!("/api/v2/webhook/{id}/attempt?filter[nope]=1"), &s.admin),
    )
    .await;
    assert_eq!(bad.status, 422, "{}", bad.text);
}

#[tokio::test]
async fn a_refused_connection_is_retried_until_the_receiver_comes_up() {
    let s = setup().await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let created = s
        .webhook(s.hook_body("measurements", "json", &format!("http://{addr}{}", hook_path())))
        .await;
    let id = created["id_webhook"].as_str().unwrap().to_string();
    s.measure_n(7).await;
    // Wait for a logged failure without a response.
    let mut refused = Value::Null;
    for _ in 0..200 {
        let log = s.attempts(&id, "").await;
        if let Some(first) = log["items"].as_array().unwrap().first() {
            refused = first.clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(refused["status_code"], Value::Null, "{refused}");
    assert_eq!(refused["error"], "connect");
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let receiver = Receiver::serve(listener, Vec::new());
    let got = receiver.until("delivery", |got| !got.is_empty()).await;
    assert_eq!(values(&items(&got[0])), [7]);
    assert_eq!(header(&got[0], "x-devicecloud-delivery"), refused["id_delivery"]);
}

#[tokio::test]
async fn events_go_to_events_webhooks_only() {
    let s = setup().await;
    let (events_rx, events_url) = Receiver::start(Vec::new()).await;
    let (points_rx, points_url) = Receiver::start(Vec::new()).await;
    s.webhook(s.hook_body("events", "json", &events_url)).await;
    s.webhook(s.hook_body("measurements", "json", &points_url)).await;
    let request = s
        .app
        .http
        .post(s.app.url("/gateway/v1/events"))
        .basic_auth(&s.serial, Some(&s.device_token))
        .json(&json!({"type": 310, "value": "1", "ts": 1_763_726_400}));
    send(request).await.expect(200);
    s.measure_n(3).await;
    let got = events_rx.until("the event", |got| !all_items(got).is_empty()).await;
    let event = &all_items(&got)[0];
    assert_eq!(
        common::keys(event),
        [
            "id_event",
            "id_group",
            "source_device",
            "from_device",
            "event_type",
            "event_type_label",
            "event_type_description",
            "occurred_at",
            "value",
            "datatype",
            "event_value_label",
            "event_value_description"
        ]
    );
    assert_eq!(event["event_type"], "310");
    assert_eq!(event["from_device"], 1);
    assert_eq!(event["occurred_at"], 1_763_726_400);
    assert_eq!(event["source_device"], s.device.as_str());
    let got = points_rx.until("the point", |got| !all_items(got).is_empty()).await;
    assert_eq!(values(&all_items(&got)), [3]);
    assert!(
        all_items(&events_rx.requests())
            .iter()
            .all(|e| e.get("id_event").is_some())
    );
}

/// Events are routed as measurements are, by the route table: to the active events webhooks
/// of their group, whether recorded by the gateway path (the service's cached table, reloaded
/// when a webhook changes) or by a caller without the cache (the command log, tools: a table
/// read in the event's transaction), each queued in the transaction that records it.
#[tokio::test]
async fn events_reach_the_active_events_webhooks_of_their_group_whoever_records_them() {
    let s = setup().await;
    let (active_rx, active_url) = Receiver::start(Vec::new()).await;
    let (inactive_rx, inactive_url) = Receiver::start(Vec::new()).await;
    let (points_rx, points_url) = Receiver::start(Vec::new()).await;
    s.webhook(s.hook_body("events", "json", &active_url)).await;
    let mut body = s.hook_body("events", "json", &inactive_url);
    body["is_active"] = json!(false);
    let inactive = s.webhook(body).await;
    s.webhook(s.hook_body("measurements", "json", &points_url)).await;
    let event = |value: &str| {
        s.app
            .http
            .post(s.app.url("/gateway/v1/events"))
            .basic_auth(&s.serial, Some(&s.device_token))
            .json(&json!({"type": 310, "value": value, "ts": 1_763_726_400}))
    };
    let event_values = |got: &[Received]| -> Vec<String> {
        all_items(got)
            .iter()
            .map(|e| {
                e["value"]
                    .as_str()
                    .map_or_else(|| e["value"].to_string(), str::to_string)
            })
            .collect()
    };
    send(event("1")).await.expect(200);
    let recorded = devicecloud_store::events::NewEvent {
        id_group: &s.group,
        source_device: &s.device,
        from_device: Some(0),
        event_type: 213,
        occurred_at: 1_763_726_401,
        value: "2",
        datatype: None,
        value_description: None,
    };
    devicecloud_store::events::insert(&s.app.state.db, &[recorded], devicecloud_store::unix_now())
        .await
        .unwrap();
    let id = inactive["id_webhook"].as_str().unwrap();
    send(
        s.app
            .request(Method::PATCH, &format!("/api/v2/webhook/{id}"), &s.admin)
            .json(&json!({"is_active": true})),
    )
    .await
    .expect(200);
    send(event("3")).await.expect(200);
    let got = active_rx.until("three events", |got| all_items(got).len() >= 3).await;
    assert_eq!(event_values(&got), ["1", "2", "3"]);
    let got = inactive_rx.until("the event", |got| !all_items(got).is_empty()).await;
    assert_eq!(event_values(&got), ["3"], "nothing queued while inactive");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(points_rx.requests().is_empty(), "events go to events webhooks only");
    assert_eq!(event_values(&inactive_rx.requests()), ["3"]);
}

#[tokio::test]
async fn measurements_over_mqtt_reach_the_webhook() {
    use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
    let s = setup().await;
    let (receiver, url) = Receiver::start(Vec::new()).await;
    s.webhook(s.hook_body("measurements", "json", &url)).await;
    let mut options = MqttOptions::new("wh-test", "127.0.0.1", s.app.mqtt_addr.port());
    options.set_credentials(s.serial.clone(), s.device_token.clone());
    let (client, mut events) = AsyncClient::new(options, 16);
    let payload = json!([{"ts": 1_763_726_500, "values": {"4": 21.5}}]).to_string();
    client
        .publish("v1/gateway/measurements", QoS::AtLeastOnce, false, payload)
        .await
        .unwrap();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.poll()).await {
            Ok(Ok(Event::Incoming(Packet::PubAck(_)))) => break,
            Ok(Ok(_)) => {}
            other => panic!("no PUBACK: {other:?}"),
        }
    }
    let got = receiver.until("the point", |got| !all_items(got).is_empty()).await;
    let item = &all_items(&got)[0];
    assert_eq!(item["value"], 21.5);
    assert_eq!(item["datatype"], 4);
    assert_eq!(item["timestamp_seconds"], 1_763_726_500);
}

#[tokio::test]
async fn inactive_and_deleted_webhooks_get_nothing() {
    let s = setup().await;
    let (receiver, url) = Receiver::start(Vec::new()).await;
    let mut body = s.hook_body("measurements", "json", &url);
    body["is_active"] = json!(false);
    let created = s.webhook(body).await;
    assert_eq!(created["is_active"], 0);
    let id = created["id_webhook"].as_str().unwrap();
    s.measure_n(1).await;
    let patch = send(
        s.app
            .request(Method::PATCH, &format!("/api/v2/webhook/{id}"), &s.admin)
            .json(&json!({"is_active": true})),
    )
    .await
    .expect(200)
    .json();
    assert_eq!(patch["is_active"], 1);
    s.measure_n(2).await;
    let got = receiver.until("the point", |got| !all_items(got).is_empty()).await;
    assert_eq!(values(&all_items(&got)), [2], "nothing queued while inactive");
    send(
        s.app
            .request(Method::DELETE, &format!("/api/v2/webhook/{id}"), &s.admin),
    )
    .await
    .expect(204);
    s.measure_n(3).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(values(&all_items(&receiver.requests())), [2]);
    let gone = send(s.app.get(&format!("/api/v2/webhook/{id}"), &s.admin)).await;
    assert_eq!(gone.status, 404);
    assert_error(&gone.json(), 404);
}

#[tokio::test]
async fn rights_follow_the_group_roles() {
    let s = setup().await;
    let app = &s.app;
    let created = s
        .webhook(s.hook_body("measurements", "json", "http://127.0.0.1:9/hook"))
        .await;
    let id = created["id_webhook"].as_str().unwrap();
    let (viewer_id, viewer) = app.user().await;
    let (operator_id, operator) = app.user().await;
    let (manager_id, manager) = app.user().await;
    let (_, stranger) = app.user().await;
    app.grant(&s.admin, &s.group, &viewer_id, "viewer").await;
    app.grant(&s.admin, &s.group, &operator_id, "operator").await;
    app.grant(&s.admin, &s.group, &manager_id, "manager").await;
    let body = s.hook_body("events", "ndjson", "http://127.0.0.1:9/other");

    for token in [&viewer, &operator] {
        let reply = send(app.request(Method::POST, "/api/v2/webhook", token).json(&body)).await;
        assert_eq!(reply.status, 401, "{}", reply.text);
        assert_error(&reply.json(), 401);
        let reply = send(
            app.request(Method::PATCH, &format!("/api/v2/webhook/{id}"), token)
                .json(&json!({"label": "x"})),
        )
        .await;
        assert_eq!(reply.status, 401);
        let reply = send(app.request(Method::DELETE, &format!("/api/v2/webhook/{id}"), token)).await;
        assert_eq!(reply.status, 401);
        // Viewers read everything in the group (docs/api.md, "Rights").
        send(app.get(&format!("/api/v2/webhook/{id}"), token)).await.expect(200);
        send(app.get(&format!("/api/v2/webhook/{id}/attempt"), token))
            .await
            .expect(200);
    }
    // A group the caller cannot see: 422 on create, 404 on the record, absent from the list.
    let reply = send(app.request(Method::POST, "/api/v2/webhook", &stranger).json(&body)).await;
    assert_eq!(reply.status, 422);
    assert_eq!(
        reply.json(),
        json!([{"field": "id_group", "message": "Group not found."}])
    );
    for method in [Method::GET, Method::PATCH, Method::DELETE] {
        let reply = send(
            app.request(method, &format!("/api/v2/webhook/{id}"), &stranger)
                .json(&json!({})),
        )
        .await;
        assert_eq!(reply.status, 404, "{}", reply.text);
        assert_error(&reply.json(), 404);
    }
    let list = send(app.get("/api/v2/webhook", &stranger)).await.expect(200).json();
    assert_eq!(list["items"], json!([]));
    let list = send(app.get("/api/v2/webhook", &viewer)).await.expect(200).json();
    assert_eq!(list["items"].as_array().unwrap().len(), 1);

    // A manager creates, edits and deletes.
    let reply = send(app.request(Method::POST, "/api/v2/webhook", &manager).json(&body))
        .await
        .expect(201);
    let location = reply.header("location").unwrap().to_string();
    let made = reply.json();
    assert!(location.ends_with(&format!("/api/v2/webhook/{}", made["id_webhook"].as_str().unwrap())));
    let patched = send(
        app.request(
            Method::PATCH,
            &format!("/api/v2/webhook/{}", made["id_webhook"].as_str().unwrap()),
            &manager,
        )
        .json(&json!({"label": "renamed", "authorization": null})),
    )
    .await
    .expect(200)
    .json();
    assert_eq!(patched["label"], "renamed");
    assert_eq!(patched["authorization"], Value::Null);
    send(app.request(
        Method::DELETE,
        &format!("/api/v2/webhook/{}", made["id_webhook"].as_str().unwrap()),
        &manager,
    ))
    .await
    .expect(204);
    let anonymous = send(app.http.get(app.url("/api/v2/webhook"))).await;
    common::assert_invalid_credentials(&anonymous);
}

#[tokio::test]
async fn the_authorization_is_masked_and_the_secret_shown_once() {
    let s = setup().await;
    let created = s
        .webhook(s.hook_body("measurements", "json", "http://127.0.0.1:9/hook"))
        .await;
    let id = created["id_webhook"].as_str().unwrap();
    assert_eq!(created["authorization"], "Bearer ****OKEN");
    assert!(created["secret"].is_string());
    let one = send(s.app.get(&format!("/api/v2/webhook/{id}"), &s.admin))
        .await
        .expect(200);
    let list = send(
        s.app
            .get("/api/v2/webhook?filter[forwarding_type]=measurements", &s.admin),
    )
    .await
    .expect(200);
    for text in [&one.text, &list.text] {
        assert!(!text.contains("0123456789abcdef"), "authorization leaked: {text}");
        assert!(
            !text.contains(created["secret"].as_str().unwrap()),
            "secret leaked: {text}"
        );
    }
    let one = one.json();
    assert_eq!(one["authorization"], "Bearer ****OKEN");
    assert!(one.get("secret").is_none());
    assert_eq!(list.json()["_meta"]["totalCount"], 1);
    assert_eq!(list.header("x-pagination-total-count"), Some("1"));
    let none = send(s.app.get("/api/v2/webhook?filter[forwarding_type]=events", &s.admin))
        .await
        .expect(200)
        .json();
    assert_eq!(none["items"], json!([]));
}

#[tokio::test]
async fn invalid_fields_answer_422_with_the_field_list() {
    let s = setup().await;
    let app = &s.app;
    let post = |body: Value| send(app.request(Method::POST, "/api/v2/webhook", &s.admin).json(&body));
    let reply = post(json!({})).await;
    assert_eq!(reply.status, 422);
    let fields: Vec<Value> = reply
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].clone())
        .collect();
    assert_eq!(
        fields,
        [
            json!("id_group"),
            json!("label"),
            json!("forwarding_type"),
            json!("formatter"),
            json!("url")
        ]
    );
    let reply = post(
        json!({"id_group": s.group, "label": "x", "forwarding_type": "logs", "formatter": "xml",
                           "url": "ftp://example.com/", "authorization": "Bearer a\nb", "is_active": "maybe"}),
    )
    .await;
    assert_eq!(reply.status, 422);
    assert_eq!(
        reply.json(),
        json!([
            {"field": "forwarding_type", "message": "Forwarding Type must be one of measurements, events."},
            {"field": "formatter", "message": "Formatter must be one of json, ndjson."},
            {"field": "authorization", "message": "Authorization must be printable text without line breaks."},
            {"field": "is_active", "message": "Is Active must be either \"1\" or \"0\"."}
        ])
    );
    let reply = post(
        json!({"id_group": s.group, "label": "x", "forwarding_type": "events", "formatter": "json",
                           "url": "ftp://example.com/"}),
    )
    .await;
    assert_eq!(reply.status, 422);
    assert_eq!(reply.json()[0]["field"], "url");
    let reply = post(json!({"id_group": 5, "label": ["x"]})).await;
    assert_eq!(reply.status, 422);
    let reply = send(
        app.request(Method::POST, "/api/v2/webhook", &s.admin)
            .header("content-type", "application/json")
            .body("{not json"),
    )
    .await;
    assert_eq!(reply.status, 400);
    assert_error(&reply.json(), 400);
    let created = s
        .webhook(s.hook_body("measurements", "json", "http://127.0.0.1:9/hook"))
        .await;
    let id = created["id_webhook"].as_str().unwrap();
    let reply = send(
        app.request(Method::PATCH, &format!("/api/v2/webhook/{id}"), &s.admin)
            .json(&json!({"forwarding_type": "events", "label": ""})),
    )
    .await;
    assert_eq!(reply.status, 422);
    assert_eq!(
        reply.json(),
        json!([
            {"field": "label", "message": "Label cannot be blank."},
            {"field": "forwarding_type", "message": "Forwarding Type cannot be changed."}
        ])
    );
    let reply = send(app.request(Method::PUT, "/api/v2/webhook", &s.admin)).await;
    assert_eq!(reply.status, 405);
}

#[tokio::test]
async fn formatters_are_listed() {
    let app = TestApp::spawn().await;
    let (_, token) = app.user().await;
    let list = send(app.get("/api/v2/webhook-formatter", &token))
        .await
        .expect(200)
        .json();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["json", "ndjson"]);
    assert!(list["items"][0]["description"].as_str().unwrap().contains("items"));
    assert_eq!(list["_meta"]["totalCount"], 2);
}

#[tokio::test]
async fn webhook_collections_list_their_expand_options() {
    let app = TestApp::spawn_with(Settings {
        webhook_allow_private: true,
        ..Settings::default()
    })
    .await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "hooks").await;
    let body = json!({"label": "h", "id_group": group, "forwarding_type": "measurements", "formatter": "json", "url": "http://127.0.0.1:9/hook"});
    let created = send(app.request(Method::POST, "/api/v2/webhook", &admin).json(&body))
        .await
        .expect(201)
        .json();
    let id = created["id_webhook"].as_str().unwrap();
    for (path, expand) in [
        ("/api/v2/webhook".to_string(), json!(["backlog"])),
        (format!("/api/v2/webhook/{id}/attempt"), json!([])),
        ("/api/v2/webhook-formatter".to_string(), json!([])),
    ] {
        let page = send(app.get(&path, &admin)).await.expect(200).json();
        assert_eq!(page["expand"], expand, "{path}: {page}");
    }
}

#[tokio::test]
async fn many_points_arrive_complete_in_order_in_batches_that_split_queued_rows() {
    // Batches of 700 records cut rows of 500 queued points: most batches end inside a row,
    // which keeps the rest for the next batch.
    let s = setup_with(Settings {
        webhook_batch_max: 700,
        ..Settings::default()
    })
    .await;
    let (receiver, url) = Receiver::start(vec![]).await;
    let created = s.webhook(s.hook_body("measurements", "ndjson", &url)).await;
    let secret = created["secret"].as_str().unwrap().to_string();
    let (messages, per_message) = (40, 500);
    for m in 0..messages {
        let items: Vec<Value> = (0..per_message)
            .map(|i| {
                let n = m * per_message + i;
                json!({"ts": 1_763_726_400 + n, "values": {"1": n}})
            })
            .collect();
        s.measure(Value::Array(items)).await;
    }
    let total = (messages * per_message) as usize;
    let got = receiver.until("every point", |got| all_items(got).len() >= total).await;
    for r in &got {
        assert_signed(r, &secret);
        assert!(
            items(r).len() <= 700,
            "a batch over webhook_batch_max: {}",
            items(r).len()
        );
    }
    assert_eq!(
        values(&all_items(&got)),
        (0..total as i64).collect::<Vec<_>>(),
        "every point once, in the order stored"
    );
    assert!(got.len() >= total / 700, "{} requests", got.len());
    let view = s.view(created["id_webhook"].as_str().unwrap()).await;
    assert_eq!(view["backlog"]["queued_items"], 0, "{view}");
}
