//! The HTTP gateway endpoint: Basic authentication, the same payloads and pipeline as MQTT,
//! 200 after commit, the specification's error body for bad input.

mod common;

use common::{TestApp, assert_error, send};
use devicecloud_engine::metrics::{self, MESSAGES, Outcome, POINTS};
use devicecloud_protocol::RejectReason;
use devicecloud_store::Db;
use reqwest::Method;
use serde_json::json;

async fn count(db: &Db, sql: &'static str, bind: &str) -> i64 {
    match db {
        Db::Sqlite(p, ..) => sqlx::query_scalar(sql).bind(bind).fetch_one(p).await.unwrap(),
        Db::Postgres(p) => sqlx::query_scalar(sql).bind(bind).fetch_one(p).await.unwrap(),
    }
}

#[tokio::test]
async fn gateways_post_measurements_and_events_over_http() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    let body = json!({"id_group": group, "serial_hardware": "GW-HTTP", "kind": "CORE"});
    let created = send(app.request(Method::POST, "/api/v2/physical-device", &admin).json(&body))
        .await
        .json();
    // Every message that passed authentication ends counted once (this test is alone in its
    // process's counting).
    let outcomes = [
        (MESSAGES, Outcome::Stored, 2),
        (MESSAGES, Outcome::Rejected(RejectReason::BadValue), 1),
        (MESSAGES, Outcome::Rejected(RejectReason::NotJson), 1),
        (POINTS, Outcome::Stored, 3),
    ];
    let counted = |family, outcome| metrics::read(&metrics::handle().render(), family, outcome);
    let before: Vec<u64> = outcomes.iter().map(|(f, o, _)| counted(f, *o)).collect();
    let (id, token) = (
        created["id_physical_device"].as_str().unwrap(),
        created["device_token"].as_str().unwrap(),
    );
    let post = |path: &str, user: &str, password: &str, body: serde_json::Value| {
        app.http
            .post(app.url(path))
            .basic_auth(user, Some(password))
            .json(&body)
    };

    let reply = send(post(
        "/gateway/v1/measurements",
        "GW-HTTP",
        token,
        json!([{"values": {"1": 1.5, "2": 3}}, {"ts": 1763726400.5, "values": {"1": 2}}]),
    ))
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        reply.json(),
        json!({"status": 200, "payload": {"result": "success", "points": 3}})
    );
    let stored = count(&app.state.db, "SELECT COUNT(*) FROM raw_points r JOIN containers c ON c.container_key = r.container_key WHERE c.source_device = $1", id).await;
    assert_eq!(stored, 3);

    let reply = send(post(
        "/gateway/v1/events",
        "GW-HTTP",
        token,
        json!({"type": 310, "value": "1"}),
    ))
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json()["payload"]["events"], 1);

    let reply = send(post(
        "/gateway/v1/measurements",
        "GW-HTTP",
        token,
        json!({"values": {"1": "warm"}}),
    ))
    .await;
    assert_eq!(reply.status, 400);
    assert_error(&reply.json(), 400);
    let rejected = count(
        &app.state.db,
        "SELECT COUNT(*) FROM events WHERE event_type = 212 AND source_device = $1",
        id,
    )
    .await;
    assert_eq!(rejected, 1);
    let reply = send(
        app.http
            .post(app.url("/gateway/v1/measurements"))
            .basic_auth("GW-HTTP", Some(token))
            .body("{oops"),
    )
    .await;
    assert_eq!(reply.status, 400);

    for (user, password) in [("GW-HTTP", "wrong"), ("NOPE", "x")] {
        let reply = send(post(
            "/gateway/v1/measurements",
            user,
            password,
            json!({"values": {"1": 1}}),
        ))
        .await;
        assert_eq!(reply.status, 401);
        assert_eq!(reply.header("www-authenticate"), Some("Basic realm=\"gateway\""));
        assert_error(&reply.json(), 401);
    }
    let reply = send(app.http.post(app.url("/gateway/v1/measurements")).json(&json!({}))).await;
    assert_eq!(reply.status, 401);
    for ((family, outcome, more), before) in outcomes.iter().zip(before) {
        assert_eq!(counted(family, *outcome), before + more, "{family} {outcome:?}");
    }

    assert_eq!(
        send(app.request(Method::DELETE, &format!("/api/v2/physical-device/{id}"), &admin))
            .await
            .status,
        204
    );
    let reply = send(post(
        "/gateway/v1/measurements",
        "GW-HTTP",
        token,
        json!({"values": {"1": 1}}),
    ))
    .await;
    assert_eq!(reply.status, 401);
}
