//! Roles of accounts in groups (docs/api.md, "Rights"): a manager of the group (or an
//! administrator) gives or takes them. Each change forgets the account's remembered roles and
//! the remembered pages, so that it holds from the next request.

use devicecloud_store::{accounts, memberships};

use super::validate::Fields;
use super::{Input, Result, ServiceError, access};
use crate::caller::Caller;
use crate::state::AppState;
use devicecloud_engine::auth::Role;
use devicecloud_engine::peers::{self, Change};

/// Gives `id_user` the role `{role: viewer|operator|manager}` in group `id_group`; returns the
/// role given.
pub async fn put(state: &AppState, caller: &Caller, id_group: &str, id_user: &str, input: &Input) -> Result<String> {
    access::group(state, caller, id_group, Role::Manager).await?;
    let mut f = Fields::new(input);
    let role = f.string("role", true, 32).map(str::to_string);
    if let Some(name) = &role
        && Role::parse(name).is_none()
    {
        f.error("role", "Role must be one of viewer, operator, manager.");
    }
    f.finish()?;
    let role = role.unwrap_or_default();
    accounts::get(&state.db, id_user)
        .await?
        .ok_or_else(|| ServiceError::not_found("User", id_user))?;
    memberships::put(&state.db, id_group, id_user, &role).await?;
    peers::apply::change(
        &state.peers,
        Change::Roles {
            id_user: id_user.to_string(),
        },
    );
    Ok(role)
}

/// Takes `id_user`'s role in group `id_group` away.
pub async fn remove(state: &AppState, caller: &Caller, id_group: &str, id_user: &str) -> Result<()> {
    access::group(state, caller, id_group, Role::Manager).await?;
    if !memberships::remove(&state.db, id_group, id_user).await? {
        return Err(ServiceError::NotFound(format!(
            "User {id_user} holds no role in group {id_group}"
        )));
    }
    peers::apply::change(
        &state.peers,
        Change::Roles {
            id_user: id_user.to_string(),
        },
    );
    Ok(())
}
