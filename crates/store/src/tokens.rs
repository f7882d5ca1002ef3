//! Access and refresh tokens, stored only as SHA-256 hashes of the random values handed out.

use crate::Result;
use crate::db::{Db, on_pool};

/// What a bearer token stands for.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct TokenOwner {
    pub id_user: String,
    pub is_admin: i64,
    pub client_id: String,
    pub expires_at: i64,
}

/// Stores a new token pair.
pub async fn insert(
    db: &Db,
    token_hash: &str,
    refresh_hash: &str,
    id_user: &str,
    client_id: &str,
    now: i64,
    expires_at: i64,
) -> Result<()> {
    on_pool!(db, |p| {
        sqlx::query("INSERT INTO access_tokens (token_hash, refresh_hash, id_user, client_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)")
        .bind(token_hash)
        .bind(refresh_hash)
        .bind(id_user)
        .bind(client_id)
        .bind(now)
        .bind(expires_at)
        .execute(p)
        .await
        .map(|r| r.rows_affected())
    })?;
    Ok(())
}

/// The owner of an access token, expired or not (the caller checks `expires_at`).
pub async fn owner(db: &Db, token_hash: &str) -> Result<Option<TokenOwner>> {
    Ok(on_pool!(db, |p| {
        sqlx::query_as::<_, TokenOwner>(
        "SELECT t.id_user, a.is_admin, t.client_id, t.expires_at FROM access_tokens t JOIN accounts a ON a.id_user = t.id_user WHERE t.token_hash = $1"
    )
    .bind(token_hash)
    .fetch_optional(p)
    .await
    })?)
}

/// Extends the access token to `expires_at` if `refresh_hash` and `client_id` belong to it.
/// Returns whether a token was extended.
pub async fn refresh(db: &Db, token_hash: &str, refresh_hash: &str, client_id: &str, expires_at: i64) -> Result<bool> {
    let n = on_pool!(db, |p| {
        sqlx::query(
            "UPDATE access_tokens SET expires_at = $1 WHERE token_hash = $2 AND refresh_hash = $3 AND client_id = $4",
        )
        .bind(expires_at)
        .bind(token_hash)
        .bind(refresh_hash)
        .bind(client_id)
        .execute(p)
        .await
        .map(|r| r.rows_affected())
    })?;
    Ok(n > 0)
}

/// Deletes tokens that expired before `before`; returns how many.
pub async fn prune(db: &Db, before: i64) -> Result<u64> {
    Ok(on_pool!(db, |p| sqlx::query(
        "DELETE FROM access_tokens WHERE expires_at < $1"
    )
    .bind(before)
    .execute(p)
    .await
    .map(|r| r.rows_affected()))?)
}
