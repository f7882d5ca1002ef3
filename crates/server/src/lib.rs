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
pub mod settings;
pub mod state;
pub mod stream;
pub mod upkeep;
pub mod webhooks;
pub mod wiring;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use running::{Addresses, Listeners, Running, StartError};
pub use settings::{FrontEnd, Settings};
pub use state::AppState;

/// Serves HTTP on `listener` until `shutdown` is cancelled, then finishes requests in flight
/// (`http::listener`). Tests bind port 0 and pass the listener in.
pub async fn serve_http(listener: TcpListener, state: AppState, shutdown: CancellationToken) -> std::io::Result<()> {
    let (limits, front_end) = (state.settings.limits.clone(), state.settings.front_end.clone());
    let app = http::app(state, dashboard::router());
    http::listener::serve(listener, app, &limits, &front_end, shutdown).await;
    Ok(())
}
