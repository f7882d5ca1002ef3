//! Accounts: the people who use the API and the dashboard (docs/api.md, "Rights").

use crate::db::{Db, on_pool};
use crate::{Result, StoreError, new_id};

/// A stored account.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct AccountRow {
    pub id_user: String,
    pub username: String,
    pub password_hash: String,
    pub is_admin: i64,
    pub created_at: i64,
}

const SELECT: &str = "SELECT id_user, username, password_hash, is_admin, created_at FROM accounts";

/// Creates an account; a username taken (case-insensitively) is a `Conflict("username")`.
pub async fn create(db: &Db, username: &str, password_hash: &str, is_admin: bool, now: i64) -> Result<AccountRow> {
    let id = new_id();
    on_pool!(db, |p| sqlx::query(
        "INSERT INTO accounts (id_user, username, password_hash, is_admin, created_at) VALUES ($1, $2, $3, $4, $5)"
    )
    .bind(&id)
    .bind(username)
    .bind(password_hash)
    .bind(i64::from(is_admin))
    .bind(now)
    .execute(p)
    .await
    .map(|r| r.rows_affected()))
    .map_err(|e| StoreError::conflict_on(e, "username"))?;
    Ok(AccountRow {
        id_user: id,
        username: username.to_string(),
        password_hash: password_hash.to_string(),
        is_admin: i64::from(is_admin),
        created_at: now,
    })
}

/// The account with this username, compared case-insensitively.
pub async fn by_username(db: &Db, username: &str) -> Result<Option<AccountRow>> {
    let sql = format!("{SELECT} WHERE lower(username) = lower($1)");
    Ok(on_pool!(db, |p| sqlx::query_as::<_, AccountRow>(sqlx::AssertSqlSafe(
        sql
    ))
    .bind(username)
    .fetch_optional(p)
    .await)?)
}

/// The account with this id.
pub async fn get(db: &Db, id_user: &str) -> Result<Option<AccountRow>> {
    let sql = format!("{SELECT} WHERE id_user = $1");
    Ok(on_pool!(db, |p| sqlx::query_as::<_, AccountRow>(sqlx::AssertSqlSafe(
        sql
    ))
    .bind(id_user)
    .fetch_optional(p)
    .await)?)
}

/// Every account, by username (the administration page).
pub async fn list(db: &Db) -> Result<Vec<AccountRow>> {
    let sql = format!("{SELECT} ORDER BY lower(username), id_user");
    Ok(on_pool!(db, |p| sqlx::query_as::<_, AccountRow>(sqlx::AssertSqlSafe(
        sql
    ))
    .fetch_all(p)
    .await)?)
}
