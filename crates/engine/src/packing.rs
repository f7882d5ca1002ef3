//! The packing task (docs/operations.md, "Compressed chunks"): every `DEVICECLOUD_PACK_INTERVAL_S`
//! it packs the raw points older than `DEVICECLOUD_PACK_AFTER_S` into their series' chunks
//! (`devicecloud_store::chunks`). Several nodes may run it at once: a series is packed under its
//! row's lock, so a second packer finds nothing left to do.

use std::time::{Duration, Instant};

use devicecloud_store::{Db, chunks, unix_now};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What the packing task works with.
pub struct Context {
    /// The background writers' pool.
    pub db: Db,
    /// How old a point gets before it is packed.
    pub after: Duration,
    /// How often a pass runs.
    pub interval: Duration,
}

/// Series one call of the store packs before the task looks at the shutdown again.
const SERIES_PER_CALL: usize = 256;

/// Points moved from rows into chunks.
pub const POINTS: &str = "devicecloud_packed_points_total";
/// Chunks written (new or re-packed).
pub const CHUNKS: &str = "devicecloud_packed_chunks_total";

/// Starts the task on `tracker`; it stops when `shutdown` is cancelled, between two series.
pub fn spawn(ctx: Context, tracker: &TaskTracker, shutdown: &CancellationToken) {
    let shutdown = shutdown.clone();
    tracker.spawn(async move {
        let mut every = crate::periodic::Every::new(ctx.interval, &shutdown);
        while every.tick().await {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = pass(&ctx.db, ctx.after) => {}
            }
        }
    });
}

/// One pass: every series with points older than `after`, a batch of series at a time;
/// failures are logged and retried next pass.
pub async fn pass(db: &Db, after: Duration) {
    let started = Instant::now();
    let before = unix_now().saturating_sub(i64::try_from(after.as_secs()).unwrap_or(i64::MAX));
    let mut total = chunks::Packed::default();
    loop {
        match chunks::pack_closed(db, before, SERIES_PER_CALL).await {
            Ok(packed) => {
                metrics::counter!(POINTS).increment(packed.points);
                metrics::counter!(CHUNKS).increment(packed.chunks);
                total.series += packed.series;
                total.points += packed.points;
                total.chunks += packed.chunks;
                if packed.series < SERIES_PER_CALL {
                    break;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "packing pass failed");
                return;
            }
        }
    }
    if total.points > 0 {
        tracing::info!(
            series = total.series,
            points = total.points,
            chunks = total.chunks,
            took_ms = started.elapsed().as_millis() as u64,
            "points packed into chunks"
        );
    }
}
