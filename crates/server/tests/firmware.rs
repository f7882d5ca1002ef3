//! Firmware (docs/api.md, "Firmware") over real HTTP: the public key gateways check manifests
//! with is the one of the signing key file, the same after a restart and on every node that
//! has the file; images uploaded as multipart, signed, listed and deleted with their rights,
//! every refusal leaving nothing stored; and the gateway's download with its credentials,
//! ranges and tags, only of its kind and group.

mod common;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::{Reply, TestApp, assert_error, send};
use devicecloud_engine::firmware::signing::Signer;
use devicecloud_engine::settings::Settings;
use devicecloud_protocol::ModuleKind;
use devicecloud_protocol::firmware::signature_holds;
use devicecloud_simulator::Provisioner;
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

#[tokio::test]
async fn the_public_key_is_the_signing_key_files_on_every_node() {
    let dir = std::env::temp_dir().join(format!("dc-firmware-key-{}", uuid::Uuid::new_v4()));
    let file = dir.join("signing.key");
    let settings = || Settings {
        signing_key_file: Some(file.clone()),
        ..Settings::default()
    };
    let first = TestApp::spawn_with(settings()).await;
    let (_, admin) = first.admin().await;
    let answer = send(first.get("/api/v2/firmware/public-key", &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(answer["algorithm"], "ed25519");
    let key = answer["public_key"].as_str().unwrap().to_string();
    assert_eq!(STANDARD.decode(&key).unwrap().len(), 32);
    assert_eq!(answer.as_object().unwrap().len(), 2);

    // Another service with the same file (a second node, or this one restarted) signs alike.
    let second = TestApp::spawn_with(settings()).await;
    let (_, admin2) = second.admin().await;
    let again = send(second.get("/api/v2/firmware/public-key", &admin2))
        .await
        .expect(200)
        .json();
    assert_eq!(again["public_key"], key.as_str());
    let signer = Signer::load(Some(&file)).unwrap();
    assert!(signature_holds(&key, "manifest", &signer.sign("manifest")));

    // A service with no file has a key of its own.
    let other = TestApp::spawn().await;
    let (_, admin3) = other.admin().await;
    let theirs = send(other.get("/api/v2/firmware/public-key", &admin3))
        .await
        .expect(200)
        .json();
    assert_ne!(theirs["public_key"], key.as_str());

    let anonymous = send(first.http.get(first.url("/api/v2/firmware/public-key"))).await;
    assert_eq!(anonymous.status, 401);
    std::fs::remove_dir_all(dir).unwrap();
}

/// An image of `size` bytes that differs per `seed`.
fn image(size: usize, seed: u8) -> Vec<u8> {
    (0..size)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// The text fields of an upload, in order.
fn fields(kind: &str, component: &str, version: &str, id_group: Option<&str>) -> Vec<(&'static str, String)> {
    let mut fields = vec![
        ("kind", kind.to_string()),
        ("component", component.to_string()),
        ("version", version.to_string()),
    ];
    if let Some(group) = id_group {
        fields.push(("id_group", group.to_string()));
    }
    fields
}

/// Uploads `bytes` with `fields`, the file first or last.
async fn upload(
    app: &TestApp,
    token: &str,
    fields: &[(&'static str, String)],
    bytes: &[u8],
    file_first: bool,
) -> Reply {
    let file = || Part::bytes(bytes.to_vec()).file_name("image.bin");
    let mut form = Form::new();
    if file_first {
        form = form.part("file", file());
    }
    for (name, value) in fields {
        form = form.text(*name, value.clone());
    }
    if !file_first {
        form = form.part("file", file());
    }
    send(app.request(Method::POST, "/api/v2/firmware", token).multipart(form)).await
}

/// Uploads as [`upload`] (fields first) and expects the image stored; its record.
async fn stored(app: &TestApp, token: &str, fields: &[(&'static str, String)], bytes: &[u8]) -> Value {
    upload(app, token, fields, bytes, false).await.expect(201).json()
}

#[tokio::test]
async fn images_are_uploaded_signed_listed_and_deleted_with_their_rights() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "firmware rights").await;
    let other_group = app.create_group(&admin, "firmware other").await;
    let key = send(app.get("/api/v2/firmware/public-key", &admin))
        .await
        .expect(200)
        .json()["public_key"]
        .as_str()
        .unwrap()
        .to_string();

    let bytes = image(600 * 1024, 1);
    let created = upload(
        &app,
        &admin,
        &fields("PLUS", "app", "2.5.0", Some(&group)),
        &bytes,
        false,
    )
    .await
    .expect(201);
    let record = created.json();
    assert_eq!(
        common::keys(&record),
        [
            "id_firmware",
            "kind",
            "component",
            "version",
            "size",
            "sha256",
            "signature",
            "manifest",
            "id_group",
            "created_at",
            "created_by",
            "_links"
        ]
    );
    let id = record["id_firmware"].as_str().unwrap().to_string();
    assert!(
        created
            .header("location")
            .unwrap()
            .ends_with(&format!("/api/v2/firmware/{id}"))
    );
    assert_eq!(record["size"], bytes.len());
    assert_eq!(record["sha256"], hex::encode(Sha256::digest(&bytes)));
    assert_eq!(record["id_group"], group.as_str());
    let manifest = record["manifest"].as_str().unwrap();
    assert_eq!(
        manifest,
        format!(
            r#"{{"id_firmware":"{id}","kind":"PLUS","component":"app","version":"2.5.0","size":{},"sha256":"{}"}}"#,
            bytes.len(),
            record["sha256"].as_str().unwrap()
        )
    );
    assert!(signature_holds(&key, manifest, record["signature"].as_str().unwrap()));

    // The file before the fields works as well; an image for every group is the
    // administrator's.
    let global = upload(
        &app,
        &admin,
        &fields("PLUS", "platform", "6.0.0", None),
        &image(1000, 2),
        true,
    )
    .await
    .expect(201)
    .json();
    assert_eq!(global["id_group"], Value::Null);
    let also_global = stored(&app, &admin, &fields("GO", "app", "6.0.0", Some("")), &image(10, 2)).await;
    assert_eq!(also_global["id_group"], Value::Null);

    // Refusals, each leaving nothing stored.
    let again = upload(
        &app,
        &admin,
        &fields("PLUS", "app", "2.5.0", Some(&group)),
        &image(10, 3),
        false,
    )
    .await;
    assert_eq!(field_of(&again.expect(422).json()), "version");
    assert!(again_field(&app, &admin, &fields("TOASTER", "app", "1", Some(&group)), "kind").await);
    assert!(again_field(&app, &admin, &fields("PLUS", "kernel", "1", Some(&group)), "component").await);
    assert!(again_field(&app, &admin, &fields("PLUS", "app", "1 0", Some(&group)), "version").await);
    assert!(
        again_field(
            &app,
            &admin,
            &fields("PLUS", "app", "1", Some("no-such-group")),
            "id_group"
        )
        .await
    );
    let mut missing = fields("PLUS", "app", "3.0.0", Some(&group));
    missing.remove(0);
    assert!(again_field(&app, &admin, &missing, "kind").await);
    let empty = upload(&app, &admin, &fields("PLUS", "app", "3.0.0", Some(&group)), &[], false).await;
    assert_eq!(field_of(&empty.expect(422).json()), "file");
    let no_file = Form::new()
        .text("kind", "PLUS")
        .text("component", "app")
        .text("version", "3.0.0");
    let reply = send(app.request(Method::POST, "/api/v2/firmware", &admin).multipart(no_file)).await;
    assert_eq!(field_of(&reply.expect(422).json()), "file");
    let json_body = send(
        app.request(Method::POST, "/api/v2/firmware", &admin)
            .json(&json!({"kind": "PLUS"})),
    )
    .await;
    assert_error(&json_body.expect(415).json(), 415);
    // Of all this, the three images stored first, and nothing else.
    assert_eq!(common::count(&app.state.db, "SELECT COUNT(*) FROM firmware").await, 3);
    assert_eq!(
        common::count(&app.state.db, "SELECT COUNT(*) FROM firmware_uploads").await,
        0
    );
    assert_eq!(
        common::count(&app.state.db, "SELECT COUNT(DISTINCT blob) FROM firmware_chunks").await,
        3
    );

    // Rights: a manager stores for their group only; a viewer and a stranger store nothing.
    let (manager_id, manager) = app.user().await;
    app.grant(&admin, &group, &manager_id, "manager").await;
    let (viewer_id, viewer) = app.user().await;
    app.grant(&admin, &group, &viewer_id, "viewer").await;
    let (_, stranger) = app.user().await;
    let managed = upload(
        &app,
        &manager,
        &fields("CORE", "app", "1.0.0", Some(&group)),
        &image(100, 4),
        false,
    )
    .await
    .expect(201)
    .json();
    assert_eq!(managed["created_by"], manager_id.as_str());
    // No group: administrators only (401); a group the manager does not manage: not theirs to
    // name (422 on id_group); a viewer: 401.
    for (token, id_group, status) in [
        (&manager, None, 401),
        (&manager, Some(other_group.as_str()), 422),
        (&viewer, Some(group.as_str()), 401),
    ] {
        let refused = upload(
            &app,
            token,
            &fields("CORE", "app", "1.0.1", id_group),
            &image(100, 5),
            false,
        )
        .await;
        assert_eq!(refused.status, status, "{}", refused.text);
    }
    // An empty group (a form's "every group") is left out: the administrator's only.
    let empty_group = upload(
        &app,
        &manager,
        &fields("CORE", "app", "1.0.2", Some("")),
        &image(100, 5),
        false,
    )
    .await;
    assert_eq!(empty_group.status, 401, "{}", empty_group.text);
    let outsider = upload(
        &app,
        &stranger,
        &fields("CORE", "app", "1.0.1", Some(&group)),
        &image(100, 5),
        false,
    )
    .await;
    assert_eq!(field_of(&outsider.expect(422).json()), "id_group");

    // Who sees what: the group's images and those for every group.
    let listed = |token: String| {
        let app = &app;
        async move {
            let page = send(app.get("/api/v2/firmware?sort=version", &token))
                .await
                .expect(200)
                .json();
            let mut versions: Vec<String> = page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["version"].as_str().unwrap().to_string())
                .collect();
            versions.sort();
            versions
        }
    };
    assert_eq!(listed(admin.clone()).await, ["1.0.0", "2.5.0", "6.0.0", "6.0.0"]);
    assert_eq!(listed(viewer.clone()).await, ["1.0.0", "2.5.0", "6.0.0", "6.0.0"]);
    assert_eq!(listed(stranger.clone()).await, ["6.0.0", "6.0.0"]);
    send(app.get(&format!("/api/v2/firmware/{id}"), &viewer))
        .await
        .expect(200);
    let hidden = send(app.get(&format!("/api/v2/firmware/{id}"), &stranger)).await;
    assert_error(&hidden.expect(404).json(), 404);
    let filtered = send(app.get("/api/v2/firmware?filter[kind]=CORE", &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(filtered["items"].as_array().unwrap().len(), 1);

    // Deleting: the viewer may not, the manager may not delete an image for every group.
    let path = format!("/api/v2/firmware/{id}");
    assert_eq!(send(app.request(Method::DELETE, &path, &viewer)).await.status, 401);
    let global_path = format!("/api/v2/firmware/{}", global["id_firmware"].as_str().unwrap());
    assert_eq!(
        send(app.request(Method::DELETE, &global_path, &manager)).await.status,
        401
    );
    send(app.request(Method::DELETE, &path, &manager)).await.expect(204);
    assert_eq!(send(app.request(Method::DELETE, &path, &manager)).await.status, 404);
    send(app.request(Method::DELETE, &global_path, &admin))
        .await
        .expect(204);
    // A group sent after the file counts: the fields are checked again once the body is whole.
    let late_group = Form::new()
        .text("kind", "PLUS")
        .text("component", "app")
        .text("version", "7.0.0")
        .part("file", Part::bytes(image(10, 7)).file_name("a.bin"))
        .text("id_group", group.clone());
    let late = send(
        app.request(Method::POST, "/api/v2/firmware", &admin)
            .multipart(late_group),
    )
    .await
    .expect(201)
    .json();
    assert_eq!(late["id_group"], group.as_str());
    // The same version may be uploaded again once deleted.
    upload(
        &app,
        &admin,
        &fields("PLUS", "app", "2.5.0", Some(&group)),
        &image(10, 6),
        false,
    )
    .await
    .expect(201);
}

/// The field of a 422 answer naming one field.
fn field_of(body: &Value) -> String {
    let list = body.as_array().unwrap_or_else(|| panic!("not a field list: {body}"));
    list[0]["field"].as_str().unwrap().to_string()
}

/// Whether an upload with `fields` is refused 422 naming `field`.
async fn again_field(app: &TestApp, token: &str, fields: &[(&'static str, String)], field: &str) -> bool {
    let reply = upload(app, token, fields, &image(10, 9), false).await;
    reply.status == 422 && field_of(&reply.json()) == field
}

#[tokio::test]
async fn a_corrupt_upload_is_400_and_leaves_nothing() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    // A file part that never ends (no closing boundary): the body ends in the middle of it.
    let body = "--XYZ\r\nContent-Disposition: form-data; name=\"kind\"\r\n\r\nGO\r\n--XYZ\r\n\
                Content-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\n\r\n0123456789";
    let reply = send(
        app.request(Method::POST, "/api/v2/firmware", &admin)
            .header("Content-Type", "multipart/form-data; boundary=XYZ")
            .body(body),
    )
    .await;
    assert_error(&reply.expect(400).json(), 400);
    // A part without a name.
    let body = "--XYZ\r\nContent-Disposition: form-data\r\n\r\nGO\r\n--XYZ--\r\n";
    let reply = send(
        app.request(Method::POST, "/api/v2/firmware", &admin)
            .header("Content-Type", "multipart/form-data; boundary=XYZ")
            .body(body),
    )
    .await;
    assert_error(&reply.expect(400).json(), 400);
    assert_eq!(
        common::count(&app.state.db, "SELECT COUNT(*) FROM firmware_chunks").await,
        0
    );
    assert_eq!(
        common::count(&app.state.db, "SELECT COUNT(*) FROM firmware_uploads").await,
        0
    );
}

#[tokio::test]
async fn an_image_past_the_limit_is_413_and_leaves_nothing() {
    let app = TestApp::spawn_with(Settings {
        firmware_max_bytes: 300 * 1024,
        ..Settings::default()
    })
    .await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "firmware limit").await;
    let large = upload(
        &app,
        &admin,
        &fields("GO", "app", "1", Some(&group)),
        &image(700 * 1024, 1),
        false,
    )
    .await;
    assert_error(&large.expect(413).json(), 413);
    let page = send(app.get("/api/v2/firmware", &admin)).await.expect(200).json();
    assert_eq!(page["items"], json!([]));
    let pieces = common::count(&app.state.db, "SELECT COUNT(*) FROM firmware_chunks").await;
    assert_eq!(pieces, 0);
    upload(
        &app,
        &admin,
        &fields("GO", "app", "1", Some(&group)),
        &image(300 * 1024, 1),
        false,
    )
    .await
    .expect(201);
}

/// A download as gateway `serial` with `token`, with extra headers: status, headers, bytes.
async fn download(
    app: &TestApp,
    id: &str,
    credentials: Option<(&str, &str)>,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let mut request = app.http.get(app.url(&format!("/gateway/v1/firmware/{id}")));
    if let Some((serial, token)) = credentials {
        request = request.basic_auth(serial, Some(token));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.bytes().await.unwrap().to_vec())
}

#[tokio::test]
async fn a_gateway_downloads_images_of_its_kind_and_group_with_ranges() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let provisioner = Provisioner::new(&app.base, &admin);
    let group = provisioner.create_group("firmware download").await.unwrap();
    let other_group = provisioner.create_group("firmware elsewhere").await.unwrap();
    let gateway = provisioner.gateway(&group, "FW-DL-1", ModuleKind::Plus).await.unwrap();
    let creds = Some((gateway.serial.as_str(), gateway.token.as_str()));
    let bytes = image(700 * 1024, 7);
    let record = stored(&app, &admin, &fields("PLUS", "app", "3.1.0", Some(&group)), &bytes).await;
    let id = record["id_firmware"].as_str().unwrap();
    let etag = format!("\"{}\"", record["sha256"].as_str().unwrap());

    let (status, headers, body) = download(&app, id, creds, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(body, bytes);
    assert_eq!(headers["etag"], etag.as_str());
    assert_eq!(headers["content-length"], bytes.len().to_string().as_str());
    assert_eq!(headers["accept-ranges"], "bytes");

    // One range, across a piece boundary; the last bytes; a resume from an offset.
    let (status, headers, body) = download(&app, id, creds, &[("range", "bytes=262000-262999")]).await;
    assert_eq!(status, 206);
    assert_eq!(body, &bytes[262_000..263_000]);
    assert_eq!(
        headers["content-range"],
        format!("bytes 262000-262999/{}", bytes.len()).as_str()
    );
    let (status, _, body) = download(&app, id, creds, &[("range", "bytes=-10")]).await;
    assert_eq!((status, body.as_slice()), (206, &bytes[bytes.len() - 10..]));
    let (status, _, body) = download(&app, id, creds, &[("range", "bytes=500000-")]).await;
    assert_eq!((status, body.as_slice()), (206, &bytes[500_000..]));
    // `If-Range` with another tag: the whole image.
    let (status, _, body) = download(&app, id, creds, &[("range", "bytes=0-9"), ("if-range", "\"other\"")]).await;
    assert_eq!((status, body.len()), (200, bytes.len()));
    for bad in ["bytes=900000-", "bytes=0-1,5-9", "lines=1-2", "bytes=9-2"] {
        let (status, headers, body) = download(&app, id, creds, &[("range", bad)]).await;
        assert_eq!(status, 416, "{bad}");
        assert_eq!(headers["content-range"], format!("bytes */{}", bytes.len()).as_str());
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_error(&body, 416);
    }
    let (status, _, body) = download(&app, id, creds, &[("if-none-match", &etag)]).await;
    assert_eq!((status, body.len()), (304, 0));

    // Credentials: none, wrong.
    assert_eq!(download(&app, id, None, &[]).await.0, 401);
    assert_eq!(download(&app, id, Some((&gateway.serial, "wrong")), &[]).await.0, 401);
    // Another kind, another group: not found; an image for every group of its kind: served.
    let core = stored(
        &app,
        &admin,
        &fields("CORE", "app", "3.1.0", Some(&group)),
        &image(10, 1),
    )
    .await;
    let elsewhere = stored(
        &app,
        &admin,
        &fields("PLUS", "app", "3.1.0", Some(&other_group)),
        &image(10, 1),
    )
    .await;
    let everyone = stored(&app, &admin, &fields("PLUS", "app", "3.1.0", None), &image(10, 1)).await;
    for other in [&core, &elsewhere] {
        let (status, _, body) = download(&app, other["id_firmware"].as_str().unwrap(), creds, &[]).await;
        assert_eq!(status, 404);
        assert_error(&serde_json::from_slice(&body).unwrap(), 404);
    }
    let (status, _, body) = download(&app, everyone["id_firmware"].as_str().unwrap(), creds, &[]).await;
    assert_eq!((status, body), (200, image(10, 1)));
    assert_eq!(download(&app, "no-such-image", creds, &[]).await.0, 404);
}
