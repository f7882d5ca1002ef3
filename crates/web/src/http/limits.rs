//! The per-request limits of docs/operations.md, "Limits", applied before any handler runs:
//! the depth of `expand`, the time a body may take to arrive, and the time a request's store
//! work may take. The connection limits live in `http::listener`, the filter's list lengths in
//! the `query` crate.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::http::header::CONTENT_LENGTH;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use devicecloud_query::{Params, fields};
use futures::StreamExt;
use http_body_util::BodyExt;

use crate::http::commands::waits_for_gateway;
use crate::http::error::ApiError;
use crate::http::firmware_upload::streams_body;
use crate::state::AppState;

/// How much longer than the query timeout a handler may run before it is cut short: enough
/// for the store's own cancellation to answer first.
const GRACE: Duration = Duration::from_secs(1);

/// Checks `expand`, reads the body whole within its time, then runs the handler within the
/// request's time bound.
pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match guarded(&state, request, next).await {
        Ok(response) | Err(response) => response,
    }
}

async fn guarded(state: &AppState, request: Request, next: Next) -> Result<Response, Response> {
    let limits = &state.settings.limits;
    if let Some(query) = request
        .uri()
        .query()
        .filter(|_| request.uri().path().starts_with("/api/"))
    {
        if Params::has_too_many_pairs(query.as_bytes()) {
            return Err(ApiError::invalid(
                "filter",
                format!(
                    "The query string has more than {} parameters.",
                    devicecloud_query::MAX_INPUT_VARS
                ),
            )
            .into_response());
        }
        check_expand(query, limits.expand_max_depth).map_err(IntoResponse::into_response)?;
    }
    // The store cancels its own statements at the query timeout (`Db::for_requests`) and the
    // handler answers 503 from that; this bound, a little later, catches whatever else waits.
    let route = request.extensions().get::<MatchedPath>();
    if route.is_some_and(|route| streams_body(state, request.method(), route.as_str())) {
        // A firmware upload: its handler reads the body piece by piece, each within the body
        // timeout, and writes it as it comes; its store work is bounded statement by statement.
        return Ok(next.run(request).await);
    }
    let bound = match route {
        Some(route) if waits_for_gateway(route.as_str()) => {
            limits.query_timeout + state.settings.command_timeout + GRACE
        }
        _ => limits.query_timeout + GRACE,
    };
    let request = read_body(state, request).await.map_err(IntoResponse::into_response)?;
    match tokio::time::timeout(bound, next.run(request)).await {
        Ok(response) => Ok(response),
        Err(_) => {
            metrics::counter!("devicecloud_http_timeouts_total").increment(1);
            Err(ApiError::Busy(format!(
                "The request took longer than {} ms; it was cancelled.",
                bound.as_millis()
            ))
            .into_response())
        }
    }
}

/// A deeper `expand` path than `max` segments is refused before any store work: each segment
/// is one more relation rendered (and, for `parent`, one more level of recursion).
fn check_expand(query: &str, max: usize) -> Result<(), ApiError> {
    // Any byte of the name may be percent-encoded (`%65xpand`): only a query without both is
    // passed without parsing.
    if !query.contains("expand") && !query.contains('%') {
        return Ok(());
    }
    let params = Params::parse_query(query.as_bytes());
    let Some(expand) = params.get_scalar("expand") else {
        return Ok(());
    };
    match fields::parse_list(expand)
        .iter()
        .find(|path| path.split('.').count() > max)
    {
        Some(path) => {
            let shown: String = path.chars().take(64).collect();
            let more = if shown.len() < path.len() { "…" } else { "" };
            Err(ApiError::BadRequest(format!(
                "Invalid expand: \"{shown}{more}\" has {} segments; at most {max} are allowed (such as parent.parent.parent.group).",
                path.split('.').count()
            )))
        }
        None => Ok(()),
    }
}

/// Reads (some of) a request body within the body timeout (408 past it), unless the service
/// stops first (503): the whole body here, each piece of a firmware upload
/// (`http::firmware_upload`).
pub(crate) async fn within_body_timeout<T>(
    state: &AppState,
    read: impl std::future::Future<Output = T>,
) -> Result<T, ApiError> {
    let timeout: Duration = state.settings.limits.http_body_timeout;
    tokio::select! {
        _ = state.shutdown.cancelled() => Err(ApiError::Busy("The service is shutting down.".into())),
        read = tokio::time::timeout(timeout, read) => read.map_err(|_| {
            metrics::counter!("devicecloud_http_timeouts_total").increment(1);
            ApiError::Status(
                StatusCode::REQUEST_TIMEOUT,
                format!("The request body did not arrive within {} s.", timeout.as_secs()),
            )
        }),
    }
}

/// Reads the body whole before the handler runs, so that a slow or stalled sender is bounded
/// by the body timeout (408) and a shutdown does not wait for it (503). Requests without a body
/// pass untouched. A body over the size limit is left to the handler, whose extractor answers
/// 413 once the caller is authenticated (401 comes first, as everywhere): it then reads what
/// was already received followed by the rest, which it stops reading at the limit.
async fn read_body(state: &AppState, request: Request) -> Result<Request, ApiError> {
    use axum::body::HttpBody;
    let limit = state.settings.max_body_bytes;
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if request.body().is_end_stream() || declared.is_some_and(|n| n > limit as u64) {
        return Ok(request);
    }
    let (parts, mut body) = request.into_parts();
    // The frames as they came: a body that arrives in one frame (most) is passed on as is,
    // without a copy.
    let mut received: Vec<Bytes> = Vec::new();
    let mut length = 0;
    let read = async {
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|_| ApiError::BadRequest("The request body could not be read.".into()))?;
            if let Ok(data) = frame.into_data() {
                length += data.len();
                received.push(data);
                if length > limit {
                    return Ok(false);
                }
            }
        }
        Ok::<bool, ApiError>(true)
    };
    let complete = within_body_timeout(state, read).await??;
    let received = match received.len() {
        0 => Bytes::new(),
        1 => received.swap_remove(0),
        _ => Bytes::from(received.concat()),
    };
    if complete {
        return Ok(Request::from_parts(parts, Body::from(received)));
    }
    let replay = futures::stream::once(async move { Ok::<_, axum::Error>(received) });
    let rest = body.into_data_stream();
    Ok(Request::from_parts(parts, Body::from_stream(replay.chain(rest))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expand_depth() {
        assert!(check_expand("expand=parent.parent.parent.group", 4).is_ok());
        assert!(check_expand("expand=group,parent.parent.parent.parent.group", 4).is_err());
        assert!(check_expand(&format!("expand={}", vec!["parent"; 200].join(".")), 4).is_err());
        assert!(check_expand("expand[]=parent.parent.parent.parent.parent", 4).is_ok());
        assert!(check_expand("fields=a.b.c.d.e.f", 4).is_ok());
        assert!(check_expand("%65xpand=parent.parent.parent.parent.group", 4).is_err());
        assert!(check_expand("e%78pand=parent.parent.parent.parent.group", 4).is_err());
    }
}
