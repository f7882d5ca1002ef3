//! The composition root: the one place the service is put together and taken apart. `serve`,
//! `demo` and the tests' `TestApp` all start it here, so that every one of them runs the same
//! listeners and the same background tasks (the webhook worker, the device-status refresh, the
//! pruning of expired tokens and sessions) that production runs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use devicecloud_store::Db;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::wiring::{Keys, Pools, wire};
use devicecloud_engine::firmware::signing::Signer;
use devicecloud_engine::gateway;
use devicecloud_engine::key_file::KeyError;
use devicecloud_engine::settings::Settings;
use devicecloud_engine::webhooks::vault::Vault;
use devicecloud_mqtt::tls::TlsAcceptor;
use devicecloud_web::http;
use devicecloud_web::state::AppState;

/// Why the service did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A listener's address cannot be read.
    #[error("cannot read a listener's address: {0}")]
    Io(#[from] std::io::Error),
    /// A key file is unusable (docs/operations.md, "Secret key", "Firmware signing key").
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// The sockets the service answers on, bound by the caller (so that a port in use is reported
/// before anything starts, and tests can bind port 0).
pub struct Listeners {
    pub http: TcpListener,
    pub mqtt: TcpListener,
    /// The MQTT over TLS listener and its certificate, when configured.
    pub mqtts: Option<(TcpListener, TlsAcceptor)>,
}

/// Where a started service listens.
#[derive(Clone, Copy, Debug)]
pub struct Addresses {
    pub http: SocketAddr,
    pub mqtt: SocketAddr,
    pub mqtts: Option<SocketAddr>,
}

/// A started service: its state, its addresses, and what it takes to stop it.
pub struct Running {
    pub state: AppState,
    pub addresses: Addresses,
    /// The pools on the store, closed when the service stops.
    pub pools: Pools,
    mqtt: Arc<devicecloud_mqtt::Context>,
    gateway: Arc<gateway::Context>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
}

impl Running {
    /// Starts the service on `db` with `settings`: the state, the background tasks, and the HTTP,
    /// MQTT and (when given) MQTT over TLS listeners. The secret and signing keys are loaded
    /// first (made when missing): a key file that exists but holds no key stops the start.
    pub fn start(db: Db, settings: Settings, listeners: Listeners) -> Result<Running, StartError> {
        let vault = Vault::load(settings.secret_key_file.as_deref())?;
        let signer = Signer::load(settings.signing_key_file.as_deref())?;
        let addresses = Addresses {
            http: listeners.http.local_addr()?,
            mqtt: listeners.mqtt.local_addr()?,
            mqtts: match &listeners.mqtts {
                Some((listener, _)) => Some(listener.local_addr()?),
                None => None,
            },
        };
        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        let wired = wire(db, settings, Keys { vault, signer }, &tracker, &shutdown);
        let running = Running {
            state: wired.state,
            addresses,
            pools: wired.pools,
            mqtt: wired.mqtt,
            gateway: wired.gateway,
            shutdown,
            tracker,
        };
        if let Some((listener, acceptor)) = listeners.mqtts {
            running.serve_mqtts(listener, acceptor);
        }
        running.tracker.spawn(devicecloud_mqtt::serve_mqtt(
            listeners.mqtt,
            running.mqtt.clone(),
            running.tracker.clone(),
            running.shutdown.clone(),
        ));
        running.tracker.spawn(serve_http(
            listeners.http,
            running.state.clone(),
            running.shutdown.clone(),
        ));
        Ok(running)
    }

    /// Serves MQTT over TLS on one more listener, stopped with the service.
    pub fn serve_mqtts(&self, listener: TcpListener, acceptor: TlsAcceptor) {
        self.tracker.spawn(devicecloud_mqtt::serve_mqtts(
            listener,
            acceptor,
            self.mqtt.clone(),
            self.tracker.clone(),
            self.shutdown.clone(),
        ));
    }

    /// The token whose cancellation starts the shutdown (what SIGTERM does).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Stops the service as SIGTERM does: the listeners stop accepting, requests and deliveries
    /// in flight finish and the ingest queue drains, within `grace`; then the pools close (on
    /// SQLite the last one checkpoints the WAL). Returns whether everything finished in time.
    pub async fn stop(self, grace: Duration) -> bool {
        self.shutdown.cancel();
        self.tracker.close();
        let drained = tokio::time::timeout(grace, self.tracker.wait()).await.is_ok();
        // Gone cleanly: this node's gateways were marked as their connections closed.
        devicecloud_engine::nodes::leave(&self.gateway).await;
        self.pools.close().await;
        drained
    }
}

/// Serves HTTP on `listener` until `shutdown` is cancelled, then finishes requests in flight
/// (`http::listener`). Tests bind port 0 and pass the listener in.
pub async fn serve_http(listener: TcpListener, state: AppState, shutdown: CancellationToken) -> std::io::Result<()> {
    let (limits, front_end) = (state.settings.limits.clone(), state.settings.front_end.clone());
    let app = http::app(state, devicecloud_dashboard::router());
    http::listener::serve(listener, app, &limits, &front_end, shutdown).await;
    Ok(())
}
