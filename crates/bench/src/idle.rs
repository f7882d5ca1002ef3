//! `bench idle`: many gateways connected to one server and doing nothing; the server's
//! resident memory per connected gateway (from /proc) is the figure. Then, with all of them
//! still connected, pings to gateways chosen at random: the command path must stay fast with a
//! full registry.
//!
//! The gateways are bare sockets speaking just enough MQTT 3.1.1 (CONNECT, and answering a
//! command with its PUBACK and a response): a client library would cost the load generator
//! far more per connection than the server it measures.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::server::{GatewayCredentials, ServerUnderTest, provision, rss_kib};
use crate::throughput::{Throughput, throughput};

/// What `bench idle` takes.
#[derive(Clone, Debug, clap::Args)]
pub struct IdleOptions {
    /// Gateways to connect (the process's descriptor limit bounds it: 19,000 fit under 20,000).
    #[arg(long, default_value_t = 10_000)]
    pub connections: usize,
    /// Seconds of pings to random gateways once all are connected (0: none).
    #[arg(long, default_value_t = 10)]
    pub ping_seconds: u64,
    /// Concurrent ping callers.
    #[arg(long, default_value_t = 4)]
    pub callers: usize,
}

/// The kernel's slab memory in KiB (`/proc/meminfo`): socket structures live there, outside
/// any process's resident memory.
fn slab_kib() -> Result<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")?;
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("Slab:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no Slab in /proc/meminfo")
}

/// The MQTT remaining-length prefix of `len` bytes (MQTT 3.1.1 §2.2.3).
pub(crate) fn remaining_length(mut len: usize, packet: &mut Vec<u8>) {
    loop {
        let mut byte = (len % 128) as u8;
        len /= 128;
        if len > 0 {
            byte |= 0x80;
        }
        packet.push(byte);
        if len == 0 {
            break;
        }
    }
}

/// A length-prefixed UTF-8 string field.
pub(crate) fn field(s: &str) -> Vec<u8> {
    let mut v = (s.len() as u16).to_be_bytes().to_vec();
    v.extend_from_slice(s.as_bytes());
    v
}

/// An MQTT 3.1.1 CONNECT with keep-alive 0 (the server then never times the connection out).
pub(crate) fn connect_packet(gateway: &GatewayCredentials) -> Vec<u8> {
    let mut body = field("MQTT");
    body.extend_from_slice(&[4, 0b1100_0010, 0, 0]);
    for s in [gateway.serial.as_str(), gateway.serial.as_str(), gateway.token.as_str()] {
        body.extend(field(s));
    }
    let mut packet = vec![0x10];
    remaining_length(body.len(), &mut packet);
    packet.extend(body);
    packet
}

/// One complete packet at the start of `buffer`: its first byte and its body, and its length.
pub(crate) fn next_packet(buffer: &[u8]) -> Option<(u8, &[u8], usize)> {
    let (mut len, mut shift, mut at) = (0usize, 0u32, 1usize);
    loop {
        let byte = *buffer.get(at)?;
        len |= usize::from(byte & 0x7f) << shift;
        at += 1;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 21 {
            return None;
        }
    }
    let body = buffer.get(at..at + len)?;
    Some((buffer[0], body, at + len))
}

/// Answers every command the server publishes on `socket` with a PUBACK (QoS 1) and the ping's
/// success on `v1/gateway/responses/<request id>`, until the connection ends.
async fn answer_commands(mut socket: TcpStream) -> Result<()> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buffer.extend_from_slice(&chunk[..n]);
        while let Some((first, body, used)) = next_packet(&buffer) {
            let mut out = Vec::new();
            if first >> 4 == 3 && body.len() >= 2 {
                let qos = (first >> 1) & 3;
                let topic_len = usize::from(u16::from_be_bytes([body[0], body[1]]));
                let topic = std::str::from_utf8(body.get(2..2 + topic_len).context("short PUBLISH")?)?;
                if qos > 0 {
                    let id = body.get(2 + topic_len..4 + topic_len).context("no packet id")?;
                    out.extend_from_slice(&[0x40, 2, id[0], id[1]]);
                }
                if let Some(request) = topic.strip_prefix("v1/gateway/commands/") {
                    let mut publish = field(&format!("v1/gateway/responses/{request}"));
                    publish.extend_from_slice(br#"{"status":200,"payload":{"data":"pong","result":"success"}}"#);
                    out.push(0x30);
                    remaining_length(publish.len(), &mut out);
                    out.extend(publish);
                }
            }
            buffer.drain(..used);
            socket.write_all(&out).await?;
        }
    }
}

/// `callers` send pings to gateways chosen at random among `ids` for `duration`; every answer
/// must be the gateway's pong.
async fn ping_random(
    server: &ServerUnderTest,
    admin: &str,
    ids: Arc<Vec<String>>,
    callers: usize,
    duration: Duration,
) -> Result<Throughput> {
    let http = reqwest::Client::new();
    let started = Instant::now();
    let deadline = started + duration;
    let mut workers = Vec::new();
    for _ in 0..callers {
        let (http, ids, base, bearer) = (
            http.clone(),
            ids.clone(),
            server.base.clone(),
            format!("Bearer {admin}"),
        );
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let id = &ids[rand::rng().random_range(0..ids.len())];
                let url = format!("{base}/api/v2/physical-device/{id}/ping");
                latencies.push(super::commands::ping(&http, &url, &bearer).await?);
            }
            anyhow::Ok(latencies)
        }));
    }
    throughput(workers, started).await
}

pub async fn idle(options: IdleOptions) -> Result<()> {
    let IdleOptions {
        connections,
        ping_seconds,
        callers,
    } = options;
    let server = ServerUnderTest::start(None).await?;
    let pid = server.pid().context("no server pid")?;
    let http = reqwest::Client::new();
    let (_, admin) = server.administrator(&http).await?;
    eprintln!("provisioning {connections} gateways…");
    let fleet = provision(&http, &server.base, &admin, "IDLE", connections).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (before, slab_before) = (rss_kib(pid)?, slab_kib()?);
    eprintln!("connecting…");
    let started = Instant::now();
    let mut sockets = Vec::with_capacity(connections);
    for gateway in &fleet {
        let mut socket = TcpStream::connect(server.mqtt).await?;
        socket.write_all(&connect_packet(gateway)).await?;
        let mut ack = [0u8; 4];
        socket.read_exact(&mut ack).await?;
        if ack != [0x20, 2, 0, 0] {
            bail!("CONNECT refused: {ack:?}");
        }
        sockets.push(socket);
    }
    let connected_in = started.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (after, slab_after) = (rss_kib(pid)?, slab_kib()?);
    let per = (after.saturating_sub(before)) as f64 * 1024.0 / connections as f64;
    // Every gateway now answers commands; pings go to any of them.
    let answering: Vec<_> = sockets.into_iter().map(|s| tokio::spawn(answer_commands(s))).collect();
    let ids = Arc::new(fleet.iter().map(|g| g.id.clone()).collect::<Vec<_>>());
    let pings = if ping_seconds > 0 {
        Some(ping_random(&server, &admin, ids, callers, Duration::from_secs(ping_seconds)).await?)
    } else {
        None
    };
    let with_pings = rss_kib(pid)?;
    for task in answering {
        task.abort();
    }
    // What stays once every gateway has left: store caches and the allocator's free pages, not
    // the connections themselves.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let left = rss_kib(pid)?;
    server.stop(false).await;
    println!(
        "bench idle: {connections} gateways connected in {:.1} s",
        connected_in.as_secs_f64()
    );
    println!(
        "server resident memory: {before} KiB before, {after} KiB with every gateway connected, \
         {with_pings} KiB after the pings, {left} KiB after they left"
    );
    println!(
        "per connected gateway: {:.0} bytes ({:.1} KiB; target <= 2 KiB)",
        per,
        per / 1024.0
    );
    println!(
        "after they left: {:.0} % of the connected figure (target <= 110 %)",
        left as f64 * 100.0 / after.max(1) as f64
    );
    // Both ends of every connection are on this machine: two sockets per gateway. Other
    // processes move the slab too, so this is an estimate.
    let slab_per = slab_after.saturating_sub(slab_before) as f64 * 1024.0 / (2 * connections) as f64;
    println!("kernel slab: {slab_before} KiB before, {slab_after} KiB after: about {slab_per:.0} bytes per TCP socket");
    if let Some(pings) = pings {
        println!("{:<44} {:>12} {:>10} {:>10}", "", "pings/s", "p50 ms", "p99 ms");
        println!(
            "{}",
            pings.line(
                &format!("ping a random one of {connections} ({callers} callers)"),
                44,
                12
            )
        );
        println!("target: p99 <= 5 ms");
    }
    Ok(())
}
