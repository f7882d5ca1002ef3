//! Accounts over the API (docs/api.md, "Accounts"): the collection `GET|HEAD /api/v2/user` and
//! `POST /api/v2/user` (administrators), `GET|PATCH /api/v2/user/<id>` (administrators; a user
//! reads their own record) and `GET|PATCH /api/v2/user/me`, the caller's own account and
//! password. Records never carry the password hash: the store does not even select it.

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::response::Response;
use axum::routing::get;
use devicecloud_query::CollectionSpec;
use devicecloud_store::accounts::{self, UserRow};
use devicecloud_store::{ListArgs, Listing};
use serde_json::Value;

use super::collection::{CollectionGet, CollectionPage, Listed, Rendered, Selection, spec};
use super::record::{Input, NewRecord, OneRecord};
use crate::caller::Caller;
use crate::http::error::ApiError;
use crate::origin::Origin;
use crate::render::user_fields;
use crate::service::accounts as service;
use crate::state::AppState;

/// Every account, for administrators.
struct Users;

impl Listed for Users {
    type Row = UserRow;
    const SPEC: CollectionSpec = spec(&accounts::ATTRIBUTES, &accounts::SORTABLE);

    fn allowed(&self, caller: &Caller) -> Result<(), ApiError> {
        caller.require_admin()
    }

    async fn list(&self, state: &AppState, args: ListArgs<'_>) -> Result<Listing<UserRow>, ApiError> {
        Ok(accounts::page(&state.db, &args).await?)
    }

    async fn render(&self, _: &AppState, rows: &[UserRow], selection: &Selection) -> Rendered {
        Ok(selection.plain(rows, user_fields))
    }
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/user", get(index).post(create))
        .route("/api/v2/user/me", get(view_me).patch(update_me))
        .route("/api/v2/user/{id}", get(view).patch(update))
}

fn record(row: &UserRow) -> axum::Json<Value> {
    axum::Json(Value::Object(user_fields(row)))
}

/// List accounts
///
/// Administrators only.
#[utoipa::path(get, path = "/api/v2/user", tag = "accounts",
    params(("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query), ("sort" = Option<String>, Query), ("fields" = Option<String>, Query)),
    responses((status = 200, description = "Collection envelope of User records", body = super::schemas::records::UserCollection), (status = 401, description = "Invalid credentials, or not an administrator"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn index(get: CollectionGet) -> Result<CollectionPage, ApiError> {
    get.serve(&Users).await
}

/// Create an account
///
/// `{username, password, is_admin?}`: administrators only; 201; 422 on invalid fields (a password
/// has 8 to 1,024 characters). Passwords are hashed in a lane of their own: 503 with `Retry-After`
/// when it stays busy for 2 s.
#[utoipa::path(post, path = "/api/v2/user", tag = "accounts", request_body(content = super::schemas::bodies::NewUser),
    responses((status = 201, description = "The created account", body = super::schemas::records::User), (status = 401, description = "Not an administrator"), (status = 422, description = "Invalid or taken username, short password")), security(("bearer" = [])))]
pub async fn create(new: NewRecord) -> Result<Response, ApiError> {
    let row = service::create(&new.state, &new.caller, &new.input).await?;
    Ok(new.created(
        &format!("/api/v2/user/{}", row.id_user),
        Value::Object(user_fields(&row)),
    ))
}

/// Get an account
///
/// Administrators, or the account itself.
#[utoipa::path(get, path = "/api/v2/user/{id}", tag = "accounts", params(("id" = String, Path), ("fields" = Option<String>, Query)),
    responses((status = 200, description = "The account", body = super::schemas::records::User), (status = 404, description = "Not found or not visible")), security(("bearer" = [])))]
pub async fn view(one: OneRecord) -> Result<axum::Json<Value>, ApiError> {
    account(&one.state, &one.caller, &one.id, &one.selection).await
}

/// The caller's own account
///
/// Any account.
#[utoipa::path(get, path = "/api/v2/user/me", tag = "accounts",
    responses((status = 200, description = "The caller's own record", body = super::schemas::records::User)), security(("bearer" = [])))]
pub async fn view_me(
    State(state): State<AppState>,
    caller: Caller,
    RawQuery(query): RawQuery,
) -> Result<axum::Json<Value>, ApiError> {
    account(
        &state,
        &caller,
        &caller.id_user,
        &Selection::from_query(query.as_deref()),
    )
    .await
}

/// The account `id` as `caller` may read it: administrators any, a user their own.
async fn account(
    state: &AppState,
    caller: &Caller,
    id: &str,
    selection: &Selection,
) -> Result<axum::Json<Value>, ApiError> {
    let visible = caller.is_admin || caller.id_user == id;
    let row = accounts::get(&state.db, id)
        .await?
        .filter(|_| visible)
        .ok_or_else(|| ApiError::not_found("User", id))?;
    Ok(axum::Json(selection.render(user_fields(&row), Vec::new(), None)))
}

/// Change an account
///
/// `password`, `is_admin`, `disabled`: administrators only. A new password or disabling ends every
/// token and dashboard session of the account at once.
#[utoipa::path(patch, path = "/api/v2/user/{id}", tag = "accounts", params(("id" = String, Path)),
    request_body(content = super::schemas::bodies::UserChanges, description = "Any of {password (8 characters or more), is_admin, disabled}. A new password or disabled: true ends every token and dashboard session of the account"),
    responses((status = 200, description = "The account", body = super::schemas::records::User), (status = 401, description = "Not an administrator"), (status = 422, description = "Invalid fields, or an administrator disabling or demoting themselves")),
    security(("bearer" = [])))]
pub async fn update(one: OneRecord, Input(input): Input) -> Result<axum::Json<Value>, ApiError> {
    Ok(record(
        &service::update(&one.state, &one.caller, &one.id, &input).await?,
    ))
}

/// Change one's own password
///
/// `{current_password, password}`; a wrong current password counts as a failed sign-in (429 past
/// the limit).
#[utoipa::path(patch, path = "/api/v2/user/me", tag = "accounts",
    request_body(content = super::schemas::bodies::NewPassword, description = "{current_password, password}: the new password (8 characters or more) ends every token and dashboard session of the account, the one of this request too"),
    responses((status = 200, description = "The account", body = super::schemas::records::User), (status = 422, description = "Invalid fields, or a wrong current_password"), (status = 429, description = "Too many wrong current passwords from this address; see Retry-After")),
    security(("bearer" = [])))]
pub async fn update_me(
    State(state): State<AppState>,
    caller: Caller,
    origin: Origin,
    Input(input): Input,
) -> Result<axum::Json<Value>, ApiError> {
    let row = service::change_own_password(&state, &caller, &input, origin.client).await?;
    Ok(record(&row))
}
