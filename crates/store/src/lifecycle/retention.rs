//! Retention (docs/operations.md, "Retention"): how long each group keeps raw points and each
//! rollup, and the removal of what is older.
//!
//! A retention of `n` days keeps the current UTC day and the `n` whole days before it: the
//! cutoff is a UTC midnight, so it falls on a bucket boundary of every rollup and on a partition
//! boundary on PostgreSQL, where expiry drops whole partitions (`partitions`). SQLite, which has
//! one writer, deletes in slices that each hold the write lock for a bounded time, so ingest and
//! API writes wait at most one slice.

use std::time::{Duration, Instant};

use crate::database::Result;
use crate::database::db::{Db, values};
use crate::database::partitions;
use crate::database::write_turn::{self, Waiter};
use crate::sql::backend::Backend;
use crate::sql::point_time;

pub use crate::sql::expiry::{Kind, Retention, cutoff};

/// The group's own retention, if one was ever set.
pub async fn get(db: &Db, id_group: &str) -> Result<Option<Retention>> {
    let sql = "SELECT raw_days, minute_days, hour_days, day_days FROM group_retention WHERE id_group = $1";
    db.row::<Retention>(sql, values![id_group]).await
}

/// Sets the group's own retention (from then on the defaults no longer apply to it).
pub async fn set(db: &Db, id_group: &str, retention: &Retention, now: i64) -> Result<()> {
    let sql = "INSERT INTO group_retention (id_group, raw_days, minute_days, hour_days, day_days, updated_at) \
               VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id_group) DO UPDATE SET \
               raw_days = excluded.raw_days, minute_days = excluded.minute_days, \
               hour_days = excluded.hour_days, day_days = excluded.day_days, updated_at = excluded.updated_at";
    let r = retention;
    db.execute(
        sql,
        values![id_group, r.raw_days, r.minute_days, r.hour_days, r.day_days, now],
    )
    .await?;
    Ok(())
}

/// The retention in force for every group that holds series: its own, else `defaults`.
pub async fn in_force(db: &Db, defaults: &Retention) -> Result<Vec<(String, Retention)>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        id_group: String,
        own: bool,
        #[sqlx(flatten)]
        retention: Retention,
    }
    let sql = "SELECT g.id_group, r.id_group IS NOT NULL AS own, \
               r.raw_days, r.minute_days, r.hour_days, r.day_days \
               FROM (SELECT DISTINCT id_group FROM containers) AS g \
               LEFT JOIN group_retention r ON r.id_group = g.id_group ORDER BY g.id_group";
    let rows = db.rows::<Row>(sql, values![]).await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.id_group, if row.own { row.retention } else { *defaults }))
        .collect())
}

/// What one pass of [`prune`] removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Rows deleted one by one, per kind in [`Kind::ALL`] order.
    pub rows: [u64; 4],
    /// Chunks of packed points deleted: a chunk never spans a UTC day and the cutoff is a UTC
    /// midnight, so whole chunks go (`chunks`).
    pub chunks: u64,
    /// Whole partitions dropped (PostgreSQL).
    pub partitions: u64,
    /// Data sessions newly marked archived because their points passed the raw retention.
    pub sessions: u64,
    /// How long dropping partitions held the tables' locks (PostgreSQL; writes wait meanwhile).
    pub locked: Duration,
}

/// Removes every raw point and rollup older than its group's retention at `now`.
///
/// On SQLite each delete takes the write lock for about `slice` (a slice of one series, sized
/// from the time the previous slice took), so no writer waits longer than that behind it. On
/// PostgreSQL whole partitions past every group's cutoff are dropped, and rows of groups that
/// keep less than the others are deleted per series.
///
/// On PostgreSQL one node at a time runs a pass: another node's pass in progress makes this
/// one return at once, having removed nothing.
pub async fn prune(db: &Db, defaults: &Retention, now: i64, slice: Duration) -> Result<Pruned> {
    let Db::Postgres(pool) = db else {
        return prune_all(db, defaults, now, slice).await;
    };
    // A session-level lock on a connection of its own, held for the pass and released at its
    // end (or with the connection, should the pass fail).
    let mut conn = pool.acquire().await?;
    let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(PASS_LOCK)
        .fetch_one(&mut *conn)
        .await?;
    if !taken {
        return Ok(Pruned::default());
    }
    let result = prune_all(db, defaults, now, slice).await;
    if result.is_err() {
        conn.close().await?;
    } else {
        sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(PASS_LOCK)
            .execute(&mut *conn)
            .await?;
    }
    result
}

/// The lock of a retention pass on PostgreSQL (an arbitrary constant).
const PASS_LOCK: i64 = 0x6463_7265_7465; // "dcrete"

async fn prune_all(db: &Db, defaults: &Retention, now: i64, slice: Duration) -> Result<Pruned> {
    let groups = in_force(db, defaults).await?;
    let mut pruned = Pruned::default();
    // Sessions first: dropped partitions no longer tell which sessions had points in them.
    for (id_group, retention) in &groups {
        if let Some(days) = retention.raw_days {
            pruned.sessions += mark_sessions(db, id_group, cutoff(days, now), now).await?;
        }
    }
    if let Db::Postgres(pool) = db {
        let dropped = partitions::drop_expired(pool, &groups, now).await?;
        pruned.partitions = dropped.partitions;
        pruned.locked = dropped.locked;
    }
    let mut slicer = Slicer::new(slice);
    for (id_group, retention) in &groups {
        let keys = series_of(db, id_group).await?;
        for (i, kind) in Kind::ALL.into_iter().enumerate() {
            let Some(days) = kind.days(retention) else { continue };
            let before = cutoff(days, now);
            for key in &keys {
                if kind == Kind::Raw {
                    pruned.chunks += delete_chunks(db, *key, before).await?;
                }
                pruned.rows[i] += match db {
                    Db::Sqlite(pool, ..) => slicer.delete(pool, kind, *key, before).await?,
                    Db::Postgres(pool) => delete_all(pool, kind, *key, before).await?,
                };
            }
        }
    }
    Ok(pruned)
}

/// The series (container keys) of a group.
async fn series_of(db: &Db, id_group: &str) -> Result<Vec<i64>> {
    let sql = "SELECT container_key FROM containers WHERE id_group = $1 ORDER BY container_key";
    let rows = db.rows::<(i64,)>(sql, values![id_group]).await?;
    Ok(rows.into_iter().map(|(key,)| key).collect())
}

/// Marks archived, once, the group's sessions with points older than the raw cutoff, before
/// those points go: the record stays and says its points are not all kept (docs/api.md, "Data
/// sessions"). One look-up per open record in the points' session index.
async fn mark_sessions(db: &Db, id_group: &str, before: i64, now: i64) -> Result<u64> {
    let (time, unit) = Kind::Raw.time_column(db.backend());
    let sql = format!(
        "UPDATE data_sessions SET archived_at = $1 \
         WHERE id_group = $2 AND archived_at IS NULL AND (EXISTS (SELECT 1 FROM raw_points r \
         WHERE r.session_key = data_sessions.session_key AND r.{time} < $3) \
         OR EXISTS (SELECT 1 FROM point_chunks k WHERE k.session_key = data_sessions.session_key AND k.first_us < $4))"
    );
    db.execute(
        sqlx::AssertSqlSafe(sql),
        values![
            now,
            id_group,
            before.saturating_mul(unit),
            before.saturating_mul(point_time::MICROS)
        ],
    )
    .await
}

/// The chunks of one series that end before the whole second `before`: a few rows a day, each
/// in a short write of its own.
async fn delete_chunks(db: &Db, key: i64, before: i64) -> Result<u64> {
    let sql = "DELETE FROM point_chunks WHERE container_key = $1 AND last_us < $2";
    db.execute(sql, values![key, before.saturating_mul(point_time::MICROS)])
        .await
}

/// PostgreSQL: every row of one series older than `before`, in one statement (readers and
/// writers are not blocked by a delete there).
async fn delete_all(pool: &sqlx::PgPool, kind: Kind, key: i64, before: i64) -> Result<u64> {
    let (time, unit) = kind.time_column(Backend::Postgres);
    let sql = format!("DELETE FROM {} WHERE container_key = $1 AND {time} < $2", kind.table());
    Ok(sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(key)
        .bind(before.saturating_mul(unit))
        .execute(pool)
        .await?
        .rows_affected())
}

/// SQLite deletes in slices of a size that keeps each transaction near its time budget.
struct Slicer {
    budget: Duration,
    rows: i64,
}

impl Slicer {
    const FIRST: i64 = 2_000;
    const MIN: i64 = 50;
    const MAX: i64 = 500_000;

    fn new(budget: Duration) -> Slicer {
        Slicer {
            budget,
            rows: Self::FIRST,
        }
    }

    /// Deletes the rows of one series older than `before`, a slice per transaction; returns
    /// how many. Each slice waits for its write turn as a bulk writer (`write_turn`: behind the
    /// gate a log checkpoint closes, since a slice logs thousands of pages, and patiently, so
    /// that it does not cut an ingest transaction short), then takes the write lock (`BEGIN
    /// IMMEDIATE`), so the time measured is the time the lock is held, not the wait for it.
    async fn delete(&mut self, pool: &sqlx::SqlitePool, kind: Kind, key: i64, before: i64) -> Result<u64> {
        let (table, (time, _)) = (kind.table(), kind.time_column(Backend::Sqlite));
        // The slice ends at the time of its `rows`-th row (all of that second included, so
        // each slice removes at least one row), or just before `before` when fewer rows are
        // left. The end is found first and is the delete's one upper bound, so that the delete
        // walks the key range of the slice only: SQLite narrows an index range by one bound a
        // side, and a second bound (or one computed inside the delete) left it walking every
        // expired row of the series.
        let end = format!(
            "SELECT {time} FROM {table} WHERE container_key = $1 AND {time} < $2 ORDER BY {time} LIMIT 1 OFFSET $3"
        );
        let delete = format!("DELETE FROM {table} WHERE container_key = $1 AND {time} <= $2");
        // Most series have nothing to remove at most passes: found without the write lock.
        let any = format!("SELECT 1 FROM {table} WHERE container_key = $1 AND {time} < $2 LIMIT 1");
        let expired: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(any))
            .bind(key)
            .bind(before)
            .fetch_optional(pool)
            .await?;
        if expired.is_none() {
            return Ok(0);
        }
        let mut total = 0;
        loop {
            let turn = write_turn::of_pool_in_bulk(pool, Waiter::Patient).await?;
            let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
            let started = Instant::now();
            let last: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(end.as_str()))
                .bind(key)
                .bind(before)
                .bind(self.rows - 1)
                .fetch_optional(&mut *tx)
                .await?;
            let deleted = sqlx::query(sqlx::AssertSqlSafe(delete.as_str()))
                .bind(key)
                .bind(last.unwrap_or(before - 1))
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            drop(turn);
            let rows = self.rows;
            let took = started.elapsed();
            self.adapt(took, deleted);
            total += deleted;
            if deleted == 0 || (deleted as i64) < rows {
                return Ok(total);
            }
            // Writers waiting in the queue go first; the pause, nine times the slice, keeps the
            // removal to a tenth of the lock's time at most, leaving the rest to ingest
            // (docs/benchmarks.md, "Retention").
            tokio::time::sleep((self.budget / 2).max(took * 9)).await;
        }
    }

    /// Resizes the next slice towards a tenth of the budget, from the time this one took.
    fn adapt(&mut self, took: Duration, deleted: u64) {
        if deleted == 0 {
            return;
        }
        let target = self.budget / 10;
        if took < target / 2 {
            self.rows = (self.rows * 2).min(Self::MAX);
        } else if took > target {
            self.rows = (self.rows / 2).max(Self::MIN);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_grow_when_fast_and_shrink_when_slow() {
        let mut s = Slicer::new(Duration::from_millis(50));
        s.adapt(Duration::from_millis(1), 10);
        assert_eq!(s.rows, 4_000);
        s.adapt(Duration::from_millis(30), 10);
        assert_eq!(s.rows, 2_000);
        s.adapt(Duration::from_millis(4), 10);
        assert_eq!(s.rows, 2_000);
    }
}
