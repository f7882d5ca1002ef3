//! `devicecloud serve`: the store opened and locked, the listeners bound (each failure naming its
//! setting), the service started, and stopped cleanly on SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use devicecloud_server::{Listeners, Running};
use devicecloud_store::Db;
use tokio::net::TcpListener;

use crate::settings::Settings;
use crate::{file_modes, store_lock};

/// Connections the kernel queues for a listener before the accept loop takes them (it caps
/// the value at `net.core.somaxconn`): thousands of gateways reconnecting at once after a
/// network outage are queued rather than refused and retried a second later.
const LISTEN_BACKLOG: u32 = 4096;

/// Binds a listener, naming the setting on failure (docs/operations.md, "Settings").
async fn bind(addr: std::net::SocketAddr, variable: &str) -> Result<TcpListener> {
    let listen = || {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        // As `TcpListener::bind` does: a restarted service can bind while old connections of
        // the previous process linger in TIME_WAIT.
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(LISTEN_BACKLOG)
    };
    listen().with_context(|| format!("cannot listen on {variable}={addr}"))
}

/// Runs the service until SIGINT or SIGTERM; `db` is an already opened store (the demo seeds
/// one first), otherwise the configured one is opened.
///
/// Runs once the listeners are bound, with the HTTP and MQTT addresses chosen.
pub(crate) type OnReady = Box<dyn FnOnce(SocketAddr, SocketAddr) + Send>;

/// `on_ready` runs once the listeners are bound.
pub(crate) async fn serve(settings: Settings, db: Option<Db>, on_ready: Option<OnReady>) -> Result<()> {
    // The certificate and key are read before anything else is opened: a TLS listener that
    // cannot start stops the service at once, with the file at fault named.
    let tls = match settings.mqtt_tls()? {
        Some(tls) => {
            let acceptor = devicecloud_mqtt::tls::acceptor(tls.cert, tls.key)
                .context("cannot start the MQTT TLS listener (DEVICECLOUD_MQTT_TLS_CERT, DEVICECLOUD_MQTT_TLS_KEY)")?;
            Some((tls.addr, acceptor))
        }
        None => None,
    };
    // Held until the process ends: a second `serve` on the same SQLite store stops here.
    let _store_lock = store_lock::acquire(&settings.database_url()?)?;
    if let Some(store) = store_lock::sqlite_file(&settings.database_url()?) {
        file_modes::tighten_store(&store).with_context(|| format!("cannot make {} private (0600)", store.display()))?;
    }
    let db = match db {
        Some(db) => db,
        None => Db::connect(&settings.database_url()?)
            .await
            .context("cannot open the store")?,
    };
    let http = bind(settings.http_addr, "DEVICECLOUD_HTTP_ADDR").await?;
    let mqtt = bind(settings.mqtt_addr, "DEVICECLOUD_MQTT_ADDR").await?;
    let mqtts = match tls {
        Some((addr, acceptor)) => Some((bind(addr, "DEVICECLOUD_MQTT_TLS_ADDR").await?, acceptor)),
        None => None,
    };
    let listeners = Listeners { http, mqtt, mqtts };
    let backend = db.backend();
    let running = Running::start(db, settings.server(), listeners).context("cannot start the service")?;
    let addresses = running.addresses;
    let stop = stop_signal().context("cannot install the signal handlers")?;
    // The one line scripts and tests read to learn the chosen ports.
    match addresses.mqtts {
        Some(mqtts) => println!(
            "listening http={} mqtt={} mqtts={mqtts}",
            addresses.http, addresses.mqtt
        ),
        None => println!("listening http={} mqtt={}", addresses.http, addresses.mqtt),
    }
    if let Some(on_ready) = on_ready {
        on_ready(addresses.http, addresses.mqtt);
    }
    tracing::info!(http = %addresses.http, mqtt = %addresses.mqtt, mqtts = ?addresses.mqtts, ?backend, "devicecloud started");
    stop.await;
    tracing::info!("shutting down");
    if !running.stop(Duration::from_secs(20)).await {
        tracing::warn!("shutdown timed out; stopping anyway");
    }
    Ok(())
}

/// A future that ends on SIGINT or SIGTERM. The handlers are installed by this call, before
/// the listening line is printed: a signal sent as soon as that line is read stops the service
/// cleanly instead of killing it with the default action.
#[cfg(unix)]
fn stop_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}

/// A future that ends on Ctrl-C.
#[cfg(not(unix))]
fn stop_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
