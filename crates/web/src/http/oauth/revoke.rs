//! `POST /oauth2/revoke` (RFC 7009; docs/api.md, "Authentication"): a client ends a token pair
//! it was issued, named by either of its tokens. The answer is 200 with an empty body whether or
//! not the token was known, so it tells nothing about other tokens; the bearer cache forgets
//! the pair at once, so its next request on this node answers 401.

use axum::extract::{Request, State};
use axum::http::header::CACHE_CONTROL;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use devicecloud_store::tokens;
use utoipa::ToSchema;

use super::{authenticate_client, field, form_fields, oauth};
use crate::http::error::ApiError;
use crate::state::AppState;
use devicecloud_engine::auth::secrets::token_hash;
use devicecloud_engine::peers::{self, Change};

/// The fields of a revocation request (url-encoded, multipart, or a JSON object of strings).
// Only describes the form in the OpenAPI document, as `TokenForm` does.
#[derive(ToSchema)]
#[expect(dead_code, reason = "describes the form the handler reads field by field")]
struct RevokeForm {
    /// The access token or the refresh token of the pair to end.
    token: String,
    /// `access_token` or `refresh_token`; optional, and both kinds are searched whatever it says.
    token_type_hint: Option<String>,
    /// The client's id, unless it authenticates with HTTP Basic.
    client_id: Option<String>,
    /// The client's secret, unless it authenticates with HTTP Basic.
    client_secret: Option<String>,
}

/// Revoke a token
///
/// RFC 7009: ends the pair of either token; 200 also for an unknown token; 400 `invalid_client` for
/// a bad client.
#[utoipa::path(post, path = "/oauth2/revoke", tag = "authentication",
    request_body(content = RevokeForm, content_type = "application/x-www-form-urlencoded", description = "token (access or refresh token), token_type_hint?, and the client: client_id and client_secret, or HTTP Basic"),
    responses((status = 200, description = "Revoked, or not a token of this client: an empty body either way"), (status = 400, description = "invalid_client (client credentials missing or wrong) or invalid_request (no token)")))]
pub async fn revoke(State(state): State<AppState>, req: Request) -> Result<Response, ApiError> {
    let headers = req.headers().clone();
    let fields = form_fields(req, &state).await?;
    let client_id = authenticate_client(&state, &headers, &fields).await?;
    let token = field(&fields, "token").ok_or_else(|| {
        oauth(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "Missing parameters: \"token\" required",
        )
    })?;
    // The hint only says where to look first; one statement looks at both kinds anyway.
    if let Some(access_hash) = tokens::revoke(&state.db, &token_hash(token), &client_id).await? {
        peers::apply::change(&state.peers, Change::Token { hash: access_hash });
    }
    // No body, so no content type either.
    Ok((StatusCode::OK, [(CACHE_CONTROL, HeaderValue::from_static("no-store"))]).into_response())
}
