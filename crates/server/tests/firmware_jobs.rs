//! Firmware campaigns (docs/api.md, "Firmware: update") over real HTTP with simulated gateways
//! over real MQTT that download, check and install images: a job updates a fleet and every
//! gateway comes back on the new version (event 219); rehearsed failures and rollbacks fail
//! their executions (events 220, 221) and halt a campaign past `max_failures_percent`; the
//! image cannot be deleted while the job runs; a gateway offline at its turn gets its update
//! when it connects.

mod common;

use std::time::Duration;

use common::jobs::{created, executions, job_until};
use common::{TestApp, send};
use devicecloud_protocol::ModuleKind;
use devicecloud_simulator::{Fleet, FleetOptions, GatewaySpec, Provisioner};
use reqwest::Method;
use serde_json::{Value, json};

/// A server, its administrator's token, a group, and `n` PLUS gateways provisioned in it.
async fn setup(label: &str, prefix: &str, n: usize) -> (TestApp, String, String, Vec<GatewaySpec>) {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let provisioner = Provisioner::new(&app.base, &admin);
    let group = provisioner.create_group(label).await.unwrap();
    let mut specs = Vec::new();
    for i in 0..n {
        specs.push(
            provisioner
                .gateway(&group, &format!("{prefix}-{i}"), ModuleKind::Plus)
                .await
                .unwrap(),
        );
    }
    (app, admin, group, specs)
}

/// Starts `specs` with updates downloaded from `app`, `fail_percent` of them failing.
async fn fleet(app: &TestApp, admin: &str, specs: Vec<GatewaySpec>, fail_percent: u8) -> Fleet {
    let n = specs.len();
    let mut options = FleetOptions::new(app.mqtt_addr, Duration::ZERO);
    options.firmware = Some(
        Provisioner::new(&app.base, admin)
            .firmware_source(fail_percent)
            .await
            .unwrap(),
    );
    let fleet = Fleet::start(specs, options);
    assert!(fleet.wait_connected(n, Duration::from_secs(20)).await);
    fleet
}

/// Uploads a PLUS `app` image of `version` (300 KiB) for `group`; its id.
async fn image(app: &TestApp, admin: &str, group: &str, version: &str) -> String {
    image_of_kind(app, admin, group, ModuleKind::Plus, version).await
}

/// Uploads an `app` image of `kind` and `version` (300 KiB) for `group`; its id.
async fn image_of_kind(app: &TestApp, admin: &str, group: &str, kind: ModuleKind, version: &str) -> String {
    let bytes: Vec<u8> = (0..300 * 1024).map(|i| (i % 253) as u8).collect();
    Provisioner::new(&app.base, admin)
        .upload_firmware(kind, "app", version, Some(group), bytes)
        .await
        .unwrap()
}

/// Waits (at most 60 s) until the job finished; returns it.
async fn finished(app: &TestApp, admin: &str, id: &str) -> Value {
    job_until(app, admin, id, Duration::from_secs(60), |job| {
        !job["finished_at"].is_null()
    })
    .await
}

/// The events of `event_type` of the group, their values by source device.
async fn events(app: &TestApp, admin: &str, group: &str, event_type: i64) -> Vec<(String, String)> {
    let path = format!("/api/v2/event?filter[id_group]={group}&filter[event_type]={event_type}&per-page=100");
    let page = send(app.get(&path, admin)).await.expect(200).json();
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["source_device"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_campaign_updates_every_gateway_and_each_comes_back_on_the_new_version() {
    let (app, admin, group, specs) = setup("campaign", "FW-OK", 6).await;
    let ids: Vec<String> = specs.iter().map(|s| s.id.clone().unwrap()).collect();
    let mut online = specs;
    let late = online.pop().unwrap();
    let fleet = fleet(&app, &admin, online, 0).await;
    let id_firmware = image(&app, &admin, &group, "2.5.0").await;

    let job = created(
        &app,
        &admin,
        json!({"label": "App 2.5.0", "operation": {"firmware": id_firmware},
            "target": {"filter": {"id_group": group}}}),
    )
    .await;
    let record = send(app.get(&format!("/api/v2/job/{job}"), &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(record["timeout_s"], 900);
    assert_eq!(record["total"], 6);
    // While the job has executions left, its image stays.
    let path = format!("/api/v2/firmware/{id_firmware}");
    let busy = send(app.request(Method::DELETE, &path, &admin)).await;
    assert_eq!(busy.status, 409, "{}", busy.text);

    // The offline gateway gets its update once it connects.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let second = self::fleet(&app, &admin, vec![late], 0).await;
    let done = finished(&app, &admin, &job).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["succeeded"], 6);
    for execution in executions(&app, &admin, &job).await {
        assert_eq!(execution["status"], "succeeded", "{execution}");
        assert_eq!(execution["result"]["payload"]["version"], "2.5.0");
    }
    for id in &ids {
        let device = send(app.get(&format!("/api/v2/physical-device/{id}"), &admin))
            .await
            .expect(200)
            .json();
        assert_eq!(device["app_software_version"], "2.5.0", "{device}");
    }
    let updated = events(&app, &admin, &group, 219).await;
    assert_eq!(updated.len(), 6);
    assert!(updated.iter().all(|(_, version)| version == "2.5.0"));
    assert_eq!(fleet.stats().updates + second.stats().updates, 6);

    // Gateways already on the version succeed at once, without an update.
    let again = created(
        &app,
        &admin,
        json!({"label": "Again", "operation": {"firmware": id_firmware},
            "target": {"filter": {"id_group": group}}}),
    )
    .await;
    assert_eq!(finished(&app, &admin, &again).await["succeeded"], 6);
    assert_eq!(fleet.stats().updates + second.stats().updates, 6);
    send(app.request(Method::DELETE, &path, &admin)).await.expect(204);

    // A job for an image that is not there, or of a kind none of the targets is, is refused.
    let missing = send(app.request(Method::POST, "/api/v2/job", &admin).json(&json!({
        "label": "x", "operation": {"firmware": "no-such-image"}, "target": {"filter": {"id_group": group}}
    })))
    .await;
    assert_eq!(missing.status, 422, "{}", missing.text);
    assert_eq!(missing.json()[0]["field"], "operation");
    let go_image = image_of_kind(&app, &admin, &group, ModuleKind::Go, "1.0.0").await;
    let no_target = send(app.request(Method::POST, "/api/v2/job", &admin).json(&json!({
        "label": "x", "operation": {"firmware": go_image}, "target": {"filter": {"id_group": group}}
    })))
    .await;
    assert_eq!(no_target.status, 422, "{}", no_target.text);
    assert_eq!(no_target.json()[0]["field"], "target");
    fleet.stop().await;
    second.stop().await;
}

#[tokio::test]
async fn failures_and_rollbacks_fail_their_executions_and_halt_the_campaign() {
    let (app, admin, group, specs) = setup("campaign failing", "FW-BAD", 30).await;
    let fleet = fleet(&app, &admin, specs, 100).await;
    let id_firmware = image(&app, &admin, &group, "9.9.9").await;
    let job = created(
        &app,
        &admin,
        json!({"label": "Bad image", "operation": {"firmware": id_firmware},
            "target": {"filter": {"id_group": group}}, "rate_per_minute": 300,
            "max_failures_percent": 10}),
    )
    .await;
    let done = finished(&app, &admin, &job).await;
    assert_eq!(done["status"], "aborted", "{done}");
    // Halted on the failure rate of those that ended: a third of the fleet or more was never
    // tried.
    assert!(done["cancelled"].as_i64().unwrap() >= 10, "{done}");
    let results = executions(&app, &admin, &job).await;
    let failed: Vec<&Value> = results.iter().filter(|e| e["status"] == "failed").collect();
    assert!(failed.len() >= 10, "{results:?}");
    let causes: Vec<&str> = failed
        .iter()
        .map(|e| e["result"]["payload"]["result"].as_str().unwrap())
        .collect();
    assert!(
        causes.iter().all(|c| *c == "failed" || *c == "rolled back"),
        "{causes:?}"
    );
    // Rolled back: event 220 with the version it came back with; failed: the gateway's 221.
    let rolled_back = events(&app, &admin, &group, 220).await;
    let reported = events(&app, &admin, &group, 221).await;
    assert_eq!(
        rolled_back.len() + reported.len(),
        failed.len(),
        "{rolled_back:?} {reported:?}"
    );
    assert!(rolled_back.iter().all(|(_, version)| version == "2.4.0"));
    assert!(events(&app, &admin, &group, 219).await.is_empty());
    fleet.stop().await;
}
