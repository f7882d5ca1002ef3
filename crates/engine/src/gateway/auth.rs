//! Gateway authentication (docs/gateway-protocol.md, "Transport"): serial and device token,
//! compared in constant time against the stored hash; with the right token, archived gateways
//! and gateways of deleted groups are refused as "not authorized".

use devicecloud_protocol::ModuleKind;
use devicecloud_store::devices;

use super::Context;
use super::Gateway;
use crate::auth::secrets::{same_hash, token_hash};

/// Why a gateway may not connect.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// Unknown serial or wrong token (MQTT CONNACK 4, HTTP 401).
    #[error("bad user name or password")]
    BadCredentials,
    /// Archived, or its group deleted (MQTT CONNACK 5, HTTP 401).
    #[error("not authorized")]
    NotAuthorized,
    /// The store did not answer (MQTT CONNACK 3, HTTP 503).
    #[error("service unavailable")]
    Unavailable,
}

/// Checks a serial and device token.
pub async fn authenticate(ctx: &Context, serial: &str, token: &[u8]) -> Result<Gateway, AuthError> {
    if serial.is_empty() || serial.contains('\0') {
        return Err(AuthError::BadCredentials);
    }
    // Read before anything of the gateway is: an asset archived from now on is forgotten.
    let archivings = ctx.gateways.archived.count();
    let found = devices::gateway_auth(&ctx.db, serial).await.map_err(|e| {
        tracing::error!(error = %e, "gateway authentication failed");
        AuthError::Unavailable
    })?;
    let Some(found) = found else {
        return Err(AuthError::BadCredentials);
    };
    // The token first: "not authorized" only ever answers the right token, so a wrong one
    // cannot tell an archived serial from an unknown one (docs/gateway-protocol.md,
    // "Transport").
    let presented = token_hash(&String::from_utf8_lossy(token));
    let stored = found.device_token_hash.as_deref().unwrap_or_default();
    if !same_hash(&presented, stored) {
        return Err(AuthError::BadCredentials);
    }
    if found.archived_at.is_some() || found.group_deleted_at.is_some() {
        return Err(AuthError::NotAuthorized);
    }
    let kind = found
        .kind
        .as_deref()
        .and_then(|k| k.parse::<ModuleKind>().ok())
        .ok_or(AuthError::NotAuthorized)?;
    let mut gateway = Gateway::new(found.id_physical_device, found.id_group, serial.to_string(), kind);
    gateway.archivings_seen = archivings;
    Ok(gateway)
}
