//! The desired documents a gateway's connection gets (docs/gateway-protocol.md, "Twin"): the
//! message of one document, those it is behind on after its hello, the one it asks for, and the
//! one another node tells this node to send (`peers`). Where a change goes is `twins::deliver`.

use devicecloud_protocol::twin;
use devicecloud_store::twins::{self, DesiredOf};
use devicecloud_store::{Db, StoreError};

use super::registry::GatewayRegistry;

/// The message a gateway gets for one document.
pub fn payload(doc: &DesiredOf) -> Vec<u8> {
    twin::desired_payload(doc.serial.as_deref(), doc.version, &doc.desired)
}

/// On the node holding the gateway's connection, as told by another node: reads the document
/// and queues it to the connection.
pub async fn to_connection(db: &Db, gateways: &GatewayRegistry, device: &str) {
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
