//! Webhooks end to end: data sent by a gateway (HTTP gateway endpoint and MQTT) reaches a real
//! HTTP receiver on loopback, signed, in order, batched, retried after 500s and refused
//! connections with the same delivery id and body; the webhook API's rights, validation,
//! masking and attempt log.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use common::{TestApp, assert_error, send};
use devicecloud_server::Settings;
use hmac::{KeyInit, Mac};
use reqwest::Method;
use serde_json::{Value, json};

/// One request the receiver got.
#[derive(Clone, Debug)]
struct Received {
    headers: HeaderMap,
    body: Bytes,
}

/// A receiver on loopback: records every request, answers the queued statuses first, then 200.
#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    answers: Arc<Mutex<Vec<u16>>>,
}

/// The path receivers of this test process listen on. A port is free again once a test lets
/// go of it, and a service of another test process may still deliver to it (the refused
/// connection test lets its port go on purpose): such requests use their own process's path
/// and are answered 404 without being recorded.
fn hook_path() -> String {
    format!("/hook/{}", std::process::id())
}

impl Receiver {
    async fn start(answers: Vec<u16>) -> (Receiver, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}{}", listener.local_addr().unwrap(), hook_path());
        (Receiver::serve(listener, answers), url)
    }

    fn serve(listener: tokio::net::TcpListener, answers: Vec<u16>) -> Receiver {
        let receiver = Receiver {
            got: Arc::default(),
            answers: Arc::new(Mutex::new(answers)),
        };
        let app = axum::Router::new()
            .route(&hook_path(), axum::routing::post(receive))
            .with_state(receiver.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        receiver
    }

    fn requests(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// Waits until `done` holds for the requests received (at most 30 s).
    async fn until(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        for _ in 0..600 {
            let got = self.requests();
            if done(&got) {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "receiver: {what} did not happen in 30 s; got {:?}",
            self.requests().len()
        );
    }
}

async fn receive(State(receiver): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    receiver.got.lock().unwrap().push(Received { headers, body });
    let mut answers = receiver.answers.lock().unwrap();
    let status = if answers.is_empty() { 200 } else { answers.remove(0) };
    StatusCode::from_u16(status).unwrap()
}

fn header<'a>(r: &'a Received, name: &str) -> &'a str {
    r.headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

/// The records of a request: `items` of a json body, the lines of an ndjson body.
fn items(r: &Received) -> Vec<Value> {
    if header(r, "content-type") == "application/x-ndjson" {
        let text = std::str::from_utf8(&r.body).unwrap();
        assert!(text.ends_with('\n'), "every ndjson line ends with a newline");
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    } else {
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        body["items"].as_array().unwrap().clone()
    }
}

fn all_items(got: &[Received]) -> Vec<Value> {
    got.iter().flat_map(items).collect()
}

/// Checks the signature the way a receiver does: HMAC-SHA256 of the body with the secret.
fn assert_signed(r: &Received, secret: &str) {
    let mut mac = hmac::Hmac::<sha2_hmac::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(&r.body);
    let expected = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    assert_eq!(header(r, "x-devicecloud-signature"), expected);
}

/// A service that allows loopback receivers, with its delivery worker running.
struct Setup {
    app: TestApp,
    admin: String,
    group: String,
    serial: String,
    device: String,
    device_token: String,
}

async fn setup() -> Setup {
    setup_with(Settings::default()).await
}

/// [`setup`] with other settings (private addresses always allowed: receivers are on loopback).
async fn setup_with(settings: Settings) -> Setup {
    let settings = Settings {
        webhook_allow_private: true,
        ..settings
    };
    let app = TestApp::spawn_with(settings).await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    let serial = format!("GW-{}", devicecloud_store::new_id());
    let body = json!({"id_group": group, "serial_hardware": serial, "kind": "CORE"});
    let created = send(app.request(Method::POST, "/api/v2/physical-device", &admin).json(&body))
        .await
        .expect(201)
        .json();
    Setup {
        device: created["id_physical_device"].as_str().unwrap().into(),
        device_token: created["device_token"].as_str().unwrap().into(),
        app,
        admin,
        group,
        serial,
    }
}

impl Setup {
    /// Creates a webhook as the administrator; returns the creation answer.
    async fn webhook(&self, body: Value) -> Value {
        send(
            self.app
                .request(Method::POST, "/api/v2/webhook", &self.admin)
                .json(&body),
        )
        .await
        .expect(201)
        .json()
    }

    fn hook_body(&self, kind: &str, formatter: &str, url: &str) -> Value {
        json!({"label": "to the plant", "id_group": self.group, "forwarding_type": kind,
               "formatter": formatter, "url": url, "authorization": "Bearer 0123456789abcdef-TOKEN"})
    }

    /// Sends measurements through the HTTP gateway endpoint and expects them stored.
    async fn measure(&self, payload: Value) {
        let request = self
            .app
            .http
            .post(self.app.url("/gateway/v1/measurements"))
            .basic_auth(&self.serial, Some(&self.device_token))
            .json(&payload);
        send(request).await.expect(200);
    }

    /// One measurement of datatype 1 with the value `n` at second 1_763_726_400 + n.
    async fn measure_n(&self, n: i64) {
        self.measure(json!([{"ts": 1_763_726_400 + n, "values": {"1": n}}]))
            .await;
    }

    async fn attempts(&self, id: &str, query: &str) -> Value {
        send(
            self.app
                .get(&format!("/api/v2/webhook/{id}/attempt{query}"), &self.admin),
        )
        .await
        .expect(200)
        .json()
    }

    /// The attempt log once it holds at least `count` attempts (10 s at most): the receiver
    /// records a request before answering it, and the attempt is logged on the answer.
    async fn logged_attempts(&self, id: &str, query: &str, count: usize) -> Value {
        for _ in 0..200 {
            let log = self.attempts(id, query).await;
            if log["items"].as_array().unwrap().len() >= count {
                return log;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("fewer than {count} attempts logged after 10 s");
    }
}

fn values(items: &[Value]) -> Vec<i64> {
    items.iter().map(|i| i["value"].as_f64().unwrap() as i64).collect()
}

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

/// One URL per kind of address the rule refuses (docs/api.md, "Webhooks"), literal or by name.
const REFUSED_URLS: [&str; 24] = [
    "http://127.0.0.1:8080/hook",
    "http://localhost/hook",
    "http://10.0.0.8/hook",
    "http://172.16.5.4/hook",
    "http://192.168.1.1/hook",
    "http://169.254.169.254/latest/meta-data",
    "http://100.64.0.1/hook",
    "http://0.0.0.0/hook",
    "http://192.0.0.1/hook",
    "http://192.0.2.10/hook",
    "http://198.18.0.1/hook",
    "http://240.0.0.1/hook",
    "http://224.0.0.1/hook",
    "http://[::1]/hook",
    "http://[fd00::1]/hook",
    "http://[fe80::1]/hook",
    "http://[fec0::1]/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://[::7f00:1]/hook",
    "http://[64:ff9b::a9fe:a9fe]/hook",
    "http://[64:ff9b:1::1]/hook",
    "http://[2002:7f00:1::1]/hook",
    "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/hook",
    "http://[2001:db8::1]/hook",
];

const NOT_PUBLIC: &str = "Url must resolve only to public internet addresses (not loopback, private, link-local, shared, reserved or documentation ranges).";

#[tokio::test]
async fn addresses_that_are_not_public_are_refused_on_create_and_update() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    for url in REFUSED_URLS {
        let body =
            json!({"label": "x", "id_group": group, "forwarding_type": "events", "formatter": "json", "url": url});
        let reply = send(app.request(Method::POST, "/api/v2/webhook", &admin).json(&body)).await;
        assert_eq!(reply.status, 422, "{url}: {}", reply.text);
        assert_eq!(reply.json(), json!([{"field": "url", "message": NOT_PUBLIC}]), "{url}");
    }
    // A public literal passes; changing it to a refused one does not.
    let body = json!({"label": "x", "id_group": group, "forwarding_type": "events", "formatter": "json",
                      "url": "http://93.184.216.34/hook"});
    let created = send(app.request(Method::POST, "/api/v2/webhook", &admin).json(&body))
        .await
        .expect(201)
        .json();
    let id = created["id_webhook"].as_str().unwrap();
    for url in ["http://127.0.0.1/hook", "http://[64:ff9b::a00:1]/"] {
        let reply = send(
            app.request(Method::PATCH, &format!("/api/v2/webhook/{id}"), &admin)
                .json(&json!({"url": url})),
        )
        .await;
        assert_eq!(reply.status, 422, "{url}: {}", reply.text);
        assert_eq!(reply.json(), json!([{"field": "url", "message": NOT_PUBLIC}]));
    }
    let unresolved = json!({"label": "x", "id_group": group, "forwarding_type": "events", "formatter": "json",
                            "url": "http://no-such-host.invalid/hook"});
    let reply = send(app.request(Method::POST, "/api/v2/webhook", &admin).json(&unresolved)).await;
    assert_eq!(reply.status, 422, "{}", reply.text);
    assert_eq!(reply.json()[0]["message"], "Url host cannot be resolved.");
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

impl Setup {
    async fn view(&self, id: &str) -> Value {
        send(
            self.app
                .get(&format!("/api/v2/webhook/{id}?expand=backlog"), &self.admin),
        )
        .await
        .expect(200)
        .json()
    }

    /// The webhook once the service has set it inactive (10 s at most).
    async fn until_inactive(&self, id: &str) -> Value {
        for _ in 0..200 {
            let view = self.view(id).await;
            if view["is_active"] == 0 {
                return view;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("webhook {id} still active after 10 s");
    }

    /// The events 214 recorded on a webhook, through the event endpoint.
    async fn disabled_events(&self, id: &str) -> Vec<Value> {
        let path = format!("/api/v2/event?filter[event_type]=214&filter[source_device]={id}");
        let page = send(self.app.get(&path, &self.admin)).await.expect(200).json();
        page["items"].as_array().unwrap().clone()
    }

    async fn patch(&self, id: &str, body: Value) -> Value {
        send(
            self.app
                .request(Method::PATCH, &format!("/api/v2/webhook/{id}"), &self.admin)
                .json(&body),
        )
        .await
        .expect(200)
        .json()
    }
}

#[tokio::test]
async fn a_webhook_failing_for_the_whole_retry_window_is_set_inactive_and_starts_afresh_when_activated() {
    let s = setup_with(Settings {
        webhook_retry_window: Duration::ZERO,
        ..Settings::default()
    })
    .await;
    let (receiver, url) = Receiver::start(vec![500]).await;
    let created = s.webhook(s.hook_body("measurements", "json", &url)).await;
    assert_eq!(created["disabled_reason"], Value::Null);
    assert_eq!(created["disabled_at"], Value::Null);
    let id = created["id_webhook"].as_str().unwrap();
    // An events webhook of the group hears of it too.
    let (events_rx, events_url) = Receiver::start(Vec::new()).await;
    s.webhook(s.hook_body("events", "json", &events_url)).await;

    s.measure_n(1).await;
    receiver.until("the failed try", |got| !got.is_empty()).await;
    let view = s.until_inactive(id).await;
    assert_eq!(view["disabled_reason"], "retry_window");
    assert!(view["disabled_at"].as_i64().unwrap() >= created["created_at"].as_i64().unwrap());
    assert_eq!(
        view["backlog"],
        json!({"queued_items": 0, "pending_deliveries": 0, "failed_deliveries": 1})
    );
    let log = s.logged_attempts(id, "", 1).await;
    assert_eq!(log["items"][0]["error"], "status");
    assert_eq!(log["items"][0]["status_code"], 500);

    let events = s.disabled_events(id).await;
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event["event_type"], "214");
    assert_eq!(event["value"], "retry_window");
    assert_eq!(event["from_device"], 0);
    assert_eq!(event["id_group"], s.group.as_str());
    assert_eq!(event["event_type_label"], "Webhook disabled");
    assert_eq!(event["event_value_label"], "Failing for the retry window");
    let got = events_rx
        .until("event 214", |got| {
            all_items(got).iter().any(|e| e["event_type"] == "214")
        })
        .await;
    assert!(all_items(&got).iter().any(|e| e["source_device"] == id));

    // Inactive: nothing is queued or sent.
    s.measure_n(2).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(receiver.requests().len(), 1);
    let metrics = send(s.app.http.get(s.app.url("/metrics"))).await.expect(200).text;
    assert!(
        metrics.contains("devicecloud_webhooks_disabled_total{reason=\"retry_window\"}"),
        "{metrics}"
    );

    // Activated again: the record is cleared and only new data goes out.
    let patched = s.patch(id, json!({"is_active": true})).await;
    assert_eq!(patched["is_active"], 1);
    assert_eq!(patched["disabled_reason"], Value::Null);
    assert_eq!(patched["disabled_at"], Value::Null);
    s.measure_n(3).await;
    let got = receiver.until("the new point", |got| got.len() >= 2).await;
    assert_eq!(values(&items(&got[1])), [3], "no old backlog after activation");
    s.logged_attempts(id, "", 2).await;

    // Retention: attempts and failed batches older than the cut-off are pruned.
    devicecloud_store::webhooks::prune(&s.app.state.db, devicecloud_store::unix_now() + 10)
        .await
        .unwrap();
    let log = s.attempts(id, "").await;
    assert_eq!(log["items"], json!([]));
    assert_eq!(s.view(id).await["backlog"]["failed_deliveries"], 0);
}

#[tokio::test]
async fn a_webhook_whose_backlog_passes_the_limit_is_set_inactive_with_its_queue_dropped() {
    let mut settings = Settings::default();
    settings.limits.webhook_backlog_max = 5;
    let s = setup_with(settings).await;
    let (receiver, url) = Receiver::start(vec![500; 100]).await;
    let created = s.webhook(s.hook_body("measurements", "ndjson", &url)).await;
    let id = created["id_webhook"].as_str().unwrap();
    s.measure_n(0).await;
    receiver.until("the first try", |got| !got.is_empty()).await;
    for n in 1..=10 {
        s.measure_n(n).await;
    }
    let view = s.until_inactive(id).await;
    assert_eq!(view["disabled_reason"], "backlog");
    assert_eq!(
        view["backlog"],
        json!({"queued_items": 0, "pending_deliveries": 0, "failed_deliveries": 0})
    );
    let events = s.disabled_events(id).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["value"], "backlog");
    assert_eq!(events[0]["event_value_label"], "Backlog too large");
    // The first batch and the records queued behind it, at least the limit's worth.
    let description = events[0]["event_value_description"].as_str().unwrap();
    let dropped: u64 = description
        .strip_suffix(" queued records dropped")
        .unwrap()
        .parse()
        .unwrap();
    assert!((6..=11).contains(&dropped), "{description}");
    let metrics = send(s.app.http.get(s.app.url("/metrics"))).await.expect(200).text;
    assert!(metrics.contains("devicecloud_webhooks_disabled_total{reason=\"backlog\"}"));
    assert!(metrics.contains("devicecloud_webhook_items_total{outcome=\"dropped\"}"));
}

#[tokio::test]
async fn a_group_holds_at_most_webhooks_per_group() {
    let mut settings = Settings::default();
    settings.limits.webhooks_per_group = 2;
    let s = setup_with(settings).await;
    let url = "http://127.0.0.1:9/hook";
    let first = s.webhook(s.hook_body("measurements", "json", url)).await;
    let mut inactive = s.hook_body("events", "json", url);
    inactive["is_active"] = json!(false);
    s.webhook(inactive).await;
    let reply = send(
        s.app
            .request(Method::POST, "/api/v2/webhook", &s.admin)
            .json(&s.hook_body("events", "ndjson", url)),
    )
    .await;
    assert_eq!(reply.status, 422, "{}", reply.text);
    assert_eq!(
        reply.json(),
        json!([{"field": "id_group", "message": "The group already has 2 webhooks, the most it may have."}])
    );
    // Another group has room; a deleted webhook makes room.
    let other = s.app.create_group(&s.admin, "Other").await;
    let mut body = s.hook_body("events", "json", url);
    body["id_group"] = json!(other);
    s.webhook(body).await;
    let id = first["id_webhook"].as_str().unwrap();
    send(
        s.app
            .request(Method::DELETE, &format!("/api/v2/webhook/{id}"), &s.admin),
    )
    .await
    .expect(204);
    s.webhook(s.hook_body("events", "json", url)).await;
}

/// A receiver that answers after `delay`.
async fn slow_receiver(delay: Duration) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}{}", listener.local_addr().unwrap(), hook_path());
    let app = axum::Router::new().route(
        &hook_path(),
        axum::routing::post(move || async move {
            tokio::time::sleep(delay).await;
            StatusCode::OK
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test]
async fn failed_attempts_are_logged_by_category_only() {
    let s = setup_with(Settings {
        webhook_timeout: Duration::from_millis(500),
        ..Settings::default()
    })
    .await;
    let slow = slow_receiver(Duration::from_secs(5)).await;
    let (_plain, plain_url) = Receiver::start(Vec::new()).await;
    let cases = [
        (slow, "timeout"),
        (plain_url.replace("http://", "https://"), "tls"),
        ("http://no-such-host.invalid/hook".to_string(), "dns"),
    ];
    let mut ids = Vec::new();
    for (url, _) in &cases {
        let created = s.webhook(s.hook_body("measurements", "json", url)).await;
        ids.push(created["id_webhook"].as_str().unwrap().to_string());
    }
    s.measure_n(1).await;
    for ((url, expected), id) in cases.iter().zip(&ids) {
        let log = s.logged_attempts(id, "", 1).await;
        let attempt = &log["items"][0];
        assert_eq!(attempt["error"], *expected, "{url}: {attempt}");
        assert_eq!(attempt["status_code"], Value::Null, "{url}");
    }
}

#[tokio::test]
async fn credentials_are_stored_sealed_and_survive_a_restart_with_the_same_key_file() {
    let s = setup().await;
    let key_file = s.app.dir().join("secret.key");
    let settings = || Settings {
        webhook_allow_private: true,
        secret_key_file: Some(key_file.clone()),
        ..Settings::default()
    };
    // The service as `serve` runs it: with a key file, made on first start.
    let app = s.app.restart(settings()).await;
    assert!(key_file.exists());
    let admin = s.admin.clone();
    let (receiver, url) = Receiver::start(Vec::new()).await;
    let body = json!({"label": "sealed", "id_group": s.group, "forwarding_type": "measurements",
                      "formatter": "json", "url": url, "authorization": "Bearer 0123456789abcdef-TOKEN"});
    let created = send(app.request(Method::POST, "/api/v2/webhook", &admin).json(&body))
        .await
        .expect(201)
        .json();
    let secret = created["secret"].as_str().unwrap().to_string();
    let id = created["id_webhook"].as_str().unwrap().to_string();
    let stored = devicecloud_store::webhooks::stored_secrets(&app.state.db)
        .await
        .unwrap();
    let (_, stored_secret, stored_authorization) = stored.iter().find(|(i, _, _)| *i == id).unwrap().clone();
    let stored_authorization = stored_authorization.unwrap();
    assert!(!stored_secret.contains(&secret), "{stored_secret}");
    assert!(
        !stored_authorization.contains("0123456789abcdef"),
        "{stored_authorization}"
    );

    // A row an older version wrote in clear text is sealed at the next start.
    devicecloud_store::webhooks::replace_secrets(
        &app.state.db,
        &id,
        (&stored_secret, Some(&stored_authorization)),
        (&secret, Some("Bearer 0123456789abcdef-TOKEN")),
    )
    .await
    .unwrap();
    let app = app.restart(settings()).await;
    let mut sealed = false;
    for _ in 0..100 {
        let stored = devicecloud_store::webhooks::stored_secrets(&app.state.db)
            .await
            .unwrap();
        let (_, now_secret, now_authorization) = stored.iter().find(|(i, _, _)| *i == id).unwrap().clone();
        if now_secret != secret && now_authorization.as_deref() != Some("Bearer 0123456789abcdef-TOKEN") {
            assert!(!now_secret.contains(&secret));
            sealed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(sealed, "the clear row was not sealed at start");

    // Deliveries are signed with the secret shown at creation, with the authorization in full.
    let device_token = s.device_token.clone();
    let request = app
        .http
        .post(app.url("/gateway/v1/measurements"))
        .basic_auth(&s.serial, Some(&device_token))
        .json(&json!([{"ts": 1_763_726_400, "values": {"1": 5}}]));
    send(request).await.expect(200);
    let got = receiver.until("the point", |got| !got.is_empty()).await;
    assert_signed(&got[0], &secret);
    assert_eq!(header(&got[0], "authorization"), "Bearer 0123456789abcdef-TOKEN");
    let one = send(app.get(&format!("/api/v2/webhook/{id}"), &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(one["authorization"], "Bearer ****OKEN");

    // A key file that is not a key stops the start, naming the file.
    std::fs::write(&key_file, "not a key").unwrap();
    let listeners = devicecloud_server::Listeners {
        http: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        mqtt: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        mqtts: None,
    };
    let refused = devicecloud_server::Running::start(app.state.writer.clone(), settings(), listeners);
    let message = refused.err().expect("a malformed key file stops the start").to_string();
    assert!(message.contains(&key_file.display().to_string()), "{message}");
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
