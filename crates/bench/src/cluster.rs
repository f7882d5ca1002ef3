//! `bench cluster`: several `devicecloud serve` processes on one PostgreSQL database
//! (docs/operations.md, "Several nodes"), measured in one run:
//!
//! - pings to gateways connected to node A, sent through node A itself and through node B,
//!   which relays them to A through the database and the answer back;
//! - durable ingest from gateways all publishing to node A, then spread over every node.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use devicecloud_simulator::{Fleet, FleetOptions, Provisioner};

use super::commands::{ping, run};
use super::publisher::{FLOOD_DATATYPES, FLOOD_MEASUREMENTS, flood};
use super::server::{GatewayCredentials, ServerUnderTest, provision};

/// What `bench cluster` takes.
#[derive(Clone, Debug, clap::Args)]
pub struct ClusterOptions {
    /// The database all nodes share: PostgreSQL, an empty database.
    #[arg(long)]
    pub database_url: String,
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Simulated gateways on node A answering the pings.
    #[arg(long, default_value_t = 20)]
    pub ping_gateways: usize,
    /// Concurrent ping callers.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Gateways publishing 500-point QoS 1 messages, 16 in flight each.
    #[arg(long, default_value_t = 50)]
    pub gateways: usize,
    /// Seconds of each measured round.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
}

pub async fn cluster(o: ClusterOptions) -> Result<()> {
    if o.nodes < 2 {
        bail!("--nodes must be at least 2");
    }
    let mut nodes = Vec::new();
    for i in 0..o.nodes {
        let dir = std::env::temp_dir().join(format!("devicecloud-bench-{}-node{i}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        nodes.push(ServerUnderTest::start_in(dir, Some(o.database_url.clone())).await?);
    }
    let result = measure(&o, &nodes).await;
    for node in nodes {
        node.stop(false).await;
    }
    result
}

async fn measure(o: &ClusterOptions, nodes: &[ServerUnderTest]) -> Result<()> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(o.connections * 2)
        .build()?;
    let (a, b) = (&nodes[0], &nodes[1]);
    let (_, admin) = a.administrator(&http).await?;

    eprintln!("{} simulated gateways on node A…", o.ping_gateways);
    let provisioner = Provisioner::new(&a.base, &admin);
    let group = provisioner.create_group("bench cluster").await?;
    let specs = provisioner.fleet(&group, "BENCH-CLUSTER", o.ping_gateways).await?;
    let ids: Vec<String> = specs.iter().filter_map(|s| s.id.clone()).collect();
    let fleet = Fleet::start(specs, FleetOptions::new(a.mqtt, Duration::ZERO));
    if !fleet.wait_connected(o.ping_gateways, Duration::from_secs(60)).await {
        bail!(
            "only {} of {} gateways connected",
            fleet.stats().connected,
            o.ping_gateways
        );
    }
    let urls = |node: &ServerUnderTest| -> Arc<Vec<String>> {
        Arc::new(
            ids.iter()
                .map(|id| format!("{}/api/v2/physical-device/{id}/ping", node.base))
                .collect(),
        )
    };
    // A gateway is reachable through B once its hello (naming node A) is stored.
    let bearer = format!("Bearer {admin}");
    let deadline = Instant::now() + Duration::from_secs(30);
    for url in urls(b).iter() {
        while ping(&http, url, &bearer).await.is_err() {
            if Instant::now() > deadline {
                bail!("{url} did not answer through node B within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let mut pings = Vec::new();
    for (label, node) in [
        ("through node A (its own gateways)", a),
        ("through node B (relayed to A)", b),
    ] {
        eprintln!("pinging {label} for {} s…", o.seconds);
        let urls = urls(node);
        run(&http, &urls, &admin, o.connections, Duration::from_secs(1)).await?;
        let summary = run(&http, &urls, &admin, o.connections, Duration::from_secs(o.seconds)).await?;
        pings.push((label, summary));
    }
    fleet.stop().await;

    eprintln!("provisioning {} publishing gateways…", o.gateways);
    let publishers = provision(&http, &a.base, &admin, "BENCH-CLUSTER-ING", o.gateways).await?;
    eprintln!("publishing to node A for {} s…", o.seconds);
    let one = publish_round(&[a], &publishers, 1_700_000_000, o.seconds).await?;
    eprintln!("publishing to all {} nodes for {} s…", nodes.len(), o.seconds);
    let spread: Vec<&ServerUnderTest> = nodes.iter().collect();
    let all = publish_round(&spread, &publishers, 1_710_000_000, o.seconds).await?;

    println!(
        "bench cluster (PostgreSQL): {} nodes on one database, {} s per round",
        nodes.len(),
        o.seconds
    );
    println!(
        "pings: {} simulated gateways on node A, {} concurrent callers",
        o.ping_gateways, o.connections
    );
    println!("{:<36} {:>12} {:>10} {:>10}", "path", "commands/s", "p50 ms", "p99 ms");
    for (label, summary) in &pings {
        println!("{}", summary.line(label, 36, 12));
    }
    println!(
        "ingest: {} gateways, QoS 1 messages of {} points, 16 in flight each",
        o.gateways,
        FLOOD_MEASUREMENTS * i64::from(FLOOD_DATATYPES)
    );
    println!("durable points/s, every gateway on node A:      {one:>12.0}");
    println!(
        "durable points/s, gateways spread over {} nodes: {all:>12.0}  ({:.2} of one node)",
        nodes.len(),
        all / one.max(1.0)
    );
    println!("target: cross-node ping p50 <= 3 ms on loopback");
    Ok(())
}

/// Every gateway publishing to a node of `nodes` (gateway i to node i mod n) for `seconds`:
/// durable points/s (points of acknowledged messages).
async fn publish_round(
    nodes: &[&ServerUnderTest],
    gateways: &[GatewayCredentials],
    first_second: i64,
    seconds: u64,
) -> Result<f64> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let mine: Vec<GatewayCredentials> = gateways
            .iter()
            .enumerate()
            .filter(|(g, _)| g % nodes.len() == i)
            .map(|(_, gateway)| gateway.clone())
            .collect();
        tasks.extend(flood(node.mqtt, &mine, first_second, deadline));
    }
    let mut acked = 0usize;
    for task in tasks {
        let outcome = task.await?.context("a publishing gateway")?;
        acked += outcome.acked.len();
    }
    let points = acked as f64 * (FLOOD_MEASUREMENTS as f64) * f64::from(FLOOD_DATATYPES);
    Ok(points / started.elapsed().as_secs_f64().max(seconds as f64))
}
