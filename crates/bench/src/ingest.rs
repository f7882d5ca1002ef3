//! `bench ingest`: many gateways publish QoS 1 measurement batches over MQTT on loopback;
//! durable points per second and PUBACK latency end to end, and in the same run the store's own
//! rate for the same rows written without the network (the ratio is the endpoint's overhead).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use devicecloud_store::devices::{self, NewGateway};
use devicecloud_store::groups::{self, NewGroup};
use devicecloud_store::ingest::{self, Point, SeriesId};
use devicecloud_store::{Db, chunks, partitions, unix_now};

use devicecloud_engine::settings::INGEST_BATCH_POINTS as BATCH;

use super::publisher::{Message, publish};
use super::server::{ServerUnderTest, provision};

/// Options of the ingest benchmark.
#[derive(Clone, Debug, clap::Args)]
pub struct IngestOptions {
    #[arg(long, default_value_t = 1000)]
    pub gateways: usize,
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Measurements (timestamps) per message.
    #[arg(long, default_value_t = 10)]
    pub measurements: i64,
    /// Values per measurement.
    #[arg(long, default_value_t = 10)]
    pub datatypes: u32,
    /// Unacknowledged messages each gateway keeps in flight.
    #[arg(long, default_value_t = 4)]
    pub inflight: u16,
    /// Database of the server under test (default: a fresh SQLite file); must be empty.
    #[arg(long)]
    pub database_url: Option<String>,
}

pub async fn ingest(o: IngestOptions) -> Result<()> {
    let server = ServerUnderTest::start(o.database_url.clone()).await?;
    let http = reqwest::Client::new();
    let (_, admin) = server.administrator(&http).await?;
    eprintln!("provisioning {} gateways…", o.gateways);
    let fleet = provision(&http, &server.base, &admin, "ING", o.gateways).await?;
    let per_message = o.measurements as usize * o.datatypes as usize;

    let store_url = server.store_url();
    let size_before = store_bytes(&store_url).await?;
    eprintln!("publishing for {} s…", o.seconds);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(o.seconds);
    let mut tasks = Vec::new();
    for gateway in fleet {
        let mqtt = server.mqtt;
        let (measurements, datatypes, inflight) = (o.measurements, o.datatypes, o.inflight);
        tasks.push(tokio::spawn(async move {
            // More messages than can go out in time; the deadline ends the run.
            let messages = (0..2_000)
                .map(|i| Message {
                    first_second: 1_763_000_000 + i * measurements,
                    measurements,
                    datatypes,
                })
                .collect();
            publish(mqtt, &gateway, messages, inflight, deadline).await
        }));
    }
    let mut latencies = Vec::new();
    let mut acked = 0usize;
    let mut failed = 0usize;
    for task in tasks {
        let outcome = task.await??;
        acked += outcome.acked.len();
        failed += usize::from(outcome.failed);
        latencies.extend(outcome.latencies);
    }
    let elapsed = started.elapsed().as_secs_f64().max(o.seconds as f64);
    // Stopped first, so that SQLite's log is checkpointed into the file that is measured.
    let data_dir = server.data_dir.clone();
    server.stop(true).await;
    let growth = store_bytes(&store_url).await? - size_before;
    let stored = stored_points(&store_url).await?;
    let point_bytes = match &o.database_url {
        Some(url) => Some(postgres_point_bytes(url, stored).await?),
        None => None,
    };
    eprintln!("packing every point into chunks…");
    let packing = pack_everything(&store_url).await?;
    let packed_growth = store_bytes(&store_url).await? - size_before;
    let _ = std::fs::remove_dir_all(&data_dir);
    latencies.sort_unstable();
    let pct = |p: f64| latencies.get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)));
    let ms = |d: Option<&Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    let end_to_end = (acked * per_message) as f64 / elapsed;

    eprintln!("store alone for {} s…", o.seconds);
    let store_rate = store_only(&o).await?;
    let backend = if o.database_url.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    println!(
        "bench ingest ({backend}): {} gateways, QoS 1 messages of {per_message} points, {} in flight per gateway, {} s",
        o.gateways, o.inflight, o.seconds
    );
    println!("durable points/s end to end (PUBACK received):   {end_to_end:>12.0}");
    println!(
        "PUBACK latency p50 / p99 ms:                     {:>12.2} / {:.2}",
        ms(pct(0.50)),
        ms(pct(0.99))
    );
    match store_rate {
        Some(store_rate) => {
            println!("store alone, same rows, points/s:                {store_rate:>12.0}");
            println!(
                "end to end / store alone:                        {:>12.2}",
                end_to_end / store_rate.max(1.0)
            );
        }
        None => println!("store alone: measured on SQLite only (run without --database-url)"),
    }
    println!(
        "store growth a stored point (points, keys, rollups, series): {:>5.1}",
        growth as f64 / stored.max(1) as f64
    );
    if let Some(bytes) = point_bytes {
        println!("bytes a stored raw point takes (table and key):  {bytes:>12.1}");
    }
    println!(
        "packing after the run: {} points into {} chunks, points/s: {:>12.0}",
        packing.packed.points,
        packing.packed.chunks,
        packing.packed.points as f64 / packing.took.as_secs_f64().max(1e-9)
    );
    println!(
        "store growth a stored point, packed and vacuumed:            {:>5.2}",
        packed_growth as f64 / stored.max(1) as f64
    );
    if failed > 0 {
        println!("gateways whose connection failed: {failed}");
    }
    Ok(())
}

/// The bytes the whole store at `url` takes: the SQLite file with its log, or the PostgreSQL
/// database (tables, indexes, and what they hold of free pages).
async fn store_bytes(url: &str) -> Result<i64> {
    if let Some(path) = url.strip_prefix("sqlite://") {
        let size = |suffix: &str| std::fs::metadata(format!("{path}{suffix}")).map_or(0, |m| m.len() as i64);
        return Ok(size("") + size("-wal"));
    }
    let pool = sqlx::PgPool::connect(url).await?;
    let bytes: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
        .fetch_one(&pool)
        .await?;
    pool.close().await;
    Ok(bytes)
}

/// What packing a whole store did, and how long it took.
struct Packing {
    packed: chunks::Packed,
    took: Duration,
}

/// Packs every point of the stopped server's store into chunks, as the packing task does once
/// the points are older than its horizon, then gives the freed pages back (`VACUUM`; `VACUUM
/// FULL` on PostgreSQL, whose plain `VACUUM` keeps them for the next rows), so that the size
/// measured is what the points take packed.
async fn pack_everything(url: &str) -> Result<Packing> {
    let db = Db::connect(url).await?;
    let started = Instant::now();
    let packed = chunks::pack_closed(&db, unix_now() + 1, usize::MAX).await?;
    let took = started.elapsed();
    db.close().await;
    if url.starts_with("sqlite://") {
        let pool = sqlx::SqlitePool::connect(url).await?;
        sqlx::query("VACUUM").execute(&pool).await?;
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&pool).await?;
        pool.close().await;
    } else {
        let pool = sqlx::PgPool::connect(url).await?;
        sqlx::query("VACUUM FULL").execute(&pool).await?;
        pool.close().await;
    }
    Ok(Packing { packed, took })
}

/// How many raw points the store at `url` holds, as rows or in chunks.
async fn stored_points(url: &str) -> Result<i64> {
    let query = "SELECT (SELECT COUNT(*) FROM raw_points) + (SELECT CAST(COALESCE(SUM(points), 0) AS BIGINT) FROM point_chunks)";
    if url.starts_with("sqlite://") {
        let pool = sqlx::SqlitePool::connect(url).await?;
        let points: i64 = sqlx::query_scalar(query).fetch_one(&pool).await?;
        pool.close().await;
        return Ok(points);
    }
    let pool = sqlx::PgPool::connect(url).await?;
    let points: i64 = sqlx::query_scalar(query).fetch_one(&pool).await?;
    pool.close().await;
    Ok(points)
}

/// The bytes a raw point takes in the PostgreSQL store at `url`: its partitions' tables and
/// indexes over the `points` they hold.
async fn postgres_point_bytes(url: &str, points: i64) -> Result<f64> {
    let pool = sqlx::PgPool::connect(url).await?;
    let bytes = partitions::raw_points_bytes(&pool).await?;
    pool.close().await;
    Ok(bytes as f64 / points.max(1) as f64)
}

/// Writes the same shape of rows straight through the store's ingest path (transactions as
/// large as the writer's largest) into a fresh SQLite store; returns points/s, `None` when the
/// run is on PostgreSQL (which would need an empty database of its own).
async fn store_only(o: &IngestOptions) -> Result<Option<f64>> {
    if o.database_url.is_some() {
        return Ok(None);
    }
    let dir = std::env::temp_dir().join(format!("devicecloud-bench-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let db = Db::connect(&format!("sqlite://{}", dir.join("store.db").display())).await?;
    let group = groups::create(
        &db,
        &NewGroup {
            label: "bench",
            r#type: "0",
            subtype: "",
            id_country: None,
        },
        0,
    )
    .await?;
    let mut keys = Vec::new();
    for g in 0..o.gateways {
        let serial = format!("STORE-{g:05}");
        let new = NewGateway {
            id_group: &group.id_group,
            serial_hardware: &serial,
            kind: "CORE",
            label: "",
            expected_offline_interval: 60,
        };
        let device = devices::provision(&db, &new, "x", unix_now()).await?;
        for datatype in 1..=i64::from(o.datatypes) {
            let series = SeriesId {
                id_group: group.id_group.clone(),
                source_device: device.id_physical_device.clone(),
                datatype,
            };
            keys.push((
                ingest::container_key(&db, &series, usize::MAX)
                    .await?
                    .context("a series without a limit is always made")?,
                device.id_physical_device.clone(),
            ));
        }
    }
    let started = Instant::now();
    let deadline = started + Duration::from_secs(o.seconds);
    let mut written = 0usize;
    let mut second = 1_763_000_000i64;
    while Instant::now() < deadline {
        let mut points = Vec::with_capacity(BATCH);
        let mut touched = Vec::new();
        while points.len() < BATCH {
            for (key, device) in keys.iter().take(BATCH / o.measurements as usize) {
                for m in 0..o.measurements {
                    points.push(Point {
                        container_key: *key,
                        seconds: second + m,
                        microseconds: 0,
                        value: m as f64,
                        session_key: None,
                    });
                }
                touched.push((device.clone(), second));
            }
            second += o.measurements;
        }
        written += ingest::write(&db, &points, &touched)
            .await
            .context("store write")?
            .inserted;
    }
    let rate = written as f64 / started.elapsed().as_secs_f64();
    db.close().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Some(rate))
}
