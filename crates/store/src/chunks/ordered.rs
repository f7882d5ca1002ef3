//! Many series' points in one time order (ties by series key), a batch at a time in bounded
//! memory, whatever their number and however densely they crowd one second: what the export
//! and a data session's CSV stream (docs/api.md, "Export").
//!
//! The range is read window by window. Before a window is read, its size is known: the chunks
//! it overlaps are fetched packed (a few bytes a point) with their counts, and the rows not
//! packed yet are counted; a window that would hold far more than a batch is narrowed (down to
//! one microsecond) before anything is decoded. A chunk is decoded one at a time; the part of it
//! past the window is kept decoded for the next windows while the kept points stay under
//! [`KEPT_POINTS`], so a chunk is usually decoded once however many windows it spans.

use std::collections::HashMap;

use sea_query_sqlx::SqlxValues;

use super::DAY_US;
use super::codec;
use super::scan::{Range, key_list};
use crate::database::Result;
use crate::database::db::{Db, values};
use crate::database::snapshot::Snapshot;
use crate::sql::point_time::{self, MICROS};

/// Series read by one statement: well within SQLite's bound parameters and a statement's length.
const KEYS_PER_STATEMENT: usize = 500;

/// Most decoded points kept between windows (16 bytes each).
const KEPT_POINTS: usize = 1 << 20;

/// The widest window: a year.
const MAX_WIDTH_US: i64 = 366 * DAY_US;

/// One point of a series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Microseconds since the Unix epoch.
    pub time_us: i64,
    /// The series (`containers.container_key`).
    pub key: i64,
    pub value: f64,
}

/// The decoded rest of a chunk, past the windows already read, and the chunk as it was when
/// decoded (a chunk that has grown or gone since is decoded afresh).
struct Kept {
    last_us: i64,
    points: i64,
    times_us: Vec<i64>,
    values: Vec<f64>,
}

/// A chunk a window overlaps, as listed (without its payload).
#[derive(Clone, Copy)]
struct Listed {
    key: i64,
    first_us: i64,
    last_us: i64,
    points: i64,
}

/// The points of a set of series in `range`, oldest first, read a batch at a time.
pub struct Ordered {
    db: Db,
    keys: Vec<i64>,
    session: Option<i64>,
    range: Range,
    /// Where the next window starts.
    from: i64,
    width: i64,
    batch: usize,
    /// Decoded chunk tails by (series, chunk start).
    kept: HashMap<(i64, i64), Kept>,
    kept_points: usize,
}

impl Ordered {
    /// The points of series `keys` in `range` (of data session `session` when given), in
    /// batches of about `batch` points. `range` should be the span that holds the points: the
    /// first window starts at its beginning.
    pub fn new(db: Db, keys: &[i64], range: Range, session: Option<i64>, batch: usize) -> Ordered {
        let mut keys = keys.to_vec();
        keys.sort_unstable();
        keys.dedup();
        Ordered {
            db,
            keys,
            session,
            range,
            from: range.from_us,
            width: 60 * MICROS,
            batch: batch.max(1),
            kept: HashMap::new(),
            kept_points: 0,
        }
    }

    /// The next batch in time order (ties by series key); `None` once the range is read. A
    /// batch holds at most about twice the batch size, unless more points than that share one
    /// microsecond (one a series at most). Each window is read in one snapshot of the store.
    pub async fn next_batch(&mut self) -> Result<Option<Vec<Point>>> {
        while self.from < self.range.to_us && !self.keys.is_empty() {
            let to = Ord::min(self.from.saturating_add(self.width), self.range.to_us);
            let window = Range {
                from_us: self.from,
                to_us: to,
            };
            let mut snapshot = Snapshot::begin(&self.db).await?;
            let listed = self.list_chunks(&mut snapshot, window).await?;
            self.forget_changed(&listed);
            let fresh: Vec<Listed> = listed
                .into_iter()
                .filter(|c| !self.kept.contains_key(&(c.key, c.first_us)))
                .collect();
            let rows = self.count_rows(&mut snapshot, window).await?;
            let estimate = rows
                .saturating_add(self.kept_in(window))
                .saturating_add(prorated(&fresh, window));
            let wanted = self.batch as u64;
            if estimate > wanted.saturating_mul(2) && to - self.from > 1 {
                // Narrow before decoding anything, in proportion to the excess.
                let narrower = ((to - self.from) as f64 * wanted as f64 / estimate as f64) as i64;
                self.width = narrower.clamp(1, Ord::max((to - self.from) / 2, 1));
                continue;
            }
            let points = self.read(&mut snapshot, window, &fresh).await?;
            self.from = to;
            self.width = next_width(self.width, estimate, wanted);
            if !points.is_empty() {
                return Ok(Some(points));
            }
        }
        Ok(None)
    }

    /// Drops the kept tails of chunks that changed (grew, were re-packed with a late point) or
    /// went (retention) since they were decoded: every kept chunk overlaps the next window, so
    /// it is in `listed` as long as it is stored.
    fn forget_changed(&mut self, listed: &[Listed]) {
        let current: HashMap<(i64, i64), (i64, i64)> = listed
            .iter()
            .map(|c| ((c.key, c.first_us), (c.last_us, c.points)))
            .collect();
        let stale: Vec<(i64, i64)> = self
            .kept
            .iter()
            .filter(|(at, k)| current.get(at) != Some(&(k.last_us, k.points)))
            .map(|(at, _)| *at)
            .collect();
        for at in stale {
            if let Some(k) = self.kept.remove(&at) {
                self.kept_points -= k.times_us.len();
            }
        }
    }

    /// The points kept decoded that fall in `window`.
    fn kept_in(&self, window: Range) -> u64 {
        let in_window = |k: &Kept| k.times_us.partition_point(|t| *t < window.to_us);
        self.kept.values().map(|k| in_window(k) as u64).sum()
    }

    /// The stored chunks of the series that overlap `window`, without their payloads.
    async fn list_chunks(&self, snapshot: &mut Snapshot, window: Range) -> Result<Vec<Listed>> {
        let by_session = if self.session.is_some() {
            "AND session_key = $3"
        } else {
            ""
        };
        // A chunk spans less than a day, so `first_us` bounds the key's range from below too.
        let from = window.from_us.max(i64::MIN + DAY_US);
        let mut out = Vec::new();
        for part in self.keys.chunks(KEYS_PER_STATEMENT) {
            let sql = format!(
                "SELECT container_key, first_us, last_us, points FROM point_chunks \
                 WHERE container_key IN ({}) AND first_us > $1 - {DAY_US} AND last_us >= $1 AND first_us < $2 {by_session}",
                key_list(part)
            );
            let values = match self.session {
                Some(s) => values![from, window.to_us, s],
                None => values![from, window.to_us],
            };
            let rows: Vec<(i64, i64, i64, i64)> = snapshot.rows(sql, values).await?;
            out.extend(rows.into_iter().map(|(key, first_us, last_us, points)| Listed {
                key,
                first_us,
                last_us,
                points,
            }));
        }
        Ok(out)
    }

    /// The payloads of `chunks`, in their order.
    async fn payloads(&self, snapshot: &mut Snapshot, chunks: &[Listed]) -> Result<Vec<(Listed, Vec<u8>)>> {
        let mut out = Vec::with_capacity(chunks.len());
        for part in chunks.chunks(KEYS_PER_STATEMENT) {
            let pairs: Vec<String> = part.iter().map(|c| format!("({}, {})", c.key, c.first_us)).collect();
            let sql = format!(
                "SELECT container_key, first_us, payload FROM point_chunks \
                 WHERE (container_key, first_us) IN (VALUES {})",
                pairs.join(", ")
            );
            let rows: Vec<(i64, i64, Vec<u8>)> = snapshot.rows(sql, values![]).await?;
            let mut by_start: HashMap<(i64, i64), Vec<u8>> = rows
                .into_iter()
                .map(|(key, first_us, payload)| ((key, first_us), payload))
                .collect();
            for c in part {
                if let Some(payload) = by_start.remove(&(c.key, c.first_us)) {
                    out.push((*c, payload));
                }
            }
        }
        Ok(out)
    }

    /// How many rows not packed yet lie in `window`.
    async fn count_rows(&self, snapshot: &mut Snapshot, window: Range) -> Result<u64> {
        let mut total = 0u64;
        for part in self.keys.chunks(KEYS_PER_STATEMENT) {
            let (sql, values) = self.rows_sql("COUNT(*)", part, window);
            let counted: Vec<(i64,)> = snapshot.rows(sql, values).await?;
            let n = counted.first().map_or(0, |(n,)| *n);
            total = total.saturating_add(u64::try_from(n).unwrap_or(0));
        }
        Ok(total)
    }

    /// A select of `what` over the rows of series `keys` in `window` (and the session).
    fn rows_sql(&self, what: &str, keys: &[i64], window: Range) -> (String, SqlxValues) {
        let (within, taken) = point_time::micros_within_sql(self.db.backend(), "r");
        let by_session = if self.session.is_some() {
            format!("AND r.session_key = ${}", taken + 1)
        } else {
            String::new()
        };
        let sql = format!(
            "SELECT {what} FROM raw_points r WHERE r.container_key IN ({}) AND {within} {by_session}",
            key_list(keys)
        );
        let limit = i64::MAX / MICROS - 1;
        let seconds = [
            window.from_us.div_euclid(MICROS).clamp(-limit, limit),
            window.to_us.saturating_sub(1).div_euclid(MICROS).clamp(-limit, limit),
        ];
        let mut list: Vec<sea_query::Value> = vec![window.from_us.into(), window.to_us.into()];
        list.extend(seconds.iter().take(taken - 2).map(|s| sea_query::Value::from(*s)));
        list.extend(self.session.map(sea_query::Value::from));
        (sql, SqlxValues(sea_query::Values(list)))
    }

    /// Every point in `window`, sorted: the kept tails, the chunks decoded one at a time (their
    /// parts past the window kept while there is room) and the rows.
    async fn read(&mut self, snapshot: &mut Snapshot, window: Range, fresh: &[Listed]) -> Result<Vec<Point>> {
        let mut points = Vec::new();
        // Packed points first: of a time stored both packed and as a row the packed one stays,
        // as in `scan`.
        let mut finished = Vec::new();
        for (&(key, first_us), kept) in &mut self.kept {
            let n = kept.times_us.partition_point(|t| *t < window.to_us);
            points.extend((0..n).map(|i| Point {
                time_us: kept.times_us[i],
                key,
                value: kept.values[i],
            }));
            kept.times_us.drain(..n);
            kept.values.drain(..n);
            self.kept_points -= n;
            if kept.times_us.is_empty() {
                finished.push((key, first_us));
            }
        }
        for done in finished {
            self.kept.remove(&done);
        }
        for (chunk, payload) in self.payloads(snapshot, fresh).await? {
            let columns = codec::unpack(&payload)?;
            let start = columns.times_us.partition_point(|t| *t < window.from_us);
            let end = columns.times_us.partition_point(|t| *t < window.to_us);
            points.extend((start..end).map(|i| Point {
                time_us: columns.times_us[i],
                key: chunk.key,
                value: columns.values[i],
            }));
            let rest = columns.len() - end;
            if rest > 0 && self.kept_points + rest <= KEPT_POINTS {
                self.kept_points += rest;
                self.kept.insert(
                    (chunk.key, chunk.first_us),
                    Kept {
                        last_us: chunk.last_us,
                        points: chunk.points,
                        times_us: columns.times_us[end..].to_vec(),
                        values: columns.values[end..].to_vec(),
                    },
                );
            }
        }
        let time = point_time::time_us_sql(self.db.backend(), "r");
        for part in self.keys.chunks(KEYS_PER_STATEMENT) {
            let (sql, values) = self.rows_sql(&format!("r.container_key, {time}, r.value"), part, window);
            let rows: Vec<(i64, i64, f64)> = snapshot.rows(sql, values).await?;
            points.extend(
                rows.into_iter()
                    .map(|(key, time_us, value)| Point { time_us, key, value }),
            );
        }
        // Stable, so that the packed point of a time stored twice comes first and stays.
        points.sort_by_key(|p| (p.time_us, p.key));
        points.dedup_by_key(|p| (p.time_us, p.key));
        Ok(points)
    }
}

/// The points of `chunks` expected in `window`, each chunk's spread evenly over its span.
fn prorated(chunks: &[Listed], window: Range) -> u64 {
    chunks
        .iter()
        .map(|c| {
            let span = (c.last_us - c.first_us).max(0) as f64 + 1.0;
            let overlap = (Ord::min(c.last_us.saturating_add(1), window.to_us) - Ord::max(c.first_us, window.from_us))
                .max(0) as f64;
            (c.points.max(0) as f64 * (overlap / span).min(1.0)).ceil() as u64
        })
        .sum()
}

/// The width of the next window from how many points this one held: towards the batch size,
/// growing at most eightfold at a time (a gap is crossed in a few steps).
fn next_width(width: i64, held: u64, wanted: u64) -> i64 {
    let factor = if held == 0 {
        8.0
    } else {
        (wanted as f64 / held as f64).clamp(0.25, 8.0)
    };
    ((width as f64 * factor) as i64).clamp(1, MAX_WIDTH_US)
}
