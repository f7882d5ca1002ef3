//! `devicecloud admin …`: bootstrap and operations on the store, usable while `serve` runs;
//! every subcommand prints one JSON object on stdout (docs/operations.md).

use anyhow::{Context, Result, bail};
use devicecloud_server::auth::secrets::{hash_password, register_client};
use devicecloud_store::{Db, accounts, unix_now};
use serde_json::{Value, json};

/// The admin subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum AdminCommand {
    /// Registers an API client; prints {"client_id", "client_secret"} (the secret only this once).
    CreateClient {
        #[arg(long)]
        name: String,
    },
    /// Creates an account; prints {"id_user", "username"}.
    CreateUser {
        #[arg(long)]
        username: String,
        #[arg(long)]
        password: String,
        /// Make the account an administrator.
        #[arg(long)]
        admin: bool,
    },
}

/// Runs one admin subcommand against the store and returns what it prints.
pub async fn run(db: &Db, command: AdminCommand) -> Result<Value> {
    match command {
        AdminCommand::CreateClient { name } => {
            if name.trim().is_empty() {
                bail!("--name must not be empty");
            }
            let (client, secret) = register_client(db, &name).await?;
            Ok(json!({"client_id": client.client_id, "client_secret": secret}))
        }
        AdminCommand::CreateUser {
            username,
            password,
            admin,
        } => {
            if username.trim().is_empty() || password.is_empty() {
                bail!("--username and --password must not be empty");
            }
            let hash = hash_password(&password).map_err(anyhow::Error::msg)?;
            let row = accounts::create(db, &username, &hash, admin, unix_now())
                .await
                .context("cannot create the account")?;
            Ok(json!({"id_user": row.id_user, "username": row.username}))
        }
    }
}
