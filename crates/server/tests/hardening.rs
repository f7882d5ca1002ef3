//! The service's own resources under a hostile caller (docs/operations.md, "Limits"): answers
//! whose size the caller chooses are refused before they are built, filters are bounded, and
//! what a gateway sends cannot grow without bound or overflow a rollup. Each test runs on SQLite,
//! and on PostgreSQL when `DEVICECLOUD_TEST_DATABASE_URL` is set.

mod common;

use common::gateway_client::TestGateway;
use common::{TestApp, assert_error, send};
use devicecloud_engine::settings::Settings;
use devicecloud_store::Db;
use serde_json::{Value, json};

async fn scalar(db: &Db, sql: &'static str, id: &str) -> i64 {
    match db {
        Db::Sqlite(p, ..) => sqlx::query_scalar(sql).bind(id).fetch_one(p).await.unwrap(),
        Db::Postgres(p) => sqlx::query_scalar(sql).bind(id).fetch_one(p).await.unwrap(),
    }
}

/// How many rejection events (212) a gateway has.
async fn rejections(db: &Db, gateway: &str) -> i64 {
    scalar(
        db,
        "SELECT COUNT(*) FROM events WHERE event_type = 212 AND source_device = $1",
        gateway,
    )
    .await
}

fn settings(adjust: impl FnOnce(&mut Settings)) -> Settings {
    let mut settings = Settings::default();
    adjust(&mut settings);
    settings
}

/// A 400 naming `expand`, with the specification's error body.
fn assert_expand_refused(reply: &common::Reply) {
    assert_eq!(reply.status, 400, "{}", reply.text);
    let body = reply.json();
    assert_error(&body, 400);
    assert!(body["message"].as_str().unwrap().contains("expand"), "{body}");
}

#[tokio::test]
async fn expanded_series_are_counted_before_the_answer_is_built() {
    let app = TestApp::spawn_with(settings(|s| s.limits.expand_max_entries = 50)).await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "GW-EXP", "CORE").await;
    gw.hello("CORE", json!({})).await;
    // 30 series on the gateway and 1 on an asset behind it: the group has 31.
    let values: serde_json::Map<String, Value> = (1..=30).map(|d| (d.to_string(), json!(d))).collect();
    gw.measurements(&json!([{"values": values}, {"device": "A-1", "values": {"7": 1}}]))
        .await;

    // One device: 31 entries, within 50.
    let one = send(app.get("/api/v2/physical-device?per-page=1&expand=group.latestData", &admin)).await;
    assert_eq!(one.status, 200, "{}", one.text);
    assert_eq!(
        one.json()["items"][0]["group"]["latestData"].as_array().unwrap().len(),
        31
    );
    // Two devices carry the group's series twice: 62 entries.
    let two = send(app.get("/api/v2/physical-device?per-page=2&expand=group.latestData", &admin)).await;
    assert_expand_refused(&two);
    // The same through a parent: the asset's parent is the gateway, in the same group.
    let asset_path =
        "/api/v2/physical-device?filter[serial_hardware]=A-1&expand=group.latestData,parent.group.latestData";
    assert_expand_refused(&send(app.get(asset_path, &admin)).await);
    // One record answers the same way.
    let single = format!("/api/v2/physical-device/{}?expand=group.latestData", gw.id);
    assert_eq!(send(app.get(&single, &admin)).await.status, 200);
    // A percent-encoded `expand` is the same parameter, for the depth check too.
    let deep = "/api/v2/physical-device?%65xpand=parent.parent.parent.parent.group";
    assert_expand_refused(&send(app.get(deep, &admin)).await);
}

#[tokio::test]
async fn the_template_history_keeps_twenty_distinct_templates_of_at_most_64_kib() {
    let app = TestApp::spawn_with(settings(|s| s.limits.expand_max_entries = 30)).await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "GW-TPL", "PLUS").await;
    let template = |n: usize| json!({"name": format!("t{n}"), "registers": [{"address": n}]});
    for n in 0..25 {
        gw.hello("PLUS", json!({"modbus_template": template(n)})).await;
    }
    // t10 again moves to the end instead of being added twice.
    gw.hello("PLUS", json!({"modbus_template": template(10)})).await;
    let path = format!("/api/v2/physical-device/{}?expand=modbusTemplateHistory", gw.id);
    let reply = send(app.get(&path, &admin)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let names: Vec<String> = reply.json()["modbusTemplateHistory"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["template"]["name"].as_str().unwrap().to_string())
        .collect();
    let mut expected: Vec<String> = (5..25).filter(|n| *n != 10).map(|n| format!("t{n}")).collect();
    expected.push("t10".into());
    assert_eq!(names, expected);

    // Two devices' histories: 20 + 20 entries are over a budget of 30.
    let mut other = TestGateway::connect(&app, &admin, &group, "GW-TPL2", "PLUS").await;
    for n in 0..20 {
        other.hello("PLUS", json!({"modbus_template": template(n)})).await;
    }
    let both = send(app.get("/api/v2/physical-device?expand=modbusTemplateHistory", &admin)).await;
    assert_expand_refused(&both);

    // A template over 64 KiB refuses the hello: event 212, the current template unchanged.
    let huge = json!({"name": "huge", "registers": [{"label": "x".repeat(64 * 1024)}]});
    gw.hello("PLUS", json!({"modbus_template": huge})).await;
    let refused = rejections(&app.state.db, &gw.id).await;
    assert_eq!(refused, 1);
    let current = send(app.get(
        &format!("/api/v2/physical-device/{}?expand=currentModbusTemplate", gw.id),
        &admin,
    ))
    .await;
    assert_eq!(current.json()["currentModbusTemplate"]["name"], "t10");
}

#[tokio::test]
async fn a_value_past_1e300_is_refused_and_rollups_stay_finite() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "GW-BIG", "CORE").await;
    gw.hello("CORE", json!({})).await;
    let ts = 1_763_726_400;
    // Refused whole (and still acknowledged, so it is not sent again).
    gw.measurements(&json!([{"ts": ts, "values": {"1": 1.0}}, {"ts": ts + 1, "values": {"1": 1.7e308}}]))
        .await;
    let stored = scalar(
        &app.state.db,
        "SELECT COUNT(*) FROM containers WHERE id_group = $1 AND latest_seconds IS NOT NULL",
        &group,
    )
    .await;
    assert_eq!(stored, 0);
    let refused = rejections(&app.state.db, &gw.id).await;
    assert_eq!(refused, 1);
    // The largest values allowed, in one bucket: the rollup's sum stays finite.
    gw.measurements(
        &json!([{"ts": ts, "values": {"1": 1e300}}, {"ts": ts + 1, "values": {"1": 1e300}},
        {"ts": ts + 2, "values": {"1": -1e300}}]),
    )
    .await;
    let path = format!("/api/v2/data-downsampled?filter[id_group]={group}");
    let reply = send(app.get(&path, &admin)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let rows = reply.json()["items"].clone();
    assert_eq!(rows.as_array().map(Vec::len), Some(1), "{rows}");
    assert_eq!(rows[0]["count_val"], 3, "{rows}");
    let avg = rows[0]["avg_val"].as_f64();
    assert!(avg.is_some_and(|a| (a - 1e300 / 3.0).abs() < 1e290), "{rows}");
}

#[tokio::test]
async fn filters_and_query_strings_are_bounded() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    app.create_group(&admin, "Plant").await;
    let filter_error = |reply: &common::Reply| {
        assert_eq!(reply.status, 422, "{}", reply.text);
        assert_eq!(reply.json()[0]["field"], "filter", "{}", reply.text);
    };

    // `like`: 256 characters pass, 257 do not, in the URL and in a JSON body.
    let like = |n: usize| format!("/api/v2/group/index?filter[label][like]={}", "é".repeat(n));
    assert_eq!(send(app.get(&like(256), &admin)).await.status, 200);
    filter_error(&send(app.get(&like(257), &admin)).await);
    let body = json!({"filter": {"label": {"like": "a".repeat(100_000)}}});
    filter_error(&send(app.get("/api/v2/group/index", &admin).json(&body)).await);

    // The whole filter: at most 64 KiB, however it is spread.
    let values: Vec<String> = (0..900).map(|i| format!("{i:0>80}")).collect();
    let body = json!({"filter": {"label": {"in": values}}});
    filter_error(&send(app.get("/api/v2/group/index", &admin).json(&body)).await);

    // More than 1,000 parameters: a 422, never computed on the first 1,000.
    let ids: Vec<String> = (0..1001).map(|i| format!("filter[id_group][in][]=g{i}")).collect();
    let path = format!("/api/v2/group/index?{}", ids.join("&"));
    filter_error(&send(app.get(&path, &admin)).await);
    let ids: Vec<String> = (0..1000).map(|i| format!("filter[id_group][in][]=g{i}")).collect();
    let path = format!("/api/v2/group/index?{}", ids.join("&"));
    assert_eq!(send(app.get(&path, &admin)).await.status, 200);

    // A long filter is left out of the `Link` header, not out of `_links`.
    let long = format!("/api/v2/group/index?filter[label][nin][]={}", "x".repeat(9000));
    let reply = send(app.get(&long, &admin)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.header("link"), None);
    assert!(reply.json()["_links"]["self"]["href"].as_str().unwrap().len() > 9000);
    let short = send(app.get("/api/v2/group/index?filter[label][like]=P", &admin)).await;
    assert!(short.header("link").is_some());
}

#[tokio::test]
async fn a_deleted_group_stops_its_gateways_and_webhooks() {
    let app = TestApp::spawn_with(settings(|s| s.webhook_allow_private = true)).await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    let (manager_id, manager) = app.user().await;
    app.grant(&admin, &group, &manager_id, "manager").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "GW-DEL", "CORE").await;
    gw.hello("CORE", json!({})).await;
    let hook = json!({"label": "out", "id_group": group, "forwarding_type": "measurements",
        "formatter": "json", "url": "http://127.0.0.1:9/hook"});
    let created = send(
        app.request(reqwest::Method::POST, "/api/v2/webhook", &manager)
            .json(&hook),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let id_webhook = created.json()["id_webhook"].as_str().unwrap().to_string();

    let deleted = send(app.request(reqwest::Method::DELETE, &format!("/api/v2/group/{group}"), &manager)).await;
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    // The connection is closed by the service, and a reconnection is refused as not authorized.
    gw.until_closed().await;
    let mut options = rumqttc::MqttOptions::new("again", app.mqtt_addr.ip().to_string(), app.mqtt_addr.port());
    options.set_credentials(gw.serial.clone(), gw.token.clone());
    let (_client, mut events) = rumqttc::AsyncClient::new(options, 8);
    let refused = loop {
        match tokio::time::timeout(std::time::Duration::from_secs(10), events.poll()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => break e,
            Err(_) => panic!("no answer to CONNECT"),
        }
    };
    assert!(
        matches!(
            refused,
            rumqttc::ConnectionError::ConnectionRefused(rumqttc::ConnectReturnCode::NotAuthorized)
        ),
        "{refused:?}"
    );
    // The webhook is inactive, saying why, with its event.
    let webhook: Value = match &app.state.db {
        Db::Sqlite(p, ..) => sqlx::query_as::<_, (i64, Option<String>)>(
            "SELECT is_active, disabled_reason FROM webhooks WHERE id_webhook = $1",
        )
        .bind(&id_webhook)
        .fetch_one(p)
        .await
        .map(|(a, r)| json!([a, r]))
        .unwrap(),
        Db::Postgres(p) => sqlx::query_as::<_, (i64, Option<String>)>(
            "SELECT is_active::BIGINT, disabled_reason FROM webhooks WHERE id_webhook = $1",
        )
        .bind(&id_webhook)
        .fetch_one(p)
        .await
        .map(|(a, r)| json!([a, r]))
        .unwrap(),
    };
    assert_eq!(webhook, json!([0, "group_deleted"]));
    let events = scalar(
        &app.state.db,
        "SELECT COUNT(*) FROM events WHERE event_type = 214 AND source_device = $1",
        &id_webhook,
    )
    .await;
    assert_eq!(events, 1);
}

#[tokio::test]
async fn an_account_holds_a_bounded_number_of_streams() {
    let app = TestApp::spawn_with(settings(|s| {
        s.limits.streams_per_account = 3;
        // A stream notices its client left when it next writes.
        s.stream_heartbeat = std::time::Duration::from_millis(200);
    }))
    .await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    let (other_id, other) = app.user().await;
    app.grant(&admin, &group, &other_id, "viewer").await;
    let path = format!("/api/v2/stream?filter[id_group]={group}");
    let open = |token: &str| app.get(&path, token).header("Accept", "text/event-stream").send();
    let mut held = Vec::new();
    for _ in 0..3 {
        let response = open(&admin).await.unwrap();
        assert_eq!(response.status(), 200);
        held.push(response);
    }
    let refused = open(&admin).await.unwrap();
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    let body: Value = refused.json().await.unwrap();
    assert_error(&body, 429);
    // Another account is not affected; a closed stream gives its slot back.
    assert_eq!(open(&other).await.unwrap().status(), 200);
    held.pop();
    let mut reopened = false;
    for _ in 0..50 {
        let response = open(&admin).await.unwrap();
        if response.status() == 200 {
            reopened = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(reopened, "a closed stream gives its slot back");
}

/// A session's CSV is read in pages, also within one second: 45,000 points in one second come
/// out whole, once each, in time order (ties by series), without the second being loaded whole.
#[tokio::test]
async fn a_session_csv_pages_through_one_crowded_second() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "field").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "GO-BIG", "GO").await;
    gw.hello("GO", json!({})).await;
    let ts = 1_763_726_400;
    // 45 assets × 1,000 datatypes in one second; the fraction falls back as the series go up, so
    // that time order and series order differ.
    for asset in 0..45 {
        let values: serde_json::Map<String, Value> = (0..1000).map(|d| (d.to_string(), json!(d))).collect();
        let fraction = f64::from(44 - asset) / 100.0;
        gw.measurements(&json!([{"device": format!("A-{asset:02}"), "ts": ts as f64 + fraction, "values": values}]))
            .await;
    }
    gw.power_off().await;
    let sessions = send(app.get("/api/v2/data-session", &admin)).await.json();
    let id = sessions["items"][0]["id_data_session"].as_str().unwrap().to_string();
    let csv = send(app.get(&format!("/api/v2/data-session/{id}/download-csv"), &admin))
        .await
        .expect(200);
    let lines: Vec<&str> = csv.text.lines().skip(1).collect();
    assert_eq!(lines.len(), 45_000);
    let keys: Vec<(i64, i64, String, i64)> = lines
        .iter()
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            (
                cells[0].parse().unwrap(),
                cells[1].parse().unwrap(),
                cells[3].to_string(),
                cells[4].parse().unwrap(),
            )
        })
        .collect();
    assert!(
        keys.windows(2).all(|w| (w[0].0, w[0].1) <= (w[1].0, w[1].1)),
        "time order"
    );
    let distinct: std::collections::HashSet<_> = keys.iter().map(|k| (&k.2, k.3)).collect();
    assert_eq!(distinct.len(), 45_000, "each point once");
    assert_eq!(keys[0].2, "A-44");
}

/// An asset archived while its gateway stays connected receives nothing more: the gateway's
/// next data for that serial makes a new asset, as after a reconnection.
#[tokio::test]
async fn an_archived_asset_receives_nothing_more() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "GW-ARC", "PLUS").await;
    gw.hello("PLUS", json!({})).await;
    let ts = 1_763_726_400;
    gw.measurements(&json!([{"device": "MB-1", "ts": ts, "values": {"3": 1}}]))
        .await;
    let find = |app: &TestApp, admin: &str| {
        let path = "/api/v2/physical-device?filter[serial_hardware]=MB-1&filter[archived_at]=NULL".to_string();
        let request = app.get(&path, admin);
        async move { send(request).await.json()["items"].clone() }
    };
    let old = find(&app, &admin).await[0]["id_physical_device"]
        .as_str()
        .unwrap()
        .to_string();
    let archived = send(app.request(
        reqwest::Method::DELETE,
        &format!("/api/v2/physical-device/{old}"),
        &admin,
    ))
    .await;
    assert_eq!(archived.status, 204, "{}", archived.text);
    gw.measurements(&json!([{"device": "MB-1", "ts": ts + 1, "values": {"3": 2}}]))
        .await;
    let points = |device: String| {
        let path = format!("/api/v2/data?filter[id_group]={group}&filter[source_device]={device}");
        let request = app.get(&path, &admin);
        async move { send(request).await.json()["_meta"]["totalCount"].as_i64().unwrap() }
    };
    assert_eq!(points(old.clone()).await, 1, "the archived asset keeps its one point");
    let new = find(&app, &admin).await[0]["id_physical_device"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(new, old);
    assert_eq!(points(new).await, 1);
}
