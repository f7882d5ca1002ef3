//! `bench read`: the read API on large data made directly in the store (through the store's
//! ingest path, so rollups and counts are what MQTT ingest would have made): a year of 1 Hz
//! points in one container, and a group of 100 containers holding 10 million points that also
//! form one data session. Latencies are over HTTP on loopback, authentication included.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use devicecloud_store::ingest::{self, Point, SeriesId};
use devicecloud_store::{Db, data_sessions, raw_data, unix_now};
use serde_json::{Value, json};

use super::server::{ServerUnderTest, json, rss_kib};

const DAY: i64 = 86_400;
/// Points per store transaction while loading.
const LOAD_BATCH: usize = 100_000;

/// Options of the read benchmark.
#[derive(Clone, Debug, clap::Args)]
pub struct ReadOptions {
    /// Days of 1 Hz points in one container.
    #[arg(long, default_value_t = 365)]
    pub days: i64,
    /// Points in the 100-container group, which are also one data session.
    #[arg(long, default_value_t = 10_000_000)]
    pub group_points: i64,
    /// Measured requests per query.
    #[arg(long, default_value_t = 200)]
    pub requests: usize,
    /// Database of the server under test (default: a fresh SQLite file); must be empty.
    #[arg(long)]
    pub database_url: Option<String>,
}

pub async fn read(o: ReadOptions) -> Result<()> {
    // Only the benchmark packs, when it means to: the server's packer would start on the
    // loaded points after its interval, in the middle of the measurements.
    let server =
        ServerUnderTest::start_with(o.database_url.clone(), &[("DEVICECLOUD_PACK_INTERVAL_S", "86400")]).await?;
    let http = reqwest::Client::new();
    let (_, admin) = server.administrator(&http).await?;
    let db = Db::connect(&server.store_url()).await?;
    let (year_group, year_gateway) = group_with_gateway(&http, &server.base, &admin, "READ-YEAR").await?;
    let (hundred_group, hundred_gateway) = group_with_gateway(&http, &server.base, &admin, "READ-HUNDRED").await?;

    let end = unix_now() - unix_now() % 60;
    let start = end - o.days * DAY;
    eprintln!("loading {} points of one container…", o.days * DAY);
    let loaded = Instant::now();
    let year_key = series_key(&db, &year_group, &year_gateway, 1).await?;
    let mut batch = Vec::with_capacity(LOAD_BATCH);
    for second in start..end {
        batch.push(point(year_key, second, None));
        if batch.len() == LOAD_BATCH {
            load(&db, &batch).await?;
            batch.clear();
        }
    }
    load(&db, &batch).await?;
    eprintln!("  {:.0} s", loaded.elapsed().as_secs_f64());

    eprintln!("loading {} points in 100 containers, one data session…", o.group_points);
    let loaded = Instant::now();
    let mut keys = Vec::new();
    for datatype in 0..100 {
        keys.push(series_key(&db, &hundred_group, &hundred_gateway, datatype).await?);
    }
    let instants = o.group_points / 100;
    let session_start = end - instants;
    let session = data_sessions::open(&db, &hundred_group, &hundred_gateway, session_start).await?;
    batch.clear();
    for second in session_start..end {
        for key in &keys {
            batch.push(point(*key, second, Some(session)));
        }
        if batch.len() >= LOAD_BATCH {
            load(&db, &batch).await?;
            batch.clear();
        }
    }
    load(&db, &batch).await?;
    data_sessions::close(&db, &hundred_gateway, end).await?;
    eprintln!("  {:.0} s", loaded.elapsed().as_secs_f64());

    let get = |path: String| http.get(format!("{}{path}", server.base)).bearer_auth(&admin);
    // Every measured request carries a parameter of its own, so that none is answered from the
    // page cache (a caller's page is remembered for two seconds).
    let fresh = |path: &str, i: usize| get(format!("{path}&_={i}"));
    let daily_path = format!("/api/v2/data-downsampled?filter[id_group]={year_group}");
    let daily: Value = json(get(daily_path.clone())).await?;
    let days = daily["items"].as_array().map_or(0, Vec::len);
    let (daily_p50, daily_p99) = latency(|i| fresh(&daily_path, i), o.requests).await?;
    let hourly_path = format!(
        "/api/v2/data-downsampled?filter[id_group]={year_group}&filter[timestamp_seconds][gte]={}&filter[timestamp_seconds][lt]={end}",
        end - 21 * DAY
    );
    let hourly: Value = json(get(hourly_path.clone())).await?;
    let hours = hourly["_meta"]["totalCount"].as_i64().unwrap_or(0);
    let (hourly_p50, hourly_p99) = latency(|i| fresh(&hourly_path, i), o.requests).await?;

    eprintln!("the same daily answer computed from the raw points…");
    let (group_by_ms, group_by_rows) = group_by_daily(&db, year_key).await?;
    let counted: i64 = daily["items"]
        .as_array()
        .map(|items| items.iter().filter_map(|b| b["count_val"].as_i64()).sum())
        .unwrap_or(0);
    if group_by_rows.len() != days || group_by_rows.iter().map(|r| r.1).sum::<i64>() != counted {
        bail!("the rollups and the raw points disagree");
    }

    // A whole UTC day of the year's series, the last one before `end`.
    let day_start = end - end.rem_euclid(DAY) - DAY;
    let raw_reads = RawReads {
        group: format!("/api/v2/data?filter[id_group]={hundred_group}"),
        day: format!(
            "/api/v2/data?filter[id_group]={year_group}&filter[timestamp_seconds][gte]={day_start}\
             &filter[timestamp_seconds][lt]={}&per-page=1000",
            day_start + DAY
        ),
    };
    let sessions: Value = json(get(format!("/api/v2/data-session?filter[id_group]={hundred_group}"))).await?;
    let id = sessions["items"][0]["id_data_session"]
        .as_str()
        .context("no session")?
        .to_string();
    let expected = sessions["items"][0]["datapoint_count"].as_u64().unwrap_or(0) as usize;
    let as_rows = raw_reads.measure(&get, &fresh, o.requests).await?;
    // Each download from a server just started, so that its memory growth is its own.
    let session_csv = format!("/api/v2/data-session/{id}/download-csv");
    let export = |format: &str| format!("/api/v2/data/export?filter[id_group]={hundred_group}&format={format}");
    let paths = [session_csv, export("csv"), export("parquet")];
    let warm_up = format!(
        "{}&filter[timestamp_seconds][lt]={}",
        export("csv"),
        session_start + instants / 100
    );
    eprintln!("downloading the session as CSV, exporting the 100 series as CSV and Parquet…");
    let (server, from_rows) = downloads(server, &http, &admin, &paths, expected, &warm_up).await?;
    // The server packs, as it does in service: started again with a horizon of zero and a pass
    // every second, until no point is left a row.
    eprintln!("packing every point into chunks (the server's packer)…");
    let packing = Instant::now();
    let server = server
        .restart_with(&[("DEVICECLOUD_PACK_AFTER_S", "0"), ("DEVICECLOUD_PACK_INTERVAL_S", "1")])
        .await?;
    let (rows_left, packed) = loop {
        let (rows, points, chunks) = packing_state(&db).await?;
        if rows == 0 || packing.elapsed() > Duration::from_secs(3600) {
            break (rows, (points, chunks));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let packing = packing.elapsed().as_secs_f64();
    if rows_left > 0 {
        bail!("points are still rows after an hour of packing");
    }
    let get = |path: String| http.get(format!("{}{path}", server.base)).bearer_auth(&admin);
    let fresh = |path: &str, i: usize| get(format!("{path}&_={i}"));
    let as_chunks = raw_reads.measure(&get, &fresh, o.requests).await?;
    if as_chunks.answers != as_rows.answers {
        bail!("the raw answers differ once packed");
    }
    eprintln!("the same downloads from chunks…");
    let (server, from_chunks) = downloads(server, &http, &admin, &paths, expected, &warm_up).await?;
    let (csv_rows, exports_rows) = (&from_rows[0], &from_rows[1..]);
    let (csv_chunks, exports_chunks) = (&from_chunks[0], &from_chunks[1..]);
    for (kind, exports) in [("rows", exports_rows), ("chunks", exports_chunks)] {
        if exports[0].lines != expected + 1 || !exports[1].ends_with_parquet_magic {
            bail!(
                "the export from {kind} is not whole: {} CSV lines for {expected} points",
                exports[0].lines
            );
        }
    }

    let backend = if o.database_url.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    println!(
        "bench read ({backend}): {} points in one container, {} points in 100 containers, {} requests per query",
        o.days * DAY,
        o.group_points,
        o.requests
    );
    println!("daily downsampled, {days} buckets, p50 / p99 ms:        {daily_p50:>8.2} / {daily_p99:.2}");
    println!(
        "same answer computed from the raw points, ms:      {group_by_ms:>8.1}   ({:.0}x the p50 above)",
        group_by_ms / daily_p50.max(0.001)
    );
    println!("3 weeks hourly, {hours} buckets, p50 / p99 ms:        {hourly_p50:>8.2} / {hourly_p99:.2}");
    println!(
        "packed by the server: {} points into {} chunks in {packing:.1} s ({:.0} points/s)",
        packed.0,
        packed.1,
        packed.0 as f64 / packing.max(1e-9)
    );
    println!("                                                   rows p50 / p99     chunks p50 / p99");
    println!(
        "raw data, first page of 500 of the 100 series, ms: {:>8.2} / {:<8.2} {:>8.2} / {:.2}",
        as_rows.group.0, as_rows.group.1, as_chunks.group.0, as_chunks.group.1
    );
    println!(
        "raw data, a day of one series, page of 1000, ms:   {:>8.2} / {:<8.2} {:>8.2} / {:.2}",
        as_rows.day.0, as_rows.day.1, as_chunks.day.0, as_chunks.day.1
    );
    for (name, csv) in [("rows", csv_rows), ("chunks", csv_chunks)] {
        println!(
            "CSV of the session from {name}: {} lines, {:.0} MB in {:.1} s; server RSS before {:.0} MiB, peak {:.0} MiB",
            csv.lines,
            csv.bytes as f64 / 1e6,
            csv.seconds,
            csv.rss_before_kib as f64 / 1024.0,
            csv.rss_peak_kib as f64 / 1024.0
        );
        let progress: Vec<String> = csv
            .rss_at_tenths
            .iter()
            .enumerate()
            .map(|(i, kib)| format!("{}%: {:.0}", (i + 1) * 10, *kib as f64 / 1024.0))
            .collect();
        println!("server RSS MiB as the download progressed: {}", progress.join(", "));
    }
    println!(
        "export of the 100 series ({} points), points/s and server RSS growth at its peak:",
        o.group_points
    );
    for (kind, exports) in [("rows", exports_rows), ("chunks", exports_chunks)] {
        for (format, e) in ["CSV", "Parquet"].iter().zip(exports.iter()) {
            println!(
                "  {format:<7} from {kind:<6}: {:>10.0} points/s, {:>5.0} MB in {:>6.1} s, RSS growth {:>4.0} MiB",
                o.group_points as f64 / e.seconds.max(1e-9),
                e.bytes as f64 / 1e6,
                e.seconds,
                e.rss_peak_kib.saturating_sub(e.rss_before_kib) as f64 / 1024.0
            );
        }
    }
    db.close().await;
    server.stop(false).await;
    Ok(())
}

/// The raw-data requests measured on rows and again on chunks.
struct RawReads {
    /// The first page of the 100-series group.
    group: String,
    /// A day of one series, a page of 1,000.
    day: String,
}

/// Their latencies (p50, p99 in ms) and their answers, compared across the two.
struct RawLatencies {
    group: (f64, f64),
    day: (f64, f64),
    answers: Vec<Value>,
}

impl RawReads {
    async fn measure(
        &self,
        get: &impl Fn(String) -> reqwest::RequestBuilder,
        fresh: &impl Fn(&str, usize) -> reqwest::RequestBuilder,
        requests: usize,
    ) -> Result<RawLatencies> {
        // The items and the page facts: the links name the server's address, which a restart
        // changes.
        let mut answers = Vec::new();
        for path in [&self.group, &self.day] {
            let answer = json(get(path.clone())).await?;
            answers.push(json!([answer["items"], answer["_meta"]]));
        }
        Ok(RawLatencies {
            group: latency(|i| fresh(&self.group, i), requests).await?,
            day: latency(|i| fresh(&self.day, i), requests).await?,
            answers,
        })
    }
}

pub(super) fn point(container_key: i64, seconds: i64, session_key: Option<i64>) -> Point {
    // A slow daily wave with a little structure, so min, max and avg differ per bucket.
    let value = 20.0 + 5.0 * ((seconds % DAY) as f64 / DAY as f64 * std::f64::consts::TAU).sin() + (seconds % 7) as f64;
    Point {
        container_key,
        seconds,
        microseconds: 0,
        value,
        session_key,
    }
}

pub(super) async fn series_key(db: &Db, id_group: &str, source_device: &str, datatype: i64) -> Result<i64> {
    let series = SeriesId {
        id_group: id_group.to_string(),
        source_device: source_device.to_string(),
        datatype,
    };
    ingest::container_key(db, &series, usize::MAX)
        .await?
        .context("a series without a limit is always made")
}

/// A new group with one GO gateway in it, through the API.
async fn group_with_gateway(http: &reqwest::Client, base: &str, admin: &str, serial: &str) -> Result<(String, String)> {
    let group: Value = json(
        http.post(format!("{base}/api/v2/group"))
            .bearer_auth(admin)
            .json(&json!({"label": serial})),
    )
    .await?;
    let id_group = group["id_group"].as_str().context("no id_group")?.to_string();
    let device: Value = json(
        http.post(format!("{base}/api/v2/physical-device"))
            .bearer_auth(admin)
            .json(&json!({"id_group": id_group, "serial_hardware": serial, "kind": "GO"})),
    )
    .await?;
    let id = device["id_physical_device"].as_str().context("no id")?.to_string();
    Ok((id_group, id))
}

/// p50 and p99 in ms of `requests` sequential requests made by `request` (given the request's
/// number), after 20 unmeasured ones (connection set-up, caches).
pub(super) async fn latency(request: impl Fn(usize) -> reqwest::RequestBuilder, requests: usize) -> Result<(f64, f64)> {
    let mut times = Vec::with_capacity(requests);
    for i in 0..requests + 20 {
        let started = Instant::now();
        let response = request(i).send().await?;
        if !response.status().is_success() {
            bail!("{}: {}", response.url().clone(), response.status());
        }
        response.bytes().await?;
        if i >= 20 {
            times.push(started.elapsed());
        }
    }
    times.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Ok((
        ms(times[times.len() / 2]),
        ms(times[(times.len() * 99 / 100).min(times.len() - 1)]),
    ))
}

/// The daily answer computed from the raw rows; median of three runs in ms, and the rows.
async fn group_by_daily(db: &Db, container_key: i64) -> Result<(f64, Vec<(i64, i64)>)> {
    let mut times = Vec::new();
    let mut rows = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        rows = raw_data::daily_from_raw(db, container_key).await?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    Ok((times[1], rows.iter().map(|r| (r.0, r.1)).collect()))
}

struct Download {
    lines: usize,
    bytes: usize,
    seconds: f64,
    rss_before_kib: u64,
    rss_peak_kib: u64,
    /// The server's RSS after each tenth of the expected lines.
    rss_at_tenths: Vec<u64>,
    /// Whether the bytes end as a Parquet file does.
    ends_with_parquet_magic: bool,
}

/// Downloads each of `paths` from the server started afresh (its packer idle), so that each
/// download's memory is measured from a process that has done nothing else.
async fn downloads(
    mut server: ServerUnderTest,
    http: &reqwest::Client,
    token: &str,
    paths: &[String],
    expected_lines: usize,
    warm_up: &str,
) -> Result<(ServerUnderTest, Vec<Download>)> {
    let mut out = Vec::new();
    for path in paths {
        let idle = [
            ("DEVICECLOUD_PACK_AFTER_S", "315360000"),
            ("DEVICECLOUD_PACK_INTERVAL_S", "86400"),
        ];
        server = server.restart_with(&idle).await?;
        // A warm-up (an export of the first hundredth of the points), so that what is measured
        // is what the download holds, not the store connections' page caches filling up on a
        // process's first large read.
        download(http, &server, token, warm_up, expected_lines / 100).await?;
        out.push(download(http, &server, token, path, expected_lines).await?);
    }
    Ok((server, out))
}

/// Streams `path` (a session's CSV, an export), sampling the server's resident memory every
/// 50 ms; `expected_lines` (of CSV) places the samples at tenths of the download.
async fn download(
    http: &reqwest::Client,
    server: &ServerUnderTest,
    token: &str,
    path: &str,
    expected_lines: usize,
) -> Result<Download> {
    let pid = server.pid().context("no server pid")?;
    let rss_before_kib = rss_kib(pid).unwrap_or(0);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        tokio::spawn(async move {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(rss_kib(pid).unwrap_or(0));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            peak
        })
    };
    let started = Instant::now();
    let mut response = http
        .get(format!("{}{path}", server.base))
        .bearer_auth(token)
        .send()
        .await?
        .error_for_status()?;
    let (mut lines, mut bytes) = (0usize, 0usize);
    let mut rss_at_tenths = Vec::new();
    let mut tail: Vec<u8> = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        bytes += chunk.len();
        tail.extend_from_slice(&chunk[chunk.len().saturating_sub(4)..]);
        tail.drain(..tail.len().saturating_sub(4));
        lines += chunk.iter().filter(|b| **b == b'\n').count();
        while rss_at_tenths.len() < 10 && lines * 10 >= expected_lines * (rss_at_tenths.len() + 1) {
            rss_at_tenths.push(rss_kib(pid).unwrap_or(0));
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let rss_peak_kib = sampler.await?;
    Ok(Download {
        ends_with_parquet_magic: tail == b"PAR1",
        lines,
        bytes,
        seconds,
        rss_before_kib,
        rss_peak_kib,
        rss_at_tenths,
    })
}

/// Whether any point is still a row (1 or 0), the points in chunks and the chunks of the store.
async fn packing_state(db: &Db) -> Result<(i64, i64, i64)> {
    let sql = "SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM raw_points LIMIT 1) AS r), \
               (SELECT CAST(COALESCE(SUM(points), 0) AS BIGINT) FROM point_chunks), \
               (SELECT COUNT(*) FROM point_chunks)";
    Ok(match db {
        Db::Sqlite(pool, ..) => sqlx::query_as(sql).fetch_one(pool).await?,
        Db::Postgres(pool) => sqlx::query_as(sql).fetch_one(pool).await?,
    })
}

/// Writes points straight into the store the server runs on. This process and the server
/// take SQLite's write lock in turn without sharing the server's queue, so a write that
/// finds the lock held past the busy timeout (the server checkpointing the log the loading
/// grows) is tried again, a few times.
async fn load(db: &Db, points: &[Point]) -> Result<()> {
    let mut tries = 0;
    loop {
        match ingest::write(db, points, &[]).await {
            Ok(_) => return Ok(()),
            Err(e) if tries < 5 => {
                tries += 1;
                eprintln!("  a load write failed ({e}); again");
            }
            Err(e) => return Err(e.into()),
        }
    }
}
