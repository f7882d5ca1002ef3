//! Firmware (docs/api.md, "Firmware"): `GET /api/v2/firmware/public-key`, the key gateways
//! check every image's signed manifest with.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde_json::{Value, json};

use crate::caller::Caller;
use crate::http::error::ApiError;
use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new().route("/api/v2/firmware/public-key", get(public_key))
}

/// The firmware signing key
///
/// The Ed25519 public key that signs every image's manifest: the raw 32 bytes in standard
/// base64. The same on every node; it changes only if the signing key file is replaced.
#[utoipa::path(get, path = "/api/v2/firmware/public-key", tag = "firmware",
    responses((status = 200, description = "The public key", body = super::schemas::records::FirmwarePublicKey), (status = 401, description = "Invalid credentials")),
    security(("bearer" = [])))]
pub async fn public_key(State(state): State<AppState>, _caller: Caller) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(json!({
        "algorithm": "ed25519",
        "public_key": state.signer.public_key(),
    })))
}
