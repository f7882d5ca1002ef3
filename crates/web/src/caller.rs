//! Who is calling: an account, its client, and its roles by group, read once per request. The
//! service layer asks it every rights question; how a request proves it (a bearer token, a
//! dashboard session) is the front ends' business (`http::caller`).

use std::sync::Arc;

use devicecloud_engine::auth::rights::{Role, Roles};
use devicecloud_store::groups::{GroupRow, GroupScope};

/// The `client_id` of requests made through the dashboard rather than an API client.
pub const DASHBOARD_CLIENT: &str = "dashboard";

/// An account whose bearer token (or dashboard session) was valid for this request.
#[derive(Clone, Debug)]
pub struct Caller {
    pub id_user: String,
    pub is_admin: bool,
    pub client_id: String,
    pub(crate) roles: Arc<Roles>,
}

impl Caller {
    /// The role held in the group `id_group` (administrators: manager), for pages that show
    /// what the caller may do before they try.
    pub fn role_in_group(&self, id_group: &str) -> Option<Role> {
        if self.is_admin {
            Some(Role::Manager)
        } else {
            self.roles.get(id_group).copied()
        }
    }

    /// The role held in a group record, `None` when the group is invisible to the caller.
    /// Deleted groups are visible to administrators only (docs/api.md, "Rights").
    pub fn role_in(&self, group: &GroupRow) -> Option<Role> {
        self.role_in_record(&group.id_group, group.deleted_at.is_some())
    }

    /// The role held in the group `id_group`, deleted or not, as [`Caller::role_in`] answers
    /// it: for a record read with its group's deletion time rather than the whole group.
    pub fn role_in_record(&self, id_group: &str, group_deleted: bool) -> Option<Role> {
        if self.is_admin {
            return Some(Role::Manager);
        }
        if group_deleted {
            return None;
        }
        self.roles.get(id_group).copied()
    }

    /// The groups this caller may list.
    pub fn group_scope(&self) -> GroupScope<'_> {
        if self.is_admin {
            GroupScope::All
        } else {
            GroupScope::MemberOf(&self.id_user)
        }
    }
}
