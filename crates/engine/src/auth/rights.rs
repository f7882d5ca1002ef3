//! Roles and what they allow (docs/api.md, "Rights"): viewer reads, operator also commands, manager
//! also provisions, edits the group and its webhooks. Administrators hold every right everywhere.

use std::collections::HashMap;

/// A role in one group, ordered by power.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Viewer,
    Operator,
    Manager,
}

impl Role {
    /// Parses the stored or requested name.
    pub fn parse(name: &str) -> Option<Role> {
        match name {
            "viewer" => Some(Role::Viewer),
            "operator" => Some(Role::Operator),
            "manager" => Some(Role::Manager),
            _ => None,
        }
    }

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Manager => "manager",
        }
    }
}

/// Every role of one account, keyed by `id_group`.
pub type Roles = HashMap<String, Role>;
