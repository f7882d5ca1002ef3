//! The HTTP listener: accepts connections up to a cap and serves each with hyper (HTTP/1.1)
//! under the connection limits of docs/operations.md, "Limits".
//!
//! - At most `http_max_connections` at once: one more is closed as soon as it is accepted,
//!   while the others go on (a permit is taken per connection, as mini-redis does); likewise
//!   past `connections_per_address` connections of one client address (`AddressSlots`).
//! - Request headers must arrive within `http_header_timeout` (`head_deadline`); a keep-alive
//!   connection idle for [`IDLE_KEEP_ALIVE`] is closed (hyper's header timer, which runs
//!   whenever the connection waits for a request).
//! - An accept that fails (out of file descriptors) is retried after a pause; the loop never
//!   ends for it.
//! - On shutdown the listener closes, idle connections close at once, and requests in flight
//!   finish; a request still sending its body is answered at once (`limits::read_body`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::head_deadline::{EndsRequest, HeadDeadline, InRequest};
use devicecloud_engine::address_slots::AddressSlots;
use devicecloud_engine::settings::{FrontEnd, Limits};

/// How long the accept loop pauses after a failed accept (out of file descriptors and the
/// like): long enough not to spin, short enough that service resumes as soon as a descriptor
/// is free.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// How long a keep-alive connection may stay silent between requests.
pub const IDLE_KEEP_ALIVE: Duration = Duration::from_secs(60);

/// Largest request head (request line and headers) a connection buffers; a larger one is
/// answered 431 by hyper.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Serves `app` on `listener` until `shutdown` is cancelled, then waits for the requests in
/// flight.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: &Limits,
    front_end: &FrontEnd,
    shutdown: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(limits.http_max_connections));
    let addresses = AddressSlots::new(limits.connections_per_address, front_end.trusted_proxies.clone());
    let graceful = GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(IDLE_KEEP_ALIVE)
        // A request head still incomplete at 64 KiB is refused (hyper's default is ~400 KiB),
        // so thousands of slow connections cannot hold gigabytes between them. (A head that
        // arrives whole in one read is parsed whatever its size: it costs nothing to hold.)
        .max_buf_size(MAX_HEAD_BYTES)
        .keep_alive(true);
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "http accept failed");
                    metrics::counter!("devicecloud_http_accept_errors_total").increment(1);
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            },
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            metrics::counter!("devicecloud_http_connections_refused_total").increment(1);
            drop(stream);
            continue;
        };
        let Some(address) = addresses.take(peer.ip()) else {
            metrics::counter!("devicecloud_http_connections_refused_total").increment(1);
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        metrics::gauge!("devicecloud_http_connections").increment(1.0);
        let connection = Connection {
            app: app.clone(),
            builder: builder.clone(),
            watcher: graceful.watcher(),
            header_timeout: limits.http_header_timeout,
            shutdown: shutdown.clone(),
        };
        tokio::spawn(async move {
            connection.serve(stream, peer).await;
            metrics::gauge!("devicecloud_http_connections").decrement(1.0);
            drop((permit, address));
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// What serving one accepted connection needs.
struct Connection {
    app: Router,
    builder: hyper::server::conn::http1::Builder,
    watcher: Watcher,
    header_timeout: Duration,
    shutdown: CancellationToken,
}

impl Connection {
    /// Waits for the first bytes, then serves the connection with hyper. Until a client sends
    /// something its connection is only a socket and a small task: hyper's buffers (8 KiB each
    /// way) are allocated once there is a request to read, so thousands of idle sockets cost
    /// little. A client silent for the header timeout is closed.
    async fn serve(self, stream: TcpStream, peer: SocketAddr) {
        let opened = tokio::time::Instant::now();
        // `peek`, not `readable`: readiness may be reported for a socket with nothing to read
        // (a fresh socket usually is), and `peek` waits again in that case. Zero bytes is the
        // client closing.
        let mut first = [0u8; 1];
        let first_bytes = tokio::select! {
            _ = self.shutdown.cancelled() => return,
            peeked = tokio::time::timeout(self.header_timeout, stream.peek(&mut first)) => peeked,
        };
        if !matches!(first_bytes, Ok(Ok(1..))) {
            return;
        }
        let app = self.app;
        let in_request = Arc::new(InRequest::default());
        let io = HeadDeadline::new(stream, self.header_timeout, opened, in_request.clone());
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            in_request.start();
            // The peer address feeds the dashboard's sign-in rate limit.
            request.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
            let (app, in_request) = (app.clone(), in_request.clone());
            async move {
                let response = app.oneshot(request).await.unwrap_or_else(|never| match never {});
                Ok::<_, Infallible>(response.map(|body| EndsRequest::new(body, in_request)))
            }
        });
        let connection = self.builder.serve_connection(TokioIo::new(io), service);
        if let Err(e) = self.watcher.watch(connection).await {
            tracing::debug!(%peer, error = %e, "http connection ended");
        }
    }
}
