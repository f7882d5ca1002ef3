//! Accounts: the people who use the API and the dashboard (docs/api.md, "Rights", "Accounts").
//!
//! Two record types keep the password hash where it belongs: [`AccountRow`] carries it, for the
//! password check only; [`UserRow`], what every listing and record reads, never selects it.

use devicecloud_query::{AttrKind, Attribute, SortKey};

use crate::collection::{Column, ListArgs, Listing, Table, attributes, names, same_name};
use crate::database::Result;
use crate::database::db::{Db, on_pool, values};
use crate::database::new_id;

/// A stored account with its password hash, for checking a password.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct AccountRow {
    pub id_user: String,
    pub username: String,
    pub password_hash: String,
    pub is_admin: i64,
    pub disabled: i64,
    pub created_at: i64,
}

/// An account as it is shown: everything but the password hash. Serialised, it is the API's
/// record `{id_user, username, is_admin, disabled, created_at}` (flags as booleans).
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize, serde::Serialize)]
pub struct UserRow {
    pub id_user: String,
    pub username: String,
    #[serde(serialize_with = "crate::collection::flag")]
    pub is_admin: i64,
    #[serde(serialize_with = "crate::collection::flag")]
    pub disabled: i64,
    pub created_at: i64,
}

impl From<AccountRow> for UserRow {
    fn from(row: AccountRow) -> UserRow {
        UserRow {
            id_user: row.id_user,
            username: row.username,
            is_admin: row.is_admin,
            disabled: row.disabled,
            created_at: row.created_at,
        }
    }
}

/// Changes to an account; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct AccountChanges<'a> {
    pub password_hash: Option<&'a str>,
    pub is_admin: Option<bool>,
    pub disabled: Option<bool>,
}

impl AccountChanges<'_> {
    /// Whether the account's tokens and sessions must end with this change: a new password, or
    /// the account disabled (docs/api.md, "Accounts").
    pub fn ends_credentials(&self) -> bool {
        self.password_hash.is_some() || self.disabled == Some(true)
    }
}

const TABLE: &str = "accounts";
const SELECT: &str = "SELECT id_user, username, password_hash, is_admin, disabled, created_at FROM accounts";
const SELECT_USER: &str = "SELECT id_user, username, is_admin, disabled, created_at FROM accounts";

/// The filterable and sortable attributes of the account collection.
pub const COLUMNS: [Column; 5] = [
    same_name(TABLE, "id_user", AttrKind::String),
    same_name(TABLE, "username", AttrKind::String),
    same_name(TABLE, "is_admin", AttrKind::Boolean),
    same_name(TABLE, "disabled", AttrKind::Boolean),
    same_name(TABLE, "created_at", AttrKind::Integer),
];
/// The filter attributes of the account collection.
pub const ATTRIBUTES: [Attribute; 5] = attributes(&COLUMNS);
/// The sortable attributes of the account collection.
pub const SORTABLE: [&str; 5] = names(&COLUMNS);

/// Creates an account; a username taken (case-insensitively) is a `Conflict("username")`.
pub async fn create(db: &Db, username: &str, password_hash: &str, is_admin: bool, now: i64) -> Result<UserRow> {
    let id = new_id();
    db.execute(
        "INSERT INTO accounts (id_user, username, password_hash, is_admin, created_at) VALUES ($1, $2, $3, $4, $5)",
        values![&id, username, password_hash, i64::from(is_admin), now],
    )
    .await
    .map_err(|e| e.conflict_on("username"))?;
    Ok(UserRow {
        id_user: id,
        username: username.to_string(),
        is_admin: i64::from(is_admin),
        disabled: 0,
        created_at: now,
    })
}

/// The account with this username, compared case-insensitively, with its password hash.
pub async fn by_username(db: &Db, username: &str) -> Result<Option<AccountRow>> {
    let sql = format!("{SELECT} WHERE lower(username) = lower($1)");
    db.row::<AccountRow>(sqlx::AssertSqlSafe(sql), values![username]).await
}

/// The account with this id, with its password hash (to check the current password).
pub async fn credentials(db: &Db, id_user: &str) -> Result<Option<AccountRow>> {
    let sql = format!("{SELECT} WHERE id_user = $1");
    db.row::<AccountRow>(sqlx::AssertSqlSafe(sql), values![id_user]).await
}

/// The account with this id.
pub async fn get(db: &Db, id_user: &str) -> Result<Option<UserRow>> {
    let sql = format!("{SELECT_USER} WHERE id_user = $1");
    db.row::<UserRow>(sqlx::AssertSqlSafe(sql), values![id_user]).await
}

/// Every account, by username (the administration page).
pub async fn list(db: &Db) -> Result<Vec<UserRow>> {
    let sql = format!("{SELECT_USER} ORDER BY lower(username), id_user");
    db.rows::<UserRow>(sqlx::AssertSqlSafe(sql), values![]).await
}

/// The accounts, oldest first.
static ACCOUNTS: Table<UserRow> = Table::new(TABLE, &COLUMNS, &[], SortKey::asc("created_at"), &[COLUMNS[0]]);

/// A page of the account collection, oldest first unless sorted otherwise (docs/api.md,
/// "Collections"). Only administrators see it, so there is no group scope: `args` come from
/// [`ListArgs::unscoped`] or are read without theirs.
pub async fn page(db: &Db, args: &ListArgs<'_>) -> Result<Listing<UserRow>> {
    ACCOUNTS.list(db, ACCOUNTS.select(), args).await
}

/// Applies `changes` to an account and, when they call for it ([`AccountChanges::ends_credentials`]),
/// deletes its access tokens and dashboard sessions in the same transaction. Returns the
/// account as changed, `None` for an unknown account.
pub async fn update(db: &Db, id_user: &str, changes: &AccountChanges<'_>) -> Result<Option<UserRow>> {
    let update = "UPDATE accounts SET password_hash = COALESCE($1, password_hash), \
                  is_admin = COALESCE($2, is_admin), disabled = COALESCE($3, disabled) WHERE id_user = $4";
    let end_tokens = "DELETE FROM access_tokens WHERE id_user = $1";
    let end_sessions = "DELETE FROM dashboard_sessions WHERE id_user = $1";
    let select = format!("{SELECT_USER} WHERE id_user = $1");
    let ends = changes.ends_credentials();
    let _turn = db.write_turn().await?;
    Ok(on_pool!(db, |p| async {
        let mut tx = p.begin().await?;
        let changed = sqlx::query(update)
            .bind(changes.password_hash)
            .bind(changes.is_admin.map(i64::from))
            .bind(changes.disabled.map(i64::from))
            .bind(id_user)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if changed == 0 {
            return Ok::<_, sqlx::Error>(None);
        }
        if ends {
            sqlx::query(end_tokens).bind(id_user).execute(&mut *tx).await?;
            sqlx::query(end_sessions).bind(id_user).execute(&mut *tx).await?;
        }
        let row = sqlx::query_as::<_, UserRow>(sqlx::AssertSqlSafe(select.clone()))
            .bind(id_user)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(row))
    }
    .await)?)
}
