//! Commands over real HTTP and real MQTT (docs/gateway-protocol.md, "Commands"; docs/api.md,
//! "Commands"): every command endpoint against simulated gateways, the offline, timeout, disconnect
//! and malformed-body failures, callers racing on one gateway, rights, assets, Z-wave exclusion,
//! and the events every command leaves behind.

mod common;

use std::time::{Duration, Instant};

use common::{TestApp, assert_error_exact, send};
use devicecloud_protocol::ModuleKind;
use devicecloud_server::Settings;
use devicecloud_simulator::{Behaviour, Fleet, FleetOptions, GatewaySpec, Provisioner};
use devicecloud_store::Db;
use reqwest::Method;
use serde_json::{Value, json};

/// An administrator, a group, and gateways provisioned through the API.
struct Setup {
    app: TestApp,
    admin: String,
    group: String,
}

async fn setup(settings: Settings) -> Setup {
    let app = TestApp::spawn_with(settings).await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "commands").await;
    Setup { app, admin, group }
}

impl Setup {
    async fn gateway(&self, serial: &str, kind: ModuleKind) -> GatewaySpec {
        Provisioner::new(&self.app.base, &self.admin)
            .gateway(&self.group, serial, kind)
            .await
            .expect("provisioned")
    }

    /// Starts `specs` (commands only, no measurements) and waits until they are connected.
    async fn run(&self, specs: Vec<GatewaySpec>) -> Fleet {
        let n = specs.len();
        let fleet = Fleet::start(specs, FleetOptions::new(self.app.mqtt_addr, Duration::ZERO));
        assert!(
            fleet.wait_connected(n, Duration::from_secs(20)).await,
            "fleet did not connect"
        );
        fleet
    }

    async fn command(
        &self,
        method: Method,
        id: &str,
        command: &str,
        token: &str,
        body: Option<Value>,
    ) -> common::Reply {
        let mut request = self
            .app
            .request(method, &format!("/api/v2/physical-device/{id}/{command}"), token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        send(request).await
    }
}

fn id(spec: &GatewaySpec) -> &str {
    spec.id.as_deref().unwrap()
}

/// Rows of a query on either database.
macro_rules! rows {
    ($db:expr, $t:ty, $sql:expr, $($bind:expr),*) => {
        match $db {
            Db::Sqlite(pool, ..) => sqlx::query_as::<_, $t>($sql)$(.bind($bind))*.fetch_all(pool).await.unwrap(),
            Db::Postgres(pool) => sqlx::query_as::<_, $t>($sql)$(.bind($bind))*.fetch_all(pool).await.unwrap(),
        }
    };
}

/// The device id of a serial.
async fn device_id(app: &TestApp, serial: &str) -> String {
    let found = rows!(
        &app.state.db,
        (String,),
        "SELECT id_physical_device FROM physical_devices WHERE serial_hardware = $1",
        serial
    );
    found.first().unwrap_or_else(|| panic!("no device {serial}")).0.clone()
}

/// Events of a device and type, as (value, description), oldest first.
async fn events(app: &TestApp, device: &str, event_type: i64) -> Vec<(String, Option<String>)> {
    rows!(
        &app.state.db,
        (String, Option<String>),
        "SELECT value, value_description FROM events WHERE source_device = $1 AND event_type = $2 ORDER BY id_event",
        device,
        event_type
    )
}

/// Polls until a device has `count` events of a type (they are written off the request path).
async fn wait_events(app: &TestApp, device: &str, event_type: i64, count: usize) -> Vec<(String, Option<String>)> {
    for _ in 0..500 {
        let found = events(app, device, event_type).await;
        if found.len() >= count {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("device {device}: fewer than {count} events of type {event_type}");
}

/// The latest value of a datatype of a device (the store's latest-value table).
async fn latest(app: &TestApp, serial: &str, datatype: i64) -> Option<f64> {
    let found = rows!(
        &app.state.db,
        (Option<f64>,),
        "SELECT c.latest_value FROM containers c JOIN physical_devices d ON d.id_physical_device = c.source_device \
         WHERE d.serial_hardware = $1 AND c.datatype = $2",
        serial,
        datatype
    );
    found.first().and_then(|r| r.0)
}

fn short_timeout(ms: u64) -> Settings {
    Settings {
        command_timeout: Duration::from_millis(ms),
        ..Settings::default()
    }
}

#[tokio::test]
async fn ping_status_request_measurement_and_restart() {
    let s = setup(Settings::default()).await;
    let gw = s.gateway("CMD-CORE-1", ModuleKind::Core).await;
    let fleet = s.run(vec![gw.clone()]).await;

    let reply = s
        .command(Method::GET, id(&gw), "ping", &s.admin, None)
        .await
        .expect(200);
    assert_eq!(
        reply.json(),
        json!({"status": 200, "payload": {"data": "pong", "result": "success"}})
    );

    let reply = s
        .command(Method::GET, id(&gw), "status", &s.admin, None)
        .await
        .expect(200);
    let body = reply.json();
    assert_eq!(body["status"], 200);
    let payload = &body["payload"];
    for key in [
        "isGnssOk",
        "isModemConnected",
        "isInputVoltageOk",
        "isAteccOk",
        "isSpiffsOk",
    ] {
        assert!(payload[key].is_boolean(), "{key} in {payload}");
    }
    assert!(payload["inputVoltage"].is_number());
    for key in ["ModemInfo", "WifiInfo", "EthernetInfo", "resetCause", "result"] {
        assert!(payload[key].is_string(), "{key} in {payload}");
    }
    for key in [
        "SatsInView",
        "SatsInUse",
        "uptime",
        "minFreeHeap",
        "freeHeap",
        "internalFreeHeap",
        "minInternalFreeHeap",
        "externalFreeHeap",
        "minExternalFreeHeap",
        "nvsUsedEntries",
        "nvsFreeEntries",
        "spiffsUsage",
        "spiffsTotal",
    ] {
        assert!(payload[key].is_i64(), "{key} in {payload}");
    }
    let (stored, at) = devicecloud_store::device_info::get(&s.app.state.db, id(&gw))
        .await
        .unwrap()
        .expect("the self-test is kept as deviceInfo");
    assert_eq!(serde_json::from_str::<Value>(&stored).unwrap(), *payload);
    assert!(at > 0);
    // And served as the device's `deviceInfo` expand.
    let path = format!(
        "/api/v2/physical-device/{}?expand=deviceInfo&fields=deviceInfo",
        id(&gw)
    );
    let device = send(s.app.get(&path, &s.admin)).await.expect(200).json();
    assert_eq!(device["deviceInfo"], json!({"updated_at": at, "payload": payload}));

    let reply = s
        .command(Method::PUT, id(&gw), "request-measurement", &s.admin, None)
        .await
        .expect(200);
    assert_eq!(reply.json(), json!({"status": 200, "payload": {"result": "success"}}));
    // The gateway then publishes the latest values of its assets.
    let mut published = false;
    for _ in 0..300 {
        if latest(&s.app, "CMD-CORE-1-MB1", 12).await == Some(50.0) {
            published = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        published,
        "request-measurement made the gateway publish its assets' values"
    );

    let reply = s
        .command(Method::POST, id(&gw), "restart", &s.admin, None)
        .await
        .expect(200);
    assert_eq!(reply.json(), json!({"status": 200, "payload": {"result": "success"}}));
    // It reconnects (a second hello) and answers again.
    assert!(
        fleet
            .wait_until(Duration::from_secs(20), |st| st.connects >= 2 && st.connected == 1)
            .await
    );
    s.command(Method::GET, id(&gw), "ping", &s.admin, None)
        .await
        .expect(200);
    fleet.stop().await;
}

#[tokio::test]
async fn a_gateway_that_is_not_connected_is_not_online() {
    let s = setup(Settings::default()).await;
    let gw = s.gateway("CMD-OFF-1", ModuleKind::Plus).await;
    for (method, command) in [
        (Method::GET, "ping"),
        (Method::POST, "restart"),
        (Method::GET, "status"),
        (Method::PUT, "request-measurement"),
        (Method::GET, "wifi"),
        (Method::DELETE, "wifi"),
    ] {
        let reply = s.command(method, id(&gw), command, &s.admin, None).await.expect(404);
        assert_error_exact(&reply.json(), 404, "Not Found", "Device is not online");
    }
    let body = json!({"datatype": 12, "value": 1});
    let reply = s
        .command(Method::PUT, id(&gw), "modbus-write", &s.admin, Some(body))
        .await
        .expect(404);
    assert_error_exact(&reply.json(), 404, "Not Found", "Device is not online");
    // HEAD would send the command: refused, with the method that reads it.
    for command in ["ping", "status", "wifi"] {
        let reply = s
            .command(Method::HEAD, id(&gw), command, &s.admin, None)
            .await
            .expect(405);
        assert!(reply.header("allow").is_some_and(|a| a.contains("GET")));
    }
    // The counter resets answer 400 (specification, Errors).
    for command in ["reset-main-counter", "reset-daily-counter"] {
        let reply = s
            .command(Method::PUT, id(&gw), command, &s.admin, None)
            .await
            .expect(400);
        assert_error_exact(&reply.json(), 400, "Bad Request", "Device is not online");
    }
    // Each is recorded with its outcome.
    let recorded = wait_events(&s.app, id(&gw), 213, 9).await;
    assert!(
        recorded
            .iter()
            .all(|(_, d)| d.as_deref().unwrap().starts_with("offline; caller "))
    );
}

#[tokio::test]
async fn wifi_scan_connect_disconnect_and_their_refusals() {
    let s = setup(Settings::default()).await;
    let plus = s.gateway("CMD-PLUS-1", ModuleKind::Plus).await;
    let mut no_wifi = s.gateway("CMD-CORE-NOWIFI", ModuleKind::Core).await;
    no_wifi.wifi_enabled = false;
    let go = s.gateway("CMD-GO-1", ModuleKind::Go).await;
    let fleet = s.run(vec![plus.clone(), no_wifi.clone(), go.clone()]).await;

    let check_aps = |body: &Value| {
        assert_eq!(body["status"], 200);
        assert_eq!(body["payload"]["result"], "success");
        let aps = body["payload"]["wifiAccessPoints"].as_array().unwrap();
        assert!(!aps.is_empty());
        for ap in aps {
            assert!(ap["ssid"].is_string());
            let mac = ap["macAddress"].as_str().unwrap();
            assert!(mac.len() == 12 && mac.chars().all(|c| c.is_ascii_hexdigit()), "{mac}");
            assert!(ap["signalStrength"].as_i64().unwrap() < 0);
            assert!(ap["channel"].is_i64());
        }
    };
    check_aps(
        &s.command(Method::GET, id(&plus), "wifi", &s.admin, None)
            .await
            .expect(200)
            .json(),
    );
    let body = json!({"ssid": "plant-3", "password": "secret"});
    check_aps(
        &s.command(Method::PUT, id(&plus), "wifi", &s.admin, Some(body))
            .await
            .expect(200)
            .json(),
    );
    check_aps(
        &s.command(Method::DELETE, id(&plus), "wifi", &s.admin, None)
            .await
            .expect(200)
            .json(),
    );

    // A malformed connect is refused before anything is sent.
    for body in [
        json!({}),
        json!({"ssid": ""}),
        json!({"ssid": 5}),
        json!({"ssid": "x", "password": 1}),
        json!([1]),
    ] {
        let reply = s
            .command(Method::PUT, id(&plus), "wifi", &s.admin, Some(body))
            .await
            .expect(400);
        common::assert_error(&reply.json(), 400);
    }
    let reply = send(
        s.app
            .request(
                Method::PUT,
                &format!("/api/v2/physical-device/{}/wifi", id(&plus)),
                &s.admin,
            )
            .header("content-type", "application/json")
            .body("{not json"),
    )
    .await
    .expect(400);
    common::assert_error(&reply.json(), 400);

    let disabled = json!({"status": 501, "payload": {"result": "failed", "cause": "Wifi disabled"}});
    for (method, body) in [
        (Method::GET, None),
        (Method::PUT, Some(json!({"ssid": "plant-3"}))),
        (Method::DELETE, None),
    ] {
        let reply = s
            .command(method.clone(), id(&no_wifi), "wifi", &s.admin, body.clone())
            .await
            .expect(501);
        assert_eq!(reply.json(), disabled);
        // A GO module has no Wi-Fi at all: the same answer, without asking it.
        let reply = s.command(method, id(&go), "wifi", &s.admin, body).await.expect(501);
        assert_eq!(reply.json(), disabled);
    }
    let recorded = wait_events(&s.app, id(&go), 213, 3).await;
    assert!(
        recorded
            .iter()
            .all(|(v, d)| v.starts_with("wifi-") && d.as_deref().unwrap().starts_with("not supported"))
    );
    fleet.stop().await;
}

#[tokio::test]
async fn counter_resets_and_modbus_writes() {
    let s = setup(Settings::default()).await;
    let core = s.gateway("CMD-CORE-2", ModuleKind::Core).await;
    let fleet = s.run(vec![core.clone()]).await;
    for command in ["reset-main-counter", "reset-daily-counter"] {
        let reply = s
            .command(Method::PUT, id(&core), command, &s.admin, None)
            .await
            .expect(200);
        assert_eq!(reply.json(), json!({"status": 200, "payload": {"status": "200"}}));
    }

    let modbus = device_id(&s.app, "CMD-CORE-2-MB1").await;
    let one = json!({"datatype": 12, "value": 75});
    let reply = s
        .command(Method::PUT, &modbus, "modbus-write", &s.admin, Some(one))
        .await
        .expect(200);
    assert_eq!(reply.json(), json!({"status": 200, "payload": {"result": "success"}}));
    let many = json!([{"datatype": 12, "value": 80.5}, {"datatype": 13, "value": 2}]);
    s.command(Method::PUT, id(&core), "modbus-write", &s.admin, Some(many))
        .await
        .expect(200);
    // The write is real: the next measurement reports the new register values.
    s.command(Method::PUT, id(&core), "request-measurement", &s.admin, None)
        .await
        .expect(200);
    let mut seen = (None, None);
    for _ in 0..300 {
        seen = (
            latest(&s.app, "CMD-CORE-2-MB1", 12).await,
            latest(&s.app, "CMD-CORE-2-MB1", 13).await,
        );
        if seen == (Some(80.5), Some(2.0)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(seen, (Some(80.5), Some(2.0)));

    // Malformed bodies: 400 with the reason, nothing sent.
    for (body, message) in [
        (json!({"value": 1}), "datatype is required."),
        (json!({"datatype": "12", "value": 1}), "datatype must be an integer."),
        (json!({"datatype": 1.5, "value": 1}), "datatype must be an integer."),
        (json!({"datatype": 12, "value": "5"}), "value must be a number."),
        (json!({"datatype": 12}), "value is required."),
        (json!([]), "at least one write is required."),
        (
            json!([{"datatype": 12, "value": 1}, {"datatype": 12, "value": null}]),
            "item 1: value is required.",
        ),
    ] {
        let reply = s
            .command(Method::PUT, id(&core), "modbus-write", &s.admin, Some(body))
            .await
            .expect(400);
        assert_error_exact(&reply.json(), 400, "Bad Request", message);
    }
    let reply = send(
        s.app
            .request(
                Method::PUT,
                &format!("/api/v2/physical-device/{}/modbus-write", id(&core)),
                &s.admin,
            )
            .body("datatype=12"),
    )
    .await
    .expect(400);
    common::assert_error(&reply.json(), 400);
    // A register the gateway does not have: the gateway's own refusal passes through.
    let reply = s
        .command(
            Method::PUT,
            id(&core),
            "modbus-write",
            &s.admin,
            Some(json!({"datatype": 99, "value": 1})),
        )
        .await
        .expect(400);
    assert_eq!(reply.json()["payload"]["result"], "failed");
    assert_eq!(latest(&s.app, "CMD-CORE-2-MB1", 12).await, Some(80.5));
    fleet.stop().await;
}

#[tokio::test]
async fn no_answer_in_time_is_504_and_an_unknown_late_answer_is_dropped() {
    let s = setup(short_timeout(300)).await;
    let mut silent = s.gateway("CMD-SILENT", ModuleKind::Core).await;
    silent.behaviour = Behaviour::Silent;
    let mut slow = s.gateway("CMD-SLOW", ModuleKind::Core).await;
    slow.behaviour = Behaviour::Slow(Duration::from_millis(800));
    let fleet = s.run(vec![silent.clone(), slow.clone()]).await;
    let started = Instant::now();
    let reply = s
        .command(Method::GET, id(&silent), "ping", &s.admin, None)
        .await
        .expect(504);
    assert!(started.elapsed() < Duration::from_secs(3));
    let body = reply.json();
    assert_error_exact(
        &body,
        504,
        "Gateway Timeout",
        "The device did not answer within 300 ms.",
    );
    let reply = s
        .command(Method::GET, id(&slow), "status", &s.admin, None)
        .await
        .expect(504);
    assert_eq!(reply.json()["name"], "Gateway Timeout");
    // The late answer arrives after its caller left; the connection stays usable.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let recorded = wait_events(&s.app, id(&silent), 213, 1).await;
    assert!(recorded[0].1.as_deref().unwrap().starts_with("timeout; caller "));
    assert!(
        devicecloud_store::device_info::get(&s.app.state.db, id(&slow))
            .await
            .unwrap()
            .is_none()
    );
    fleet.stop().await;
}

#[tokio::test]
async fn a_disconnect_fails_waiting_callers_at_once() {
    let s = setup(short_timeout(10_000)).await;
    let mut silent = s.gateway("CMD-GONE", ModuleKind::Plus).await;
    silent.behaviour = Behaviour::Silent;
    let fleet = s.run(vec![silent.clone()]).await;
    let path = format!("/api/v2/physical-device/{}/ping", id(&silent));
    let waiting: Vec<_> = (0..3).map(|_| send(s.app.get(&path, &s.admin))).collect();
    let started = Instant::now();
    let kick = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Rotating the token ends the live connection.
        let rotate = format!("/api/v2/physical-device/{}/rotate-token", id(&silent));
        send(s.app.request(Method::POST, &rotate, &s.admin)).await.expect(200);
    };
    let (replies, ()) = tokio::join!(futures::future::join_all(waiting), kick);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "waiters failed with the connection, not the timeout"
    );
    for reply in replies {
        let reply = reply.expect(404);
        assert_error_exact(
            &reply.json(),
            404,
            "Not Found",
            "Device is not online: it disconnected before answering",
        );
    }
    let recorded = wait_events(&s.app, id(&silent), 213, 3).await;
    assert!(
        recorded
            .iter()
            .all(|(_, d)| d.as_deref().unwrap().starts_with("disconnected"))
    );
    fleet.stop().await;
}

#[tokio::test]
async fn callers_racing_on_one_gateway_each_get_their_answer() {
    let s = setup(Settings::default()).await;
    let a = s.gateway("CMD-RACE-A", ModuleKind::Plus).await;
    let mut b = s.gateway("CMD-RACE-B", ModuleKind::Core).await;
    b.behaviour = Behaviour::Slow(Duration::from_millis(50));
    let fleet = s.run(vec![a.clone(), b.clone()]).await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..40 {
        let (http, url, token) = (s.app.http.clone(), s.app.base.clone(), s.admin.clone());
        let (target, command) = match i % 4 {
            0 => (id(&a).to_string(), "ping"),
            1 => (id(&a).to_string(), "status"),
            2 => (id(&b).to_string(), "ping"),
            _ => (id(&b).to_string(), "wifi"),
        };
        tasks.spawn(async move {
            let reply = send(
                http.get(format!("{url}/api/v2/physical-device/{target}/{command}"))
                    .bearer_auth(token),
            )
            .await;
            (command, reply)
        });
    }
    while let Some(done) = tasks.join_next().await {
        let (command, reply) = done.unwrap();
        let body = reply.expect(200).json();
        // Each caller gets the answer to its own request, not a neighbour's.
        match command {
            "ping" => assert_eq!(body["payload"]["data"], "pong"),
            "status" => assert!(body["payload"]["uptime"].is_i64()),
            _ => assert!(body["payload"]["wifiAccessPoints"].is_array()),
        }
    }
    fleet.stop().await;
}

#[tokio::test]
async fn commands_need_the_operator_role_in_the_group() {
    let s = setup(Settings::default()).await;
    let gw = s.gateway("CMD-RIGHTS", ModuleKind::Core).await;
    let fleet = s.run(vec![gw.clone()]).await;
    let (viewer_id, viewer) = s.app.user().await;
    let (operator_id, operator) = s.app.user().await;
    let (stranger_id, stranger) = s.app.user().await;
    s.app.grant(&s.admin, &s.group, &viewer_id, "viewer").await;
    s.app.grant(&s.admin, &s.group, &operator_id, "operator").await;
    let other = s.app.create_group(&s.admin, "elsewhere").await;
    s.app.grant(&s.admin, &other, &stranger_id, "operator").await;

    let reply = s.command(Method::GET, id(&gw), "ping", &viewer, None).await.expect(401);
    assert_error_exact(
        &reply.json(),
        401,
        "Unauthorized",
        "You are not allowed to perform this action.",
    );
    s.command(Method::GET, id(&gw), "ping", &operator, None)
        .await
        .expect(200);
    let reply = s
        .command(Method::GET, id(&gw), "ping", &stranger, None)
        .await
        .expect(404);
    common::assert_error(&reply.json(), 404);
    let reply = s
        .command(Method::PUT, id(&gw), "reset-main-counter", &stranger, None)
        .await
        .expect(404);
    common::assert_error(&reply.json(), 404);
    common::assert_invalid_credentials(&s.command(Method::GET, id(&gw), "ping", "not-a-token", None).await);
    let reply = s
        .command(Method::GET, "no-such-device", "ping", &s.admin, None)
        .await
        .expect(404);
    common::assert_error(&reply.json(), 404);
    // A method the path does not serve.
    let reply = s
        .command(Method::POST, id(&gw), "ping", &s.admin, None)
        .await
        .expect(405);
    assert_eq!(reply.header("allow"), Some("GET"));
    // The one that worked is recorded with its caller.
    let recorded = wait_events(&s.app, id(&gw), 213, 1).await;
    assert_eq!(recorded[0].0, "ping");
    assert_eq!(
        recorded[0].1.as_deref().unwrap().split("; request").next(),
        Some(format!("200; caller {operator_id}").as_str())
    );
    fleet.stop().await;
}

#[tokio::test]
async fn zwave_nodes_are_excluded_through_their_gateway() {
    let s = setup(Settings::default()).await;
    let plus = s.gateway("CMD-ZW", ModuleKind::Plus).await;
    let fleet = s.run(vec![plus.clone()]).await;
    let node = device_id(&s.app, "CMD-ZW-ZW1").await;
    // A command to an asset goes to its gateway.
    s.command(Method::GET, &node, "ping", &s.admin, None).await.expect(200);

    let reply = s
        .command(Method::DELETE, &node, "zwave-node", &s.admin, None)
        .await
        .expect(200);
    let body = reply.json();
    assert_eq!(
        common::keys(&body),
        ["fromCloud", "message", "routeToPollEvents", "tips"]
    );
    assert_eq!(body["fromCloud"], false);
    assert!(body["message"].is_string());
    assert_eq!(
        body["routeToPollEvents"],
        format!("/api/v2/event?filter[source_device]={node}&filter[event_type]=420")
    );
    let tips = body["tips"].as_array().unwrap();
    assert_eq!(tips[0]["value"], "0");
    assert!(
        tips.iter()
            .all(|t| t["value"].is_string() && t["description"].is_string())
    );
    // The outcome follows as event 420 on the node: 0, excluded.
    let outcome = wait_events(&s.app, &node, 420, 1).await;
    assert_eq!(outcome[0].0, "0");

    // Excluded once: the gateway no longer knows the node and says so.
    let reply = s
        .command(Method::DELETE, &node, "zwave-node", &s.admin, None)
        .await
        .expect(404);
    assert_eq!(
        reply.json(),
        json!({"status": 404, "payload": {"result": "failed", "cause": "Unknown Z-wave node"}})
    );
    // A gateway is not a Z-wave node, nor is a device its gateway announced as another type
    // (the PLUS gateway's Modbus meter): 400, and nothing reaches the gateway.
    for target in [id(&plus).to_string(), device_id(&s.app, "CMD-ZW-MB1").await] {
        let reply = s
            .command(Method::DELETE, &target, "zwave-node", &s.admin, None)
            .await
            .expect(400);
        common::assert_error_exact(
            &reply.json(),
            400,
            "Bad Request",
            &format!("Physical device {target} is not a Z-wave node behind a gateway."),
        );
    }
    fleet.stop().await;
}

/// A hand-written gateway (rumqttc, no simulator) that answers each command with the next of
/// `answers`, on the request's own id or, for `None`, first on an id nobody asked for.
async fn scripted_gateway(
    app: &TestApp,
    spec: &GatewaySpec,
    answers: Vec<Option<&'static [u8]>>,
) -> tokio::task::JoinHandle<()> {
    use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
    let mut options = MqttOptions::new("scripted", app.mqtt_addr.ip().to_string(), app.mqtt_addr.port());
    options.set_credentials(spec.serial.clone(), spec.token.clone());
    let (client, mut events) = AsyncClient::new(options, 16);
    client
        .publish(
            "v1/gateway/hello",
            QoS::AtLeastOnce,
            false,
            br#"{"kind": "CORE", "connection": "ethernet"}"#.to_vec(),
        )
        .await
        .unwrap();
    client
        .subscribe("v1/gateway/commands/+", QoS::AtLeastOnce)
        .await
        .unwrap();
    loop {
        if let Event::Incoming(Packet::SubAck(_)) = events.poll().await.unwrap() {
            break;
        }
    }
    tokio::spawn(async move {
        let mut answers = answers.into_iter();
        while let Ok(event) = events.poll().await {
            let Event::Incoming(Packet::Publish(p)) = event else {
                continue;
            };
            let id = p.topic.rsplit('/').next().unwrap().to_string();
            let payload: &[u8] = match answers.next() {
                Some(Some(payload)) => payload,
                Some(None) => {
                    let stray = br#"{"status": 200, "payload": {"data": "stray"}}"#.to_vec();
                    client
                        .publish("v1/gateway/responses/nobody-asked", QoS::AtLeastOnce, false, stray)
                        .await
                        .unwrap();
                    br#"{"status": 200, "payload": {"data": "pong", "result": "success"}}"#
                }
                None => continue,
            };
            client
                .publish(
                    format!("v1/gateway/responses/{id}"),
                    QoS::AtLeastOnce,
                    false,
                    payload.to_vec(),
                )
                .await
                .unwrap();
        }
    })
}

#[tokio::test]
async fn invalid_answers_are_502_and_stray_ones_are_dropped() {
    let s = setup(short_timeout(2_000)).await;
    let gw = s.gateway("CMD-SCRIPTED", ModuleKind::Core).await;
    let gateway = scripted_gateway(
        &s.app,
        &gw,
        vec![
            Some(b"not json".as_slice()),
            Some(br#"{"status": 204, "payload": {}}"#.as_slice()),
            Some(br#"{"status": 418, "payload": {"result": "failed", "cause": "teapot"}}"#.as_slice()),
            None,
        ],
    )
    .await;
    let reply = s
        .command(Method::GET, id(&gw), "ping", &s.admin, None)
        .await
        .expect(502);
    common::assert_error(&reply.json(), 502);
    let reply = s
        .command(Method::GET, id(&gw), "ping", &s.admin, None)
        .await
        .expect(502);
    assert_error_exact(
        &reply.json(),
        502,
        "Bad Gateway",
        "The device answered with status 204.",
    );
    // Any other status passes through with the gateway's payload.
    let reply = s
        .command(Method::GET, id(&gw), "ping", &s.admin, None)
        .await
        .expect(418);
    assert_eq!(
        reply.json(),
        json!({"status": 418, "payload": {"result": "failed", "cause": "teapot"}})
    );
    // An answer to a request nobody made is dropped; the real one still reaches its caller.
    let reply = s
        .command(Method::GET, id(&gw), "ping", &s.admin, None)
        .await
        .expect(200);
    assert_eq!(reply.json()["payload"]["data"], "pong");
    // The unreadable answer was recorded as a rejected message.
    let rejected = wait_events(&s.app, id(&gw), 212, 1).await;
    assert!(rejected[0].0.starts_with("v1/gateway/responses/"));
    let outcomes: Vec<String> = wait_events(&s.app, id(&gw), 213, 4)
        .await
        .into_iter()
        .map(|(_, d)| d.unwrap().split(';').next().unwrap().to_string())
        .collect();
    assert_eq!(outcomes, ["invalid response", "204", "418", "200"]);
    gateway.abort();
}

#[tokio::test]
async fn mqtt_5_gateways_receive_commands_too() {
    use rumqttc::v5::mqttbytes::QoS as QoS5;
    use rumqttc::v5::mqttbytes::v5::Packet as Packet5;
    use rumqttc::v5::{AsyncClient as Client5, Event as Event5, MqttOptions as Options5};

    let s = setup(Settings::default()).await;
    let gw = s.gateway("CMD-V5", ModuleKind::Core).await;
    let mut options = Options5::new("v5", s.app.mqtt_addr.ip().to_string(), s.app.mqtt_addr.port());
    options.set_credentials(gw.serial.clone(), gw.token.clone());
    let (client, mut events) = Client5::new(options, 8);
    client
        .subscribe("v1/gateway/commands/+", QoS5::AtLeastOnce)
        .await
        .unwrap();
    loop {
        if let Event5::Incoming(Packet5::SubAck(_)) = events.poll().await.unwrap() {
            break;
        }
    }
    let gateway = tokio::spawn(async move {
        while let Ok(event) = events.poll().await {
            let Event5::Incoming(Packet5::Publish(p)) = event else {
                continue;
            };
            assert_eq!(p.qos, QoS5::AtLeastOnce, "commands are published at QoS 1");
            let topic = String::from_utf8(p.topic.to_vec()).unwrap();
            let request: Value = serde_json::from_slice(&p.payload).unwrap();
            assert_eq!(request, json!({"method": "ping", "params": {}}));
            let id = topic.strip_prefix("v1/gateway/commands/").unwrap().to_string();
            let answer = json!({"status": 200, "payload": {"data": "pong", "result": "success"}}).to_string();
            client
                .publish(format!("v1/gateway/responses/{id}"), QoS5::AtLeastOnce, false, answer)
                .await
                .unwrap();
        }
    });
    let reply = s
        .command(Method::GET, id(&gw), "ping", &s.admin, None)
        .await
        .expect(200);
    assert_eq!(
        reply.json(),
        json!({"status": 200, "payload": {"data": "pong", "result": "success"}})
    );
    gateway.abort();
}
