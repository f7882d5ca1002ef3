//! The gateway endpoint over real MQTT with a real client library (rumqttc): CONNECT
//! authentication and its refusals, topic rules, hello, measurements through the ingest queue
//! with PUBACK after commit, rejections, events, assets, take-over, loss of connection, GO data
//! sessions, token rotation and archiving, MQTT 5, and garbage bytes.

mod common;

use std::time::Duration;

use common::{TestApp, send};
use devicecloud_engine::metrics::{self, Closed, MESSAGES, Outcome};
use devicecloud_protocol::RejectReason;
use devicecloud_store::{Backend, Db};
use reqwest::Method;
use rumqttc::{AsyncClient, ConnectReturnCode, ConnectionError, Event, EventLoop, MqttOptions, Packet, QoS};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A provisioned gateway: id, serial and token.
struct Provisioned {
    id: String,
    serial: String,
    token: String,
    group: String,
}

async fn provision(app: &TestApp, admin: &str, serial: &str, kind: &str) -> Provisioned {
    let group = app.create_group(admin, &format!("group of {serial}")).await;
    let body = json!({"id_group": group, "serial_hardware": serial, "kind": kind});
    let reply = send(app.request(Method::POST, "/api/v2/physical-device", admin).json(&body)).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let body = reply.json();
    Provisioned {
        id: body["id_physical_device"].as_str().unwrap().into(),
        serial: serial.into(),
        token: body["device_token"].as_str().unwrap().into(),
        group,
    }
}

fn options(app: &TestApp, client_id: &str, user: &str, password: &str) -> MqttOptions {
    let mut options = MqttOptions::new(client_id, app.mqtt_addr.ip().to_string(), app.mqtt_addr.port());
    options.set_credentials(user, password);
    options.set_keep_alive(Duration::from_secs(30));
    options
}

/// A client that may keep `inflight` QoS 1 messages unacknowledged (not connected yet: the
/// first poll connects).
fn windowed_client(app: &TestApp, gw: &Provisioned, client_id: &str, inflight: u16) -> (AsyncClient, EventLoop) {
    let mut options = options(app, client_id, &gw.serial, &gw.token);
    options.set_inflight(inflight);
    AsyncClient::new(options, usize::from(inflight) * 2)
}

/// Connects and waits for the CONNACK.
async fn connect(app: &TestApp, gw: &Provisioned, client_id: &str) -> (AsyncClient, EventLoop) {
    let (client, mut events) = AsyncClient::new(options(app, client_id, &gw.serial, &gw.token), 64);
    match tokio::time::timeout(Duration::from_secs(10), events.poll())
        .await
        .expect("no CONNACK in 10 s")
    {
        Ok(Event::Incoming(Packet::ConnAck(ack))) => assert_eq!(ack.code, ConnectReturnCode::Success),
        other => panic!("expected CONNACK, got {other:?}"),
    }
    (client, events)
}

/// Polls the event loop until a PUBACK arrives (or the connection fails).
async fn until_puback(events: &mut EventLoop) {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.poll())
            .await
            .expect("no PUBACK in 10 s")
        {
            Ok(Event::Incoming(Packet::PubAck(_))) => return,
            Ok(_) => {}
            Err(e) => panic!("connection failed before PUBACK: {e}"),
        }
    }
}

/// Polls until the connection ends; returns the error it ended with.
async fn until_closed(events: &mut EventLoop) -> ConnectionError {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.poll())
            .await
            .expect("still open after 10 s")
        {
            Ok(_) => {}
            Err(e) => return e,
        }
    }
}

async fn publish(client: &AsyncClient, events: &mut EventLoop, topic: &str, payload: Value) {
    client
        .publish(topic, QoS::AtLeastOnce, false, payload.to_string())
        .await
        .unwrap();
    until_puback(events).await;
}

async fn scalar(db: &Db, sql: &str, bind: &str) -> i64 {
    let sql = sqlx::AssertSqlSafe(sql.to_string());
    match db {
        Db::Sqlite(p, ..) => sqlx::query_scalar(sql).bind(bind).fetch_one(p).await.unwrap(),
        Db::Postgres(p) => sqlx::query_scalar(sql).bind(bind).fetch_one(p).await.unwrap(),
    }
}

/// Waits (10 s at most) until the server has handled the end of the gateway's connection
/// (marking it disconnected is the last thing it does).
async fn wait_until_disconnected(app: &TestApp, admin: &str, id: &str) {
    for _ in 0..200 {
        let disconnected = device(app, admin, id).await["is_connected"] == 0;
        let settled = scalar(
            &app.state.db,
            "SELECT COUNT(*) FROM iot_devices WHERE id_physical_device = $1 AND last_disconnect_at IS NOT NULL",
            id,
        )
        .await;
        if disconnected && settled == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("gateway {id} still connected after 10 s");
}

/// Raw points stored in a group.
async fn stored_points(app: &TestApp, group: &str) -> i64 {
    let sql = "SELECT COUNT(*) FROM raw_points r JOIN containers c ON c.container_key = r.container_key WHERE c.id_group = $1";
    scalar(&app.state.db, sql, group).await
}

/// How many messages `/metrics` counts with `outcome` (the process's count: tests running
/// beside this one in the same process may add to it, so compare with `>`).
/// Publishes a message the server answers by closing the connection, waits for the close, and
/// checks that one more message was counted as closed for `reason`.
async fn assert_closed_for(
    app: &TestApp,
    (client, events): (&AsyncClient, &mut EventLoop),
    (topic, qos, payload): (&str, QoS, Value),
    reason: Closed,
) {
    let before = messages(app, Outcome::Closed(reason)).await;
    client.publish(topic, qos, false, payload.to_string()).await.unwrap();
    let _ = until_closed(events).await;
    assert!(messages(app, Outcome::Closed(reason)).await > before, "{reason:?}");
}

async fn messages(app: &TestApp, outcome: Outcome) -> u64 {
    let text = reqwest::get(app.url("/metrics")).await.unwrap().text().await.unwrap();
    metrics::read(&text, MESSAGES, outcome)
}

async fn device(app: &TestApp, admin: &str, id: &str) -> Value {
    send(app.get(&format!("/api/v2/physical-device/{id}"), admin))
        .await
        .json()
}

/// Events of a device as (type, value, from_device), oldest first.
async fn events_of(db: &Db, id: &str) -> Vec<(i64, String, Option<i64>)> {
    let sql = "SELECT event_type, value, from_device FROM events WHERE source_device = $1 ORDER BY id_event";
    match db {
        Db::Sqlite(p, ..) => sqlx::query_as(sql).bind(id).fetch_all(p).await.unwrap(),
        Db::Postgres(p) => sqlx::query_as(sql).bind(id).fetch_all(p).await.unwrap(),
    }
}

/// Connects as (`user`, `password`) and asserts the CONNACK refusal `code`.
async fn assert_refused(app: &TestApp, user: &str, password: &str, code: ConnectReturnCode) {
    let (_, mut events) = AsyncClient::new(options(app, "c", user, password), 8);
    let error = until_closed(&mut events).await;
    assert!(
        matches!(&error, ConnectionError::ConnectionRefused(got) if *got == code),
        "{user}: {error:?}"
    );
}

#[tokio::test]
async fn connect_is_refused_with_the_protocol_codes() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let gw = provision(&app, &admin, "GW-AUTH", "CORE").await;
    for (user, password) in [("GW-AUTH", "wrong"), ("NO-SUCH", "x"), ("", "")] {
        assert_refused(&app, user, password, ConnectReturnCode::BadUserNamePassword).await;
    }
    let reply = send(app.request(Method::DELETE, &format!("/api/v2/physical-device/{}", gw.id), &admin)).await;
    assert_eq!(reply.status, 204);
    // The token is checked first: a wrong one gets 4 for an archived serial too, so that
    // serials cannot be probed.
    assert_refused(&app, &gw.serial, "wrong", ConnectReturnCode::BadUserNamePassword).await;
    assert_refused(&app, &gw.serial, &gw.token, ConnectReturnCode::NotAuthorized).await;
}

#[tokio::test]
async fn hello_and_measurements_are_stored_before_the_puback() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let gw = provision(&app, &admin, "GW-DATA", "PLUS").await;
    let (client, mut events) = connect(&app, &gw, "gw-data").await;

    client
        .subscribe("v1/gateway/commands/+", QoS::AtLeastOnce)
        .await
        .unwrap();
    client.subscribe("v1/gateway/other/+", QoS::AtLeastOnce).await.unwrap();
    let mut codes = Vec::new();
    while codes.len() < 2 {
        if let Event::Incoming(Packet::SubAck(ack)) = events.poll().await.unwrap() {
            codes.push(format!("{:?}", ack.return_codes));
        }
    }
    assert_eq!(codes, ["[Success(AtLeastOnce)]", "[Failure]"]);

    let hello = json!({"kind": "PLUS", "connection": "cellular", "signal": 17,
        "platform_software_version": "5.1.2", "app_software_version": "2.4.0", "wifi_enabled": true});
    publish(&client, &mut events, "v1/gateway/hello", hello).await;
    let record = device(&app, &admin, &gw.id).await;
    assert_eq!(record["is_connected"], 1);
    assert_eq!(record["connection"], "cellular");
    assert_eq!(record["signal"], 17);
    assert_eq!(record["platform_software_version"], "5.1.2");
    assert_eq!(
        events_of(&app.state.db, &gw.id).await,
        [(208, "2".to_string(), Some(1))]
    );

    let batch = json!([
        {"ts": 1763726400.25, "values": {"12": 21.5, "13": 1013}},
        {"ts": 1763726460.5, "values": {"12": 22.5}},
        {"device": "MB-7781", "ts": 1763726400, "values": {"1": 7}},
    ]);
    publish(&client, &mut events, "v1/gateway/measurements", batch.clone()).await;
    // PUBACK came after the commit: the points are there now.
    let stored = stored_points(&app, &gw.group).await;
    assert_eq!(stored, 4);
    let micros = match app.state.db.backend() {
        Backend::Sqlite => {
            "SELECT MAX(r.microseconds) FROM raw_points r JOIN containers c ON c.container_key = r.container_key WHERE c.id_group = $1"
        }
        Backend::Postgres => {
            "SELECT MAX(r.time_us % 1000000) FROM raw_points r JOIN containers c ON c.container_key = r.container_key WHERE c.id_group = $1"
        }
    };
    let micros = scalar(&app.state.db, micros, &gw.group).await;
    assert_eq!(micros, 500_000);
    assert!(device(&app, &admin, &gw.id).await["last_data_at"].as_i64().is_some());
    // The unknown serial became an asset of the gateway, in its group.
    let child = scalar(
        &app.state.db,
        "SELECT COUNT(*) FROM physical_devices WHERE id_parent = $1 AND serial_hardware = 'MB-7781'",
        &gw.id,
    )
    .await;
    assert_eq!(child, 1);

    // Sent again (a gateway that missed the PUBACK): stored and counted once.
    publish(&client, &mut events, "v1/gateway/measurements", batch).await;
    let stored_again = stored_points(&app, &gw.group).await;
    assert_eq!(stored_again, 4);
    let counted = scalar(&app.state.db, "SELECT CAST(SUM(count_val) AS BIGINT) FROM rollup_day r JOIN containers c ON c.container_key = r.container_key WHERE c.id_group = $1", &gw.group).await;
    assert_eq!(counted, 4);

    // Events and assets.
    publish(
        &client,
        &mut events,
        "v1/gateway/events",
        json!({"device": "MB-7781", "type": 310, "value": 1, "datatype": 12}),
    )
    .await;
    publish(
        &client,
        &mut events,
        "v1/gateway/devices",
        json!([{"serial": "ZW-1", "type": "zwave", "label": "Door"}]),
    )
    .await;
    let zwave = scalar(
        &app.state.db,
        "SELECT COUNT(*) FROM physical_devices WHERE id_parent = $1 AND id_device_type = 'zwave'",
        &gw.id,
    )
    .await;
    assert_eq!(zwave, 1);
    let device_events = scalar(
        &app.state.db,
        "SELECT COUNT(*) FROM events WHERE event_type = 310 AND from_device = 1 AND id_group = $1",
        &gw.group,
    )
    .await;
    assert_eq!(device_events, 1);

    // A clean DISCONNECT: not connected, and the loss recorded (docs/gateway-protocol.md,
    // "Acknowledgement and durability").
    client.disconnect().await.unwrap();
    let _ = until_closed(&mut events).await;
    wait_until_disconnected(&app, &admin, &gw.id).await;
    let last = events_of(&app.state.db, &gw.id).await.pop().unwrap();
    assert_eq!(last, (208, "0".to_string(), Some(0)));
}

/// A gateway with many QoS 1 messages in flight (more than the server keeps unacknowledged per
/// connection) gets every PUBACK, in the order it published, each after its own commit: a
/// rejected message, a resent one, a QoS 0 one and a command answer in the middle keep their
/// place, and a message of another topic takes effect only after the measurements before it
/// are committed.
#[tokio::test]
async fn pipelined_messages_are_acknowledged_in_order_after_their_commit() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let gw = provision(&app, &admin, "GW-PIPE", "CORE").await;
    let (client, mut events) = windowed_client(&app, &gw, "gw-pipe", 100);
    let first_second = |m: i64| 1_763_726_400 + m * 10;
    let measurements = |m: i64| {
        let ts = first_second(m);
        json!([{"ts": ts, "values": {"1": m, "2": 1}}, {"ts": ts + 1, "values": {"1": m, "2": 2}}])
    };
    // What each QoS 1 message is, in publish order: `Some(m)` the measurements of
    // `measurements(m)`.
    let mut published: Vec<Option<i64>> = Vec::new();
    let messages = 80;
    for m in 0..messages {
        let (topic, qos, payload, stored) = match m {
            // Rejected whole, still acknowledged in its place.
            20 => (
                "v1/gateway/measurements",
                QoS::AtLeastOnce,
                json!({"values": {"12": "warm"}}),
                None,
            ),
            // A resend of the message before it, likely in the same group commit: stored once.
            30 => ("v1/gateway/measurements", QoS::AtLeastOnce, measurements(29), Some(29)),
            // A command answer nobody waits for: acknowledged after the measurements before it.
            40 => (
                "v1/gateway/responses/nobody-asked",
                QoS::AtLeastOnce,
                json!({"status": 200, "payload": {}}),
                None,
            ),
            // QoS 0: stored, no PUBACK.
            50 => ("v1/gateway/measurements", QoS::AtMostOnce, measurements(m), None),
            _ => ("v1/gateway/measurements", QoS::AtLeastOnce, measurements(m), Some(m)),
        };
        client.publish(topic, qos, false, payload.to_string()).await.unwrap();
        if qos == QoS::AtLeastOnce {
            published.push(stored);
        }
    }
    let event = json!({"type": 310, "value": 1});
    client
        .publish("v1/gateway/events", QoS::AtLeastOnce, false, event.to_string())
        .await
        .unwrap();
    published.push(None);

    let points_at = |second: i64| {
        let at = match app.state.db.backend() {
            Backend::Sqlite => format!("r.seconds = {second}"),
            Backend::Postgres => format!("r.time_us / 1000000 = {second}"),
        };
        let sql = format!(
            "SELECT COUNT(*) FROM raw_points r JOIN containers c ON c.container_key = r.container_key \
             WHERE c.id_group = $1 AND {at}"
        );
        let (db, group) = (app.state.db.clone(), gw.group.clone());
        async move { scalar(&db, &sql, &group).await }
    };
    let (mut sent, mut acked) = (Vec::new(), Vec::new());
    while acked.len() < published.len() {
        match tokio::time::timeout(Duration::from_secs(10), events.poll())
            .await
            .expect("PUBACKs missing after 10 s")
        {
            Ok(Event::Outgoing(rumqttc::Outgoing::Publish(pkid))) if pkid != 0 => sent.push(pkid),
            Ok(Event::Incoming(Packet::PubAck(ack))) => {
                // This message's own points are committed when its PUBACK arrives.
                if let Some(m) = published[acked.len()] {
                    assert_eq!(
                        points_at(first_second(m)).await,
                        2,
                        "message {m} acknowledged before its commit"
                    );
                }
                if acked.len() == published.len() - 1 {
                    // The event's PUBACK: every measurement before it is committed.
                    assert_eq!(stored_points(&app, &gw.group).await, (messages - 3) * 4);
                }
                acked.push(ack.pkid);
            }
            Ok(_) => {}
            Err(e) => panic!("connection failed: {e}"),
        }
    }
    assert_eq!(acked, sent, "PUBACKs in publish order");
    let counted = scalar(&app.state.db, "SELECT CAST(SUM(count_val) AS BIGINT) FROM rollup_minute r JOIN containers c ON c.container_key = r.container_key WHERE c.id_group = $1", &gw.group).await;
    assert_eq!(counted, (messages - 3) * 4, "the resent message counted once");
    let recorded = events_of(&app.state.db, &gw.id).await;
    assert_eq!(recorded.iter().filter(|(kind, ..)| *kind == 212).count(), 1);
    assert_eq!(recorded.iter().filter(|(kind, ..)| *kind == 310).count(), 1);
}

/// With several ingest writers (lanes), gateways publishing at once each get their PUBACKs in
/// publish order, every point is stored and counted once (a resend included), and each series'
/// latest value is its newest point. (That a gateway keeps its lane is the unit test
/// `ingest::tests::a_submitter_keeps_its_lane`.)
#[tokio::test]
async fn several_ingest_writers_store_every_gateway_once_and_acknowledge_in_order() {
    let settings = devicecloud_server::Settings {
        ingest_writers: Some(3),
        ..devicecloud_server::Settings::default()
    };
    let app = TestApp::spawn_with(settings).await;
    let (_, admin) = app.admin().await;
    let mut gateways = Vec::new();
    for g in 0..6 {
        gateways.push(provision(&app, &admin, &format!("GW-LANE-{g}"), "CORE").await);
    }
    let messages = 40_i64;
    let second = |m: i64| 1_763_726_400 + m * 10;
    let run = |gw: &Provisioned| {
        let (client, mut events) = windowed_client(&app, gw, &format!("c-{}", gw.serial), 20);
        async move {
            for m in 0..messages {
                // Message 20 resends message 19: stored once, acknowledged in its place.
                let at = if m == 20 { 19 } else { m };
                let batch = json!([{"ts": second(at), "values": {"1": at, "2": -at}}]);
                let topic = "v1/gateway/measurements";
                client
                    .publish(topic, QoS::AtLeastOnce, false, batch.to_string())
                    .await
                    .unwrap();
            }
            let (mut sent, mut acked) = (Vec::new(), Vec::new());
            while acked.len() < messages as usize {
                match tokio::time::timeout(Duration::from_secs(20), events.poll()).await {
                    Ok(Ok(Event::Outgoing(rumqttc::Outgoing::Publish(pkid)))) if pkid != 0 => sent.push(pkid),
                    Ok(Ok(Event::Incoming(Packet::PubAck(ack)))) => acked.push(ack.pkid),
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => panic!("connection failed: {e}"),
                    Err(_) => panic!("PUBACKs missing after 20 s"),
                }
            }
            assert_eq!(acked, sent, "PUBACKs in publish order");
        }
    };
    futures::future::join_all(gateways.iter().map(run)).await;
    let stored = (messages - 1) * 2;
    for gw in &gateways {
        assert_eq!(stored_points(&app, &gw.group).await, stored, "{}", gw.serial);
        let counted = scalar(&app.state.db, "SELECT CAST(SUM(count_val) AS BIGINT) FROM rollup_minute r JOIN containers c ON c.container_key = r.container_key WHERE c.id_group = $1", &gw.group).await;
        assert_eq!(counted, stored, "{}: the resent message counted once", gw.serial);
        let newest = scalar(
            &app.state.db,
            "SELECT CAST(latest_value AS BIGINT) FROM containers WHERE id_group = $1 AND datatype = 1",
            &gw.group,
        )
        .await;
        assert_eq!(
            newest,
            messages - 1,
            "{}: the latest value is the newest point's",
            gw.serial
        );
        let latest_second = scalar(
            &app.state.db,
            "SELECT MIN(latest_seconds) FROM containers WHERE id_group = $1",
            &gw.group,
        )
        .await;
        assert_eq!(latest_second, second(messages - 1));
    }
}

/// A message that closes the connection (QoS 2 is refused that way) still lets the measurements
/// queued before it be acknowledged first.
#[tokio::test]
async fn a_closing_message_leaves_the_queued_ones_acknowledged() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let gw = provision(&app, &admin, "GW-CLOSE", "CORE").await;
    let (client, mut events) = windowed_client(&app, &gw, "gw-close", 50);
    for m in 0..20 {
        let payload = json!([{"ts": 1_763_726_400 + m, "values": {"1": m}}]);
        client
            .publish("v1/gateway/measurements", QoS::AtLeastOnce, false, payload.to_string())
            .await
            .unwrap();
    }
    let last = json!([{"ts": 1_763_726_500, "values": {"1": 1}}]);
    client
        .publish("v1/gateway/measurements", QoS::ExactlyOnce, false, last.to_string())
        .await
        .unwrap();
    let _ = until_closed(&mut events).await;
    // What the client would send again after reconnecting: only the refused QoS 2 message.
    // (Counting PUBACK events would not do: rumqttc reports the end of the connection before
    // PUBACKs that arrived in the same read.)
    let unacknowledged: Vec<QoS> = events
        .pending
        .iter()
        .filter_map(|request| match request {
            rumqttc::Request::Publish(publish) => Some(publish.qos),
            _ => None,
        })
        .collect();
    assert_eq!(unacknowledged, [QoS::ExactlyOnce]);
    assert_eq!(stored_points(&app, &gw.group).await, 20);
}

#[tokio::test]
async fn invalid_messages_are_acknowledged_recorded_and_not_stored() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let gw = provision(&app, &admin, "GW-BAD", "CORE").await;
    let (client, mut events) = connect(&app, &gw, "gw-bad").await;
    for payload in [
        "not json".to_string(),
        json!({"values": {"12": "warm"}}).to_string(),
        json!({"values": {"x": 1}}).to_string(),
        json!({"ts": 100, "values": {"1": 1}}).to_string(),
        json!([{"values": {"1": 1}}, {"values": {"1": "bad"}}]).to_string(),
    ] {
        client
            .publish("v1/gateway/measurements", QoS::AtLeastOnce, false, payload)
            .await
            .unwrap();
        until_puback(&mut events).await;
    }
    let stored = scalar(
        &app.state.db,
        "SELECT COUNT(*) FROM containers WHERE id_group = $1",
        &gw.group,
    )
    .await;
    assert_eq!(stored, 0, "nothing of a rejected message is stored");
    let rejected = scalar(
        &app.state.db,
        "SELECT COUNT(*) FROM events WHERE event_type = 212 AND source_device = $1",
        &gw.id,
    )
    .await;
    // One event per reason at once; the second bad value of the minute is only counted.
    assert_eq!(rejected, 4);
    for reason in [
        RejectReason::NotJson,
        RejectReason::BadValue,
        RejectReason::BadDatatype,
        RejectReason::BadTimestamp,
    ] {
        assert!(messages(&app, Outcome::Rejected(reason)).await >= 1, "{reason}");
    }

    // A publish to a topic outside the gateway's own closes the connection.
    let elsewhere = ("v1/gateway/elsewhere", QoS::AtLeastOnce, json!({}));
    assert_closed_for(&app, (&client, &mut events), elsewhere, Closed::TopicNotAllowed).await;

    // Stopping records what the minute counted (the count is in the text only beyond one).
    app.stop();
    let counted = "SELECT COUNT(*) FROM events WHERE event_type = 212 AND source_device = $1";
    for _ in 0..100 {
        if scalar(&app.state.db, counted, &gw.id).await == 5 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the coalesced rejection was not recorded on stop");
}

/// A gateway has at most `assets_per_gateway` children and a device at most
/// `datatypes_per_device` datatypes: a message that would pass either is refused whole (no
/// point stored), acknowledged, and counted as `over_limit`; what exists keeps working.
#[tokio::test]
async fn a_gateway_cannot_pass_its_asset_and_datatype_limits() {
    let mut settings = devicecloud_server::Settings::default();
    settings.limits.assets_per_gateway = 2;
    settings.limits.datatypes_per_device = 3;
    let app = TestApp::spawn_with(settings).await;
    let (_, admin) = app.admin().await;
    let gw = provision(&app, &admin, "GW-LIMIT", "CORE").await;
    let (client, mut events) = connect(&app, &gw, "gw-limit").await;
    let over = messages(&app, Outcome::Rejected(RejectReason::OverLimit)).await;
    let assets = json!([{"serial": "A-1", "type": "meter"}, {"serial": "A-2", "type": "meter"}]);
    publish(&client, &mut events, "v1/gateway/devices", assets).await;
    let third = json!([{"serial": "A-3", "type": "meter"}]);
    publish(&client, &mut events, "v1/gateway/devices", third).await;
    let measurement = |device: &str, values: Value| json!([{"device": device, "values": values}]);
    let from_third = measurement("A-3", json!({"1": 1.0}));
    publish(&client, &mut events, "v1/gateway/measurements", from_third).await;
    let four_types = measurement("A-1", json!({"1": 1.0, "2": 2.0, "3": 3.0, "4": 4.0}));
    publish(&client, &mut events, "v1/gateway/measurements", four_types).await;
    assert_eq!(
        messages(&app, Outcome::Rejected(RejectReason::OverLimit)).await,
        over + 3
    );
    assert_eq!(
        stored_points(&app, &gw.group).await,
        0,
        "a refused message stores no point"
    );
    let children = "SELECT COUNT(*) FROM physical_devices WHERE id_parent = $1";
    assert_eq!(scalar(&app.state.db, children, &gw.id).await, 2);

    // Within the limits, the same assets and datatypes go on.
    let three_types = measurement("A-2", json!({"1": 1.0, "2": 2.0, "3": 3.0}));
    publish(&client, &mut events, "v1/gateway/measurements", three_types).await;
    assert_eq!(stored_points(&app, &gw.group).await, 3);
    let refused = "SELECT COUNT(*) FROM events WHERE event_type = 212 AND source_device = $1 \
                   AND value_description LIKE '%over the limit'";
    assert_eq!(
        scalar(&app.state.db, refused, &gw.id).await,
        1,
        "one event a minute per reason"
    );
}

/// A hello with another module kind than provisioned closes the connection, and is counted as
/// a message closed for that reason.
#[tokio::test]
async fn a_hello_of_another_kind_is_counted_as_closed() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let gw = provision(&app, &admin, "GW-KIND", "CORE").await;
    let (client, mut events) = connect(&app, &gw, "gw-kind").await;
    let stored = messages(&app, Outcome::Stored).await;
    publish(
        &client,
        &mut events,
        "v1/gateway/hello",
        json!({"kind": "CORE", "connection": "wifi"}),
    )
    .await;
    assert!(messages(&app, Outcome::Stored).await > stored);
    let other_kind = (
        "v1/gateway/hello",
        QoS::AtLeastOnce,
        json!({"kind": "PLUS", "connection": "wifi"}),
    );
    assert_closed_for(&app, (&client, &mut events), other_kind, Closed::KindMismatch).await;
}

/// A QoS 2 PUBLISH closes the connection, and is counted as a message closed for that reason.
#[tokio::test]
async fn a_qos_2_publish_is_counted_as_closed() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let gw = provision(&app, &admin, "GW-QOS2", "CORE").await;
    let (client, mut events) = connect(&app, &gw, "gw-qos2").await;
    let qos_2 = ("v1/gateway/events", QoS::ExactlyOnce, json!({"type": 310, "value": 1}));
    assert_closed_for(&app, (&client, &mut events), qos_2, Closed::Qos2).await;
    let stored = scalar(
        &app.state.db,
        "SELECT COUNT(*) FROM events WHERE event_type = 310 AND source_device = $1",
        &gw.id,
    )
    .await;
    assert_eq!(stored, 0);
}

#[tokio::test]
async fn a_second_connection_takes_over_without_a_loss_event() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let gw = provision(&app, &admin, "GW-TWICE", "CORE").await;
    let (first, mut first_events) = connect(&app, &gw, "one").await;
    publish(
        &first,
        &mut first_events,
        "v1/gateway/hello",
        json!({"kind": "CORE", "connection": "wifi"}),
    )
    .await;
    let (second, mut second_events) = connect(&app, &gw, "two").await;
    let _ = until_closed(&mut first_events).await;
    publish(
        &second,
        &mut second_events,
        "v1/gateway/hello",
        json!({"kind": "CORE", "connection": "ethernet"}),
    )
    .await;
    // Nothing may be recorded for the replaced connection: give it time to (not) happen.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(device(&app, &admin, &gw.id).await["is_connected"], 1);
    let values: Vec<String> = events_of(&app.state.db, &gw.id)
        .await
        .into_iter()
        .map(|e| e.1)
        .collect();
    assert_eq!(values, ["1", "3"], "no connection loss recorded on take-over");

    // A hello with another kind than provisioned: recorded, and the connection closed.
    second
        .publish(
            "v1/gateway/hello",
            QoS::AtLeastOnce,
            false,
            json!({"kind": "GO", "connection": "wifi"}).to_string(),
        )
        .await
        .unwrap();
    let _ = until_closed(&mut second_events).await;
    let mismatch = scalar(
        &app.state.db,
        "SELECT COUNT(*) FROM events WHERE event_type = 211 AND source_device = $1",
        &gw.id,
    )
    .await;
    assert_eq!(mismatch, 1);
}

#[tokio::test]
async fn a_go_module_opens_and_closes_data_sessions() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let gw = provision(&app, &admin, "GO-1", "GO").await;
    let (client, mut events) = connect(&app, &gw, "go").await;
    publish(
        &client,
        &mut events,
        "v1/gateway/hello",
        json!({"kind": "GO", "connection": "cellular"}),
    )
    .await;
    publish(
        &client,
        &mut events,
        "v1/gateway/measurements",
        json!([{"values": {"1": 1}}, {"values": {"2": 2}}]),
    )
    .await;
    let in_session = scalar(&app.state.db, "SELECT COUNT(*) FROM raw_points r JOIN data_sessions s ON s.session_key = r.session_key WHERE s.id_physical_device = $1", &gw.id).await;
    assert_eq!(in_session, 2);
    let open = scalar(
        &app.state.db,
        "SELECT COUNT(*) FROM data_sessions WHERE id_physical_device = $1 AND \"end\" IS NULL",
        &gw.id,
    )
    .await;
    assert_eq!(open, 1);
    publish(&client, &mut events, "v1/gateway/power", json!({"state": "off"})).await;
    let open = scalar(
        &app.state.db,
        "SELECT COUNT(*) FROM data_sessions WHERE id_physical_device = $1 AND \"end\" IS NULL",
        &gw.id,
    )
    .await;
    assert_eq!(open, 0);
    let count = scalar(
        &app.state.db,
        "SELECT datapoint_count FROM data_sessions WHERE id_physical_device = $1",
        &gw.id,
    )
    .await;
    assert_eq!(count, 2);
    client.disconnect().await.unwrap();
    let _ = until_closed(&mut events).await;
    // Power off then disconnect: not connected, and no connection-loss event.
    wait_until_disconnected(&app, &admin, &gw.id).await;
    let losses = scalar(
        &app.state.db,
        "SELECT COUNT(*) FROM events WHERE event_type = 208 AND value = '0' AND source_device = $1",
        &gw.id,
    )
    .await;
    assert_eq!(losses, 0);
}

#[tokio::test]
async fn rotating_the_token_ends_the_connection_and_the_old_token() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let gw = provision(&app, &admin, "GW-ROT", "CORE").await;
    let (_client, mut events) = connect(&app, &gw, "rot").await;
    let reply = send(app.request(
        Method::POST,
        &format!("/api/v2/physical-device/{}/rotate-token", gw.id),
        &admin,
    ))
    .await;
    assert_eq!(reply.status, 200);
    let _ = until_closed(&mut events).await;
    let (_, mut events) = AsyncClient::new(options(&app, "rot", &gw.serial, &gw.token), 8);
    let error = until_closed(&mut events).await;
    assert!(
        matches!(
            error,
            ConnectionError::ConnectionRefused(ConnectReturnCode::BadUserNamePassword)
        ),
        "{error:?}"
    );
    let fresh = Provisioned {
        token: reply.json()["device_token"].as_str().unwrap().into(),
        ..gw
    };
    connect(&app, &fresh, "rot").await;
}

#[tokio::test]
async fn mqtt_5_clients_are_served_too() {
    use rumqttc::v5::mqttbytes::QoS as QoS5;
    use rumqttc::v5::mqttbytes::v5::{ConnectReturnCode as Code5, Packet as Packet5};
    use rumqttc::v5::{AsyncClient as Client5, Event as Event5, MqttOptions as Options5};

    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let gw = provision(&app, &admin, "GW-V5", "CORE").await;
    let mut options = Options5::new("v5", app.mqtt_addr.ip().to_string(), app.mqtt_addr.port());
    options.set_credentials(gw.serial.clone(), gw.token.clone());
    let (client, mut events) = Client5::new(options, 8);
    match events.poll().await.unwrap() {
        Event5::Incoming(Packet5::ConnAck(ack)) => assert_eq!(ack.code, Code5::Success),
        other => panic!("{other:?}"),
    }
    client
        .publish(
            "v1/gateway/measurements",
            QoS5::AtLeastOnce,
            false,
            json!({"values": {"5": 1.5}}).to_string(),
        )
        .await
        .unwrap();
    loop {
        if let Event5::Incoming(Packet5::PubAck(_)) = events.poll().await.unwrap() {
            break;
        }
    }
    let stored = stored_points(&app, &gw.group).await;
    assert_eq!(stored, 1);
}

#[tokio::test]
async fn garbage_bytes_close_only_that_connection() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let gw = provision(&app, &admin, "GW-OK", "CORE").await;
    let (client, mut events) = connect(&app, &gw, "ok").await;
    for garbage in [
        &b"GET / HTTP/1.1\r\n\r\n"[..],
        &[0xff; 64][..],
        &[0x10, 0xff, 0xff, 0xff, 0xff, 0x7f][..],
    ] {
        let mut raw = tokio::net::TcpStream::connect(app.mqtt_addr).await.unwrap();
        raw.write_all(garbage).await.unwrap();
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(Duration::from_secs(5), raw.read(&mut buf))
            .await
            .expect("garbage connection not closed");
        assert!(matches!(read, Ok(0) | Err(_)), "the server answered garbage: {read:?}");
    }
    // The well-behaved gateway is unaffected.
    publish(
        &client,
        &mut events,
        "v1/gateway/measurements",
        json!({"values": {"1": 1}}),
    )
    .await;
}

/// An MQTT 3.1.1 CONNECT packet built by hand, for transport rules a client library will not
/// break on purpose (keep-alive silence).
fn raw_connect(serial: &str, token: &str, keep_alive: u16) -> Vec<u8> {
    let field = |s: &str| {
        let mut v = (s.len() as u16).to_be_bytes().to_vec();
        v.extend_from_slice(s.as_bytes());
        v
    };
    let mut body = field("MQTT");
    body.extend_from_slice(&[4, 0b1100_0010]);
    body.extend_from_slice(&keep_alive.to_be_bytes());
    for s in [serial, serial, token] {
        body.extend(field(s));
    }
    let mut packet = vec![0x10, body.len() as u8];
    packet.extend(body);
    packet
}

#[tokio::test]
async fn transport_rules_keep_alive_qos_2_packet_size_and_deleted_groups() {
    let settings = devicecloud_server::Settings {
        mqtt_max_packet_bytes: 1024,
        ..Default::default()
    };
    let app = TestApp::spawn_with(settings).await;
    let (_, admin) = app.admin().await;
    let gw = provision(&app, &admin, "GW-RULES", "CORE").await;

    // Keep-alive 1 s: silence for 1.5 s closes the connection, and the loss is recorded.
    let mut raw = tokio::net::TcpStream::connect(app.mqtt_addr).await.unwrap();
    raw.write_all(&raw_connect(&gw.serial, &gw.token, 1)).await.unwrap();
    let mut ack = [0u8; 4];
    raw.read_exact(&mut ack).await.unwrap();
    assert_eq!(ack, [0x20, 2, 0, 0]);
    let started = std::time::Instant::now();
    let mut rest = [0u8; 8];
    let read = tokio::time::timeout(Duration::from_secs(5), raw.read(&mut rest))
        .await
        .expect("still open after 5 s");
    assert!(matches!(read, Ok(0) | Err(_)));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1400) && waited < Duration::from_secs(4),
        "closed after {waited:?}"
    );

    // QoS 2 is refused by closing the connection.
    let (client, mut events) = connect(&app, &gw, "qos2").await;
    client
        .publish(
            "v1/gateway/measurements",
            QoS::ExactlyOnce,
            false,
            json!({"values": {"1": 1}}).to_string(),
        )
        .await
        .unwrap();
    let _ = until_closed(&mut events).await;

    // A packet over the configured maximum closes the connection; nothing is stored.
    let protocol_errors = messages(&app, Outcome::Closed(Closed::ProtocolError)).await;
    let (client, mut events) = connect(&app, &gw, "big").await;
    let values: serde_json::Map<String, Value> = (0..200).map(|i| (i.to_string(), json!(1.5))).collect();
    client
        .publish(
            "v1/gateway/measurements",
            QoS::AtLeastOnce,
            false,
            json!({"values": values}).to_string(),
        )
        .await
        .unwrap();
    let _ = until_closed(&mut events).await;
    let stored = scalar(
        &app.state.db,
        "SELECT COUNT(*) FROM containers WHERE id_group = $1",
        &gw.group,
    )
    .await;
    assert_eq!(stored, 0);
    assert!(messages(&app, Outcome::Closed(Closed::ProtocolError)).await > protocol_errors);

    // A gateway of a deleted group is not authorized.
    assert_eq!(
        send(app.request(Method::DELETE, &format!("/api/v2/group/{}", gw.group), &admin))
            .await
            .status,
        204
    );
    let (_, mut events) = AsyncClient::new(options(&app, "gone", &gw.serial, &gw.token), 8);
    let error = until_closed(&mut events).await;
    assert!(
        matches!(
            error,
            ConnectionError::ConnectionRefused(ConnectReturnCode::NotAuthorized)
        ),
        "{error:?}"
    );
}
