//! Which groups a caller may see, as a condition every collection of a group's records adds to
//! its query (docs/api.md, "Rights").

use sea_query::{Condition, Expr, ExprTrait, Query};

/// Which groups a caller may see (docs/api.md, "Rights").
#[derive(Clone, Debug)]
pub enum GroupScope<'a> {
    /// Administrators: every group, deleted ones included.
    All,
    /// A normal user: the groups where they hold a role, deleted ones left out.
    MemberOf(&'a str),
}

impl GroupScope<'_> {
    /// The condition that keeps rows whose `table.column` names a group this scope may see;
    /// `None` for administrators, who see every group.
    pub fn condition(&self, table: &'static str, column: &'static str) -> Option<Condition> {
        match self {
            GroupScope::All => None,
            GroupScope::MemberOf(id_user) => {
                Some(Condition::all().add(Expr::col((table, column)).in_subquery(visible_groups(id_user))))
            }
        }
    }
}

/// The groups a user holds a role in, deleted ones left out (docs/api.md, "Rights"): one
/// range of the index `memberships_visible`, since a membership carries its group's deletion.
pub fn visible_groups(id_user: &str) -> sea_query::SelectStatement {
    Query::select()
        .column(("memberships", "id_group"))
        .from("memberships")
        .and_where(Expr::col(("memberships", "id_user")).eq(id_user))
        .and_where(Expr::col(("memberships", "group_deleted_at")).is_null())
        .to_owned()
}
