//! Operations endpoints without a token (docs/operations.md, "Probes"): `/healthz` (the process
//! answers), `/readyz` (the store answers), `/metrics` (Prometheus text format).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::json;

use crate::error::ApiError;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
}

#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, description = "{\"status\":\"ok\"}")))]
pub async fn healthz() -> impl IntoResponse {
    axum::Json(json!({"status": "ok"}))
}

#[utoipa::path(get, path = "/readyz", tag = "operations", responses((status = 200, description = "The store answers"), (status = 503, description = "The store does not answer")))]
pub async fn readyz(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    match state.db.ping().await {
        Ok(()) => Ok(axum::Json(json!({"status": "ok"}))),
        Err(e) => {
            tracing::warn!(error = %e, "store not ready");
            Err(ApiError::Status(
                StatusCode::SERVICE_UNAVAILABLE,
                "The store is not reachable.".into(),
            ))
        }
    }
}

#[utoipa::path(get, path = "/metrics", tag = "operations", responses((status = 200, description = "Prometheus text exposition")))]
pub async fn metrics_text(State(state): State<AppState>) -> impl IntoResponse {
    metrics::gauge!("devicecloud_page_cache_bytes").set(state.pages.weight() as f64);
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        state.metrics.render(),
    )
}
