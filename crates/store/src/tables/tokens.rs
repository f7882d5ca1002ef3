//! Access and refresh tokens, stored only as SHA-256 hashes of the random values handed out.

use crate::database::Result;
use crate::database::db::{Db, on_pool, values};

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
    let sql = "INSERT INTO access_tokens (token_hash, refresh_hash, id_user, client_id, created_at, \
               expires_at) VALUES ($1, $2, $3, $4, $5, $6)";
    db.execute(
        sql,
        values![token_hash, refresh_hash, id_user, client_id, now, expires_at],
    )
    .await?;
    Ok(())
}

/// The owner of an access token, expired or not (the caller checks `expires_at`); `None` also
/// for a token of a disabled account.
pub async fn owner(db: &Db, token_hash: &str) -> Result<Option<TokenOwner>> {
    let sql = "SELECT t.id_user, a.is_admin, t.client_id, t.expires_at FROM access_tokens t JOIN \
               accounts a ON a.id_user = t.id_user WHERE t.token_hash = $1 AND a.disabled = 0";
    db.row::<TokenOwner>(sql, values![token_hash]).await
}

/// What a refresh did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refresh {
    /// The pair lives on until this time.
    Extended(i64),
    /// The pair was granted more than the token lifetime ago: only a new password grant helps.
    TooOld,
    /// No pair of this access token, refresh token and client.
    Unknown,
}

/// Extends the access token to `wanted` if `refresh_hash` and `client_id` belong to it, but never
/// past `lifetime_s` after the password grant that made the pair: its `created_at`, which a
/// refresh does not move (docs/api.md, "Authentication").
pub async fn refresh(
    db: &Db,
    token_hash: &str,
    refresh_hash: &str,
    client_id: &str,
    wanted: i64,
    lifetime_s: i64,
    now: i64,
) -> Result<Refresh> {
    let granted: Option<i64> = on_pool!(db, |p| {
        sqlx::query_scalar(
            "SELECT created_at FROM access_tokens WHERE token_hash = $1 AND refresh_hash = $2 AND client_id = $3",
        )
        .bind(token_hash)
        .bind(refresh_hash)
        .bind(client_id)
        .fetch_optional(p)
        .await
    })?;
    let Some(granted) = granted else {
        return Ok(Refresh::Unknown);
    };
    let end = granted.saturating_add(lifetime_s);
    if end <= now {
        return Ok(Refresh::TooOld);
    }
    let expires_at = wanted.min(end);
    let n = db
        .execute(
            "UPDATE access_tokens SET expires_at = $1 WHERE token_hash = $2 AND refresh_hash = $3",
            values![expires_at, token_hash, refresh_hash],
        )
        .await?;
    Ok(if n > 0 {
        Refresh::Extended(expires_at)
    } else {
        Refresh::Unknown
    })
}

/// Revokes the pair that `hash` names, as its access or its refresh token, if it was issued to
/// `client_id` (RFC 7009: a client revokes its own tokens). Returns the access token's hash
/// when a pair ended.
pub async fn revoke(db: &Db, hash: &str, client_id: &str) -> Result<Option<String>> {
    let _turn = db.write_turn().await?;
    Ok(on_pool!(db, |p| {
        sqlx::query_scalar(
            "DELETE FROM access_tokens WHERE (token_hash = $1 OR refresh_hash = $1) AND client_id = $2 RETURNING token_hash",
        )
        .bind(hash)
        .bind(client_id)
        .fetch_optional(p)
        .await
    })?)
}

/// Deletes tokens that expired before `before`; returns how many.
pub async fn prune(db: &Db, before: i64) -> Result<u64> {
    db.execute("DELETE FROM access_tokens WHERE expires_at < $1", values![before])
        .await
}
