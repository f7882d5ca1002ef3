//! Accounts over the API: `POST /api/v2/user` (administrators, docs/api.md, "Management endpoints")
//! and `GET /api/v2/user/<id>` (administrators, or the account itself).

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use devicecloud_store::accounts::{self, AccountRow};
use serde_json::{Value, json};

use super::body::json_object;
use super::origin::Origin;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::service::accounts as accounts_service;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/user", post(create))
        .route("/api/v2/user/{id}", get(view))
}

fn user_json(row: &AccountRow) -> Value {
    json!({"id_user": row.id_user, "username": row.username, "is_admin": row.is_admin != 0, "created_at": row.created_at})
}

#[utoipa::path(post, path = "/api/v2/user", tag = "accounts", request_body(content = Object, description = "{username, password, is_admin?}"),
    responses((status = 201, description = "{id_user, username, is_admin, created_at}"), (status = 401, description = "Not an administrator"), (status = 422, description = "Invalid or taken username, short password")), security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    origin: Origin,
    body: Bytes,
) -> Result<Response, ApiError> {
    let row = accounts_service::create(&state, &caller, &json_object(&body)?).await?;
    Ok((
        StatusCode::CREATED,
        [(LOCATION, origin.url(&format!("/api/v2/user/{}", row.id_user)))],
        axum::Json(user_json(&row)),
    )
        .into_response())
}

#[utoipa::path(get, path = "/api/v2/user/{id}", tag = "accounts", params(("id" = String, Path)),
    responses((status = 200, description = "{id_user, username, is_admin, created_at}"), (status = 404, description = "Not found or not visible")), security(("bearer" = [])))]
pub async fn view(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    let visible = caller.is_admin || caller.id_user == id;
    let row = accounts::get(&state.db, &id)
        .await?
        .filter(|_| visible)
        .ok_or_else(|| ApiError::not_found("User", &id))?;
    Ok(axum::Json(user_json(&row)))
}
