//! The rate limit per account on `/api/v2/` (docs/operations.md, "Limits"), as a layer in front
//! of every API route: a request with a valid bearer token takes one request from its account's
//! allowance, and its answer, whatever it is, carries Yii2's `X-Rate-Limit-Limit`,
//! `X-Rate-Limit-Remaining` and `X-Rate-Limit-Reset`. Past the limit the route does not run: 429
//! with `Retry-After`.
//!
//! A request without a valid token passes untouched, so that the route answers it as before (its
//! own 401, or 404 and 405 before any token check). The account found here is handed to the
//! route's `Caller` extractor, which then needs no second look-up.

use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use devicecloud_store::unix_now;

use crate::http::caller::{Authenticated, bearer_value, token_entry};
use crate::http::error::ApiError;
use crate::state::AppState;
use devicecloud_engine::auth::rate_limit::Allowance;
use devicecloud_engine::auth::secrets::token_hash;

const LIMIT: HeaderName = HeaderName::from_static("x-rate-limit-limit");
const REMAINING: HeaderName = HeaderName::from_static("x-rate-limit-remaining");
const RESET: HeaderName = HeaderName::from_static("x-rate-limit-reset");

/// The layer's function.
pub async fn per_account(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let Some(limiter) = state.account_limiter.as_ref() else {
        return next.run(request).await;
    };
    if !request.uri().path().starts_with("/api/v2/") {
        return next.run(request).await;
    }
    let Some(hash) = bearer_value(request.headers()).map(token_hash) else {
        return next.run(request).await;
    };
    // A store failure here is left to the route, whose own token check answers it.
    let entry = match token_entry(&state, &hash).await {
        Ok(Some(entry)) if entry.expires_at > unix_now() => entry,
        _ => return next.run(request).await,
    };
    let allowance = limiter.check(&entry.id_user);
    let mut response = match allowance.retry_after_s {
        Some(retry_after_s) => ApiError::TooManyRequests {
            message: "Rate limit exceeded.".into(),
            retry_after_s,
        }
        .into_response(),
        None => {
            request.extensions_mut().insert(Authenticated(entry));
            next.run(request).await
        }
    };
    add_headers(&mut response, &allowance);
    response
}

fn add_headers(response: &mut Response, allowance: &Allowance) {
    let headers = response.headers_mut();
    headers.insert(LIMIT, HeaderValue::from(allowance.limit));
    headers.insert(REMAINING, HeaderValue::from(allowance.remaining));
    headers.insert(RESET, HeaderValue::from(allowance.reset_s));
}
