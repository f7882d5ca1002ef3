//! The HTTP layer's one error type. Handlers return `Result<_, ApiError>` and use `?`; every
//! error leaves as the specification's body `{name, message, code, status}` (Errors section),
//! and unexpected failures are logged here and answered without internals.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use devicecloud_protocol::CommandMethod;
use devicecloud_query::QueryError;
use devicecloud_store::StoreError;
use serde_json::{Value, json};

use crate::service::ServiceError;
use devicecloud_engine::commands::CommandError;

pub use crate::service::FieldError;

/// Errors of the HTTP layer.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400 with a message.
    #[error("{0}")]
    BadRequest(String),
    /// 401 with `WWW-Authenticate: Bearer realm="api"`.
    #[error("{0}")]
    Unauthorized(String),
    /// 404 with a message.
    #[error("{0}")]
    NotFound(String),
    /// 422 with a list of invalid fields (model validation, filter errors).
    #[error("data validation failed")]
    Validation(Vec<FieldError>),
    /// Any other status with the standard body.
    #[error("{1}")]
    Status(StatusCode, String),
    /// 503 with `Retry-After`: the store did not answer in time, or the service is stopping
    /// (docs/operations.md, "Limits").
    #[error("{0}")]
    Busy(String),
    /// 429 with `Retry-After`: past an account's rate limit, or past the failed sign-ins of a
    /// username from one address (docs/operations.md, "Limits").
    #[error("{message}")]
    TooManyRequests { message: String, retry_after_s: u64 },
    /// An OAuth 2.0 endpoint error: the standard body plus RFC 6749 §5.2 `error` fields, and
    /// `Retry-After` when the client is to wait.
    #[error("{description}")]
    OAuth {
        status: StatusCode,
        error: &'static str,
        description: String,
        retry_after_s: Option<u64>,
    },
    /// Something that should not happen; logged, answered 500 without details.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    /// The "invalid credentials" 401 of Yii's HttpBearerAuth.
    pub fn invalid_credentials() -> ApiError {
        ApiError::Unauthorized("Your request was made with invalid credentials.".into())
    }

    /// The 401 the specification uses for a role too low for the action.
    pub fn forbidden() -> ApiError {
        ApiError::Unauthorized("You are not allowed to perform this action.".into())
    }

    /// The 404 of a record that does not exist or is invisible to the caller.
    pub fn not_found(what: &str, id: &str) -> ApiError {
        ApiError::NotFound(format!("{what} not found: {id}"))
    }

    /// A single-field validation error.
    pub fn invalid(field: &str, message: impl Into<String>) -> ApiError {
        ApiError::Validation(vec![FieldError::new(field, message)])
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> ApiError {
        match err {
            StoreError::Conflict(field) => ApiError::invalid(
                field,
                format!("{} has already been taken.", crate::service::validate::label_of(field)),
            ),
            StoreError::InvalidText(_) => {
                ApiError::BadRequest("The request contains characters that cannot be stored (such as NUL).".into())
            }
            StoreError::Timeout(detail) => {
                tracing::warn!(%detail, "store work past the query timeout");
                ApiError::Busy("The store did not answer in time; the request was cancelled.".into())
            }
            StoreError::Unavailable(detail) => {
                tracing::warn!(%detail, "the store is not available");
                ApiError::Busy("The store is not available; nothing was written. Try again shortly.".into())
            }
            StoreError::DiskFull(detail) => {
                tracing::error!(%detail, "the store's disk is full");
                metrics::counter!("devicecloud_store_disk_full_total").increment(1);
                ApiError::Busy("The store's disk is full; nothing was written. Try again later.".into())
            }
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl From<devicecloud_engine::stream::slots::TooManyStreams> for ApiError {
    fn from(full: devicecloud_engine::stream::slots::TooManyStreams) -> ApiError {
        ApiError::TooManyRequests {
            message: full.to_string(),
            retry_after_s: 5,
        }
    }
}

impl From<ServiceError> for ApiError {
    fn from(err: ServiceError) -> ApiError {
        let message = err.to_string();
        match err {
            ServiceError::NotFound(message) => ApiError::NotFound(message),
            ServiceError::NotAllowed => ApiError::forbidden(),
            ServiceError::Invalid(list) => ApiError::Validation(list),
            ServiceError::BadInput(message) => ApiError::BadRequest(message),
            ServiceError::SignInRefused => ApiError::Unauthorized(message),
            ServiceError::TooManySignIns { retry_after_s } => ApiError::TooManyRequests { message, retry_after_s },
            ServiceError::Busy(message) => ApiError::Busy(message),
            ServiceError::Conflict(message) => ApiError::Status(StatusCode::CONFLICT, message),
            ServiceError::TooLarge(message) => ApiError::Status(StatusCode::PAYLOAD_TOO_LARGE, message),
            ServiceError::Command { method, error } => command_error(method, error),
            ServiceError::Store(e) => e.into(),
            ServiceError::Internal(detail) => ApiError::Internal(detail),
        }
    }
}

/// The answer to a command that failed before the device answered (docs/api.md, "Commands").
fn command_error(method: CommandMethod, error: CommandError) -> ApiError {
    let status = StatusCode::from_u16(error.http_status(method)).unwrap_or(StatusCode::BAD_GATEWAY);
    let message = match error {
        CommandError::Offline => "Device is not online".into(),
        CommandError::Disconnected => "Device is not online: it disconnected before answering".into(),
        CommandError::Timeout(limit) => format!("The device did not answer within {} ms.", limit.as_millis()),
        CommandError::BadResponse(why) => format!("The device answered invalidly: {why}"),
    };
    ApiError::Status(status, message)
}

impl From<QueryError> for ApiError {
    fn from(err: QueryError) -> ApiError {
        match err {
            QueryError::Filter(message) => ApiError::invalid("filter", message),
            QueryError::BadBody(message) => ApiError::BadRequest(message),
        }
    }
}

/// Seconds a client is asked to wait after a 503.
const RETRY_AFTER_S: &str = "5";

/// The reason phrase used as `name`; Yii spells 422 "Unprocessable entity".
pub fn reason(status: StatusCode) -> &'static str {
    match status {
        StatusCode::UNPROCESSABLE_ENTITY => "Unprocessable entity",
        other => other.canonical_reason().unwrap_or("Error"),
    }
}

/// The specification's error body.
pub fn error_body(status: StatusCode, message: &str) -> Value {
    json!({"name": reason(status), "message": message, "code": 0, "status": status.as_u16()})
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, body) = match &self {
            ApiError::BadRequest(m) => (StatusCode::BAD_REQUEST, error_body(StatusCode::BAD_REQUEST, m)),
            ApiError::Unauthorized(m) => (StatusCode::UNAUTHORIZED, error_body(StatusCode::UNAUTHORIZED, m)),
            ApiError::NotFound(m) => (StatusCode::NOT_FOUND, error_body(StatusCode::NOT_FOUND, m)),
            ApiError::Validation(list) => (StatusCode::UNPROCESSABLE_ENTITY, json!(list)),
            ApiError::Status(status, m) => (*status, error_body(*status, m)),
            ApiError::Busy(m) => (
                StatusCode::SERVICE_UNAVAILABLE,
                error_body(StatusCode::SERVICE_UNAVAILABLE, m),
            ),
            ApiError::TooManyRequests { message, .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                error_body(StatusCode::TOO_MANY_REQUESTS, message),
            ),
            ApiError::OAuth {
                status,
                error,
                description,
                ..
            } => {
                let mut body = error_body(*status, description);
                if let Some(map) = body.as_object_mut() {
                    map.insert("error".into(), json!(error));
                    map.insert("error_description".into(), json!(description));
                }
                (*status, body)
            }
            ApiError::Internal(detail) => {
                tracing::error!(error = %detail, "request failed");
                let status = StatusCode::INTERNAL_SERVER_ERROR;
                (status, error_body(status, "An internal server error occurred."))
            }
        };
        let retry_after = match &self {
            _ if status == StatusCode::SERVICE_UNAVAILABLE => Some(HeaderValue::from_static(RETRY_AFTER_S)),
            ApiError::TooManyRequests { retry_after_s, .. }
            | ApiError::OAuth {
                retry_after_s: Some(retry_after_s),
                ..
            } => Some(HeaderValue::from(*retry_after_s)),
            _ => None,
        };
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(value) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"api\""),
            );
        }
        response
    }
}
