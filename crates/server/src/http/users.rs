//! Accounts over the API (docs/api.md, "Accounts"): the collection `GET|HEAD /api/v2/user` and
//! `POST /api/v2/user` (administrators), `GET|PATCH /api/v2/user/<id>` (administrators; a user
//! reads their own record) and `GET|PATCH /api/v2/user/me`, the caller's own account and
//! password. Records never carry the password hash: the store does not even select it.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use devicecloud_query::{CollectionQuery, CollectionSpec};
use devicecloud_store::accounts::{self, UserRow};
use serde_json::Value;

use super::body::json_object;
use super::collection::{CollectionPage, RawCollection, Selection};
use super::origin::Origin;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::render::user_fields;
use crate::service::accounts as service;
use crate::state::AppState;

/// Page sizes: docs/api.md, "Reading" (largest 1000 outside the data endpoints).
const SPEC: CollectionSpec = CollectionSpec {
    attributes: &accounts::ATTRIBUTES,
    sortable: &accounts::SORTABLE,
    default_per_page: 20,
    max_per_page: 1000,
};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/user", get(index).post(create))
        .route("/api/v2/user/me", get(view_me).patch(update_me))
        .route("/api/v2/user/{id}", get(view).patch(update))
}

fn record(row: &UserRow) -> axum::Json<Value> {
    axum::Json(Value::Object(user_fields(row)))
}

#[utoipa::path(get, path = "/api/v2/user", tag = "accounts",
    params(("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query), ("sort" = Option<String>, Query), ("fields" = Option<String>, Query)),
    responses((status = 200, description = "Collection envelope of User records {id_user, username, is_admin, disabled, created_at}"), (status = 401, description = "Invalid credentials, or not an administrator"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn index(
    State(state): State<AppState>,
    caller: Caller,
    raw: RawCollection,
) -> Result<CollectionPage, ApiError> {
    caller.require_admin()?;
    let list = async |query: &CollectionQuery| {
        Ok(accounts::page(
            &state.db,
            query.filter.as_ref(),
            query.sort.as_ref(),
            query.page,
            raw.head,
        )
        .await?)
    };
    let render = async |rows: &[UserRow], selection: &Selection| {
        Ok(rows
            .iter()
            .map(|row| selection.render(user_fields(row), Vec::new(), None))
            .collect())
    };
    raw.page(&SPEC, &[], list, render).await
}

#[utoipa::path(post, path = "/api/v2/user", tag = "accounts", request_body(content = Object, description = "{username, password, is_admin?}"),
    responses((status = 201, description = "{id_user, username, is_admin, disabled, created_at}"), (status = 401, description = "Not an administrator"), (status = 422, description = "Invalid or taken username, short password")), security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    origin: Origin,
    body: Bytes,
) -> Result<Response, ApiError> {
    let row = service::create(&state, &caller, &json_object(&body)?).await?;
    Ok((
        StatusCode::CREATED,
        [(LOCATION, origin.url(&format!("/api/v2/user/{}", row.id_user)))],
        record(&row),
    )
        .into_response())
}

#[utoipa::path(get, path = "/api/v2/user/{id}", tag = "accounts", params(("id" = String, Path), ("fields" = Option<String>, Query)),
    responses((status = 200, description = "{id_user, username, is_admin, disabled, created_at}"), (status = 404, description = "Not found or not visible")), security(("bearer" = [])))]
pub async fn view(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<axum::Json<Value>, ApiError> {
    let visible = caller.is_admin || caller.id_user == id;
    let row = accounts::get(&state.db, &id)
        .await?
        .filter(|_| visible)
        .ok_or_else(|| ApiError::not_found("User", &id))?;
    let selection = Selection::from_query(query.as_deref());
    Ok(axum::Json(selection.render(user_fields(&row), Vec::new(), None)))
}

#[utoipa::path(get, path = "/api/v2/user/me", tag = "accounts",
    responses((status = 200, description = "The caller's own record {id_user, username, is_admin, disabled, created_at}")), security(("bearer" = [])))]
pub async fn view_me(state: State<AppState>, caller: Caller, query: RawQuery) -> Result<axum::Json<Value>, ApiError> {
    let id = caller.id_user.clone();
    view(state, caller, Path(id), query).await
}

#[utoipa::path(patch, path = "/api/v2/user/{id}", tag = "accounts", params(("id" = String, Path)),
    request_body(content = Object, description = "Any of {password (8 characters or more), is_admin, disabled}. A new password or disabled: true ends every token and dashboard session of the account"),
    responses((status = 200, description = "{id_user, username, is_admin, disabled, created_at}"), (status = 401, description = "Not an administrator"), (status = 422, description = "Invalid fields, or an administrator disabling or demoting themselves")),
    security(("bearer" = [])))]
pub async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<axum::Json<Value>, ApiError> {
    let row = service::update(&state, &caller, &id, &json_object(&body)?).await?;
    Ok(record(&row))
}

#[utoipa::path(patch, path = "/api/v2/user/me", tag = "accounts",
    request_body(content = Object, description = "{current_password, password}: the new password (8 characters or more) ends every token and dashboard session of the account, the one of this request too"),
    responses((status = 200, description = "{id_user, username, is_admin, disabled, created_at}"), (status = 422, description = "Invalid fields, or a wrong current_password"), (status = 429, description = "Too many wrong current passwords from this address; see Retry-After")),
    security(("bearer" = [])))]
pub async fn update_me(
    State(state): State<AppState>,
    caller: Caller,
    origin: Origin,
    body: Bytes,
) -> Result<axum::Json<Value>, ApiError> {
    let row = service::change_own_password(&state, &caller, &json_object(&body)?, origin.client).await?;
    Ok(record(&row))
}
