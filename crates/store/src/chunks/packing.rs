//! The packer: moves a series' closed points (older than the packing horizon) from rows of
//! `raw_points` into chunks of `point_chunks` (docs/operations.md, "Compressed chunks").
//!
//! A series is packed in transactions of at most [`ROWS_PER_TURN`] rows, oldest first. Each
//! takes the rows, the chunks they overlap and the series' last chunk before them when that one
//! is not full and of the same day (so a series packed every few minutes still grows chunks of
//! thousands of points), merges them, cuts the result again ([`super::cut`]), replaces those
//! chunks and deletes the rows. A point late for its chunk is therefore merged into it on the
//! next pass, and a time found in both a chunk and a row is kept once.
//!
//! Nothing is lost or seen twice by a reader: the rows go and the chunks come in one
//! transaction. On PostgreSQL the series' `containers` row is locked first, as the ingest
//! transaction locks it, so a point written meanwhile waits for the packer or is seen by it.

use super::codec::{self, Columns};
use super::cut::{cut, merge};
use super::{DAY_US, MAX_POINTS};
use crate::database::Result;
use crate::database::db::{Db, Tx, values};
use crate::sql::backend::Backend;
use crate::sql::point_time::{self, MICROS};

/// The rows one transaction of the packer moves at most: a bounded write turn on SQLite, which
/// the ingest writer waits for.
const ROWS_PER_TURN: usize = 50_000;

/// What a packing pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Packed {
    /// Series that had closed rows.
    pub series: usize,
    /// Rows moved into chunks.
    pub points: u64,
    /// Chunks written (new or re-packed).
    pub chunks: u64,
}

impl Packed {
    fn add(&mut self, other: Packed) {
        self.series += other.series;
        self.points += other.points;
        self.chunks += other.chunks;
    }
}

/// Packs the rows older than the whole second `before` of up to `max_series` series (those with
/// the lowest keys that have such rows); a caller that gets `max_series` series back calls again.
pub async fn pack_closed(db: &Db, before: i64, max_series: usize) -> Result<Packed> {
    let mut packed = Packed::default();
    for key in series_with_closed_rows(db, before, max_series).await? {
        loop {
            let turn = pack_series(db, key, before).await?;
            packed.add(turn);
            if turn.points < ROWS_PER_TURN as u64 {
                break;
            }
        }
        packed.series += 1;
    }
    Ok(packed)
}

/// The series with rows older than `before`: one probe of the key (series, time) each.
async fn series_with_closed_rows(db: &Db, before: i64, max_series: usize) -> Result<Vec<i64>> {
    let closed = point_time::before_second_sql(db.backend(), "r", "$1");
    let sql = format!(
        "SELECT c.container_key FROM containers c WHERE EXISTS \
         (SELECT 1 FROM raw_points r WHERE r.container_key = c.container_key AND {closed}) \
         ORDER BY c.container_key LIMIT $2"
    );
    let max = i64::try_from(max_series).unwrap_or(i64::MAX);
    let rows: Vec<(i64,)> = db.rows(sqlx::AssertSqlSafe(sql), values![before, max]).await?;
    Ok(rows.into_iter().map(|(key,)| key).collect())
}

/// One transaction of packing series `key`: up to [`ROWS_PER_TURN`] of its oldest rows before
/// `before`.
async fn pack_series(db: &Db, key: i64, before: i64) -> Result<Packed> {
    let backend = db.backend();
    let mut tx = Tx::begin_bulk(db).await?;
    tx.lock_in_order("containers", "container_key", &[key]).await?;
    let time = point_time::time_us_sql(backend, "r");
    let closed = point_time::before_second_sql(backend, "r", "$2");
    let order = match backend {
        Backend::Sqlite => "r.seconds, r.microseconds",
        Backend::Postgres => "r.time_us",
    };
    let rows: Vec<(i64, f64, Option<i64>)> = tx
        .rows(
            format!(
                "SELECT {time}, r.value, r.session_key FROM raw_points r \
                 WHERE r.container_key = $1 AND {closed} ORDER BY {order} LIMIT {ROWS_PER_TURN}"
            ),
            values![key, before],
        )
        .await?;
    let (Some(&(lo, ..)), Some(&(hi, ..))) = (rows.first(), rows.last()) else {
        tx.commit().await?;
        return Ok(Packed::default());
    };
    let mut fresh = Columns::default();
    for (t, v, s) in &rows {
        fresh.times_us.push(*t);
        fresh.values.push(*v);
        fresh.sessions.push(*s);
    }

    // The chunks the rows overlap, and the open chunk of the same day just before them.
    let mut old: Vec<(i64, Vec<u8>)> = tx
        .rows(
            format!(
                "SELECT first_us, payload FROM point_chunks WHERE container_key = $1 AND first_us > $2 - {DAY_US} \
                 AND last_us >= $2 AND first_us <= $3 ORDER BY first_us"
            ),
            values![key, lo, hi],
        )
        .await?;
    let open: Vec<(i64, Vec<u8>)> = tx
        .rows(
            format!(
                "SELECT first_us, payload FROM point_chunks WHERE container_key = $1 AND first_us < $2 \
                 AND first_us >= $3 AND points < {MAX_POINTS} ORDER BY first_us DESC LIMIT 1"
            ),
            values![key, lo, lo.div_euclid(DAY_US) * DAY_US],
        )
        .await?;
    if let Some(open) = open.into_iter().next()
        && old.first().is_none_or(|first| first.0 != open.0)
    {
        old.insert(0, open);
    }
    let mut packed_before = Columns::default();
    for (_, payload) in &old {
        let chunk = codec::unpack(payload)?;
        for i in 0..chunk.len() {
            packed_before.push_from(&chunk, i);
        }
    }
    let points = merge(&packed_before, &fresh);

    for (first, _) in &old {
        tx.execute(
            "DELETE FROM point_chunks WHERE container_key = $1 AND first_us = $2".to_string(),
            values![key, *first],
        )
        .await?;
    }
    let mut chunks = 0;
    let mut newest = i64::MIN;
    for range in cut(&points) {
        let chunk = points.slice(range);
        let (first, last) = (chunk.times_us[0], chunk.times_us[chunk.len() - 1]);
        newest = newest.max(last);
        tx.execute(
            "INSERT INTO point_chunks (container_key, first_us, last_us, points, session_key, payload) \
             VALUES ($1, $2, $3, $4, $5, $6)"
                .to_string(),
            values![
                key,
                first,
                last,
                chunk.len() as i64,
                chunk.sessions[0],
                codec::pack(&chunk)?
            ],
        )
        .await?;
        chunks += 1;
    }
    let (lo_s, hi_s) = (lo.div_euclid(MICROS), hi.div_euclid(MICROS));
    let within = point_time::seconds_within_sql(backend, "r", "$2", "$3");
    tx.execute(
        format!(
            "DELETE FROM raw_points AS r WHERE r.container_key = $1 AND {within} AND {time} >= $4 AND {time} <= $5"
        ),
        values![key, lo_s, hi_s, lo, hi],
    )
    .await?;
    tx.execute(
        "UPDATE containers SET packed_until_us = CASE WHEN packed_until_us IS NULL OR packed_until_us < $2 \
         THEN $2 ELSE packed_until_us END WHERE container_key = $1"
            .to_string(),
        values![key, newest],
    )
    .await?;
    tx.commit().await?;
    Ok(Packed {
        series: 0,
        points: rows.len() as u64,
        chunks,
    })
}
