//! Accounts (docs/api.md, "Management endpoints"): creating one, which administrators do.

use devicecloud_store::accounts::{self, AccountRow};
use devicecloud_store::unix_now;
use serde_json::{Map, Value};

use super::ServiceError;
use super::validate::Fields;
use crate::auth::Caller;
use crate::auth::secrets::hash_password;
use crate::state::AppState;

/// Creates an account from `{username, password, is_admin?}`: administrators only; the password
/// has at least 8 characters and is stored as an argon2id hash.
pub async fn create(state: &AppState, caller: &Caller, input: &Map<String, Value>) -> Result<AccountRow, ServiceError> {
    if !caller.is_admin {
        return Err(ServiceError::NotAllowed);
    }
    let mut f = Fields::new(input);
    let username = f.string("username", true, 255).map(str::to_string);
    let password = f.string("password", true, 1024).map(str::to_string);
    if password.as_ref().is_some_and(|p| p.chars().count() < 8) {
        f.error("password", "Password should contain at least 8 characters.");
    }
    let is_admin = f.boolean("is_admin").unwrap_or(false);
    f.finish()?;
    let (username, password) = (username.unwrap_or_default(), password.unwrap_or_default());
    // argon2 takes tens of milliseconds of CPU: off the async threads.
    let hash = tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|e| ServiceError::Internal(e.to_string()))?
        .map_err(ServiceError::Internal)?;
    Ok(accounts::create(&state.db, &username, &hash, is_admin, unix_now()).await?)
}
