//! `bench stream`: gateways publish QoS 1 measurement batches over MQTT into several groups,
//! first with nobody on the live stream, then with stream clients spread over the groups: ingest
//! throughput with and without clients, and how long after its commit a point reaches a client.
//!
//! A PUBACK leaves the server right after the commit, so the latency is taken from the PUBACK's
//! arrival at the publisher to the arrival of the message's first point at each client of its
//! group (both on this machine's clock): what the stream adds after a commit.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::Value;
use tokio::sync::Mutex;

use super::publisher::{Message, Pace, publish_paced};
use super::server::{GatewayCredentials, ServerUnderTest, cpu_seconds, provision_group};
use crate::throughput::percentile_ms;

/// Options of the stream benchmark.
#[derive(Clone, Debug, clap::Args)]
pub struct StreamOptions {
    /// Stream clients (`types=measurements`), client i on group i mod `groups`.
    #[arg(long, default_value_t = 20)]
    pub clients: usize,
    #[arg(long, default_value_t = 10)]
    pub groups: usize,
    /// Publishing gateways, spread over the groups (100-point QoS 1 messages).
    #[arg(long, default_value_t = 100)]
    pub gateways: usize,
    /// Seconds of publishing per round (one without clients, one with).
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Unacknowledged messages each gateway keeps in flight.
    #[arg(long, default_value_t = 4)]
    pub inflight: u16,
    /// Database of the server under test (default: a fresh SQLite file); must be empty.
    #[arg(long)]
    pub database_url: Option<String>,
    /// Points a second from all gateways together, paced evenly (default: as fast as the
    /// server acknowledges).
    #[arg(long)]
    pub rate: Option<u64>,
}

/// Points per message: 10 measurements × 10 datatypes, as `bench ingest`.
const MEASUREMENTS: i64 = 10;
const DATATYPES: u32 = 10;

/// The first point of a message: its gateway and its first second.
type Key = (String, i64);

/// What a client saw: its group, when each message's first point arrived, the records it read,
/// and whether it ended with `overflow`.
type Arrivals = (usize, HashMap<Key, Instant>, u64, bool);

/// What one publishing round gave.
struct Round {
    points_per_s: f64,
    /// CPU seconds the server used per million acknowledged points.
    cpu_per_million: f64,
    /// When each acknowledged message's PUBACK arrived.
    acked_at: HashMap<Key, Instant>,
    /// Messages acknowledged per group.
    acked_per_group: Vec<usize>,
}

pub async fn stream(o: StreamOptions) -> Result<()> {
    let server = ServerUnderTest::start(o.database_url.clone()).await?;
    let http = reqwest::Client::new();
    let (_, admin) = server.administrator(&http).await?;
    let groups = o.groups.max(1);
    eprintln!("provisioning {} gateways in {groups} groups…", o.gateways);
    let mut fleet: Vec<(usize, String, GatewayCredentials)> = Vec::new();
    let mut group_ids = Vec::new();
    for g in 0..groups {
        let count = o.gateways / groups + usize::from(g < o.gateways % groups);
        let (id_group, gateways) = provision_group(&http, &server.base, &admin, &format!("STR{g}"), count).await?;
        fleet.extend(gateways.into_iter().map(|gw| (g, id_group.clone(), gw)));
        group_ids.push(id_group);
    }

    eprintln!("publishing for {} s without stream clients…", o.seconds);
    let without = publish_round(&server, &fleet, groups, &o, 0).await?;

    eprintln!(
        "{} stream clients over {groups} groups, publishing for {} s…",
        o.clients, o.seconds
    );
    let arrivals: Arc<Mutex<Vec<Arrivals>>> = Arc::default();
    let mut readers = Vec::new();
    for c in 0..o.clients {
        let group = c % groups;
        let url = format!(
            "{}/api/v2/stream?filter%5Bid_group%5D={}&types=measurements",
            server.base, group_ids[group]
        );
        let response = http
            .get(url)
            .bearer_auth(&admin)
            .send()
            .await?
            .error_for_status()
            .context("stream refused")?;
        let arrivals = Arc::clone(&arrivals);
        readers.push(tokio::spawn(async move {
            let (seen, records, overflowed) = read(response).await;
            arrivals.lock().await.push((group, seen, records, overflowed));
        }));
    }
    let with = publish_round(&server, &fleet, groups, &o, 1).await?;
    // Records of the last commits are still on their way: a moment, then the clients close.
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.stop(false).await;
    for reader in readers {
        reader.await?;
    }

    let mut latencies = Vec::new();
    let (mut delivered, mut expected, mut overflows) = (0u64, 0u64, 0usize);
    for (group, seen, records, overflowed) in arrivals.lock().await.iter() {
        delivered += records;
        overflows += usize::from(*overflowed);
        expected += (with.acked_per_group[*group] as u64) * (MEASUREMENTS as u64) * u64::from(DATATYPES);
        for (key, at) in seen {
            if let Some(acked) = with.acked_at.get(key) {
                let micros = at.saturating_duration_since(*acked).as_micros();
                latencies.push(u32::try_from(micros).unwrap_or(u32::MAX));
            }
        }
    }
    latencies.sort_unstable();
    let backend = if o.database_url.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    println!(
        "bench stream ({backend}): {} gateways in {groups} groups, QoS 1 messages of {} points, {} in flight per gateway, {} s per round",
        o.gateways,
        MEASUREMENTS * i64::from(DATATYPES),
        o.inflight,
        o.seconds
    );
    let pace = o.rate.map_or_else(
        || "as fast as acknowledged".to_string(),
        |r| format!("paced at {r} points/s"),
    );
    println!("publishers: {pace}");
    println!(
        "durable points/s without stream clients:        {:>12.0}  (server CPU s per million points: {:.2})",
        without.points_per_s, without.cpu_per_million
    );
    println!(
        "durable points/s with {:>4} stream clients:       {:>12.0}  ({:.2} of without; server CPU s per million points: {:.2})",
        o.clients,
        with.points_per_s,
        with.points_per_s / without.points_per_s.max(1.0),
        with.cpu_per_million
    );
    println!(
        "PUBACK → stream client p50 / p99 / max ms:       {:>12.2} / {:.2} / {:.2}  ({} arrivals)",
        percentile_ms(&latencies, 0.50),
        percentile_ms(&latencies, 0.99),
        percentile_ms(&latencies, 1.0),
        latencies.len()
    );
    println!("records delivered / acknowledged points × clients: {delivered} / {expected}; overflows: {overflows}");
    Ok(())
}

/// One round of publishing from every gateway; `round` keeps the rounds' seconds apart.
async fn publish_round(
    server: &ServerUnderTest,
    fleet: &[(usize, String, GatewayCredentials)],
    groups: usize,
    o: &StreamOptions,
    round: i64,
) -> Result<Round> {
    let cpu_before = server.pid().map(cpu_seconds).transpose()?.unwrap_or_default();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(o.seconds);
    let mut tasks = Vec::new();
    // With a rate, each gateway sends one message every `gateways × points per message / rate`,
    // the gateways' turns spread evenly over that time (gateways do not all send at once).
    let points_per_message = MEASUREMENTS as f64 * f64::from(DATATYPES);
    let every = o
        .rate
        .map(|rate| Duration::from_secs_f64(fleet.len() as f64 * points_per_message / rate.max(1) as f64));
    for (index, (group, _, gateway)) in fleet.iter().cloned().enumerate() {
        let (mqtt, inflight) = (server.mqtt, o.inflight);
        let pace = every.map(|every| Pace::spread(every, index, fleet.len()));
        tasks.push(tokio::spawn(async move {
            // More messages than can go out in time (at full rate); the deadline ends the round.
            let messages = (0..2_000)
                .map(|i| Message {
                    first_second: 1_763_000_000 + round * 10_000_000 + i * MEASUREMENTS,
                    measurements: MEASUREMENTS,
                    datatypes: DATATYPES,
                })
                .collect();
            let outcome = publish_paced(mqtt, &gateway, messages, inflight, deadline, pace).await?;
            anyhow::Ok((group, gateway.id, outcome))
        }));
    }
    let mut round = Round {
        points_per_s: 0.0,
        cpu_per_million: 0.0,
        acked_at: HashMap::new(),
        acked_per_group: vec![0; groups],
    };
    let mut acked = 0usize;
    for task in tasks {
        let (group, id, outcome) = task.await??;
        acked += outcome.acked.len();
        round.acked_per_group[group] += outcome.acked.len();
        for (message, at) in outcome.acked.iter().zip(&outcome.acked_at) {
            round.acked_at.insert((id.clone(), message.first_second), *at);
        }
    }
    let elapsed = started.elapsed().as_secs_f64().max(o.seconds as f64);
    let points = (acked as f64) * (MEASUREMENTS as f64) * f64::from(DATATYPES);
    round.points_per_s = points / elapsed;
    let cpu = server.pid().map(cpu_seconds).transpose()?.unwrap_or_default() - cpu_before;
    round.cpu_per_million = cpu / (points / 1e6).max(1e-9);
    Ok(round)
}

/// Reads a stream until it ends: when the first point of each measurement (datatype 1) arrived,
/// the records read, and whether it ended with `overflow`.
async fn read(mut response: reqwest::Response) -> (HashMap<Key, Instant>, u64, bool) {
    let mut seen = HashMap::new();
    let (mut records, mut overflowed) = (0u64, false);
    let mut buffer = String::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let now = Instant::now();
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            if block.starts_with("event: overflow") {
                overflowed = true;
                continue;
            }
            let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) else {
                continue;
            };
            records += 1;
            // Only the first point of a measurement is timed: the others are not parsed, so
            // that the clients take less of the cores the server runs on.
            if !data.contains("\"datatype\":1,") {
                continue;
            }
            let Ok(point) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            if point["datatype"] == 1 {
                let device = point["source_device"].as_str().unwrap_or_default().to_string();
                let second = point["timestamp_seconds"].as_i64().unwrap_or_default();
                seen.entry((device, second)).or_insert(now);
            }
        }
    }
    (seen, records, overflowed)
}
