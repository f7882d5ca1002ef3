//! `bench webhook` and `bench webhook-crash`: measurements published over MQTT reach a
//! measurements webhook whose receiver runs in this process on loopback.
//!
//! `webhook` paces gateways to a target rate and measures, per point, the time from the PUBACK
//! of its message to the receiver's 2xx, and the outbox at start and end (it must not grow).
//! `webhook-crash` keeps the receiver down while the server is killed (SIGKILL) and restarted
//! under load, then brings it up: every acknowledged point must arrive.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use devicecloud_store::{Db, webhooks};
use rand::Rng;
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use serde_json::{Value, json};

use super::crash::KillCycles;
use super::publisher::Message;
use super::server::{GatewayCredentials, ServerUnderTest, json, percentile, provision};

const DATATYPES: u32 = 10;
const MEASUREMENTS: i64 = 10;
const FIRST_SECOND: i64 = 1_763_000_000;

/// One point as the receiver identifies it: source device, datatype, second.
type PointKey = (String, i64, i64);

/// The receiving end: every point with the time its request was answered.
#[derive(Clone, Default)]
struct Receiver {
    points: Arc<Mutex<HashMap<PointKey, Instant>>>,
    requests: Arc<Mutex<usize>>,
}

impl Receiver {
    /// Serves `POST /hook` on `listener` (ndjson bodies).
    fn serve(listener: tokio::net::TcpListener) -> Receiver {
        let receiver = Receiver::default();
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(receiver.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        receiver
    }

    fn len(&self) -> usize {
        self.points.lock().map(|p| p.len()).unwrap_or(0)
    }
}

async fn receive(State(receiver): State<Receiver>, body: Bytes) -> StatusCode {
    let now = Instant::now();
    let Ok(text) = std::str::from_utf8(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    let mut keys = Vec::new();
    for line in text.lines() {
        let Ok(item) = serde_json::from_str::<Value>(line) else {
            return StatusCode::BAD_REQUEST;
        };
        keys.push((
            item["source_device"].as_str().unwrap_or_default().to_string(),
            item["datatype"].as_i64().unwrap_or_default(),
            item["timestamp_seconds"].as_i64().unwrap_or_default(),
        ));
    }
    if let Ok(mut points) = receiver.points.lock() {
        for key in keys {
            points.entry(key).or_insert(now);
        }
    }
    if let Ok(mut n) = receiver.requests.lock() {
        *n += 1;
    }
    StatusCode::OK
}

/// Creates a measurements webhook (ndjson) of the fleet's group towards `url`.
async fn create_webhook(
    http: &reqwest::Client,
    server: &ServerUnderTest,
    admin: &str,
    group: &str,
    url: &str,
) -> Result<()> {
    let body = json!({"label": "bench", "id_group": group, "forwarding_type": "measurements",
                      "formatter": "ndjson", "url": url, "authorization": "Bearer bench"});
    http.post(format!("{}/api/v2/webhook", server.base))
        .bearer_auth(admin)
        .json(&body)
        .send()
        .await?
        .error_for_status()
        .context("creating the webhook")?;
    Ok(())
}

/// The group of the provisioned fleet.
async fn group_of(
    http: &reqwest::Client,
    server: &ServerUnderTest,
    admin: &str,
    gateway: &GatewayCredentials,
) -> Result<String> {
    let device: Value = json(
        http.get(format!("{}/api/v2/physical-device/{}", server.base, gateway.id))
            .bearer_auth(admin),
    )
    .await?;
    device["id_group"].as_str().map(str::to_string).context("no id_group")
}

/// `bench webhook`: `rate` points/s for `seconds` through `gateways` paced gateways.
pub async fn latency(rate: usize, seconds: u64, gateways: usize) -> Result<()> {
    let server = ServerUnderTest::start(None).await?;
    let http = reqwest::Client::new();
    let (_, admin) = server.administrator(&http).await?;
    let fleet = provision(&http, &server.base, &admin, "HOOK", gateways).await?;
    let group = group_of(&http, &server, &admin, &fleet[0]).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    let receiver = Receiver::serve(listener);
    create_webhook(&http, &server, &admin, &group, &url).await?;
    let store = Db::connect(&server.store_url()).await?;
    let outbox_start = webhooks::outbox_len(&store).await?;

    // Each gateway sends one message of MEASUREMENTS × DATATYPES points every `period`.
    let per_message = (MEASUREMENTS as usize) * (DATATYPES as usize);
    let messages_per_s = (rate / per_message).max(1);
    let period = Duration::from_secs_f64(gateways as f64 / messages_per_s as f64);
    let count = (seconds as f64 / period.as_secs_f64()).ceil() as i64;
    eprintln!(
        "{gateways} gateways, one message of {per_message} points every {} ms each: {} points/s for {seconds} s",
        period.as_millis(),
        messages_per_s * per_message
    );
    let started = Instant::now();
    let mut tasks = Vec::new();
    for gateway in fleet.clone() {
        let mqtt = server.mqtt;
        tasks.push(tokio::spawn(paced(mqtt, gateway, period, count)));
    }
    // PUBACK time of every point: (device, second) → instant.
    let mut acked: HashMap<(String, i64), Instant> = HashMap::new();
    for (gateway, task) in fleet.iter().zip(tasks) {
        for (first_second, at) in task.await?? {
            for s in 0..MEASUREMENTS {
                acked.insert((gateway.id.clone(), first_second + s), at);
            }
        }
    }
    let load_s = started.elapsed().as_secs_f64();
    let outbox_end = webhooks::outbox_len(&store).await?;
    let expected = acked.len() * DATATYPES as usize;
    let drain_deadline = Instant::now() + Duration::from_secs(60);
    while receiver.len() < expected && Instant::now() < drain_deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let outbox_drained = webhooks::outbox_len(&store).await?;
    let mut latencies = Vec::with_capacity(expected);
    let mut missing = 0usize;
    {
        let points = receiver
            .points
            .lock()
            .map_err(|_| anyhow::anyhow!("receiver lock poisoned"))?;
        for ((device, second), at) in &acked {
            for datatype in 1..=i64::from(DATATYPES) {
                match points.get(&(device.clone(), datatype, *second)) {
                    Some(received) => latencies.push(received.saturating_duration_since(*at)),
                    None => missing += 1,
                }
            }
        }
    }
    latencies.sort();
    let requests = receiver.requests.lock().map(|n| *n).unwrap_or(0);
    store.close().await;
    server.stop(false).await;
    println!(
        "bench webhook: {expected} acknowledged points in {load_s:.1} s ({:.0} points/s) to one measurements webhook, \
         {requests} requests (mean {:.0} points each), PUBACK → receiver 2xx p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; \
         outbox rows at start {outbox_start}, at end of load {outbox_end}, after draining {outbox_drained}; {missing} missing",
        expected as f64 / load_s,
        expected as f64 / requests.max(1) as f64,
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.99),
        latencies.last().map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0),
    );
    if missing > 0 {
        bail!("{missing} acknowledged points never reached the receiver");
    }
    Ok(())
}

/// Publishes `count` messages at a fixed `period` (QoS 1, one in flight at a time is never
/// waited for); returns each acknowledged message's first second and PUBACK instant.
async fn paced(
    mqtt: std::net::SocketAddr,
    gateway: GatewayCredentials,
    period: Duration,
    count: i64,
) -> Result<Vec<(i64, Instant)>> {
    let mut options = MqttOptions::new(gateway.serial.clone(), mqtt.ip().to_string(), mqtt.port());
    options.set_credentials(gateway.serial.clone(), gateway.token.clone());
    options.set_keep_alive(Duration::from_secs(30));
    options.set_inflight(64);
    options.set_max_packet_size(1 << 20, 1 << 20);
    let (client, mut events) = AsyncClient::new(options, 128);
    // Spread the gateways over the period so that their messages do not come in bursts.
    let offset = period.mul_f64(rand::rng().random_range(0.0..1.0));
    let feeder = tokio::spawn(async move {
        tokio::time::sleep(offset).await;
        let mut tick = tokio::time::interval(period);
        for i in 0..count {
            tick.tick().await;
            let message = Message {
                first_second: FIRST_SECOND + i * MEASUREMENTS,
                measurements: MEASUREMENTS,
                datatypes: DATATYPES,
            };
            if client
                .publish("v1/gateway/measurements", QoS::AtLeastOnce, false, message.payload())
                .await
                .is_err()
            {
                break;
            }
        }
        client
    });
    // Packet ids are handed out in publish order; the n-th outgoing publish is message n.
    let mut sent: HashMap<u16, i64> = HashMap::new();
    let mut next = 0i64;
    let mut acked = Vec::with_capacity(count as usize);
    let deadline = Instant::now() + period * (count as u32 + 2) + offset + Duration::from_secs(30);
    while (acked.len() as i64) < count && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(10), events.poll()).await {
            Ok(Ok(Event::Outgoing(rumqttc::Outgoing::Publish(pkid)))) => {
                sent.insert(pkid, FIRST_SECOND + next * MEASUREMENTS);
                next += 1;
            }
            Ok(Ok(Event::Incoming(Packet::PubAck(ack)))) => {
                if let Some(first) = sent.remove(&ack.pkid) {
                    acked.push((first, Instant::now()));
                }
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => bail!("gateway {}: {e}", gateway.serial),
            Err(_) => bail!("gateway {}: no progress in 10 s", gateway.serial),
        }
    }
    if let Ok(client) = feeder.await {
        let _ = client.try_disconnect();
    }
    Ok(acked)
}

/// `bench webhook-crash`: the receiver is down while the server is killed and restarted under
/// load `cycles` times; then it comes up and every acknowledged point must arrive.
pub async fn crash(cycles: usize, gateways: usize) -> Result<()> {
    let server = ServerUnderTest::start(None).await?;
    let http = reqwest::Client::new();
    let (_, admin) = server.administrator(&http).await?;
    let fleet = provision(&http, &server.base, &admin, "HOOKCRASH", gateways).await?;
    let group = group_of(&http, &server, &admin, &fleet[0]).await?;
    // A port with nothing listening: the receiver is down until the end.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    create_webhook(&http, &server, &admin, &group, &format!("http://127.0.0.1:{port}/hook")).await?;
    let started = Instant::now();
    let mut run = KillCycles::new(server, fleet.len(), 100, 2, 4);
    for cycle in 1..=cycles {
        run.cycle(cycle, &fleet).await?;
    }
    let (acked, data_dir) = (run.acked, run.data_dir);
    // The receiver comes up, then the server.
    let receiver = Receiver::serve(tokio::net::TcpListener::bind(("127.0.0.1", port)).await?);
    let running = ServerUnderTest::start_in(data_dir.clone(), None).await?;
    let expected: HashSet<PointKey> = fleet
        .iter()
        .zip(&acked)
        .flat_map(|(gateway, messages)| {
            messages.iter().flat_map(move |m| {
                (0..m.measurements).flat_map(move |s| {
                    (1..=i64::from(m.datatypes)).map(move |d| (gateway.id.clone(), d, m.first_second + s))
                })
            })
        })
        .collect();
    // The first batch may be waiting out a backoff grown while the receiver was down.
    let deadline = Instant::now() + Duration::from_secs(180);
    let missing = loop {
        let missing = {
            let points = receiver
                .points
                .lock()
                .map_err(|_| anyhow::anyhow!("receiver lock poisoned"))?;
            expected.iter().filter(|k| !points.contains_key(*k)).count()
        };
        if missing == 0 || Instant::now() > deadline {
            break missing;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let delivered = receiver.len();
    running.stop(false).await;
    println!(
        "bench webhook-crash: {cycles} SIGKILL cycles with the receiver down, {} acknowledged points, {delivered} distinct points delivered after it came up, {missing} missing, in {:.0} s",
        expected.len(),
        started.elapsed().as_secs_f64()
    );
    if missing > 0 || expected.is_empty() {
        bail!("acknowledged points did not reach the webhook");
    }
    Ok(())
}
