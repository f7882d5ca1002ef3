//! The one ownership check: load the record, load its group, require the caller's role in it.
//! A record whose group the caller cannot see is "not found", never "forbidden", so that ids of
//! other tenants cannot be probed (docs/api.md, "Rights").

use devicecloud_store::alarm_rules::RuleRow;
use devicecloud_store::alarms::AlarmRow;
use devicecloud_store::devices::{self, DeviceRow, OwnedDevice};
use devicecloud_store::firmware::FirmwareRow;
use devicecloud_store::groups::{self, GroupRow};
use devicecloud_store::session_collection::{self, SessionRow};
use devicecloud_store::webhooks::{self, WebhookRow};

use super::{Result, ServiceError};
use crate::caller::Caller;
use crate::state::AppState;
use devicecloud_engine::auth::Role;

/// The group `id_group` with the caller's role in it at least `need`: `Err(None)` when the
/// group is absent or invisible, `Err(Some(NotAllowed))` when the role is too low.
async fn group_with_role(
    state: &AppState,
    caller: &Caller,
    id_group: &str,
    need: Role,
) -> Result<GroupRow, Option<ServiceError>> {
    let group = groups::get(&state.db, id_group)
        .await
        .map_err(|e| Some(e.into()))?
        .ok_or(None)?;
    match caller.role_in(&group) {
        None => Err(None),
        Some(role) if role < need => Err(Some(ServiceError::NotAllowed)),
        Some(_) => Ok(group),
    }
}

/// A record of a group, checked: `what` names it in the not-found answer.
async fn owned<T>(
    state: &AppState,
    caller: &Caller,
    (what, id): (&'static str, &str),
    record: Option<T>,
    id_group: impl Fn(&T) -> &str,
    need: Role,
) -> Result<T> {
    let record = record.ok_or_else(|| ServiceError::not_found(what, id))?;
    match group_with_role(state, caller, id_group(&record), need).await {
        Ok(_) => Ok(record),
        Err(None) => Err(ServiceError::not_found(what, id)),
        Err(Some(e)) => Err(e),
    }
}

/// The group `id` as the caller may act on it with `need`.
pub async fn group(state: &AppState, caller: &Caller, id: &str, need: Role) -> Result<GroupRow> {
    group_with_role(state, caller, id, need)
        .await
        .map_err(|e| e.unwrap_or_else(|| ServiceError::not_found("Group", id)))
}

/// Every group of `ids` as the caller may act on it with `need`, in one query: the first that
/// is absent or invisible is "not found", a role too low anywhere is "not allowed".
pub async fn groups(state: &AppState, caller: &Caller, ids: &[String], need: Role) -> Result<()> {
    let rows = groups::get_many(&state.db, ids).await?;
    for id in ids {
        let role = rows.iter().find(|g| g.id_group == *id).and_then(|g| caller.role_in(g));
        match role {
            None => return Err(ServiceError::not_found("Group", id)),
            Some(role) if role < need => return Err(ServiceError::NotAllowed),
            Some(_) => {}
        }
    }
    Ok(())
}

/// The device `id` as the caller may act on it with `need`: read with its group's deletion
/// time in one query, the same answers as [`owned`].
pub async fn device(state: &AppState, caller: &Caller, id: &str, need: Role) -> Result<DeviceRow> {
    Ok(owned_device(state, caller, id, need).await?.device)
}

/// The device `id` as the caller may act on it with `need`, with the node holding its
/// connection when it is a connected gateway (a command's target).
pub async fn owned_device(state: &AppState, caller: &Caller, id: &str, need: Role) -> Result<OwnedDevice> {
    let not_found = || ServiceError::not_found("Physical device", id);
    let row = devices::get_owned(&state.db, id).await?.ok_or_else(not_found)?;
    match caller.role_in_record(&row.device.id_group, row.group_deleted_at.is_some()) {
        None => Err(not_found()),
        Some(role) if role < need => Err(ServiceError::NotAllowed),
        Some(_) => Ok(row),
    }
}

/// The data session `id` as the caller may act on it with `need`.
pub async fn session(state: &AppState, caller: &Caller, id: &str, need: Role) -> Result<SessionRow> {
    let row = session_collection::get(&state.db, id).await?;
    owned(state, caller, ("Data session", id), row, |s| &s.id_group, need).await
}

/// The webhook `id` as the caller may act on it with `need`.
pub async fn webhook(state: &AppState, caller: &Caller, id: &str, need: Role) -> Result<WebhookRow> {
    let row = webhooks::get(&state.db, id).await?;
    owned(state, caller, ("Webhook", id), row, |w| &w.id_group, need).await
}

/// The firmware image `id` of one group (`image`, as read) as the caller may act on it with
/// `need`; an image for every group is its caller's business.
pub async fn firmware(
    state: &AppState,
    caller: &Caller,
    id: &str,
    image: Option<FirmwareRow>,
    need: Role,
) -> Result<FirmwareRow> {
    owned(
        state,
        caller,
        ("Firmware", id),
        image,
        |f| f.id_group.as_deref().unwrap_or_default(),
        need,
    )
    .await
}

/// The alarm rule `id` (`rule`, as read) as the caller may act on it with `need`.
pub async fn alarm_rule(
    state: &AppState,
    caller: &Caller,
    id: &str,
    rule: Option<RuleRow>,
    need: Role,
) -> Result<RuleRow> {
    owned(state, caller, ("Alarm rule", id), rule, |r| &r.id_group, need).await
}

/// The alarm `id` (`alarm`, as read) as the caller may act on it with `need`.
pub async fn alarm(
    state: &AppState,
    caller: &Caller,
    id: &str,
    alarm: Option<AlarmRow>,
    need: Role,
) -> Result<AlarmRow> {
    owned(state, caller, ("Alarm", id), alarm, |a| &a.id_group, need).await
}

/// The group `id_group` named in an operation's input (a new device's, a new webhook's): a
/// group the caller cannot see is a field error on `id_group`, not a 404 (docs/api.md,
/// "Management endpoints").
pub async fn input_group(state: &AppState, caller: &Caller, id_group: &str, need: Role) -> Result<GroupRow> {
    group_with_role(state, caller, id_group, need)
        .await
        .map_err(|e| e.unwrap_or_else(|| ServiceError::invalid("id_group", "Group not found.")))
}
