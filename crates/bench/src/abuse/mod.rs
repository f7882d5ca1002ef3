//! `bench abuse`: the front door under attack (docs/operations.md, "Limits"). While gateways
//! publish at full rate, clients send deep expands, giant filters, made-up methods, 1 MB
//! bodies, headers and bodies that trickle in a byte a second, hold thousands of idle sockets,
//! flood the sign-in paths from many addresses, send huge `like` filters and `latestData`
//! expands, hold every connection one address may, and open streams without end (`attacks`).
//! Measured throughout (`probes`): `/healthz` latency, another tenant's API latency, that
//! tenant's gateway's PUBACK latency, the server's resident memory, and at the end, on the
//! store, that every acknowledged point is there.
//!
//! Everything targets the child server on 127.0.0.1 and stops by itself at the deadline; the
//! attackers connect from loopback addresses of their own (`sources`).

mod attacks;
mod probes;
mod sources;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use reqwest::Method;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use super::crash::{Verified, verify_stopped};
use super::publisher::{FLOOD_DATATYPES as DATATYPES, FLOOD_MEASUREMENTS as MEASUREMENTS, flood};
use super::server::{ServerUnderTest, json, percentile, provision_group, rss_kib, token};

/// Options of the abuse benchmark.
#[derive(Clone, Debug, clap::Args)]
pub struct AbuseOptions {
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Seconds of publishing alone first; memory growth is measured from there.
    #[arg(long, default_value_t = 20)]
    pub warmup: u64,
    /// Publishing gateways (500-point QoS 1 messages, 16 in flight each).
    #[arg(long, default_value_t = 50)]
    pub gateways: usize,
    /// Idle sockets held open (reopened when the server closes them).
    #[arg(long, default_value_t = 5000)]
    pub idle: usize,
    /// The same run without any attack, for comparison.
    #[arg(long)]
    pub control: bool,
    /// Only this attack (repeatable): deep-expands, giant-filters, made-up-methods,
    /// big-bodies, slow-headers, slow-bodies, idle-sockets, sign-in-flood, huge-likes,
    /// latest-data, address-holding, streams. Default: all.
    #[arg(long = "attack", value_name = "ATTACKS", value_parser = clap::builder::PossibleValuesParser::new(ATTACKS))]
    pub only: Vec<String>,
    /// Database of the server under test (default: a fresh SQLite file); must be empty.
    #[arg(long)]
    pub database_url: Option<String>,
}

/// The attacks by name, in the order of the report.
pub const ATTACKS: [&str; 12] = [
    "deep-expands",
    "giant-filters",
    "made-up-methods",
    "big-bodies",
    "slow-headers",
    "slow-bodies",
    "idle-sockets",
    "sign-in-flood",
    "huge-likes",
    "latest-data",
    "address-holding",
    "streams",
];

/// Attacker address blocks of the older attacks (`sources::address`).
const REQUEST_BLOCK: u8 = 6;
const SLOW_BLOCK: u8 = 7;
const IDLE_BLOCK: u8 = 8;
/// Idle sockets per attacker address: within the limit per address, so that they are held.
const IDLE_PER_ADDRESS: usize = 64;

/// Connections that trickle their headers, and their bodies.
const SLOW_CONNECTIONS: usize = 100;

/// What one kind of attack sent and got back.
#[derive(Default)]
pub(super) struct Tally {
    sent: usize,
    statuses: BTreeMap<String, usize>,
}

impl Tally {
    pub(super) fn count(&mut self, outcome: impl Into<String>) {
        self.sent += 1;
        *self.statuses.entry(outcome.into()).or_default() += 1;
    }

    fn line(&self) -> String {
        let outcomes: Vec<String> = self.statuses.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        format!("{} ({})", self.sent, outcomes.join(", "))
    }
}

pub(super) type Shared = Arc<Mutex<Tally>>;

pub async fn abuse(o: AbuseOptions) -> Result<()> {
    // The limit per address as it ships: the benchmarks' own default lifts it, since their
    // clients all share 127.0.0.1.
    let server = ServerUnderTest::start_with(
        o.database_url.clone(),
        &[("DEVICECLOUD_CONNECTIONS_PER_ADDRESS", "256")],
    )
    .await?;
    let pid = server.pid().unwrap_or_default();
    let http = reqwest::Client::new();
    let (client, admin) = server.administrator(&http).await?;
    let (_, nobody) = account(&server, &http, &client, "nobody@bench.local").await?;
    eprintln!("provisioning {} gateways…", o.gateways);
    let (fleet_group, fleet) = provision_group(&http, &server.base, &admin, "ABUSE", o.gateways).await?;
    // Another tenant: an account managing a group of its own, with one gateway.
    let (tenant_user, tenant) = account(&server, &http, &client, "tenant@bench.local").await?;
    let (tenant_group, tenant_fleet) = provision_group(&http, &server.base, &admin, "TENANT", 1).await?;
    json(
        http.put(format!(
            "{}/api/v2/group/{tenant_group}/member/{}",
            server.base,
            tenant_user["id_user"].as_str().unwrap_or_default()
        ))
        .bearer_auth(&admin)
        .json(&json!({"role": "manager"})),
    )
    .await?;
    let oauth = attacks::OAuthClient {
        id: client["client_id"].as_str().unwrap_or_default().to_string(),
        secret: client["client_secret"].as_str().unwrap_or_default().to_string(),
    };
    let addr = server.base.trim_start_matches("http://").to_string();
    let rss_start = rss_kib(pid)?;

    eprintln!(
        "publishing alone for {} s, then attacking for {} s…",
        o.warmup, o.seconds
    );
    let deadline = Instant::now() + Duration::from_secs(o.warmup + o.seconds);
    let publishers = flood(server.mqtt, &fleet, 1_763_000_000, deadline);

    // Memory is measured from the steady state of full ingest: what the abuse adds to it.
    tokio::time::sleep(Duration::from_secs(o.warmup)).await;
    let rss_warm = rss_kib(pid)?;
    let started = Instant::now();
    let tallies: Vec<(&str, Shared)> = ATTACKS.into_iter().map(|name| (name, Shared::default())).collect();
    let runs = |name: &str| !o.control && (o.only.is_empty() || o.only.iter().any(|n| n == name));
    let mut attackers = Vec::new();
    let base = server.base.clone();
    for (kind, (name, tally)) in tallies.iter().enumerate().take(4) {
        if !runs(name) {
            continue;
        }
        for copy in 0..2 {
            let (tally, base, nobody) = (tally.clone(), base.clone(), nobody.clone());
            let from = sources::address(REQUEST_BLOCK, kind * 2 + copy);
            attackers.push(tokio::spawn(requests(kind, from, base, nobody, tally, deadline)));
        }
    }
    let slow_headers = Raw::Trickle {
        head: b"GET /healthz HTTP/1.1\r\nHost: x\r\n".as_slice().into(),
        byte: b'a',
    };
    // A create's headers promising a 1 MB body, then the body a byte a second.
    let slow_body = Raw::Trickle {
        head: format!(
            "POST /api/v2/group HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {nobody}\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{{"
        )
        .into_bytes()
        .into(),
        byte: b' ',
    };
    let http_addr: std::net::SocketAddr = addr.parse()?;
    for i in 0..SLOW_CONNECTIONS {
        for (what, (name, tally)) in [(&slow_headers, &tallies[4]), (&slow_body, &tallies[5])] {
            if !runs(name) {
                continue;
            }
            let from = sources::address(SLOW_BLOCK, i / IDLE_PER_ADDRESS);
            attackers.push(tokio::spawn(raw_connections(
                (from, http_addr),
                what.clone(),
                tally.clone(),
                deadline,
            )));
        }
    }
    let idle_sockets = if runs(ATTACKS[6]) { o.idle } else { 0 };
    for i in 0..idle_sockets {
        let from = sources::address(IDLE_BLOCK, i / IDLE_PER_ADDRESS);
        attackers.push(tokio::spawn(raw_connections(
            (from, http_addr),
            Raw::Silent,
            tallies[6].1.clone(),
            deadline,
        )));
    }
    if runs(ATTACKS[7]) {
        for i in 0..attacks::SIGN_IN_CLIENTS {
            let (base, oauth, tally) = (base.clone(), oauth.clone(), tallies[7].1.clone());
            attackers.push(tokio::spawn(attacks::sign_in_flood(i, base, oauth, tally, deadline)));
        }
    }
    if runs(ATTACKS[8]) {
        for i in 0..8 {
            let (base, nobody, tally) = (base.clone(), nobody.clone(), tallies[8].1.clone());
            attackers.push(tokio::spawn(attacks::huge_likes(i, base, nobody, tally, deadline)));
        }
    }
    if runs(ATTACKS[9]) {
        for i in 0..2 {
            let (base, admin, tally) = (base.clone(), admin.clone(), tallies[9].1.clone());
            attackers.push(tokio::spawn(attacks::latest_data(i, base, admin, tally, deadline)));
        }
    }
    if runs(ATTACKS[10]) {
        attackers.extend(attacks::hold_connections(http_addr, &tallies[10].1, deadline));
        attackers.extend(attacks::hold_connections(server.mqtt, &tallies[10].1, deadline));
    }
    if runs(ATTACKS[11]) {
        attackers.extend(attacks::open_streams(
            &base,
            &admin,
            &fleet_group,
            &tallies[11].1,
            deadline,
        ));
    }
    let prober = tokio::spawn(probes::every_10_ms(format!("{base}/healthz"), None, deadline));
    let tenant_prober = tokio::spawn(probes::every_10_ms(
        format!("{base}/api/v2/group?filter[id_group]={tenant_group}"),
        Some(tenant),
        deadline,
    ));
    let tenant_gateway = tenant_fleet.first().cloned().context("no tenant gateway")?;
    let puback_prober = tokio::spawn(probes::puback(server.mqtt, tenant_gateway, deadline));
    let sampler = tokio::spawn(async move {
        let mut peak = 0;
        while Instant::now() < deadline {
            peak = peak.max(rss_kib(pid).unwrap_or(0));
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        peak
    });

    let mut acked = Vec::new();
    let mut failed_gateways = 0;
    for task in publishers {
        let outcome = task.await??;
        failed_gateways += usize::from(outcome.failed);
        acked.push(outcome.acked);
    }
    for task in attackers {
        task.await?;
    }
    let probes::Probed {
        mut latencies,
        failures,
    } = prober.await?;
    let mut tenant_api = tenant_prober.await?;
    tenant_api.latencies.sort_unstable();
    let mut pubacks = puback_prober.await??;
    pubacks.latencies.sort_unstable();
    let rss_peak = sampler.await?;
    let elapsed = started.elapsed().as_secs_f64() + o.warmup as f64;
    let alive = http
        .get(format!("{base}/healthz"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success());
    let rss_end = rss_kib(pid).unwrap_or(0);
    let (database_url, data_dir) = (server.database_url.clone(), server.data_dir.clone());
    server.stop(true).await;
    let Verified {
        points,
        missing,
        miscounted,
    } = verify_stopped(&data_dir, database_url.as_deref(), &fleet, &acked, DATATYPES).await?;

    latencies.sort_unstable();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    let mib = |kib: u64| kib as f64 / 1024.0;
    let backend = if o.database_url.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    println!(
        "bench abuse ({backend}{}): {} gateways publishing {}-point QoS 1 messages, {} s of abuse, {} idle sockets",
        if o.control { ", control run: no abuse" } else { "" },
        o.gateways,
        MEASUREMENTS * i64::from(DATATYPES),
        o.seconds,
        o.idle
    );
    println!("durable points/s (whole run):        {:>10.0}", points as f64 / elapsed);
    println!(
        "/healthz p50 / p99 / max ms:         {:>10.2} / {:.2} / {:.2}  ({} probes, {failures} failed; target p99 ≤ 50)",
        pct(0.50),
        pct(0.99),
        pct(1.0),
        latencies.len()
    );
    println!(
        "resident memory idle / after {} s of ingest / peak under abuse / end: {:.1} / {:.1} / {:.1} / {:.1} MiB",
        o.warmup,
        mib(rss_start),
        mib(rss_warm),
        mib(rss_peak),
        mib(rss_end)
    );
    println!(
        "another tenant's API p50 / p99 ms:   {:>10.2} / {:.2}  ({} requests, {} failed; target p99 ≤ 100)",
        percentile(&tenant_api.latencies, 0.50),
        percentile(&tenant_api.latencies, 0.99),
        tenant_api.latencies.len(),
        tenant_api.failures
    );
    println!(
        "its gateway's PUBACK p50 / p99 ms:   {:>10.2} / {:.2}  ({} acknowledged; target p99 ≤ 100)",
        percentile(&pubacks.latencies, 0.50),
        percentile(&pubacks.latencies, 0.99),
        pubacks.latencies.len()
    );
    println!(
        "growth under abuse:                  {:>10.1} MiB  (target ≤ 150)",
        mib(rss_peak.saturating_sub(rss_warm))
    );
    println!("acknowledged points:                 {points:>10}  missing {missing}, series miscounted {miscounted}");
    for (name, tally) in &tallies {
        println!("{name:<36} {}", tally.lock().await.line());
    }
    if failed_gateways > 0 {
        println!("gateways whose connection failed: {failed_gateways}");
    }
    if !alive {
        bail!("the service did not answer /healthz after the abuse");
    }
    if missing > 0 || miscounted > 0 || points == 0 {
        bail!("acknowledged data was lost or miscounted");
    }
    Ok(())
}

/// A new account (no role anywhere) and a token of it.
async fn account(
    server: &ServerUnderTest,
    http: &reqwest::Client,
    client: &serde_json::Value,
    username: &str,
) -> Result<(serde_json::Value, String)> {
    let user = server
        .admin(&["create-user", "--username", username, "--password", "bench-password"])
        .await?;
    let token = token(http, &server.base, client, username, "bench-password").await?;
    Ok((user, token))
}

/// Requests through an HTTP client, one kind per task, back to back until the deadline:
/// 0 deep expands, 1 giant `in` filters, 2 made-up methods, 3 1 MB bodies (a JSON collection
/// query, each distinct, and a create refused for its size).
async fn requests(kind: usize, from: std::net::IpAddr, base: String, token: String, tally: Shared, deadline: Instant) {
    let http = sources::http_client(from);
    let deep = vec!["parent"; 200].join(".");
    let values: Vec<String> = (0..40_000).map(|i| format!("SERIAL-{i}")).collect();
    let giant = json!({"filter": {"serial_hardware": {"in": values}}}).to_string();
    let junk_method = Method::from_bytes(vec![b'X'; 16 * 1024].as_slice()).unwrap_or(Method::PATCH);
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        let request = match kind {
            0 => http.get(format!("{base}/api/v2/physical-device?expand={deep}")),
            1 => http
                .get(format!("{base}/api/v2/physical-device"))
                .header("content-type", "application/json")
                .body(giant.clone()),
            2 => http.request(junk_method.clone(), format!("{base}/api/v2/junk/{n}")),
            _ if n.is_multiple_of(2) => http
                .get(format!("{base}/api/v2/group/index"))
                .header("content-type", "application/json")
                .body(format!("{{\"junk\":\"{n}{}\"}}", "j".repeat(1_000_000 - 64))),
            _ => http
                .post(format!("{base}/api/v2/group"))
                .header("content-type", "application/json")
                .body(format!("{{\"label\":\"{}\"}}", "j".repeat(2_000_000))),
        };
        let outcome = match request
            .bearer_auth(&token)
            .timeout(Duration::from_secs(30))
            .send()
            .await
        {
            Ok(response) => response.status().as_u16().to_string(),
            Err(e) if e.is_timeout() => "timeout".into(),
            Err(_) => "error".into(),
        };
        tally.lock().await.count(outcome);
    }
}

/// What an attacking raw connection does once it is open.
#[derive(Clone)]
enum Raw {
    /// Writes `head`, then `byte` once a second.
    Trickle { head: Arc<[u8]>, byte: u8 },
    /// Sends nothing.
    Silent,
}

/// Opens connections one after another until the deadline, each doing `what`, and counts how
/// each one ended.
async fn raw_connections(
    (from, to): (std::net::IpAddr, std::net::SocketAddr),
    what: Raw,
    tally: Shared,
    deadline: Instant,
) {
    while Instant::now() < deadline {
        let Ok(mut stream) = sources::connect(from, to).await else {
            tally.lock().await.count("connect failed");
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let outcome = match &what {
            Raw::Trickle { head, byte } => trickle(&mut stream, head, *byte, deadline).await,
            Raw::Silent => silent(&mut stream, deadline).await.to_string(),
        };
        tally.lock().await.count(outcome);
    }
}

/// Writes `head`, then `byte` once a second until the server answers or closes, or the
/// deadline; says which.
async fn trickle(stream: &mut TcpStream, head: &[u8], byte: u8, deadline: Instant) -> String {
    if stream.write_all(head).await.is_err() {
        return "closed".into();
    }
    let mut buf = [0u8; 1024];
    loop {
        let wait = Duration::from_secs(1).min(deadline.saturating_duration_since(Instant::now()));
        if wait.is_zero() {
            return "held to the end".into();
        }
        match tokio::time::timeout(wait, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return "closed".into(),
            Ok(Ok(n)) => {
                let text = String::from_utf8_lossy(&buf[..n]);
                return text.split_whitespace().nth(1).unwrap_or("answered").to_string();
            }
            Err(_) => {
                if stream.write_all(&[byte]).await.is_err() {
                    return "closed".into();
                }
            }
        }
    }
}

/// Holds a silent connection until the server closes it or the deadline; says which.
pub(super) async fn silent(stream: &mut TcpStream, deadline: Instant) -> &'static str {
    let mut buf = [0u8; 64];
    let wait = deadline.saturating_duration_since(Instant::now());
    match tokio::time::timeout(wait, stream.read(&mut buf)).await {
        Err(_) => "held to the end",
        Ok(_) => "closed by the server",
    }
}
