//! `bench crash`: gateways publish QoS 1 batches while the server is killed with SIGKILL at
//! random moments and restarted, again and again; at the end every acknowledged point must be
//! in the store, and every series counted once in its rollups.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use devicecloud_store::ingest::{self, SeriesId};
use devicecloud_store::{Db, devices};
use rand::Rng;

use super::publisher::{Message, publish};
use super::server::{GatewayCredentials, ServerUnderTest, provision};

const DATATYPES: u32 = 5;
/// Measurements (seconds) per message.
pub const MEASUREMENTS: i64 = 10;
/// The second of the first message of each gateway.
const FIRST_SECOND: i64 = 1_763_000_000;

/// A fleet publishing QoS 1 messages through kill-and-restart cycles of one server: per
/// gateway, the next second to use, the messages acknowledged, and those to resend.
pub struct KillCycles {
    server: Option<ServerUnderTest>,
    pub data_dir: std::path::PathBuf,
    next: Vec<i64>,
    pub acked: Vec<Vec<Message>>,
    resend: Vec<Vec<Message>>,
    per_cycle: usize,
    datatypes: u32,
    inflight: u16,
}

impl KillCycles {
    /// Cycles on `server` (the first one) for `gateways` gateways, each sending `per_cycle` new
    /// messages of `datatypes` values per measurement a cycle with `inflight` unacknowledged.
    pub fn new(
        server: ServerUnderTest,
        gateways: usize,
        per_cycle: usize,
        datatypes: u32,
        inflight: u16,
    ) -> KillCycles {
        KillCycles {
            data_dir: server.data_dir.clone(),
            server: Some(server),
            next: vec![FIRST_SECOND; gateways],
            acked: vec![Vec::new(); gateways],
            resend: vec![Vec::new(); gateways],
            per_cycle,
            datatypes,
            inflight,
        }
    }

    /// One cycle: (re)start the server on the same store, let each gateway resend what it never
    /// saw acknowledged and then send new messages, and kill the server (SIGKILL) after a
    /// random 0.2–1.5 s.
    pub async fn cycle(&mut self, cycle: usize, fleet: &[GatewayCredentials]) -> Result<()> {
        let running = match self.server.take() {
            Some(s) => s,
            None => ServerUnderTest::start_in(self.data_dir.clone(), None).await?,
        };
        let mut tasks = Vec::new();
        for (i, gateway) in fleet.iter().enumerate() {
            let mut messages = std::mem::take(&mut self.resend[i]);
            for _ in 0..self.per_cycle {
                messages.push(Message {
                    first_second: self.next[i],
                    measurements: MEASUREMENTS,
                    datatypes: self.datatypes,
                });
                self.next[i] += MEASUREMENTS;
            }
            let (gateway, mqtt, inflight) = (gateway.clone(), running.mqtt, self.inflight);
            tasks.push(tokio::spawn(async move {
                let sent = messages.clone();
                let deadline = Instant::now() + Duration::from_secs(10);
                let outcome = publish(mqtt, &gateway, messages, inflight, deadline).await;
                (sent, outcome)
            }));
        }
        let kill_after = Duration::from_millis(rand::rng().random_range(200..1500));
        tokio::time::sleep(kill_after).await;
        running.kill().await;
        let mut acked_now = 0;
        for (i, task) in tasks.into_iter().enumerate() {
            let (sent, outcome) = task.await?;
            let outcome = outcome?;
            acked_now += outcome.acked.len();
            let done: HashSet<i64> = outcome.acked.iter().map(|m| m.first_second).collect();
            self.resend[i] = sent.into_iter().filter(|m| !done.contains(&m.first_second)).collect();
            self.acked[i].extend(outcome.acked);
        }
        eprintln!(
            "cycle {cycle}: killed after {} ms, {acked_now} messages acknowledged",
            kill_after.as_millis()
        );
        Ok(())
    }
}

pub async fn crash(cycles: usize, gateways: usize) -> Result<()> {
    let server = ServerUnderTest::start(None).await?;
    let data_dir = server.data_dir.clone();
    let http = reqwest::Client::new();
    let (_, admin) = server.administrator(&http).await?;
    let fleet = provision(&http, &server.base, &admin, "CRASH", gateways).await?;
    let started = Instant::now();
    let mut run = KillCycles::new(server, fleet.len(), 200, DATATYPES, 8);
    for cycle in 1..=cycles {
        run.cycle(cycle, &fleet).await?;
    }
    let acked = run.acked;

    let Verified {
        points,
        missing,
        miscounted,
    } = verify_stopped(&data_dir, None, &fleet, &acked, DATATYPES).await?;
    println!(
        "bench crash: {cycles} SIGKILL cycles in {:.0} s, {gateways} gateways, {points} acknowledged points, {missing} missing, {miscounted} series miscounted in rollups",
        started.elapsed().as_secs_f64()
    );
    if missing > 0 || miscounted > 0 || points == 0 {
        bail!("acknowledged data was lost or miscounted");
    }
    Ok(())
}

/// What [`verify`] found.
pub struct Verified {
    /// Acknowledged points.
    pub points: usize,
    /// Acknowledged points not in the store.
    pub missing: usize,
    /// Series whose rollups do not count each stored point once.
    pub miscounted: usize,
}

/// Opens the store of a stopped server (its SQLite file in `data_dir`, or `database_url`),
/// runs [`verify`] on it, and removes the data dir.
pub async fn verify_stopped(
    data_dir: &std::path::Path,
    database_url: Option<&str>,
    fleet: &[GatewayCredentials],
    acked: &[Vec<Message>],
    datatypes: u32,
) -> Result<Verified> {
    let url = database_url.map_or_else(
        || format!("sqlite://{}", data_dir.join("devicecloud.db").display()),
        str::to_string,
    );
    let db = Db::connect(&url).await?;
    let verified = verify(&db, fleet, acked, datatypes).await;
    db.close().await;
    let _ = std::fs::remove_dir_all(data_dir);
    verified
}

/// Checks on the store (the server stopped) that every point `acked` says was acknowledged to
/// gateway `i` of `fleet` is stored, and that the rollups count each stored point once. One
/// series is read at a time, so memory stays bounded by the largest series.
pub async fn verify(db: &Db, fleet: &[GatewayCredentials], acked: &[Vec<Message>], datatypes: u32) -> Result<Verified> {
    let (mut points, mut missing, mut miscounted) = (0usize, 0usize, 0usize);
    for (i, gateway) in fleet.iter().enumerate() {
        let device = devices::get(db, &gateway.id).await?.context("gateway vanished")?;
        for datatype in 1..=i64::from(datatypes) {
            let series = SeriesId {
                id_group: device.id_group.clone(),
                source_device: gateway.id.clone(),
                datatype,
            };
            let key = ingest::container_key(db, &series, usize::MAX)
                .await?
                .context("a series without a limit is always made")?;
            let stored: HashSet<(i64, i64)> = ingest::series_points(db, key).await?.into_iter().collect();
            for message in &acked[i] {
                for s in 0..message.measurements {
                    points += 1;
                    if !stored.contains(&(message.first_second + s, 0)) {
                        missing += 1;
                    }
                }
            }
            let (minute, hour, day) = ingest::rollup_counts(db, key).await?;
            let raw = stored.len() as i64;
            if (minute, hour, day) != (raw, raw, raw) {
                miscounted += 1;
                eprintln!("series {key}: {raw} raw points, rollups count {minute}/{hour}/{day}");
            }
        }
    }
    Ok(Verified {
        points,
        missing,
        miscounted,
    })
}
