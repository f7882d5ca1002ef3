//! The ingest write path: one transaction stores a batch of raw points, the minute, hour and
//! day rollups of the points that were new, the latest value of each series, and the devices'
//! `last_data_at` (architecture: group commit, rollups at write time).
//!
//! Every statement carries many rows (`INSERT … VALUES (…), (…)`, `UPDATE … FROM (VALUES …)`),
//! so a batch costs a handful of statements whatever its size. A resent point (same series,
//! second and microsecond) is stored once and counted once: the insert ignores it, and when
//! the insert reports fewer rows than it was given, the transaction is rolled back and redone
//! with the points already stored left out, before any rollup is touched.

use std::collections::{BTreeMap, HashMap, HashSet};

use sea_query::{Value, Values};
use sea_query_sqlx::SqlxValues;

use crate::db::{Backend, Db, Tx, on_pool};
use crate::webhooks::Routes;
use crate::{Result, new_id};

/// Rows per statement: well below SQLite's 32,766 bound parameters.
const CHUNK: usize = 1000;

/// One raw point of a series (container).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub container_key: i64,
    pub seconds: i64,
    pub microseconds: i64,
    pub value: f64,
    /// The data session the point belongs to (GO gateways), if any.
    pub session_key: Option<i64>,
}

/// What a batch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Points stored for the first time.
    pub inserted: usize,
    /// Points that were already stored (resent) or repeated within the batch.
    pub duplicates: usize,
}

/// The series a (group, source device, datatype) triple is stored under.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SeriesId {
    pub id_group: String,
    pub source_device: String,
    pub datatype: i64,
}

/// The integer key of a series, creating the series on first use.
pub async fn container_key(db: &Db, series: &SeriesId) -> Result<i64> {
    let insert = "INSERT INTO containers (id_container_data_latest, id_group, source_device, datatype) VALUES ($1, $2, $3, $4) \
                  ON CONFLICT (id_group, source_device, datatype) DO NOTHING";
    let select = "SELECT container_key FROM containers WHERE id_group = $1 AND source_device = $2 AND datatype = $3";
    let key: i64 = on_pool!(db, |p| async {
        sqlx::query(insert)
            .bind(new_id())
            .bind(&series.id_group)
            .bind(&series.source_device)
            .bind(series.datatype)
            .execute(p)
            .await?;
        sqlx::query_scalar(select)
            .bind(&series.id_group)
            .bind(&series.source_device)
            .bind(series.datatype)
            .fetch_one(p)
            .await
    }
    .await)?;
    Ok(key)
}

/// Stores a batch in one transaction; `devices` are the devices whose `last_data_at` moves to
/// the given time (only ever forward). Nothing is queued for webhooks: this is for tools and
/// tests that fill a store directly; the service writes through [`write_routed`].
pub async fn write(db: &Db, points: &[Point], devices: &[(String, i64)]) -> Result<Written> {
    write_batch(db, points, devices, None).await.map(|(written, _)| written)
}

/// What a batch did, and how many outbox rows it queued for webhooks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Routed {
    pub written: Written,
    /// Outbox rows written: one per new point and webhook of its group.
    pub queued: usize,
}

/// Stores a batch as [`write`] does and, in the same transaction, queues every newly stored
/// point for each active measurements webhook of its group (contract §3: queued durably in the
/// transaction that stores the data). Resent points were queued when first stored and are not
/// queued again.
pub async fn write_routed(db: &Db, points: &[Point], devices: &[(String, i64)], routes: &Routes) -> Result<Routed> {
    let table = routes.table(db).await?;
    if table.measurements.is_empty() {
        let (written, _) = write_batch(db, points, devices, None).await?;
        return Ok(Routed { written, queued: 0 });
    }
    let keys: HashSet<i64> = points.iter().map(|p| p.container_key).collect();
    let groups = routes.groups_of(db, &keys).await?;
    let targets: HashMap<i64, &[String]> = groups
        .iter()
        .filter_map(|(key, group)| table.measurements.get(&**group).map(|hooks| (*key, hooks.as_slice())))
        .collect();
    let (written, queued) = write_batch(db, points, devices, Some(&targets)).await?;
    Ok(Routed { written, queued })
}

/// The write of [`write`] and [`write_routed`]; `targets` maps a series to its webhooks.
async fn write_batch(
    db: &Db,
    points: &[Point],
    devices: &[(String, i64)],
    targets: Option<&HashMap<i64, &[String]>>,
) -> Result<(Written, usize)> {
    // Repeats inside the batch are dropped first: the database would count them as new once.
    let mut seen = HashSet::with_capacity(points.len());
    let unique: Vec<Point> = points
        .iter()
        .copied()
        .filter(|p| seen.insert((p.container_key, p.seconds, p.microseconds)))
        .collect();
    let mut tx = Tx::begin(db).await?;
    let fresh = if insert_points(&mut tx, &unique).await? == unique.len() {
        unique
    } else {
        // Some points were stored before (a resend): start over, find them, and store only the
        // new ones. A whole new transaction rather than a savepoint, whose statement journal
        // would cost every batch.
        tx.rollback().await?;
        tx = Tx::begin(db).await?;
        let stored = stored_keys(&mut tx, &unique).await?;
        let fresh: Vec<Point> = unique
            .into_iter()
            .filter(|p| !stored.contains(&(p.container_key, p.seconds, p.microseconds)))
            .collect();
        insert_points(&mut tx, &fresh).await?;
        fresh
    };
    for (table, width) in [("rollup_minute", 60), ("rollup_hour", 3_600), ("rollup_day", 86_400)] {
        upsert_rollups(&mut tx, table, &rollups(&fresh, width)).await?;
    }
    update_latest(&mut tx, &fresh).await?;
    touch_devices(&mut tx, devices).await?;
    count_session_points(&mut tx, &fresh).await?;
    let queued = match targets {
        Some(targets) if !targets.is_empty() => queue_points(&mut tx, &fresh, targets).await?,
        _ => 0,
    };
    tx.commit().await?;
    let written = Written {
        inserted: fresh.len(),
        duplicates: points.len() - fresh.len(),
    };
    Ok((written, queued))
}

/// Writes one outbox row per new point and webhook of its series' group, in point order
/// (which is the order the gateways sent them in).
async fn queue_points(tx: &mut Tx, points: &[Point], targets: &HashMap<i64, &[String]>) -> sqlx::Result<usize> {
    let rows: Vec<(&String, &Point)> = points
        .iter()
        .flat_map(|p| {
            targets
                .get(&p.container_key)
                .copied()
                .unwrap_or_default()
                .iter()
                .map(move |hook| (hook, p))
        })
        .collect();
    for chunk in rows.chunks(CHUNK) {
        let sql = format!(
            "INSERT INTO webhook_outbox (id_webhook, container_key, seconds, microseconds, value) VALUES {}",
            placeholders(chunk.len(), 5, tx.backend())
        );
        let values = chunk
            .iter()
            .flat_map(|(hook, p)| {
                [
                    Value::String(Some(hook.to_string())),
                    int(p.container_key),
                    int(p.seconds),
                    int(p.microseconds),
                    real(p.value),
                ]
            })
            .collect();
        tx.execute(sql, SqlxValues(Values(values))).await?;
    }
    Ok(rows.len())
}

/// Placeholders for `rows` rows of `width` values: `($1, $2), ($3, $4)` on PostgreSQL, and
/// `(?, ?), (?, ?)` on SQLite, where a numbered name costs a linear search per bound value
/// (`sqlite3_bind_parameter_name`), which made a 5,000-value statement quadratic.
fn placeholders(rows: usize, width: usize, backend: Backend) -> String {
    let mut out = String::with_capacity(rows * width * 6);
    for r in 0..rows {
        out.push_str(if r == 0 { "(" } else { ", (" });
        for c in 0..width {
            if c > 0 {
                out.push_str(", ");
            }
            match backend {
                Backend::Sqlite => out.push('?'),
                Backend::Postgres => {
                    out.push('$');
                    out.push_str(&(r * width + c + 1).to_string());
                }
            }
        }
        out.push(')');
    }
    out
}

fn int(v: i64) -> Value {
    Value::BigInt(Some(v))
}

fn real(v: f64) -> Value {
    Value::Double(Some(v))
}

/// Inserts points, ignoring any already stored; returns how many rows went in.
async fn insert_points(tx: &mut Tx, points: &[Point]) -> sqlx::Result<usize> {
    let mut inserted = 0;
    for chunk in points.chunks(CHUNK) {
        let sql = format!(
            "INSERT INTO raw_points (container_key, seconds, microseconds, value, session_key) VALUES {} \
             ON CONFLICT (container_key, seconds, microseconds) DO NOTHING",
            placeholders(chunk.len(), 5, tx.backend())
        );
        let mut values = Vec::with_capacity(chunk.len() * 5);
        for p in chunk {
            values.extend([
                int(p.container_key),
                int(p.seconds),
                int(p.microseconds),
                real(p.value),
                Value::BigInt(p.session_key),
            ]);
        }
        inserted += tx.execute(sql, SqlxValues(Values(values))).await? as usize;
    }
    Ok(inserted)
}

/// Which of `points` are stored already.
async fn stored_keys(tx: &mut Tx, points: &[Point]) -> sqlx::Result<HashSet<(i64, i64, i64)>> {
    let mut stored = HashSet::new();
    for chunk in points.chunks(CHUNK) {
        let sql = format!(
            "SELECT r.container_key AS a, r.seconds AS b, r.microseconds AS c FROM raw_points r \
             JOIN (VALUES {}) AS v ON r.container_key = v.column1 AND r.seconds = v.column2 AND r.microseconds = v.column3",
            placeholders(chunk.len(), 3, tx.backend())
        );
        let values = chunk
            .iter()
            .flat_map(|p| [int(p.container_key), int(p.seconds), int(p.microseconds)])
            .collect();
        stored.extend(tx.triples(sql, SqlxValues(Values(values))).await?);
    }
    Ok(stored)
}

/// One rollup bucket of one series, aggregated from the new points of a batch.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Bucket {
    min: f64,
    max: f64,
    sum: f64,
    count: i64,
}

/// Aggregates points into UTC-aligned buckets of `width` seconds.
fn rollups(points: &[Point], width: i64) -> BTreeMap<(i64, i64), Bucket> {
    let mut buckets: BTreeMap<(i64, i64), Bucket> = BTreeMap::new();
    for p in points {
        let start = p.seconds - p.seconds.rem_euclid(width);
        buckets
            .entry((p.container_key, start))
            .and_modify(|b| {
                b.min = b.min.min(p.value);
                b.max = b.max.max(p.value);
                b.sum += p.value;
                b.count += 1;
            })
            .or_insert(Bucket {
                min: p.value,
                max: p.value,
                sum: p.value,
                count: 1,
            });
    }
    buckets
}

/// Merges buckets into a rollup table (`min`/`max` are SQLite's two-argument scalars,
/// `LEAST`/`GREATEST` on PostgreSQL).
async fn upsert_rollups(tx: &mut Tx, table: &str, buckets: &BTreeMap<(i64, i64), Bucket>) -> sqlx::Result<()> {
    let (least, greatest) = match tx.backend() {
        Backend::Sqlite => ("min", "max"),
        Backend::Postgres => ("LEAST", "GREATEST"),
    };
    let rows: Vec<_> = buckets.iter().collect();
    for chunk in rows.chunks(CHUNK) {
        let sql = format!(
            "INSERT INTO {table} (container_key, bucket, min_val, max_val, sum_val, count_val) VALUES {} \
             ON CONFLICT (container_key, bucket) DO UPDATE SET \
             min_val = {least}({table}.min_val, excluded.min_val), max_val = {greatest}({table}.max_val, excluded.max_val), \
             sum_val = {table}.sum_val + excluded.sum_val, count_val = {table}.count_val + excluded.count_val",
            placeholders(chunk.len(), 6, tx.backend())
        );
        let values = chunk
            .iter()
            .flat_map(|((key, start), b)| {
                [
                    int(*key),
                    int(*start),
                    real(b.min),
                    real(b.max),
                    real(b.sum),
                    int(b.count),
                ]
            })
            .collect();
        tx.execute(sql, SqlxValues(Values(values))).await?;
    }
    Ok(())
}

/// Moves each series' latest value forward to its newest new point.
async fn update_latest(tx: &mut Tx, points: &[Point]) -> sqlx::Result<()> {
    let mut newest: HashMap<i64, Point> = HashMap::new();
    for p in points {
        newest
            .entry(p.container_key)
            .and_modify(|n| {
                if (p.seconds, p.microseconds) > (n.seconds, n.microseconds) {
                    *n = *p;
                }
            })
            .or_insert(*p);
    }
    let rows: Vec<Point> = newest.into_values().collect();
    for chunk in rows.chunks(CHUNK) {
        let sql = format!(
            "UPDATE containers SET latest_seconds = v.column2, latest_microseconds = v.column3, latest_value = v.column4 \
             FROM (VALUES {}) AS v WHERE containers.container_key = v.column1 AND (containers.latest_seconds IS NULL \
             OR containers.latest_seconds < v.column2 \
             OR (containers.latest_seconds = v.column2 AND containers.latest_microseconds < v.column3))",
            placeholders(chunk.len(), 4, tx.backend())
        );
        let values = chunk
            .iter()
            .flat_map(|p| [int(p.container_key), int(p.seconds), int(p.microseconds), real(p.value)])
            .collect();
        tx.execute(sql, SqlxValues(Values(values))).await?;
    }
    Ok(())
}

/// Moves `last_data_at` of devices forward (each device once, to its latest time: an update
/// joined to several rows for one target row would take any one of them).
async fn touch_devices(tx: &mut Tx, devices: &[(String, i64)]) -> sqlx::Result<()> {
    let mut latest: BTreeMap<&str, i64> = BTreeMap::new();
    for (id, at) in devices {
        let entry = latest.entry(id.as_str()).or_insert(*at);
        *entry = (*entry).max(*at);
    }
    let rows: Vec<(&str, i64)> = latest.into_iter().collect();
    for chunk in rows.chunks(CHUNK) {
        let sql = format!(
            "UPDATE physical_devices SET last_data_at = v.column2 FROM (VALUES {}) AS v \
             WHERE physical_devices.id_physical_device = v.column1 \
             AND (physical_devices.last_data_at IS NULL OR physical_devices.last_data_at < v.column2)",
            placeholders(chunk.len(), 2, tx.backend())
        );
        let values = chunk
            .iter()
            .flat_map(|(id, at)| [Value::String(Some(id.to_string())), int(*at)])
            .collect();
        tx.execute(sql, SqlxValues(Values(values))).await?;
    }
    Ok(())
}

/// Adds the new points of each data session to its `datapoint_count`.
async fn count_session_points(tx: &mut Tx, points: &[Point]) -> sqlx::Result<()> {
    let mut counts: BTreeMap<i64, i64> = BTreeMap::new();
    for key in points.iter().filter_map(|p| p.session_key) {
        *counts.entry(key).or_default() += 1;
    }
    let rows: Vec<_> = counts.into_iter().collect();
    for chunk in rows.chunks(CHUNK) {
        let sql = format!(
            "UPDATE data_sessions SET datapoint_count = datapoint_count + v.column2 FROM (VALUES {}) AS v \
             WHERE data_sessions.session_key = v.column1",
            placeholders(chunk.len(), 2, tx.backend())
        );
        let values = chunk.iter().flat_map(|(key, n)| [int(*key), int(*n)]).collect();
        tx.execute(sql, SqlxValues(Values(values))).await?;
    }
    Ok(())
}

/// The stored points of a series as (seconds, microseconds), for verification and export.
pub async fn series_points(db: &Db, container_key: i64) -> Result<Vec<(i64, i64)>> {
    let select = "SELECT seconds AS a, microseconds AS b, 0 AS c FROM raw_points WHERE container_key = $1".to_string();
    let mut tx = Tx::begin(db).await?;
    let rows = tx.triples(select, SqlxValues(Values(vec![int(container_key)]))).await?;
    tx.commit().await?;
    Ok(rows.into_iter().map(|(s, us, _)| (s, us)).collect())
}

/// How many points of a series the minute, hour and day rollups count.
pub async fn rollup_counts(db: &Db, container_key: i64) -> Result<(i64, i64, i64)> {
    let sql = "SELECT (SELECT COALESCE(SUM(count_val), 0) FROM rollup_minute WHERE container_key = $1) AS a, \
               (SELECT COALESCE(SUM(count_val), 0) FROM rollup_hour WHERE container_key = $1) AS b, \
               (SELECT COALESCE(SUM(count_val), 0) FROM rollup_day WHERE container_key = $1) AS c";
    let select =
        format!("SELECT CAST(a AS BIGINT) AS a, CAST(b AS BIGINT) AS b, CAST(c AS BIGINT) AS c FROM ({sql}) AS counts");
    let mut tx = Tx::begin(db).await?;
    let rows = tx.triples(select, SqlxValues(Values(vec![int(container_key)]))).await?;
    tx.commit().await?;
    Ok(rows.first().copied().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_number_rows_and_columns() {
        assert_eq!(placeholders(2, 3, Backend::Postgres), "($1, $2, $3), ($4, $5, $6)");
        assert_eq!(placeholders(1, 1, Backend::Postgres), "($1)");
        assert_eq!(placeholders(2, 2, Backend::Sqlite), "(?, ?), (?, ?)");
    }

    #[test]
    fn rollups_align_to_utc_buckets() {
        let p = |seconds, value| Point {
            container_key: 7,
            seconds,
            microseconds: 0,
            value,
            session_key: None,
        };
        let points = [p(86_399, 1.0), p(86_400, 5.0), p(86_459, -2.0), p(-1, 3.0)];
        let minutes = rollups(&points, 60);
        assert_eq!(
            minutes[&(7, 86_340)],
            Bucket {
                min: 1.0,
                max: 1.0,
                sum: 1.0,
                count: 1
            }
        );
        assert_eq!(
            minutes[&(7, 86_400)],
            Bucket {
                min: -2.0,
                max: 5.0,
                sum: 3.0,
                count: 2
            }
        );
        assert_eq!(minutes[&(7, -60)].count, 1);
        let days = rollups(&points, 86_400);
        assert_eq!(days[&(7, 0)].count, 1);
        assert_eq!(
            days[&(7, 86_400)],
            Bucket {
                min: -2.0,
                max: 5.0,
                sum: 3.0,
                count: 2
            }
        );
    }
}
