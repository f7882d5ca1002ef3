//! `bench retention` (docs/benchmarks.md, "Retention"): what removing expired points costs the
//! service while gateways publish at full rate.
//!
//! A group is filled with `points` raw points 30 days and more in the past (written straight
//! into the store, as years of ingest would have), then 50 gateways of another group publish
//! 500-point QoS 1 messages while an API client changes a group every 50 ms. First a warm-up
//! window (not counted: ingest into series with no points yet is faster, as `bench mixed`
//! measured), then a control window with nothing to remove, then the same window right after
//! the filled group's retention is set to one day, while the server's retention task removes
//! its points. Reported: acked points/s and the API write p50/p99 of each window, the ratio of
//! the last two, the rows removed during the window and how long the whole removal took.
//!
//! With `--database-url postgres://…` it measures instead what dropping one day's partition of
//! `points` raw points costs: the time of the retention pass that drops it.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use devicecloud_store::ingest::{self, Point, SeriesId};
use devicecloud_store::retention::Retention;
use devicecloud_store::{Db, partitions, retention, unix_now};
use serde_json::json;

use super::server::{GatewayCredentials, ServerUnderTest, metric, percentile, provision_group};
use super::under_load::{batch_points_env, full_rate, steady};

/// Series of the filled group: the points are spread over them, one a second each.
const SERIES: i64 = 100;
const DAY: i64 = 86_400;

/// Options of the retention benchmark.
#[derive(Clone, Debug, clap::Args)]
pub struct RetentionOptions {
    /// Expired raw points to remove.
    #[arg(long, default_value_t = 100_000_000)]
    pub points: i64,
    /// Publishing gateways (500-point QoS 1 messages, 16 in flight each).
    #[arg(long, default_value_t = 50)]
    pub gateways: usize,
    /// Seconds of each window (control, then removal).
    #[arg(long, default_value_t = 30)]
    pub seconds: u64,
    /// An empty PostgreSQL database: measure dropping a partition instead.
    #[arg(long)]
    pub database_url: Option<String>,
    /// The server's `ingest_batch_points` (most points in one ingest transaction) [default:
    /// the server's own].
    #[arg(long)]
    pub batch_points: Option<usize>,
}

pub async fn retention(o: RetentionOptions) -> Result<()> {
    match o.database_url {
        Some(url) if url.starts_with("postgres") => drop_partition(o.points, &url).await,
        Some(url) => bail!("--database-url {url}: the SQLite run makes its own store"),
        None => sqlite(o.points, o.gateways, o.seconds, o.batch_points).await,
    }
}

/// One window of load: acked points/s and the sorted API write latencies.
struct Window {
    points_per_s: f64,
    writes: Vec<Duration>,
}

async fn sqlite(points: i64, gateways: usize, seconds: u64, batch_points: Option<usize>) -> Result<()> {
    let batch = batch_points_env(batch_points);
    let mut env = vec![("DEVICECLOUD_RETENTION_INTERVAL_S", "1")];
    env.extend(batch.iter().map(|(k, v)| (*k, v.as_str())));
    let server = ServerUnderTest::start_with(None, &env).await?;
    let http = reqwest::Client::new();
    let (_, admin) = server.administrator(&http).await?;
    let (live, fleet) = provision_group(&http, &server.base, &admin, "LIVE", gateways).await?;
    let (archive, owner) = provision_group(&http, &server.base, &admin, "ARCHIVE", 1).await?;

    eprintln!("filling {points} points into the store…");
    let filled = Instant::now();
    let db = Db::connect(&server.store_url()).await?;
    fill(&db, &archive, &owner[0].id, points).await?;
    db.close().await;
    let file = |name: &str| std::fs::metadata(server.data_dir.join(name)).map_or(0, |m| m.len());
    let bytes = file("devicecloud.db") + file("devicecloud.db-wal");
    eprintln!(
        "filled in {:.0} s: {:.1} bytes a raw point on disk (its rollups at 1 Hz included)",
        filled.elapsed().as_secs_f64(),
        bytes as f64 / points as f64
    );

    eprintln!("warm-up: {seconds} s of load, not counted…");
    let warm_up = window(&server, &admin, &live, &fleet, seconds, 0).await?;
    eprintln!("control: {seconds} s of load with nothing to remove…");
    let control = window(&server, &admin, &live, &fleet, seconds, 1).await?;
    let removed_before = removed(&http, &server.base).await?;
    let since = Instant::now();
    http.put(format!("{}/api/v2/group/{archive}/retention", server.base))
        .bearer_auth(&admin)
        .json(&json!({"raw_days": 1, "minute_days": 1, "hour_days": 1, "day_days": 1}))
        .send()
        .await?
        .error_for_status()?;
    eprintln!("pruning: {seconds} s of the same load while the task removes them…");
    let pruning = window(&server, &admin, &live, &fleet, seconds, 2).await?;
    // The counter moves when a pass ends: still short of every point means the removal ran
    // through the whole window.
    let throughout = removed(&http, &server.base).await? - removed_before < points;
    // Then until every point is gone, without load.
    let deadline = Instant::now() + Duration::from_secs(3_600);
    while removed(&http, &server.base).await? - removed_before < points {
        if Instant::now() > deadline {
            bail!("the points were not removed within an hour");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let total = since.elapsed().as_secs_f64();
    server.stop(false).await;

    println!(
        "retention on SQLite: {points} raw points removed while {gateways} gateways publish 500-point QoS 1 messages (16 in flight) and an API client changes a group every 50 ms"
    );
    println!("| window | acked points/s | API write p50 | API write p99 | API writes |");
    println!("|---|---|---|---|---|");
    for (name, w) in [
        ("warm-up (not counted)", &warm_up),
        ("control", &control),
        ("pruning", &pruning),
    ] {
        println!(
            "| {name} | {:.0} | {:.1} ms | {:.1} ms | {} |",
            w.points_per_s,
            percentile(&w.writes, 0.5),
            percentile(&w.writes, 0.99),
            w.writes.len()
        );
    }
    println!(
        "removal running through the whole pruning window: {}",
        if throughout {
            "yes"
        } else {
            "no (the window ended after it; the figures mix both)"
        }
    );
    println!(
        "throughput while pruning / control: {:.2}; all {points} points removed {total:.0} s after the retention was set ({:.0} rows/s)",
        pruning.points_per_s / control.points_per_s,
        points as f64 / total
    );
    Ok(())
}

/// `points` raw points of the group's gateway, one a second per series, ending 30 days ago.
async fn fill(db: &Db, id_group: &str, device: &str, points: i64) -> Result<()> {
    let per_series = (points + SERIES - 1) / SERIES;
    let end = unix_now() - 30 * DAY;
    let mut keys = Vec::new();
    for datatype in 1..=SERIES {
        let series = SeriesId {
            id_group: id_group.to_string(),
            source_device: device.to_string(),
            datatype,
        };
        keys.push(
            ingest::container_key(db, &series, usize::MAX)
                .await?
                .context("series refused")?,
        );
    }
    let mut written = 0;
    for (i, key) in keys.iter().enumerate() {
        let count = per_series.min(points - written);
        let first = end - count;
        for start in (0..count).step_by(100_000) {
            let batch: Vec<Point> = (start..(start + 100_000).min(count))
                .map(|s| Point {
                    container_key: *key,
                    seconds: first + s,
                    microseconds: 0,
                    value: (s % 100) as f64,
                    session_key: None,
                })
                .collect();
            ingest::write(db, &batch, &[]).await?;
        }
        written += count;
        if i % 10 == 9 {
            eprintln!("  {written} points");
        }
    }
    Ok(())
}

/// Raw rows removed by retention so far, from `/metrics`.
async fn removed(http: &reqwest::Client, base: &str) -> Result<i64> {
    Ok(metric(http, base, "devicecloud_retention_rows_removed_total{kind=\"raw\"}").await? as i64)
}

/// `seconds` of load: every gateway publishes as fast as it is acknowledged, the API client
/// changes the live group's label every 50 ms. `round` keeps the windows' timestamps apart.
async fn window(
    server: &ServerUnderTest,
    admin: &str,
    live: &str,
    fleet: &[GatewayCredentials],
    seconds: u64,
    round: i64,
) -> Result<Window> {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let ingest = full_rate(server, fleet, round, deadline);
    let (http, url, admin) = (
        // A client of its own: its connections are made on the clients' runtime
        // (`under_load::steady`).
        reqwest::Client::new(),
        format!("{}/api/v2/group/{live}", server.base),
        admin.to_string(),
    );
    let writer = steady(Duration::from_millis(50), deadline, move |n| {
        http.patch(&url)
            .bearer_auth(&admin)
            .json(&json!({"label": format!("live {n}")}))
    });
    Ok(Window {
        points_per_s: ingest.await??,
        writes: writer.await?.latencies,
    })
}

/// PostgreSQL: one day's partition holding `points` raw points, dropped by a retention pass.
async fn drop_partition(points: i64, url: &str) -> Result<()> {
    let db = Db::connect(url).await?;
    let Db::Postgres(pool) = &db else {
        unreachable!("a postgres URL")
    };
    let now = unix_now();
    let day = (now - 40 * DAY).div_euclid(DAY) * DAY;
    partitions::prepare(pool, day, 0).await?;
    let suffix = devicecloud_store::new_id();
    sqlx::query("INSERT INTO groups (id_group, label, created_at) VALUES ($1, 'bench retention', 0)")
        .bind(&suffix)
        .execute(pool)
        .await?;
    sqlx::query(
        "INSERT INTO physical_devices (id_physical_device, serial_hardware, id_group, id_device_type, created_at) \
         VALUES ($1, $1, $1, 'CORE', 0)",
    )
    .bind(&suffix)
    .execute(pool)
    .await?;
    let series = SeriesId {
        id_group: suffix.clone(),
        source_device: suffix.clone(),
        datatype: 1,
    };
    let key = ingest::container_key(&db, &series, usize::MAX)
        .await?
        .context("series refused")?;
    eprintln!("filling one day's partition with {points} points…");
    let filled = Instant::now();
    // Many points a second (microseconds apart) so that one day holds them all.
    let per_second = ((points + DAY - 1) / DAY).max(1);
    for start in (0..points).step_by(5_000_000) {
        let count = (points - start).min(5_000_000);
        sqlx::query(
            "INSERT INTO raw_points (container_key, time_us, value) \
             SELECT $1, ($2 + n / $3) * 1000000 + n % $3, 1.0 FROM generate_series($4::bigint, $5::bigint) AS n",
        )
        .bind(key)
        .bind(day)
        .bind(per_second)
        .bind(start)
        .bind(start + count - 1)
        .execute(pool)
        .await?;
    }
    let stored: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM raw_points WHERE container_key = {key}"
    )))
    .fetch_one(pool)
    .await?;
    let bytes = partitions::raw_points_bytes(pool).await?;
    eprintln!("filled in {:.0} s", filled.elapsed().as_secs_f64());
    // A partition that expires has long been vacuumed: autovacuum takes a day's partition within
    // its day. Left to run now, it would hold the partition when the pass detaches it, and the
    // detach would wait the second (`deadlock_timeout`) PostgreSQL gives before cancelling it.
    eprintln!("vacuuming the partition, as autovacuum does within its day…");
    sqlx::query("VACUUM raw_points").execute(pool).await?;
    let own = Retention {
        raw_days: Some(1),
        ..Retention::default()
    };
    retention::set(&db, &suffix, &own, now).await?;
    // Only this group's rows are in that day: nothing else keeps the partition.
    let started = Instant::now();
    let pruned = retention::prune(&db, &own, now, Duration::from_millis(50)).await?;
    let took = started.elapsed();
    println!(
        "retention on PostgreSQL: a pass dropping a day's partition of {stored} raw points ({:.1} bytes a point, table and key) took {:.0} ms, of which {:.1} ms with the table locked ({} partitions dropped, {} rows deleted one by one)",
        bytes as f64 / stored.max(1) as f64,
        took.as_secs_f64() * 1000.0,
        pruned.locked.as_secs_f64() * 1000.0,
        pruned.partitions,
        pruned.rows[0]
    );
    db.close().await;
    Ok(())
}
