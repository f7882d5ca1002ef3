//! `bench idle`: many gateways connected to one server and doing nothing; the server's
//! resident memory per connected gateway (from /proc) is the figure.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::server::{GatewayCredentials, ServerUnderTest, provision, rss_kib};

/// An MQTT 3.1.1 CONNECT with keep-alive 0 (the server then never times the connection out).
fn connect_packet(gateway: &GatewayCredentials) -> Vec<u8> {
    let field = |s: &str| {
        let mut v = (s.len() as u16).to_be_bytes().to_vec();
        v.extend_from_slice(s.as_bytes());
        v
    };
    let mut body = field("MQTT");
    body.extend_from_slice(&[4, 0b1100_0010, 0, 0]);
    for s in [gateway.serial.as_str(), gateway.serial.as_str(), gateway.token.as_str()] {
        body.extend(field(s));
    }
    let mut packet = vec![0x10];
    let mut len = body.len();
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
    packet.extend(body);
    packet
}

pub async fn idle(connections: usize) -> Result<()> {
    let server = ServerUnderTest::start(None).await?;
    let pid = server.pid().context("no server pid")?;
    let http = reqwest::Client::new();
    let (_, admin) = server.administrator(&http).await?;
    eprintln!("provisioning {connections} gateways…");
    let fleet = provision(&http, &server.base, &admin, "IDLE", connections).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = rss_kib(pid)?;
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
    let after = rss_kib(pid)?;
    let per = (after.saturating_sub(before)) as f64 * 1024.0 / connections as f64;
    drop(sockets);
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
         {left} KiB after they left"
    );
    println!(
        "per connected gateway: {:.0} bytes ({:.1} KiB; target <= 6 KiB)",
        per,
        per / 1024.0
    );
    Ok(())
}
