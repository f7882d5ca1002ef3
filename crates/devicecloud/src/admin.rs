//! `devicecloud admin …`: bootstrap and operations on the store, all usable while `serve` runs
//! except `restore`, which fills an empty data dir; every subcommand prints one JSON object on
//! stdout (docs/operations.md).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use devicecloud_engine::auth::secrets::register_client;
use devicecloud_store::Db;
use devicecloud_web::service::{ServiceError, accounts};
use serde_json::{Value, json};

use crate::settings::Settings;

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
        /// The password (8 to 1024 characters). Without it, the first line of standard input
        /// is read, so that the password need not appear in the process list or the shell's
        /// history: `printf '%s\n' "$PASSWORD" | devicecloud admin create-user --username …`.
        #[arg(long)]
        password: Option<String>,
        /// Make the account an administrator.
        #[arg(long)]
        admin: bool,
    },
    /// Copies the store into FILE while `serve` runs (PostgreSQL: prints the pg_dump command).
    ///
    /// On SQLite the copy is the store as of the moment it starts, never written over an
    /// existing file, with the secret and signing keys copied beside it as FILE.secret.key and
    /// FILE.signing.key; prints {"backend", "store", "backup", "bytes", "took_ms", "secret_key",
    /// "signing_key"} (docs/operations.md, "Backup and restore").
    Backup {
        /// The backup file to make; never overwritten.
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
    },
    /// Fills an empty data dir from a backup (PostgreSQL: prints the pg_restore command).
    ///
    /// On SQLite FILE is checked, copied into place with its FILE.secret.key and
    /// FILE.signing.key, and carried forward by the migrations this version adds; refused while
    /// `serve` runs on the store or when the store exists; prints {"backend", "backup", "store",
    /// "bytes", "took_ms", "backup_migration", "migration", "secret_key_file", "secret_key",
    /// "signing_key_file", "signing_key"}.
    Restore {
        /// The backup file to restore.
        #[arg(long, value_name = "FILE")]
        from: PathBuf,
    },
}

/// Runs one admin subcommand and returns what it prints.
pub async fn run(settings: &Settings, command: AdminCommand) -> Result<Value> {
    match command {
        AdminCommand::Backup { to } => crate::backup::backup(settings, &to).await,
        // Never opens the store before the backup is in place: opening creates it.
        AdminCommand::Restore { from } => crate::backup::restore(settings, &from).await,
        command => {
            let db = Db::connect(&settings.database_url()?)
                .await
                .context("cannot open the store")?;
            let out = on_store(&db, command).await;
            db.close().await;
            out
        }
    }
}

/// Runs one of the subcommands that work on the opened store.
async fn on_store(db: &Db, command: AdminCommand) -> Result<Value> {
    match command {
        AdminCommand::Backup { .. } | AdminCommand::Restore { .. } => unreachable!("run without an opened store"),
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
            let password = match password {
                Some(password) => password,
                None => password_from_stdin()?,
            };
            // The rules of the API and the dashboard (service::accounts::register).
            let input = serde_json::from_value(json!({"username": username, "password": password, "is_admin": admin}))?;
            let row = match accounts::register(db, &input).await {
                Ok(row) => row,
                Err(ServiceError::Invalid(fields)) => {
                    let messages: Vec<String> = fields.into_iter().map(|f| f.message).collect();
                    bail!("{}", messages.join(" "));
                }
                Err(e) => return Err(anyhow::Error::new(e).context("cannot create the account")),
            };
            Ok(json!({"id_user": row.id_user, "username": row.username}))
        }
    }
}

/// The first line of standard input, without its line end.
fn password_from_stdin() -> Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("cannot read the password from standard input")?;
    let password = line.strip_suffix('\n').unwrap_or(&line);
    Ok(password.strip_suffix('\r').unwrap_or(password).to_string())
}
