//! The running devicecloud service: REST API and OAuth 2.0 over HTTP, rights, and the
//! background tasks, driven by one [`AppState`] and stopped by one cancellation token.

pub mod address_slots;
pub mod admission;
pub mod auth;
pub mod browser;
pub mod commands;
pub mod dashboard;
pub mod error;
pub mod event_catalogue;
pub mod event_types;
pub mod gateway;
pub mod http;
pub mod ingest;
pub mod metrics;
pub mod mqtt;
pub mod nodes;
pub mod origin;
pub mod page_cache;
pub mod peers;
pub mod periodic;
pub mod render;
pub mod retention;
pub mod running;
pub mod service;
pub mod state;
pub mod stream;
pub mod webhooks;

use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use running::{Addresses, Listeners, Running, StartError};
pub use state::{AppState, FrontEnd, Settings};

/// Serves HTTP on `listener` until `shutdown` is cancelled, then finishes requests in flight
/// (`http::listener`). Tests bind port 0 and pass the listener in.
pub async fn serve_http(listener: TcpListener, state: AppState, shutdown: CancellationToken) -> std::io::Result<()> {
    let (limits, front_end) = (state.settings.limits.clone(), state.settings.front_end.clone());
    let app = http::app(state, dashboard::router());
    http::listener::serve(listener, app, &limits, &front_end, shutdown).await;
    Ok(())
}

/// Starts the background tasks of the service on `tracker`; they stop when `shutdown` is
/// cancelled.
pub(crate) fn spawn_background(state: &AppState, tracker: &TaskTracker, shutdown: &CancellationToken) {
    tracker.spawn(peers::apply::listen(state.clone()));
    tracker.spawn(nodes::keep(state.clone()));
    tracker.spawn(peers::apply::report_requests(state.clone()));
    webhooks::spawn_worker(state, tracker, shutdown);
    retention::spawn(state, tracker, shutdown);
    let (status_state, status_shutdown) = (state.clone(), shutdown.clone());
    tracker.spawn(async move {
        // device_status is kept current by the service, not computed on read (docs/operations.md).
        let mut every = periodic::Every::new(Duration::from_secs(5), &status_shutdown);
        while every.tick().await {
            let now = devicecloud_store::unix_now();
            if let Err(e) = devicecloud_store::devices::refresh_status(&status_state.writer, now).await {
                tracing::warn!(error = %e, "device status refresh failed");
            }
        }
    });
    let (rejections, rejections_shutdown) = (state.clone(), shutdown.clone());
    tracker.spawn(async move {
        // Rejections counted during a minute are recorded when it ends (gateway::RejectionLog).
        let mut every = periodic::Every::new(Duration::from_secs(5), &rejections_shutdown);
        while every.tick().await {
            let due = rejections.rejections.due(std::time::Instant::now());
            if !due.is_empty() {
                gateway::record_rejections(&rejections, &due).await;
            }
        }
        // Stopping: what the open windows counted is recorded now.
        let all = rejections
            .rejections
            .due(std::time::Instant::now() + gateway::REJECTION_WINDOW);
        gateway::record_rejections(&rejections, &all).await;
    });
    let (state, shutdown) = (state.clone(), shutdown.clone());
    tracker.spawn(async move {
        // Expired tokens are kept a day (a refresh of a just-expired token stays possible),
        // then removed so the table does not grow without bound.
        let mut every = periodic::Every::new(Duration::from_secs(3600), &shutdown);
        while every.tick().await {
            let now = devicecloud_store::unix_now();
            match devicecloud_store::tokens::prune(&state.writer, now - 86_400).await {
                Ok(n) if n > 0 => tracing::info!(removed = n, "expired tokens pruned"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "token pruning failed"),
            }
            if let Err(e) = devicecloud_store::sign_in_sessions::prune(&state.writer, now).await {
                tracing::warn!(error = %e, "dashboard session pruning failed");
            }
        }
    });
}
