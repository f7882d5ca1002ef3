//! The HTTP gateway endpoint, for gateways that cannot speak MQTT: the same payloads as the
//! MQTT topics, the same validation and the same ingest pipeline, authenticated with HTTP Basic
//! (serial, device token). 200 only after the commit.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine;
use serde_json::json;

use crate::http::error::ApiError;
use crate::state::AppState;
use devicecloud_engine::gateway::{AuthError, Gateway, GatewayError, authenticate};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/gateway/v1/measurements", post(measurements))
        .route("/gateway/v1/events", post(events))
}

/// The serial and token of an `Authorization: Basic` header.
fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (serial, token) = text.split_once(':')?;
    Some((serial.to_string(), token.to_string()))
}

/// 401 with the specification's body and a Basic challenge.
fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::Unauthorized(message.to_string()).into_response();
    response
        .headers_mut()
        .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"gateway\""));
    response
}

/// The gateway an `Authorization: Basic` header names, or the answer that refuses it.
pub(crate) async fn gateway(state: &AppState, headers: &HeaderMap) -> Result<Gateway, Response> {
    let Some((serial, token)) = basic_credentials(headers) else {
        return Err(unauthorized(
            "Gateway credentials (HTTP Basic: serial and device token) are required.",
        ));
    };
    authenticate(&state.gateway, &serial, token.as_bytes())
        .await
        .map_err(|e| match e {
            AuthError::BadCredentials => unauthorized("Bad serial or device token."),
            AuthError::NotAuthorized => unauthorized("This gateway is not authorized."),
            AuthError::Unavailable => ApiError::Status(
                StatusCode::SERVICE_UNAVAILABLE,
                "The service cannot check credentials now.".into(),
            )
            .into_response(),
        })
}

/// The answer to a message: 200 with what was stored, 400 for a rejected message, 503 when the
/// data could not be committed (the gateway should send it again).
fn answer(outcome: Result<usize, GatewayError>, what: &str) -> Response {
    match outcome {
        Ok(n) => axum::Json(json!({"status": 200, "payload": {"result": "success", what: n}})).into_response(),
        Err(GatewayError::Rejected(r)) => ApiError::BadRequest(r.description()).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "gateway data not stored");
            ApiError::Status(
                StatusCode::SERVICE_UNAVAILABLE,
                "The data could not be stored; send it again.".into(),
            )
            .into_response()
        }
    }
}

/// Gateway: send measurements
///
/// The gateway's own credentials (HTTP Basic: serial and device token), as over MQTT: the message
/// is stored whole and durably before the answer, or refused whole (event 212). For gateways, not
/// API clients.
#[utoipa::path(post, path = "/gateway/v1/measurements", tag = "gateway",
    request_body(content = Object, description = "One measurement object or an array, as over MQTT"),
    responses((status = 200, description = "Stored: {status: 200, payload: {result, points}}", body = super::schemas::records::GatewayAnswer), (status = 400, description = "Rejected whole"), (status = 401, description = "Bad or missing gateway credentials"), (status = 503, description = "Not stored; send again")),
    security(("basic" = [])))]
pub async fn measurements(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    match gateway(&state, &headers).await {
        Ok(mut gw) => answer(gw.measurements(&state.gateway, &body).await, "points"),
        Err(response) => response,
    }
}

/// Gateway: send events
///
/// The gateway's own credentials (HTTP Basic: serial and device token), as over MQTT. For gateways,
/// not API clients.
#[utoipa::path(post, path = "/gateway/v1/events", tag = "gateway",
    request_body(content = Object, description = "One event object or an array, as over MQTT"),
    responses((status = 200, description = "Stored: {status: 200, payload: {result, events}}", body = super::schemas::records::GatewayAnswer), (status = 400, description = "Rejected whole"), (status = 401, description = "Bad or missing gateway credentials")),
    security(("basic" = [])))]
pub async fn events(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    match gateway(&state, &headers).await {
        Ok(mut gw) => answer(gw.events(&state.gateway, &body).await, "events"),
        Err(response) => response,
    }
}
