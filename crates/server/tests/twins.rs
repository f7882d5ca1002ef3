//! Device twins (docs/api.md, "Twins"; docs/gateway-protocol.md, "Twin") over real HTTP and real
//! MQTT: the record, merge patches with versions, delivery at once and after a hello (the gateway
//! and its assets), reports, `twin/get`, events 215 and 216, the stream's `twin` event, the
//! collection, and every refusal.

mod common;

use std::time::Duration;

use common::gateway_client::TestGateway;
use common::sse::SseReader;
use common::{TestApp, assert_error, send};
use devicecloud_simulator::{Fleet, FleetOptions, Provisioner};
use reqwest::Method;
use serde_json::{Value, json};

const DESIRED: &str = "v1/gateway/twin/desired";
const SOON: Duration = Duration::from_secs(5);

async fn twin(app: &TestApp, token: &str, device: &str) -> Value {
    send(app.get(&format!("/api/v2/physical-device/{device}/twin"), token))
        .await
        .expect(200)
        .json()
}

async fn patch(app: &TestApp, token: &str, device: &str, body: Value) -> common::Reply {
    let path = format!("/api/v2/physical-device/{device}/twin");
    send(app.request(Method::PATCH, &path, token).json(&body)).await
}

/// The events of `device` of `event_type`, oldest first.
async fn events(app: &TestApp, token: &str, device: &str, event_type: i64) -> Vec<Value> {
    let path = format!("/api/v2/event?filter[source_device]={device}&filter[event_type]={event_type}&sort=id_event");
    let reply = send(app.get(&path, token)).await.expect(200);
    reply.json()["items"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_desired_change_reaches_the_connected_gateway_and_its_report_closes_the_delta() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "twins").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "TW-1", "PLUS").await;
    gw.hello("PLUS", json!({})).await;
    gw.subscribe(DESIRED).await;

    let fresh = twin(&app, &admin, &gw.id).await;
    assert_eq!(
        common::keys(&fresh),
        [
            "id_physical_device",
            "id_group",
            "desired",
            "reported",
            "delta",
            "version",
            "reported_version",
            "desired_updated_at",
            "reported_updated_at",
            "in_sync",
            "_links"
        ]
    );
    assert_eq!(fresh["id_group"], json!(group));
    assert_eq!(
        (&fresh["desired"], &fresh["version"], &fresh["in_sync"]),
        (&json!({}), &json!(0), &json!(1))
    );
    assert_eq!(fresh["reported_version"], Value::Null);
    assert_eq!(fresh["desired_updated_at"], Value::Null);

    let wanted = json!({"reporting_interval_s": 60, "led": {"on": true, "colour": "red"}});
    let changed = patch(&app, &admin, &gw.id, json!({"desired": wanted}))
        .await
        .expect(200)
        .json();
    assert_eq!(changed["version"], json!(1));
    assert_eq!(changed["desired"], wanted);
    assert_eq!(changed["delta"], wanted);
    assert_eq!(changed["in_sync"], json!(0));
    assert!(changed["desired_updated_at"].as_i64().is_some());

    let pushed = gw.received(DESIRED, SOON).await.expect("the desired document, at once");
    assert_eq!(pushed, json!({"version": 1, "desired": wanted}));

    // The gateway applies part of it: the delta holds the rest.
    let partial = json!({"reported": {"reporting_interval_s": 60, "led": {"on": true}}, "version": 1});
    gw.publish("v1/gateway/twin/reported", &partial).await;
    let now = twin(&app, &admin, &gw.id).await;
    assert_eq!(now["reported_version"], json!(1));
    assert_eq!(now["delta"], json!({"led": {"colour": "red"}}));
    assert_eq!(now["in_sync"], json!(0));
    gw.publish(
        "v1/gateway/twin/reported",
        &json!({"reported": {"led": {"colour": "red"}}}),
    )
    .await;
    let synced = twin(&app, &admin, &gw.id).await;
    assert_eq!((&synced["delta"], &synced["in_sync"]), (&json!({}), &json!(1)));
    assert_eq!(
        synced["reported_version"],
        json!(1),
        "a report without a version keeps it"
    );
    assert!(synced["reported_updated_at"].as_i64().is_some());

    // Null removes a key; a patch that changes nothing keeps the version.
    let removed = patch(&app, &admin, &gw.id, json!({"desired": {"led": null}}))
        .await
        .expect(200)
        .json();
    assert_eq!(removed["desired"], json!({"reporting_interval_s": 60}));
    assert_eq!(removed["version"], json!(2));
    assert_eq!(
        gw.received(DESIRED, SOON).await.unwrap(),
        json!({"version": 2, "desired": {"reporting_interval_s": 60}})
    );
    let same = patch(&app, &admin, &gw.id, json!({"desired": {"reporting_interval_s": 60}}))
        .await
        .expect(200)
        .json();
    assert_eq!(same["version"], json!(2));
    assert_eq!(
        gw.received(DESIRED, Duration::from_millis(300)).await,
        None,
        "nothing changed, nothing sent"
    );

    // Optimistic concurrency.
    let stale = patch(&app, &admin, &gw.id, json!({"desired": {"x": 1}, "version": 1})).await;
    assert_eq!(stale.status, 409, "{}", stale.text);
    assert_error(&stale.json(), 409);
    assert_eq!(twin(&app, &admin, &gw.id).await["version"], json!(2));
    let current = patch(&app, &admin, &gw.id, json!({"desired": {"x": 1}, "version": 2}))
        .await
        .expect(200);
    assert_eq!(current.json()["version"], json!(3));

    // Events 215 (from the cloud, value = version) and 216 (from the device, value = the
    // version it applied).
    let desired_events: Vec<Value> = events(&app, &admin, &gw.id, 215)
        .await
        .iter()
        .map(|e| json!([e["value"], e["from_device"], e["event_type_label"]]))
        .collect();
    assert_eq!(
        desired_events,
        [
            json!(["1", 0, "Desired configuration changed"]),
            json!(["2", 0, "Desired configuration changed"]),
            json!(["3", 0, "Desired configuration changed"])
        ]
    );
    let reported_events: Vec<Value> = events(&app, &admin, &gw.id, 216)
        .await
        .iter()
        .map(|e| json!([e["value"], e["from_device"]]))
        .collect();
    assert_eq!(reported_events, [json!(["1", 1]), json!(["1", 1])]);
}

#[tokio::test]
async fn an_offline_gateway_gets_what_it_is_behind_on_after_its_hello_for_itself_and_its_assets() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "offline twins").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "TW-2", "CORE").await;
    gw.hello("CORE", json!({})).await;
    gw.publish("v1/gateway/devices", &json!([{"serial": "TW-2-A", "type": "sensor"}]))
        .await;
    let assets = send(app.get(
        &format!("/api/v2/physical-device?filter[serial_hardware]=TW-2-A&filter[id_group]={group}"),
        &admin,
    ))
    .await
    .expect(200)
    .json();
    let asset = assets["items"][0]["id_physical_device"].as_str().unwrap().to_string();
    let (id, token) = (gw.id.clone(), gw.token.clone());
    gw.disconnect().await;

    patch(&app, &admin, &id, json!({"desired": {"reporting_interval_s": 30}}))
        .await
        .expect(200);
    patch(&app, &admin, &asset, json!({"desired": {"threshold": 5}}))
        .await
        .expect(200);
    patch(&app, &admin, &asset, json!({"desired": {"threshold": 6}}))
        .await
        .expect(200);

    let mut gw = TestGateway::reconnect(&app, &id, &group, "TW-2", &token).await;
    assert_eq!(
        gw.received(DESIRED, Duration::from_millis(300)).await,
        None,
        "before the hello, nothing"
    );
    gw.hello("CORE", json!({})).await;
    let own = gw
        .received(DESIRED, SOON)
        .await
        .expect("the gateway's document after hello");
    assert_eq!(own, json!({"version": 1, "desired": {"reporting_interval_s": 30}}));
    let of_asset = gw
        .received(DESIRED, SOON)
        .await
        .expect("the asset's document after hello");
    assert_eq!(
        of_asset,
        json!({"device": "TW-2-A", "version": 2, "desired": {"threshold": 6}})
    );

    // `twin/get` answers with the current document, whatever was reported.
    gw.publish("v1/gateway/twin/get", &json!({"device": "TW-2-A"})).await;
    assert_eq!(gw.received(DESIRED, SOON).await.unwrap(), of_asset);
    gw.publish("v1/gateway/twin/get", &json!({})).await;
    assert_eq!(gw.received(DESIRED, SOON).await.unwrap(), own);

    // The gateway applies its own: after the next hello only the asset's comes again.
    gw.publish(
        "v1/gateway/twin/reported",
        &json!({"reported": {"reporting_interval_s": 30}, "version": 1}),
    )
    .await;
    gw.publish(
        "v1/gateway/twin/reported",
        &json!({"device": "TW-2-A", "reported": {"threshold": 5}, "version": 1}),
    )
    .await;
    gw.hello("CORE", json!({})).await;
    assert_eq!(gw.received(DESIRED, SOON).await.unwrap(), of_asset);
    assert_eq!(gw.received(DESIRED, Duration::from_millis(300)).await, None);
    let asset_twin = twin(&app, &admin, &asset).await;
    assert_eq!(
        (&asset_twin["reported_version"], &asset_twin["delta"]),
        (&json!(1), &json!({"threshold": 6}))
    );

    // The asset's change while connected goes out at once, named by its serial.
    patch(
        &app,
        &admin,
        &asset,
        json!({"desired": {"threshold": null, "mode": "eco"}}),
    )
    .await
    .expect(200);
    assert_eq!(
        gw.received(DESIRED, SOON).await.unwrap(),
        json!({"device": "TW-2-A", "version": 3, "desired": {"mode": "eco"}})
    );
}

#[tokio::test]
async fn refusals_keep_the_twin_as_it_was() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "limits").await;
    let other = app.create_group(&admin, "other").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "TW-3", "PLUS").await;
    gw.hello("PLUS", json!({})).await;
    let path = format!("/api/v2/physical-device/{}/twin", gw.id);

    // Nine levels of objects: one too many.
    let mut deep = json!(1);
    for _ in 0..9 {
        deep = json!({ "k": deep });
    }
    for (body, field) in [
        (json!({}), "desired"),
        (json!({"desired": null}), "desired"),
        (json!({"desired": [1]}), "desired"),
        (json!({"desired": "x"}), "desired"),
        (json!({"desired": deep}), "desired"),
        (json!({"desired": {"big": "x".repeat(33 * 1024)}}), "desired"),
        (json!({"desired": {"a": 1}, "version": -1}), "version"),
        (json!({"desired": {"a": 1}, "version": "1"}), "version"),
    ] {
        let reply = send(app.request(Method::PATCH, &path, &admin).json(&body)).await;
        assert_eq!(reply.status, 422, "{body}: {}", reply.text);
        assert_eq!(reply.json()[0]["field"], json!(field), "{body}");
    }
    // Eight levels is allowed.
    let mut eight = json!(1);
    for _ in 0..8 {
        eight = json!({ "k": eight });
    }
    patch(&app, &admin, &gw.id, json!({"desired": eight})).await.expect(200);

    // Rights: a viewer reads and cannot change; a stranger sees nothing.
    let viewer = app.create_user("twin-viewer", "viewer-password-1", false).await;
    app.grant(&admin, &group, &viewer, "viewer").await;
    let viewer_token = app.token("twin-viewer", "viewer-password-1").await;
    twin(&app, &viewer_token, &gw.id).await;
    let refused = patch(&app, &viewer_token, &gw.id, json!({"desired": {"a": 1}})).await;
    assert_eq!(refused.status, 401);
    assert_error(&refused.json(), 401);
    let stranger = app.create_user("twin-stranger", "stranger-password-1", false).await;
    app.grant(&admin, &other, &stranger, "manager").await;
    let stranger_token = app.token("twin-stranger", "stranger-password-1").await;
    for reply in [
        send(app.get(&path, &stranger_token)).await,
        patch(&app, &stranger_token, &gw.id, json!({"desired": {"a": 1}})).await,
        send(app.get("/api/v2/physical-device/no-such-device/twin", &admin)).await,
    ] {
        assert_eq!(reply.status, 404, "{}", reply.text);
        assert_error(&reply.json(), 404);
    }
    let listed = send(app.get("/api/v2/twin", &stranger_token)).await.expect(200).json();
    assert_eq!(listed["items"], json!([]));

    // A gateway's bad reports are refused whole (event 212) and still acknowledged.
    let before = twin(&app, &admin, &gw.id).await;
    for report in [
        json!({"reported": {"big": "x".repeat(33 * 1024)}}),
        json!({"reported": [1]}),
        json!({"reported": {}, "version": -2}),
        json!({"reported": {}, "device": "NOT-AN-ASSET-OF-ANOTHER", "version": "x"}),
    ] {
        gw.publish("v1/gateway/twin/reported", &report).await;
    }
    let after = twin(&app, &admin, &gw.id).await;
    assert_eq!(before, after);
    let rejected = events(&app, &admin, &gw.id, 212).await;
    assert!(
        rejected.iter().any(|e| e["value"] == json!("v1/gateway/twin/reported")
            && e["event_value_description"].as_str().unwrap().contains("32768 bytes")),
        "{rejected:?}"
    );
}

#[tokio::test]
async fn the_collection_finds_devices_out_of_sync_and_the_stream_shows_changes() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "fleet").await;
    let mut gateways = Vec::new();
    for serial in ["TW-4", "TW-5", "TW-6"] {
        let mut gw = TestGateway::connect(&app, &admin, &group, serial, "GO").await;
        gw.hello("GO", json!({})).await;
        gateways.push(gw);
    }
    let mut reader = SseReader::new(
        app.get(&format!("/api/v2/stream?filter[id_group]={group}&types=twins"), &admin)
            .send()
            .await
            .unwrap(),
    );
    patch(
        &app,
        &admin,
        &gateways[1].id,
        json!({"desired": {"reporting_interval_s": 5}}),
    )
    .await
    .expect(200);
    let event = loop {
        let event = reader.next_within(SOON).await.expect("the stream goes on");
        if event.comment.is_none() {
            break event;
        }
    };
    assert_eq!(event.name(), "twin");
    let shown = event.json();
    assert_eq!(
        (&shown["id_physical_device"], &shown["version"], &shown["in_sync"]),
        (&json!(gateways[1].id), &json!(1), &json!(0))
    );

    let page = send(app.get("/api/v2/twin?filter[in_sync]=0", &admin))
        .await
        .expect(200)
        .json();
    let ids: Vec<&Value> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["id_physical_device"])
        .collect();
    assert_eq!(ids, [&json!(gateways[1].id)]);
    assert_eq!(page["_meta"]["totalCount"], json!(1));
    assert_eq!(
        page["items"][0]["_links"]["self"]["href"],
        json!(format!("/api/v2/physical-device/{}/twin", gateways[1].id))
    );

    let all = send(app.get(&format!("/api/v2/twin?filter[id_group]={group}"), &admin))
        .await
        .expect(200)
        .json();
    let mut expected: Vec<String> = gateways.iter().map(|g| g.id.clone()).collect();
    expected.sort();
    let listed: Vec<String> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id_physical_device"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, expected, "every device has a twin, by device id");
    assert_eq!(all["_meta"]["perPage"], json!(20));

    let newer = send(app.get(
        "/api/v2/twin?filter[version][gte]=1&sort=-version&fields=id_physical_device,version",
        &admin,
    ))
    .await
    .expect(200)
    .json();
    let item = &newer["items"][0];
    assert_eq!(newer["items"].as_array().unwrap().len(), 1);
    assert_eq!(common::keys(item), ["id_physical_device", "version", "_links"]);
    assert_eq!(
        (&item["id_physical_device"], &item["version"]),
        (&json!(gateways[1].id), &json!(1))
    );
    let bad = send(app.get("/api/v2/twin?filter[desired]=x", &admin)).await;
    assert_eq!(bad.status, 422, "{}", bad.text);
}

#[tokio::test]
async fn a_simulated_gateway_applies_its_reporting_interval_and_reports_it() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let provisioner = Provisioner::new(&app.base, &admin);
    let group = provisioner.create_group("simulated twins").await.unwrap();
    let spec = provisioner
        .gateway(&group, "SIM-TWIN", devicecloud_protocol::ModuleKind::Plus)
        .await
        .unwrap();
    let id = spec.id.clone().unwrap();
    // An hour between measurements: none would come during the test without the twin.
    let fleet = Fleet::start(vec![spec], FleetOptions::new(app.mqtt_addr, Duration::from_secs(3600)));
    assert!(fleet.wait_connected(1, Duration::from_secs(20)).await);
    // One tick's measurements, sent at once on connecting.
    let mut per_tick = 0;
    for _ in 0..100 {
        per_tick = points_of(&app, &admin, &id).await;
        if per_tick > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(per_tick > 0, "the first measurements were not stored within 5 s");

    patch(
        &app,
        &admin,
        &id,
        json!({"desired": {"reporting_interval_s": 1, "unknown_key": true}}),
    )
    .await
    .expect(200);
    let started = tokio::time::Instant::now();
    let twin = loop {
        let twin = twin(&app, &admin, &id).await;
        if twin["reported_version"] == json!(1) {
            break twin;
        }
        assert!(started.elapsed() < SOON, "no report within 5 s: {twin}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(twin["reported"], json!({"reporting_interval_s": 1}));
    assert_eq!(
        twin["delta"],
        json!({"unknown_key": true}),
        "what it does not understand stays in the delta"
    );
    // Measurements now come every second.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let points_after = points_of(&app, &admin, &id).await;
    assert!(
        points_after >= 3 * per_tick,
        "measurements every second: {per_tick} a tick, {points_after} after 3.5 s"
    );
    fleet.stop().await;
}

/// The raw points of a device's series so far.
async fn points_of(app: &TestApp, token: &str, device: &str) -> i64 {
    let group = twin(app, token, device).await["id_group"].as_str().unwrap().to_string();
    let path = format!("/api/v2/data?filter[id_group]={group}&filter[source_device]={device}&per-page=1");
    let reply = send(app.get(&path, token)).await.expect(200);
    reply.json()["_meta"]["totalCount"].as_i64().unwrap()
}
