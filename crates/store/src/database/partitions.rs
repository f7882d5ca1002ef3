//! PostgreSQL's time partitions of raw points and rollups (docs/operations.md, "Retention"):
//! made ahead of the data, and dropped whole once every group's retention has passed them.
//!
//! The widths and names are those of migration 0009, which made the tables partitioned: a
//! partition `<table>_<YYYYMMDD>` holds the slot of `width` seconds starting that UTC day
//! (slots are aligned on the Unix epoch). A row in no partition goes to `<table>_default`.
//! Raw points' bounds are in microseconds, the unit of their time column (`point_time`);
//! [`Partition`] gives every range in seconds.

use sqlx::{PgConnection, PgPool};

use crate::database::Result;
use crate::sql::backend::Backend;
use crate::sql::expiry::{Kind, Retention, cutoff};

/// Serialises partition changes between the nodes of one service (an arbitrary constant).
const LOCK: i64 = 0x6463_7061_7274; // "dcpart"
/// How long a drop, or a make that moves rows, may wait for the table lock before it gives up
/// until the next pass: while it waits, reads and writes of the table queue behind it.
const LOCK_TIMEOUT: &str = "2s";

/// How many slots past the current one [`prepare`] makes: two days of raw points at least.
pub const AHEAD: i64 = 2;

/// The width of one partition of `kind`, in seconds.
pub fn width(kind: Kind) -> i64 {
    const DAY: i64 = 86_400;
    match kind {
        Kind::Raw => DAY,
        Kind::Minute => 7 * DAY,
        Kind::Hour => 91 * DAY,
        Kind::Day => 364 * DAY,
    }
}

/// How full a partition's pages are filled by inserts, in percent. Raw points are never updated:
/// full pages. A rollup row is updated by every ingest transaction that brings its series a
/// point of its bucket: half of each page stays free, so that the new version fits on its page
/// and the update writes no index entry (a heap-only update; migration 0011 sets the same).
fn fillfactor(kind: Kind) -> u32 {
    match kind {
        Kind::Raw => 100,
        Kind::Minute | Kind::Hour | Kind::Day => 50,
    }
}

/// The name of the partition of `kind` starting at `start`.
fn name(kind: Kind, start: i64) -> String {
    let day = time::OffsetDateTime::from_unix_timestamp(start)
        .map(|t| t.date())
        .unwrap_or(time::Date::MIN);
    format!(
        "{}_{:04}{:02}{:02}",
        kind.table(),
        day.year(),
        u8::from(day.month()),
        day.day()
    )
}

/// One partition: its table name and its range `[start, end)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    pub name: String,
    pub start: i64,
    pub end: i64,
}

/// The range partitions of `kind` (the default partition left out), oldest first.
pub async fn list(conn: &mut PgConnection, kind: Kind) -> Result<Vec<Partition>> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.relname::text, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i \
         JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass",
    )
    .bind(kind.table())
    .fetch_all(&mut *conn)
    .await?;
    let (_, unit) = kind.time_column(Backend::Postgres);
    let mut partitions: Vec<Partition> = rows
        .into_iter()
        .filter_map(|(name, bound)| {
            let (start, end) = bounds(&bound)?;
            Some(Partition {
                name,
                start: start.div_euclid(unit),
                end: end.div_euclid(unit),
            })
        })
        .collect();
    partitions.sort_by_key(|p| p.start);
    Ok(partitions)
}

/// The bytes raw points take on disk, every partition's table and indexes (docs/operations.md,
/// "Retention", sizes a store by it).
pub async fn raw_points_bytes(pool: &PgPool) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_inherits i \
         JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'raw_points'::regclass",
    )
    .fetch_one(pool)
    .await?)
}

/// The range of `FOR VALUES FROM ('a') TO ('b')`; `None` for `DEFAULT`.
fn bounds(text: &str) -> Option<(i64, i64)> {
    let number = |s: &str| -> Option<i64> {
        s.trim()
            .trim_start_matches('(')
            .trim_end_matches(')')
            .trim_matches('\'')
            .parse()
            .ok()
    };
    let rest = text.strip_prefix("FOR VALUES FROM ")?;
    let (from, to) = rest.split_once(" TO ")?;
    Some((number(from)?, number(to)?))
}

/// Makes the partitions of the slot holding `now`, the one before and the next `ahead` ones,
/// for every kind, when they do not exist yet. Rows already in the default partition for such
/// a slot are moved into it.
///
/// Rows that landed in the default partition for a slot since 2000-01-01 (points sent late,
/// for days that had no partition) get their partition too, so that the default partition,
/// which every new partition's check reads, stays small.
pub async fn prepare(pool: &PgPool, now: i64, ahead: i64) -> Result<u64> {
    let mut made = 0;
    for kind in Kind::ALL {
        let w = width(kind);
        let current = now.div_euclid(w);
        let mut slots: Vec<i64> = (current - 1..=current + ahead).collect();
        let (time, unit) = kind.time_column(Backend::Postgres);
        let late = format!(
            "SELECT DISTINCT {time} / $1 FROM {table}_default WHERE {time} >= $2 AND {time} < $3",
            table = kind.table()
        );
        let found: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(late))
            .bind(w * unit)
            .bind(EARLIEST * unit)
            .bind((current + ahead + 1) * w * unit)
            .fetch_all(pool)
            .await?;
        slots.extend(found);
        slots.sort_unstable();
        slots.dedup();
        // Made already: skipped without a transaction (`make` checks again under the lock).
        let existing = list(&mut *pool.acquire().await?, kind).await?;
        slots.retain(|slot| !existing.iter().any(|p| p.start <= slot * w && slot * w < p.end));
        for slot in slots {
            if make(pool, kind, slot * w).await? {
                made += 1;
            }
        }
    }
    Ok(made)
}

/// The first second partitions are made for (2000-01-01, as the migration): a row older than
/// that stays in the default partition.
const EARLIEST: i64 = 946_684_800;

/// Makes the partition of `kind` starting at `start`; false when it exists already.
///
/// The table is made apart, filled from the default partition, and attached: attaching locks
/// the parent only against other schema changes, not against writes, and the check
/// constraint spares the attach a scan of the new table.
///
/// Rows moved out of the default partition would be missing, for a moment, from a query that
/// started planning before the attach committed: it still knows the parent's old partitions,
/// and the default no longer holds them. So when there are rows to move (points sent late, for
/// a slot without a partition), the parent is locked against readers and writers until the
/// commit, at most [`LOCK_TIMEOUT`] long, after which the next pass tries again. A partition
/// made ahead moves nothing and locks nothing; should a late row arrive between the look and
/// the attach, the attach fails on it and the next pass moves it.
async fn make(pool: &PgPool, kind: Kind, start: i64) -> Result<bool> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(LOCK)
        .execute(&mut *tx)
        .await?;
    if list(&mut tx, kind)
        .await?
        .iter()
        .any(|p| p.start <= start && start < p.end)
    {
        return Ok(false);
    }
    let (table, (time, unit)) = (kind.table(), kind.time_column(Backend::Postgres));
    let part = name(kind, start);
    // The bounds in the time column's units.
    let (start, end) = (start * unit, (start + width(kind)) * unit);
    let late = format!("SELECT EXISTS (SELECT 1 FROM {table}_default WHERE {time} >= {start} AND {time} < {end})");
    let late: bool = sqlx::query_scalar(sqlx::AssertSqlSafe(late))
        .fetch_one(&mut *tx)
        .await?;
    let mut statements = Vec::new();
    if late {
        statements.push(format!("SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"));
        statements.push(format!("LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"));
    }
    statements.push(format!(
        "CREATE TABLE {part} (LIKE {table} INCLUDING DEFAULTS) WITH (fillfactor = {})",
        fillfactor(kind)
    ));
    statements.push(format!(
        "ALTER TABLE {part} ADD CONSTRAINT {part}_range CHECK ({time} >= {start} AND {time} < {end})"
    ));
    if late {
        statements.push(format!(
            "WITH moved AS (DELETE FROM {table}_default WHERE {time} >= {start} AND {time} < {end} RETURNING *) \
             INSERT INTO {part} SELECT * FROM moved"
        ));
    }
    statements.push(format!(
        "ALTER TABLE {table} ATTACH PARTITION {part} FOR VALUES FROM ({start}) TO ({end})"
    ));
    statements.push(format!("ALTER TABLE {part} DROP CONSTRAINT {part}_range"));
    for sql in statements {
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    tracing::info!(partition = %part, start, end, "time partition made");
    Ok(true)
}

/// What dropping expired partitions did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    pub partitions: u64,
    /// How long the parent tables were locked, detaching (writes wait meanwhile); the files
    /// are removed afterwards, with only the detached table locked.
    pub locked: std::time::Duration,
}

/// Drops every partition whose whole range is older than the cutoff of every group holding
/// series (a group keeping a kind forever keeps all of its partitions).
///
/// A partition is first detached, which changes the catalogue only and takes the parent's lock
/// for a moment, then dropped: removing gigabytes of files takes seconds, and during them no
/// write to the parent waits. A table left detached by a pass that stopped between the two
/// steps is dropped by the next pass.
pub(crate) async fn drop_expired(pool: &PgPool, groups: &[(String, Retention)], now: i64) -> Result<Dropped> {
    let mut dropped = Dropped::default();
    let mut conn = pool.acquire().await?;
    for kind in Kind::ALL {
        for table in detached(&mut conn, kind).await? {
            sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}")))
                .execute(&mut *conn)
                .await?;
            tracing::info!(partition = %table, "detached time partition dropped");
        }
        let Some(oldest_kept) = groups
            .iter()
            .map(|(_, r)| kind.days(r).map(|days| cutoff(days, now)))
            .min()
            .flatten()
        else {
            continue;
        };
        for partition in list(&mut conn, kind).await? {
            if partition.end > oldest_kept {
                break;
            }
            let started = std::time::Instant::now();
            let mut tx = pool.begin().await?;
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"
            )))
            .execute(&mut *tx)
            .await?;
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(LOCK)
                .execute(&mut *tx)
                .await?;
            let sql = format!("ALTER TABLE {} DETACH PARTITION {}", kind.table(), partition.name);
            if let Err(err) = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *tx).await {
                // 55P03 lock_not_available: writes held the table; the next pass tries again.
                if let sqlx::Error::Database(db) = &err
                    && db.code().as_deref() == Some("55P03")
                {
                    tracing::warn!(partition = %partition.name, "time partition not detached: the table stayed locked");
                    continue;
                }
                return Err(err.into());
            }
            tx.commit().await?;
            dropped.locked += started.elapsed();
            sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE {}", partition.name)))
                .execute(&mut *conn)
                .await?;
            tracing::info!(partition = %partition.name, "expired time partition dropped");
            dropped.partitions += 1;
        }
    }
    Ok(dropped)
}

/// Tables named as partitions of `kind` but attached to nothing: left by a pass that stopped
/// between detaching and dropping.
async fn detached(conn: &mut PgConnection, kind: Kind) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = current_schema() AND c.relkind = 'r' AND NOT c.relispartition \
         AND c.relname ~ ('^' || $1 || '_[0-9]{8}$')",
    )
    .bind(kind.table())
    .fetch_all(&mut *conn)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_named_after_their_first_day() {
        assert_eq!(name(Kind::Raw, 1_699_920_000), "raw_points_20231114");
        assert_eq!(name(Kind::Day, 0), "rollup_day_19700101");
    }

    #[test]
    fn bounds_are_read_from_the_catalogue_text() {
        assert_eq!(
            bounds("FOR VALUES FROM ('1699920000') TO ('1700006400')"),
            Some((1_699_920_000, 1_700_006_400))
        );
        assert_eq!(bounds("FOR VALUES FROM (-86400) TO (0)"), Some((-86_400, 0)));
        assert_eq!(bounds("DEFAULT"), None);
    }
}
