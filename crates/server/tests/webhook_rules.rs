//! The rules that keep webhooks safe and bounded (docs/api.md, "Webhooks"): at most
//! `webhooks_per_group` per group, receivers on public addresses only, attempt errors as
//! categories, failing webhooks set inactive (event 214) and started afresh when activated, and
//! credentials stored sealed under the secret key file, over real HTTP with real receivers.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use common::webhook_receiver::*;
use common::{TestApp, send};
use devicecloud_server::Settings;
use reqwest::Method;
use serde_json::{Value, json};

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
    let refused = devicecloud_server::Running::start(app.running.pools.writer.clone(), settings(), listeners);
    let message = refused.err().expect("a malformed key file stops the start").to_string();
    assert!(message.contains(&key_file.display().to_string()), "{message}");
}
