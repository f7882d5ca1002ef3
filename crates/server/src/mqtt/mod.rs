//! The gateway endpoint over MQTT (docs/gateway-protocol.md, "Transport" and "Topics"), inside the
//! service: no external broker. `serve_mqtt` accepts plain TCP connections and `serve_mqtts` TLS
//! ones until shutdown; each connection is one task, and both speak the same protocol.

mod acks;
mod connection;
pub mod packets;
pub mod registry;
pub mod tls;

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::state::AppState;
use tls::TlsAcceptor;

/// Accepts gateway connections on `listener` until `shutdown` is cancelled; connections end
/// with it, and `tracker` lets the caller wait for them.
pub async fn serve_mqtt(listener: TcpListener, state: AppState, tracker: TaskTracker, shutdown: CancellationToken) {
    let slots = state.mqtt_slots.clone();
    let serve = |stream, slot| connection::run(stream, slot, state.clone(), shutdown.clone());
    accept_loop(listener, &slots, &tracker, &shutdown, serve).await;
}

/// As `serve_mqtt`, each connection first completing a TLS handshake with `acceptor` (see
/// `tls::handshake`: bounded in time, and a failed one ends that connection only).
pub async fn serve_mqtts(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    state: AppState,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) {
    let slots = state.mqtt_slots.clone();
    let serve = |stream, slot| {
        let (acceptor, state, shutdown) = (acceptor.clone(), state.clone(), shutdown.clone());
        async move {
            if let Some(stream) = tls::handshake(&acceptor, stream, &shutdown).await {
                connection::run(stream, slot, state, shutdown).await;
            }
        }
    };
    accept_loop(listener, &slots, &tracker, &shutdown, serve).await;
}

/// Accepts until `shutdown`, running `serve` on each connection as a task of `tracker`, with
/// one of `slots` when one is free (docs/operations.md, "Limits": a connection without one is
/// answered CONNACK 3 and closed, which a gateway reads as "try again later").
async fn accept_loop<F, Fut>(
    listener: TcpListener,
    slots: &Arc<Semaphore>,
    tracker: &TaskTracker,
    shutdown: &CancellationToken,
    mut serve: F,
) where
    F: FnMut(TcpStream, Option<OwnedSemaphorePermit>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let connection = serve(stream, slots.clone().try_acquire_owned().ok());
                // `map` rather than an async block around it: an async block would hold the
                // connection's future twice (captured, and in its await), doubling every idle
                // connection's task.
                tracker.spawn(connection.map(move |()| tracing::debug!(%peer, "mqtt connection ended")));
            }
            Err(e) => {
                // Out of file descriptors and the like: wait a little rather than spin.
                tracing::warn!(error = %e, "mqtt accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}
