//! `POST /oauth2/token`: the password grant and the refresh grant of the specification's
//! Authentication section (docs/api.md, "Authentication"). The password grant goes through the
//! sign-in operation (its failure limit per username and client address included); a refresh
//! extends a pair at most until the token lifetime after its password grant.

use axum::extract::{Request, State};
use axum::http::header::CACHE_CONTROL;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use devicecloud_store::tokens::{self, Refresh};
use devicecloud_store::unix_now;
use serde::Serialize;
use time::OffsetDateTime;
use time::macros::format_description;
use utoipa::ToSchema;

use super::{authenticate_client, field, form_fields, oauth};
use crate::http::caller::bearer_value;
use crate::http::error::ApiError;
use crate::origin::Origin;
use crate::service::ServiceError;
use crate::service::sign_in::sign_in;
use crate::state::AppState;
use devicecloud_engine::auth::secrets::{random_token, token_hash};
use devicecloud_engine::peers::{self, Change};

/// Lifetime of a new access token (specification, Limits).
pub const ACCESS_TOKEN_LIFETIME_S: i64 = 86_400;
/// Lifetime after a refresh (specification, Limits).
pub const REFRESHED_LIFETIME_S: i64 = 14 * 86_400;

/// The fields of a token request (url-encoded, multipart, or a JSON object of strings).
// Only describes the form in the OpenAPI document: the handler reads the fields one by one from
// whichever encoding came, so that each missing one gets its own OAuth error.
#[derive(ToSchema)]
#[expect(dead_code, reason = "describes the form the handler reads field by field")]
struct TokenForm {
    /// `password` or `refresh_token`.
    grant_type: String,
    client_id: String,
    client_secret: String,
    /// The account's user name, for the password grant.
    username: Option<String>,
    /// The account's password, for the password grant.
    password: Option<String>,
    /// The refresh token, for the refresh grant (with the access token in `Authorization`).
    refresh_token: Option<String>,
}

/// The answer of a token request: a new token (password grant) or a longer life (refresh).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
enum TokenAnswer {
    Token(NewToken),
    Refreshed(Refreshed),
}

/// The password grant's answer.
#[derive(Serialize, ToSchema)]
struct NewToken {
    access_token: String,
    /// Seconds the access token lives.
    expires_in: i64,
    /// Always `Bearer`.
    token_type: &'static str,
    /// Always null.
    scope: Option<String>,
    refresh_token: String,
}

/// The refresh grant's answer.
#[derive(Serialize, ToSchema)]
struct Refreshed {
    /// Always true.
    refreshed: bool,
    /// The new expiry, `YYYY-MM-DD HH:MM:SS` in UTC.
    expires: String,
}

/// Get a token
///
/// The password and refresh grants. Failed sign-ins are limited per username and address and per
/// address (429 `slow_down` with `Retry-After`); password checks run in a lane of their own (503
/// `temporarily_unavailable` when it stays busy for 2 s).
#[utoipa::path(post, path = "/oauth2/token", tag = "authentication",
    request_body(content = TokenForm, content_type = "application/x-www-form-urlencoded", description = "grant_type=password (client_id, client_secret, username, password) or grant_type=refresh_token (refresh_token, client_id, client_secret, with Authorization: Bearer). The client may authenticate with HTTP Basic instead of client_id and client_secret on the password grant"),
    responses((status = 200, description = "Token response, or {refreshed, expires} for a refresh", body = TokenAnswer), (status = 400, description = "Invalid request, client or grant (a pair granted longer than the token lifetime ago: invalid_grant)"), (status = 401, description = "Invalid username and password combination, or invalid bearer token on refresh"),
        (status = 429, description = "Too many failed sign-ins of this username from this address: error slow_down, the password unchecked", headers(("Retry-After" = u64, description = "Seconds to wait")))))]
pub async fn token(State(state): State<AppState>, origin: Origin, req: Request) -> Result<Response, ApiError> {
    let headers = req.headers().clone();
    let fields = form_fields(req, &state).await?;
    let grant = field(&fields, "grant_type").ok_or_else(|| {
        oauth(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "The grant type was not specified in the request",
        )
    })?;
    if grant != "password" && grant != "refresh_token" {
        return Err(oauth(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            format!("The grant type \"{grant}\" is not supported"),
        ));
    }
    let client_id = authenticate_client(&state, &headers, &fields).await?;
    let mut response = if grant == "password" {
        let credentials = field(&fields, "username").zip(field(&fields, "password"));
        password_grant(&state, &client_id, credentials, &origin).await?
    } else {
        refresh_grant(&state, &client_id, &headers, field(&fields, "refresh_token")).await?
    };
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// The password grant: a new pair for the account `credentials` (username, password) sign in
/// to, from the client address of `origin`.
async fn password_grant(
    state: &AppState,
    client_id: &str,
    credentials: Option<(&str, &str)>,
    origin: &Origin,
) -> Result<Response, ApiError> {
    let Some((username, password)) = credentials else {
        return Err(oauth(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "Missing parameters: \"username\" and \"password\" required",
        ));
    };
    let account = sign_in(state, username, password, origin.client)
        .await
        .map_err(|e| match e {
            ServiceError::SignInRefused => oauth(StatusCode::UNAUTHORIZED, "invalid_grant", e.to_string()),
            // RFC 8628's registered token-endpoint code for "ask again more slowly".
            ServiceError::TooManySignIns { retry_after_s } => ApiError::OAuth {
                status: StatusCode::TOO_MANY_REQUESTS,
                error: "slow_down",
                description: e.to_string(),
                retry_after_s: Some(retry_after_s),
            },
            ServiceError::Busy(_) => ApiError::OAuth {
                status: StatusCode::SERVICE_UNAVAILABLE,
                error: "temporarily_unavailable",
                description: e.to_string(),
                retry_after_s: Some(5),
            },
            other => other.into(),
        })?;
    let (access, refresh) = (random_token(), random_token());
    let now = unix_now();
    tokens::insert(
        &state.db,
        &token_hash(&access),
        &token_hash(&refresh),
        &account.id_user,
        client_id,
        now,
        now + ACCESS_TOKEN_LIFETIME_S,
    )
    .await?;
    let body = TokenAnswer::Token(NewToken {
        access_token: access,
        expires_in: ACCESS_TOKEN_LIFETIME_S,
        token_type: "Bearer",
        scope: None,
        refresh_token: refresh,
    });
    Ok(axum::Json(body).into_response())
}

/// The refresh grant: the access token of the `Authorization` header lives 14 more days, but
/// never past the token lifetime after its password grant.
async fn refresh_grant(
    state: &AppState,
    client_id: &str,
    headers: &HeaderMap,
    refresh: Option<&str>,
) -> Result<Response, ApiError> {
    let invalid_token = || {
        oauth(
            StatusCode::UNAUTHORIZED,
            "invalid_token",
            "Your request was made with invalid credentials.",
        )
    };
    let bearer = bearer_value(headers).ok_or_else(invalid_token)?;
    let access_hash = token_hash(bearer);
    tokens::owner(&state.db, &access_hash)
        .await?
        .ok_or_else(invalid_token)?;
    let refresh = refresh.ok_or_else(|| {
        oauth(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "Missing parameters: \"refresh_token\" required",
        )
    })?;
    let now = unix_now();
    let lifetime_s = i64::try_from(state.settings.limits.token_lifetime.as_secs()).unwrap_or(i64::MAX);
    let wanted = now + REFRESHED_LIFETIME_S;
    let expires = match tokens::refresh(
        &state.db,
        &access_hash,
        &token_hash(refresh),
        client_id,
        wanted,
        lifetime_s,
        now,
    )
    .await?
    {
        Refresh::Extended(expires) => expires,
        Refresh::TooOld => {
            let days = lifetime_s / 86_400;
            return Err(oauth(
                StatusCode::BAD_REQUEST,
                "invalid_grant",
                format!("The token was granted more than {days} days ago and cannot be refreshed; sign in again"),
            ));
        }
        Refresh::Unknown => return Err(oauth(StatusCode::BAD_REQUEST, "invalid_grant", "Invalid refresh token")),
    };
    peers::apply::change(
        &state.peers,
        Change::Token {
            hash: access_hash.clone(),
        },
    );
    let expires_text = OffsetDateTime::from_unix_timestamp(expires)
        .ok()
        .and_then(|t| {
            t.format(format_description!("[year]-[month]-[day] [hour]:[minute]:[second]"))
                .ok()
        })
        .ok_or_else(|| ApiError::Internal("unrepresentable expiry".into()))?;
    let body = TokenAnswer::Refreshed(Refreshed {
        refreshed: true,
        expires: expires_text,
    });
    Ok(axum::Json(body).into_response())
}
