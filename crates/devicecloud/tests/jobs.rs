//! Jobs across the death of a process (docs/api.md, "Jobs"): `serve` killed outright (SIGKILL)
//! in the middle of a ping job and started again on the same SQLite store, and one of three
//! nodes on PostgreSQL killed while another runs on. Gateways here are MQTT clients that count
//! every command they receive and answer after a moment, so that some executions are in flight
//! when the process dies. Every execution must end exactly once, and no gateway may get its
//! command more than twice (sent at most once more when its outcome was not recorded).

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::cluster::nodes;
use common::{Dir, Serve, Store};
use devicecloud_protocol::ModuleKind;
use devicecloud_simulator::Provisioner;
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use serde_json::{Value, json};
use tokio::sync::watch;

/// Commands each gateway received, by serial.
type Received = Arc<Mutex<HashMap<String, u32>>>;

/// A gateway that connects to whatever address `mqtt` holds (again after every loss), says
/// hello, counts each command and answers it with a pong after `delay`.
fn counting_gateway(
    serial: String,
    token: String,
    mqtt: watch::Receiver<SocketAddr>,
    received: Received,
    delay: Duration,
) {
    tokio::spawn(async move {
        loop {
            let addr = *mqtt.borrow();
            let mut options = MqttOptions::new(serial.clone(), addr.ip().to_string(), addr.port());
            options.set_credentials(serial.clone(), token.clone());
            options.set_keep_alive(Duration::from_secs(30));
            let (client, mut events) = AsyncClient::new(options, 64);
            let hello = json!({"kind": "PLUS", "connection": "cellular", "signal": 20}).to_string();
            let _ = client.publish("v1/gateway/hello", QoS::AtLeastOnce, false, hello).await;
            let _ = client.subscribe("v1/gateway/commands/+", QoS::AtLeastOnce).await;
            loop {
                match events.poll().await {
                    Ok(Event::Incoming(Packet::Publish(p))) => {
                        let Some(id) = p.topic.strip_prefix("v1/gateway/commands/") else {
                            continue;
                        };
                        *received.lock().unwrap().entry(serial.clone()).or_default() += 1;
                        let (client, topic) = (client.clone(), format!("v1/gateway/responses/{id}"));
                        tokio::spawn(async move {
                            tokio::time::sleep(delay).await;
                            let pong = json!({"status": 200, "payload": {"data": "pong", "result": "success"}});
                            let _ = client.publish(topic, QoS::AtLeastOnce, false, pong.to_string()).await;
                        });
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
}

/// Provisions `n` gateways in a new group through `node` and starts them against `mqtt`; the
/// group.
async fn fleet(node: &Serve, admin: &str, mqtt: &watch::Receiver<SocketAddr>, n: usize, received: &Received) -> String {
    let provisioner = Provisioner::new(&node.base(), admin);
    let group = provisioner.create_group("a job through a crash").await.unwrap();
    for i in 0..n {
        let spec = provisioner
            .gateway(&group, &format!("JOB-KILL-{i:03}"), ModuleKind::Plus)
            .await
            .unwrap();
        counting_gateway(
            spec.serial.clone(),
            spec.token.clone(),
            mqtt.clone(),
            received.clone(),
            Duration::from_millis(400),
        );
    }
    group
}

/// A ping job over the group, twenty starts a second; its id.
async fn ping_job(node: &Serve, admin: &str, group: &str) -> String {
    let body = json!({"label": "Ping through a crash", "operation": {"command": "ping"},
        "target": {"filter": {"id_group": group}}, "rate_per_minute": 1200, "timeout_s": 10});
    let reply = reqwest::Client::new()
        .post(format!("{}/api/v2/job", node.base()))
        .bearer_auth(admin)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 201);
    let job: Value = reply.json().await.unwrap();
    job["id_job"].as_str().unwrap().to_string()
}

/// Waits until the job's counts say some ended and some are still to run, then a bit more.
async fn halfway(node: &Serve, admin: &str, id: &str) {
    for _ in 0..200 {
        let job = node
            .json(reqwest::Method::GET, admin, &format!("/api/v2/job/{id}"))
            .await;
        if job["succeeded"].as_i64().unwrap_or(0) >= 10 && job["in_progress"].as_i64().unwrap_or(0) > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the job never had executions both ended and in progress");
}

/// Waits (at most 60 s) for the job to end; checks that every execution ended once and that no
/// gateway got its command more than twice. `all_succeed`: every gateway answered in the end
/// (with the runner killed, its executions are taken over; with only the node relaying the
/// commands killed, those in flight through it time out: their outcome is unknown).
async fn ended_once_each(node: &Serve, admin: &str, id: &str, n: usize, received: &Received, all_succeed: bool) {
    let mut job = Value::Null;
    for _ in 0..600 {
        job = node
            .json(reqwest::Method::GET, admin, &format!("/api/v2/job/{id}"))
            .await;
        if job["finished_at"].is_i64() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(job["finished_at"].is_i64(), "the job did not end within 60 s: {job}");
    let count = |key: &str| job[key].as_i64().unwrap();
    assert_eq!(count("total"), n as i64);
    assert_eq!((count("pending"), count("in_progress")), (0, 0), "{job}");
    assert_eq!(
        count("succeeded") + count("failed") + count("timed_out") + count("cancelled"),
        n as i64,
        "{job}"
    );
    if all_succeed {
        assert_eq!(count("succeeded"), n as i64, "every gateway answered: {job}");
    } else {
        assert_eq!(count("succeeded") + count("timed_out"), n as i64, "{job}");
        assert!(count("succeeded") >= n as i64 / 2, "{job}");
    }
    let executions = node
        .json(
            reqwest::Method::GET,
            admin,
            &format!("/api/v2/job/{id}/execution?per-page=1000"),
        )
        .await;
    let items = executions["items"].as_array().unwrap();
    assert_eq!(items.len(), n);
    let ended = ["succeeded", "timed_out"];
    assert!(items.iter().all(|e| ended.contains(&e["status"].as_str().unwrap())));
    let again = items.iter().filter(|e| e["attempts"] == json!(2)).count();
    let received = received.lock().unwrap().clone();
    assert!(
        received.len() as i64 >= count("succeeded"),
        "every gateway that succeeded got its command"
    );
    let most = received.values().copied().max().unwrap_or(0);
    let twice = received.values().filter(|c| **c == 2).count();
    assert!(most <= 2, "a command sent more than once more: {received:?}");
    assert!(
        twice <= again,
        "{twice} gateways got two commands, {again} executions had two attempts"
    );
    eprintln!("job through a crash: {job}; {again} executions sent again, {twice} gateways got two commands");
}

#[tokio::test]
async fn a_job_survives_a_killed_server_and_ends_each_execution_once() {
    const N: usize = 60;
    let dir = Dir::new("jobs-kill");
    let store = Store::sqlite(&dir);
    let credentials = store.bootstrap().await;
    let mut first = store.serve().await;
    let admin = first.token(&credentials).await;
    let (mqtt, watch_mqtt) = watch::channel(first.mqtt);
    let received: Received = Arc::default();
    let group = fleet(&first, &admin, &watch_mqtt, N, &received).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let id = ping_job(&first, &admin, &group).await;
    halfway(&first, &admin, &id).await;

    first.child.kill().await.unwrap();
    let second = store.serve().await;
    mqtt.send_replace(second.mqtt);
    ended_once_each(&second, &admin, &id, N, &received, true).await;
    second.stop().await;
}

#[tokio::test]
async fn a_job_goes_on_when_a_node_dies() {
    const N: usize = 60;
    let Some(mut cluster) = nodes(3, "cluster_jobs").await else {
        return;
    };
    let admin = cluster.nodes[1].token(&cluster.credentials).await;
    // The gateways on node A, the job created through B: whichever node runs it, killing A
    // leaves its executions in flight to another node.
    let (mqtt, watch_mqtt) = watch::channel(cluster.nodes[0].mqtt);
    let received: Received = Arc::default();
    let group = fleet(&cluster.nodes[1], &admin, &watch_mqtt, N, &received).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let id = ping_job(&cluster.nodes[1], &admin, &group).await;
    halfway(&cluster.nodes[1], &admin, &id).await;

    let mut a = cluster.nodes.remove(0);
    a.child.kill().await.unwrap();
    mqtt.send_replace(cluster.nodes[0].mqtt);
    ended_once_each(&cluster.nodes[1], &admin, &id, N, &received, false).await;
    cluster.stop().await;
}
