//! Accounts (docs/api.md, "Accounts"): created and changed by administrators (password,
//! administrator flag, disabled), and a password changed by the account itself with its current
//! one. A changed password or a disabled account ends every token and dashboard session of the
//! account at once: in the store, in the same transaction as the change, and in this node's
//! bearer cache.

use std::net::IpAddr;

use devicecloud_store::accounts::{self, AccountChanges, UserRow};
use devicecloud_store::unix_now;

use super::sign_in;
use super::validate::Fields;
use super::{Input, Result, ServiceError};
use crate::caller::Caller;
use crate::state::AppState;
use devicecloud_engine::auth::login_limit::SignInKey;
use devicecloud_engine::peers::{self, Change};

/// Fewest characters in a password (the API, the dashboard and `devicecloud admin create-user`).
pub const PASSWORD_MIN: usize = 8;
/// Most characters in a password (argon2 takes any length; this bounds the work per request).
pub const PASSWORD_MAX: usize = 1024;

/// Creates an account from `{username, password, is_admin?}`: administrators only; the password
/// has at least 8 characters and is stored as an argon2id hash.
pub async fn create(state: &AppState, caller: &Caller, input: &Input) -> Result<UserRow> {
    if !caller.is_admin {
        return Err(ServiceError::NotAllowed);
    }
    register(&state.db, input).await
}

/// Creates an account from `{username, password, is_admin?}` with the rules of every way in:
/// the API, the dashboard, `devicecloud admin create-user` and the demo (which have no caller:
/// the rights are the caller's to check).
pub async fn register(db: &devicecloud_store::Db, input: &Input) -> Result<UserRow> {
    let mut f = Fields::new(input);
    let username = f.string("username", true, 255).map(str::to_string);
    let password = password_field(&mut f, "password", true);
    let is_admin = f.boolean("is_admin").unwrap_or(false);
    f.finish()?;
    let (username, password) = (username.unwrap_or_default(), password.unwrap_or_default());
    let hash = hash_off_thread(password).await?;
    Ok(accounts::create(db, &username, &hash, is_admin, unix_now()).await?)
}

/// Changes account `id` from any of `{password, is_admin, disabled}`: administrators only (a
/// normal user's own record answers 401, anyone else's 404). An administrator cannot disable
/// their own account nor take their own rights, so that one administrator always remains.
pub async fn update(state: &AppState, caller: &Caller, id: &str, input: &Input) -> Result<UserRow> {
    if !caller.is_admin {
        return Err(if caller.id_user == id {
            ServiceError::NotAllowed
        } else {
            ServiceError::not_found("User", id)
        });
    }
    let mut f = Fields::new(input);
    let password = password_field(&mut f, "password", false);
    let is_admin = f.boolean("is_admin");
    let disabled = f.boolean("disabled");
    if caller.id_user == id {
        if disabled == Some(true) {
            f.error("disabled", "You cannot disable your own account.");
        }
        if is_admin == Some(false) {
            f.error("is_admin", "You cannot take your own administrator rights.");
        }
    }
    f.finish()?;
    let hash = match password {
        Some(password) => Some(hash_off_thread(password).await?),
        None => None,
    };
    let changes = AccountChanges {
        password_hash: hash.as_deref(),
        is_admin,
        disabled,
    };
    apply(state, id, &changes).await
}

/// Changes the caller's own password from `{current_password, password}`. A wrong current
/// password is a 422 on `current_password` and counts as a failed sign-in of the caller's
/// username from `client`, so a stolen token cannot be used to guess the password.
pub async fn change_own_password(state: &AppState, caller: &Caller, input: &Input, client: IpAddr) -> Result<UserRow> {
    let mut f = Fields::new(input);
    let current = f.string("current_password", true, PASSWORD_MAX);
    let password = password_field(&mut f, "password", true);
    f.finish()?;
    let account = accounts::credentials(&state.db, &caller.id_user)
        .await?
        .ok_or_else(|| ServiceError::not_found("User", &caller.id_user))?;
    let key = SignInKey::new(&account.username, client);
    match sign_in::checked(state, Some(account), current.unwrap_or_default(), &key).await {
        Err(ServiceError::SignInRefused) => {
            return Err(ServiceError::invalid(
                "current_password",
                "Current password is incorrect.",
            ));
        }
        other => other?,
    };
    let hash = hash_off_thread(password.unwrap_or_default()).await?;
    let changes = AccountChanges {
        password_hash: Some(&hash),
        ..AccountChanges::default()
    };
    apply(state, &caller.id_user, &changes).await
}

/// Stores the changes and, for a new password or a disabled account, ends the account's tokens
/// and sessions. The bearer cache forgets the account's tokens on every change, since a cached
/// token also carries the administrator flag.
async fn apply(state: &AppState, id: &str, changes: &AccountChanges<'_>) -> Result<UserRow> {
    let row = accounts::update(&state.db, id, changes)
        .await?
        .ok_or_else(|| ServiceError::not_found("User", id))?;
    peers::apply::change(
        &state.peers,
        Change::Account {
            id_user: id.to_string(),
        },
    );
    Ok(row)
}

/// A password field: a string of 8 to 1024 characters.
fn password_field(f: &mut Fields<'_>, field: &str, required: bool) -> Option<String> {
    let password = f.string(field, required, PASSWORD_MAX)?;
    if password.chars().count() < PASSWORD_MIN {
        f.error(
            field,
            format!("Password should contain at least {PASSWORD_MIN} characters."),
        );
        return None;
    }
    Some(password.to_string())
}

/// The argon2id hash of a password, made in the password lane (tens of milliseconds of CPU).
async fn hash_off_thread(password: String) -> Result<String> {
    devicecloud_engine::auth::hashing::hash(password)
        .await?
        .map_err(ServiceError::Internal)
}
