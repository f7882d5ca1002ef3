//! `POST /oauth2/token` (specification, Authentication; docs/api.md, "Authentication") and the
//! bearer check of every `/api/v2/` route, over real HTTP.

mod common;

use common::{Reply, TestApp, assert_error, assert_invalid_credentials, keys, send};
use reqwest::Method;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::macros::format_description;

const PASSWORD: &str = "correct horse battery";

/// An app with one user whose password is known.
async fn app_with_user() -> (TestApp, String) {
    let app = TestApp::spawn().await;
    app.create_user("alice@example.com", PASSWORD, false).await;
    (app, "alice@example.com".to_string())
}

fn password_form<'a>(app: &'a TestApp, username: &'a str, password: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("grant_type", "password"),
        ("client_id", &app.client_id),
        ("client_secret", &app.client_secret),
        ("username", username),
        ("password", password),
    ]
}

/// An OAuth error: the specification's body first, then `error` and `error_description`.
fn assert_oauth_error(reply: &Reply, status: u16, error: &str) {
    assert_eq!(reply.status, status, "body: {}", reply.text);
    let body = reply.json();
    assert_error(&body, status);
    assert_eq!(
        keys(&body),
        ["name", "message", "code", "status", "error", "error_description"],
        "{body}"
    );
    assert_eq!(body["error"], error, "{body}");
    assert!(
        body["error_description"].as_str().is_some_and(|d| !d.is_empty()),
        "{body}"
    );
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    let name = if status == 400 { "Bad Request" } else { "Unauthorized" };
    assert_eq!(body["name"], name);
}

fn assert_token_body(body: &Value) {
    assert_eq!(
        keys(body),
        ["access_token", "expires_in", "token_type", "scope", "refresh_token"],
        "{body}"
    );
    let access = body["access_token"].as_str().expect("access_token is a string");
    assert!(access.len() >= 64, "access token of 256 bits at least: {access}");
    assert_eq!(body["expires_in"], json!(86400));
    assert!(body["expires_in"].is_u64());
    assert_eq!(body["token_type"], "Bearer");
    assert!(body["scope"].is_null());
    let refresh = body["refresh_token"].as_str().expect("refresh_token is a string");
    assert!(!refresh.is_empty());
    assert_ne!(refresh, access);
}

#[tokio::test]
async fn password_grant_with_an_urlencoded_body() {
    let (app, user) = app_with_user().await;
    let reply = app.token_reply(&password_form(&app, &user, PASSWORD)).await.expect(200);
    assert!(reply.header("content-type").unwrap().starts_with("application/json"));
    // RFC 6749 §5.1: token responses are not cached.
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    let body = reply.json();
    assert_token_body(&body);
    // The token works on the API.
    let token = body["access_token"].as_str().unwrap();
    send(app.get("/api/v2/group/index", token)).await.expect(200);
    // A second grant gives another token (allowed, docs/api.md, "Authentication").
    let again = app
        .token_reply(&password_form(&app, &user, PASSWORD))
        .await
        .expect(200)
        .json();
    assert_ne!(again["access_token"], body["access_token"]);
    // Usernames compare case-insensitively.
    app.token_reply(&password_form(&app, "ALICE@example.com", PASSWORD))
        .await
        .expect(200);
}

#[tokio::test]
async fn password_grant_with_a_multipart_body() {
    let (app, user) = app_with_user().await;
    let mut form = reqwest::multipart::Form::new();
    for (k, v) in password_form(&app, &user, PASSWORD) {
        form = form.text(k.to_string(), v.to_string());
    }
    let reply = send(app.http.post(app.url("/oauth2/token")).multipart(form))
        .await
        .expect(200);
    let body = reply.json();
    assert_token_body(&body);
    send(app.get("/api/v2/group", body["access_token"].as_str().unwrap()))
        .await
        .expect(200);
}

#[tokio::test]
async fn client_errors_are_400_invalid_client() {
    let (app, user) = app_with_user().await;
    let unknown = app
        .token_reply(&[
            ("grant_type", "password"),
            ("client_id", "no-such-client"),
            ("client_secret", &app.client_secret),
            ("username", &user),
            ("password", PASSWORD),
        ])
        .await;
    assert_oauth_error(&unknown, 400, "invalid_client");
    let wrong = app
        .token_reply(&[
            ("grant_type", "password"),
            ("client_id", &app.client_id),
            ("client_secret", "wrong-secret"),
            ("username", &user),
            ("password", PASSWORD),
        ])
        .await;
    assert_oauth_error(&wrong, 400, "invalid_client");
    let missing = app
        .token_reply(&[
            ("grant_type", "password"),
            ("client_id", &app.client_id),
            ("username", &user),
            ("password", PASSWORD),
        ])
        .await;
    assert_oauth_error(&missing, 400, "invalid_client");
    let no_id = app
        .token_reply(&[
            ("grant_type", "password"),
            ("client_secret", &app.client_secret),
            ("username", &user),
            ("password", PASSWORD),
        ])
        .await;
    assert_oauth_error(&no_id, 400, "invalid_client");
}

#[tokio::test]
async fn grant_type_errors() {
    let (app, user) = app_with_user().await;
    let missing = app
        .token_reply(&[
            ("client_id", &app.client_id),
            ("client_secret", &app.client_secret),
            ("username", &user),
            ("password", PASSWORD),
        ])
        .await;
    assert_oauth_error(&missing, 400, "invalid_request");
    let unsupported = app
        .token_reply(&[
            ("grant_type", "client_credentials"),
            ("client_id", &app.client_id),
            ("client_secret", &app.client_secret),
        ])
        .await;
    assert_oauth_error(&unsupported, 400, "unsupported_grant_type");
    let empty = send(app.http.post(app.url("/oauth2/token"))).await;
    assert_oauth_error(&empty, 400, "invalid_request");
    // A password grant without a username or a password.
    let no_user = app
        .token_reply(&[
            ("grant_type", "password"),
            ("client_id", &app.client_id),
            ("client_secret", &app.client_secret),
            ("password", PASSWORD),
        ])
        .await;
    assert_oauth_error(&no_user, 400, "invalid_request");
    let no_password = app
        .token_reply(&[
            ("grant_type", "password"),
            ("client_id", &app.client_id),
            ("client_secret", &app.client_secret),
            ("username", &user),
        ])
        .await;
    assert_oauth_error(&no_password, 400, "invalid_request");
}

#[tokio::test]
async fn wrong_credentials_are_401() {
    let (app, user) = app_with_user().await;
    let wrong = app.token_reply(&password_form(&app, &user, "not the password")).await;
    assert_oauth_error(&wrong, 401, "invalid_grant");
    let unknown = app
        .token_reply(&password_form(&app, "nobody@example.com", PASSWORD))
        .await;
    assert_oauth_error(&unknown, 401, "invalid_grant");
    // The two failures are indistinguishable.
    assert_eq!(wrong.json(), unknown.json());
}

fn utc_text(unix: i64) -> String {
    OffsetDateTime::from_unix_timestamp(unix)
        .unwrap()
        .format(format_description!("[year]-[month]-[day] [hour]:[minute]:[second]"))
        .unwrap()
}

fn refresh_form<'a>(app: &'a TestApp, refresh: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh),
        ("client_id", &app.client_id),
        ("client_secret", &app.client_secret),
    ]
}

#[tokio::test]
async fn refresh_grant_extends_the_token_by_14_days() {
    let app = TestApp::spawn().await;
    let (_, _, access, refresh) = app.user_with_tokens(false).await;
    let before = devicecloud_store::unix_now();
    let reply = send(
        app.http
            .post(app.url("/oauth2/token"))
            .bearer_auth(&access)
            .form(&refresh_form(&app, &refresh)),
    )
    .await
    .expect(200);
    let after = devicecloud_store::unix_now();
    let body = reply.json();
    assert_eq!(keys(&body), ["refreshed", "expires"]);
    assert_eq!(body["refreshed"], json!(true));
    let expires = body["expires"].as_str().expect("expires is a string");
    let window: Vec<String> = (before - 1..=after + 1).map(|t| utc_text(t + 14 * 86_400)).collect();
    assert!(
        window.iter().any(|w| w == expires),
        "expires {expires} is not 14 days from now in UTC ({window:?})"
    );
    // The token still works, and stays valid past its first day.
    send(app.get("/api/v2/group/index", &access)).await.expect(200);
    // A multipart refresh works too.
    let mut form = reqwest::multipart::Form::new();
    for (k, v) in refresh_form(&app, &refresh) {
        form = form.text(k.to_string(), v.to_string());
    }
    send(
        app.http
            .post(app.url("/oauth2/token"))
            .bearer_auth(&access)
            .multipart(form),
    )
    .await
    .expect(200);
}

#[tokio::test]
async fn refresh_needs_the_access_token() {
    let app = TestApp::spawn().await;
    let (_, _, _access, refresh) = app.user_with_tokens(false).await;
    let none = send(
        app.http
            .post(app.url("/oauth2/token"))
            .form(&refresh_form(&app, &refresh)),
    )
    .await;
    assert_oauth_error(&none, 401, "invalid_token");
    assert_eq!(none.header("www-authenticate"), Some("Bearer realm=\"api\""));
    let unknown = send(
        app.http
            .post(app.url("/oauth2/token"))
            .bearer_auth("f".repeat(64))
            .form(&refresh_form(&app, &refresh)),
    )
    .await;
    assert_oauth_error(&unknown, 401, "invalid_token");
}

#[tokio::test]
async fn refresh_with_a_foreign_refresh_token_is_invalid_grant() {
    let app = TestApp::spawn().await;
    let (_, name, access, refresh) = app.user_with_tokens(false).await;
    // A second token pair of the same user: its refresh token does not belong to `access`.
    let other = app
        .token_reply(&password_form(&app, &name, "secret-password"))
        .await
        .expect(200)
        .json();
    let other_refresh = other["refresh_token"].as_str().unwrap();
    let foreign = send(
        app.http
            .post(app.url("/oauth2/token"))
            .bearer_auth(&access)
            .form(&refresh_form(&app, other_refresh)),
    )
    .await;
    assert_oauth_error(&foreign, 400, "invalid_grant");
    let unknown = send(
        app.http
            .post(app.url("/oauth2/token"))
            .bearer_auth(&access)
            .form(&refresh_form(&app, "no-such-refresh-token")),
    )
    .await;
    assert_oauth_error(&unknown, 400, "invalid_grant");
    // Another registered client cannot refresh this client's token.
    let (other_id, other_secret) = (devicecloud_store::new_id(), "other-client-secret".to_string());
    devicecloud_store::clients::create(
        &app.state.db,
        &other_id,
        "other",
        &devicecloud_engine::auth::secrets::token_hash(&other_secret),
        0,
    )
    .await
    .unwrap();
    let other_client = send(app.http.post(app.url("/oauth2/token")).bearer_auth(&access).form(&[
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh.as_str()),
        ("client_id", &other_id),
        ("client_secret", &other_secret),
    ]))
    .await;
    assert_oauth_error(&other_client, 400, "invalid_grant");
    // The right pair still refreshes.
    send(
        app.http
            .post(app.url("/oauth2/token"))
            .bearer_auth(&access)
            .form(&refresh_form(&app, &refresh)),
    )
    .await
    .expect(200);
}

#[tokio::test]
async fn an_expired_token_is_401() {
    let app = TestApp::spawn().await;
    let (_, _, access, _) = app.user_with_tokens(false).await;
    app.set_token_expiry(&access, devicecloud_store::unix_now() - 1).await;
    assert_invalid_credentials(&send(app.get("/api/v2/group/index", &access)).await);
}

#[tokio::test]
async fn bearer_check_on_the_api() {
    let app = TestApp::spawn().await;
    let (_, token) = app.user().await;
    let paths = [
        "/api/v2/group/index",
        "/api/v2/group",
        "/api/v2/group/00000000-0000-0000-0000-000000000000",
    ];
    for path in paths {
        // No header.
        assert_invalid_credentials(&send(app.http.get(app.url(path))).await);
        // Another scheme.
        assert_invalid_credentials(&send(app.http.get(app.url(path)).header("Authorization", "Basic x")).await);
        // Bearer with nothing after it.
        assert_invalid_credentials(&send(app.http.get(app.url(path)).header("Authorization", "Bearer ")).await);
        assert_invalid_credentials(&send(app.http.get(app.url(path)).header("Authorization", "Bearer")).await);
        // An unknown token.
        assert_invalid_credentials(&send(app.get(path, &"0".repeat(64))).await);
        // A token with one character changed.
        let mut altered = token.clone();
        let last = if altered.ends_with('0') { "1" } else { "0" };
        altered.replace_range(altered.len() - 1.., last);
        assert_invalid_credentials(&send(app.get(path, &altered)).await);
    }
    // HEAD and writes are checked too.
    let head = send(app.http.head(app.url("/api/v2/group"))).await;
    assert_eq!(head.status, 401);
    assert_eq!(head.header("www-authenticate"), Some("Bearer realm=\"api\""));
    assert_invalid_credentials(&send(app.http.post(app.url("/api/v2/group")).json(&json!({"label": "x"}))).await);
    assert_invalid_credentials(
        &send(
            app.http
                .post(app.url("/api/v2/user"))
                .json(&json!({"username": "x", "password": "12345678"})),
        )
        .await,
    );
    // The real token passes.
    send(app.get("/api/v2/group/index", &token)).await.expect(200);
    send(app.request(Method::GET, "/api/v2/group", &token))
        .await
        .expect(200);
}

#[tokio::test]
async fn open_endpoints_need_no_token() {
    let app = TestApp::spawn().await;
    for path in ["/healthz", "/readyz", "/metrics", "/api/v2/openapi.json"] {
        let reply = send(app.http.get(app.url(path))).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.text);
        // A bogus token does not hurt either.
        let reply = send(app.http.get(app.url(path)).bearer_auth("bogus")).await;
        assert_eq!(reply.status, 200, "{path} with a bogus token: {}", reply.text);
    }
}
