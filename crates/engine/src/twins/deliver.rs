//! How a desired document reaches its gateway (docs/gateway-protocol.md, "Twin"): through this
//! node's connection with it, or through the node holding that connection (told with
//! [`Change::Twin`], which reads the document itself: it may be larger than a notification),
//! or, with the gateway offline, right after its next hello ([`behind`]).
//!
//! No change is missed between the two paths: a hello marks the gateway connected before the
//! documents behind are read, and a change is committed before its gateway's connection is
//! looked up, so one of them always sees the other (the gateway may get a document twice).

use devicecloud_protocol::twin;
use devicecloud_store::twins::{self, DesiredOf};
use devicecloud_store::{Db, StoreError, devices};

use super::Context;
use crate::gateway::registry::GatewayRegistry;
use crate::peers::{self, Change};

/// The message a gateway gets for one document.
pub fn payload(doc: &DesiredOf) -> Vec<u8> {
    twin::desired_payload(doc.serial.as_deref(), doc.version, &doc.desired)
}

/// Sends the desired document of `device` to its gateway wherever it is connected; a gateway
/// offline gets it after its next hello. Failures are logged: the hello path catches up.
pub async fn desired(ctx: &Context, device: &str) {
    if let Err(e) = try_desired(ctx, device).await {
        tracing::warn!(device, error = %e, "cannot send a desired document now; the gateway gets it after its next hello");
    }
}

async fn try_desired(ctx: &Context, device: &str) -> Result<(), StoreError> {
    let Some(doc) = twins::desired_of(&ctx.db, device).await? else {
        return Ok(());
    };
    if ctx.gateways.desired(&doc.gateway, payload(&doc)) || !ctx.peers.peers.reaches_others() {
        return Ok(());
    }
    let node = devices::get_owned(&ctx.db, &doc.gateway)
        .await?
        .and_then(|owned| owned.connected_node)
        .filter(|node| *node != ctx.peers.node_id);
    if let Some(to) = node {
        peers::apply::tell(
            &ctx.peers,
            Change::Twin {
                to,
                device: device.to_string(),
            },
        );
    }
    Ok(())
}

/// On the node holding the gateway's connection, as told by another node: reads the document
/// and queues it to the connection.
pub async fn here(db: &Db, gateways: &GatewayRegistry, device: &str) {
    match twins::desired_of(db, device).await {
        Ok(Some(doc)) => {
            gateways.desired(&doc.gateway, payload(&doc));
        }
        Ok(None) => {}
        Err(e) => tracing::warn!(device, error = %e, "cannot read a desired document to send"),
    }
}

/// The messages a gateway gets right after its hello: its own document and its assets' whose
/// version is above what they last said they applied.
pub async fn behind(db: &Db, gateway: &str) -> Result<Vec<Vec<u8>>, StoreError> {
    Ok(twins::behind(db, gateway).await?.iter().map(payload).collect())
}

/// The message answering a gateway's `twin/get` for `device` (itself or an asset).
pub async fn current(db: &Db, device: &str) -> Result<Option<Vec<u8>>, StoreError> {
    Ok(twins::desired_of(db, device).await?.as_ref().map(payload))
}
