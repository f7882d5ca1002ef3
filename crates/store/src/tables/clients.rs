//! API clients: the registered software clients of the OAuth 2.0 token endpoint.

use crate::database::Result;
use crate::database::db::{Db, values};

/// A stored API client; the secret is kept only as a hash.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct ClientRow {
    pub client_id: String,
    pub name: String,
    pub secret_hash: String,
    pub created_at: i64,
}

/// Registers a client.
pub async fn create(db: &Db, client_id: &str, name: &str, secret_hash: &str, now: i64) -> Result<ClientRow> {
    db.execute(
        "INSERT INTO api_clients (client_id, name, secret_hash, created_at) VALUES ($1, $2, $3, $4)",
        values![client_id, name, secret_hash, now],
    )
    .await?;
    Ok(ClientRow {
        client_id: client_id.to_string(),
        name: name.to_string(),
        secret_hash: secret_hash.to_string(),
        created_at: now,
    })
}

/// The client with this id.
pub async fn get(db: &Db, client_id: &str) -> Result<Option<ClientRow>> {
    db.row::<ClientRow>(
        "SELECT client_id, name, secret_hash, created_at FROM api_clients WHERE client_id = $1",
        values![client_id],
    )
    .await
}

/// Every registered client, oldest first (the administration page).
pub async fn list(db: &Db) -> Result<Vec<ClientRow>> {
    db.rows::<ClientRow>(
        "SELECT client_id, name, secret_hash, created_at FROM api_clients ORDER BY created_at, client_id",
        values![],
    )
    .await
}
