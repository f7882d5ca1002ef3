//! Memberships: the role a normal user holds in a group (viewer, operator, manager).

use crate::database::Result;
use crate::database::db::{Db, values};

/// One group and the role held in it.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Membership {
    pub id_group: String,
    pub role: String,
}

/// Every role of one user.
pub async fn of_user(db: &Db, id_user: &str) -> Result<Vec<Membership>> {
    db.rows::<Membership>(
        "SELECT id_group, role FROM memberships WHERE id_user = $1",
        values![id_user],
    )
    .await
}

/// Grants or changes the role of a user in a group.
pub async fn put(db: &Db, id_group: &str, id_user: &str, role: &str) -> Result<()> {
    let sql = "INSERT INTO memberships (id_group, id_user, role) VALUES ($1, $2, $3) ON CONFLICT \
               (id_user, id_group) DO UPDATE SET role = excluded.role";
    db.execute(sql, values![id_group, id_user, role]).await?;
    Ok(())
}

/// Removes a user's role in a group; returns whether there was one.
pub async fn remove(db: &Db, id_group: &str, id_user: &str) -> Result<bool> {
    let n = db
        .execute(
            "DELETE FROM memberships WHERE id_group = $1 AND id_user = $2",
            values![id_group, id_user],
        )
        .await?;
    Ok(n > 0)
}

/// One role of one user in one group, for listing every membership.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Member {
    pub id_group: String,
    pub id_user: String,
    pub role: String,
}

/// Every membership (the administration page), by group then user.
pub async fn all(db: &Db) -> Result<Vec<Member>> {
    db.rows::<Member>(
        "SELECT id_group, id_user, role FROM memberships ORDER BY id_group, id_user",
        values![],
    )
    .await
}
