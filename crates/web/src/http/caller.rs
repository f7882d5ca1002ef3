//! How a request proves who is calling: the `Authorization: Bearer` check of every `/api/v2/`
//! route (specification, Authentication), through the token and role caches, and the
//! dashboard's session; both end in a [`Caller`].

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use devicecloud_store::{memberships, sign_in_sessions, tokens, unix_now};

use crate::http::error::ApiError;
use crate::state::AppState;
use devicecloud_engine::auth::cache::TokenEntry;
use devicecloud_engine::auth::rights::{Role, Roles};

use crate::caller::{Caller, DASHBOARD_CLIENT};
use devicecloud_engine::auth::secrets::token_hash;

impl Caller {
    /// The caller behind a dashboard session: the account's own rights, read through the same
    /// role cache as bearer requests, so a page shows exactly what the API would answer.
    pub async fn of_account(state: &AppState, id_user: String, is_admin: bool) -> Result<Caller, ApiError> {
        let roles = roles_of(state, &id_user).await?;
        Ok(Caller {
            id_user,
            is_admin,
            client_id: DASHBOARD_CLIENT.to_string(),
            roles,
        })
    }

    /// The account of a live dashboard session, by the hash of its cookie.
    pub async fn of_session(state: &AppState, session_hash: &str) -> Result<Caller, ApiError> {
        let session = sign_in_sessions::get(&state.db, session_hash, unix_now())
            .await?
            .ok_or_else(ApiError::invalid_credentials)?;
        Caller::of_account(state, session.id_user, session.is_admin != 0).await
    }

    /// 401 unless the caller is an administrator.
    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.is_admin {
            Ok(())
        } else {
            Err(ApiError::forbidden())
        }
    }
}

/// The token entry of a request whose bearer token an outer layer already checked (the rate
/// limit, `http::rate_limit`), so that the extractor does not look it up twice.
#[derive(Clone, Debug)]
pub struct Authenticated(pub TokenEntry);

/// The bearer token of a request, if the header has the `Bearer <token>` form.
pub fn bearer_token(parts: &Parts) -> Option<&str> {
    bearer_value(&parts.headers)
}

/// The bearer token in `headers`, if `Authorization` has the `Bearer <token>` form.
pub fn bearer_value(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Caller, ApiError> {
        match parts.extensions.remove::<Authenticated>() {
            Some(Authenticated(entry)) => Caller::of_entry(state, entry).await,
            None => {
                let token = bearer_token(parts).ok_or_else(ApiError::invalid_credentials)?;
                Caller::of_token(state, &token_hash(token)).await
            }
        }
    }
}

impl Caller {
    /// The caller behind a bearer token's hash, as the extractor finds it; asked again by a
    /// long-lived request (the live stream) to notice a revoked token or a removed role.
    pub async fn of_token(state: &AppState, hash: &str) -> Result<Caller, ApiError> {
        let entry = token_entry(state, hash)
            .await?
            .ok_or_else(ApiError::invalid_credentials)?;
        Caller::of_entry(state, entry).await
    }

    async fn of_entry(state: &AppState, entry: TokenEntry) -> Result<Caller, ApiError> {
        if entry.expires_at <= unix_now() {
            return Err(ApiError::invalid_credentials());
        }
        let roles = roles_of(state, &entry.id_user).await?;
        Ok(Caller {
            id_user: entry.id_user,
            is_admin: entry.is_admin,
            client_id: entry.client_id,
            roles,
        })
    }
}

/// The owner of a token hash, through the cache.
pub async fn token_entry(state: &AppState, hash: &str) -> Result<Option<TokenEntry>, ApiError> {
    if let Some(entry) = state.auth.token(hash) {
        return Ok(Some(entry));
    }
    let Some(owner) = tokens::owner(&state.db, hash).await? else {
        return Ok(None);
    };
    let entry = TokenEntry {
        id_user: owner.id_user,
        is_admin: owner.is_admin != 0,
        client_id: owner.client_id,
        expires_at: owner.expires_at,
    };
    state.auth.put_token(hash.to_string(), entry.clone());
    Ok(Some(entry))
}

async fn roles_of(state: &AppState, id_user: &str) -> Result<Arc<Roles>, ApiError> {
    if let Some(roles) = state.auth.roles(id_user) {
        return Ok(roles);
    }
    let roles: Roles = memberships::of_user(&state.db, id_user)
        .await?
        .into_iter()
        .filter_map(|m| Role::parse(&m.role).map(|r| (m.id_group, r)))
        .collect();
    let roles = Arc::new(roles);
    state.auth.put_roles(id_user.to_string(), roles.clone());
    Ok(roles)
}
