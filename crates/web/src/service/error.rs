//! The service layer's one error type: what went wrong in the terms of the operation. Each
//! transport says it in its own way (the JSON API as the specification's error bodies, see
//! `crate::http::error`; the dashboard as a page).

use devicecloud_protocol::CommandMethod;
use devicecloud_store::StoreError;

use devicecloud_engine::commands::CommandError;

/// One invalid field of an operation's input: Yii's `[{field, message}]` validation list
/// (docs/api.md, "Errors").
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: &str, message: impl Into<String>) -> FieldError {
        FieldError {
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// Why an operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The record does not exist or the caller cannot see it (the two are not told apart).
    #[error("{0}")]
    NotFound(String),
    /// The caller sees the record but their role is too low for the operation.
    #[error("You are not allowed to perform this action.")]
    NotAllowed,
    /// Invalid input fields, every one reported.
    #[error("data validation failed")]
    Invalid(Vec<FieldError>),
    /// Input that cannot be read as the operation's input at all.
    #[error("{0}")]
    BadInput(String),
    /// A username and password that do not sign in (wrong, unknown, or a disabled account; the
    /// three are not told apart).
    #[error("Invalid username and password combination")]
    SignInRefused,
    /// Too many failed sign-ins of this username from this client address: the password was not
    /// checked; try again after `retry_after_s` seconds.
    #[error("Too many failed sign-in attempts; try again in {retry_after_s} seconds.")]
    TooManySignIns { retry_after_s: u64 },
    /// A shared resource (the password lane) stayed taken for longer than a caller may wait:
    /// 503 with `Retry-After`.
    #[error("{0}")]
    Busy(String),
    /// A body past a size limit (a firmware image): 413.
    #[error("{0}")]
    TooLarge(String),
    /// The record changed since the caller read it (a twin's `version`): 409.
    #[error("{0}")]
    Conflict(String),
    /// A command that did not get an answer from its gateway.
    #[error("{method:?}: {error}")]
    Command { method: CommandMethod, error: CommandError },
    /// The store failed (or ran past the query timeout).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Something that should not happen (a worker thread that died).
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<devicecloud_engine::auth::hashing::LaneBusy> for ServiceError {
    fn from(busy: devicecloud_engine::auth::hashing::LaneBusy) -> ServiceError {
        ServiceError::Busy(busy.to_string())
    }
}

impl ServiceError {
    /// A record that does not exist or is invisible to the caller.
    pub fn not_found(what: &'static str, id: &str) -> ServiceError {
        ServiceError::NotFound(format!("{what} not found: {id}"))
    }

    /// A single-field validation error.
    pub fn invalid(field: &str, message: impl Into<String>) -> ServiceError {
        ServiceError::Invalid(vec![FieldError::new(field, message)])
    }
}
