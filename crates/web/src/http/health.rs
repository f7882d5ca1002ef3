//! Operations endpoints without a token (docs/operations.md, "Probes"): `/healthz` (the process
//! answers), `/readyz` (the store answers and takes a write), `/metrics` (Prometheus text
//! format).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use std::time::{Duration, Instant};

use devicecloud_store::unix_now;
use serde_json::json;

use crate::http::error::ApiError;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
}

/// Liveness
///
/// Answers while the process serves requests; no store work. No authentication.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, description = "The process runs", body = super::schemas::records::Health)))]
pub async fn healthz() -> impl IntoResponse {
    axum::Json(json!({"status": "ok"}))
}

/// How long one write probe answers for.
const PROBE_REUSE: Duration = Duration::from_secs(1);

/// Readiness
///
/// 200 when the store can be read and written (a write probe); 503 otherwise, as with a full disk.
/// No authentication.
#[utoipa::path(get, path = "/readyz", tag = "operations", responses((status = 200, description = "The store answers and takes a write", body = super::schemas::records::Health), (status = 503, description = "The store cannot be reached or written")))]
pub async fn readyz(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let mut last = state.readiness.lock().await;
    let ready = match *last {
        Some((at, ready)) if at.elapsed() < PROBE_REUSE => ready,
        _ => {
            // A write, not only a read: a store that answers but cannot take a write (a full
            // disk) would lose every measurement gateways send.
            let probe = state.db.write_probe(&state.node_id, unix_now()).await;
            if let Err(e) = &probe {
                tracing::warn!(error = %e, "store not ready");
            }
            *last = Some((Instant::now(), probe.is_ok()));
            probe.is_ok()
        }
    };
    if ready {
        Ok(axum::Json(json!({"status": "ok"})))
    } else {
        Err(ApiError::Status(
            StatusCode::SERVICE_UNAVAILABLE,
            "The store cannot be reached or written.".into(),
        ))
    }
}

/// Prometheus metrics
///
/// The text exposition format; every label takes a bounded set of values. No authentication.
#[utoipa::path(get, path = "/metrics", tag = "operations", responses((status = 200, description = "Prometheus text exposition", body = String, content_type = "text/plain; version=0.0.4; charset=utf-8")))]
pub async fn metrics_text(State(state): State<AppState>) -> impl IntoResponse {
    metrics::gauge!("devicecloud_page_cache_bytes").set(state.pages.weight() as f64);
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        state.metrics.render(),
    )
}
