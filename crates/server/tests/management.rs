//! Management endpoints (docs/api.md, "Management endpoints"): create, edit and delete groups,
//! create accounts, manage members; 201 with `Location`, 204 without a body, 422 lists of `{field,
//! message}`.

mod common;

use common::{Reply, TestApp, assert_error, keys, send};
use reqwest::Method;
use serde_json::{Value, json};

/// Invalid fields expected for one body: (field, message if it must be exact).
type Expected = Vec<(&'static str, Option<&'static str>)>;

async fn post_group(app: &TestApp, token: &str, body: &Value) -> Reply {
    send(app.request(Method::POST, "/api/v2/group", token).json(body)).await
}

fn assert_validation(reply: &Reply, expected: &[(&str, Option<&str>)], what: &str) {
    assert_eq!(reply.status, 422, "{what}: {}", reply.text);
    let body = reply.json();
    let list = body.as_array().unwrap_or_else(|| panic!("{what}: a list: {body}"));
    assert_eq!(list.len(), expected.len(), "{what}: {body}");
    for (item, (field, message)) in list.iter().zip(expected) {
        assert_eq!(keys(item), ["field", "message"], "{what}");
        assert_eq!(item["field"], *field, "{what}: {body}");
        match message {
            Some(message) => assert_eq!(item["message"], *message, "{what}"),
            None => assert!(
                item["message"].as_str().is_some_and(|m| !m.is_empty()),
                "{what}: {body}"
            ),
        }
    }
}

#[tokio::test]
async fn create_a_group() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let reply = post_group(
        &app,
        &admin,
        &json!({"label": "Harbour", "type": "2", "subtype": "docks"}),
    )
    .await
    .expect(201);
    let body = reply.json();
    assert_eq!(
        keys(&body),
        [
            "id",
            "id_group",
            "label",
            "type",
            "type_label",
            "subtype",
            "id_country",
            "created_at",
            "deleted_at",
            "_links"
        ]
    );
    assert_eq!(body["label"], "Harbour");
    assert_eq!(body["type"], "2");
    assert_eq!(body["type_label"], "Customer");
    assert_eq!(body["subtype"], "docks");
    assert!(body["created_at"].is_i64());
    assert!(body["deleted_at"].is_null());
    let id = body["id"].as_str().unwrap();
    let location = reply.header("location").expect("Location header");
    assert!(location.ends_with(&format!("/api/v2/group/{id}")), "{location}");
    // The Location names the record.
    let target = if location.starts_with("http") {
        location.to_string()
    } else {
        app.url(location)
    };
    let fetched = send(app.http.get(&target).bearer_auth(&admin)).await.expect(200).json();
    assert_eq!(fetched, body);
    // The type may be sent as a number; the defaults are type "0" and an empty subtype.
    let numeric = post_group(&app, &admin, &json!({"label": "N", "type": 4}))
        .await
        .expect(201)
        .json();
    assert_eq!(numeric["type"], "4");
    let plain = post_group(&app, &admin, &json!({"label": "P"}))
        .await
        .expect(201)
        .json();
    assert_eq!(
        (plain["type"].as_str(), plain["subtype"].as_str()),
        (Some("0"), Some(""))
    );
    assert_eq!(app.group_rows().await, 3);
}

#[tokio::test]
async fn the_location_of_a_created_record_is_absolute() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let reply = post_group(&app, &admin, &json!({"label": "Abs"})).await.expect(201);
    let id = reply.json()["id"].as_str().unwrap().to_string();
    assert_eq!(
        reply.header("location"),
        Some(format!("{}/api/v2/group/{id}", app.base).as_str())
    );
    let user = send(
        app.request(Method::POST, "/api/v2/user", &admin)
            .json(&json!({"username": "abs@example.com", "password": "long enough"})),
    )
    .await
    .expect(201);
    let id_user = user.json()["id_user"].as_str().unwrap().to_string();
    assert_eq!(
        user.header("location"),
        Some(format!("{}/api/v2/user/{id_user}", app.base).as_str())
    );
}

#[tokio::test]
async fn invalid_group_bodies_are_422_lists() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let cases: Vec<(Value, Expected)> = vec![
        (json!({}), vec![("label", Some("Label cannot be blank."))]),
        (json!({"label": ""}), vec![("label", Some("Label cannot be blank."))]),
        (json!({"label": "   "}), vec![("label", Some("Label cannot be blank."))]),
        (json!({"label": null}), vec![("label", Some("Label cannot be blank."))]),
        (json!({"label": 5}), vec![("label", Some("Label must be a string."))]),
        (
            json!({"label": ["a"]}),
            vec![("label", Some("Label must be a string."))],
        ),
        (json!({"label": "x".repeat(256)}), vec![("label", None)]),
        (json!({"label": "ok", "type": "99"}), vec![("type", None)]),
        (json!({"label": "ok", "type": "Project"}), vec![("type", None)]),
        (json!({"label": "ok", "type": {"a": 1}}), vec![("type", None)]),
        (
            json!({"label": "ok", "subtype": 3}),
            vec![("subtype", Some("Subtype must be a string."))],
        ),
        // Every invalid field is listed, in order.
        (
            json!({"label": 1, "type": "99"}),
            vec![("label", Some("Label must be a string.")), ("type", None)],
        ),
    ];
    for (body, expected) in cases {
        let reply = post_group(&app, &admin, &body).await;
        assert_validation(&reply, &expected, &body.to_string());
    }
    assert_eq!(app.group_rows().await, 0, "nothing was created");
}

#[tokio::test]
async fn edit_and_delete_a_group() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let id = app.create_group(&admin, "Before").await;
    let path = format!("/api/v2/group/{id}");
    let original = send(app.get(&path, &admin)).await.expect(200).json();

    let reply = send(
        app.request(Method::PATCH, &path, &admin)
            .json(&json!({"label": "After", "type": "1"})),
    )
    .await
    .expect(200);
    let record = reply.json();
    assert_eq!(keys(&record), keys(&original));
    assert_eq!(record["label"], "After");
    assert_eq!(record["type"], "1");
    assert_eq!(record["type_label"], "Project");
    assert_eq!(record["created_at"], original["created_at"]);
    assert_eq!(record["subtype"], original["subtype"]);
    assert_eq!(send(app.get(&path, &admin)).await.expect(200).json(), record);
    // An empty PATCH changes nothing.
    let same = send(app.request(Method::PATCH, &path, &admin).json(&json!({})))
        .await
        .expect(200)
        .json();
    assert_eq!(same, record);
    // Invalid values are refused and change nothing.
    let reply = send(app.request(Method::PATCH, &path, &admin).json(&json!({"label": 7}))).await;
    assert_validation(&reply, &[("label", Some("Label must be a string."))], "PATCH label 7");
    assert_eq!(send(app.get(&path, &admin)).await.expect(200).json()["label"], "After");

    // DELETE: 204 with no body; the record stays for administrators with deleted_at.
    let reply = send(app.request(Method::DELETE, &path, &admin)).await.expect(204);
    assert_eq!(reply.text, "");
    assert!(reply.header("content-length").is_none_or(|l| l == "0"));
    let deleted = send(app.get(&path, &admin)).await.expect(200).json();
    assert!(deleted["deleted_at"].is_i64());
    // Unknown ids are 404.
    let unknown = format!("/api/v2/group/{}", uuid::Uuid::new_v4());
    for method in [Method::PATCH, Method::DELETE] {
        let reply = send(
            app.request(method.clone(), &unknown, &admin)
                .json(&json!({"label": "x"})),
        )
        .await;
        assert_eq!(reply.status, 404, "{method}");
        assert_error(&reply.json(), 404);
    }
}

#[tokio::test]
async fn patch_cannot_blank_the_label() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let id = app.create_group(&admin, "Named").await;
    let path = format!("/api/v2/group/{id}");
    for label in ["", "   "] {
        let reply = send(app.request(Method::PATCH, &path, &admin).json(&json!({"label": label}))).await;
        assert_validation(
            &reply,
            &[("label", Some("Label cannot be blank."))],
            &format!("PATCH label {label:?}"),
        );
    }
    assert_eq!(send(app.get(&path, &admin)).await.expect(200).json()["label"], "Named");
}

#[tokio::test]
async fn create_a_user() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let before = devicecloud_store::unix_now();
    let reply = send(
        app.request(Method::POST, "/api/v2/user", &admin)
            .json(&json!({"username": "New.Person@example.com", "password": "a long password"})),
    )
    .await
    .expect(201);
    let body = reply.json();
    assert_eq!(
        keys(&body),
        ["id_user", "username", "is_admin", "disabled", "created_at"]
    );
    let id = body["id_user"].as_str().unwrap();
    assert!(uuid::Uuid::parse_str(id).is_ok());
    assert_eq!(body["username"], "New.Person@example.com");
    assert_eq!(body["is_admin"], json!(false));
    let created = body["created_at"].as_i64().expect("created_at is an integer");
    assert!(created >= before);
    let location = reply.header("location").expect("Location header");
    assert!(location.ends_with(&format!("/api/v2/user/{id}")), "{location}");
    // The account can sign in.
    app.token("New.Person@example.com", "a long password").await;

    // The same name in another case is taken.
    let reply = send(
        app.request(Method::POST, "/api/v2/user", &admin)
            .json(&json!({"username": "new.person@EXAMPLE.com", "password": "another password"})),
    )
    .await;
    assert_validation(&reply, &[("username", None)], "duplicate username");

    // An administrator account.
    let reply = send(
        app.request(Method::POST, "/api/v2/user", &admin)
            .json(&json!({"username": "boss@example.com", "password": "a long password", "is_admin": true})),
    )
    .await
    .expect(201);
    assert_eq!(reply.json()["is_admin"], json!(true));

    // Invalid bodies.
    let cases: Vec<(Value, Expected)> = vec![
        (
            json!({}),
            vec![
                ("username", Some("Username cannot be blank.")),
                ("password", Some("Password cannot be blank.")),
            ],
        ),
        (
            json!({"username": "x@example.com"}),
            vec![("password", Some("Password cannot be blank."))],
        ),
        (
            json!({"username": 5, "password": "a long password"}),
            vec![("username", Some("Username must be a string."))],
        ),
        (
            json!({"username": "y@example.com", "password": "short"}),
            vec![("password", None)],
        ),
        (
            json!({"username": "z@example.com", "password": "a long password", "is_admin": "maybe"}),
            vec![("is_admin", None)],
        ),
    ];
    for (body, expected) in cases {
        let reply = send(app.request(Method::POST, "/api/v2/user", &admin).json(&body)).await;
        assert_validation(&reply, &expected, &body.to_string());
    }
}

#[tokio::test]
async fn member_errors() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let id = app.create_group(&admin, "Members").await;
    let (user_id, _) = app.user().await;
    let path = format!("/api/v2/group/{id}/member/{user_id}");
    for body in [
        json!({"role": "owner"}),
        json!({"role": "Viewer"}),
        json!({}),
        json!({"role": 1}),
    ] {
        let reply = send(app.request(Method::PUT, &path, &admin).json(&body)).await;
        assert_validation(&reply, &[("role", None)], &body.to_string());
    }
    // An unknown user or group is 404.
    let reply = send(
        app.request(
            Method::PUT,
            &format!("/api/v2/group/{id}/member/{}", uuid::Uuid::new_v4()),
            &admin,
        )
        .json(&json!({"role": "viewer"})),
    )
    .await;
    assert_eq!(reply.status, 404, "{}", reply.text);
    assert_error(&reply.json(), 404);
    let reply = send(
        app.request(
            Method::PUT,
            &format!("/api/v2/group/{}/member/{user_id}", uuid::Uuid::new_v4()),
            &admin,
        )
        .json(&json!({"role": "viewer"})),
    )
    .await;
    assert_eq!(reply.status, 404, "{}", reply.text);
    assert_error(&reply.json(), 404);
    // Every role is accepted, and PUT again changes it.
    for role in ["viewer", "operator", "manager"] {
        let reply = send(app.request(Method::PUT, &path, &admin).json(&json!({"role": role})))
            .await
            .expect(200);
        assert_eq!(reply.json(), json!({"id_group": id, "id_user": user_id, "role": role}));
    }
}

#[tokio::test]
async fn concurrent_creations_of_one_username() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let post = |name: &'static str| {
        send(
            app.request(Method::POST, "/api/v2/user", &admin)
                .json(&json!({"username": name, "password": "a long password"})),
        )
    };
    let (a, b) = tokio::join!(post("race@example.com"), post("RACE@example.com"));
    let mut statuses = [a.status, b.status];
    statuses.sort();
    assert_eq!(statuses, [201, 422], "{} / {}", a.text, b.text);
    let refused = if a.status == 422 { a } else { b };
    assert_validation(&refused, &[("username", None)], "the second of two");
}

#[tokio::test]
async fn fields_apply_to_write_responses() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let created = send(
        app.request(Method::POST, "/api/v2/group?fields=label,id", &admin)
            .json(&json!({"label": "F"})),
    )
    .await
    .expect(201)
    .json();
    assert_eq!(keys(&created), ["id", "label", "_links"]);
    let id = created["id"].as_str().unwrap();
    let patched = send(
        app.request(Method::PATCH, &format!("/api/v2/group/{id}?fields=label"), &admin)
            .json(&json!({"label": "G"})),
    )
    .await
    .expect(200)
    .json();
    assert_eq!(keys(&patched), ["label", "_links"]);
}

#[tokio::test]
async fn view_a_user() {
    let app = TestApp::spawn().await;
    let (admin_id, admin) = app.admin().await;
    let (user_id, user) = app.user().await;
    let (other_id, _) = app.user().await;
    let body = send(app.get(&format!("/api/v2/user/{user_id}"), &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(
        keys(&body),
        ["id_user", "username", "is_admin", "disabled", "created_at"]
    );
    assert_eq!(body["id_user"], user_id);
    assert_eq!(body["is_admin"], json!(false));
    assert!(body["created_at"].is_i64());
    assert!(body.get("password_hash").is_none());
    // A user sees themselves, not others.
    send(app.get(&format!("/api/v2/user/{user_id}"), &user))
        .await
        .expect(200);
    for id in [other_id, admin_id, uuid::Uuid::new_v4().to_string()] {
        let reply = send(app.get(&format!("/api/v2/user/{id}"), &user)).await;
        assert_eq!(reply.status, 404, "{}", reply.text);
        assert_error(&reply.json(), 404);
    }
}
