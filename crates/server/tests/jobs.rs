//! Jobs (docs/api.md, "Jobs") over real HTTP with simulated gateways over real MQTT: a command
//! over a fleet with a gateway offline until later, a twin patch applied and reported, the rate,
//! abort past `max_failures_percent`, cancel, expiry, the collections, events 217/218, and every
//! refusal.

mod common;

use std::time::Duration;

use common::gateway_client::TestGateway;
use common::jobs::{create, created, executions, job, job_until};
use common::{TestApp, assert_error, send};
use devicecloud_protocol::ModuleKind;
use devicecloud_simulator::{Behaviour, Fleet, FleetOptions, GatewaySpec, Provisioner};
use reqwest::Method;
use serde_json::{Value, json};

/// `n` gateways of `kind` in `group`, with `behaviour`.
async fn gateways(
    provisioner: &Provisioner,
    group: &str,
    prefix: &str,
    n: usize,
    behaviour: Behaviour,
) -> Vec<GatewaySpec> {
    let mut specs = Vec::new();
    for i in 0..n {
        let mut spec = provisioner
            .gateway(group, &format!("{prefix}-{i}"), ModuleKind::Plus)
            .await
            .unwrap();
        spec.behaviour = behaviour;
        specs.push(spec);
    }
    specs
}

/// A server, its administrator's token and a group of `n` gateways that never connect.
async fn offline_fleet(label: &str, prefix: &str, n: usize) -> (TestApp, String, String) {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let provisioner = Provisioner::new(&app.base, &admin);
    let group = provisioner.create_group(label).await.unwrap();
    gateways(&provisioner, &group, prefix, n, Behaviour::Normal).await;
    (app, admin, group)
}

/// A server, its administrator's token, a group of `n` simulated gateways with `behaviour`,
/// their ids, and the running fleet once every one is connected.
async fn connected_fleet(
    label: &str,
    prefix: &str,
    n: usize,
    behaviour: Behaviour,
) -> (TestApp, String, String, Vec<String>, Fleet) {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let provisioner = Provisioner::new(&app.base, &admin);
    let group = provisioner.create_group(label).await.unwrap();
    let specs = gateways(&provisioner, &group, prefix, n, behaviour).await;
    let ids: Vec<String> = specs.iter().map(|s| s.id.clone().unwrap()).collect();
    let fleet = Fleet::start(specs, FleetOptions::new(app.mqtt_addr, Duration::ZERO));
    assert!(fleet.wait_connected(n, Duration::from_secs(20)).await);
    (app, admin, group, ids, fleet)
}

#[tokio::test]
async fn a_ping_job_reaches_every_gateway_and_waits_for_the_offline_one() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let provisioner = Provisioner::new(&app.base, &admin);
    let group = provisioner.create_group("ping job").await.unwrap();
    let mut online = gateways(&provisioner, &group, "JOB-ON", 5, Behaviour::Normal).await;
    let late = online.pop().unwrap();
    let fleet = Fleet::start(online, FleetOptions::new(app.mqtt_addr, Duration::ZERO));
    assert!(fleet.wait_connected(4, Duration::from_secs(20)).await);

    let body = json!({"label": "Ping the fleet", "operation": {"command": "ping"},
        "target": {"filter": {"id_group": group}}});
    let created = create(&app, &admin, body.clone()).await.expect(201);
    let record = created.json();
    assert_eq!(
        common::keys(&record),
        [
            "id_job",
            "label",
            "operation",
            "target",
            "status",
            "total",
            "pending",
            "in_progress",
            "succeeded",
            "failed",
            "timed_out",
            "cancelled",
            "created_at",
            "created_by",
            "started_at",
            "finished_at",
            "rate_per_minute",
            "max_failures_percent",
            "timeout_s",
            "expires_at",
            "_links"
        ]
    );
    assert_eq!(record["operation"], body["operation"]);
    assert_eq!(record["target"], body["target"]);
    assert_eq!((&record["total"], &record["pending"]), (&json!(5), &json!(5)));
    assert_eq!(
        (
            &record["rate_per_minute"],
            &record["max_failures_percent"],
            &record["timeout_s"]
        ),
        (&json!(6000), &json!(100), &json!(60))
    );
    assert_eq!(
        record["expires_at"].as_i64().unwrap() - record["created_at"].as_i64().unwrap(),
        86_400
    );
    let id = record["id_job"].as_str().unwrap().to_string();
    assert!(
        created
            .header("location")
            .unwrap()
            .ends_with(&format!("/api/v2/job/{id}"))
    );

    let running = job_until(&app, &admin, &id, Duration::from_secs(10), |j| {
        j["succeeded"] == json!(4)
    })
    .await;
    assert_eq!(
        (&running["status"], &running["pending"]),
        (&json!("in_progress"), &json!(1))
    );
    assert!(running["started_at"].as_i64().is_some());
    assert_eq!(running["finished_at"], Value::Null);
    let done: Vec<Value> = executions(&app, &admin, &id)
        .await
        .into_iter()
        .filter(|e| e["status"] == json!("succeeded"))
        .collect();
    assert_eq!(done.len(), 4);
    assert_eq!(done[0]["attempts"], json!(1));
    assert_eq!(done[0]["result"]["status"], json!(200));
    assert_eq!(done[0]["result"]["payload"]["data"], json!("pong"));

    // The offline gateway runs once it connects.
    let late_id = late.id.clone().unwrap();
    let second = Fleet::start(vec![late], FleetOptions::new(app.mqtt_addr, Duration::ZERO));
    assert!(second.wait_connected(1, Duration::from_secs(20)).await);
    let finished = job_until(&app, &admin, &id, Duration::from_secs(10), |j| {
        j["finished_at"].is_i64()
    })
    .await;
    assert_eq!(
        (&finished["status"], &finished["succeeded"]),
        (&json!("succeeded"), &json!(5))
    );
    let filtered = send(app.get(
        &format!("/api/v2/job/{id}/execution?filter[id_physical_device]={late_id}"),
        &admin,
    ))
    .await
    .expect(200)
    .json();
    assert_eq!(filtered["items"][0]["status"], json!("succeeded"));

    // Events 217 and 218 on the group, value the job's id; the pings recorded as commands.
    for code in [217, 218] {
        let events = send(app.get(
            &format!("/api/v2/event?filter[source_device]={group}&filter[event_type]={code}"),
            &admin,
        ))
        .await
        .expect(200)
        .json();
        assert_eq!(events["items"][0]["value"], json!(id), "{code}: {events}");
        assert_eq!(events["_meta"]["totalCount"], json!(1));
    }
    let listed = send(app.get("/api/v2/job?filter[status]=succeeded", &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(listed["items"][0]["id_job"], json!(id));
    fleet.stop().await;
    second.stop().await;
}

#[tokio::test]
async fn a_twin_job_succeeds_when_each_device_reports_the_version_it_set() {
    let (app, admin, group, ids, fleet) = connected_fleet("twin job", "JOB-TWIN", 3, Behaviour::Normal).await;
    let body = json!({"label": "Report every 30 s", "operation": {"twin": {"reporting_interval_s": 30}},
        "target": {"filter": {"id_group": group, "id_parent": null}}});
    let id = created(&app, &admin, body).await;
    let done = job_until(&app, &admin, &id, Duration::from_secs(10), |j| {
        j["finished_at"].is_i64()
    })
    .await;
    assert_eq!((&done["status"], &done["succeeded"]), (&json!("succeeded"), &json!(3)));
    for device in &ids {
        let twin = send(app.get(&format!("/api/v2/physical-device/{device}/twin"), &admin))
            .await
            .expect(200)
            .json();
        assert_eq!(twin["reported"], json!({"reporting_interval_s": 30}));
        assert_eq!((&twin["version"], &twin["in_sync"]), (&json!(1), &json!(1)));
    }
    fleet.stop().await;
}

#[tokio::test]
async fn failures_past_the_limit_abort_and_the_rest_is_cancelled() {
    let (app, admin, group, _, fleet) = connected_fleet("abort", "JOB-SILENT", 20, Behaviour::Silent).await;
    // Four a second, each timing out after a second: the tenth ends at about 3.25 s, when the
    // last five have not started (the last would at 4.75 s).
    let body = json!({"label": "Ping the silent", "operation": {"command": "ping"},
        "target": {"filter": {"id_group": group}}, "rate_per_minute": 240, "timeout_s": 1,
        "max_failures_percent": 50});
    let started = tokio::time::Instant::now();
    let id = created(&app, &admin, body).await;
    let done = job_until(&app, &admin, &id, Duration::from_secs(15), |j| {
        j["finished_at"].is_i64()
    })
    .await;
    assert_eq!(done["status"], json!("aborted"), "{done}");
    let (timed_out, cancelled) = (done["timed_out"].as_i64().unwrap(), done["cancelled"].as_i64().unwrap());
    assert!(timed_out >= 10 && cancelled >= 1, "{done}");
    assert_eq!(timed_out + cancelled, 20, "every execution ended once: {done}");
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "the rate spread the starts"
    );
    let statuses: Vec<Value> = executions(&app, &admin, &id)
        .await
        .iter()
        .map(|e| e["status"].clone())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == json!("timed_out")).count() as i64,
        timed_out
    );
    fleet.stop().await;
}

#[tokio::test]
async fn cancel_and_expiry_end_what_is_pending() {
    let (app, admin, group) = offline_fleet("offline fleet", "JOB-OFF", 3).await;
    let body = json!({"label": "Restart", "operation": {"command": "restart"},
        "target": {"filter": {"id_group": group}}});
    let id = created(&app, &admin, body.clone()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        job(&app, &admin, &id).await["status"],
        json!("queued"),
        "offline gateways wait"
    );
    let path = format!("/api/v2/job/{id}/cancel");
    let cancelled = send(app.request(Method::POST, &path, &admin)).await.expect(200).json();
    assert_eq!(
        (&cancelled["status"], &cancelled["cancelled"], &cancelled["pending"]),
        (&json!("cancelled"), &json!(3), &json!(0))
    );
    assert!(cancelled["finished_at"].is_i64());
    let again = send(app.request(Method::POST, &path, &admin)).await.expect(200).json();
    assert_eq!(again, cancelled, "a job that ended stays as it is");

    let mut expiring = body;
    expiring["expires_in_s"] = json!(1);
    let id = created(&app, &admin, expiring).await;
    let done = job_until(&app, &admin, &id, Duration::from_secs(10), |j| {
        j["finished_at"].is_i64()
    })
    .await;
    assert_eq!(
        (&done["status"], &done["timed_out"], &done["pending"]),
        (&json!("expired"), &json!(3), &json!(0))
    );
}

#[tokio::test]
async fn refusals() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let ours = app.create_group(&admin, "ours").await;
    let theirs = app.create_group(&admin, "theirs").await;
    let gw = TestGateway::connect(&app, &admin, &ours, "JOB-REF-1", "PLUS").await;
    let other = TestGateway::connect(&app, &admin, &theirs, "JOB-REF-2", "PLUS").await;
    let target = json!({"filter": {"id_group": ours}});
    for (body, field) in [
        (json!({"operation": {"command": "ping"}, "target": target}), "label"),
        (json!({"label": "x", "target": target}), "operation"),
        (
            json!({"label": "x", "operation": {"command": "dance"}, "target": target}),
            "operation",
        ),
        (
            json!({"label": "x", "operation": {"command": "ping", "twin": {}}, "target": target}),
            "operation",
        ),
        (
            json!({"label": "x", "operation": {"twin": [1]}, "target": target}),
            "operation",
        ),
        (
            json!({"label": "x", "operation": {"firmware": "f-1"}, "target": target}),
            "operation",
        ),
        (json!({"label": "x", "operation": {"command": "ping"}}), "target"),
        (
            json!({"label": "x", "operation": {"command": "ping"}, "target": {"id_group": ours}}),
            "target",
        ),
        (
            json!({"label": "x", "operation": {"command": "ping"}, "target": {"filter": {"nope": 1}}}),
            "target",
        ),
        (
            json!({"label": "x", "operation": {"command": "ping"}, "target": {"filter": {"serial_hardware": "NONE"}}}),
            "target",
        ),
        (
            json!({"label": "x", "operation": {"command": "ping"}, "target": target, "rate_per_minute": 0}),
            "rate_per_minute",
        ),
        (
            json!({"label": "x", "operation": {"command": "ping"}, "target": target, "max_failures_percent": 101}),
            "max_failures_percent",
        ),
        (
            json!({"label": "x", "operation": {"command": "ping"}, "target": target, "timeout_s": 0}),
            "timeout_s",
        ),
    ] {
        let reply = create(&app, &admin, body.clone()).await;
        assert_eq!(reply.status, 422, "{body}: {}", reply.text);
        assert!(
            reply
                .json()
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["field"] == json!(field)),
            "{body}: {}",
            reply.text
        );
    }

    // A manager of one group: the other group's devices are not part of the target (it does
    // not see them); an operator cannot create; a viewer sees the job, a stranger does not.
    let manager = app.create_user("job-manager", "manager-password-1", false).await;
    app.grant(&admin, &ours, &manager, "manager").await;
    let manager_token = app.token("job-manager", "manager-password-1").await;
    let everywhere = json!({"label": "all", "operation": {"command": "ping"},
        "target": {"filter": {"serial_hardware": {"like": "JOB-REF"}}}});
    let created = create(&app, &manager_token, everywhere.clone())
        .await
        .expect(201)
        .json();
    assert_eq!(created["total"], json!(1), "only what the caller sees");
    let id = created["id_job"].as_str().unwrap();
    let across = create(&app, &admin, everywhere).await.expect(201).json();
    assert_eq!(across["total"], json!(2));
    let across_id = across["id_job"].as_str().unwrap();
    // A job across both groups is not visible to a manager of one.
    let not_visible = send(app.get(&format!("/api/v2/job/{across_id}"), &manager_token)).await;
    assert_eq!(not_visible.status, 404);
    assert_error(&not_visible.json(), 404);
    let listed = send(app.get("/api/v2/job", &manager_token)).await.expect(200).json();
    let ids: Vec<&Value> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| &j["id_job"])
        .collect();
    assert_eq!(ids, [&json!(id)]);

    let operator = app.create_user("job-operator", "operator-password-1", false).await;
    app.grant(&admin, &ours, &operator, "operator").await;
    app.grant(&admin, &theirs, &manager, "viewer").await;
    let operator_token = app.token("job-operator", "operator-password-1").await;
    let refused = create(
        &app,
        &operator_token,
        json!({"label": "x", "operation": {"command": "ping"}, "target": target}),
    )
    .await;
    assert_eq!(refused.status, 401, "{}", refused.text);
    assert_error(&refused.json(), 401);
    // Now a viewer of the other group: it sees the job across both, cannot cancel it.
    job(&app, &manager_token, across_id).await;
    let cancel = send(app.request(Method::POST, &format!("/api/v2/job/{across_id}/cancel"), &manager_token)).await;
    assert_eq!(cancel.status, 401, "{}", cancel.text);
    let both = json!({"label": "both", "operation": {"command": "ping"},
        "target": {"filter": {"serial_hardware": {"like": "JOB-REF"}}}});
    let refused = create(&app, &manager_token, both).await;
    assert_eq!(refused.status, 401, "a manager of one group only: {}", refused.text);
    for path in [
        "/api/v2/job/no-such-job".to_string(),
        "/api/v2/job/no-such-job/execution".to_string(),
    ] {
        let reply = send(app.get(&path, &admin)).await;
        assert_eq!(reply.status, 404);
    }
    drop((gw, other));
}

#[tokio::test]
async fn deleting_a_group_cancels_its_pending_executions() {
    let (app, admin, group) = offline_fleet("to be deleted", "JOB-DEL", 2).await;
    let body = json!({"label": "Never", "operation": {"command": "ping"},
        "target": {"filter": {"id_group": group}}});
    let id = created(&app, &admin, body).await;
    send(app.request(Method::DELETE, &format!("/api/v2/group/{group}"), &admin))
        .await
        .expect(204);
    let done = job_until(&app, &admin, &id, Duration::from_secs(10), |j| {
        j["finished_at"].is_i64()
    })
    .await;
    assert_eq!(
        (&done["status"], &done["cancelled"], &done["pending"]),
        (&json!("failed"), &json!(2), &json!(0)),
        "{done}"
    );
}
