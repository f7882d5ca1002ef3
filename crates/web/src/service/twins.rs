//! Device twins (docs/api.md, "Twins"): reading a device's twin (viewer) and changing its desired
//! document (operator) with a JSON merge patch, optionally only at a given version; the
//! dashboard edits the whole document, sent as the patch that turns the current one into it.

use devicecloud_engine::auth::Role;
use devicecloud_engine::twins::{self, TwinError};
use devicecloud_protocol::twin;
use devicecloud_store::twins::{self as stored, TwinRow};
use serde_json::{Map, Value};

use super::{Input, Result, ServiceError, access};
use crate::caller::Caller;
use crate::state::AppState;

/// The twin of device `id`, the caller's to see.
pub async fn get(state: &AppState, caller: &Caller, id: &str) -> Result<TwinRow> {
    access::device(state, caller, id, Role::Viewer).await?;
    stored::get(&state.db, id)
        .await?
        .ok_or_else(|| ServiceError::not_found("Physical device", id))
}

/// Changes the desired document of device `id` from `{"desired": <merge patch>, "version"?: n}`;
/// the caller must be an operator of its group.
pub async fn change(state: &AppState, caller: &Caller, id: &str, input: &Input) -> Result<TwinRow> {
    access::device(state, caller, id, Role::Operator).await?;
    let mut errors = Vec::new();
    let patch = match input.get("desired") {
        Some(Value::Object(patch)) => Some(patch),
        None | Some(Value::Null) => {
            errors.push(super::FieldError::new("desired", "Desired cannot be blank."));
            None
        }
        Some(_) => {
            errors.push(super::FieldError::new(
                "desired",
                "Desired must be a JSON object (a merge patch).",
            ));
            None
        }
    };
    let version = match input.get("version") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_i64().filter(|n| *n >= 0) {
            Some(n) => Some(n),
            None => {
                errors.push(super::FieldError::new(
                    "version",
                    "Version must be a non-negative integer.",
                ));
                None
            }
        },
    };
    match patch {
        Some(patch) if errors.is_empty() => apply(state, id, patch, version).await,
        _ => Err(ServiceError::Invalid(errors)),
    }
}

/// Replaces the desired document of device `id` with `document` (the dashboard's editor), if
/// it is still at `version`; the caller must be an operator of its group.
pub async fn replace(
    state: &AppState,
    caller: &Caller,
    id: &str,
    document: &Map<String, Value>,
    version: i64,
) -> Result<TwinRow> {
    access::device(state, caller, id, Role::Operator).await?;
    let current = stored::get(&state.db, id)
        .await?
        .ok_or_else(|| ServiceError::not_found("Physical device", id))?;
    let patch = twin::diff_patch(&twin::document(&current.desired), document);
    apply(state, id, &patch, Some(version)).await
}

async fn apply(state: &AppState, id: &str, patch: &Map<String, Value>, version: Option<i64>) -> Result<TwinRow> {
    twins::change_desired(&state.twins, id, patch, version)
        .await
        .map_err(|e| match e {
            TwinError::NotFound => ServiceError::not_found("Physical device", id),
            TwinError::VersionMismatch { current, expected } => ServiceError::Conflict(format!(
                "The twin's desired document is at version {current}, not {expected}; read it again and retry."
            )),
            TwinError::Invalid(why) => ServiceError::invalid("desired", format!("Desired {why}.")),
            TwinError::Busy | TwinError::Failed(_) => ServiceError::Busy(e.to_string()),
            TwinError::Store(e) => ServiceError::Store(e),
        })
}
