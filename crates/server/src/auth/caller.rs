//! The authenticated caller of an API request: the `Authorization: Bearer` check of every
//! `/api/v2/` route (specification, Authentication) and the rights questions handlers ask.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use devicecloud_store::groups::{GroupRow, GroupScope};
use devicecloud_store::{memberships, sign_in_sessions, tokens, unix_now};

use super::cache::TokenEntry;
use super::rights::{Role, Roles};
use super::secrets::token_hash;
use crate::error::ApiError;
use crate::state::AppState;

/// The `client_id` of requests made through the dashboard rather than an API client.
pub const DASHBOARD_CLIENT: &str = "dashboard";

/// An account whose bearer token (or dashboard session) was valid for this request.
#[derive(Clone, Debug)]
pub struct Caller {
    pub id_user: String,
    pub is_admin: bool,
    pub client_id: String,
    roles: Arc<Roles>,
}

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

    /// The role held in the group `id_group` (administrators: manager), for pages that show
    /// what the caller may do before they try.
    pub fn role_in_group(&self, id_group: &str) -> Option<Role> {
        if self.is_admin {
            Some(Role::Manager)
        } else {
            self.roles.get(id_group).copied()
        }
    }

    /// The role held in a group record, `None` when the group is invisible to the caller.
    /// Deleted groups are visible to administrators only (docs/api.md, "Rights").
    pub fn role_in(&self, group: &GroupRow) -> Option<Role> {
        self.role_in_record(&group.id_group, group.deleted_at.is_some())
    }

    /// The role held in the group `id_group`, deleted or not, as [`Caller::role_in`] answers
    /// it: for a record read with its group's deletion time rather than the whole group.
    pub fn role_in_record(&self, id_group: &str, group_deleted: bool) -> Option<Role> {
        if self.is_admin {
            return Some(Role::Manager);
        }
        if group_deleted {
            return None;
        }
        self.roles.get(id_group).copied()
    }

    /// The groups this caller may list.
    pub fn group_scope(&self) -> GroupScope<'_> {
        if self.is_admin {
            GroupScope::All
        } else {
            GroupScope::MemberOf(&self.id_user)
        }
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
