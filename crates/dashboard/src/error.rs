//! The dashboard's one error type: every failure becomes an HTML page (or a redirect to the
//! sign-in form), never the API's JSON body.

use axum::http::header::{LOCATION, RETRY_AFTER};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use maud::html;

use crate::layout;
use devicecloud_web::http::error::ApiError;

/// Why a page could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// No valid session: back to the sign-in form, then to `next`.
    #[error("sign-in required")]
    SignIn { next: String },
    /// A form without the session's CSRF token (or a stale one).
    #[error("the form was not accepted")]
    Csrf,
    /// Too many failed sign-ins of this username from this address.
    #[error("too many sign-in attempts")]
    TooManyAttempts { retry_after_s: u64 },
    /// Whatever the shared API code refused (rights, absence, validation) or failed at.
    #[error(transparent)]
    Api(#[from] ApiError),
}

impl From<devicecloud_web::service::ServiceError> for PageError {
    fn from(e: devicecloud_web::service::ServiceError) -> PageError {
        match e {
            devicecloud_web::service::ServiceError::TooManySignIns { retry_after_s } => {
                PageError::TooManyAttempts { retry_after_s }
            }
            other => PageError::Api(other.into()),
        }
    }
}

impl From<devicecloud_store::StoreError> for PageError {
    fn from(e: devicecloud_store::StoreError) -> PageError {
        PageError::Api(e.into())
    }
}

/// The status and the sentence a person reads for an API error. A role too low is the API's
/// 401; in a browser, where 401 means "sign in", it is a 403.
fn status_and_message(error: &ApiError) -> (StatusCode, String) {
    match error {
        ApiError::BadRequest(m) => (StatusCode::BAD_REQUEST, m.clone()),
        ApiError::Unauthorized(m) => (StatusCode::FORBIDDEN, m.clone()),
        ApiError::NotFound(m) => (StatusCode::NOT_FOUND, m.clone()),
        ApiError::Validation(fields) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            fields
                .iter()
                .map(|f| format!("{}: {}", f.field, f.message))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        ApiError::Status(status, m) => (*status, m.clone()),
        ApiError::Busy(m) => (StatusCode::SERVICE_UNAVAILABLE, m.clone()),
        ApiError::TooManyRequests { message, .. } => (StatusCode::TOO_MANY_REQUESTS, message.clone()),
        ApiError::OAuth {
            status, description, ..
        } => (*status, description.clone()),
        ApiError::Internal(m) => {
            tracing::error!(error = %m, "dashboard page failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong; it has been logged.".into(),
            )
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let (status, message) = match &self {
            PageError::SignIn { next } => {
                let target = format!("/login?next={}", crate::format::url_encode(next));
                let mut response = StatusCode::SEE_OTHER.into_response();
                if let Ok(value) = HeaderValue::from_str(&target) {
                    response.headers_mut().insert(LOCATION, value);
                }
                return response;
            }
            PageError::Csrf => (
                StatusCode::FORBIDDEN,
                "The form was not accepted (its security token is missing or stale). Reload the page and try again."
                    .to_string(),
            ),
            PageError::TooManyAttempts { retry_after_s } => (
                StatusCode::TOO_MANY_REQUESTS,
                format!("Too many failed sign-in attempts. Try again in {retry_after_s} s."),
            ),
            PageError::Api(e) => status_and_message(e),
        };
        let title = status.canonical_reason().unwrap_or("Error");
        let body = layout::bare(
            title,
            html! {
                main.narrow {
                    h1 { (status.as_u16()) " " (title) }
                    p.error { (message) }
                    p { a href="/" { "Back to the overview" } }
                }
            },
        );
        let mut response = (status, Html(body.into_string())).into_response();
        if let PageError::TooManyAttempts { retry_after_s } = self {
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(retry_after_s));
        }
        response
    }
}
