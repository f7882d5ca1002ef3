//! SQLite's write-ahead log, copied into the database by a task of its own.
//!
//! By default SQLite checkpoints inside the commit that grows the log past its limit: that
//! commit copies every page logged since the last checkpoint into the database and syncs both
//! files, which took up to a second under full ingest, and the writer that drew it held its
//! write turn (`write_turn`) all that time while every other writer waited. So every connection
//! opens with automatic checkpoints off, and this task checkpoints instead, often and beside
//! the writers: a `PASSIVE` checkpoint takes no write lock and blocks neither writers nor
//! readers (docs/operations.md, "Storage").
//!
//! A checkpoint beside the writers never catches up with them: by the time it ends, more has
//! been committed, and the log starts over only once a checkpoint copied all of it. So when the
//! log passes [`RESET_BYTES`], the task closes the bulk gate (`write_turn::Gate`) against the
//! bulk writers (the ingest writer and the retention's removal), which write nearly all of the
//! log, and checkpoints then: it copies the last pages (those since its previous pass, a
//! quarter of a second's worth) and the next commit writes the log from its start. Small writes
//! (API calls, device status) do not wait for it: one that commits during the pass leaves a few
//! pages behind it, which the task copies in another pass before it opens the gate (a few such
//! passes at most; past them the log starts over at a later checkpoint). A reader still on the
//! old log keeps it from starting over too; past [`RESTART_BYTES`] the task makes a `RESTART`
//! checkpoint in the write turn, which waits for those readers and keeps out every writer.

use std::time::Duration;

use sqlx::SqlitePool;

use crate::database::Result;
use crate::database::write_turn::{self, Waiter};

/// How often the log is copied. Under full ingest the log grows by up to a few hundred
/// megabytes a second (a commit logs every page it changed): a quarter of a second keeps each
/// checkpoint short.
pub const EVERY: Duration = Duration::from_millis(250);

/// A log longer than this is checkpointed in the write turn, so that it starts over.
pub const RESET_BYTES: i64 = 64 << 20;

/// A log longer than this waits for its readers to start over (see the module documentation).
pub const RESTART_BYTES: i64 = 1 << 30;

/// The log's length left after it starts over (`journal_size_limit`): the file is cut back to
/// this instead of keeping the largest size it ever had.
pub const KEEP_BYTES: &str = "67108864";

/// How a checkpoint runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Beside the writers (`PASSIVE`, no turn).
    Beside,
    /// With the bulk gate closed (`PASSIVE`, again while small writes committed during the
    /// pass before): copies all of the log, which starts over at the next commit unless a
    /// reader is still on it or small writes kept committing through every pass.
    Gated,
    /// In the write turn (`RESTART`): also waits for the readers of the log.
    Restart,
}

/// What one checkpoint found and did, in pages (frames) of the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct Checkpoint {
    /// Whether a reader or another checkpoint kept it from finishing.
    pub busy: i64,
    /// Pages in the log.
    pub log: i64,
    /// Pages of the log now in the database.
    pub checkpointed: i64,
}

/// Copies the log's committed pages into the database now.
pub async fn checkpoint(pool: &SqlitePool, mode: Mode) -> Result<Checkpoint> {
    let sql = match mode {
        Mode::Beside | Mode::Gated => "PRAGMA wal_checkpoint(PASSIVE)",
        Mode::Restart => "PRAGMA wal_checkpoint(RESTART)",
    };
    let (_gate, _turn) = match mode {
        Mode::Beside => (None, None),
        Mode::Gated => (Some(write_turn::gate_of_pool(pool).await?), None),
        Mode::Restart => (None, Some(write_turn::of_pool(pool, Waiter::Patient).await?)),
    };
    let mut done: Checkpoint = sqlx::query_as(sql).fetch_one(pool).await?;
    if mode == Mode::Gated {
        // A small write that committed during the pass left its pages behind it, and the log
        // does not start over until they are copied: the next pass, with the gate still
        // closed, copies those few pages. Without it the log grew past 1 GB under full ingest,
        // an API write every 50 ms and the retention's removal, and ended in a `RESTART` that
        // kept every writer out (docs/benchmarks.md, "Retention").
        // The next pass finds the log longer when pages were committed during the one before;
        // as long when nobody wrote (and had nothing left to copy), shorter when it started over.
        for _ in 1..GATED_PASSES {
            let again: Checkpoint = sqlx::query_as(sql).fetch_one(pool).await?;
            let grew = again.log > done.log;
            done = again;
            if !grew {
                break;
            }
        }
    }
    Ok(done)
}

/// Most passes of one [`Mode::Gated`] checkpoint: small writes that keep committing during
/// each pass leave the log to a later checkpoint rather than hold the bulk writers back.
const GATED_PASSES: usize = 4;

/// Checkpoints every [`EVERY`] until the pool is closed. Failures are logged and retried.
pub(crate) async fn checkpointer(pool: SqlitePool) {
    let page_bytes: i64 = match sqlx::query_scalar("PRAGMA page_size").fetch_one(&pool).await {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::error!(error = %e, "the write-ahead log checkpointer could not start");
            return;
        }
    };
    let mut mode = Mode::Beside;
    while !pool.is_closed() {
        if mode == Mode::Beside {
            tokio::time::sleep(EVERY).await;
        }
        if pool.is_closed() {
            break;
        }
        mode = match checkpoint(&pool, mode).await {
            Ok(done) => next(mode, done.log * page_bytes),
            Err(e) if pool.is_closed() => {
                tracing::debug!(error = %e, "checkpoint after close");
                Mode::Beside
            }
            Err(e) => {
                tracing::warn!(error = %e, "write-ahead log checkpoint failed");
                Mode::Beside
            }
        };
    }
}

/// The next checkpoint after one of `mode` found a log of `bytes`: in the turn right away when
/// the log is long, beside the writers after a pause otherwise.
fn next(mode: Mode, bytes: i64) -> Mode {
    match mode {
        Mode::Beside if bytes > RESTART_BYTES => Mode::Restart,
        Mode::Beside if bytes > RESET_BYTES => Mode::Gated,
        _ => Mode::Beside,
    }
}

#[cfg(test)]
mod tests {
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

    use super::*;

    async fn pool() -> (SqlitePool, std::path::PathBuf) {
        let file = std::env::temp_dir().join(format!("dc-wal-{}.db", crate::database::new_id()));
        let options = SqliteConnectOptions::new()
            .filename(&file)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal);
        let pool = SqlitePoolOptions::new()
            .max_connections(2)
            .connect_with(options)
            .await
            .unwrap();
        sqlx::query("CREATE TABLE t (v INTEGER)").execute(&pool).await.unwrap();
        (pool, file)
    }

    #[tokio::test]
    async fn the_checkpoint_that_resets_the_log_does_not_wait_for_a_small_write() {
        let (pool, file) = pool().await;
        let turn = write_turn::of_pool(&pool, Waiter::Prompt).await.unwrap();
        let gated = tokio::time::timeout(Duration::from_secs(2), checkpoint(&pool, Mode::Gated)).await;
        assert!(gated.is_ok(), "a gated checkpoint ran while a write held its turn");
        let restart = tokio::time::timeout(Duration::from_millis(200), checkpoint(&pool, Mode::Restart)).await;
        assert!(restart.is_err(), "a RESTART checkpoint waits for the write turn");
        drop(turn);
        pool.close().await;
        let _ = std::fs::remove_file(&file);
    }
}
