//! Provisioning and managing gateways (docs/api.md, "Management endpoints"): POST, GET, PATCH,
//! DELETE (archive) and rotate-token on /api/v2/physical-device, with rights and validation.

mod common;

use common::{TestApp, assert_error, keys, send};
use devicecloud_engine::auth::secrets::token_hash;
use devicecloud_store::devices;
use reqwest::Method;
use serde_json::{Value, json};

async fn provision(app: &TestApp, token: &str, body: Value) -> common::Reply {
    send(app.request(Method::POST, "/api/v2/physical-device", token).json(&body)).await
}

#[tokio::test]
async fn a_manager_provisions_a_gateway_and_gets_its_token_once() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    let (manager_id, manager) = app.user().await;
    app.grant(&admin, &group, &manager_id, "manager").await;

    let reply = provision(
        &app,
        &manager,
        json!({"id_group": group, "serial_hardware": "GW-0001", "kind": "CORE", "label": "Roof", "expected_offline_interval": 600}),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let body = reply.json();
    let mut expected: Vec<String> = common::DEVICE_FIELDS.iter().map(|s| s.to_string()).collect();
    expected.push("device_token".into());
    assert_eq!(keys(&body), expected);
    let id = body["id_physical_device"].as_str().unwrap().to_string();
    assert_eq!(
        reply.header("location").unwrap(),
        app.url(&format!("/api/v2/physical-device/{id}"))
    );
    assert_eq!(body["serial_hardware"], "GW-0001");
    assert_eq!(body["id_device_type"], "CORE");
    assert_eq!(body["id_group"], group.as_str());
    assert_eq!(body["label"], "Roof");
    assert_eq!(body["is_connected"], 0);
    assert_eq!(body["expected_offline_interval"], 600);
    assert!(body["id_iot_device"].as_str().is_some_and(|s| s.len() == 36));
    assert!(body["archived_at"].is_null() && body["id_parent"].is_null());
    let token = body["device_token"].as_str().unwrap();
    assert_eq!(token.len(), 64);
    let auth = devices::gateway_auth(&app.state.db, "GW-0001").await.unwrap().unwrap();
    assert_eq!(auth.device_token_hash.as_deref(), Some(token_hash(token).as_str()));

    // The token is shown only once: the record read later has none.
    let reply = send(app.get(&format!("/api/v2/physical-device/{id}"), &manager)).await;
    assert_eq!(reply.status, 200);
    assert_eq!(keys(&reply.json()), common::DEVICE_FIELDS);
    let reply = send(app.get(
        &format!("/api/v2/physical-device/{id}?fields=serial_hardware,label"),
        &manager,
    ))
    .await;
    assert_eq!(keys(&reply.json()), ["serial_hardware", "label", "_links"]);
}

#[tokio::test]
async fn provisioning_is_validated() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    let ok = json!({"id_group": group, "serial_hardware": "GW-1", "kind": "GO"});
    assert_eq!(provision(&app, &admin, ok.clone()).await.status, 201);

    let duplicate = provision(&app, &admin, ok).await;
    assert_eq!(duplicate.status, 422);
    assert_eq!(
        duplicate.json(),
        json!([{"field": "serial_hardware", "message": "Serial Hardware has already been taken."}])
    );

    let reply = provision(&app, &admin, json!({"serial_hardware": "has space", "kind": "MAX"})).await;
    assert_eq!(reply.status, 422);
    let fields: Vec<_> = reply
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(fields, ["id_group", "serial_hardware", "kind"]);

    let reply = provision(
        &app,
        &admin,
        json!({"id_group": "no-such-group", "serial_hardware": "GW-2", "kind": "GO"}),
    )
    .await;
    assert_eq!(reply.status, 422);
    assert_eq!(reply.json()[0]["field"], "id_group");

    let reply = send(
        app.request(Method::POST, "/api/v2/physical-device", &admin)
            .body("{not json"),
    )
    .await;
    assert_eq!(reply.status, 400);
    assert_error(&reply.json(), 400);
}

#[tokio::test]
async fn rights_decide_who_provisions_reads_and_edits() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    let (viewer_id, viewer) = app.user().await;
    app.grant(&admin, &group, &viewer_id, "viewer").await;
    let (_, stranger) = app.user().await;

    let body = json!({"id_group": group, "serial_hardware": "GW-9", "kind": "PLUS"});
    let reply = provision(&app, &viewer, body.clone()).await;
    assert_eq!(reply.status, 401);
    assert_error(&reply.json(), 401);
    // A group the caller cannot see is a field error (docs/api.md, "Management endpoints").
    let reply = provision(&app, &stranger, body.clone()).await;
    assert_eq!(reply.status, 422);
    assert_eq!(reply.json()[0]["field"], "id_group");

    let id = provision(&app, &admin, body).await.json()["id_physical_device"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/api/v2/physical-device/{id}");
    assert_eq!(send(app.get(&path, &viewer)).await.status, 200);
    assert_eq!(send(app.get(&path, &stranger)).await.status, 404);
    let patch = send(app.request(Method::PATCH, &path, &viewer).json(&json!({"label": "x"}))).await;
    assert_eq!(patch.status, 401);
    assert_eq!(send(app.request(Method::DELETE, &path, &stranger)).await.status, 404);
    assert_eq!(
        send(app.request(Method::POST, &format!("{path}/rotate-token"), &viewer))
            .await
            .status,
        401
    );
    // A role too low for a command is 401; once the group is deleted, its devices are not found
    // for its members, commands included, and still shown to administrators.
    assert_eq!(send(app.get(&format!("{path}/ping"), &viewer)).await.status, 401);
    send(app.request(Method::DELETE, &format!("/api/v2/group/{group}"), &admin))
        .await
        .expect(204);
    assert_eq!(send(app.get(&path, &viewer)).await.status, 404);
    assert_eq!(send(app.get(&format!("{path}/ping"), &viewer)).await.status, 404);
    assert_eq!(send(app.get(&path, &admin)).await.status, 200);
}

#[tokio::test]
async fn patch_rotate_and_archive() {
    let app = TestApp::spawn().await;
    let (admin_id, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    let created = provision(
        &app,
        &admin,
        json!({"id_group": group, "serial_hardware": "GW-5", "kind": "GO"}),
    )
    .await
    .json();
    let id = created["id_physical_device"].as_str().unwrap().to_string();
    let path = format!("/api/v2/physical-device/{id}");

    let reply = send(
        app.request(Method::PATCH, &path, &admin)
            .json(&json!({"label": "Van 5", "expected_live_status": 1, "expected_offline_interval": 120})),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let body = reply.json();
    assert_eq!(
        (body["label"].clone(), body["expected_live_status"].clone()),
        (json!("Van 5"), json!(1))
    );
    assert_eq!(body["expected_offline_interval"], 120);
    let bad = send(
        app.request(Method::PATCH, &path, &admin)
            .json(&json!({"expected_live_status": 2})),
    )
    .await;
    assert_eq!(bad.status, 422);
    assert_eq!(bad.json()[0]["field"], "expected_live_status");

    let old = created["device_token"].as_str().unwrap().to_string();
    let reply = send(app.request(Method::POST, &format!("{path}/rotate-token"), &admin)).await;
    assert_eq!(reply.status, 200);
    let new = reply.json()["device_token"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    let auth = devices::gateway_auth(&app.state.db, "GW-5").await.unwrap().unwrap();
    assert_eq!(auth.device_token_hash.as_deref(), Some(token_hash(&new).as_str()));

    let reply = send(app.request(Method::DELETE, &path, &admin)).await;
    assert_eq!(reply.status, 204);
    assert!(reply.text.is_empty());
    let body = send(app.get(&path, &admin)).await.json();
    assert_eq!(body["archived_serial"], "GW-5");
    assert_eq!(body["archived_by"], admin_id.as_str());
    assert!(body["archived_at"].as_i64().is_some());
    assert_eq!(send(app.request(Method::DELETE, &path, &admin)).await.status, 404);
    assert_eq!(
        send(app.request(Method::POST, &format!("{path}/rotate-token"), &admin))
            .await
            .status,
        404
    );
    let auth = devices::gateway_auth(&app.state.db, "GW-5").await.unwrap().unwrap();
    // Archived; the token's hash stays only to answer its CONNECT "not authorized".
    assert!(auth.archived_at.is_some() && auth.device_token_hash.is_some());

    // The serial is free again; CONNECT then finds the live device first.
    let again = provision(
        &app,
        &admin,
        json!({"id_group": group, "serial_hardware": "GW-5", "kind": "GO"}),
    )
    .await;
    assert_eq!(again.status, 201);
    let auth = devices::gateway_auth(&app.state.db, "GW-5").await.unwrap().unwrap();
    assert!(auth.archived_at.is_none());
    assert_eq!(
        auth.id_physical_device,
        again.json()["id_physical_device"].as_str().unwrap()
    );
}

#[tokio::test]
async fn device_status_follows_expectation_and_silence() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    let body = json!({"id_group": group, "serial_hardware": "GW-ST", "kind": "CORE", "expected_offline_interval": 600});
    let id = provision(&app, &admin, body).await.json()["id_physical_device"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/api/v2/physical-device/{id}");
    let status = |body: Value| body["device_status"].as_i64().unwrap();
    assert_eq!(status(send(app.get(&path, &admin)).await.json()), 0, "expected off");

    let reply = send(
        app.request(Method::PATCH, &path, &admin)
            .json(&json!({"expected_live_status": 1})),
    )
    .await;
    assert_eq!(status(reply.json()), 1, "expected on, created just now");

    // Silent for longer than the interval: expected on, device off.
    let silence = "UPDATE physical_devices SET created_at = created_at - 3600 WHERE id_physical_device = $1";
    match &app.state.db {
        devicecloud_store::Db::Sqlite(p, ..) => sqlx::query(silence).bind(&id).execute(p).await.map(drop).unwrap(),
        devicecloud_store::Db::Postgres(p) => sqlx::query(silence).bind(&id).execute(p).await.map(drop).unwrap(),
    };
    assert_eq!(
        devices::refresh_status(&app.state.db, devicecloud_store::unix_now())
            .await
            .unwrap(),
        1
    );
    assert_eq!(status(send(app.get(&path, &admin)).await.json()), 2);

    // Data arriving brings it back.
    let now = devicecloud_store::unix_now();
    devicecloud_store::ingest::write(&app.state.db, &[], &[(id.clone(), now)])
        .await
        .unwrap();
    devices::refresh_status(&app.state.db, now).await.unwrap();
    assert_eq!(status(send(app.get(&path, &admin)).await.json()), 1);
}
