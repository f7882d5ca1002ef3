//! Browser sessions of the dashboard: created at sign-in, looked up on every page, deleted at
//! sign-out, pruned once expired. Stored in the database (not in memory) so that a restart or
//! another node behind the same load balancer keeps people signed in.

use crate::database::Result;
use crate::database::db::{Db, values};

/// A live session with what every page needs about its account.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct SessionRow {
    pub id_user: String,
    pub username: String,
    pub is_admin: i64,
    pub csrf_token: String,
    pub expires_at: i64,
}

/// Records a new session.
pub async fn create(
    db: &Db,
    session_hash: &str,
    id_user: &str,
    csrf_token: &str,
    now: i64,
    expires_at: i64,
) -> Result<()> {
    db.execute(
        "INSERT INTO dashboard_sessions (session_hash, id_user, csrf_token, created_at, expires_at) \
         VALUES ($1, $2, $3, $4, $5)",
        values![session_hash, id_user, csrf_token, now, expires_at],
    )
    .await?;
    Ok(())
}

/// The unexpired session with this hash (none for a disabled account).
pub async fn get(db: &Db, session_hash: &str, now: i64) -> Result<Option<SessionRow>> {
    db.row::<SessionRow>(
        "SELECT s.id_user, a.username, a.is_admin, s.csrf_token, s.expires_at \
         FROM dashboard_sessions s JOIN accounts a ON a.id_user = s.id_user \
         WHERE s.session_hash = $1 AND s.expires_at > $2 AND a.disabled = 0",
        values![session_hash, now],
    )
    .await
}

/// Ends a session (sign-out).
pub async fn delete(db: &Db, session_hash: &str) -> Result<()> {
    db.execute(
        "DELETE FROM dashboard_sessions WHERE session_hash = $1",
        values![session_hash],
    )
    .await?;
    Ok(())
}

/// Deletes the sessions that expired before `before`; returns how many.
pub async fn prune(db: &Db, before: i64) -> Result<u64> {
    db.execute("DELETE FROM dashboard_sessions WHERE expires_at < $1", values![before])
        .await
}
