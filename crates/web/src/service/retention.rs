//! A group's retention (docs/operations.md, "Retention"): read and changed by its managers.
//! A group that never had its own follows the service's defaults; the first change pins all
//! four values, so later changes of the defaults no longer move it.

use devicecloud_store::retention::{self, Kind, Retention};
use devicecloud_store::unix_now;
use serde_json::{Map, Value};

use super::validate::Fields;
use super::{ServiceError, access};
use crate::caller::Caller;
use crate::state::AppState;
use devicecloud_engine::auth::Role;

/// The most days one value may name: a hundred years.
pub const MAX_DAYS: i64 = 36_500;

/// The field of each kind, in the record's order.
pub const FIELDS: [(&str, Kind); 4] = [
    ("raw_days", Kind::Raw),
    ("minute_days", Kind::Minute),
    ("hour_days", Kind::Hour),
    ("day_days", Kind::Day),
];

/// The retention in force for the group `id`: a manager of it.
pub async fn get(state: &AppState, caller: &Caller, id: &str) -> Result<Retention, ServiceError> {
    access::group(state, caller, id, Role::Manager).await?;
    in_force(state, id).await
}

/// The retention in force for the group `id`, its own or the defaults, unchecked: for callers
/// that checked the caller's role in the group already.
pub async fn in_force(state: &AppState, id: &str) -> Result<Retention, ServiceError> {
    Ok(retention::get(&state.db, id)
        .await?
        .unwrap_or(state.settings.retention.into()))
}

/// Changes the group's retention with `{raw_days?, minute_days?, hour_days?, day_days?}`, each
/// a whole number of days from 1 to [`MAX_DAYS`] or null (keep forever); a field left out keeps
/// its value. A manager of the group.
pub async fn put(
    state: &AppState,
    caller: &Caller,
    id: &str,
    input: &Map<String, Value>,
) -> Result<Retention, ServiceError> {
    access::group(state, caller, id, Role::Manager).await?;
    let mut next = in_force(state, id).await?;
    let mut f = Fields::new(input);
    for (field, kind) in FIELDS {
        match input.get(field) {
            None => {}
            Some(Value::Null) => *kind.days_of(&mut next) = None,
            Some(Value::String(s)) if s.is_empty() => *kind.days_of(&mut next) = None,
            Some(_) => {
                if let Some(days) = f.integer(field, false, 1, MAX_DAYS) {
                    *kind.days_of(&mut next) = Some(days);
                }
            }
        }
    }
    f.finish()?;
    retention::set(&state.db, id, &next, unix_now()).await?;
    Ok(next)
}
