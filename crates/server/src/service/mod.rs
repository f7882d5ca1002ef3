//! The service layer: the typed operations the transports share. The JSON API (`http`) and the
//! dashboard turn their input into a call `(state, caller, input) -> Result<output,
//! ServiceError>` here; the operation owns its effects (store writes, metrics, the command log,
//! cache invalidation), so that neither transport calls the other (docs/ARCHITECTURE.md).

pub mod access;
pub mod accounts;

pub mod commands;
pub mod devices;
mod error;
pub mod groups;
pub mod memberships;
pub mod retention;
pub mod sessions;
pub mod sign_in;

pub mod validate;
pub mod webhooks;

pub use error::{FieldError, ServiceError};
