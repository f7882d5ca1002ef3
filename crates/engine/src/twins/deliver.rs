//! How a desired document reaches its gateway (docs/gateway-protocol.md, "Twin"): through this
//! node's connection with it, or through the node holding that connection (told with
//! [`Change::Twin`]; that node reads the document itself, `gateway::desired::to_connection`: it
//! may be larger than a notification), or, with the gateway offline, right after its next hello
//! (`gateway::desired::behind`).
//!
//! No change is missed between the two paths: a hello marks the gateway connected before the
//! documents behind are read, and a change is committed before its gateway's connection is
//! looked up, so one of them always sees the other (the gateway may get a document twice).

use devicecloud_store::twins;
use devicecloud_store::{StoreError, devices};

use super::Context;
use crate::gateway::desired;
use crate::peers::{self, Change};

/// Sends the desired document of `device` to its gateway wherever it is connected; a gateway
/// offline gets it after its next hello. Failures are logged: the hello path catches up.
pub async fn desired(ctx: &Context, device: &str) {
    desired_many(ctx, &[device]).await;
}

/// [`desired`] for many devices (a twin job's batch), their documents read in one query.
pub async fn desired_many(ctx: &Context, devices: &[&str]) {
    if let Err(e) = try_desired(ctx, devices).await {
        tracing::warn!(devices = devices.len(), error = %e, "cannot send desired documents now; the gateways get them after their next hello");
    }
}

async fn try_desired(ctx: &Context, devices: &[&str]) -> Result<(), StoreError> {
    for doc in twins::desired_of_many(&ctx.db, devices).await? {
        if ctx.gateways.desired(&doc.gateway, desired::payload(&doc)) || !ctx.peers.peers.reaches_others() {
            continue;
        }
        let node = devices::get_owned(&ctx.db, &doc.gateway)
            .await?
            .and_then(|owned| owned.connected_node)
            .filter(|node| *node != ctx.peers.node_id);
        if let Some(to) = node {
            peers::apply::tell(&ctx.peers, Change::Twin { to, device: doc.device });
        }
    }
    Ok(())
}
