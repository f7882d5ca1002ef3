//! `bench alarms`: alarm rules on the commit path (docs/benchmarks.md, "Alarms").
//!
//! 1. Gateways publish QoS 1 batches at full rate, with no active rule and under 1,000 rules (20
//!    per gateway: two for each of its 10 datatypes, so that every point is evaluated twice) in
//!    turn, twice: durable points/s with and without rules, and the rule evaluations a second.
//! 2. Meanwhile a probe gateway of its own group sends single points that raise and clear an
//!    alarm in turn: from the PUBACK of a raising point to its `alarm` record on the live stream.
//! 3. The server idle, then the same with `--silent-devices` devices (seeded in the store) under
//!    an inactivity rule whose deadline is far: the CPU the timer costs when nothing expires.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use devicecloud_store::{Db, unix_now};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use super::publisher::{Message, publish};
use super::server::{GatewayCredentials, ServerUnderTest, cpu_seconds, json as json_of, metric, provision_group};
use crate::throughput::percentile_ms;

/// Options of the alarms benchmark.
#[derive(Clone, Debug, clap::Args)]
pub struct AlarmsOptions {
    /// Publishing gateways (100-point QoS 1 messages), spread over `groups`.
    #[arg(long, default_value_t = 50)]
    pub gateways: usize,
    #[arg(long, default_value_t = 10)]
    pub groups: usize,
    /// Rules per gateway: two per datatype of its messages.
    #[arg(long, default_value_t = 20)]
    pub rules_per_gateway: usize,
    /// Seconds of publishing per round (one without rules, one with).
    #[arg(long, default_value_t = 15)]
    pub seconds: u64,
    /// Unacknowledged messages each gateway keeps in flight.
    #[arg(long, default_value_t = 4)]
    pub inflight: u16,
    /// Measurements per message, each of 10 datatypes (50: 500-point messages, as `bench ingest`).
    #[arg(long, default_value_t = 50)]
    pub measurements: i64,
    /// Devices under the inactivity rule of the timer's measure.
    #[arg(long, default_value_t = 100_000)]
    pub silent_devices: usize,
    /// Seconds the server's CPU is measured idle, with and without the silent devices.
    #[arg(long, default_value_t = 20)]
    pub idle_seconds: u64,
    /// Database of the server under test (default: a fresh SQLite file); must be empty.
    #[arg(long)]
    pub database_url: Option<String>,
}

/// Datatypes of each measurement.
const DATATYPES: u32 = 10;

pub async fn alarms(o: AlarmsOptions) -> Result<()> {
    let server = ServerUnderTest::start(o.database_url.clone()).await?;
    let http = reqwest::Client::new();
    let (_, admin) = server.administrator(&http).await?;
    let groups = o.groups.max(1);
    eprintln!("provisioning {} gateways in {groups} groups…", o.gateways);
    let mut fleet: Vec<(String, GatewayCredentials)> = Vec::new();
    for g in 0..groups {
        let count = o.gateways / groups + usize::from(g < o.gateways % groups);
        let (id_group, gateways) = provision_group(&http, &server.base, &admin, &format!("ALR{g}"), count).await?;
        fleet.extend(gateways.into_iter().map(|gw| (id_group.clone(), gw)));
    }
    let (probe_group, mut probe) = provision_group(&http, &server.base, &admin, "PROBE", 1).await?;
    let probe = probe.pop().context("no probe gateway")?;

    eprintln!("creating {} rules, inactive…", o.gateways * o.rules_per_gateway);
    let created = Instant::now();
    let mut rules = Vec::new();
    for (id_group, gateway) in &fleet {
        for r in 0..o.rules_per_gateway {
            // Two rules per datatype: a threshold and a rate, neither of which the bench's
            // values meet, so that every point is evaluated and no alarm is written.
            let datatype = (r / 2) % DATATYPES as usize + 1;
            let condition = if r % 2 == 0 {
                "value < 0.0"
            } else {
                "rate != null && rate > 1000.0"
            };
            let id = create_rule(
                &http,
                &server.base,
                &admin,
                json!({"id_group": id_group, "label": format!("r{r}"), "severity": "minor",
                    "condition": condition, "datatype": datatype, "source_device": gateway.id, "is_active": false}),
            )
            .await?;
            rules.push(id);
        }
    }
    let rules_took = created.elapsed();

    // Rounds without and under the rules in turn, twice, so that the machine's other load weighs
    // on both alike: the rules are switched on and off through the API in between.
    let (mut without, mut with) = (Vec::new(), Vec::new());
    let mut evaluated = 0.0;
    for pair in 0..2 {
        eprintln!("publishing for {} s with no active rule…", o.seconds);
        without.push(publish_round(&server, &fleet, &o, 2 * pair).await?);
        set_active(&http, &server.base, &admin, &rules, true).await?;
        let before = metric(&http, &server.base, "devicecloud_alarm_points_total").await?;
        eprintln!("publishing for {} s under {} rules…", o.seconds, rules.len());
        with.push(publish_round(&server, &fleet, &o, 2 * pair + 1).await?);
        evaluated += metric(&http, &server.base, "devicecloud_alarm_points_total").await? - before;
        if pair == 0 {
            set_active(&http, &server.base, &admin, &rules, false).await?;
        }
    }
    let rules = rules.len();
    create_rule(
        &http,
        &server.base,
        &admin,
        json!({"id_group": probe_group, "label": "probe", "severity": "critical", "condition": "value > 100.0", "datatype": 1}),
    )
    .await?;

    // The latency apart: a live stream client makes the service render every committed point
    // for its buffer (docs/benchmarks.md, "Live stream"), which is the stream's cost, not the
    // rules'.
    eprintln!(
        "publishing for {} s under {rules} rules, with the probe and its stream…",
        o.seconds
    );
    let stream = http
        .get(format!(
            "{}/api/v2/stream?filter%5Bid_group%5D={probe_group}&types=alarms",
            server.base
        ))
        .bearer_auth(&admin)
        .send()
        .await?
        .error_for_status()
        .context("stream refused")?;
    let arrivals: Arc<Mutex<HashMap<i64, Instant>>> = Arc::default();
    let reader = tokio::spawn(read_alarms(stream, Arc::clone(&arrivals)));
    let deadline = Instant::now() + Duration::from_secs(o.seconds);
    let probing = tokio::spawn(run_probe(server.mqtt, probe, deadline));
    let probed = publish_round(&server, &fleet, &o, 4).await?;
    let raised_at = probing.await??;
    tokio::time::sleep(Duration::from_secs(2)).await;
    reader.abort();

    let mut latencies: Vec<u32> = Vec::new();
    let arrivals = arrivals.lock().await;
    for (value, acked) in &raised_at {
        if let Some(at) = arrivals.get(value) {
            let micros = at.saturating_duration_since(*acked).as_micros();
            latencies.push(u32::try_from(micros).unwrap_or(u32::MAX));
        }
    }
    latencies.sort_unstable();

    eprintln!("the server idle for {} s…", o.idle_seconds);
    let idle = idle_cpu(&server, o.idle_seconds).await?;
    eprintln!("seeding {} silent devices and their inactivity rule…", o.silent_devices);
    let silent_group = seed_silent(&http, &server, &admin, o.silent_devices).await?;
    create_rule(
        &http,
        &server.base,
        &admin,
        json!({"id_group": silent_group, "label": "silent", "severity": "major", "inactivity_s": 3600}),
    )
    .await?;
    let watched = metric(&http, &server.base, "devicecloud_alarm_watches").await?;
    eprintln!("the server idle for {} s with {watched} watches…", o.idle_seconds);
    let watching = idle_cpu(&server, o.idle_seconds).await?;
    server.stop(false).await;

    let backend = if o.database_url.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "bench alarms ({backend}, {cores} cores): {} gateways in {groups} groups, QoS 1 messages of {} points, {} in flight per gateway, {} s per round",
        o.gateways,
        o.measurements * i64::from(DATATYPES),
        o.inflight,
        o.seconds
    );
    let mean = |rounds: &[Round]| rounds.iter().map(|r| r.points_per_s).sum::<f64>() / rounds.len().max(1) as f64;
    let acked: f64 = with.iter().map(|r| r.points).sum();
    let rates = |rounds: &[Round]| {
        rounds
            .iter()
            .map(|r| format!("{:.0}", r.points_per_s))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "durable points/s without rules (rounds 1, 3):   {:>12.0}  ({})",
        mean(&without),
        rates(&without)
    );
    println!(
        "durable points/s under {rules:>5} rules (2, 4):   {:>12.0}  ({}; {:.2} of without; rules created in {:.1} s)",
        mean(&with),
        rates(&with),
        mean(&with) / mean(&without).max(1.0),
        rules_took.as_secs_f64()
    );
    let per_point = 2.0;
    println!(
        "rule evaluations/s:                          {:>12.0}  ({per_point} per point; points evaluated / acknowledged: {evaluated:.0} / {acked:.0})",
        mean(&with) * per_point,
    );
    println!(
        "PUBACK → alarm on the stream p50 / p99 / max ms: {:.2} / {:.2} / {:.2}  ({} raises, {} seen; meanwhile {:.0} durable points/s)",
        percentile_ms(&latencies, 0.50),
        percentile_ms(&latencies, 0.99),
        percentile_ms(&latencies, 1.0),
        raised_at.len(),
        latencies.len(),
        probed.points_per_s
    );
    println!(
        "server CPU idle: {:.2} % of a core; with {watched:.0} devices watched for silence: {:.2} % (timer: {:+.2} %)",
        idle * 100.0,
        watching * 100.0,
        (watching - idle) * 100.0
    );
    Ok(())
}

/// What one publishing round gave.
struct Round {
    points_per_s: f64,
    points: f64,
}

async fn publish_round(
    server: &ServerUnderTest,
    fleet: &[(String, GatewayCredentials)],
    o: &AlarmsOptions,
    round: i64,
) -> Result<Round> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(o.seconds);
    let mut tasks = Vec::new();
    let measurements = o.measurements.max(1);
    for (_, gateway) in fleet {
        let (mqtt, inflight, gateway) = (server.mqtt, o.inflight, gateway.clone());
        tasks.push(tokio::spawn(async move {
            let messages = (0..4_000)
                .map(|i| Message {
                    first_second: 1_763_000_000 + round * 5_000_000 + i * measurements,
                    measurements,
                    datatypes: DATATYPES,
                })
                .collect();
            publish(mqtt, &gateway, messages, inflight, deadline).await
        }));
    }
    let mut acked = 0usize;
    for task in tasks {
        let outcome = task.await??;
        if outcome.failed {
            bail!("a publisher's connection failed");
        }
        acked += outcome.acked.len();
    }
    let elapsed = started.elapsed().as_secs_f64().max(o.seconds as f64);
    let points = (acked as f64) * (measurements as f64) * f64::from(DATATYPES);
    Ok(Round {
        points_per_s: points / elapsed,
        points,
    })
}

/// Creates a rule; its id.
async fn create_rule(http: &reqwest::Client, base: &str, admin: &str, body: Value) -> Result<String> {
    let rule = json_of(
        http.post(format!("{base}/api/v2/alarm-rule"))
            .bearer_auth(admin)
            .json(&body),
    )
    .await?;
    Ok(rule["id_alarm_rule"].as_str().context("no id_alarm_rule")?.to_string())
}

/// Switches the rules `ids` on or off.
async fn set_active(http: &reqwest::Client, base: &str, admin: &str, ids: &[String], on: bool) -> Result<()> {
    for id in ids {
        json_of(
            http.patch(format!("{base}/api/v2/alarm-rule/{id}"))
                .bearer_auth(admin)
                .json(&json!({"is_active": on})),
        )
        .await?;
    }
    Ok(())
}

/// The probe: a point every 20 ms, raising (value 1000 + n, unique) and clearing (0) its alarm
/// in turn; the PUBACK time of each raising point, by its value.
async fn run_probe(
    mqtt: std::net::SocketAddr,
    probe: GatewayCredentials,
    deadline: Instant,
) -> Result<Vec<(i64, Instant)>> {
    use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
    let mut options = MqttOptions::new(probe.serial.clone(), mqtt.ip().to_string(), mqtt.port());
    options.set_credentials(probe.serial.clone(), probe.token.clone());
    options.set_keep_alive(Duration::from_secs(30));
    let (client, mut events) = AsyncClient::new(options, 8);
    let mut raised = Vec::new();
    let mut n: i64 = 0;
    while Instant::now() < deadline {
        let raising = n % 2 == 0;
        let value = if raising { 1_000 + n } else { 0 };
        // The time of sending, to the microsecond: never ahead of the service's clock (a point
        // in the future is refused).
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let payload = json!([{"ts": now, "values": {"1": value}}]).to_string();
        client
            .publish("v1/gateway/measurements", QoS::AtLeastOnce, false, payload)
            .await?;
        loop {
            match tokio::time::timeout(Duration::from_secs(10), events.poll()).await {
                Ok(Ok(Event::Incoming(Packet::PubAck(_)))) => break,
                Ok(Ok(_)) => {}
                Ok(Err(e)) => bail!("the probe's connection failed: {e}"),
                Err(_) => bail!("no PUBACK for the probe within 10 s"),
            }
        }
        if raising {
            raised.push((value, Instant::now()));
        }
        n += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(raised)
}

/// Reads `alarm` records: when each raised alarm (by its value) arrived.
async fn read_alarms(mut response: reqwest::Response, arrivals: Arc<Mutex<HashMap<i64, Instant>>>) {
    let mut buffer = String::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let now = Instant::now();
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) else {
                continue;
            };
            let Ok(alarm) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            if alarm["status"] == "active"
                && alarm["count"] == 1
                && let Some(value) = alarm["value"].as_f64()
            {
                arrivals.lock().await.entry(value as i64).or_insert(now);
            }
        }
    }
}

/// The server's CPU over `seconds` of idleness, as a share of one core.
async fn idle_cpu(server: &ServerUnderTest, seconds: u64) -> Result<f64> {
    let pid = server.pid().context("no server pid")?;
    let before = cpu_seconds(pid)?;
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    Ok((cpu_seconds(pid)? - before) / seconds as f64)
}

/// A new group holding `count` devices that last sent data now, written in the store directly
/// (provisioning them through the API would take longer than the measure).
async fn seed_silent(http: &reqwest::Client, server: &ServerUnderTest, admin: &str, count: usize) -> Result<String> {
    let group: Value = json_of(
        http.post(format!("{}/api/v2/group", server.base))
            .bearer_auth(admin)
            .json(&json!({"label": "silent fleet"})),
    )
    .await?;
    let id_group = group["id_group"].as_str().context("no id_group")?.to_string();
    let db = Db::connect(&server.store_url()).await?;
    let now = unix_now();
    let sql = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1) \
               INSERT INTO physical_devices (id_physical_device, serial_hardware, id_group, id_device_type, created_at, last_data_at) \
               SELECT $2 || '-' || i, 'SILENT-' || $2 || '-' || i, $2, 'CORE', $3, $3 FROM n";
    let count = i64::try_from(count)?;
    match &db {
        Db::Sqlite(pool, ..) => {
            sqlx::query(sql)
                .bind(count)
                .bind(&id_group)
                .bind(now)
                .execute(pool)
                .await?;
        }
        Db::Postgres(pool) => {
            let sql = sql.replace("SELECT $2 || '-' || i", "SELECT $2::text || '-' || i");
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(count)
                .bind(&id_group)
                .bind(now)
                .execute(pool)
                .await?;
        }
    }
    db.close().await;
    Ok(id_group)
}
