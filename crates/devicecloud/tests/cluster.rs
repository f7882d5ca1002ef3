//! Several `serve` processes on one PostgreSQL database, as the real binary runs
//! (docs/operations.md, "Several nodes"): a live stream client of one node sees what another
//! node commits — its gateways' points and events, and the outcomes of commands sent through it
//! — each once, in the order committed (docs/api.md, "Live stream"); a change of rights made
//! through one node holds on the others within a second; a token rotated through one node closes
//! the gateway's connection on another; a gateway reconnecting to another node ends its old
//! connection and stays connected; a command through any node reaches the gateway where it is;
//! the gateways of a killed node are shown disconnected within its lease; one webhook gets every
//! record once while every node ingests.
//!
//! Needs PostgreSQL (`DEVICECLOUD_TEST_DATABASE_URL`): one SQLite store serves one process, so
//! without it the test prints a note and passes.

mod common;

use std::time::Duration;

use common::cluster::{
    DATATYPES, Events, FIRST_SECOND, Gateway, Haproxy, MESSAGES, group_with_webhook, nodes, nodes_with,
    publish_through, shown_disconnected, status, value, within_a_second,
};
use common::{PASSWORD, Serve};
use devicecloud_protocol::ModuleKind;
use devicecloud_simulator::{Fleet, FleetOptions, Provisioner};
use reqwest::StatusCode;
use serde_json::{Value, json};

#[tokio::test]
async fn a_stream_client_of_one_node_sees_what_another_node_commits() {
    let Some(cluster) = nodes(2, "cluster_stream").await else {
        return;
    };
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    let credentials = &cluster.credentials;
    let token = a.token(credentials).await;
    let provisioner = Provisioner::new(&a.base(), &token);
    let group = provisioner.create_group("across nodes").await.unwrap();
    let publisher = provisioner
        .gateway(&group, "CLUSTER-GW-1", ModuleKind::Plus)
        .await
        .unwrap();
    let answering = provisioner
        .gateway(&group, "CLUSTER-GW-2", ModuleKind::Plus)
        .await
        .unwrap();
    let answering_id = answering.id.clone().unwrap();
    let fleet = Fleet::start(vec![answering], FleetOptions::new(a.mqtt, Duration::ZERO));
    assert!(fleet.wait_connected(1, Duration::from_secs(20)).await);
    let mut gateway = Gateway::connect(a.mqtt, &publisher.serial, &publisher.token).await;

    // The client is on node B; the gateways are on node A. Node A forwards once it has heard
    // that B records, which takes a moment after the client came: until a point arrives,
    // one is published every 100 ms (bounded).
    let mut stream = Events::open(b, &token, &group).await;
    let mut second = FIRST_SECOND;
    let first = loop {
        assert!(second < FIRST_SECOND + 100, "no point reached node B's stream in 10 s");
        gateway.measure(second).await;
        second += 1;
        if let Some(event) = stream.next(Duration::from_millis(100)).await {
            break event;
        }
    };
    assert_eq!(first.0, "measurement");
    let mut seen = vec![first.1];
    while let Some((_, record)) = stream.next(Duration::from_millis(500)).await {
        seen.push(record);
    }

    // From here on, every point arrives once, in the order committed.
    let from = second;
    for s in from..from + MESSAGES {
        gateway.measure(s).await;
    }
    gateway
        .publish(
            "v1/gateway/events",
            serde_json::to_vec(&json!([{"ts": from + MESSAGES, "type": 310, "value": "1"}])).unwrap(),
        )
        .await;
    let expected = usize::try_from(MESSAGES).unwrap() * DATATYPES as usize;
    let mut points = Vec::new();
    while points.len() < expected {
        let (event, record) = stream
            .next(Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("{} of {expected} points arrived", points.len()));
        assert_eq!(event, "measurement", "{record}");
        if record["timestamp_seconds"].as_i64().unwrap() >= from {
            points.push(record);
        }
    }
    for (i, point) in points.iter().enumerate() {
        let s = from + i64::try_from(i).unwrap() / i64::from(DATATYPES);
        let d = u32::try_from(i).unwrap() % DATATYPES + 1;
        assert_eq!(
            (
                &point["timestamp_seconds"],
                &point["datatype"],
                &point["value"],
                &point["id_group"]
            ),
            (&json!(s), &json!(d), &json!(value(s, d)), &json!(group)),
            "point {i}"
        );
    }
    let (event, record) = stream.next(Duration::from_secs(10)).await.expect("the event");
    assert_eq!((event.as_str(), &record["event_type"]), ("event", &json!("310")));

    // A command sent through node A to its gateway: its outcome reaches node B's client.
    let ping = reqwest::Client::new()
        .get(format!("{}/api/v2/physical-device/{answering_id}/ping", a.base()))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(ping.status(), 200);
    let outcome = loop {
        let (event, record) = stream.next(Duration::from_secs(10)).await.expect("the command outcome");
        if event == "command" {
            break record;
        }
        assert_eq!(event, "event", "{record}");
    };
    assert_eq!(
        (&outcome["id_physical_device"], &outcome["method"], &outcome["status"]),
        (&json!(answering_id), &json!("ping"), &json!(200))
    );
    assert!(
        stream.next(Duration::from_millis(500)).await.is_none(),
        "records after the last"
    );

    drop(fleet);
    cluster.stop().await;
}

/// Rights, tokens, gateway connections and sign-in limits across three nodes: a role removed and
/// a token revoked through B hold on A and C within a second; a device token rotated through B
/// closes the gateway's connection on A; the gateway reconnecting to C ends its connection on A
/// and stays connected; failed sign-ins through A count on B.
#[tokio::test]
async fn changes_through_one_node_take_effect_on_the_others() {
    let Some(cluster) = nodes(3, "cluster_control").await else {
        return;
    };
    let (a, b, c) = (&cluster.nodes[0], &cluster.nodes[1], &cluster.nodes[2]);
    let credentials = &cluster.credentials;
    let admin = b.token(credentials).await;
    let provisioner = Provisioner::new(&b.base(), &admin);
    let group = provisioner.create_group("three nodes").await.unwrap();
    let viewer = cluster
        .store
        .admin_ok(&[
            "create-user",
            "--username",
            "viewer@example.com",
            "--password",
            PASSWORD,
        ])
        .await;
    let id_viewer = viewer["id_user"].as_str().unwrap();
    let membership = format!("/api/v2/group/{group}/member/{id_viewer}");
    let http = reqwest::Client::new();
    let granted = http
        .put(format!("{}{membership}", b.base()))
        .bearer_auth(&admin)
        .json(&json!({"role": "viewer"}))
        .send()
        .await
        .unwrap();
    assert_eq!(granted.status(), 200);

    // The viewer reads the group through A and C (their caches now hold the role), then B
    // takes the role away.
    let viewer_token = a.token_of(credentials, "viewer@example.com").await;
    let path = format!("/api/v2/group/{group}");
    for node in [a, c] {
        assert_eq!(status(node, &viewer_token, &path).await, StatusCode::OK);
    }
    let removed = http
        .delete(format!("{}{membership}", b.base()))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), 204);
    let took = within_a_second(&[a, c], &viewer_token, &path, StatusCode::NOT_FOUND).await;
    eprintln!("role removed through B: refused through A and C after {took:?}");

    // A token revoked through B is refused through A and C (which had it cached).
    let other = a.token(credentials).await;
    for node in [a, c] {
        assert_eq!(status(node, &other, "/api/v2/group").await, StatusCode::OK);
    }
    let revoked = http
        .post(format!("{}/oauth2/revoke", b.base()))
        .basic_auth(&credentials.client_id, Some(&credentials.client_secret))
        .form(&[("token", other.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 200);
    let took = within_a_second(&[a, c], &other, "/api/v2/group", StatusCode::UNAUTHORIZED).await;
    eprintln!("token revoked through B: refused through A and C after {took:?}");

    // A device token rotated through B ends the gateway's connection on A.
    let spec = provisioner
        .gateway(&group, "CLUSTER-GW-ROT", ModuleKind::Plus)
        .await
        .unwrap();
    let id = spec.id.clone().unwrap();
    let mut on_a = Gateway::connect(a.mqtt, &spec.serial, &spec.token).await;
    on_a.hello().await;
    let rotate = format!("/api/v2/physical-device/{id}/rotate-token");
    let rotated = b.json(reqwest::Method::POST, &admin, &rotate).await;
    let token = rotated["device_token"].as_str().unwrap().to_string();
    assert!(
        on_a.closed_within(Duration::from_secs(1)).await,
        "the connection on A outlived the rotation through B by 1 s"
    );

    // With the new token on A, then on C: the connection on A is taken over, and the gateway
    // stays connected (A does not mark it gone).
    let mut on_a = Gateway::connect(a.mqtt, &spec.serial, &token).await;
    on_a.hello().await;
    let mut on_c = Gateway::connect(c.mqtt, &spec.serial, &token).await;
    on_c.hello().await;
    assert!(
        on_a.closed_within(Duration::from_secs(1)).await,
        "the connection on A outlived the take-over on C by 1 s"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let device = b
        .json(reqwest::Method::GET, &admin, &format!("/api/v2/physical-device/{id}"))
        .await;
    assert_eq!(device["is_connected"], json!(1), "{device}");
    on_c.measure(FIRST_SECOND).await;

    // Ten wrong passwords through A (the limit) close the pair on B too: even the right
    // password is refused there (429) before it is checked.
    let grant = |node: &Serve, password: &str| {
        reqwest::Client::new()
            .post(format!("{}/oauth2/token", node.base()))
            .form(&[
                ("grant_type", "password"),
                ("client_id", credentials.client_id.as_str()),
                ("client_secret", credentials.client_secret.as_str()),
                ("username", "viewer@example.com"),
                ("password", password),
            ])
            .send()
    };
    for _ in 0..10 {
        assert_eq!(grant(a, "wrong password").await.unwrap().status(), 401);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(grant(b, PASSWORD).await.unwrap().status(), 429);

    cluster.stop().await;
}

/// A gateway connected to node A answers pings sent through B and C (each recorded once, by
/// the node that received it); a gateway connected nowhere is not online through any node.
#[tokio::test]
async fn a_command_through_any_node_reaches_the_gateway_where_it_is() {
    let Some(cluster) = nodes(3, "cluster_commands").await else {
        return;
    };
    let (a, b, c) = (&cluster.nodes[0], &cluster.nodes[1], &cluster.nodes[2]);
    let admin = a.token(&cluster.credentials).await;
    let provisioner = Provisioner::new(&a.base(), &admin);
    let group = provisioner.create_group("commands across nodes").await.unwrap();
    let spec = provisioner
        .gateway(&group, "CLUSTER-GW-PING", ModuleKind::Plus)
        .await
        .unwrap();
    let id = spec.id.clone().unwrap();
    let absent = provisioner
        .gateway(&group, "CLUSTER-GW-ABSENT", ModuleKind::Plus)
        .await
        .unwrap();
    let fleet = Fleet::start(vec![spec], FleetOptions::new(a.mqtt, Duration::ZERO));
    assert!(fleet.wait_connected(1, Duration::from_secs(20)).await);
    // Connected once its hello is stored, which names node A.
    hello_stored(a, &admin, &id).await;
    let device = format!("/api/v2/physical-device/{id}");

    for node in [a, b, c] {
        let started = tokio::time::Instant::now();
        let pong = node.json(reqwest::Method::GET, &admin, &format!("{device}/ping")).await;
        assert_eq!(pong["status"], json!(200), "ping through {}: {pong}", node.base());
        assert_eq!(pong["payload"]["data"], json!("pong"), "{pong}");
        eprintln!("ping through {}: {:?}", node.base(), started.elapsed());
    }
    // Each ping is recorded once (event 213), whichever node relayed it; the command log
    // writes its events in the background, so they may take a moment.
    let events = format!("/api/v2/event?filter[source_device]={id}&filter[event_type]=213");
    let mut recorded = 0;
    for _ in 0..100 {
        recorded = a.total(&admin, &events).await;
        if recorded >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!((recorded, a.total(&admin, &events).await), (3, 3));

    let offline = reqwest::Client::new()
        .get(format!(
            "{}/api/v2/physical-device/{}/ping",
            b.base(),
            absent.id.unwrap()
        ))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(offline.status(), StatusCode::NOT_FOUND);
    let body: Value = offline.json().await.unwrap();
    assert_eq!(body["message"], json!("Device is not online"), "{body}");

    drop(fleet);
    cluster.stop().await;
}

/// A twin changed through one node reaches the simulated gateway connected to another, which
/// applies `reporting_interval_s` and reports it (read through a third); a gateway that was
/// offline when its twin changed gets the document after its hello, wherever it connects.
#[tokio::test]
async fn a_desired_change_through_any_node_reaches_the_gateway_where_it_is() {
    let Some(cluster) = nodes(3, "cluster_twins").await else {
        return;
    };
    let (a, b, c) = (&cluster.nodes[0], &cluster.nodes[1], &cluster.nodes[2]);
    let admin = a.token(&cluster.credentials).await;
    let provisioner = Provisioner::new(&a.base(), &admin);
    let group = provisioner.create_group("twins across nodes").await.unwrap();
    let online = provisioner
        .gateway(&group, "CLUSTER-TWIN-ON", ModuleKind::Plus)
        .await
        .unwrap();
    let offline = provisioner
        .gateway(&group, "CLUSTER-TWIN-OFF", ModuleKind::Core)
        .await
        .unwrap();
    let (online_id, offline_id) = (online.id.clone().unwrap(), offline.id.clone().unwrap());
    let fleet = Fleet::start(vec![online], FleetOptions::new(a.mqtt, Duration::ZERO));
    assert!(fleet.wait_connected(1, Duration::from_secs(20)).await);
    hello_stored(a, &admin, &online_id).await;

    let changed = patch_twin(b, &admin, &online_id, 7).await;
    assert_eq!(changed["version"], json!(1));
    let (twin, took) = in_sync_through(c, &admin, &online_id, 1).await;
    assert_eq!(twin["reported"], json!({"reporting_interval_s": 7}));
    eprintln!("desired through node B applied by the gateway on node A, seen through C: {took:?}");

    // Offline when changed: the document comes after the hello, here on node C.
    patch_twin(a, &admin, &offline_id, 9).await;
    let late = Fleet::start(vec![offline], FleetOptions::new(c.mqtt, Duration::ZERO));
    assert!(late.wait_connected(1, Duration::from_secs(20)).await);
    let (twin, _) = in_sync_through(b, &admin, &offline_id, 1).await;
    assert_eq!(twin["reported"], json!({"reporting_interval_s": 9}));

    drop(fleet);
    drop(late);
    cluster.stop().await;
}

/// Waits (at most 10 s) until the hello of gateway `id` is stored: it shows connected.
async fn hello_stored(node: &common::Serve, admin: &str, id: &str) {
    let device = format!("/api/v2/physical-device/{id}");
    let mut waited = 0;
    while node.json(reqwest::Method::GET, admin, &device).await["is_connected"] != json!(1) {
        waited += 1;
        assert!(waited < 200, "the gateway's hello was not stored within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sets the desired `reporting_interval_s` of device `id` through `node`; the twin as answered.
async fn patch_twin(node: &common::Serve, admin: &str, id: &str, seconds: u64) -> Value {
    let reply = reqwest::Client::new()
        .patch(format!("{}/api/v2/physical-device/{id}/twin", node.base()))
        .bearer_auth(admin)
        .json(&json!({"desired": {"reporting_interval_s": seconds}}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), StatusCode::OK);
    reply.json().await.unwrap()
}

/// Waits (at most 10 s) until the twin of `id`, read through `node`, says the device applied
/// `version` and is in sync; the twin and how long that took.
async fn in_sync_through(node: &common::Serve, admin: &str, id: &str, version: i64) -> (Value, Duration) {
    let path = format!("/api/v2/physical-device/{id}/twin");
    let started = tokio::time::Instant::now();
    loop {
        let twin = node.json(reqwest::Method::GET, admin, &path).await;
        if twin["reported_version"] == json!(version) && twin["in_sync"] == json!(1) {
            return (twin, started.elapsed());
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "not in sync within 10 s: {twin}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A node killed outright (SIGKILL): the gateway it held and that did not come back is shown
/// disconnected by the surviving node within the lease (3 s here) and a third, with one
/// connection-loss event (208, value 0); a gateway that reconnected to the surviving node stays
/// connected.
#[tokio::test]
async fn the_gateways_of_a_killed_node_are_marked_disconnected_within_the_lease() {
    let Some(mut cluster) = nodes(2, "cluster_lease").await else {
        return;
    };
    let b = &cluster.nodes[1];
    let admin = b.token(&cluster.credentials).await;
    let provisioner = Provisioner::new(&b.base(), &admin);
    let group = provisioner.create_group("a node dies").await.unwrap();
    let mut held = Vec::new();
    for serial in ["CLUSTER-GW-GONE", "CLUSTER-GW-BACK"] {
        let spec = provisioner.gateway(&group, serial, ModuleKind::Plus).await.unwrap();
        let mut gateway = Gateway::connect(cluster.nodes[0].mqtt, &spec.serial, &spec.token).await;
        gateway.hello().await;
        held.push((spec, gateway));
    }
    let connected = |id: &str| format!("/api/v2/physical-device/{id}");
    let ids: Vec<String> = held.iter().map(|(spec, _)| spec.id.clone().unwrap()).collect();
    for id in &ids {
        let device = b.json(reqwest::Method::GET, &admin, &connected(id)).await;
        assert_eq!(device["is_connected"], json!(1), "{device}");
    }

    let mut a = cluster.nodes.remove(0);
    a.child.kill().await.unwrap();
    let killed = tokio::time::Instant::now();
    let b = &cluster.nodes[0];
    let (back, _) = &held[1];
    let mut again = Gateway::connect(b.mqtt, &back.serial, &back.token).await;
    again.hello().await;

    shown_disconnected(b, &admin, &ids[..1], killed).await;
    let device = b.json(reqwest::Method::GET, &admin, &connected(&ids[1])).await;
    assert_eq!(device["is_connected"], json!(1), "the gateway that came back: {device}");
    let losses = |id: &str| format!("/api/v2/event?filter[source_device]={id}&filter[event_type]=208&filter[value]=0");
    assert_eq!(b.total(&admin, &losses(&ids[0])).await, 1);
    assert_eq!(b.total(&admin, &losses(&ids[1])).await, 0);
    again.measure(FIRST_SECOND).await;

    cluster.stop().await;
}

/// One webhook while three nodes ingest, each from its own gateway: every acknowledged point
/// reaches the receiver once, in batches each posted once, each series in the order it was sent
/// (one node works the webhook's lane).
#[tokio::test]
async fn one_webhook_gets_every_record_once_while_every_node_ingests() {
    let Some(cluster) = nodes(3, "cluster_webhook").await else {
        return;
    };
    let a = &cluster.nodes[0];
    let admin = a.token(&cluster.credentials).await;
    let provisioner = Provisioner::new(&a.base(), &admin);
    let (group, receiver) = group_with_webhook(a, &admin, "one webhook").await;

    let mut publishers = Vec::new();
    for (i, node) in cluster.nodes.iter().enumerate() {
        let spec = provisioner
            .gateway(&group, &format!("CLUSTER-GW-HOOK-{i}"), ModuleKind::Plus)
            .await
            .unwrap();
        let (mqtt, serial, token) = (node.mqtt, spec.serial.clone(), spec.token.clone());
        publishers.push(tokio::spawn(async move {
            let mut gateway = Gateway::connect(mqtt, &serial, &token).await;
            // Spread over a second or so, so that every node's lane has work at the same time.
            for s in 0..MESSAGES {
                gateway.measure(FIRST_SECOND + s).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }));
    }
    for publisher in publishers {
        publisher.await.unwrap();
    }
    let expected = cluster.nodes.len() * usize::try_from(MESSAGES).unwrap() * DATATYPES as usize;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while receiver.points().len() < expected {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {expected} points reached the webhook in 30 s",
            receiver.points().len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A moment for a repeat to show, then: each point once, each delivery once.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut points = receiver.points();
    points.sort();
    points.dedup();
    assert_eq!(points.len(), expected);
    assert_eq!(receiver.points().len(), expected, "points posted more than once");
    let mut deliveries: Vec<String> = receiver.seen.lock().unwrap().iter().map(|(id, _)| id.clone()).collect();
    let posted = deliveries.len();
    deliveries.sort();
    deliveries.dedup();
    assert_eq!(deliveries.len(), posted, "a delivery was posted twice");
    // One node works the lane and posts its batches one after another, in the queue's order:
    // each series' points arrive in the order its gateway sent them.
    let mut last: std::collections::HashMap<(String, i64), i64> = std::collections::HashMap::new();
    for (device, second, datatype) in receiver.points() {
        if let Some(before) = last.insert((device.clone(), datatype), second) {
            assert!(
                before < second,
                "{device}, datatype {datatype}: {second} arrived after {before}"
            );
        }
    }
    eprintln!("{expected} points in {posted} deliveries");

    cluster.stop().await;
}

/// Gateways publish through HAProxy while node A is killed (SIGKILL): the gateways on A
/// reconnect to B or C through HAProxy and go on; every acknowledged point is stored once and
/// reaches the webhook (a batch posted twice only under its one delivery id); the gateways
/// connected to A that do not come back are shown disconnected within the lease.
#[tokio::test]
async fn a_node_killed_behind_haproxy_loses_no_acknowledged_point() {
    let Some(mut cluster) = nodes(3, "cluster_failover").await else {
        return;
    };
    let Some(haproxy) = Haproxy::start(&cluster.nodes).await else {
        cluster.stop().await;
        return;
    };
    let b = &cluster.nodes[1];
    let admin = b.token(&cluster.credentials).await;
    let provisioner = Provisioner::new(&b.base(), &admin);
    let (group, receiver) = group_with_webhook(b, &admin, "failover").await;

    // Six gateways publish through HAProxy (two land on each node); two more on node A do not
    // come back once it is gone.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut publishers = Vec::new();
    for i in 0..6 {
        let spec = provisioner
            .gateway(&group, &format!("CLUSTER-GW-HA-{i}"), ModuleKind::Core)
            .await
            .unwrap();
        let (mqtt, stop) = (haproxy.mqtt, stop.clone());
        publishers.push(tokio::spawn(publish_through(
            mqtt,
            spec.serial,
            spec.token,
            FIRST_SECOND,
            stop,
        )));
    }
    let mut gone = Vec::new();
    for i in 0..2 {
        let spec = provisioner
            .gateway(&group, &format!("CLUSTER-GW-GONE-{i}"), ModuleKind::Plus)
            .await
            .unwrap();
        let mut gateway = Gateway::connect(cluster.nodes[0].mqtt, &spec.serial, &spec.token).await;
        gateway.hello().await;
        gateway.measure(FIRST_SECOND).await;
        gone.push((spec.id.unwrap(), gateway));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut a = cluster.nodes.remove(0);
    a.child.kill().await.unwrap();
    let killed = tokio::time::Instant::now();
    let b = &cluster.nodes[0];
    let ids: Vec<String> = gone.iter().map(|(id, _)| id.clone()).collect();
    shown_disconnected(b, &admin, &ids, killed).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut acked = 0;
    for publisher in publishers {
        let seconds = publisher.await.unwrap();
        assert!(
            seconds.len() > 20,
            "a gateway had only {} messages acknowledged",
            seconds.len()
        );
        acked += seconds.len();
    }
    // Each gone gateway's one message, plus every acknowledged one: each stored once.
    let expected = (acked + gone.len()) * DATATYPES as usize;
    let stored = b.total(&admin, &format!("/api/v2/data?filter[id_group]={group}")).await;
    assert_eq!(
        stored,
        i64::try_from(expected).unwrap(),
        "points stored against acknowledged"
    );
    for (id, _) in &gone {
        let losses = format!("/api/v2/event?filter[source_device]={id}&filter[event_type]=208&filter[value]=0");
        assert_eq!(b.total(&admin, &losses).await, 1);
    }

    // Every stored point reaches the webhook; one repeated only within its own delivery id.
    receiver.until_distinct(expected, "failover").await;
    let seen = receiver.seen.lock().unwrap().clone();
    let mut by_point: std::collections::HashMap<(String, i64, i64), String> = std::collections::HashMap::new();
    for (delivery, body) in &seen {
        for item in body["items"].as_array().cloned().unwrap_or_default() {
            let key = (
                item["source_device"].as_str().unwrap_or_default().to_string(),
                item["timestamp_seconds"].as_i64().unwrap_or_default(),
                item["datatype"].as_i64().unwrap_or_default(),
            );
            if let Some(first) = by_point.insert(key.clone(), delivery.clone()) {
                assert_eq!(&first, delivery, "{key:?} posted in two deliveries");
            }
        }
    }
    eprintln!(
        "{acked} messages acknowledged, {expected} points stored and posted in {} requests",
        seen.len()
    );
    drop(gone);
    drop(haproxy);
    cluster.stop().await;
}

/// The rate limit per account holds across the nodes: 15 requests through A leave the account
/// about 5 through B (of 20 a minute), once A's half-second report has reached B.
#[tokio::test]
async fn the_rate_limit_of_an_account_counts_its_requests_on_every_node() {
    let Some(cluster) = nodes_with(2, "cluster_rate", &[("DEVICECLOUD_RATE_LIMIT", "20/60")]).await else {
        return;
    };
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    let admin = a.token(&cluster.credentials).await;
    for _ in 0..15 {
        assert_eq!(status(a, &admin, "/api/v2/group").await, StatusCode::OK);
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let mut allowed = 0;
    while status(b, &admin, "/api/v2/group").await == StatusCode::OK {
        allowed += 1;
        assert!(
            allowed <= 20,
            "node B let through the whole limit: A's requests not counted"
        );
    }
    // 5 left, plus at most one request back (one every 3 s) while the report travelled.
    assert!(
        (4..=6).contains(&allowed),
        "{allowed} requests through B after 15 through A"
    );
    cluster.stop().await;
}
