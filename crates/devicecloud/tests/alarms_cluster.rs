//! Alarm rules on two `serve` processes sharing one PostgreSQL database (docs/api.md, "Alarms";
//! docs/operations.md, "Several nodes"): a rule created through one node is evaluated by the
//! other within a second; an alarm raised by the node that committed the point shows on the other
//! node's live stream; the gateway moving to the first node, its next point clears the alarm
//! there, the node reading what the store says is open.
//!
//! Needs PostgreSQL (`DEVICECLOUD_TEST_DATABASE_URL`): without it the test prints a note and
//! passes.

mod common;

use std::time::Duration;

use common::Serve;
use common::cluster::{Events, Gateway, nodes};
use devicecloud_protocol::ModuleKind;
use devicecloud_simulator::Provisioner;
use serde_json::{Value, json};

/// The alarms of `device` through `node`, newest first.
async fn alarms(node: &Serve, token: &str, device: &str) -> Vec<Value> {
    let answer: Value = reqwest::Client::new()
        .get(format!("{}/api/v2/alarm", node.base()))
        .query(&[("filter[source_device]", device)])
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    answer["items"].as_array().unwrap().clone()
}

/// The next `alarm` record on `events` within 10 s.
async fn next_alarm(events: &mut Events) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let wait = deadline.saturating_duration_since(tokio::time::Instant::now());
        match events.next(wait).await {
            Some((name, record)) if name == "alarm" => return record,
            Some(_) => {}
            None => panic!("no alarm record on the stream within 10 s"),
        }
    }
}

fn point(second: i64, value: f64) -> Vec<u8> {
    json!([{"ts": second, "values": {"12": value}}])
        .to_string()
        .into_bytes()
}

#[tokio::test]
async fn an_alarm_is_raised_by_the_committing_node_and_cleared_by_the_next_one() {
    let Some(cluster) = nodes(2, "cluster_alarms").await else {
        return;
    };
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    let admin = a.token(&cluster.credentials).await;
    let provisioner = Provisioner::new(&a.base(), &admin);
    let group = provisioner.create_group("alarms across nodes").await.unwrap();
    let spec = provisioner
        .gateway(&group, "CLUSTER-ALARM-1", ModuleKind::Plus)
        .await
        .unwrap();
    let id = spec.id.clone().unwrap();
    let created = reqwest::Client::new()
        .post(format!("{}/api/v2/alarm-rule", a.base()))
        .bearer_auth(&admin)
        .json(&json!({"id_group": group, "label": "Hot", "severity": "critical", "condition": "value > 30.0", "datatype": 12}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let mut stream = Events::open(a, &admin, &group).await;

    // Node B reads the rule within a second of its creation through node A.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut gw = Gateway::connect(b.mqtt, &spec.serial, &spec.token).await;
    gw.hello().await;
    let t = 1_763_726_400;
    gw.publish("v1/gateway/measurements", point(t, 31.0)).await;
    let raised = next_alarm(&mut stream).await;
    assert_eq!(
        (&raised["status"], &raised["source_device"]),
        (&json!("active"), &json!(id))
    );

    // The gateway moves to node A, which has never seen its series: what is open comes from the
    // store, so the next point under the threshold clears the alarm B raised.
    gw.client.disconnect().await.unwrap();
    let mut gw = Gateway::connect(a.mqtt, &spec.serial, &spec.token).await;
    gw.hello().await;
    gw.publish("v1/gateway/measurements", point(t + 1, 10.0)).await;
    let cleared = next_alarm(&mut stream).await;
    assert_eq!(cleared["status"], json!("cleared"));
    let stored = alarms(b, &admin, &id).await;
    assert_eq!(stored.len(), 1, "{stored:#?}");
    assert_eq!(stored[0]["status"], json!("cleared"));

    cluster.stop().await;
}
