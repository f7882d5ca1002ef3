//! Packing raw points into compressed chunks (`devicecloud_store::chunks`) changes nothing a client
//! can see. Points go in over real MQTT, answers come back over real HTTP, and the same requests
//! are asked before and after `pack_closed`: every page of `data` in both directions, its filters
//! (value, time, microseconds, series, `or`/`not`), sorts, page sizes and HEAD counts,
//! `data-downsampled` at day, hour, minute and raw resolution, a data session's buckets, its CSV
//! and its dashboard charts, and the dashboard's chart series. They must be the same to the byte:
//! every microsecond and every bit of every value, the order, the pages and the counts.
//!
//! Packing also keeps ingest's promises: a message sent again after its points were packed is
//! acknowledged and stored once, a late point (older than its series' newest chunk) shows at its
//! place at once and is merged into its chunk by the next pass, and retention removes packed
//! points past a group's horizon while newer ones stay.
//!
//! Each reading round is made by a new viewer of the group: the service remembers a page for two
//! seconds per caller (administrators share one view), and a packing pass is not a write through
//! the service that would forget it. The background packer is slowed to once a day so that only
//! the test decides when points are packed.

mod common;

use std::collections::BTreeMap;
use std::fmt::Display;
use std::time::Duration;

use common::browser::Browser;
use common::gateway_client::TestGateway;
use common::{TestApp, send};
use devicecloud_server::Settings;
use devicecloud_store::chart_series::{self, ChartPoint, Columns};
use devicecloud_store::chunks::{MAX_POINTS, Packed, pack_closed};
use devicecloud_store::downsampled::Resolution;
use devicecloud_store::{Db, unix_now};
use reqwest::Method;
use serde_json::{Map, Value, json};

/// 2025-11-21 00:00:00 UTC: a UTC midnight a year back.
const T0: i64 = 1_763_683_200;
const DAY: i64 = 86_400;
const MICROS: i64 = 1_000_000;
/// Points per measurements message: well under the 256 KiB packet limit.
const MESSAGE_POINTS: usize = 2_000;
const PASSWORD: &str = "chunks-password";

/// Doubles a gateway may send (magnitude at most 1e300), chosen for their last bits: sums that
/// are not what they look like, thirds, the extremes, subnormals, both zeros, 2^52 + 1.
const EXACT: [f64; 20] = [
    0.1 + 0.2,
    1.0 / 3.0,
    -2.0 / 3.0,
    1e300,
    -1e300,
    1e-300,
    -1e-300,
    5e-324,
    -5e-324,
    2.225_073_858_507_201_4e-308,
    f64::EPSILON,
    6.022_140_76e23,
    -1.602_176_634e-19,
    123_456.789_012_345_67,
    -0.0,
    0.0,
    4_503_599_627_370_497.0,
    -9.999_999_999_999_999e299,
    1e-70,
    1e100,
];

// ---------------------------------------------------------------------------------------------
// Points as a gateway sends them.

/// One measurement: the asset it is of (`None`: the gateway itself), its datatype, its time in
/// microseconds and its value.
#[derive(Clone, Copy, Debug)]
struct Point {
    device: Option<&'static str>,
    datatype: u32,
    us: i64,
    value: f64,
}

impl Point {
    fn gateway(datatype: u32, us: i64, value: f64) -> Point {
        Point {
            device: None,
            datatype,
            us,
            value,
        }
    }

    fn asset(device: &'static str, datatype: u32, us: i64, value: f64) -> Point {
        Point {
            device: Some(device),
            ..Point::gateway(datatype, us, value)
        }
    }

    /// The protocol's item: `ts` in seconds with the microseconds as a fraction (the nearest
    /// double; the service rounds it to the microsecond it came from).
    fn item(&self) -> Value {
        let mut values = Map::new();
        values.insert(self.datatype.to_string(), json!(self.value));
        let mut item = json!({"ts": self.us as f64 / 1e6, "values": values});
        if let Some(device) = self.device {
            item["device"] = json!(device);
        }
        item
    }

    fn seconds(&self) -> i64 {
        self.us.div_euclid(MICROS)
    }

    /// What identifies the point in an answer: datatype, time and the value's bits (both zeros
    /// alike: SQLite keeps a REAL -0.0 as 0.0, as it always did).
    fn key(&self) -> PointKey {
        (
            i64::from(self.datatype),
            self.seconds(),
            self.us.rem_euclid(MICROS),
            zero_alike_bits(self.value),
        )
    }
}

type PointKey = (i64, i64, i64, u64);

/// A series as the test names it: the asset's serial (`None`: the gateway) and the datatype.
type Series = (Option<&'static str>, i64);

fn zero_alike_bits(value: f64) -> u64 {
    if value == 0.0 { 0 } else { value.to_bits() }
}

/// The key of a `data` item.
fn item_key(item: &Value) -> PointKey {
    (
        item["datatype"].as_i64().unwrap(),
        item["timestamp_seconds"].as_i64().unwrap(),
        item["microseconds"].as_i64().unwrap(),
        zero_alike_bits(item["value"].as_f64().unwrap()),
    )
}

fn message(points: &[Point]) -> Value {
    Value::Array(points.iter().map(Point::item).collect())
}

/// Publishes `points` in messages of [`MESSAGE_POINTS`], each acknowledged after its commit.
async fn publish(gw: &mut TestGateway, points: &[Point]) {
    for part in points.chunks(MESSAGE_POINTS) {
        gw.measurements(&message(part)).await;
    }
}

/// How many series (device, datatype) `points` are of.
fn series_count<'a>(points: impl Iterator<Item = &'a Point>) -> usize {
    let mut series: Vec<(Option<&str>, u32)> = points.map(|p| (p.device, p.datatype)).collect();
    series.sort_unstable();
    series.dedup();
    series.len()
}

/// The first whole second after every point: packing with it packs them all.
fn after_all(points: &[Point]) -> i64 {
    points.iter().map(Point::seconds).max().unwrap() + 1
}

// ---------------------------------------------------------------------------------------------
// Answers as a client sees them, and their comparison.

/// A request of a reading round.
enum Ask {
    Get(String),
    Head(String),
    /// Every page of a collection, one answer each.
    Pages(String),
}

/// The headers a client reads from an answer.
const HEADERS: [&str; 7] = [
    "content-type",
    "content-disposition",
    "x-pagination-total-count",
    "x-pagination-page-count",
    "x-pagination-current-page",
    "x-pagination-per-page",
    "link",
];

/// One answer: what was asked, the status, the headers a client reads and the body as sent.
#[derive(Debug)]
struct Answer {
    request: String,
    status: u16,
    headers: Vec<String>,
    body: String,
}

async fn ask(app: &TestApp, token: &str, method: Method, path: &str) -> Answer {
    let reply = send(app.request(method.clone(), path, token)).await;
    Answer {
        request: format!("{method} {path}"),
        status: reply.status,
        headers: HEADERS
            .iter()
            .filter_map(|name| reply.header(name).map(|value| format!("{name}: {value}")))
            .collect(),
        body: reply.text,
    }
}

fn with_page(path: &str, page: u64) -> String {
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}page={page}")
}

/// The answers to `asks`, as one caller.
async fn capture(app: &TestApp, token: &str, asks: &[Ask]) -> Vec<Answer> {
    let mut out = Vec::new();
    for a in asks {
        match a {
            Ask::Get(path) => out.push(ask(app, token, Method::GET, path).await),
            Ask::Head(path) => out.push(ask(app, token, Method::HEAD, path).await),
            Ask::Pages(path) => {
                let first = ask(app, token, Method::GET, &with_page(path, 1)).await;
                let pages = serde_json::from_str::<Value>(&first.body)
                    .ok()
                    .and_then(|body| body["_meta"]["pageCount"].as_u64())
                    .unwrap_or(1);
                out.push(first);
                for page in 2..=pages {
                    out.push(ask(app, token, Method::GET, &with_page(path, page)).await);
                }
            }
        }
    }
    out
}

/// A new viewer of `group`: a caller the service remembers no page for.
async fn reader(app: &TestApp, admin: &str, group: &str) -> String {
    let (id, token) = app.user().await;
    app.grant(admin, group, &id, "viewer").await;
    token
}

/// The answers to `asks` as a new viewer of `group`.
async fn read_all(app: &TestApp, admin: &str, group: &str, asks: &[Ask]) -> Vec<Answer> {
    let token = reader(app, admin, group).await;
    capture(app, &token, asks).await
}

/// Panics unless every answer is a success (a baseline worth comparing with).
fn assert_all_ok(answers: &[Answer]) {
    for a in answers {
        assert!(
            (200..300).contains(&a.status),
            "{}: status {}: {}",
            a.request,
            a.status,
            short(&a.body)
        );
    }
}

/// Panics unless `after` answers exactly as `before`, listing the first differences.
fn assert_same(stage: &str, before: &[Answer], after: &[Answer]) {
    let mut differences = Vec::new();
    if before.len() != after.len() {
        differences.push(format!("{} answers before, {} after", before.len(), after.len()));
    }
    for (b, a) in before.iter().zip(after) {
        if let Some(d) = difference(b, a) {
            differences.push(d);
        }
    }
    assert!(
        differences.is_empty(),
        "{stage}: {} of {} answers differ:\n{}",
        differences.len(),
        before.len(),
        differences.iter().take(8).cloned().collect::<Vec<_>>().join("\n")
    );
}

fn difference(before: &Answer, after: &Answer) -> Option<String> {
    let request = &before.request;
    if before.request != after.request {
        return Some(format!(
            "asked {request} before but {} after (the page count changed)",
            after.request
        ));
    }
    if before.status != after.status {
        return Some(format!(
            "{request}: status {} → {}: {}",
            before.status,
            after.status,
            short(&after.body)
        ));
    }
    if before.headers != after.headers {
        let changed = |x: &[String], y: &[String]| x.iter().filter(|h| !y.contains(h)).cloned().collect::<Vec<_>>();
        return Some(format!(
            "{request}: headers {:?} → {:?}",
            changed(&before.headers, &after.headers),
            changed(&after.headers, &before.headers)
        ));
    }
    if before.body == after.body {
        return None;
    }
    let why = match (
        serde_json::from_str::<Value>(&before.body),
        serde_json::from_str::<Value>(&after.body),
    ) {
        (Ok(b), Ok(a)) => json_difference("", &b, &a).unwrap_or_else(|| "same JSON, other text".into()),
        _ => line_difference(&before.body, &after.body),
    };
    Some(format!("{request}: {why}"))
}

/// The first place where two JSON values differ: keys in order, numbers to the bit.
fn json_difference(at: &str, before: &Value, after: &Value) -> Option<String> {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            if !b.keys().eq(a.keys()) {
                let keys = |m: &Map<String, Value>| m.keys().cloned().collect::<Vec<_>>();
                return Some(format!("{at}: keys {:?} → {:?}", keys(b), keys(a)));
            }
            b.iter()
                .find_map(|(k, v)| json_difference(&format!("{at}/{k}"), v, &a[k]))
        }
        (Value::Array(b), Value::Array(a)) => {
            if b.len() != a.len() {
                return Some(format!("{at}: {} entries → {}", b.len(), a.len()));
            }
            b.iter().zip(a).enumerate().find_map(|(i, (x, y))| {
                json_difference(&format!("{at}/{i}"), x, y)
                    .map(|d| format!("{d}\n    was {}\n    now {}", short(x), short(y)))
            })
        }
        (Value::Number(b), Value::Number(a)) => {
            let same = match (b.is_f64(), a.is_f64()) {
                (true, true) => b.as_f64().map(f64::to_bits) == a.as_f64().map(f64::to_bits),
                _ => b == a,
            };
            (!same).then(|| format!("{at}: {b} → {a}"))
        }
        _ => (before != after).then(|| format!("{at}: {} → {}", short(before), short(after))),
    }
}

fn line_difference(before: &str, after: &str) -> String {
    let (b, a): (Vec<&str>, Vec<&str>) = (before.lines().collect(), after.lines().collect());
    match b.iter().zip(&a).position(|(x, y)| x != y) {
        Some(i) => format!("line {}: {:?} → {:?}", i + 1, b[i], a[i]),
        None => format!("{} lines → {}", b.len(), a.len()),
    }
}

fn short(text: &impl Display) -> String {
    let text = text.to_string();
    match text.char_indices().nth(300) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

/// The `items` of a JSON answer.
fn items(answer: &Answer) -> Vec<Value> {
    let body: Value = serde_json::from_str(&answer.body).unwrap_or_else(|e| panic!("{}: {e}", answer.request));
    body["items"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("{}: no items: {}", answer.request, short(&body)))
}

/// The items of every page of `path`, as `token`.
async fn every_item(app: &TestApp, token: &str, path: &str) -> Vec<Value> {
    let answers = capture(app, token, &[Ask::Pages(path.to_string())]).await;
    assert_all_ok(&answers);
    answers.iter().flat_map(items).collect()
}

async fn get_json(app: &TestApp, token: &str, path: &str) -> Value {
    let reply = send(app.get(path, token)).await;
    assert_eq!(reply.status, 200, "{path}: {}", reply.text);
    reply.json()
}

/// The id of the device of `serial` (a gateway or an asset it announced).
async fn device_id(app: &TestApp, token: &str, serial: &str) -> String {
    let found = get_json(
        app,
        token,
        &format!("/api/v2/physical-device?filter[serial_hardware]={serial}"),
    )
    .await;
    found["items"][0]["id_physical_device"]
        .as_str()
        .unwrap_or_else(|| panic!("no device {serial}: {found}"))
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// The store, read directly.

/// A service whose background packer waits a day between passes: the test packs.
async fn spawn_app(settings: Settings) -> TestApp {
    TestApp::spawn_with(Settings {
        pack_interval: Duration::from_secs(DAY as u64),
        ..settings
    })
    .await
}

/// Packs the rows older than the whole second `before` of up to `max_series` series.
async fn pack(app: &TestApp, before: i64, max_series: usize) -> Packed {
    pack_closed(&app.state.db, before, max_series)
        .await
        .unwrap_or_else(|e| panic!("pack_closed(before {before}): {e}"))
}

/// A number read from the store; `args` bind `$1`, `$2`, … as text.
async fn scalar(db: &Db, sql: &str, args: &[&str]) -> i64 {
    let query = sqlx::AssertSqlSafe(sql.to_string());
    let result = match db {
        Db::Sqlite(pool, ..) => {
            let mut q = sqlx::query_scalar::<_, i64>(query);
            for arg in args {
                q = q.bind(*arg);
            }
            q.fetch_one(pool).await
        }
        Db::Postgres(pool) => {
            let mut q = sqlx::query_scalar::<_, i64>(query);
            for arg in args {
                q = q.bind(*arg);
            }
            q.fetch_one(pool).await
        }
    };
    result.unwrap_or_else(|e| panic!("{sql}: {e}"))
}

async fn raw_rows(app: &TestApp) -> i64 {
    scalar(&app.state.db, "SELECT COUNT(*) FROM raw_points", &[]).await
}

/// Chunks and the points they hold, per series (source device, datatype).
async fn chunks_per_series(app: &TestApp) -> BTreeMap<(String, i64), (i64, i64)> {
    let sql = "SELECT c.source_device, CAST(c.datatype AS BIGINT), COUNT(*), CAST(SUM(p.points) AS BIGINT) \
               FROM point_chunks p JOIN containers c ON c.container_key = p.container_key \
               GROUP BY c.source_device, c.datatype";
    let rows: Vec<(String, i64, i64, i64)> = match &app.state.db {
        Db::Sqlite(pool, ..) => sqlx::query_as(sql).fetch_all(pool).await,
        Db::Postgres(pool) => sqlx::query_as(sql).fetch_all(pool).await,
    }
    .unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.into_iter()
        .map(|(device, datatype, chunks, points)| ((device, datatype), (chunks, points)))
        .collect()
}

/// Panics unless every chunk keeps the rules: 1 to 10,000 points of one UTC day, and no two
/// chunks of a series overlap.
async fn assert_chunks_well_formed(app: &TestApp) {
    let db = &app.state.db;
    let bad = scalar(
        db,
        &format!(
            "SELECT COUNT(*) FROM point_chunks WHERE points < 1 OR points > {MAX_POINTS} OR first_us > last_us \
             OR first_us / {day_us} <> last_us / {day_us}",
            day_us = DAY * MICROS
        ),
        &[],
    )
    .await;
    assert_eq!(bad, 0, "chunks with too many points, or spanning two UTC days");
    let overlapping = scalar(
        db,
        "SELECT COUNT(*) FROM point_chunks a JOIN point_chunks b ON a.container_key = b.container_key \
         AND a.first_us < b.first_us AND b.first_us <= a.last_us",
        &[],
    )
    .await;
    assert_eq!(overlapping, 0, "overlapping chunks of one series");
}

/// What the dashboard draws of `device` between `from` and `to` from raw points.
async fn chart(app: &TestApp, group: &str, device: &str, from: i64, to: i64) -> Vec<ChartPoint> {
    let columns = Columns { from, to, count: 600 };
    chart_series::device_points(&app.state.db, group, device, columns, Resolution::Raw)
        .await
        .unwrap_or_else(|e| panic!("chart of {device}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// 1. Many series over three UTC days, read before, between and after two packing passes.

const GW1: &str = "CHUNK-GW-1";
const MB1: &str = "CHUNK-MB-1";
const ZW1: &str = "CHUNK-ZW-1";

/// Five series of a PLUS gateway and two assets: 24,000 points of datatype 1 over three UTC
/// days (many chunks), datatype 2 a minute apart with the last microsecond before T0 and T0
/// itself, 12,000 points of an asset's datatype 7 with many equal values, the [`EXACT`]
/// doubles as datatype 9, and a second asset's datatype 7.
fn many_series() -> Vec<Point> {
    let mut points = Vec::new();
    let start = (T0 - 3 * 3_600) * MICROS;
    for i in 0..24_000i64 {
        let us = start + i * 6_250_000 + (i * 104_729) % MICROS;
        points.push(Point::gateway(1, us, ((i * 7_919) % 20_011) as f64 / 7.0 - 1_000.0));
    }
    for i in 0..3_000i64 {
        let us = (T0 - 1_799) * MICROS + 500_000 + i * 60 * MICROS;
        points.push(Point::gateway(2, us, (i as f64 * 0.37).sin() * 1e6));
    }
    points.push(Point::gateway(2, T0 * MICROS - 1, -0.5));
    points.push(Point::gateway(2, T0 * MICROS, 0.5));
    for i in 0..12_000i64 {
        let us = (T0 - 20 * 3_600) * MICROS + i * 10 * MICROS + (i % 1_000) * 1_000;
        points.push(Point::asset(MB1, 7, us, (i % 50) as f64 - 25.0));
    }
    for (k, value) in EXACT.iter().enumerate() {
        let k = k as i64;
        points.push(Point::gateway(9, (T0 + 3_600 + k) * MICROS + k * 111, *value));
    }
    for i in 0..700i64 {
        let us = (T0 - 6 * 3_600) * MICROS + i * 60 * MICROS + 999_999;
        points.push(Point::asset(ZW1, 7, us, i as f64 * 0.1));
    }
    points
}

/// The requests of [`answers_are_the_same_before_and_after_packing`]; `mid` is the horizon of
/// the first, partial packing pass.
fn many_series_asks(group: &str, gateway: &str, asset: &str, mid: i64) -> Vec<Ask> {
    use Ask::{Get, Head, Pages};
    let data = format!("/api/v2/data?filter[id_group]={group}");
    let down = format!("/api/v2/data-downsampled?filter[id_group]={group}");
    let span = |lo: i64, hi: i64| format!("&filter[timestamp_seconds][gte]={lo}&filter[timestamp_seconds][lt]={hi}");
    vec![
        // Every point, latest first and oldest first, in pages of the largest size.
        Pages(format!("{data}&per-page=10000")),
        Pages(format!("{data}&per-page=10000&sort=timestamp_seconds")),
        // Pages of the default size, past the end, of odd sizes, and clamped sizes.
        Get(data.clone()),
        Get(format!("{data}&page=2")),
        Get(format!("{data}&page=41")),
        Get(format!("{data}&page=100000")),
        Get(format!("{data}&per-page=7&page=1234")),
        Get(format!("{data}&per-page=1&page=39000")),
        Get(format!("{data}&per-page=0")),
        Get(format!("{data}&per-page=abc&page=3")),
        Get(format!("{data}&sort=timestamp_seconds&per-page=333&page=62")),
        Get(format!("{data}&sort=-timestamp_seconds&per-page=250&page=100")),
        Get(format!(
            "/api/v2/data/index?filter[id_group]={group}&per-page=999&page=13"
        )),
        Get(format!(
            "{data}&fields=timestamp_seconds,microseconds,value&per-page=1000&page=5"
        )),
        // Values.
        Pages(format!("{data}&per-page=10000&filter[value][gt]=0.5")),
        Get(format!("{data}&filter[value][gt]=1e299")),
        Get(format!("{data}&filter[value][lt]=-1e299")),
        Get(format!(
            "{data}&filter[value][gte]=-1e-299&filter[value][lte]=1e-299&per-page=10000"
        )),
        Get(format!("{data}&filter[value]=0&per-page=10000")),
        Get(format!(
            "{data}&filter[value][in][]=-25&filter[value][in][]=24&sort=timestamp_seconds&per-page=10000"
        )),
        // Times: across T0's midnight, across the first pass's horizon, one second, the next
        // midnight, microseconds.
        Pages(format!("{data}&per-page=2000{}", span(T0 - 1_800, T0 + 1_800))),
        Pages(format!(
            "{data}&per-page=5000&sort=timestamp_seconds{}",
            span(mid - 3_600, mid + 3_600)
        )),
        Get(format!("{data}&filter[timestamp_seconds]={T0}")),
        Get(format!("{data}&filter[timestamp_seconds]={}", T0 - 1)),
        Get(format!(
            "{data}&filter[timestamp_seconds][gt]={}&filter[timestamp_seconds][lte]={}&per-page=10000",
            T0 + DAY - 600,
            T0 + DAY + 600
        )),
        Get(format!("{data}&filter[microseconds][gte]=999000&per-page=10000")),
        Get(format!(
            "{data}&filter[microseconds]=0&per-page=10000&sort=timestamp_seconds"
        )),
        // Series, and filters combined.
        Pages(format!("{data}&filter[datatype]=1&per-page=5000")),
        Get(format!(
            "{data}&filter[datatype][in][]=2&filter[datatype][in][]=9&per-page=10000"
        )),
        Get(format!(
            "{data}&filter[datatype][nin][]=1&filter[datatype][nin][]=7&per-page=10000&sort=timestamp_seconds"
        )),
        Pages(format!("{data}&filter[source_device]={asset}&per-page=10000")),
        Get(format!(
            "{data}&filter[source_device]={gateway}&filter[value][lt]=-990&sort=value"
        )),
        Get(format!(
            "{data}&filter[or][0][datatype]=9&filter[or][1][value][lt]=-999.5&per-page=10000"
        )),
        Get(format!("{data}&filter[not][datatype]=1&per-page=500&page=7")),
        Get(format!(
            "{data}&filter[datatype]=1&filter[value][gte]=0{}&sort=-value&per-page=10000",
            span(T0, T0 + DAY)
        )),
        // Sorts; ties are broken by the key.
        Pages(format!("{data}&sort=value&per-page=10000")),
        Get(format!("{data}&sort=-value&per-page=500&page=3")),
        Pages(format!("{data}&sort=-datatype&per-page=10000")),
        Get(format!("{data}&sort=datatype&per-page=500&page=50")),
        Get(format!("{data}&sort=source_device&per-page=500&page=20")),
        Get(format!("{data}&sort=-microseconds&per-page=300&page=9")),
        Get(format!("{data}&sort=id_container_data_latest&per-page=500&page=60")),
        // Counts alone.
        Head(data.clone()),
        Head(format!("{data}&filter[datatype]=7")),
        Head(format!("{data}&filter[value][lt]=0{}", span(T0, T0 + 3_600))),
        Head(format!("{data}&per-page=3&page=5")),
        // Downsampled: days (no bound), hours (two days), minutes (a day), raw points (an hour).
        Pages(format!("{down}&per-page=10000")),
        Get(format!("{down}&sort=-count_val&per-page=5")),
        Pages(format!("{down}&per-page=10000{}", span(T0 - DAY, T0 + DAY))),
        Pages(format!("{down}&per-page=10000{}", span(T0 - 43_200, T0 + 43_200))),
        Pages(format!("{down}&per-page=10000{}", span(T0 - 1_800, T0 + 1_800))),
        Pages(format!("{down}&per-page=10000{}", span(mid - 1_800, mid + 1_800))),
        Get(format!(
            "{down}&sort=-min_val&per-page=100{}",
            span(T0 - 1_800, T0 + 1_800)
        )),
        Get(format!(
            "{down}&filter[datatype]=7&sort=-timestamp_seconds&per-page=50&page=3{}",
            span(T0 - 1_800, T0 + 1_800)
        )),
        Get(format!(
            "{down}&filter[datatype]=9&per-page=100{}",
            span(T0 + 3_600, T0 + 7_200)
        )),
        Get(format!(
            "{down}&filter[min_val][lt]=0&per-page=10000{}",
            span(T0 + 60_000, T0 + 63_600)
        )),
        Head(format!("{down}{}", span(T0 - 1_800, T0 + 1_800))),
    ]
}

/// The dashboard's raw chart series of the gateway and an asset over an hour across T0's
/// midnight and an hour across `mid`.
async fn many_series_charts(app: &TestApp, group: &str, devices: &[&str], mid: i64) -> Vec<Vec<ChartPoint>> {
    let mut out = Vec::new();
    for device in devices {
        for from in [T0 - 1_800, mid - 1_800] {
            out.push(chart(app, group, device, from, from + 3_600).await);
        }
    }
    out
}

fn assert_same_charts(stage: &str, before: &[Vec<ChartPoint>], after: &[Vec<ChartPoint>]) {
    for (i, (b, a)) in before.iter().zip(after).enumerate() {
        if b != a {
            let at = b
                .iter()
                .zip(a)
                .position(|(x, y)| x != y)
                .unwrap_or(b.len().min(a.len()));
            panic!(
                "{stage}: chart {i} differs at point {at} ({} points → {}): {:?} → {:?}",
                b.len(),
                a.len(),
                b.get(at),
                a.get(at)
            );
        }
    }
}

#[tokio::test]
async fn answers_are_the_same_before_and_after_packing() {
    let app = spawn_app(Settings::default()).await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "packed plant").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, GW1, "PLUS").await;
    gw.hello("PLUS", json!({})).await;
    let points = many_series();
    // The big series newest message first; the others in time order.
    let (big, rest): (Vec<Point>, Vec<Point>) = points
        .iter()
        .copied()
        .partition(|p| p.device.is_none() && p.datatype == 1);
    for part in big.chunks(MESSAGE_POINTS).rev() {
        gw.measurements(&message(part)).await;
    }
    publish(&mut gw, &rest).await;
    let asset = device_id(&app, &admin, MB1).await;
    let zwave = device_id(&app, &admin, ZW1).await;
    let serial_of = |id: &str| match id {
        id if id == gw.id => None,
        id if id == asset => Some(MB1),
        id if id == zwave => Some(ZW1),
        other => panic!("unknown device {other}"),
    };

    // The first pass packs what is older than 08:20 on T0's day: part of three series, all of
    // the two others, leaving open chunks behind rows.
    let mid = T0 + 30_000;
    let asks = many_series_asks(&group, &gw.id, &asset, mid);
    let devices = [gw.id.as_str(), asset.as_str()];
    let before = read_all(&app, &admin, &group, &asks).await;
    assert_all_ok(&before);
    let charts_before = many_series_charts(&app, &group, &devices, mid).await;
    assert!(charts_before.iter().all(|c| !c.is_empty()), "empty chart series");

    // The baseline holds every point as sent, to the microsecond and the bit.
    let reader_token = reader(&app, &admin, &group).await;
    let stored = every_item(
        &app,
        &reader_token,
        &format!("/api/v2/data?filter[id_group]={group}&per-page=10000&sort=timestamp_seconds"),
    )
    .await;
    let mut got: Vec<PointKey> = stored.iter().map(item_key).collect();
    let mut sent: Vec<PointKey> = points.iter().map(Point::key).collect();
    got.sort_unstable();
    sent.sort_unstable();
    let stored_as_sent = (got == sent).then_some(()).ok_or_else(|| {
        let missing: Vec<_> = sent.iter().filter(|k| got.binary_search(k).is_err()).take(5).collect();
        format!(
            "{} points stored of {} sent; sent but not read back (first 5): {missing:?}",
            got.len(),
            sent.len()
        )
    });

    // First pass: a few series per call, as the background task calls it.
    let mut partial = Packed::default();
    loop {
        let turn = pack(&app, mid, 2).await;
        assert!(turn.series <= 2, "more series than asked for: {turn:?}");
        partial.series += turn.series;
        partial.points += turn.points;
        partial.chunks += turn.chunks;
        if turn.series < 2 {
            break;
        }
    }
    let closed = points.iter().filter(|p| p.us < mid * MICROS).count();
    assert_eq!(partial.points, closed as u64, "points packed by the first pass");
    assert_eq!(
        partial.series,
        series_count(points.iter().filter(|p| p.us < mid * MICROS))
    );
    assert!(partial.chunks > 0);
    assert_eq!(raw_rows(&app).await, (points.len() - closed) as i64);
    assert_chunks_well_formed(&app).await;

    let between = read_all(&app, &admin, &group, &asks).await;
    assert_same("chunks and rows mixed", &before, &between);
    assert_same_charts(
        "chunks and rows mixed",
        &charts_before,
        &many_series_charts(&app, &group, &devices, mid).await,
    );

    // Second pass: everything, extending the open chunks.
    let rest = pack(&app, after_all(&points), usize::MAX).await;
    assert!(rest.points > 0 && rest.chunks > 0, "{rest:?}");
    assert_eq!(rest.points, (points.len() - closed) as u64);
    assert_eq!(
        rest.series,
        series_count(points.iter().filter(|p| p.us >= mid * MICROS))
    );
    assert_eq!(raw_rows(&app).await, 0, "raw rows left after packing everything");
    assert_chunks_well_formed(&app).await;
    // Every series is in its chunks, cut at least per day and per 10,000 points.
    let mut per_day: BTreeMap<Series, BTreeMap<i64, i64>> = BTreeMap::new();
    for p in &points {
        let days = per_day.entry((p.device, i64::from(p.datatype))).or_default();
        *days.entry(p.us.div_euclid(DAY * MICROS)).or_default() += 1;
    }
    let packed = chunks_per_series(&app).await;
    assert_eq!(packed.len(), per_day.len(), "series in chunks: {packed:?}");
    for ((device, datatype), (chunks, in_chunks)) in &packed {
        let days = &per_day[&(serial_of(device), *datatype)];
        let count: i64 = days.values().sum();
        let fewest: i64 = days
            .values()
            .map(|n| (n + MAX_POINTS as i64 - 1) / MAX_POINTS as i64)
            .sum();
        assert_eq!(*in_chunks, count, "points in the chunks of {device}/{datatype}");
        assert!(
            chunks >= &fewest,
            "{chunks} chunks for {device}/{datatype}, at least {fewest}"
        );
    }
    assert!(packed[&(gw.id.clone(), 1)].0 >= 4, "the big series spans many chunks");

    let after = read_all(&app, &admin, &group, &asks).await;
    assert_same("all packed", &before, &after);
    assert_same_charts(
        "all packed",
        &charts_before,
        &many_series_charts(&app, &group, &devices, mid).await,
    );
    stored_as_sent.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 2. A message sent again after packing, and points late for their chunk.

/// 06:00 ten days after T0.
const T1: i64 = T0 + 10 * DAY + 6 * 3_600;

fn late_asks(group: &str) -> Vec<Ask> {
    use Ask::{Get, Head, Pages};
    let data = format!("/api/v2/data?filter[id_group]={group}");
    let down = format!("/api/v2/data-downsampled?filter[id_group]={group}");
    let span = |lo: i64, hi: i64| format!("&filter[timestamp_seconds][gte]={lo}&filter[timestamp_seconds][lt]={hi}");
    vec![
        Pages(format!("{data}&per-page=10000")),
        Pages(format!("{data}&per-page=10000&sort=timestamp_seconds")),
        Get(data.clone()),
        Get(format!("{data}&per-page=500&page=5")),
        Get(format!("{data}&filter[datatype]=1&sort=-value&per-page=100")),
        Head(data.clone()),
        Head(format!("{data}&filter[datatype]=1")),
        Pages(format!("{down}&per-page=10000")),
        Pages(format!("{down}&per-page=10000{}", span(T1 - DAY, T1 + DAY))),
        Pages(format!("{down}&per-page=10000{}", span(T1 - 3_600, T1 + 20_000))),
        Get(format!("{down}&per-page=10000{}", span(T1 + 900, T1 + 1_200))),
        Get(format!("{down}&per-page=10000{}", span(T1 - 3_700, T1 - 100))),
        Get(format!("{down}&per-page=10000{}", span(T1 - DAY - 60, T1 - DAY + 60))),
    ]
}

/// The items of `data` for datatype 1, oldest first.
async fn datatype_1(app: &TestApp, admin: &str, group: &str) -> Vec<Value> {
    let token = reader(app, admin, group).await;
    every_item(
        app,
        &token,
        &format!("/api/v2/data?filter[id_group]={group}&filter[datatype]=1&sort=timestamp_seconds&per-page=10000"),
    )
    .await
}

fn time_of(item: &Value) -> i64 {
    item["timestamp_seconds"].as_i64().unwrap() * MICROS + item["microseconds"].as_i64().unwrap()
}

#[tokio::test]
async fn a_resend_after_packing_is_stored_once_and_a_late_point_lands() {
    let app = spawn_app(Settings::default()).await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "late plant").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "CHUNK-GW-2", "PLUS").await;
    gw.hello("PLUS", json!({})).await;
    // 5,000 points of datatype 1 two seconds apart from T1, 100 of datatype 2.
    let series: Vec<Point> = (0..5_000i64)
        .map(|i| {
            Point::gateway(
                1,
                (T1 + 2 * i) * MICROS + (i * 337_163) % MICROS,
                i as f64 * 0.25 - 600.0,
            )
        })
        .collect();
    let other: Vec<Point> = (0..100i64)
        .map(|i| Point::gateway(2, (T1 + 100 * i) * MICROS + 500_000, 1.0 / (i as f64 + 3.0)))
        .collect();
    let first: Vec<Point> = series[..2_000].iter().chain(&other).copied().collect();
    gw.measurements(&message(&first)).await;
    gw.measurements(&message(&series[2_000..4_000])).await;
    gw.measurements(&message(&series[4_000..])).await;
    let sent = series.len() + other.len();
    let asks = late_asks(&group);
    let before = read_all(&app, &admin, &group, &asks).await;
    assert_all_ok(&before);
    assert_eq!(
        before[0]
            .headers
            .iter()
            .find(|h| h.starts_with("x-pagination-total-count")),
        Some(&format!("x-pagination-total-count: {sent}"))
    );

    let packed = pack(&app, after_all(&series), usize::MAX).await;
    assert_eq!((packed.series, packed.points), (2, sent as u64), "{packed:?}");
    assert!(packed.chunks >= 2);
    assert_eq!(raw_rows(&app).await, 0);

    // Sent again (a lost PUBACK): acknowledged, stored once, counted once.
    gw.measurements(&message(&first)).await;
    gw.measurements(&message(&series[2_000..4_000])).await;
    assert_eq!(raw_rows(&app).await, 0, "a resent point became a row again");
    let resent = read_all(&app, &admin, &group, &asks).await;
    assert_same("after a resend of packed points", &before, &resent);

    // A message mixing packed points and a new one: only the new one is added.
    let newer = Point::gateway(1, (T1 + 20_000) * MICROS + 500_000, 99.5);
    let mut mixed = series[4_000..].to_vec();
    mixed.push(newer);
    gw.measurements(&message(&mixed)).await;
    assert_eq!(raw_rows(&app).await, 1, "rows after a resend with one new point");

    // Late points: between packed points 500 and 501, an hour before the first chunk (same
    // day), and a day before it.
    let between_us = (series[500].us + series[501].us) / 2;
    let late = [
        Point::gateway(1, between_us, 424_242.5),
        Point::gateway(1, (T1 - 3_600) * MICROS + 250_000, -7.25),
        Point::gateway(1, (T1 - DAY) * MICROS + 1, 1e-5),
    ];
    gw.measurements(&message(&late)).await;
    let oldest_first = datatype_1(&app, &admin, &group).await;
    assert_eq!(oldest_first.len(), series.len() + 1 + late.len());
    let at = |i: usize| (time_of(&oldest_first[i]), oldest_first[i]["value"].as_f64().unwrap());
    assert_eq!(
        at(0),
        (late[2].us, late[2].value),
        "the point of the day before comes first"
    );
    assert_eq!(at(1), (late[1].us, late[1].value), "then the hour before");
    assert_eq!(at(2), (series[0].us, series[0].value));
    assert_eq!(at(2 + 500), (series[500].us, series[500].value));
    assert_eq!(
        at(2 + 501),
        (late[0].us, late[0].value),
        "the late point sits between 500 and 501"
    );
    assert_eq!(at(2 + 502), (series[501].us, series[501].value));
    assert_eq!(at(oldest_first.len() - 1), (newer.us, newer.value));
    // Latest first, the same places the other way round.
    let token = reader(&app, &admin, &group).await;
    let latest_first = every_item(
        &app,
        &token,
        &format!("/api/v2/data?filter[id_group]={group}&filter[datatype]=1&per-page=10000"),
    )
    .await;
    let mut reversed = oldest_first.clone();
    reversed.reverse();
    assert_eq!(latest_first, reversed);
    // The day rollup counts each point once: 5,000 sent, one newer, two late on that day.
    let days = get_json(
        &app,
        &token,
        &format!("/api/v2/data-downsampled?filter[id_group]={group}&filter[datatype]=1"),
    )
    .await;
    let counts: Vec<(i64, i64)> = days["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["timestamp_seconds"].as_i64().unwrap(),
                b["count_val"].as_i64().unwrap(),
            )
        })
        .collect();
    let day = T1.div_euclid(DAY) * DAY;
    assert_eq!(counts, [(day - DAY, 1), (day, 5_003)]);

    // Packing again merges the late points into the chunks.
    let late_read = read_all(&app, &admin, &group, &asks).await;
    assert_all_ok(&late_read);
    let again = pack(&app, after_all(&mixed), usize::MAX).await;
    assert_eq!((again.series, again.points), (1, 1 + late.len() as u64), "{again:?}");
    assert_eq!(raw_rows(&app).await, 0);
    assert_chunks_well_formed(&app).await;
    let chunks = chunks_per_series(&app).await;
    assert_eq!(
        chunks[&(gw.id.clone(), 1)],
        (2, 5_004),
        "datatype 1: one chunk for the day before, one for T1's day"
    );
    let repacked = read_all(&app, &admin, &group, &asks).await;
    assert_same("late points packed", &late_read, &repacked);

    // And the late points sent again once they are packed: still once.
    gw.measurements(&message(&late)).await;
    assert_eq!(raw_rows(&app).await, 0, "a resent late point became a row again");
    let resent = read_all(&app, &admin, &group, &asks).await;
    assert_same("late points resent after packing", &late_read, &resent);
}

// ---------------------------------------------------------------------------------------------
// 3. A GO gateway's data sessions.

/// The data sessions, oldest first.
async fn sessions(app: &TestApp, token: &str) -> Vec<Value> {
    get_json(app, token, "/api/v2/data-session?sort=created_at").await["items"]
        .as_array()
        .unwrap()
        .clone()
}

fn session_asks(group: &str, ids: &[&str]) -> Vec<Ask> {
    use Ask::{Get, Head, Pages};
    let mut asks = vec![
        Pages(format!(
            "/api/v2/data?filter[id_group]={group}&per-page=10000&sort=timestamp_seconds"
        )),
        Get("/api/v2/data-session?expand=datatypes,datatypesFilter,physicalDevicesFilter,dataIds".into()),
    ];
    for id in ids {
        let down = format!("/api/v2/data-downsampled?filter[id_data_session]={id}");
        asks.extend([
            Get(format!("/api/v2/data-session/{id}/download-csv")),
            Get(format!(
                "/api/v2/data-session/{id}?expand=datatypes,datatypesFilter,physicalDevicesFilter,dataIds"
            )),
            Pages(format!("{down}&per-page=10000")),
            Get(down.clone()),
            Get(format!("{down}&filter[id_group]={group}&filter[datatype]=3")),
            Get(format!("{down}&sort=-max_val&per-page=50&page=2")),
            Get(format!(
                "{down}&filter[datatype][in][]=4&filter[datatype][in][]=5&sort=-timestamp_seconds"
            )),
            Head(down),
        ]);
    }
    asks
}

/// The `<svg>` elements of a page.
fn svgs(html: &str) -> String {
    html.match_indices("<svg")
        .map(|(start, _)| {
            let end = html[start..]
                .find("</svg>")
                .map_or(html.len(), |e| start + e + "</svg>".len());
            &html[start..end]
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The dashboard's page of each session (its charts) and its CSV, as a new viewer signed in.
async fn session_pages(app: &TestApp, admin: &str, group: &str, ids: &[&str]) -> Vec<Answer> {
    let name = format!("viewer-{}@example.com", devicecloud_store::new_id());
    let id_user = app.create_user(&name, PASSWORD, false).await;
    app.grant(admin, group, &id_user, "viewer").await;
    let mut browser = Browser::new(app);
    browser.sign_in(&name, PASSWORD).await.expect(303);
    let mut out = Vec::new();
    for id in ids {
        let page = browser.get(&format!("/sessions/{id}")).await;
        out.push(Answer {
            request: format!("dashboard /sessions/{id} (charts)"),
            status: page.status,
            headers: Vec::new(),
            body: svgs(&page.text),
        });
        let csv = browser.get(&format!("/sessions/{id}/csv")).await;
        out.push(Answer {
            request: format!("dashboard /sessions/{id}/csv"),
            status: csv.status,
            headers: Vec::new(),
            body: csv.text,
        });
    }
    out
}

/// Points of a session, in the store: the sum of the points of its chunks.
async fn session_points_in_chunks(app: &TestApp, id: &str) -> i64 {
    scalar(
        &app.state.db,
        "SELECT CAST(COALESCE(SUM(p.points), 0) AS BIGINT) FROM point_chunks p \
         JOIN data_sessions s ON s.session_key = p.session_key WHERE s.id_data_session = $1",
        &[id],
    )
    .await
}

#[tokio::test]
async fn a_data_session_reads_the_same_from_chunks() {
    let app = spawn_app(Settings::default()).await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "session plant").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "CHUNK-GO-1", "GO").await;
    let now = unix_now();
    // A UTC midnight a week back: points of session A cross it.
    let week_ago = now.div_euclid(DAY) * DAY - 7 * DAY;
    // Before the hello: no session.
    let unsessioned: Vec<Point> = (0..50i64)
        .map(|i| Point::gateway(3, (week_ago + 43_200 + i) * MICROS, 1_000.0 + i as f64))
        .collect();
    publish(&mut gw, &unsessioned).await;

    // Session A: two seconds of points within its span on three series, points before its
    // span (crossing a midnight) and after it.
    gw.hello("GO", json!({})).await;
    let a = sessions(&app, &admin).await[0].clone();
    let (id_a, start_a) = (
        a["id_data_session"].as_str().unwrap().to_string(),
        a["start"].as_i64().unwrap(),
    );
    let mut in_a = Vec::new();
    for i in 0..2_000i64 {
        in_a.push(Point::gateway(
            3,
            start_a * MICROS + i * 1_000,
            (i as f64 / 100.0).cos() * 42.0,
        ));
    }
    for i in 0..500i64 {
        in_a.push(Point::gateway(4, start_a * MICROS + i * 4_000 + 500, -(i as f64) / 3.0));
    }
    for i in 0..300i64 {
        in_a.push(Point::asset(
            "CHUNK-GO-MB",
            5,
            start_a * MICROS + i * 6_500 + 250,
            1e-3 * i as f64,
        ));
    }
    for i in 0..40i64 {
        in_a.push(Point::gateway(
            3,
            (week_ago - 2) * MICROS + i * 100_000 + 50_000,
            -1.5 * i as f64,
        ));
    }
    for i in 0..10i64 {
        in_a.push(Point::gateway(3, (start_a + 3_600 + i) * MICROS, 7.0 + i as f64));
    }
    publish(&mut gw, &in_a).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while unix_now() < start_a + 2 {
        assert!(tokio::time::Instant::now() < deadline, "the clock did not advance");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    gw.power_off().await;

    // Between the sessions, then session B: fewer than 500 points (answered raw).
    let between: Vec<Point> = (0..100i64)
        .map(|i| Point::gateway(3, (start_a + 2) * MICROS + 2_500 + i * 5_000, 0.5 * i as f64))
        .collect();
    publish(&mut gw, &between).await;
    gw.hello("GO", json!({})).await;
    let b = sessions(&app, &admin)
        .await
        .into_iter()
        .find(|s| s["id_data_session"] != id_a.as_str())
        .expect("a second session");
    let (id_b, start_b) = (
        b["id_data_session"].as_str().unwrap().to_string(),
        b["start"].as_i64().unwrap(),
    );
    let mut in_b: Vec<Point> = (0..250i64)
        .map(|i| Point::gateway(3, start_b * MICROS + 1_000 + i * 2_000, 3.0 - i as f64 / 7.0))
        .collect();
    in_b.extend((0..50i64).map(|i| Point::gateway(4, start_b * MICROS + 7_000 + i * 10_000, i as f64)));
    publish(&mut gw, &in_b).await;
    gw.power_off().await;

    let ids = [id_a.as_str(), id_b.as_str()];
    let asks = session_asks(&group, &ids);
    let before = read_all(&app, &admin, &group, &asks).await;
    assert_all_ok(&before);
    let pages_before = session_pages(&app, &admin, &group, &ids).await;
    assert_all_ok(&pages_before);
    assert!(pages_before[0].body.contains("<svg"), "no chart on the session page");
    // The baseline is right: each session's CSV and buckets hold its points.
    let token = reader(&app, &admin, &group).await;
    for (id, count) in [(&id_a, in_a.len()), (&id_b, in_b.len())] {
        let session = get_json(&app, &token, &format!("/api/v2/data-session/{id}")).await;
        assert_eq!(session["datapoint_count"], count, "{session}");
        let csv = send(app.get(&format!("/api/v2/data-session/{id}/download-csv"), &token))
            .await
            .expect(200);
        assert_eq!(csv.text.lines().count(), 1 + count, "CSV of {id}");
        let buckets = every_item(
            &app,
            &token,
            &format!("/api/v2/data-downsampled?filter[id_data_session]={id}&per-page=10000"),
        )
        .await;
        let counted: i64 = buckets.iter().map(|b| b["count_val"].as_i64().unwrap()).sum();
        assert_eq!(counted, count as i64, "points in the buckets of {id}");
    }

    let all: Vec<Point> = [&unsessioned, &in_a, &between, &in_b]
        .into_iter()
        .flatten()
        .copied()
        .collect();
    let packed = pack(&app, after_all(&all), usize::MAX).await;
    assert_eq!(packed.points, all.len() as u64, "{packed:?}");
    assert!(packed.chunks >= 3, "{packed:?}");
    assert_eq!(raw_rows(&app).await, 0);
    assert_chunks_well_formed(&app).await;
    // A chunk holds one session: each session's chunks hold exactly its points.
    assert_eq!(session_points_in_chunks(&app, &id_a).await, in_a.len() as i64);
    assert_eq!(session_points_in_chunks(&app, &id_b).await, in_b.len() as i64);
    let without = scalar(
        &app.state.db,
        "SELECT CAST(COALESCE(SUM(points), 0) AS BIGINT) FROM point_chunks WHERE session_key IS NULL",
        &[],
    )
    .await;
    assert_eq!(without, (unsessioned.len() + between.len()) as i64);

    let after = read_all(&app, &admin, &group, &asks).await;
    assert_same("session packed", &before, &after);
    let pages_after = session_pages(&app, &admin, &group, &ids).await;
    assert_same("session pages, packed", &pages_before, &pages_after);
}

// ---------------------------------------------------------------------------------------------
// 4. Retention of packed points.

#[tokio::test]
async fn retention_removes_packed_points() {
    let app = spawn_app(Settings {
        retention_interval: Duration::from_millis(300),
        ..Settings::default()
    })
    .await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "expiring packed plant").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "CHUNK-GW-4", "PLUS").await;
    gw.hello("PLUS", json!({})).await;
    let now = unix_now();
    let midnight = now.div_euclid(DAY) * DAY;
    // A raw retention of one day keeps today and yesterday: the cutoff is yesterday's midnight.
    let cutoff = midnight - DAY;
    let mut points = Vec::new();
    // Three days back (gone), an asset's series four days back (gone whole), two hours across
    // the cutoff (half gone), and the last half hour (kept).
    for i in 0..1_500i64 {
        points.push(Point::gateway(
            12,
            (midnight - 3 * DAY + 3_600 + 30 * i) * MICROS + i,
            i as f64,
        ));
    }
    for i in 0..100i64 {
        points.push(Point::asset(
            "CHUNK-RT-MB",
            13,
            (midnight - 4 * DAY + 60 * i) * MICROS,
            -(i as f64),
        ));
    }
    for i in 0..720i64 {
        points.push(Point::gateway(
            12,
            (cutoff - 3_600 + 10 * i) * MICROS + 500_000,
            0.5 * i as f64,
        ));
    }
    for i in 0..500i64 {
        points.push(Point::gateway(
            12,
            (now - 1_800 + 3 * i) * MICROS + 123_456,
            1e6 + i as f64,
        ));
    }
    publish(&mut gw, &points).await;
    let kept = points.iter().filter(|p| p.us >= cutoff * MICROS).count();

    let packed = pack(&app, after_all(&points), usize::MAX).await;
    assert_eq!(packed.points, points.len() as u64, "{packed:?}");
    assert_eq!(raw_rows(&app).await, 0);

    let data = format!("/api/v2/data?filter[id_group]={group}&per-page=10000");
    let newer = format!("{data}&filter[timestamp_seconds][gte]={cutoff}");
    let down = format!("/api/v2/data-downsampled?filter[id_group]={group}&per-page=10000");
    let asks = [
        Ask::Pages(newer.clone()),
        Ask::Pages(format!("{newer}&sort=timestamp_seconds")),
        Ask::Head(newer.clone()),
        Ask::Get(format!(
            "{down}&filter[timestamp_seconds][gte]={}&filter[timestamp_seconds][lt]={}",
            cutoff,
            cutoff + 3_600
        )),
        Ask::Get(format!(
            "{down}&filter[timestamp_seconds][gte]={}&filter[timestamp_seconds][lt]={}",
            now - 1_800,
            now
        )),
    ];
    let before = read_all(&app, &admin, &group, &asks).await;
    assert_all_ok(&before);
    let token = reader(&app, &admin, &group).await;
    assert_eq!(every_item(&app, &token, &data).await.len(), points.len());

    send(
        app.request(Method::PUT, &format!("/api/v2/group/{group}/retention"), &admin)
            .json(&json!({"raw_days": 1})),
    )
    .await
    .expect(200);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let left = loop {
        let left = every_item(&app, &token, &data).await;
        if left.len() == kept {
            break left;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the retention task left {} points of {} sent, {kept} are newer than the cutoff",
            left.len(),
            points.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        left.iter().all(|p| p["timestamp_seconds"].as_i64().unwrap() >= cutoff),
        "a point older than the cutoff is still read"
    );
    let old_chunks = scalar(
        &app.state.db,
        &format!("SELECT COUNT(*) FROM point_chunks WHERE first_us < {}", cutoff * MICROS),
        &[],
    )
    .await;
    assert_eq!(old_chunks, 0, "chunks older than the cutoff are left");
    let in_chunks = scalar(
        &app.state.db,
        "SELECT CAST(COALESCE(SUM(points), 0) AS BIGINT) FROM point_chunks",
        &[],
    )
    .await;
    assert_eq!(in_chunks, kept as i64, "points left in chunks");
    let after = read_all(&app, &admin, &group, &asks).await;
    assert_same("newer packed points after retention", &before, &after);
}
