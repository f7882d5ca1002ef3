//! The retention task (docs/operations.md, "Retention"): every `DEVICECLOUD_RETENTION_INTERVAL_S`
//! it makes PostgreSQL's coming time partitions and removes what is past each group's
//! retention. On PostgreSQL one node at a time runs a pass (the store takes an advisory lock).

use std::time::{Duration, Instant};

use devicecloud_store::{Db, partitions, retention, unix_now};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What the retention task works with.
pub struct Context {
    /// The background writers' pool.
    pub db: Db,
    /// The retention of groups without their own.
    pub defaults: retention::Retention,
    /// How often a pass runs.
    pub interval: Duration,
}

/// The longest a slice of an SQLite delete holds the write lock.
pub const SLICE: Duration = Duration::from_millis(50);

/// Rows removed one by one, by `kind` (raw, minute, hour, day).
pub const ROWS: &str = "devicecloud_retention_rows_removed_total";
/// Time partitions dropped whole (PostgreSQL).
pub const PARTITIONS: &str = "devicecloud_retention_partitions_dropped_total";

/// Starts the task on `tracker`; it stops when `shutdown` is cancelled, a pass in progress with it.
pub fn spawn(ctx: Context, tracker: &TaskTracker, shutdown: &CancellationToken) {
    let shutdown = shutdown.clone();
    tracker.spawn(async move {
        let mut every = crate::periodic::Every::new(ctx.interval, &shutdown);
        while every.tick().await {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = pass(&ctx.db, &ctx.defaults) => {}
            }
        }
    });
}

/// One pass: partitions ahead, then the removal; failures are logged and retried next pass.
pub async fn pass(db: &Db, defaults: &retention::Retention) {
    let started = Instant::now();
    let now = unix_now();
    if let Db::Postgres(pool) = db
        && let Err(e) = partitions::prepare(pool, now, partitions::AHEAD).await
    {
        tracing::warn!(error = %e, "time partitions could not be made");
    }
    match retention::prune(db, defaults, now, SLICE).await {
        Ok(pruned) => {
            for (kind, rows) in ["raw", "minute", "hour", "day"].into_iter().zip(pruned.rows) {
                metrics::counter!(ROWS, "kind" => kind).increment(rows);
            }
            metrics::counter!(PARTITIONS).increment(pruned.partitions);
            if pruned != retention::Pruned::default() {
                tracing::info!(
                    raw = pruned.rows[0],
                    minute = pruned.rows[1],
                    hour = pruned.rows[2],
                    day = pruned.rows[3],
                    partitions = pruned.partitions,
                    locked_ms = pruned.locked.as_millis() as u64,
                    sessions = pruned.sessions,
                    took_ms = started.elapsed().as_millis() as u64,
                    "expired data removed"
                );
            }
        }
        Err(e) => tracing::warn!(error = %e, "retention pass failed"),
    }
}
