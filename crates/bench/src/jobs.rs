//! `bench jobs`: jobs over many connected gateways while 50 other gateways ingest at full rate.
//!
//! 1. Twin latency: a desired change through the API reaching a connected gateway (PATCH sent →
//!    the desired document read off the gateway's socket), and reaching a gateway that was
//!    offline when it changed (its hello sent → the document read).
//! 2. Ingest alone: 50 gateways publishing 500-point messages as fast as acknowledged.
//! 3. A ping job and then a twin job over every connected gateway, without a rate limit, while
//!    the 50 gateways ingest: the time each job takes from creation to its end, and the ingest
//!    rate meanwhile against alone.
//!
//! The job's gateways are bare sockets speaking just enough MQTT 3.1.1 (as in `bench idle`): they
//! answer every command with a pong and report every desired document with its version.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Mutex, mpsc};

use super::idle::{connect_packet, field, next_packet, remaining_length};
use super::publisher::{FLOOD_DATATYPES, FLOOD_MEASUREMENTS, flood};
use super::server::{GatewayCredentials, ServerUnderTest, percentile, provision, provision_group};

/// What `bench jobs` takes.
#[derive(Clone, Debug, clap::Args)]
pub struct JobsOptions {
    /// Gateways the jobs run over (the process's descriptor limit bounds it: 19,000 fit under
    /// 20,000).
    #[arg(long, default_value_t = 19_000)]
    pub gateways: usize,
    /// Gateways ingesting meanwhile.
    #[arg(long, default_value_t = 50)]
    pub ingest_gateways: usize,
    /// Seconds of ingest alone, the baseline.
    #[arg(long, default_value_t = 10)]
    pub baseline_seconds: u64,
    /// Desired changes timed in the twin latency phase (each way).
    #[arg(long, default_value_t = 200)]
    pub twin_samples: usize,
    /// Database of the server under test (default: a fresh SQLite file); must be empty.
    #[arg(long)]
    pub database_url: Option<String>,
}

/// A PUBLISH at QoS 0.
fn publish_packet(topic: &str, payload: &[u8]) -> Vec<u8> {
    let mut body = field(topic);
    body.extend_from_slice(payload);
    let mut packet = vec![0x30];
    remaining_length(body.len(), &mut packet);
    packet.extend(body);
    packet
}

/// The hello of a CORE module.
fn hello() -> Vec<u8> {
    let hello = json!({"kind": "CORE", "connection": "cellular", "signal": 20});
    publish_packet("v1/gateway/hello", hello.to_string().as_bytes())
}

/// Connects a gateway and says hello; the socket's halves.
async fn connect(mqtt: std::net::SocketAddr, gateway: &GatewayCredentials) -> Result<TcpStream> {
    let mut socket = TcpStream::connect(mqtt).await?;
    socket.set_nodelay(true)?;
    socket.write_all(&connect_packet(gateway)).await?;
    let mut ack = [0u8; 4];
    socket.read_exact(&mut ack).await?;
    if ack != [0x20, 2, 0, 0] {
        bail!("CONNECT refused: {ack:?}");
    }
    Ok(socket)
}

/// Answers what the server publishes on `socket` until it ends: a command with its PUBACK and a
/// pong, a desired document with its PUBACK and a report of it with its version (and tells
/// `seen` the gateway's index and when).
async fn answer(socket: TcpStream, index: usize, seen: mpsc::UnboundedSender<(usize, Instant)>) -> Result<()> {
    let (mut read, write) = socket.into_split();
    let write = Arc::new(Mutex::new(write));
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = read.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buffer.extend_from_slice(&chunk[..n]);
        while let Some((first, body, used)) = next_packet(&buffer) {
            let out = reply(first, body, index, &seen)?;
            buffer.drain(..used);
            if !out.is_empty() {
                write.lock().await.write_all(&out).await?;
            }
        }
    }
}

/// What a gateway sends back for one packet.
fn reply(first: u8, body: &[u8], index: usize, seen: &mpsc::UnboundedSender<(usize, Instant)>) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    if first >> 4 != 3 || body.len() < 2 {
        return Ok(out);
    }
    let qos = (first >> 1) & 3;
    let topic_len = usize::from(u16::from_be_bytes([body[0], body[1]]));
    let topic = std::str::from_utf8(body.get(2..2 + topic_len).context("short PUBLISH")?)?;
    let mut payload_at = 2 + topic_len;
    if qos > 0 {
        let id = body.get(payload_at..payload_at + 2).context("no packet id")?;
        out.extend_from_slice(&[0x40, 2, id[0], id[1]]);
        payload_at += 2;
    }
    let payload = body.get(payload_at..).unwrap_or_default();
    if let Some(request) = topic.strip_prefix("v1/gateway/commands/") {
        let pong = br#"{"status":200,"payload":{"data":"pong","result":"success"}}"#;
        out.extend(publish_packet(&format!("v1/gateway/responses/{request}"), pong));
    } else if topic == "v1/gateway/twin/desired" {
        let _ = seen.send((index, Instant::now()));
        let doc: Value = serde_json::from_slice(payload)?;
        let report = json!({"device": doc.get("device"), "reported": doc["desired"], "version": doc["version"]});
        out.extend(publish_packet(
            "v1/gateway/twin/reported",
            report.to_string().as_bytes(),
        ));
    }
    Ok(out)
}

/// How many of `group`'s gateways show connected.
async fn connected(http: &reqwest::Client, server: &ServerUnderTest, admin: &str, group: &str) -> Result<i64> {
    let url = format!(
        "{}/api/v2/physical-device?filter[id_group]={group}&filter[is_connected]=1&per-page=1",
        server.base
    );
    let response = http.get(url).bearer_auth(admin).send().await?;
    let total = response
        .headers()
        .get("x-pagination-total-count")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .context("no total count")?;
    Ok(total)
}

/// Creates a job over `group` without a rate limit and waits for its end; the time it took and
/// the job as it ended.
async fn run_job(
    http: &reqwest::Client,
    server: &ServerUnderTest,
    admin: &str,
    group: &str,
    operation: Value,
) -> Result<(Duration, Value)> {
    let body = json!({"label": "bench", "operation": operation, "target": {"filter": {"id_group": group}},
        "rate_per_minute": 600_000, "timeout_s": 60});
    timed_job(http, server, admin, &body, Duration::from_secs(300)).await
}

/// Creates the job `body` and waits (at most `limit`) for its end; the time from its creation
/// to its end, and the job as it ended.
pub(crate) async fn timed_job(
    http: &reqwest::Client,
    server: &ServerUnderTest,
    admin: &str,
    body: &Value,
    limit: Duration,
) -> Result<(Duration, Value)> {
    let started = Instant::now();
    let created: Value = http
        .post(format!("{}/api/v2/job", server.base))
        .bearer_auth(admin)
        .json(body)
        .send()
        .await?
        .json()
        .await?;
    let id = created["id_job"]
        .as_str()
        .with_context(|| format!("no id_job: {created}"))?;
    let job = finished(http, server, admin, id, limit).await?;
    Ok((started.elapsed(), job))
}

/// Waits (at most `limit`) for the job `id` to end; the job as it ended.
async fn finished(
    http: &reqwest::Client,
    server: &ServerUnderTest,
    admin: &str,
    id: &str,
    limit: Duration,
) -> Result<Value> {
    let started = Instant::now();
    loop {
        let job: Value = http
            .get(format!("{}/api/v2/job/{id}", server.base))
            .bearer_auth(admin)
            .send()
            .await?
            .json()
            .await?;
        if job["finished_at"].is_i64() {
            return Ok(job);
        }
        if started.elapsed() > limit {
            bail!("the job did not end in {} s: {job}", limit.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Durable ingest points/s of the publishers' acknowledgements within `[from, to]`.
fn ingest_rate(outcomes: &[super::publisher::Outcome], from: Instant, to: Instant) -> f64 {
    let per_message = (FLOOD_MEASUREMENTS * i64::from(FLOOD_DATATYPES)) as f64;
    let acked = outcomes
        .iter()
        .flat_map(|o| o.acked_at.iter())
        .filter(|at| **at >= from && **at <= to)
        .count() as f64;
    acked * per_message / to.duration_since(from).as_secs_f64().max(1e-9)
}

/// Full-rate ingest by `fleet` for at most `longest` while `during` runs; the ingest rate
/// within it (up to `longest`: the publishers stop by themselves, at their deadline).
pub(crate) async fn ingest_while<T>(
    server: &ServerUnderTest,
    fleet: &[GatewayCredentials],
    first_second: i64,
    longest: Duration,
    during: impl std::future::Future<Output = Result<T>>,
) -> Result<(T, f64)> {
    // Two seconds for the publishers to reach their pace.
    let warm = Duration::from_secs(2);
    let deadline = Instant::now() + warm + longest;
    let publishers = flood(server.mqtt, fleet, first_second, deadline);
    tokio::time::sleep(warm).await;
    let from = Instant::now();
    let result = during.await;
    let to = Instant::now().min(deadline);
    let mut outcomes = Vec::new();
    for task in publishers {
        outcomes.push(task.await??);
    }
    Ok((result?, ingest_rate(&outcomes, from, to)))
}

pub async fn jobs(options: JobsOptions) -> Result<()> {
    let JobsOptions {
        gateways,
        ingest_gateways,
        baseline_seconds,
        twin_samples,
        database_url,
    } = options;
    let server = ServerUnderTest::start(database_url).await?;
    let http = reqwest::Client::new();
    let (_, admin) = server.administrator(&http).await?;
    eprintln!("provisioning {gateways} gateways and {ingest_gateways} ingesting ones…");
    let (group, fleet) = provision_group(&http, &server.base, &admin, "JOBS", gateways).await?;
    let ingesters = provision(&http, &server.base, &admin, "JOBS-INGEST", ingest_gateways).await?;

    eprintln!("connecting…");
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let mut tasks = Vec::with_capacity(gateways);
    for (index, gateway) in fleet.iter().enumerate() {
        let mut socket = connect(server.mqtt, gateway).await?;
        socket.write_all(&hello()).await?;
        tasks.push(tokio::spawn(answer(socket, index, seen_tx.clone())));
    }
    let since = Instant::now();
    while connected(&http, &server, &admin, &group).await? < gateways as i64 {
        if since.elapsed() > Duration::from_secs(120) {
            bail!("not every gateway was shown connected within 120 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // 1. Twin latency, connected and after a hello.
    let samples = twin_samples.min(gateways);
    let mut to_connected = Vec::with_capacity(samples);
    for (i, gateway) in fleet.iter().take(samples).enumerate() {
        let url = format!("{}/api/v2/physical-device/{}/twin", server.base, gateway.id);
        let sent = Instant::now();
        let reply = http
            .patch(url)
            .bearer_auth(&admin)
            .json(&json!({"desired": {"sample": i}}))
            .send()
            .await?;
        if !reply.status().is_success() {
            bail!("PATCH answered {}", reply.status());
        }
        let (index, at) = tokio::time::timeout(Duration::from_secs(10), seen.recv())
            .await
            .context("no desired document within 10 s")?
            .context("no gateway left")?;
        if index != i {
            bail!("the document of gateway {i} reached gateway {index}");
        }
        to_connected.push(at.duration_since(sent));
    }
    // Offline: the first `samples` gateways go away, their twins change, they come back.
    for task in tasks.iter().take(samples) {
        task.abort();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    for (i, gateway) in fleet.iter().take(samples).enumerate() {
        let url = format!("{}/api/v2/physical-device/{}/twin", server.base, gateway.id);
        http.patch(url)
            .bearer_auth(&admin)
            .json(&json!({"desired": {"sample": i, "while": "offline"}}))
            .send()
            .await?;
    }
    let mut after_hello = Vec::with_capacity(samples);
    for (i, gateway) in fleet.iter().take(samples).enumerate() {
        let mut socket = connect(server.mqtt, gateway).await?;
        let sent = Instant::now();
        socket.write_all(&hello()).await?;
        tasks[i] = tokio::spawn(answer(socket, i, seen_tx.clone()));
        let (index, at) = tokio::time::timeout(Duration::from_secs(10), seen.recv())
            .await
            .context("no desired document within 10 s of the hello")?
            .context("no gateway left")?;
        if index != i {
            bail!("after hello, the document of gateway {i} reached gateway {index}");
        }
        after_hello.push(at.duration_since(sent));
    }
    while seen.try_recv().is_ok() {}
    let latency = |mut v: Vec<Duration>| {
        v.sort();
        (percentile(&v, 0.5), percentile(&v, 0.99))
    };
    let (connected_p50, connected_p99) = latency(to_connected);
    let (hello_p50, hello_p99) = latency(after_hello);

    // 2. Ingest alone.
    eprintln!("ingest alone for {baseline_seconds} s…");
    let baseline = Duration::from_secs(baseline_seconds);
    let ((), alone) = ingest_while(&server, &ingesters, 1_700_000_000, baseline, async {
        tokio::time::sleep(baseline).await;
        Ok(())
    })
    .await?;

    // 3. The jobs, with ingest.
    eprintln!("ping job over {gateways} gateways…");
    let ((ping_took, ping_job), with_ping) = ingest_while(
        &server,
        &ingesters,
        1_710_000_000,
        Duration::from_secs(30),
        run_job(&http, &server, &admin, &group, json!({"command": "ping"})),
    )
    .await?;
    eprintln!("twin job over {gateways} gateways…");
    let ((twin_took, twin_job), with_twin) = ingest_while(
        &server,
        &ingesters,
        1_720_000_000,
        Duration::from_secs(45),
        run_job(
            &http,
            &server,
            &admin,
            &group,
            json!({"twin": {"reporting_interval_s": 600}}),
        ),
    )
    .await?;
    while seen.try_recv().is_ok() {}
    for task in tasks {
        task.abort();
    }
    server.stop(false).await;

    let mut counts: HashMap<&str, i64> = HashMap::new();
    for (name, job) in [("ping", &ping_job), ("twin", &twin_job)] {
        counts.insert(name, job["succeeded"].as_i64().unwrap_or(0));
    }
    println!("bench jobs: {gateways} gateways connected, {ingest_gateways} ingesting");
    println!(
        "desired change → connected gateway: p50 {connected_p50:.2} ms, p99 {connected_p99:.2} ms (target p99 <= 20 ms)"
    );
    println!(
        "hello → desired document of a gateway that was offline: p50 {hello_p50:.2} ms, p99 {hello_p99:.2} ms (target p99 <= 50 ms)"
    );
    println!("ingest alone: {alone:.0} points/s");
    for (name, took, job, with, target) in [
        ("ping", ping_took, &ping_job, with_ping, 20.0),
        ("twin", twin_took, &twin_job, with_twin, 30.0),
    ] {
        println!(
            "{name} job: {} in {:.1} s = {:.0} executions/s (status {}, {} succeeded; target <= {target} s); \
             ingest meanwhile {:.0} points/s = {:.2} of alone (target >= 0.8)",
            gateways,
            took.as_secs_f64(),
            gateways as f64 / took.as_secs_f64(),
            job["status"],
            counts[name],
            with,
            with / alone.max(1.0)
        );
    }
    Ok(())
}
