//! The rate limit per account on `/api/v2/` (docs/operations.md, "Limits"; docs/api.md,
//! "Authentication"): Yii2's `X-Rate-Limit-*` headers on every authenticated answer, 429 with
//! `Retry-After` past the limit, each account counted on its own.

mod common;

use std::time::Duration;

use common::{Reply, TestApp, send};
use devicecloud_engine::settings::RateLimit;
use devicecloud_server::Settings;
use serde_json::json;

fn limited(requests: u32, seconds: u64) -> Settings {
    Settings {
        rate_limit: Some(RateLimit {
            requests,
            per: Duration::from_secs(seconds),
        }),
        ..Settings::default()
    }
}

fn number(reply: &Reply, name: &str) -> u64 {
    reply
        .header(name)
        .unwrap_or_else(|| panic!("{name} missing"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn every_authenticated_answer_carries_the_headers() {
    let app = TestApp::spawn().await;
    let (_, token) = app.user().await;
    let reply = send(app.get("/api/v2/group", &token)).await.expect(200);
    assert_eq!(number(&reply, "x-rate-limit-limit"), 6000);
    assert_eq!(number(&reply, "x-rate-limit-remaining"), 5999);
    assert!(number(&reply, "x-rate-limit-reset") <= 1);
    // Errors of an authenticated request too (one request comes back every 10 ms).
    let reply = send(app.get("/api/v2/group/nothing", &token)).await.expect(404);
    assert!((5998..=5999).contains(&number(&reply, "x-rate-limit-remaining")));
    // Not without a valid token, and not outside the API.
    let reply = send(app.http.get(app.url("/api/v2/group"))).await.expect(401);
    assert!(reply.header("x-rate-limit-limit").is_none());
    let reply = send(app.get("/api/v2/group", "not-a-token")).await.expect(401);
    assert!(reply.header("x-rate-limit-limit").is_none());
    let reply = send(app.http.get(app.url("/healthz"))).await.expect(200);
    assert!(reply.header("x-rate-limit-limit").is_none());
}

#[tokio::test]
async fn past_the_limit_the_answer_is_429() {
    let app = TestApp::spawn_with(limited(5, 60)).await;
    let (_, token) = app.user().await;
    let (_, other) = app.user().await;
    for remaining in (0..5).rev() {
        let reply = send(app.get("/api/v2/group", &token)).await.expect(200);
        assert_eq!(number(&reply, "x-rate-limit-limit"), 5);
        assert_eq!(number(&reply, "x-rate-limit-remaining"), remaining);
        // Seconds until the allowance is whole again: 12 s per request used.
        let reset = number(&reply, "x-rate-limit-reset");
        let used = 5 - remaining;
        assert!((used * 12 - 1..=used * 12).contains(&reset), "{reset} for {used}");
    }
    let reply = send(app.get("/api/v2/group", &token)).await.expect(429);
    assert_eq!(
        reply.json(),
        json!({"name": "Too Many Requests", "message": "Rate limit exceeded.", "code": 0, "status": 429})
    );
    assert!(reply.header("content-type").unwrap().starts_with("application/json"));
    let retry = number(&reply, "retry-after");
    assert!((1..=12).contains(&retry), "{retry}");
    assert_eq!(number(&reply, "x-rate-limit-remaining"), 0);
    assert_eq!(number(&reply, "x-rate-limit-limit"), 5);
    assert!(number(&reply, "x-rate-limit-reset") >= 59);
    // Every route of the API, and every token of the account, count together.
    let second = app.token(&app_username(&app, &token).await, "user-password").await;
    send(app.get("/api/v2/event-type", &second)).await.expect(429);
    // Another account has its own allowance.
    send(app.get("/api/v2/group", &other)).await.expect(200);
}

/// The username behind a token (asked before the limit is reached would cost a request, so
/// read from the store).
async fn app_username(app: &TestApp, token: &str) -> String {
    let hash = devicecloud_engine::auth::secrets::token_hash(token);
    let owner = devicecloud_store::tokens::owner(&app.state.db, &hash)
        .await
        .unwrap()
        .unwrap();
    devicecloud_store::accounts::get(&app.state.db, &owner.id_user)
        .await
        .unwrap()
        .unwrap()
        .username
}

#[tokio::test]
async fn the_allowance_comes_back_with_time() {
    let app = TestApp::spawn_with(limited(2, 1)).await;
    let (_, token) = app.user().await;
    send(app.get("/api/v2/group", &token)).await.expect(200);
    send(app.get("/api/v2/group", &token)).await.expect(200);
    send(app.get("/api/v2/group", &token)).await.expect(429);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let reply = send(app.get("/api/v2/group", &token)).await.expect(200);
    assert_eq!(number(&reply, "x-rate-limit-remaining"), 1);
}

#[tokio::test]
async fn off_means_no_limit_and_no_headers() {
    let app = TestApp::spawn_with(Settings {
        rate_limit: None,
        ..Settings::default()
    })
    .await;
    let (_, token) = app.user().await;
    let reply = send(app.get("/api/v2/group", &token)).await.expect(200);
    assert!(reply.header("x-rate-limit-limit").is_none());
}
