//! The store's upkeep that no request asks for: `device_status` kept current by the service
//! rather than computed on read (docs/operations.md), and expired tokens, dashboard sign-ins and
//! what dead firmware uploads left removed so their tables do not grow without bound.

use std::time::Duration;

use devicecloud_store::{Db, devices, firmware, sign_in_sessions, tokens, unix_now};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::periodic::Every;

/// How often `device_status` is refreshed.
const STATUS_EVERY: Duration = Duration::from_secs(5);
/// How often expired tokens and sign-ins are pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);
/// How long an expired token is kept: a refresh of a just-expired token stays possible.
const EXPIRED_TOKENS_KEPT_S: i64 = 86_400;
/// How old an unfinished firmware upload gets before it is taken for dead (its process was
/// killed, or its client went away): longer than any upload takes.
const STALE_UPLOAD_S: i64 = 3600;

/// Starts both upkeep loops on `tracker`, working through `writer` (the background writers'
/// pool); they stop when `shutdown` is cancelled.
pub fn spawn(writer: Db, tracker: &TaskTracker, shutdown: &CancellationToken) {
    let (db, stop) = (writer.clone(), shutdown.clone());
    tracker.spawn(async move {
        let mut every = Every::new(STATUS_EVERY, &stop);
        while every.tick().await {
            if let Err(e) = devices::refresh_status(&db, unix_now()).await {
                tracing::warn!(error = %e, "device status refresh failed");
            }
        }
    });
    let (db, stop) = (writer, shutdown.clone());
    tracker.spawn(async move {
        let mut every = Every::new(PRUNE_EVERY, &stop);
        while every.tick().await {
            let now = unix_now();
            match tokens::prune(&db, now - EXPIRED_TOKENS_KEPT_S).await {
                Ok(n) if n > 0 => tracing::info!(removed = n, "expired tokens pruned"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "token pruning failed"),
            }
            if let Err(e) = sign_in_sessions::prune(&db, now).await {
                tracing::warn!(error = %e, "dashboard session pruning failed");
            }
            match firmware::remove_stale_uploads(&db, now - STALE_UPLOAD_S).await {
                Ok(n) if n > 0 => tracing::info!(removed = n, "unfinished firmware uploads removed"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "removing unfinished firmware uploads failed"),
            }
        }
    });
}
