//! Rights (docs/api.md, "Rights"): what each role sees and may do on groups and their members,
//! deleted groups, and role changes taking effect at once.

mod common;

use common::{Reply, TestApp, assert_error, assert_error_exact, send};
use reqwest::Method;
use serde_json::{Value, json};

fn ids(body: &Value) -> Vec<String> {
    body["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect()
}

/// The 401 of a visible record whose action needs a higher role.
fn assert_forbidden(reply: &Reply) {
    assert_eq!(reply.status, 401, "body: {}", reply.text);
    let body = reply.json();
    assert_error(&body, 401);
    assert_eq!(body["name"], "Unauthorized");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
}

fn assert_not_found(reply: &Reply) {
    assert_eq!(reply.status, 404, "body: {}", reply.text);
    let body = reply.json();
    assert_error(&body, 404);
    assert_eq!(body["name"], "Not Found");
}

async fn patch(app: &TestApp, token: &str, id: &str, body: Value) -> Reply {
    send(
        app.request(Method::PATCH, &format!("/api/v2/group/{id}"), token)
            .json(&body),
    )
    .await
}

#[tokio::test]
async fn a_user_without_roles_sees_nothing() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let id = app.create_group(&admin, "Hidden").await;
    let (_, user) = app.user().await;
    for path in ["/api/v2/group/index", "/api/v2/group"] {
        let reply = send(app.get(path, &user)).await.expect(200);
        let body = reply.json();
        assert_eq!(body["items"], json!([]));
        assert_eq!(
            body["_meta"],
            json!({"totalCount": 0, "pageCount": 0, "currentPage": 1, "perPage": 20})
        );
        assert_eq!(reply.header("x-pagination-total-count"), Some("0"));
    }
    // Filtering on its id does not reveal it either.
    let body = send(app.get(&format!("/api/v2/group/index?filter[id]={id}"), &user))
        .await
        .expect(200)
        .json();
    assert_eq!(body["_meta"]["totalCount"], 0);
    // The record answers 404, like a group that does not exist; so do the writes.
    let hidden = send(app.get(&format!("/api/v2/group/{id}"), &user)).await;
    assert_not_found(&hidden);
    let absent = send(app.get(&format!("/api/v2/group/{}", uuid::Uuid::new_v4()), &user)).await;
    assert_not_found(&absent);
    assert_not_found(&patch(&app, &user, &id, json!({"label": "x"})).await);
    assert_not_found(&send(app.request(Method::DELETE, &format!("/api/v2/group/{id}"), &user)).await);
}

#[tokio::test]
async fn a_viewer_sees_only_their_groups_and_cannot_edit() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let mine = app.create_group(&admin, "Mine").await;
    let other = app.create_group(&admin, "Other").await;
    let (viewer_id, viewer) = app.user().await;
    app.grant(&admin, &mine, &viewer_id, "viewer").await;

    let body = send(app.get("/api/v2/group/index", &viewer)).await.expect(200).json();
    assert_eq!(ids(&body), [mine.as_str()]);
    assert_eq!(body["_meta"]["totalCount"], 1);
    let record = send(app.get(&format!("/api/v2/group/{mine}"), &viewer))
        .await
        .expect(200)
        .json();
    assert_eq!(record["label"], "Mine");
    assert_not_found(&send(app.get(&format!("/api/v2/group/{other}"), &viewer)).await);

    // Writes need manager: 401 with the error body, and nothing changes.
    let reply = patch(&app, &viewer, &mine, json!({"label": "Changed"})).await;
    assert_forbidden(&reply);
    assert_eq!(reply.header("www-authenticate"), Some("Bearer realm=\"api\""));
    assert_forbidden(&send(app.request(Method::DELETE, &format!("/api/v2/group/{mine}"), &viewer)).await);
    let record = send(app.get(&format!("/api/v2/group/{mine}"), &viewer))
        .await
        .expect(200)
        .json();
    assert_eq!(record["label"], "Mine");
    assert!(record["deleted_at"].is_null());
    // Only administrators create groups and accounts.
    assert_forbidden(
        &send(
            app.request(Method::POST, "/api/v2/group", &viewer)
                .json(&json!({"label": "New"})),
        )
        .await,
    );
    assert_forbidden(
        &send(
            app.request(Method::POST, "/api/v2/user", &viewer)
                .json(&json!({"username": "x@example.com", "password": "long enough"})),
        )
        .await,
    );
    assert_eq!(app.group_rows().await, 2);
}

#[tokio::test]
async fn an_operator_cannot_edit_a_manager_can() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let id = app.create_group(&admin, "Site").await;
    let (operator_id, operator) = app.user().await;
    let (manager_id, manager) = app.user().await;
    app.grant(&admin, &id, &operator_id, "operator").await;
    app.grant(&admin, &id, &manager_id, "manager").await;

    assert_forbidden(&patch(&app, &operator, &id, json!({"label": "By operator"})).await);
    let reply = patch(&app, &manager, &id, json!({"label": "By manager"}))
        .await
        .expect(200);
    let record = reply.json();
    assert_eq!(record["label"], "By manager");
    assert_eq!(record["id"], id);
    // Everyone with a role sees the change.
    let seen = send(app.get(&format!("/api/v2/group/{id}"), &operator))
        .await
        .expect(200)
        .json();
    assert_eq!(seen["label"], "By manager");
    // A manager is not an administrator.
    assert_forbidden(
        &send(
            app.request(Method::POST, "/api/v2/group", &manager)
                .json(&json!({"label": "New"})),
        )
        .await,
    );
}

#[tokio::test]
async fn members_are_managed_by_managers_not_viewers() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let id = app.create_group(&admin, "Team").await;
    let (manager_id, manager) = app.user().await;
    let (viewer_id, viewer) = app.user().await;
    let (newcomer_id, newcomer) = app.user().await;
    app.grant(&admin, &id, &manager_id, "manager").await;
    app.grant(&admin, &id, &viewer_id, "viewer").await;
    let member = |who: &str| format!("/api/v2/group/{id}/member/{who}");

    // A viewer can neither add nor remove.
    assert_forbidden(
        &send(
            app.request(Method::PUT, &member(&newcomer_id), &viewer)
                .json(&json!({"role": "viewer"})),
        )
        .await,
    );
    assert_forbidden(
        &send(
            app.request(Method::DELETE, &member(&manager_id), &viewer)
                .json(&json!({})),
        )
        .await,
    );
    assert_eq!(
        send(app.get("/api/v2/group/index", &newcomer)).await.expect(200).json()["_meta"]["totalCount"],
        0
    );

    // A manager adds a member, who sees the group at once.
    let reply = send(
        app.request(Method::PUT, &member(&newcomer_id), &manager)
            .json(&json!({"role": "viewer"})),
    )
    .await
    .expect(200);
    assert_eq!(
        reply.json(),
        json!({"id_group": id, "id_user": newcomer_id, "role": "viewer"})
    );
    assert_eq!(
        ids(&send(app.get("/api/v2/group/index", &newcomer)).await.expect(200).json()),
        [id.as_str()]
    );
    // … and removes one: 204, no body, and the group is gone for them at once.
    let reply = send(app.request(Method::DELETE, &member(&viewer_id), &manager))
        .await
        .expect(204);
    assert_eq!(reply.text, "");
    assert_not_found(&send(app.get(&format!("/api/v2/group/{id}"), &viewer)).await);
    assert_eq!(
        send(app.get("/api/v2/group/index", &viewer)).await.expect(200).json()["_meta"]["totalCount"],
        0
    );
    // Removing a membership that does not exist is 404.
    assert_not_found(&send(app.request(Method::DELETE, &member(&viewer_id), &manager)).await);
    // A manager of another group cannot touch this one: it is invisible to them.
    let elsewhere = app.create_group(&admin, "Elsewhere").await;
    assert_not_found(
        &send(
            app.request(
                Method::PUT,
                &format!("/api/v2/group/{elsewhere}/member/{newcomer_id}"),
                &manager,
            )
            .json(&json!({"role": "viewer"})),
        )
        .await,
    );
}

#[tokio::test]
async fn a_role_change_takes_effect_immediately() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let id = app.create_group(&admin, "Changing").await;
    let (user_id, user) = app.user().await;
    app.grant(&admin, &id, &user_id, "viewer").await;
    // Read once so that the roles are cached.
    send(app.get(&format!("/api/v2/group/{id}"), &user)).await.expect(200);
    assert_forbidden(&patch(&app, &user, &id, json!({"label": "no"})).await);
    // Promotion: the next request may edit.
    app.grant(&admin, &id, &user_id, "manager").await;
    patch(&app, &user, &id, json!({"label": "yes"})).await.expect(200);
    // Demotion: the next request may not.
    app.grant(&admin, &id, &user_id, "viewer").await;
    assert_forbidden(&patch(&app, &user, &id, json!({"label": "no again"})).await);
    // Removal: the next request does not see the group.
    send(app.request(Method::DELETE, &format!("/api/v2/group/{id}/member/{user_id}"), &admin))
        .await
        .expect(204);
    assert_not_found(&send(app.get(&format!("/api/v2/group/{id}"), &user)).await);
    assert_eq!(
        send(app.get("/api/v2/group", &user)).await.expect(200).json()["_meta"]["totalCount"],
        0
    );
}

#[tokio::test]
async fn deleted_groups_are_seen_by_administrators_only() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let kept = app.create_group(&admin, "Kept").await;
    let gone = app.create_group(&admin, "Gone").await;
    let (manager_id, manager) = app.user().await;
    app.grant(&admin, &kept, &manager_id, "manager").await;
    app.grant(&admin, &gone, &manager_id, "manager").await;

    let before = devicecloud_store::unix_now();
    let reply = send(app.request(Method::DELETE, &format!("/api/v2/group/{gone}"), &manager))
        .await
        .expect(204);
    assert_eq!(reply.text, "");

    // The manager no longer sees it, in the list or by id, and cannot edit it.
    let body = send(app.get("/api/v2/group/index", &manager)).await.expect(200).json();
    assert_eq!(ids(&body), [kept.as_str()]);
    assert_not_found(&send(app.get(&format!("/api/v2/group/{gone}"), &manager)).await);
    assert_not_found(&patch(&app, &manager, &gone, json!({"label": "back"})).await);
    let filtered = send(app.get("/api/v2/group/index?filter[deleted_at][gt]=0", &manager))
        .await
        .expect(200)
        .json();
    assert_eq!(filtered["_meta"]["totalCount"], 0);

    // The administrator sees it, with deleted_at set.
    let body = send(app.get("/api/v2/group/index", &admin)).await.expect(200).json();
    assert_eq!(body["_meta"]["totalCount"], 2);
    let record = send(app.get(&format!("/api/v2/group/{gone}"), &admin))
        .await
        .expect(200)
        .json();
    let deleted_at = record["deleted_at"].as_i64().expect("deleted_at is an integer");
    assert!(deleted_at >= before && deleted_at <= devicecloud_store::unix_now());
    let only_deleted = send(app.get("/api/v2/group/index?filter[deleted_at][gt]=0", &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(ids(&only_deleted), [gone.as_str()]);
    let alive = send(app.get("/api/v2/group/index?filter[deleted_at]=NULL", &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(ids(&alive), [kept]);
}

#[tokio::test]
async fn a_missing_role_error_is_the_specification_body() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let id = app.create_group(&admin, "G").await;
    let (user_id, user) = app.user().await;
    app.grant(&admin, &id, &user_id, "viewer").await;
    let reply = patch(&app, &user, &id, json!({"label": "x"})).await;
    assert_eq!(reply.status, 401);
    let body = reply.json();
    assert_eq!(common::keys(&body), ["name", "message", "code", "status"]);
    // Yii's AccessControl message for a denied action.
    assert_error_exact(
        &body,
        401,
        "Unauthorized",
        "You are not allowed to perform this action.",
    );
    assert_eq!(reply.header("www-authenticate"), Some("Bearer realm=\"api\""));
}

fn labels(body: &Value) -> Vec<String> {
    body["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["label"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn writes_show_in_lists_at_once() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let (a_id, a) = app.user().await;
    let (b_id, b) = app.user().await;
    let ga = app.create_group(&admin, "A's").await;
    let gb = app.create_group(&admin, "B's").await;
    app.grant(&admin, &ga, &a_id, "manager").await;
    app.grant(&admin, &gb, &b_id, "manager").await;
    let list = |token: String| {
        let app = &app;
        async move {
            send(app.get("/api/v2/group/index?sort=label", &token))
                .await
                .expect(200)
                .json()
        }
    };
    // The same request by two users answers each their own groups.
    assert_eq!(labels(&list(a.clone()).await), ["A's"]);
    assert_eq!(labels(&list(b.clone()).await), ["B's"]);
    assert_eq!(labels(&list(admin.clone()).await), ["A's", "B's"]);
    // An edit shows in every list at once.
    patch(&app, &a, &ga, json!({"label": "A renamed"})).await.expect(200);
    assert_eq!(labels(&list(a.clone()).await), ["A renamed"]);
    assert_eq!(labels(&list(admin.clone()).await), ["A renamed", "B's"]);
    // A creation too.
    app.create_group(&admin, "C's").await;
    assert_eq!(labels(&list(admin.clone()).await), ["A renamed", "B's", "C's"]);
    assert_eq!(labels(&list(b.clone()).await), ["B's"]);
    // A new role.
    app.grant(&admin, &ga, &b_id, "viewer").await;
    assert_eq!(labels(&list(b.clone()).await), ["A renamed", "B's"]);
    // A removed role.
    send(app.request(Method::DELETE, &format!("/api/v2/group/{ga}/member/{b_id}"), &a))
        .await
        .expect(204);
    assert_eq!(labels(&list(b.clone()).await), ["B's"]);
    // A deletion.
    send(app.request(Method::DELETE, &format!("/api/v2/group/{gb}"), &b))
        .await
        .expect(204);
    assert_eq!(list(b.clone()).await["_meta"]["totalCount"], 0);
    let all = list(admin.clone()).await;
    assert_eq!(labels(&all), ["A renamed", "B's", "C's"]);
    assert!(all["items"][1]["deleted_at"].is_i64());
    // HEAD agrees with GET.
    let head = send(app.request(Method::HEAD, "/api/v2/group/index?sort=label", &b))
        .await
        .expect(200);
    assert_eq!(head.header("x-pagination-total-count"), Some("0"));
}
