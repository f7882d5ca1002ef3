//! Failover of the PostgreSQL primary under Patroni, as `deploy/patroni/` sets it up (etcd, three
//! members in synchronous mode, HAProxy routing to the primary), while ten gateways publish
//! through two nodes: the leader's postmaster killed, a graceful switchover, and the same kill
//! with a proxy that keeps the sessions of the server it marks down. Each time every
//! acknowledged point is stored once and reaches the webhook, acknowledgements resume, the API
//! answers 200 or 503 throughout (never 500), and the API and `/readyz` answer 200 again once
//! the cluster has settled.
//!
//! Runs in the PostgreSQL pass of the tests (`DEVICECLOUD_TEST_DATABASE_URL` set) where `patroni`,
//! `etcd` and `haproxy` are on `PATH`; skipped (with a note) otherwise, a failure with
//! `DEVICECLOUD_REQUIRE_PATRONI=1` (CI).

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::Dir;
use common::cluster::{DATATYPES, FIRST_SECOND, group_with_webhook, nodes_on, publish_through};
use devicecloud_protocol::ModuleKind;
use devicecloud_simulator::Provisioner;
use tokio::time::Instant;

/// A Patroni cluster started by `deploy/patroni/cluster` in a directory of its own; stopped
/// when dropped.
struct Cluster {
    dir: Dir,
    url: String,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/patroni/cluster")
}

impl Cluster {
    /// Starts a cluster on the loopback ports from `base`; `None` (with a note) where the test
    /// does not run.
    fn up(tag: &str, base: u16, shutdown_sessions: bool) -> Option<Cluster> {
        let wanted = std::env::var("DEVICECLOUD_TEST_DATABASE_URL").is_ok_and(|u| !u.is_empty());
        let required = std::env::var("DEVICECLOUD_REQUIRE_PATRONI").is_ok_and(|v| v == "1");
        let present = ["patroni", "etcd", "haproxy"].iter().all(|tool| {
            std::process::Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .output()
                .is_ok_and(|o| o.status.success())
        });
        if !wanted {
            eprintln!("note: the Patroni failover test runs with the PostgreSQL tests; skipped");
            return None;
        }
        if !present {
            assert!(
                !required,
                "DEVICECLOUD_REQUIRE_PATRONI=1 but patroni, etcd or haproxy is missing"
            );
            eprintln!("note: the Patroni failover test needs patroni, etcd and haproxy; skipped");
            return None;
        }
        let dir = Dir::new(tag);
        let output = std::process::Command::new(script())
            .args(["up", &dir.0.display().to_string(), &base.to_string()])
            .env("SHUTDOWN_SESSIONS", if shutdown_sessions { "1" } else { "0" })
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "the cluster did not start: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let url = String::from_utf8(output.stdout).unwrap().trim().to_string();
        Some(Cluster { dir, url })
    }

    fn run(&self, command: &str) -> String {
        let output = std::process::Command::new(script())
            .args([command, &self.dir.0.display().to_string()])
            .output()
            .unwrap();
        assert!(
            output.status.success() || matches!(command, "settled" | "leader"),
            "cluster {command}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        if command == "settled" {
            return output.status.success().to_string();
        }
        String::from_utf8(output.stdout).unwrap().trim().to_string()
    }

    /// Waits up to `within` for a leader other than `gone` and two streaming standbys.
    async fn settle(&self, gone: &str, within: Duration) -> Duration {
        let started = Instant::now();
        while self.run("leader") == gone || self.run("settled") != "true" {
            assert!(
                started.elapsed() < within,
                "the cluster did not settle within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        started.elapsed()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new(script())
            .args(["down", &self.dir.0.display().to_string()])
            .output();
    }
}

/// How the primary goes.
#[derive(Clone, Copy, Debug)]
enum Event {
    /// `kill -9` of the leader's postmaster, HAProxy closing the sessions it marks down.
    Kill,
    /// `patronictl switchover` to the synchronous standby.
    Switchover,
    /// `kill -9` with a proxy that keeps the old sessions: the nodes must find the new primary.
    KillWithoutProxyHelp,
}

/// `times` failovers, one after the other once the cluster has settled, while ten gateways
/// publish through two nodes; the longest wait for an acknowledgement after each.
async fn failover(event: Event, base: u16, times: usize) -> Option<Vec<Duration>> {
    let tag = format!("patroni_{event:?}").to_lowercase();
    let cluster = Cluster::up(&tag, base, !matches!(event, Event::KillWithoutProxyHelp))?;
    let nodes = nodes_on(&cluster.url, 2, &tag, &[]).await;
    let node = &nodes.nodes[0];
    let admin = node.token(&nodes.credentials).await;
    let (group, receiver) = group_with_webhook(node, &admin, "failover").await;
    let provisioner = Provisioner::new(&node.base(), &admin);
    let stop = Arc::new(AtomicBool::new(false));
    let mut publishers = Vec::new();
    for i in 0..10 {
        let spec = provisioner
            .gateway(&group, &format!("PATRONI-GW-{i}"), ModuleKind::Core)
            .await
            .unwrap();
        let mqtt = nodes.nodes[i % 2].mqtt;
        publishers.push(tokio::spawn(publish_through(
            mqtt,
            spec.serial,
            spec.token,
            FIRST_SECOND,
            stop.clone(),
        )));
    }
    // The API through one node, polled all along: 200, or 503 while there is no primary.
    let api = {
        let (url, admin, stop) = (format!("{}/api/v2/group", node.base()), admin.clone(), stop.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
            while !stop.load(Ordering::Relaxed) {
                if let Ok(answer) = client.get(&url).bearer_auth(&admin).send().await {
                    *statuses.entry(answer.status().as_u16()).or_default() += 1;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            statuses
        })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;

    let mut events = Vec::new();
    for _ in 0..times {
        let gone = cluster.run("leader");
        events.push(Instant::now());
        match event {
            Event::Switchover => cluster.run("switchover"),
            Event::Kill | Event::KillWithoutProxyHelp => cluster.run("kill-leader"),
        };
        let settled = cluster.settle(&gone, Duration::from_secs(90)).await;
        eprintln!("{event:?}: {gone} gone, the cluster settled after {settled:?}");
        // Publishing goes on past the settling, long enough to show errors that last.
        tokio::time::sleep(Duration::from_secs(8)).await;
    }
    let after_settling = Instant::now() - Duration::from_secs(5);
    stop.store(true, Ordering::Relaxed);

    let mut acks = Vec::new();
    let mut per_gateway = Vec::new();
    for publisher in publishers {
        let acked = publisher.await.unwrap();
        per_gateway.push(acked.len());
        acks.extend(acked.into_iter().map(|(_, at)| at));
    }
    acks.sort();
    let statuses = api.await.unwrap();
    assert!(
        statuses.keys().all(|status| matches!(status, 200 | 503)),
        "{event:?}: the API answered {statuses:?}"
    );
    // After each event, the longest time without any acknowledgement until the next event.
    let gaps: Vec<Duration> = events
        .iter()
        .enumerate()
        .map(|(i, &happened)| {
            let next = events.get(i + 1).copied();
            let mut last = happened;
            let mut gap = Duration::ZERO;
            for &at in acks.iter().filter(|&&at| at >= happened && next.is_none_or(|n| at < n)) {
                gap = gap.max(at - last);
                last = at;
            }
            gap
        })
        .collect();
    let acked: usize = per_gateway.iter().sum();
    let late = acks.iter().filter(|&&at| at >= after_settling).count();
    assert!(
        late >= 10,
        "{event:?}: only {late} acknowledgements in the last 5 s: {per_gateway:?}"
    );

    // Once settled: the API and readiness answer through both nodes.
    for serve in &nodes.nodes {
        let ready = reqwest::get(format!("{}/readyz", serve.base())).await.unwrap();
        assert_eq!(ready.status(), 200, "{event:?}: /readyz");
        let groups = reqwest::Client::new()
            .get(format!("{}/api/v2/group", serve.base()))
            .bearer_auth(&admin)
            .send()
            .await
            .unwrap();
        assert_eq!(groups.status(), 200, "{event:?}: /api/v2/group");
    }
    // Every acknowledged point stored once, and posted to the webhook.
    let expected = acked * DATATYPES as usize;
    let stored = node
        .total(&admin, &format!("/api/v2/data?filter[id_group]={group}"))
        .await;
    assert_eq!(
        stored,
        i64::try_from(expected).unwrap(),
        "{event:?}: points stored against acknowledged"
    );
    receiver.until_distinct(expected, &format!("{event:?}")).await;
    eprintln!(
        "{event:?}: {acked} messages acknowledged and stored, longest waits for an acknowledgement {gaps:?}, API answers {statuses:?}"
    );
    nodes.stop().await;
    drop(cluster);
    Some(gaps)
}

#[tokio::test]
async fn a_failover_of_the_primary_loses_no_acknowledged_point() {
    // One after another: three clusters at once would crowd a small machine.
    let Some(killed) = failover(Event::Kill, 25400, 1).await else {
        return;
    };
    assert!(killed[0] < Duration::from_secs(20), "after a kill: {killed:?}");
    let switched = failover(Event::Switchover, 25500, 1).await.unwrap();
    assert!(switched[0] < Duration::from_secs(5), "after a switchover: {switched:?}");
    let alone = failover(Event::KillWithoutProxyHelp, 25600, 1).await.unwrap();
    assert!(
        alone[0] < Duration::from_secs(20),
        "after a kill, without the proxy's help: {alone:?}"
    );
}

/// The benchmark of docs/benchmarks.md ("Failover"): the leader killed
/// `DEVICECLOUD_PATRONI_KILLS` times on one cluster (each once it has settled again), the wait
/// for an acknowledgement after each, and the points lost (none, or the test fails). Runs only
/// when that variable is set.
#[tokio::test]
async fn repeated_kills_of_the_leader() {
    let Some(times) = std::env::var("DEVICECLOUD_PATRONI_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
    else {
        return;
    };
    let Some(mut gaps) = failover(Event::Kill, 25700, times).await else {
        return;
    };
    gaps.sort();
    let seconds: Vec<String> = gaps.iter().map(|g| format!("{:.1}", g.as_secs_f64())).collect();
    eprintln!(
        "{times} kills: longest wait for a PUBACK median {:.1} s, max {:.1} s (each: {}); no acknowledged point lost",
        gaps[gaps.len() / 2].as_secs_f64(),
        gaps[gaps.len() - 1].as_secs_f64(),
        seconds.join(", ")
    );
}
