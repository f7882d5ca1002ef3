//! The life of a token pair (docs/api.md, "Authentication"): revocation at `POST /oauth2/revoke`
//! (RFC 7009) and the limit on how long refreshes may keep a pair alive.

mod common;

use base64::Engine;
use common::{Reply, TestApp, assert_error, assert_invalid_credentials, keys, send};
use devicecloud_store::unix_now;

async fn revoke(app: &TestApp, form: &[(&str, &str)]) -> Reply {
    send(app.http.post(app.url("/oauth2/revoke")).form(form)).await
}

/// Revokes `token` as the test client, with its credentials in the form.
async fn revoke_as_client(app: &TestApp, token: &str) -> Reply {
    revoke(
        app,
        &[
            ("token", token),
            ("client_id", &app.client_id),
            ("client_secret", &app.client_secret),
        ],
    )
    .await
}

/// A refresh grant for the pair (`access`, `refresh`).
async fn refresh(app: &TestApp, access: &str, refresh: &str) -> Reply {
    send(app.http.post(app.url("/oauth2/token")).bearer_auth(access).form(&[
        ("grant_type", "refresh_token"),
        ("client_id", &app.client_id),
        ("client_secret", &app.client_secret),
        ("refresh_token", refresh),
    ]))
    .await
}

fn assert_oauth(reply: &Reply, status: u16, error: &str) {
    assert_eq!(reply.status, status, "{}", reply.text);
    let body = reply.json();
    assert_error(&body, status);
    assert_eq!(body["error"], error, "{body}");
}

#[tokio::test]
async fn revoking_the_access_token_ends_the_pair() {
    let app = TestApp::spawn().await;
    let (_, _, access, refresh_token) = app.user_with_tokens(false).await;
    // Used once, so that the bearer cache holds it: the revocation must still count at once.
    send(app.get("/api/v2/group", &access)).await.expect(200);
    let reply = revoke_as_client(&app, &access).await.expect(200);
    assert_eq!(reply.text, "");
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    assert_invalid_credentials(&send(app.get("/api/v2/group", &access)).await);
    assert_eq!(refresh(&app, &access, &refresh_token).await.status, 401);
}

#[tokio::test]
async fn revoking_the_refresh_token_ends_the_pair() {
    let app = TestApp::spawn().await;
    let (_, name, access, refresh_token) = app.user_with_tokens(false).await;
    let other = app.token(&name, "secret-password").await;
    send(app.get("/api/v2/group", &access)).await.expect(200);
    // Client credentials in HTTP Basic this time, with the hint.
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", app.client_id, app.client_secret));
    let reply = send(
        app.http
            .post(app.url("/oauth2/revoke"))
            .header("authorization", format!("Basic {basic}"))
            .form(&[("token", refresh_token.as_str()), ("token_type_hint", "refresh_token")]),
    )
    .await
    .expect(200);
    assert_eq!(reply.text, "");
    assert_invalid_credentials(&send(app.get("/api/v2/group", &access)).await);
    // The account's other pair lives on.
    send(app.get("/api/v2/group", &other)).await.expect(200);
}

#[tokio::test]
async fn unknown_tokens_are_revoked_quietly() {
    let app = TestApp::spawn().await;
    revoke_as_client(&app, "no-such-token").await.expect(200);
    // A wrong hint is searched past, as RFC 7009 asks.
    let (_, _, access, _) = app.user_with_tokens(false).await;
    revoke(
        &app,
        &[
            ("token", &access),
            ("token_type_hint", "refresh_token"),
            ("client_id", &app.client_id),
            ("client_secret", &app.client_secret),
        ],
    )
    .await
    .expect(200);
    assert_invalid_credentials(&send(app.get("/api/v2/group", &access)).await);
}

#[tokio::test]
async fn another_clients_token_is_not_revoked() {
    let app = TestApp::spawn().await;
    let (_, _, access, _) = app.user_with_tokens(false).await;
    let (other_id, other_secret) = devicecloud_engine::auth::secrets::register_client(&app.state.db, "other")
        .await
        .map(|(row, secret)| (row.client_id, secret))
        .unwrap();
    revoke(
        &app,
        &[
            ("token", &access),
            ("client_id", &other_id),
            ("client_secret", &other_secret),
        ],
    )
    .await
    .expect(200);
    send(app.get("/api/v2/group", &access)).await.expect(200);
}

#[tokio::test]
async fn revocation_needs_a_client_and_a_token() {
    let app = TestApp::spawn().await;
    let (_, _, access, _) = app.user_with_tokens(false).await;
    let wrong = [
        vec![("token", access.as_str())],
        vec![("token", access.as_str()), ("client_id", app.client_id.as_str())],
        vec![
            ("token", access.as_str()),
            ("client_id", app.client_id.as_str()),
            ("client_secret", "wrong"),
        ],
        vec![
            ("token", access.as_str()),
            ("client_id", "nobody"),
            ("client_secret", app.client_secret.as_str()),
        ],
    ];
    for form in wrong {
        let reply = revoke(&app, &form).await;
        assert_oauth(&reply, 400, "invalid_client");
        assert_eq!(
            keys(&reply.json()),
            ["name", "message", "code", "status", "error", "error_description"]
        );
    }
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{}:wrong", app.client_id));
    let reply = send(
        app.http
            .post(app.url("/oauth2/revoke"))
            .header("authorization", format!("Basic {basic}"))
            .form(&[("token", access.as_str())]),
    )
    .await;
    assert_oauth(&reply, 400, "invalid_client");
    let reply = revoke(
        &app,
        &[("client_id", &app.client_id), ("client_secret", &app.client_secret)],
    )
    .await;
    assert_oauth(&reply, 400, "invalid_request");
    send(app.get("/api/v2/group", &access)).await.expect(200);
}

#[tokio::test]
async fn refreshes_end_ninety_days_after_the_password_grant() {
    let app = TestApp::spawn().await;
    let (_, _, access, refresh_token) = app.user_with_tokens(false).await;
    let day = 86_400;
    // Granted 89 days and 23 hours ago: the refresh extends it by one hour only, not 14 days.
    let granted = unix_now() - 89 * day - 23 * 3600;
    app.set_token_created(&access, granted).await;
    let body = refresh(&app, &access, &refresh_token).await.expect(200).json();
    let expires = time::PrimitiveDateTime::parse(
        body["expires"].as_str().unwrap(),
        time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second]"),
    )
    .unwrap()
    .assume_utc()
    .unix_timestamp();
    assert_eq!(expires, granted + 90 * day);
    send(app.get("/api/v2/group", &access)).await.expect(200);

    // Granted more than 90 days ago: no refresh at all.
    app.set_token_created(&access, unix_now() - 90 * day - 1).await;
    let reply = refresh(&app, &access, &refresh_token).await;
    assert_oauth(&reply, 400, "invalid_grant");
}

#[tokio::test]
async fn the_token_lifetime_is_a_setting() {
    let mut settings = devicecloud_server::Settings::default();
    settings.limits.token_lifetime = std::time::Duration::from_secs(3600);
    let app = TestApp::spawn_with(settings).await;
    let (_, _, access, refresh_token) = app.user_with_tokens(false).await;
    app.set_token_created(&access, unix_now() - 3601).await;
    assert_oauth(&refresh(&app, &access, &refresh_token).await, 400, "invalid_grant");
}

/// Revocation as a user calls it from a shell, with curl: the client authenticated with HTTP
/// Basic, `token_type_hint` given, the form encoded by curl.
#[tokio::test]
async fn curl_revokes_a_refresh_token_as_rfc_7009_shows() {
    let app = TestApp::spawn().await;
    let (_, _, access, refresh_token) = app.user_with_tokens(false).await;
    let url = app.url("/oauth2/revoke");
    let (client, token) = (
        format!("{}:{}", app.client_id, app.client_secret),
        format!("token={refresh_token}"),
    );
    let output = tokio::process::Command::new("curl")
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-u",
            &client,
            "-d",
            &token,
        ])
        .args(["-d", "token_type_hint=refresh_token", &url])
        .output()
        .await
        .expect("curl is installed (.ci/run installs it)");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "200", "{output:?}");
    assert_invalid_credentials(&send(app.get("/api/v2/group", &access)).await);
}
