//! The service layer: the typed operations the transports share. The JSON API (`http`) and the
//! dashboard turn their input into a call `(state, caller, input) -> Result<output,
//! ServiceError>` here; the operation owns its effects (store writes, metrics, the command log,
//! cache invalidation), so that neither transport calls the other (docs/ARCHITECTURE.md).

pub mod access;
pub mod accounts;
pub mod alarms;

pub mod commands;
pub mod devices;
mod error;
pub mod export;
pub mod firmware;
pub mod groups;
pub mod jobs;
pub mod memberships;
pub mod retention;
pub mod sessions;
pub mod sign_in;
pub mod twins;

pub mod validate;
pub mod webhooks;

pub use error::{FieldError, ServiceError};

/// The fields an operation reads, as its transport received them (a JSON body, a form).
pub type Input = serde_json::Map<String, serde_json::Value>;

/// What every operation answers: its output, or why it did nothing.
pub type Result<T, E = ServiceError> = std::result::Result<T, E>;
