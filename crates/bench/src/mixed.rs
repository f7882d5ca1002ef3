//! `bench mixed` (docs/benchmarks.md, "API during full ingest"): what the API answers while
//! gateways publish at full rate, and what the API costs ingest.
//!
//! 50 gateways publish 500-point QoS 1 messages, 16 in flight each, while four API clients keep
//! a steady mix: one changes a group's label every 100 ms and one creates a group every 250 ms
//! (writes), one lists groups and one asks for a day of one publishing series, per minute (a
//! chart), every 50 ms, each request distinct so that no cache answers it (reads): 54 requests a
//! second, an operator's dashboards and integrations on one node.
//!
//! Windows of the same length: ingest alone on the empty store (a warm-up, not counted), ingest
//! alone, ingest with the API mix twice, ingest alone again, then the API mix alone. Ingest into
//! an empty store is faster than into one that already holds points (two windows of ingest
//! alone in a row from an empty store: the second at 0.90–0.92 of the first), and it slows a
//! little as the store grows, so the measured windows with and without the API come after the
//! warm-up, in the order A B B A, each kind's two windows averaged: a drift that is steady over
//! the run then weighs on both kinds alike (docs/benchmarks.md, "API during full ingest").

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;

use super::server::{ServerUnderTest, percentile, provision_group};
use super::under_load::{Answers, batch_points_env, first_second, full_rate, steady};

/// Options of the mixed benchmark.
#[derive(Clone, Debug, clap::Args)]
pub struct MixedOptions {
    /// Publishing gateways (500-point QoS 1 messages, 16 in flight each).
    #[arg(long, default_value_t = 50)]
    pub gateways: usize,
    /// Seconds of each window.
    #[arg(long, default_value_t = 20)]
    pub seconds: u64,
    /// A PostgreSQL database to run on instead of the server's own SQLite store.
    #[arg(long)]
    pub database_url: Option<String>,
    /// The server's `ingest_batch_points` (most points in one ingest transaction) [default:
    /// the server's own].
    #[arg(long)]
    pub batch_points: Option<usize>,
}

/// One window: acked points/s (none without ingest) and the API's writes and reads.
struct Window {
    points_per_s: Option<f64>,
    writes: Answers,
    reads: Answers,
}

pub async fn mixed(o: MixedOptions) -> Result<()> {
    anyhow::ensure!(
        o.gateways > 0,
        "--gateways must be at least 1: the chart shows a gateway's series"
    );
    let batch = batch_points_env(o.batch_points);
    let env: Vec<(&str, &str)> = batch.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = ServerUnderTest::start_with(o.database_url.clone(), &env).await?;
    let http = reqwest::Client::new();
    let (_, admin) = server.administrator(&http).await?;
    let (live, fleet) = provision_group(&http, &server.base, &admin, "LIVE", o.gateways).await?;
    let mix = Api {
        // A client of its own for the API mix: its connections are made on the clients'
        // runtime (`under_load::steady`).
        http: reqwest::Client::new(),
        base: server.base.clone(),
        admin,
        live,
        device: fleet[0].id.clone(),
    };
    let window = |round: i64, with_ingest: bool, with_api: bool| {
        let deadline = Instant::now() + Duration::from_secs(o.seconds);
        let rate = with_ingest.then(|| full_rate(&server, &fleet, round, deadline));
        let clients = with_api.then(|| api(&mix, round, deadline));
        async move {
            let points_per_s = match rate {
                Some(rate) => Some(rate.await??),
                None => None,
            };
            let (writes, reads) = match clients {
                Some(clients) => clients.finish().await?,
                None => (Answers::default(), Answers::default()),
            };
            anyhow::Ok(Window {
                points_per_s,
                writes,
                reads,
            })
        }
    };
    eprintln!("warm-up: ingest alone on the empty store, {} s…", o.seconds);
    let warm_up = window(0, true, false).await?;
    settle().await;
    let mut windows = Vec::new();
    for (round, (name, with_api)) in [
        ("ingest alone, 1st", false),
        ("ingest + API, 1st", true),
        ("ingest + API, 2nd", true),
        ("ingest alone, 2nd", false),
    ]
    .into_iter()
    .enumerate()
    {
        eprintln!("{name}, {} s…", o.seconds);
        windows.push((name, window(round as i64 + 1, true, with_api).await?));
        settle().await;
    }
    eprintln!("the API mix alone, {} s…", o.seconds);
    // Its chart reads the day the last window published.
    windows.push(("API alone", window(4, false, true).await?));
    server.stop(false).await;

    let store = if o.database_url.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let batch = o.batch_points.map_or("the default".to_string(), |n| n.to_string());
    println!(
        "API during full ingest on {store}, ingest_batch_points {batch}: {} gateways publish 500-point QoS 1 messages (16 in flight); API: a label change every 100 ms and a new group every 250 ms (writes), a group list and a chart (a day of one series, per minute) every 50 ms each (reads, distinct, uncached)",
        o.gateways
    );
    println!("| window | acked points/s | write p50 | write p99 | read p50 | read p99 | answers | failed |");
    println!("|---|---|---|---|---|---|---|---|");
    let both = Window {
        points_per_s: None,
        writes: merged(&windows[1].1.writes, &windows[2].1.writes),
        reads: merged(&windows[1].1.reads, &windows[2].1.reads),
    };
    let rows = [("warm-up (not counted)", &warm_up)]
        .into_iter()
        .chain(windows.iter().map(|(name, w)| (*name, w)));
    for (name, w) in rows.chain([("ingest + API, both windows", &both)]) {
        let ms = |a: &Answers, p| {
            if a.latencies.is_empty() {
                "–".to_string()
            } else {
                format!("{:.1} ms", percentile(&a.latencies, p))
            }
        };
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} |",
            w.points_per_s.map_or("–".to_string(), |r| format!("{r:.0}")),
            ms(&w.writes, 0.5),
            ms(&w.writes, 0.99),
            ms(&w.reads, 0.5),
            ms(&w.reads, 0.99),
            w.writes.latencies.len() + w.reads.latencies.len(),
            w.writes.failed + w.reads.failed,
        );
    }
    let rate = |i: usize| windows[i].1.points_per_s.unwrap_or(0.0);
    let (with, without) = ((rate(1) + rate(2)) / 2.0, (rate(0) + rate(3)) / 2.0);
    println!(
        "ingest with the API mix / alone (means of two windows each): {:.2}; 2nd window alone / 1st: {:.2}",
        with / without,
        rate(3) / rate(0)
    );
    Ok(())
}

/// The answers of two windows together, sorted.
fn merged(a: &Answers, b: &Answers) -> Answers {
    let mut latencies = [a.latencies.as_slice(), b.latencies.as_slice()].concat();
    latencies.sort_unstable();
    Answers {
        latencies,
        failed: a.failed + b.failed,
    }
}

/// Lets the points still queued when a window's publishers stop be committed before the next.
async fn settle() {
    tokio::time::sleep(Duration::from_secs(3)).await;
}

/// What the API clients need.
#[derive(Clone)]
struct Api {
    http: reqwest::Client,
    base: String,
    admin: String,
    live: String,
    /// The gateway whose series a chart shows.
    device: String,
}

/// The four clients of one window, running until `deadline`.
struct Clients {
    writes: Vec<tokio::task::JoinHandle<Answers>>,
    reads: Vec<tokio::task::JoinHandle<Answers>>,
}

impl Clients {
    /// Waits for the clients; the writes' answers and the reads', each sorted.
    async fn finish(self) -> Result<(Answers, Answers)> {
        Ok((merge(self.writes).await?, merge(self.reads).await?))
    }
}

async fn merge(clients: Vec<tokio::task::JoinHandle<Answers>>) -> Result<Answers> {
    let mut all = Answers::default();
    for client in clients {
        let answers = client.await?;
        all.latencies.extend(answers.latencies);
        all.failed += answers.failed;
    }
    all.latencies.sort_unstable();
    Ok(all)
}

/// Starts the API mix of `round` (its chart shows the first day that round publishes).
fn api(api: &Api, round: i64, deadline: Instant) -> Clients {
    let request = |api: &Api, method: reqwest::Method, path: String| {
        api.http
            .request(method, format!("{}{path}", api.base))
            .bearer_auth(&api.admin)
    };
    let label = {
        let a = api.clone();
        steady(Duration::from_millis(100), deadline, move |n| {
            request(&a, reqwest::Method::PATCH, format!("/api/v2/group/{}", a.live))
                .json(&json!({"label": format!("live {round}.{n}")}))
        })
    };
    let create = {
        let a = api.clone();
        steady(Duration::from_millis(250), deadline, move |n| {
            request(&a, reqwest::Method::POST, "/api/v2/group".into())
                .json(&json!({"label": format!("new {round}.{n}")}))
        })
    };
    let list = {
        let a = api.clone();
        steady(Duration::from_millis(50), deadline, move |n| {
            request(
                &a,
                reqwest::Method::GET,
                format!("/api/v2/group?per-page=20&n={round}.{n}"),
            )
        })
    };
    let day = {
        let a = api.clone();
        let from = first_second(round);
        steady(Duration::from_millis(50), deadline, move |n| {
            let path = format!(
                "/api/v2/data-downsampled?filter[id_group]={}&filter[source_device]={}&filter[datatype]=1&filter[timestamp_seconds][gte]={from}&filter[timestamp_seconds][lt]={}&n={round}.{n}",
                a.live,
                a.device,
                from + 86_400
            );
            request(&a, reqwest::Method::GET, path)
        })
    };
    Clients {
        writes: vec![label, create],
        reads: vec![list, day],
    }
}
