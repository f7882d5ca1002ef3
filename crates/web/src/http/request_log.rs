//! One log line per HTTP request, with the request id that ties it to the client's own logs
//! (docs/operations.md, "Logs"): the id a client sends in `X-Request-Id` when it is usable,
//! otherwise a fresh UUID, is answered in the same header and carried by the request's span,
//! so that everything logged while the request runs names it too.

use std::time::Duration;

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderName;
use axum::response::Response;
use tracing::Span;

/// The header of the request id, both ways.
pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The longest request id taken from a client.
const MAX_ID_LEN: usize = 128;

/// Whether a client's request id is kept: 1 to 128 printable ASCII characters, no spaces, so
/// that it reads the same in a text log, a JSON log and a header.
pub fn usable(id: &[u8]) -> bool {
    !id.is_empty() && id.len() <= MAX_ID_LEN && id.iter().all(u8::is_ascii_graphic)
}

/// Drops every `X-Request-Id` unless there is exactly one and it is [`usable`]; the id layer
/// then makes one.
pub async fn drop_unusable_id(mut request: Request) -> Request {
    let mut ids = request.headers().get_all(&X_REQUEST_ID).iter();
    let keep = matches!((ids.next(), ids.next()), (Some(id), None) if usable(id.as_bytes()));
    if !keep {
        request.headers_mut().remove(&X_REQUEST_ID);
    }
    request
}

/// The span of a request: its id, method and route template (`unmatched` when no route
/// matched, as in the metrics).
pub fn span(request: &Request) -> Span {
    let id = request
        .headers()
        .get(&X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str);
    tracing::info_span!("request", request_id = id, method = %request.method(), route)
}

/// The request's one line, once its answer is ready: status and milliseconds taken.
pub fn answered(response: &Response, latency: Duration, _span: &Span) {
    tracing::info!(
        status = response.status().as_u16(),
        // Whole microseconds, so the number prints short.
        duration_ms = latency.as_micros() as f64 / 1000.0,
        "answered"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_ids_up_to_128_characters_are_kept() {
        assert!(usable(b"test-123"));
        assert!(usable(b"0f8e3c1a-2b7d-4a9e-8c51-6d0e4f2a9b13"));
        assert!(usable("a".repeat(128).as_bytes()));
        assert!(!usable("a".repeat(129).as_bytes()));
        assert!(!usable(b""));
        assert!(!usable(b"two words"));
        assert!(!usable(b"line\nbreak"));
        assert!(!usable("caf\u{e9}".as_bytes()));
    }
}
