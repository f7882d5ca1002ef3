//! The OAuth 2.0 endpoints (docs/api.md, "Authentication"): `POST /oauth2/token` (the password
//! and refresh grants) and `POST /oauth2/revoke` (RFC 7009). Both read form bodies (url-encoded
//! or multipart, or a JSON object of strings), authenticate the API client the same way, and
//! answer errors with the specification's body plus RFC 6749 §5.2's `error` fields.

pub mod revoke;
pub mod token;

use std::collections::HashMap;

use axum::Router;
use axum::extract::{FromRequest, Multipart, Request};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use base64::Engine;
use devicecloud_query::Params;
use devicecloud_store::clients;

use super::collection::read_body;
use crate::http::error::ApiError;
use crate::state::AppState;
use devicecloud_engine::auth::secrets::{same_hash, token_hash};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/oauth2/token", post(token::token))
        .route("/oauth2/revoke", post(revoke::revoke))
}

/// An OAuth error answer.
fn oauth(status: StatusCode, error: &'static str, description: impl Into<String>) -> ApiError {
    ApiError::OAuth {
        status,
        error,
        description: description.into(),
        retry_after_s: None,
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

/// The form fields of an OAuth request, whatever encoding carried them.
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

/// A form field, absent when empty.
fn field<'a>(fields: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    fields.get(name).map(String::as_str).filter(|v| !v.is_empty())
}

/// The client's id and secret from HTTP Basic (RFC 6749 §2.3.1: each form-urlencoded, then
/// joined by `:`), or else from the form's `client_id` and `client_secret`.
fn client_credentials(headers: &HeaderMap, fields: &HashMap<String, String>) -> (Option<String>, Option<String>) {
    let basic = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
        .and_then(|(_, encoded)| base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok());
    if let Some(pair) = basic {
        let (id, secret) = pair.split_once(':').unwrap_or((&pair, ""));
        let decode = |text: &str| {
            let plus_as_space = text.replace('+', " ");
            let decoded = percent_encoding::percent_decode_str(&plus_as_space).decode_utf8_lossy();
            Some(decoded.into_owned()).filter(|v| !v.is_empty())
        };
        return (decode(id), decode(secret));
    }
    let owned = |name| field(fields, name).map(str::to_string);
    (owned("client_id"), owned("client_secret"))
}

/// The id of the authenticated client; 400 `invalid_client` for a missing id or secret, an
/// unknown client or a wrong secret.
async fn authenticate_client(
    state: &AppState,
    headers: &HeaderMap,
    fields: &HashMap<String, String>,
) -> Result<String, ApiError> {
    let invalid = || {
        oauth(
            StatusCode::BAD_REQUEST,
            "invalid_client",
            "The client credentials are invalid",
        )
    };
    let (client_id, secret) = client_credentials(headers, fields);
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
    let client = clients::get(&state.db, &client_id).await?.ok_or_else(invalid)?;
    if !same_hash(&token_hash(&secret), &client.secret_hash) {
        return Err(invalid());
    }
    Ok(client.client_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_win_over_the_form_and_are_form_decoded() {
        let mut headers = HeaderMap::new();
        let encoded = base64::engine::general_purpose::STANDARD.encode("my%20client:s+cret%3A1");
        headers.insert(AUTHORIZATION, format!("Basic {encoded}").parse().unwrap());
        let form: HashMap<String, String> = [("client_id".to_string(), "form".to_string())].into();
        assert_eq!(
            client_credentials(&headers, &form),
            (Some("my client".into()), Some("s cret:1".into()))
        );
        assert_eq!(
            client_credentials(&HeaderMap::new(), &form),
            (Some("form".into()), None)
        );
        // A bearer header is not a client's credentials.
        headers.insert(AUTHORIZATION, "Bearer abc".parse().unwrap());
        assert_eq!(client_credentials(&headers, &form), (Some("form".into()), None));
    }
}
