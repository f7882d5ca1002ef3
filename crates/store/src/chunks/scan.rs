//! A series' stored points over a time range, wherever they are kept: the chunks that overlap the
//! range, decoded, merged with the rows not packed yet. Every read of raw points goes through
//! here, so an answer is the same before and after packing.

use std::collections::BTreeMap;

use super::DAY_US;
use super::codec::{self, Columns};
use super::cut::merge;
use crate::database::Result;
use crate::database::db::{Db, values};
use crate::sql::backend::Backend;
use crate::sql::point_time::{self, MICROS};

/// Series read by one statement: well within SQLite's bound parameters and a statement's length.
const KEYS_PER_STATEMENT: usize = 500;

/// Times in microseconds since the Unix epoch, `from_us` included and `to_us` excluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub from_us: i64,
    pub to_us: i64,
}

impl Range {
    /// Every time.
    pub const ALL: Range = Range {
        from_us: i64::MIN,
        to_us: i64::MAX,
    };

    /// The whole seconds `from` to `to`, both included; `None` leaves that side open.
    pub fn seconds(from: Option<i64>, to: Option<i64>) -> Range {
        Range {
            from_us: from.map_or(i64::MIN, |s| s.saturating_mul(MICROS)),
            to_us: to.map_or(i64::MAX, |s| s.saturating_add(1).saturating_mul(MICROS)),
        }
    }

    pub fn contains(&self, t: i64) -> bool {
        self.from_us <= t && t < self.to_us
    }

    pub fn is_empty(&self) -> bool {
        self.from_us >= self.to_us
    }
}

/// One series' points, in time order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SeriesPoints {
    pub container_key: i64,
    pub points: Columns,
}

/// The points of the series `keys` in `range` (and of data session `session` when given): one
/// entry a series that has some, in key order.
pub async fn scan(db: &Db, keys: &[i64], range: Range, session: Option<i64>) -> Result<Vec<SeriesPoints>> {
    let mut out = Vec::new();
    if range.is_empty() {
        return Ok(out);
    }
    let mut keys = keys.to_vec();
    keys.sort_unstable();
    keys.dedup();
    for part in keys.chunks(KEYS_PER_STATEMENT) {
        let mut packed = chunks_of(db, part, range, session).await?;
        let mut rows = rows_of(db, part, range, session).await?;
        for &key in part {
            let (older, newer) = (packed.remove(&key), rows.remove(&key));
            let points = match (older, newer) {
                (None, None) => continue,
                (Some(p), None) | (None, Some(p)) => p,
                (Some(older), Some(newer)) => merge(&older, &newer),
            };
            if !points.is_empty() {
                out.push(SeriesPoints {
                    container_key: key,
                    points,
                });
            }
        }
    }
    Ok(out)
}

/// How many points of the series `keys` lie in `range`, whose ends are whole seconds: the chunks
/// inside it by their own counts, the chunks its ends cut decoded, the rows counted in SQL.
pub async fn count(db: &Db, keys: &[i64], range: Range) -> Result<u64> {
    let mut total = 0u64;
    if range.is_empty() {
        return Ok(total);
    }
    let backend = db.backend();
    let from = range.from_us.max(i64::MIN + DAY_US);
    for part in keys.chunks(KEYS_PER_STATEMENT) {
        let list = key_list(part);
        let inside = format!(
            "SELECT CAST(COALESCE(SUM(points), 0) AS BIGINT) FROM point_chunks WHERE container_key IN ({list}) \
             AND first_us >= $1 AND last_us < $2"
        );
        let (n,): (i64,) = db
            .row(sqlx::AssertSqlSafe(inside), values![from, range.to_us])
            .await?
            .unwrap_or((0,));
        total += u64::try_from(n).unwrap_or(0);
        let cut = format!(
            "SELECT payload FROM point_chunks WHERE container_key IN ({list}) AND first_us > $1 - {DAY_US} \
             AND last_us >= $1 AND first_us < $2 AND NOT (first_us >= $1 AND last_us < $2)"
        );
        let cut: Vec<(Vec<u8>,)> = db.rows(sqlx::AssertSqlSafe(cut), values![from, range.to_us]).await?;
        for (payload,) in cut {
            let chunk = codec::unpack(&payload)?;
            total += chunk.times_us.iter().filter(|t| range.contains(**t)).count() as u64;
        }
        let within = point_time::seconds_within_sql(backend, "r", "$1", "$2");
        let rows = format!("SELECT COUNT(*) FROM raw_points r WHERE r.container_key IN ({list}) AND {within}");
        let (first, last) = whole_seconds(range);
        let (n,): (i64,) = db
            .row(sqlx::AssertSqlSafe(rows), values![first, last])
            .await?
            .unwrap_or((0,));
        total += u64::try_from(n).unwrap_or(0);
    }
    Ok(total)
}

/// The first and last stored time (microseconds) of the series `keys`, packed or not, if they
/// have points: each series' ends looked up in its keys, so the cost follows the number of
/// series, not of points.
pub async fn span(db: &Db, keys: &[i64]) -> Result<Option<Range>> {
    let backend = db.backend();
    let time = point_time::time_us_sql(backend, "r");
    let order = |direction: &str| match backend {
        Backend::Sqlite => format!("r.seconds {direction}, r.microseconds {direction}"),
        Backend::Postgres => format!("r.time_us {direction}"),
    };
    let (mut first, mut last): (Option<i64>, Option<i64>) = (None, None);
    for part in keys.chunks(KEYS_PER_STATEMENT) {
        let ends: Vec<String> = part
            .iter()
            .map(|key| {
                format!(
                    "SELECT (SELECT first_us FROM point_chunks WHERE container_key = {key} ORDER BY first_us LIMIT 1) AS f, \
                     (SELECT last_us FROM point_chunks WHERE container_key = {key} ORDER BY first_us DESC LIMIT 1) AS l \
                     UNION ALL SELECT (SELECT {time} FROM raw_points r WHERE r.container_key = {key} ORDER BY {} LIMIT 1), \
                     (SELECT {time} FROM raw_points r WHERE r.container_key = {key} ORDER BY {} LIMIT 1)",
                    order("ASC"),
                    order("DESC")
                )
            })
            .collect();
        let sql = format!("SELECT MIN(f), MAX(l) FROM ({}) ends", ends.join(" UNION ALL "));
        let row: Option<(Option<i64>, Option<i64>)> = db.row(sqlx::AssertSqlSafe(sql), values![]).await?;
        if let Some((f, l)) = row {
            first = first.into_iter().chain(f).min();
            last = last.into_iter().chain(l).max();
        }
    }
    Ok(first.zip(last).map(|(from_us, last_us)| Range {
        from_us,
        to_us: last_us.saturating_add(1),
    }))
}

/// The whole seconds that hold `range`, clamped so that PostgreSQL's microseconds stay in range.
fn whole_seconds(range: Range) -> (i64, i64) {
    let limit = i64::MAX / MICROS - 1;
    (
        range.from_us.div_euclid(MICROS).clamp(-limit, limit),
        (range.to_us.saturating_sub(1)).div_euclid(MICROS).clamp(-limit, limit),
    )
}

/// The packed points of `keys` in `range`, a series' chunks decoded in order.
async fn chunks_of(db: &Db, keys: &[i64], range: Range, session: Option<i64>) -> Result<BTreeMap<i64, Columns>> {
    let list = key_list(keys);
    let by_session = if session.is_some() { "AND session_key = $3" } else { "" };
    let sql = format!(
        "SELECT container_key, payload FROM point_chunks WHERE container_key IN ({list}) \
         AND first_us > $1 - {DAY_US} AND last_us >= $1 AND first_us < $2 {by_session} \
         ORDER BY container_key, first_us"
    );
    // A chunk spans less than a day, so `first_us` bounds the key's range from below too.
    let from = range.from_us.max(i64::MIN + DAY_US);
    let values = match session {
        Some(s) => values![from, range.to_us, s],
        None => values![from, range.to_us],
    };
    let chunks: Vec<(i64, Vec<u8>)> = db.rows(sqlx::AssertSqlSafe(sql), values).await?;
    let mut out: BTreeMap<i64, Columns> = BTreeMap::new();
    for (key, payload) in chunks {
        let chunk = codec::unpack(&payload)?;
        let series = out.entry(key).or_default();
        for i in 0..chunk.len() {
            if range.contains(chunk.times_us[i]) {
                series.push_from(&chunk, i);
            }
        }
    }
    Ok(out)
}

/// The rows of `keys` in `range` not packed yet.
async fn rows_of(db: &Db, keys: &[i64], range: Range, session: Option<i64>) -> Result<BTreeMap<i64, Columns>> {
    let backend = db.backend();
    let list = key_list(keys);
    let time = point_time::time_us_sql(backend, "r");
    let within = point_time::seconds_within_sql(backend, "r", "$1", "$2");
    let by_session = if session.is_some() {
        "AND r.session_key = $3"
    } else {
        ""
    };
    let order = match backend {
        Backend::Sqlite => "r.container_key, r.seconds, r.microseconds",
        Backend::Postgres => "r.container_key, r.time_us",
    };
    let sql = format!(
        "SELECT r.container_key, {time}, r.value, r.session_key FROM raw_points r \
         WHERE r.container_key IN ({list}) AND {within} {by_session} ORDER BY {order}"
    );
    let (from, to) = whole_seconds(range);
    let values = match session {
        Some(s) => values![from, to, s],
        None => values![from, to],
    };
    let rows: Vec<(i64, i64, f64, Option<i64>)> = db.rows(sqlx::AssertSqlSafe(sql), values).await?;
    let mut out: BTreeMap<i64, Columns> = BTreeMap::new();
    for (key, t, value, s) in rows {
        if range.contains(t) {
            let series = out.entry(key).or_default();
            series.times_us.push(t);
            series.values.push(value);
            series.sessions.push(s);
        }
    }
    Ok(out)
}

/// Series keys as an SQL list: our own integers, written out as such.
pub(crate) fn key_list(keys: &[i64]) -> String {
    keys.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

/// The newest point of series `key` before `before_us` (microseconds), packed or not, as
/// (time in microseconds, value): what came before a point, for the alarm engine meeting a
/// series for the first time.
pub async fn point_before(db: &Db, key: i64, before_us: i64) -> Result<Option<(i64, f64)>> {
    let backend = db.backend();
    let time = point_time::time_us_sql(backend, "r");
    let (seconds, micros) = (before_us.div_euclid(MICROS), before_us.rem_euclid(MICROS));
    let (order, bound, values) = match backend {
        Backend::Sqlite => (
            "r.seconds DESC, r.microseconds DESC",
            "(r.seconds < $2 OR (r.seconds = $2 AND r.microseconds < $3))",
            values![key, seconds, micros],
        ),
        Backend::Postgres => ("r.time_us DESC", "r.time_us < $2", values![key, before_us]),
    };
    let sql = format!(
        "SELECT {time}, r.value FROM raw_points r WHERE r.container_key = $1 AND {bound} ORDER BY {order} LIMIT 1"
    );
    let row: Option<(i64, f64)> = db.row(sqlx::AssertSqlSafe(sql), values).await?;
    // A chunk holds only points older than any row of its series (the packer moves the oldest),
    // so the rows answer first; a chunk only when no row comes before.
    if row.is_some() {
        return Ok(row);
    }
    let chunk: Option<(Vec<u8>,)> = db
        .row(
            "SELECT payload FROM point_chunks WHERE container_key = $1 AND first_us < $2 ORDER BY first_us DESC LIMIT 1",
            values![key, before_us],
        )
        .await?;
    let Some((payload,)) = chunk else {
        return Ok(None);
    };
    let chunk = codec::unpack(&payload)?;
    Ok((0..chunk.len())
        .filter(|&i| chunk.times_us[i] < before_us)
        .max_by_key(|&i| chunk.times_us[i])
        .map(|i| (chunk.times_us[i], chunk.values[i])))
}

/// The newest point of series `key` stored before a commit whose points of it are at `besides`
/// (sorted, microseconds), the oldest at `from_us`: a stored point newer than some of them (the
/// commit was backfill), else the point before them all. What the alarm engine meeting a series
/// takes as its newest point and the previous one.
pub async fn newest_besides(db: &Db, key: i64, from_us: i64, besides: &[i64]) -> Result<Option<(i64, f64)>> {
    let backend = db.backend();
    let time = point_time::time_us_sql(backend, "r");
    let (order, bound, values) = match backend {
        Backend::Sqlite => (
            "r.seconds DESC, r.microseconds DESC",
            "(r.seconds > $2 OR (r.seconds = $2 AND r.microseconds >= $3))",
            values![key, from_us.div_euclid(MICROS), from_us.rem_euclid(MICROS)],
        ),
        Backend::Postgres => ("r.time_us DESC", "r.time_us >= $2", values![key, from_us]),
    };
    // Rows at or after the commit's oldest point are the commit's own but for a backfill: one
    // more than it holds finds one that is not.
    let limit = besides.len() + 1;
    let sql = format!(
        "SELECT {time}, r.value FROM raw_points r WHERE r.container_key = $1 AND {bound} ORDER BY {order} LIMIT {limit}"
    );
    let rows: Vec<(i64, f64)> = db.rows(sqlx::AssertSqlSafe(sql), values).await?;
    if let Some(found) = rows.into_iter().find(|(t, _)| besides.binary_search(t).is_err()) {
        return Ok(Some(found));
    }
    point_before(db, key, from_us).await
}
