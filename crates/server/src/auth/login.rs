//! The username-and-password check shared by the OAuth password grant and the dashboard's
//! sign-in form: the same accounts, the same argon2 hashes, the same timing for known and
//! unknown usernames.

use devicecloud_store::accounts::{self, AccountRow};

use super::secrets::{hash_password, random_token, verify_password};
use crate::error::ApiError;
use crate::state::AppState;

/// The account when `password` is its password; `None` for an unknown username or a wrong
/// password, indistinguishable by timing.
pub async fn check_password(state: &AppState, username: &str, password: &str) -> Result<Option<AccountRow>, ApiError> {
    // No account name holds a NUL (PostgreSQL cannot even compare one): unknown user.
    let account = if username.contains('\0') {
        None
    } else {
        accounts::by_username(&state.db, username).await?
    };
    // An unknown user is checked against a dummy hash too, so timing does not reveal which
    // usernames exist.
    let hash = match &account {
        Some(a) => a.password_hash.clone(),
        None => dummy_hash(),
    };
    let password = password.to_string();
    let matches = tokio::task::spawn_blocking(move || verify_password(&password, &hash))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(account.filter(|_| matches))
}

fn dummy_hash() -> String {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| hash_password(&random_token()).unwrap_or_default())
        .clone()
}
