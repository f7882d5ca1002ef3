//! What every page a browser shows shares, whichever front end serves it (the dashboard, the
//! API reference): its headers.

use axum::Router;
use axum::http::HeaderValue;
use axum::http::header::{CONTENT_SECURITY_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS};
use tower_http::set_header::SetResponseHeaderLayer;

/// The headers of every page a browser shows: its content security policy `csp` (unless a
/// handler set its own), no framing, no content sniffing.
pub fn pages<S: Clone + Send + Sync + 'static>(routes: Router<S>, csp: &'static str) -> Router<S> {
    routes
        .layer(SetResponseHeaderLayer::if_not_present(
            CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(csp),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
}
