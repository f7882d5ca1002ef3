//! `bench commands`: pings through the whole command path — HTTP → command router → MQTT →
//! simulated gateway → MQTT → HTTP answer — against a `devicecloud serve` child on loopback,
//! across many gateways of a simulated fleet running in this process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use devicecloud_simulator::{Fleet, FleetOptions, Provisioner};

use super::server::ServerUnderTest;
use crate::throughput::{Throughput, throughput};

/// What `bench commands` takes.
#[derive(Clone, Debug, clap::Args)]
pub struct CommandsOptions {
    #[arg(long, default_value_t = 100)]
    pub gateways: usize,
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Concurrent callers.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Database of the server under test (default: a fresh SQLite file); must be empty.
    #[arg(long)]
    pub database_url: Option<String>,
}

pub async fn commands(options: CommandsOptions) -> Result<()> {
    let CommandsOptions {
        gateways,
        seconds,
        connections,
        database_url,
    } = options;
    let server = ServerUnderTest::start(database_url).await?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(connections * 2)
        .build()?;
    let (_, admin) = server.administrator(&http).await?;
    let provisioner = Provisioner::new(&server.base, &admin);
    let group = provisioner.create_group("bench commands").await?;
    let specs = provisioner.fleet(&group, "BENCH-CMD", gateways).await?;
    let ids: Vec<String> = specs.iter().filter_map(|s| s.id.clone()).collect();
    // Commands only: the gateways send no measurements, so the figures are the command path's.
    let fleet = Fleet::start(specs, FleetOptions::new(server.mqtt, Duration::ZERO));
    if !fleet.wait_connected(gateways, Duration::from_secs(60)).await {
        bail!("only {} of {gateways} gateways connected", fleet.stats().connected);
    }
    let urls: Arc<Vec<String>> = Arc::new(
        ids.iter()
            .map(|id| format!("{}/api/v2/physical-device/{id}/ping", server.base))
            .collect(),
    );
    run(&http, &urls, &admin, connections, Duration::from_secs(1)).await?;
    let summary = run(&http, &urls, &admin, connections, Duration::from_secs(seconds)).await?;
    let answered = fleet.stats().commands;
    fleet.stop().await;
    server.stop(false).await;

    println!("bench commands: {gateways} gateways, {connections} concurrent callers, {seconds} s of GET …/ping");
    println!("{:<36} {:>12} {:>10} {:>10}", "path", "commands/s", "p50 ms", "p99 ms");
    println!("{}", summary.line("HTTP → MQTT → gateway → HTTP", 36, 12));
    println!(
        "{} commands answered by the fleet; targets: >= 10000 commands/s, p50 <= 1 ms, p99 <= 5 ms",
        answered
    );
    Ok(())
}

/// One `GET …/ping` at `url` with the `Authorization` value `bearer`: its latency in
/// microseconds, or an error unless the answer is 200 with the gateway's `pong`.
pub(crate) async fn ping(http: &reqwest::Client, url: &str, bearer: &str) -> Result<u32> {
    let t = Instant::now();
    let response = http.get(url).header("authorization", bearer).send().await?;
    let status = response.status();
    let body = response.bytes().await?;
    if !status.is_success() || !body.windows(6).any(|w| w == b"\"pong\"") {
        bail!("{url} answered {status}: {}", String::from_utf8_lossy(&body));
    }
    Ok(u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX))
}

/// `connections` callers ping gateways in turn, back to back, for `duration`; every answer
/// must be the gateway's pong.
pub(crate) async fn run(
    http: &reqwest::Client,
    urls: &Arc<Vec<String>>,
    token: &str,
    connections: usize,
    duration: Duration,
) -> Result<Throughput> {
    let started = Instant::now();
    let deadline = started + duration;
    let mut workers = Vec::new();
    for worker in 0..connections {
        let (http, urls, bearer) = (http.clone(), urls.clone(), format!("Bearer {token}"));
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(16_384);
            let mut next = worker;
            while Instant::now() < deadline {
                let url = urls.get(next % urls.len()).context("no gateways")?;
                next += connections;
                latencies.push(ping(&http, url, &bearer).await?);
            }
            anyhow::Ok(latencies)
        }));
    }
    throughput(workers, started).await
}
