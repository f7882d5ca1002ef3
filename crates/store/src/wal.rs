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
//! A passive checkpoint never waits for readers, so with readers always busy the log could be
//! copied but never start over and keep growing. Past [`RESTART_BYTES`] the task waits for its
//! write turn and makes a `RESTART` checkpoint, which waits for the readers of the old log to
//! finish, so the next commit writes the log from its start again.

use std::time::Duration;

use sqlx::SqlitePool;

use crate::Result;
use crate::write_turn::{self};

/// How often the log is copied. At a million points a second the log grows about 20 MB a second:
/// a quarter of a second keeps each checkpoint to a few megabytes.
pub const EVERY: Duration = Duration::from_millis(250);

/// A log longer than this starts over at the next commit (see the module documentation).
pub const RESTART_BYTES: i64 = 256 << 20;

/// The log's length left after it starts over (`journal_size_limit`): the file is cut back to
/// this instead of keeping the largest size it ever had.
pub const KEEP_BYTES: &str = "67108864";

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

/// Copies the log's committed pages into the database now, beside the writers; with `restart`,
/// in the write turn, waiting for the readers of the log so that it starts over.
pub async fn checkpoint(pool: &SqlitePool, restart: bool) -> Result<Checkpoint> {
    if restart {
        let options = pool.connect_options();
        let _turn = write_turn::take(options.get_filename(), pool.options().get_acquire_timeout()).await?;
        return Ok(sqlx::query_as("PRAGMA wal_checkpoint(RESTART)").fetch_one(pool).await?);
    }
    Ok(sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)").fetch_one(pool).await?)
}

/// Checkpoints every [`EVERY`] until the pool is closed. Failures are logged and retried.
pub(crate) async fn checkpointer(pool: SqlitePool) {
    let page_bytes: i64 = match sqlx::query_scalar("PRAGMA page_size").fetch_one(&pool).await {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::error!(error = %e, "the write-ahead log checkpointer could not start");
            return;
        }
    };
    let mut restart = false;
    while !pool.is_closed() {
        tokio::time::sleep(EVERY).await;
        if pool.is_closed() {
            break;
        }
        match checkpoint(&pool, restart).await {
            Ok(done) => restart = done.log * page_bytes > RESTART_BYTES,
            Err(e) if pool.is_closed() => tracing::debug!(error = %e, "checkpoint after close"),
            Err(e) => tracing::warn!(error = %e, "write-ahead log checkpoint failed"),
        }
    }
}
