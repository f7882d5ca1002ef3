//! Signing in with a username and a password: the OAuth password grant and the dashboard's form
//! call the same operation, so both refuse alike, count failures alike (per username and client
//! address, docs/operations.md, "Limits") and take the same time for known and unknown
//! usernames. A password change by the account itself checks the current password here too.

use std::net::IpAddr;
use std::time::Instant;

use devicecloud_store::accounts::{self, AccountRow};

use super::{Result, ServiceError};
use crate::state::AppState;
use devicecloud_engine::auth::hashing;
use devicecloud_engine::auth::login_limit::SignInKey;
use devicecloud_engine::auth::secrets::{hash_password, random_token};
use devicecloud_engine::peers::{self, Change};

/// The account when `password` is its password and it is not disabled; otherwise
/// [`ServiceError::SignInRefused`], or [`ServiceError::TooManySignIns`] without the password
/// being checked once the pair (`username`, `client`) is past its failures.
pub async fn sign_in(state: &AppState, username: &str, password: &str, client: IpAddr) -> Result<AccountRow> {
    let username = username.trim();
    // No account name holds a NUL (PostgreSQL cannot even compare one): unknown user.
    let account = if username.contains('\0') {
        None
    } else {
        accounts::by_username(&state.db, username).await?
    };
    // A known account is counted under its stored name: every spelling the store matches to it
    // (case, `İ` and `i̇`, …) shares one budget of failures.
    let counted = account.as_ref().map_or(username, |a| a.username.as_str());
    let key = SignInKey::new(counted, client);
    checked(state, account, password, &key).await
}

/// Checks `password` against `account` (`None`: an unknown username) under the failure limit
/// of `key`: counted before the check, so that requests sent at once cannot all pass, and
/// forgotten on success.
pub async fn checked(
    state: &AppState,
    account: Option<AccountRow>,
    password: &str,
    key: &SignInKey,
) -> Result<AccountRow> {
    state
        .login_limiter
        .attempt(key, Instant::now())
        .map_err(|retry_after_s| ServiceError::TooManySignIns { retry_after_s })?;
    // An unknown user is checked against a dummy hash too, so timing does not reveal which
    // usernames exist.
    let hash = account.as_ref().map_or_else(dummy_hash, |a| a.password_hash.clone());
    let password = password.to_string();
    let matches = match hashing::verify(password, hash).await {
        Ok(matches) => matches,
        Err(busy) => {
            // Not checked: the attempt counts neither way.
            state.login_limiter.undo(key);
            return Err(busy.into());
        }
    };
    // A disabled account is refused like a wrong password: nothing tells a guesser which.
    match account.filter(|a| matches && a.disabled == 0) {
        Some(account) => {
            state.login_limiter.take_back(key);
            peers::apply::change(&state.peers, Change::SignedIn { key: key.clone() });
            Ok(account)
        }
        None => {
            // Counted here already (before the check); the other nodes count it now.
            peers::apply::tell(&state.peers, Change::SignInFailed { key: key.clone() });
            Err(ServiceError::SignInRefused)
        }
    }
}

/// An argon2 hash of a random password nobody knows, made once.
fn dummy_hash() -> String {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| hash_password(&random_token()).unwrap_or_default())
        .clone()
}
