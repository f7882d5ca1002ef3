//! Groups (docs/api.md, "Groups"): administrators create them; managers change and delete
//! them. Each change forgets the remembered pages.

use devicecloud_store::groups::{self, GroupChanges, GroupRow, NewGroup};
use devicecloud_store::webhooks;
use devicecloud_store::{devices, unix_now};

use super::validate::Fields;
use super::{Input, Result, ServiceError, access};
use crate::caller::Caller;
use crate::state::AppState;
use devicecloud_engine::auth::Role;
use devicecloud_engine::event_catalogue::REASON_GROUP_DELETED;
use devicecloud_engine::peers::{self, Change};
use devicecloud_engine::webhooks::set_inactive;

/// Group types: the numeric code (as text, specification) and its human-readable label.
pub const GROUP_TYPES: &[(&str, &str)] = &[
    ("0", "Default"),
    ("1", "Project"),
    ("2", "Customer"),
    ("3", "Site"),
    ("4", "Fleet"),
];

/// The fields of a group body, validated.
struct GroupBody {
    label: Option<String>,
    kind: Option<String>,
    subtype: Option<String>,
    /// `Some(None)` clears the country.
    country: Option<Option<String>>,
}

/// Validates a group body; `creating` requires the label, and a label present is never blank.
fn read_group(body: &Input, creating: bool) -> Result<GroupBody> {
    let mut f = Fields::new(body);
    let label = f
        .string("label", creating || body.contains_key("label"), 255)
        .map(str::to_string);
    let kind = f.code("type");
    if let Some(code) = &kind
        && !GROUP_TYPES.iter().any(|(c, _)| c == code)
    {
        f.error("type", "Type is invalid.");
    }
    let subtype = f.string("subtype", false, 255).map(str::to_string);
    let country = body
        .contains_key("id_country")
        .then(|| f.string("id_country", false, 64).map(str::to_string));
    f.finish()?;
    Ok(GroupBody {
        label,
        kind,
        subtype,
        country,
    })
}

/// Creates a group from `{label, type?, subtype?, id_country?}`: administrators only.
pub async fn create(state: &AppState, caller: &Caller, input: &Input) -> Result<GroupRow> {
    if !caller.is_admin {
        return Err(ServiceError::NotAllowed);
    }
    let body = read_group(input, true)?;
    let country = body.country.flatten();
    let new = NewGroup {
        label: body.label.as_deref().unwrap_or_default(),
        r#type: body.kind.as_deref().unwrap_or("0"),
        subtype: body.subtype.as_deref().unwrap_or_default(),
        id_country: country.as_deref(),
    };
    let row = groups::create(&state.db, &new, unix_now()).await?;
    peers::apply::change(&state.peers, Change::Groups);
    Ok(row)
}

/// Changes a group with `{label?, type?, subtype?, id_country?}`: a manager of it.
pub async fn update(state: &AppState, caller: &Caller, id: &str, input: &Input) -> Result<GroupRow> {
    access::group(state, caller, id, Role::Manager).await?;
    let body = read_group(input, false)?;
    let changes = GroupChanges {
        label: body.label.as_deref(),
        r#type: body.kind.as_deref(),
        subtype: body.subtype.as_deref(),
        id_country: body.country.as_ref().map(|c| c.as_deref()),
    };
    let row = groups::update(&state.db, id, &changes)
        .await?
        .ok_or_else(|| ServiceError::not_found("Group", id))?;
    peers::apply::change(&state.peers, Change::Groups);
    Ok(row)
}

/// Deletes a group (it keeps its records, marked with `deleted_at`): a manager of it. Nothing
/// of the group goes on afterwards (docs/api.md, "Groups"): its webhooks are set inactive
/// (event 214, `group_deleted`), and its gateways' connections are closed wherever they are
/// (their reconnection is refused with CONNACK 5 from the moment of the deletion).
pub async fn delete(state: &AppState, caller: &Caller, id: &str) -> Result<()> {
    access::group(state, caller, id, Role::Manager).await?;
    groups::soft_delete(&state.db, id, unix_now()).await?;
    peers::apply::change(&state.peers, Change::Groups);
    let mut stopped = false;
    for hook in webhooks::active_of_group(&state.db, id).await? {
        stopped |= set_inactive(&state.db, &state.stream, &hook.id_webhook, REASON_GROUP_DELETED).await?;
    }
    if stopped {
        peers::apply::change(&state.peers, Change::Webhooks);
    }
    for device in devices::connected_gateways(&state.db, id).await? {
        peers::apply::change(&state.peers, Change::Revoked { device });
    }
    // Its devices' job executions that have not started never will.
    if devicecloud_store::jobs::runs::cancel_group(&state.db, id, unix_now()).await? > 0 {
        state.jobs.wake.notify_one();
    }
    Ok(())
}
