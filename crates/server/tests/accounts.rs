//! Accounts over the API (docs/api.md, "Accounts"): the collection and the record for
//! administrators, the administrators' changes (password, administrator flag, disabled), a
//! password change by the account itself, and what ends at once when an account is disabled or
//! its password changes: every token and every dashboard session.

mod common;

use common::browser::Browser;
use common::{Reply, TestApp, assert_error, assert_invalid_credentials, keys, send};
use reqwest::Method;
use serde_json::{Value, json};

const RECORD_KEYS: [&str; 5] = ["id_user", "username", "is_admin", "disabled", "created_at"];

async fn patch(app: &TestApp, path: &str, token: &str, body: Value) -> Reply {
    send(app.request(Method::PATCH, path, token).json(&body)).await
}

/// The single invalid field of a 422 answer.
fn invalid_field(reply: &Reply) -> String {
    assert_eq!(reply.status, 422, "{}", reply.text);
    let body = reply.json();
    assert_eq!(body.as_array().map(Vec::len), Some(1), "{body}");
    body[0]["field"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn administrators_list_accounts_as_a_collection() {
    let app = TestApp::spawn().await;
    let (admin_id, admin) = app.admin().await;
    let mut ids = vec![admin_id];
    for _ in 0..4 {
        ids.push(app.user().await.0);
    }
    let reply = send(app.get("/api/v2/user?per-page=2&page=2", &admin))
        .await
        .expect(200);
    assert_eq!(reply.header("x-pagination-total-count"), Some("5"));
    assert_eq!(reply.header("x-pagination-page-count"), Some("3"));
    assert_eq!(reply.header("x-pagination-current-page"), Some("2"));
    let body = reply.json();
    assert_eq!(keys(&body), ["items", "_links", "_meta", "expand"]);
    let items = body["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    for item in items {
        assert_eq!(keys(item), RECORD_KEYS, "{item}");
        assert_eq!(item["disabled"], json!(false));
    }
    // Pages follow one order (creation time, ties by id): the second page is the full list's
    // third and fourth record.
    let all = send(app.get("/api/v2/user?per-page=10", &admin))
        .await
        .expect(200)
        .json();
    let all: Vec<&str> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id_user"].as_str().unwrap())
        .collect();
    let listed: Vec<&str> = items.iter().map(|i| i["id_user"].as_str().unwrap()).collect();
    assert_eq!(listed, all[2..4]);
    let mut sorted_ids = ids.clone();
    sorted_ids.sort();
    let mut all_sorted: Vec<String> = all.iter().map(|s| s.to_string()).collect();
    all_sorted.sort();
    assert_eq!(all_sorted, sorted_ids);
    assert!(
        body["_links"]["self"]["href"]
            .as_str()
            .unwrap()
            .contains("/api/v2/user")
    );
    assert!(!reply.text.contains("password"), "no password hash: {}", reply.text);

    // Filters and sort like every other collection.
    let body = send(app.get("/api/v2/user?filter[is_admin]=1", &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(body["_meta"]["totalCount"], 1);
    assert_eq!(body["items"][0]["id_user"], ids[0]);
    let body = send(app.get("/api/v2/user?sort=-username&per-page=10", &admin))
        .await
        .expect(200)
        .json();
    let names: Vec<&str> = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["username"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort_by_key(|n| std::cmp::Reverse(n.to_lowercase()));
    assert_eq!(names, sorted);
    let reply = send(app.get("/api/v2/user?filter[nothing]=1", &admin)).await;
    assert_eq!(reply.status, 422, "{}", reply.text);
    // HEAD counts.
    let head = send(app.request(Method::HEAD, "/api/v2/user", &admin))
        .await
        .expect(200);
    assert_eq!(head.header("x-pagination-total-count"), Some("5"));
}

#[tokio::test]
async fn normal_users_cannot_list_accounts() {
    let app = TestApp::spawn().await;
    let (_, user) = app.user().await;
    let reply = send(app.get("/api/v2/user", &user)).await;
    assert_eq!(reply.status, 401, "{}", reply.text);
    assert_error(&reply.json(), 401);
    assert_eq!(reply.json()["message"], "You are not allowed to perform this action.");
    assert_invalid_credentials(&send(app.http.get(app.url("/api/v2/user"))).await);
}

#[tokio::test]
async fn the_own_record_is_at_me() {
    let app = TestApp::spawn().await;
    let (id, token) = app.user().await;
    let body = send(app.get("/api/v2/user/me", &token)).await.expect(200).json();
    assert_eq!(keys(&body), RECORD_KEYS);
    assert_eq!(body["id_user"], id);
}

#[tokio::test]
async fn administrators_change_accounts() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let (id, name, token, _) = app.user_with_tokens(false).await;
    let path = format!("/api/v2/user/{id}");

    // Making an administrator: the token stays and carries the new rights.
    let body = patch(&app, &path, &admin, json!({"is_admin": true}))
        .await
        .expect(200)
        .json();
    assert_eq!(keys(&body), RECORD_KEYS);
    assert_eq!(body["is_admin"], json!(true));
    send(app.get("/api/v2/user", &token)).await.expect(200);
    patch(&app, &path, &admin, json!({"is_admin": false})).await.expect(200);
    send(app.get("/api/v2/user", &token)).await.expect(401);

    // A new password: the old one and every token end at once.
    let body = patch(&app, &path, &admin, json!({"password": "a brand new password"}))
        .await
        .expect(200)
        .json();
    assert!(body.get("password").is_none() && body.get("password_hash").is_none());
    assert_invalid_credentials(&send(app.get("/api/v2/group", &token)).await);
    assert_eq!(
        app.token_reply(&password_form(&app, &name, "secret-password"))
            .await
            .status,
        401
    );
    let token = app.token(&name, "a brand new password").await;

    // Disabled: the token ends, signing in is refused; enabled again: signing in works.
    let body = patch(&app, &path, &admin, json!({"disabled": true}))
        .await
        .expect(200)
        .json();
    assert_eq!(body["disabled"], json!(true));
    assert_invalid_credentials(&send(app.get("/api/v2/group", &token)).await);
    let refused = app
        .token_reply(&password_form(&app, &name, "a brand new password"))
        .await;
    assert_eq!(refused.status, 401, "{}", refused.text);
    assert_eq!(refused.json()["error"], "invalid_grant");
    patch(&app, &path, &admin, json!({"disabled": false})).await.expect(200);
    app.token(&name, "a brand new password").await;
}

fn password_form<'a>(app: &'a TestApp, username: &'a str, password: &'a str) -> [(&'a str, &'a str); 5] {
    [
        ("grant_type", "password"),
        ("client_id", &app.client_id),
        ("client_secret", &app.client_secret),
        ("username", username),
        ("password", password),
    ]
}

#[tokio::test]
async fn account_changes_are_checked() {
    let app = TestApp::spawn().await;
    let (admin_id, admin) = app.admin().await;
    let (user_id, user) = app.user().await;
    let user_path = format!("/api/v2/user/{user_id}");
    let cases = [
        (json!({"password": "short"}), "password"),
        (json!({"password": 12345678}), "password"),
        (json!({"is_admin": "yes"}), "is_admin"),
        (json!({"disabled": 2}), "disabled"),
    ];
    for (body, field) in cases {
        let reply = patch(&app, &user_path, &admin, body.clone()).await;
        assert_eq!(invalid_field(&reply), field, "{body}");
    }
    // An administrator does not lock themselves out.
    let own = format!("/api/v2/user/{admin_id}");
    assert_eq!(
        invalid_field(&patch(&app, &own, &admin, json!({"disabled": true})).await),
        "disabled"
    );
    assert_eq!(
        invalid_field(&patch(&app, &own, &admin, json!({"is_admin": false})).await),
        "is_admin"
    );
    send(app.get("/api/v2/user", &admin)).await.expect(200);
    // Not a JSON object: 400; an unknown account: 404.
    let reply = send(
        app.request(Method::PATCH, &user_path, &admin)
            .header("content-type", "application/json")
            .body("[1]"),
    )
    .await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    let unknown = format!("/api/v2/user/{}", uuid::Uuid::new_v4());
    assert_eq!(
        patch(&app, &unknown, &admin, json!({"disabled": true})).await.status,
        404
    );
    // A normal user changes nobody through this path, themselves included.
    let reply = patch(&app, &user_path, &user, json!({"is_admin": true})).await;
    assert_eq!(reply.status, 401, "{}", reply.text);
    let reply = patch(&app, &own, &user, json!({"disabled": true})).await;
    assert_eq!(reply.status, 404, "{}", reply.text);
    send(app.get("/api/v2/group", &admin)).await.expect(200);
}

#[tokio::test]
async fn an_account_changes_its_own_password() {
    let app = TestApp::spawn().await;
    let (_, name, token, _) = app.user_with_tokens(false).await;
    let second = app.token(&name, "secret-password").await;
    // Both fields are needed, and the current password must be right.
    let reply = patch(&app, "/api/v2/user/me", &token, json!({"password": "a new password"})).await;
    assert_eq!(invalid_field(&reply), "current_password");
    let reply = patch(
        &app,
        "/api/v2/user/me",
        &token,
        json!({"current_password": "wrong-password", "password": "a new password"}),
    )
    .await;
    assert_eq!(invalid_field(&reply), "current_password");
    let reply = patch(
        &app,
        "/api/v2/user/me",
        &token,
        json!({"current_password": "secret-password", "password": "short"}),
    )
    .await;
    assert_eq!(invalid_field(&reply), "password");
    send(app.get("/api/v2/group", &token)).await.expect(200);

    let body = patch(
        &app,
        "/api/v2/user/me",
        &token,
        json!({"current_password": "secret-password", "password": "a new password"}),
    )
    .await
    .expect(200)
    .json();
    assert_eq!(keys(&body), RECORD_KEYS);
    // Every token of the account ends, the one used for the change too.
    for old in [&token, &second] {
        assert_invalid_credentials(&send(app.get("/api/v2/group", old)).await);
    }
    app.token(&name, "a new password").await;
}

#[tokio::test]
async fn disabling_an_account_ends_its_sign_in_sessions() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let name = "dash@example.com";
    let id = app.create_user(name, "dash-password", false).await;
    let mut browser = Browser::new(&app);
    browser.sign_in(name, "dash-password").await.expect(303);
    browser.get("/").await.expect(200);
    patch(&app, &format!("/api/v2/user/{id}"), &admin, json!({"disabled": true}))
        .await
        .expect(200);
    let reply = browser.get("/").await.expect(303);
    assert!(reply.header("location").unwrap().starts_with("/login"));
    // Signing in again is refused.
    let mut again = Browser::new(&app);
    assert_eq!(again.sign_in(name, "dash-password").await.status, 401);

    // A changed password ends the sessions of an enabled account too.
    patch(&app, &format!("/api/v2/user/{id}"), &admin, json!({"disabled": false}))
        .await
        .expect(200);
    let mut browser = Browser::new(&app);
    browser.sign_in(name, "dash-password").await.expect(303);
    patch(
        &app,
        &format!("/api/v2/user/{id}"),
        &admin,
        json!({"password": "another-password"}),
    )
    .await
    .expect(200);
    browser.get("/").await.expect(303);
}
