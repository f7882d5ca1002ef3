//! `POST /oauth2/token`: the password grant and the refresh grant of the specification's
//! Authentication section, with form bodies (url-encoded or multipart) and the OAuth 2.0 error
//! fields of RFC 6749 §5.2 added to the specification's error body (docs/api.md, "Authentication").

use std::collections::HashMap;

use axum::Router;
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use devicecloud_query::Params;
use devicecloud_store::{clients, tokens, unix_now};
use serde::Serialize;
use time::OffsetDateTime;
use time::macros::format_description;
use utoipa::ToSchema;

use super::collection::read_body;
use crate::auth::login::check_password;
use crate::auth::secrets::{random_token, same_hash, token_hash};
use crate::error::ApiError;
use crate::state::AppState;

/// Lifetime of a new access token (specification, Limits).
pub const ACCESS_TOKEN_LIFETIME_S: i64 = 86_400;
/// Lifetime after a refresh (specification, Limits).
pub const REFRESHED_LIFETIME_S: i64 = 14 * 86_400;

pub fn router() -> Router<AppState> {
    Router::new().route("/oauth2/token", post(token))
}

fn oauth(status: StatusCode, error: &'static str, description: impl Into<String>) -> ApiError {
    ApiError::OAuth {
        status,
        error,
        description: description.into(),
    }
}

/// A body over the limit stays a 413 (with the standard body); anything else malformed in a
/// multipart body is the client's `invalid_request`.
fn multipart_error(e: axum::extract::multipart::MultipartError) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::Status(StatusCode::PAYLOAD_TOO_LARGE, e.body_text())
    } else {
        oauth(StatusCode::BAD_REQUEST, "invalid_request", e.body_text())
    }
}

/// The form fields of a token request, whatever encoding carried them.
async fn form_fields(req: Request, state: &AppState) -> Result<HashMap<String, String>, ApiError> {
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let mut fields = HashMap::new();
    if content_type.starts_with("multipart/form-data") {
        let mut multipart = Multipart::from_request(req, state)
            .await
            .map_err(|e| oauth(StatusCode::BAD_REQUEST, "invalid_request", e.body_text()))?;
        while let Some(field) = multipart.next_field().await.map_err(multipart_error)? {
            let name = field.name().unwrap_or_default().to_string();
            let value = field.text().await.map_err(multipart_error)?;
            fields.insert(name, value);
        }
    } else {
        let body = read_body(req, state.settings.max_body_bytes).await?;
        if content_type.starts_with("application/json") {
            let object = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.as_object().cloned());
            let object = object.ok_or_else(|| {
                oauth(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    "The request body is not a JSON object.",
                )
            })?;
            for (key, value) in object {
                if let Some(text) = value.as_str() {
                    fields.insert(key, text.to_string());
                }
            }
        } else {
            for (key, value) in Params::parse_query(&body).iter() {
                if let Some(text) = value.as_scalar() {
                    fields.insert(key.to_string(), text.to_string());
                }
            }
        }
    }
    Ok(fields)
}

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

#[utoipa::path(post, path = "/oauth2/token", tag = "authentication",
    request_body(content = TokenForm, content_type = "application/x-www-form-urlencoded", description = "grant_type=password (client_id, client_secret, username, password) or grant_type=refresh_token (refresh_token, client_id, client_secret, with Authorization: Bearer)"),
    responses((status = 200, description = "Token response, or {refreshed, expires} for a refresh", body = TokenAnswer), (status = 400, description = "Invalid request, client or grant"), (status = 401, description = "Invalid username and password combination, or invalid bearer token on refresh")))]
pub async fn token(State(state): State<AppState>, req: Request) -> Result<Response, ApiError> {
    let headers = req.headers().clone();
    let fields = form_fields(req, &state).await?;
    let field = |name: &str| fields.get(name).map(String::as_str).filter(|v| !v.is_empty());
    let grant = field("grant_type").ok_or_else(|| {
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
    let client_id = authenticate_client(&state, field("client_id"), field("client_secret")).await?;
    let mut response = if grant == "password" {
        password_grant(&state, &client_id, field("username"), field("password")).await?
    } else {
        refresh_grant(&state, &client_id, &headers, field("refresh_token")).await?
    };
    response
        .headers_mut()
        .insert(CACHE_CONTROL, axum::http::HeaderValue::from_static("no-store"));
    Ok(response)
}

/// 400 `invalid_client` for a missing id or secret, an unknown client or a wrong secret.
async fn authenticate_client(
    state: &AppState,
    client_id: Option<&str>,
    secret: Option<&str>,
) -> Result<String, ApiError> {
    let invalid = || {
        oauth(
            StatusCode::BAD_REQUEST,
            "invalid_client",
            "The client credentials are invalid",
        )
    };
    let client_id = client_id.ok_or_else(invalid)?;
    let secret = secret.ok_or_else(|| {
        oauth(
            StatusCode::BAD_REQUEST,
            "invalid_client",
            "The client must authenticate with its client_secret",
        )
    })?;
    if client_id.contains('\0') {
        return Err(invalid());
    }
    let client = clients::get(&state.db, client_id).await?.ok_or_else(invalid)?;
    if !same_hash(&token_hash(secret), &client.secret_hash) {
        return Err(invalid());
    }
    Ok(client.client_id)
}

async fn password_grant(
    state: &AppState,
    client_id: &str,
    username: Option<&str>,
    password: Option<&str>,
) -> Result<Response, ApiError> {
    let (Some(username), Some(password)) = (username, password) else {
        return Err(oauth(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "Missing parameters: \"username\" and \"password\" required",
        ));
    };
    let account = check_password(state, username, password).await?;
    let account = match account {
        Some(account) => account,
        None => {
            return Err(oauth(
                StatusCode::UNAUTHORIZED,
                "invalid_grant",
                "Invalid username and password combination",
            ));
        }
    };
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

/// An argon2 hash of a random password nobody knows, made once.
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
    let bearer = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, token)| scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty())
        .map(|(_, token)| token.trim())
        .ok_or_else(invalid_token)?;
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
    let expires = unix_now() + REFRESHED_LIFETIME_S;
    if !tokens::refresh(&state.db, &access_hash, &token_hash(refresh), client_id, expires).await? {
        return Err(oauth(StatusCode::BAD_REQUEST, "invalid_grant", "Invalid refresh token"));
    }
    state.auth.forget_token(&access_hash);
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
