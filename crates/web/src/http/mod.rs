//! The HTTP side of the service: one module per resource, each owning its `router()`, put
//! together here with the layers every route shares (error bodies, panics, body limit, metrics).

pub mod alarms;
pub mod api_docs;
pub mod body;
pub mod caller;
pub mod collection;
pub mod commands;
pub mod data;
pub mod device_collection;
pub mod devices;
pub mod error;
pub mod events;
pub mod firmware;
pub mod firmware_download;
pub mod firmware_upload;
pub mod gateway;
pub mod groups;
mod head_deadline;
pub mod health;
pub mod jobs;
pub mod limits;
pub mod listener;
pub mod oauth;
pub mod openapi;
pub mod rate_limit;
pub mod record;
pub mod request_log;
pub mod retention;
pub mod schemas;
pub mod sessions;
pub mod stream;
pub mod twins;
pub mod users;
pub mod webhooks;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::header::{ALLOW, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::http::error::{ApiError, error_body};
use crate::state::AppState;

/// The whole HTTP application as a service: the router, wrapped in the error-body layer and
/// the request id (docs/operations.md, "Logs").
///
/// The error-body layer sits outside the router because axum adds the `Allow` header of a 405
/// after the route's own layers have run. The request id is settled before anything else runs
/// (a usable client id kept, otherwise a UUID) and answered on every response, errors included.
pub fn app(state: AppState, pages: Router<AppState>) -> Router {
    Router::new()
        .fallback_service(router(state, pages))
        .layer(middleware::map_response(json_errors))
        .layer(PropagateRequestIdLayer::new(request_log::X_REQUEST_ID))
        .layer(SetRequestIdLayer::new(request_log::X_REQUEST_ID, MakeRequestUuid))
        .layer(middleware::map_request(request_log::drop_unusable_id))
}

/// The router with every route and the layers that apply per route; the outermost logs each
/// request once, with its matched route. `pages` are the routes of the other front end (the
/// dashboard), served behind the same layers; the crate root decides what they are, so that
/// neither front end depends on the other.
pub fn router(state: AppState, pages: Router<AppState>) -> Router {
    let limit = state.settings.max_body_bytes;
    Router::new()
        .merge(oauth::router())
        .merge(groups::router())
        .merge(retention::router())
        .merge(devices::router())
        .merge(data::router())
        .merge(events::router())
        .merge(stream::router())
        .merge(sessions::router())
        .merge(commands::router())
        .merge(gateway::router())
        .merge(users::router())
        .merge(health::router())
        .merge(openapi::router())
        .merge(api_docs::router())
        .merge(webhooks::router())
        .merge(twins::router())
        .merge(jobs::router())
        .merge(alarms::router())
        .merge(firmware::router(&state))
        .merge(firmware_download::router())
        .merge(pages)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(state.clone(), rate_limit::per_account))
        .layer(middleware::from_fn_with_state(state.clone(), limits::guard))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::Internal("handler panicked".into()).into_response()
        }))
        .layer(middleware::from_fn(count_requests))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_log::span)
                .on_request(())
                .on_response(request_log::answered)
                .on_body_chunk(())
                .on_eos(())
                .on_failure(()),
        )
        .with_state(state)
}

/// Unknown routes: Yii's strict-parsing 404.
async fn not_found() -> ApiError {
    ApiError::NotFound("Page not found.".into())
}

/// The content type of every JSON answer.
const JSON_UTF8: &str = "application/json; charset=UTF-8";

/// Names the charset of every JSON answer, and gives every error the specification's JSON
/// body, including the ones produced below the
/// handlers (405 from routing with its `Allow` header, 400/413/415 from extractor rejections),
/// which axum answers in plain text.
async fn json_errors(mut response: Response) -> Response {
    // JSON answers name their charset, as Yii sends them (`application/json; charset=UTF-8`).
    if response
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v == "application/json")
    {
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(JSON_UTF8));
    }
    let status = response.status();
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/html"));
    // Dashboard pages carry their own HTML error pages.
    if status.as_u16() < 400 || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let message = if status == StatusCode::METHOD_NOT_ALLOWED {
        // Yii lists the methods separated by ", " in the header and the message alike.
        let allow = parts
            .headers
            .get(ALLOW)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(", ");
        if let Ok(value) = HeaderValue::from_str(&allow) {
            parts.headers.insert(ALLOW, value);
        }
        format!("Method Not Allowed. This URL can only handle the following request methods: {allow}.")
    } else {
        let bytes = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes).trim().to_string();
        if text.is_empty() {
            crate::http::error::reason(status).to_string()
        } else {
            text
        }
    };
    let body = serde_json::to_vec(&error_body(status, &message)).unwrap_or_default();
    parts.headers.insert(CONTENT_TYPE, HeaderValue::from_static(JSON_UTF8));
    parts.headers.remove(CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(body))
}

/// Counts requests by method, route template and status for `/metrics`. Every label is
/// bounded (docs/operations.md, "Metrics"): a method outside the standard ones counts as
/// `other`, a path no route matches as `unmatched`.
async fn count_requests(request: Request, next: Next) -> Response {
    let method = match *request.method() {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    };
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let response = next.run(request).await;
    metrics::counter!("devicecloud_http_requests_total", "method" => method, "route" => route, "status" => status_label(response.status())).increment(1);
    response
}

/// The status label of a request: the three digits, for the 100–599 range every answer of
/// this service falls in.
fn status_label(status: StatusCode) -> String {
    match status.as_u16() {
        code @ 100..=599 => code.to_string(),
        _ => "other".to_owned(),
    }
}
