//! `bench api`: the authenticated group collection against `/healthz`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::server::{ServerUnderTest, json, token};
use crate::throughput::{Throughput, throughput};

/// Options of the API benchmark.
#[derive(Clone, Debug, clap::Args)]
pub struct ApiOptions {
    /// Groups created before measuring.
    #[arg(long, default_value_t = 1000)]
    pub groups: usize,
    /// Seconds of load per round and endpoint.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Rounds; each endpoint is measured once per round, alternating.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Concurrent connections of the load generator.
    #[arg(long, default_value_t = 32)]
    pub connections: usize,
    /// Database of the server under test (default: a fresh SQLite file).
    #[arg(long)]
    pub database_url: Option<String>,
    /// Query as a normal user with a role in every group, instead of an administrator.
    #[arg(long)]
    pub as_member: bool,
    /// Make every collection request distinct (an extra `n=<counter>` parameter), so that
    /// no answer comes from the page cache: the cost of a real store query.
    #[arg(long)]
    pub distinct: bool,
}

pub async fn api(options: ApiOptions) -> Result<()> {
    let ApiOptions {
        groups,
        seconds,
        rounds,
        connections,
        database_url,
        as_member,
        distinct,
    } = options;
    let server = ServerUnderTest::start(database_url).await?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(connections * 2)
        .build()?;
    let (client, admin) = server.administrator(&http).await?;
    let member = if as_member {
        let user: Value = json(
            http.post(format!("{}/api/v2/user", server.base))
                .bearer_auth(&admin)
                .json(&json!({"username": "member@bench.local", "password": "bench-password"})),
        )
        .await?;
        Some(user["id_user"].as_str().context("no id_user")?.to_string())
    } else {
        None
    };

    eprintln!("creating {groups} groups…");
    let started = Instant::now();
    let sem = Arc::new(tokio::sync::Semaphore::new(8));
    let mut tasks = Vec::new();
    for i in 0..groups {
        let (http, base, admin, member, sem) = (
            http.clone(),
            server.base.clone(),
            admin.clone(),
            member.clone(),
            sem.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let _permit = sem.acquire().await?;
            let group: Value = json(
                http.post(format!("{base}/api/v2/group"))
                    .bearer_auth(&admin)
                    .json(&json!({"label": format!("Group {i:04}")})),
            )
            .await?;
            if let Some(id_user) = member {
                let id = group["id_group"].as_str().unwrap_or_default();
                http.put(format!("{base}/api/v2/group/{id}/member/{id_user}"))
                    .bearer_auth(&admin)
                    .json(&json!({"role": "viewer"}))
                    .send()
                    .await?
                    .error_for_status()?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    eprintln!("groups created in {:.1} s", started.elapsed().as_secs_f64());
    let caller = if as_member {
        token(&http, &server.base, &client, "member@bench.local", "bench-password").await?
    } else {
        admin
    };

    let health = format!("{}/healthz", server.base);
    let index = format!("{}/api/v2/group/index?per-page=20", server.base);
    // Sanity: the collection really answers 20 of the groups.
    let first: Value = json(http.get(&index).bearer_auth(&caller)).await?;
    if first["_meta"]["totalCount"].as_u64() != Some(groups as u64)
        || first["items"].as_array().map(Vec::len) != Some(20.min(groups))
    {
        bail!("unexpected collection answer: {}", first["_meta"]);
    }
    // Warm-up.
    load(&http, &health, None, connections, Duration::from_secs(1), false).await?;
    load(
        &http,
        &index,
        Some(&caller),
        connections,
        Duration::from_secs(1),
        distinct,
    )
    .await?;

    let (mut health_runs, mut index_runs) = (Vec::new(), Vec::new());
    for round in 1..=rounds.max(1) {
        let h = load(&http, &health, None, connections, Duration::from_secs(seconds), false).await?;
        let g = load(
            &http,
            &index,
            Some(&caller),
            connections,
            Duration::from_secs(seconds),
            distinct,
        )
        .await?;
        eprintln!(
            "round {round}: healthz {:.0} req/s, group index {:.0} req/s",
            h.per_second, g.per_second
        );
        health_runs.push(h);
        index_runs.push(g);
    }
    server.stop(false).await;

    let h = Throughput::median(&health_runs);
    let g = Throughput::median(&index_runs);
    println!(
        "bench api: {groups} groups, {connections} connections, {rounds} rounds of {seconds} s per endpoint (medians of rounds)"
    );
    println!("{:<44} {:>10} {:>10} {:>10}", "endpoint", "req/s", "p50 ms", "p99 ms");
    println!("{}", h.line("GET /healthz", 44, 10));
    let who = match (as_member, distinct) {
        (false, false) => "admin",
        (true, false) => "member",
        (false, true) => "admin, distinct",
        (true, true) => "member, distinct",
    };
    println!(
        "{}",
        g.line(&format!("GET /api/v2/group/index?per-page=20 ({who})"), 44, 10)
    );
    // Repeated pages come from the page cache; a page not seen before is a store query.
    let target = if distinct { "0.25" } else { "0.50" };
    println!(
        "ratio group index / healthz throughput: {:.2} (target >= {target})",
        g.per_second / h.per_second
    );
    Ok(())
}

impl Throughput {
    /// Median of each figure over rounds.
    fn median(runs: &[Throughput]) -> Throughput {
        let med = |f: fn(&Throughput) -> f64| {
            let mut v: Vec<f64> = runs.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(0.0)
        };
        Throughput {
            per_second: med(|s| s.per_second),
            p50_ms: med(|s| s.p50_ms),
            p99_ms: med(|s| s.p99_ms),
        }
    }
}

/// `connections` workers send GETs back to back for `duration`; every answer must be 200.
async fn load(
    http: &reqwest::Client,
    url: &str,
    bearer: Option<&str>,
    connections: usize,
    duration: Duration,
    distinct: bool,
) -> Result<Throughput> {
    let deadline = Instant::now() + duration;
    let started = Instant::now();
    let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut workers = Vec::new();
    for _ in 0..connections {
        let counter = counter.clone();
        let (http, url, bearer) = (http.clone(), url.to_string(), bearer.map(|b| format!("Bearer {b}")));
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(4096);
            while Instant::now() < deadline {
                let t = Instant::now();
                let mut request = if distinct {
                    let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    http.get(format!("{url}&n={n}"))
                } else {
                    http.get(&url)
                };
                if let Some(b) = &bearer {
                    request = request.header("authorization", b);
                }
                let response = request.send().await?;
                let status = response.status();
                response.bytes().await?;
                if !status.is_success() {
                    bail!("{url} answered {status}");
                }
                latencies.push(t.elapsed().as_micros() as u32);
            }
            Ok(latencies)
        }));
    }
    throughput(workers, started).await
}
