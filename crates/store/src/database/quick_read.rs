//! Short reads on SQLite run on the calling thread (docs/benchmarks.md, "API").
//!
//! sqlx runs every SQLite statement on a worker thread of its connection and hands the command
//! there and the answer back, each hand-off a wake-up of a sleeping thread. For a collection
//! page that SQLite answers in 30 µs, those two wake-ups and their context switches cost more
//! than the statement: a third of the server's time under `bench api --distinct`. A page is
//! therefore first tried here, on a connection of this module, right where the request is
//! served.
//!
//! Only what stays short is allowed to stay: a statement that runs longer than
//! [`INLINE_LIMIT`], or finds the database busy, is interrupted and the caller goes the usual
//! way (the request pool, with its query timeout). The worker thread of the async runtime is
//! never held longer than that, and a read's answer does not depend on which way it went: both
//! read the same committed state of the same file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OpenFlags};
use sea_query::Value;

/// How long a statement may run on the calling thread before it is interrupted and handed to
/// the request pool. A page of a collection takes 20–100 µs; a scan that takes longer belongs on
/// a thread of its own.
pub(crate) const INLINE_LIMIT: Duration = Duration::from_millis(2);

/// Short reads counted by the way they went: `here` (on the calling thread) or `pool` (handed
/// to the request pool), so an operator sees how often the limit sends reads the long way.
const METRIC: &str = "devicecloud_store_short_reads_total";

/// Virtual-machine steps between two checks of the clock: a few microseconds of work.
const STEPS_BETWEEN_CHECKS: i32 = 1000;

/// Connections kept open: one per runtime worker thread is what is ever in use at once (a
/// statement here never awaits); a caller who finds none free goes the usual way.
const MAX_CONNECTIONS: usize = 8;

/// Prepared statements remembered per connection (collection pages differ by filter shape).
const STATEMENT_CACHE: usize = 64;

/// A few connections to one SQLite file for [`QuickReads::read`].
#[derive(Debug)]
pub struct QuickReads {
    path: PathBuf,
    idle: Mutex<Vec<Quick>>,
}

/// A connection and the start time its progress handler measures from.
#[derive(Debug)]
struct Quick {
    conn: Connection,
    started: Arc<AtomicU64>,
}

impl QuickReads {
    /// Reads of the database file at `path`; `None` for a database that is no file (in memory),
    /// which another connection would not see.
    pub(crate) fn new(path: &Path) -> Option<Arc<QuickReads>> {
        path.is_file().then(|| {
            Arc::new(QuickReads {
                path: path.to_path_buf(),
                idle: Mutex::new(Vec::new()),
            })
        })
    }

    /// Runs `read` on one of the connections with `sql` prepared and `values` bound, if it
    /// finishes within [`INLINE_LIMIT`]. `None` sends the caller the usual way: the statement
    /// ran longer or found the database busy, no connection was free, a value is of a kind this
    /// path does not bind, the statement uses the `like` filter's REGEXP (sqlx's function, on
    /// its connections only; such a filter scans anyway), or SQLite refused it (the usual way
    /// then reports that with its own error).
    pub(crate) fn read<T>(
        &self,
        sql: &str,
        values: &[Value],
        read: impl FnOnce(&mut rusqlite::Rows<'_>) -> rusqlite::Result<T>,
    ) -> Option<T> {
        let answer = self.try_read(sql, values, read);
        let way = if answer.is_some() { "here" } else { "pool" };
        metrics::counter!(METRIC, "way" => way).increment(1);
        answer
    }

    fn try_read<T>(
        &self,
        sql: &str,
        values: &[Value],
        read: impl FnOnce(&mut rusqlite::Rows<'_>) -> rusqlite::Result<T>,
    ) -> Option<T> {
        if sql.contains("REGEXP") {
            return None;
        }
        let params = values.iter().map(bindable).collect::<Option<Vec<_>>>()?;
        let quick = self.take()?;
        quick.started.store(now_ns(), Ordering::Relaxed);
        let result = (|| {
            let mut statement = quick.conn.prepare_cached(sql)?;
            let mut rows = statement.query(rusqlite::params_from_iter(params))?;
            read(&mut rows)
        })();
        self.give_back(quick);
        result
            .inspect_err(|e| {
                if !matches!(
                    e.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::OperationInterrupted | rusqlite::ErrorCode::DatabaseBusy)
                ) {
                    tracing::debug!(error = %e, "a short read failed; it is tried the usual way");
                }
            })
            .ok()
    }

    /// A free connection, opened if there are fewer than [`MAX_CONNECTIONS`].
    fn take(&self) -> Option<Quick> {
        let mut idle = self.idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(quick) = idle.pop() {
            return Some(quick);
        }
        drop(idle);
        // Opening is rare (once per connection ever kept) and takes about 100 µs.
        self.open()
            .inspect_err(|e| tracing::warn!(error = %e, "a connection for short reads could not be opened"))
            .ok()
    }

    fn give_back(&self, quick: Quick) {
        let mut idle = self.idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if idle.len() < MAX_CONNECTIONS {
            idle.push(quick);
        }
    }

    /// A connection that only reads, never waits for a lock (busy: go the usual way), and is
    /// interrupted after [`INLINE_LIMIT`]; with the page cache size of the other connections.
    fn open(&self) -> rusqlite::Result<Quick> {
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.execute_batch("PRAGMA query_only = ON; PRAGMA cache_size = -8000; PRAGMA temp_store = MEMORY;")?;
        conn.busy_timeout(Duration::ZERO)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let started = Arc::new(AtomicU64::new(now_ns()));
        let clock = started.clone();
        let limit = INLINE_LIMIT.as_nanos() as u64;
        conn.progress_handler(
            STEPS_BETWEEN_CHECKS,
            Some(move || now_ns().saturating_sub(clock.load(Ordering::Relaxed)) > limit),
        )?;
        Ok(Quick { conn, started })
    }
}

/// A sea-query value as SQLite binds it, as sqlx would bind it; `None` for a kind this path
/// leaves to sqlx.
fn bindable(value: &Value) -> Option<SqlValue> {
    let int = |v: Option<i64>| Some(v.map_or(SqlValue::Null, SqlValue::Integer));
    match value {
        Value::Bool(v) => int(v.map(i64::from)),
        Value::TinyInt(v) => int(v.map(i64::from)),
        Value::SmallInt(v) => int(v.map(i64::from)),
        Value::Int(v) => int(v.map(i64::from)),
        Value::BigInt(v) => int(*v),
        Value::TinyUnsigned(v) => int(v.map(i64::from)),
        Value::SmallUnsigned(v) => int(v.map(i64::from)),
        Value::Unsigned(v) => int(v.map(i64::from)),
        Value::BigUnsigned(v) => match v {
            Some(v) => i64::try_from(*v).ok().map(SqlValue::Integer),
            None => Some(SqlValue::Null),
        },
        Value::Float(v) => Some(v.map_or(SqlValue::Null, |f| SqlValue::Real(f64::from(f)))),
        Value::Double(v) => Some(v.map_or(SqlValue::Null, SqlValue::Real)),
        Value::String(v) => Some(v.as_ref().map_or(SqlValue::Null, |s| SqlValue::Text(s.clone()))),
        Value::Char(v) => Some(v.map_or(SqlValue::Null, |c| SqlValue::Text(c.to_string()))),
        Value::Bytes(v) => Some(v.as_ref().map_or(SqlValue::Null, |b| SqlValue::Blob(b.clone()))),
        _ => None,
    }
}

/// Nanoseconds since a fixed point of this process.
fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database file of its own, removed afterwards.
    struct File(PathBuf);

    impl File {
        fn new(name: &str) -> File {
            let path = std::env::temp_dir().join(format!("devicecloud-quick-{}-{name}.db", std::process::id()));
            let _ = std::fs::remove_file(&path);
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (n INTEGER, s TEXT); INSERT INTO t VALUES (1, 'one'), (2, 'two');")
                .unwrap();
            File(path)
        }
    }

    impl Drop for File {
        fn drop(&mut self) {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
            }
        }
    }

    fn count(rows: &mut rusqlite::Rows<'_>) -> rusqlite::Result<i64> {
        rows.next()?.ok_or(rusqlite::Error::QueryReturnedNoRows)?.get(0)
    }

    #[test]
    fn a_short_read_is_answered_with_its_values_bound() {
        let file = File::new("short");
        let quick = QuickReads::new(&file.0).unwrap();
        let sql = "SELECT COUNT(*) FROM t WHERE n >= ? AND s <> ?";
        let got = quick.read(sql, &[Value::BigInt(Some(2)), Value::String(Some("x".into()))], count);
        assert_eq!(got, Some(1));
        // The connection went back and serves the next read.
        assert_eq!(quick.read("SELECT COUNT(*) FROM t", &[], count), Some(2));
        assert_eq!(quick.idle.lock().unwrap().len(), 1);
    }

    #[test]
    fn a_long_read_is_interrupted_and_left_to_the_usual_way() {
        let file = File::new("long");
        let quick = QuickReads::new(&file.0).unwrap();
        let started = Instant::now();
        let endless = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 1000000000) SELECT COUNT(*) FROM c";
        assert_eq!(quick.read(endless, &[], count), None);
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "{:?}",
            started.elapsed()
        );
        // The interrupted connection still serves reads.
        assert_eq!(quick.read("SELECT COUNT(*) FROM t", &[], count), Some(2));
    }

    #[test]
    fn what_this_path_cannot_do_is_left_to_the_usual_way() {
        let file = File::new("other");
        let quick = QuickReads::new(&file.0).unwrap();
        // sqlx's REGEXP is not registered here.
        assert_eq!(
            quick.read("SELECT COUNT(*) FROM t WHERE s REGEXP 'o'", &[], count),
            None
        );
        // A write is refused: these connections only read.
        assert_eq!(
            quick.read("INSERT INTO t VALUES (3, 'three') RETURNING n", &[], count),
            None
        );
        assert_eq!(quick.read("SELECT COUNT(*) FROM t", &[], count), Some(2));
        // A database that is no file has no connections of this module.
        assert!(QuickReads::new(Path::new(":memory:")).is_none());
    }
}
