//! The gateway endpoint over MQTT (docs/gateway-protocol.md, "Transport" and "Topics"), inside the
//! service: no external broker. `serve_mqtt` accepts plain TCP connections and `serve_mqtts` TLS
//! ones until shutdown; each connection is one task, and both speak the same protocol.

mod acks;
mod connection;
mod context;
pub mod packets;
pub mod tls;

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use context::Context;
use devicecloud_engine::admission::{Admission, Entry};
use tls::TlsAcceptor;

/// Accepts gateway connections on `listener` until `shutdown` is cancelled; connections end
/// with it, and `tracker` lets the caller wait for them.
pub async fn serve_mqtt(listener: TcpListener, ctx: Arc<Context>, tracker: TaskTracker, shutdown: CancellationToken) {
    let admission = Arc::clone(&ctx.admission);
    let serve = |stream, entry| connection::run(stream, entry, ctx.clone(), shutdown.clone());
    accept_loop(listener, &admission, &tracker, &shutdown, serve).await;
}

/// As `serve_mqtt`, each connection first completing a TLS handshake with `acceptor` (see
/// `tls::handshake`: bounded in time, and a failed one ends that connection only).
pub async fn serve_mqtts(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    ctx: Arc<Context>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) {
    let admission = Arc::clone(&ctx.admission);
    let serve = |stream, entry| {
        let (acceptor, ctx, shutdown) = (acceptor.clone(), ctx.clone(), shutdown.clone());
        async move {
            if let Some(stream) = tls::handshake(&acceptor, stream, &shutdown).await {
                connection::run(stream, entry, ctx, shutdown).await;
            }
        }
    };
    accept_loop(listener, &admission, &tracker, &shutdown, serve).await;
}

/// Accepts until `shutdown`, running `serve` on each connection that `admission` lets in as a
/// task of `tracker`; one it does not let in (its address, or the unauthenticated connections,
/// at their limit) is closed at once (docs/operations.md, "Limits").
async fn accept_loop<F, Fut>(
    listener: TcpListener,
    admission: &Admission,
    tracker: &TaskTracker,
    shutdown: &CancellationToken,
    mut serve: F,
) where
    F: FnMut(TcpStream, Entry) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let Some(entry) = admission.enter(peer.ip()) else {
                    metrics::counter!("devicecloud_mqtt_connect_refused_total", "reason" => "admission").increment(1);
                    drop(stream);
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let connection = serve(stream, entry);
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
