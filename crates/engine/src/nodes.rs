//! This node's lease, and the gateways of nodes that are gone (docs/operations.md, "Several
//! nodes"). Every third of the lease (`DEVICECLOUD_NODE_LEASE_S`, 15 s) the node renews its row
//! in the store, removes the rows of nodes whose lease ran out, and marks disconnected (event
//! 208, value 0) the gateways shown connected through a node without a lease. So the gateways
//! of a node killed outright are shown disconnected within about one lease and a third, by
//! whichever node gets there first, once.
//!
//! On SQLite one process serves the store, so every other node's row is removed at start: the
//! gateways shown connected before a crash are marked disconnected at once.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use devicecloud_store::{Backend, nodes};

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::gateway::{self, losses};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Keeps the lease until shutdown.
pub async fn keep(ctx: Arc<gateway::Context>, lease: Duration, shutdown: CancellationToken) {
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    if ctx.writer.backend() == Backend::Sqlite
        && let Err(e) = nodes::alone(&ctx.writer, &ctx.node_id).await
    {
        tracing::warn!(error = %e, "cannot clear the leases of earlier processes");
    }
    let mut renewed_before = false;
    let mut every = crate::periodic::Every::new((lease / 3).max(Duration::from_millis(100)), &shutdown);
    while every.tick().await {
        let now = now_ms();
        match nodes::renew(&ctx.writer, &ctx.node_id, now, now.saturating_add(lease_ms)).await {
            Ok(true) => {}
            Ok(false) if renewed_before => {
                // Another node took this one for dead (it could not renew for a whole lease)
                // and marked its gateways disconnected: they connect again to be shown.
                tracing::warn!(node = %ctx.node_id, "this node's lease had run out; closing its gateway connections");
                ctx.gateways.revoke_all();
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, "cannot renew this node's lease");
                continue;
            }
        }
        renewed_before = true;
        match nodes::expire(&ctx.writer, now).await {
            Ok(gone) => {
                for node in gone {
                    tracing::warn!(node = %node, "a node's lease ran out: its gateways are marked disconnected");
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot look for nodes whose lease ran out"),
        }
        match nodes::abandoned(&ctx.writer, now / 1000).await {
            Ok(marked) if !marked.is_empty() => {
                tracing::info!(
                    count = marked.len(),
                    "gateways of nodes that are gone marked disconnected"
                );
                losses::abandoned(&ctx, &marked).await;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot mark the gateways of nodes that are gone"),
        }
    }
}

/// Removes this node's lease on a clean stop.
pub async fn leave(ctx: &gateway::Context) {
    if let Err(e) = nodes::leave(&ctx.writer, &ctx.node_id).await {
        tracing::warn!(error = %e, "cannot remove this node's lease");
    }
}
