//! Groups: `GET /api/v2/group/index`, `GET|HEAD /api/v2/group`, `GET /api/v2/group/<id>`
//! (specification, Groups) and their management: create, edit, delete, members (docs/api.md,
//! "Management endpoints").

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, header::LOCATION};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use devicecloud_query::CollectionSpec;
use devicecloud_store::ListArgs;
use devicecloud_store::groups::{self, GroupRow};
use serde_json::{Value, json};
use std::sync::Arc;

use super::body::json_object;
use super::collection::{CollectionPage, RawCollection, Selection, items_json};
use super::origin::Origin;
use crate::auth::{Caller, Role};
use crate::error::ApiError;
use crate::page_cache::{CachedPage, PageCache};
use crate::render::{group_fields, group_links};
use crate::service::groups as service;
use crate::service::{access, memberships};
use crate::state::AppState;

/// Page sizes: docs/api.md, "Reading" (largest 1000 outside the data endpoints); default as Yii's
/// 20.
const SPEC: CollectionSpec = CollectionSpec {
    attributes: &groups::ATTRIBUTES,
    sortable: &groups::SORTABLE,
    default_per_page: 20,
    max_per_page: 1000,
};

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/group", get(index).post(create))
        .route("/api/v2/group/index", get(index))
        .route("/api/v2/group/{id}", get(view).patch(update).delete(remove))
        .route(
            "/api/v2/group/{id}/member/{id_user}",
            put(put_member).delete(remove_member),
        )
}

fn render(row: &GroupRow, selection: &Selection) -> Value {
    selection.render(group_fields(row), Vec::new(), Some(group_links(&row.id_group)))
}

#[utoipa::path(get, path = "/api/v2/group/index", tag = "groups",
    params(("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query), ("sort" = Option<String>, Query), ("fields" = Option<String>, Query), ("expand" = Option<String>, Query)),
    responses((status = 200, description = "Collection envelope of Group records"), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn index(
    State(state): State<AppState>,
    caller: Caller,
    raw: RawCollection,
) -> Result<CollectionPage, ApiError> {
    let query = raw.parse(&SPEC)?;
    let key = PageCache::key("group", &caller, raw.query_bytes(), &raw.body_text());
    let cached = match key.as_deref().and_then(|key| state.pages.get(key)) {
        Some(hit) => hit,
        // HEAD counts only (no rows fetched), and a page without rows is not remembered.
        None if raw.head => {
            let listing = groups::list(&state.db, raw.list_args(&caller, &query)).await?;
            Arc::new(CachedPage {
                page: listing.page,
                items: items_json(&[]),
            })
        }
        None => {
            let version = state.pages.version();
            let listing = groups::list(
                &state.db,
                ListArgs {
                    count_only: false,
                    ..raw.list_args(&caller, &query)
                },
            )
            .await?;
            let selection = Selection::of(&query);
            let items: Vec<Value> = listing.items.iter().map(|row| render(row, &selection)).collect();
            let page = Arc::new(CachedPage {
                page: listing.page,
                items: items_json(&items),
            });
            if let Some(key) = key {
                state.pages.put(key, version, page.clone());
            }
            page
        }
    };
    Ok(CollectionPage::new(&raw, &query, cached.page, cached.items.clone()).with("expand", json!([])))
}

#[utoipa::path(get, path = "/api/v2/group/{id}", tag = "groups", params(("id" = String, Path)),
    responses((status = 200, description = "A Group record"), (status = 404, description = "Not found or not visible")), security(("bearer" = [])))]
pub async fn view(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json, ApiError> {
    let group = access::group(&state, &caller, &id, Role::Viewer).await?;
    Ok(axum::Json(render(&group, &Selection::from_query(query.as_deref()))))
}

/// A JSON answer with status 200.
type Json = axum::Json<Value>;

#[utoipa::path(post, path = "/api/v2/group", tag = "groups", request_body(content = Object, description = "{label, type?, subtype?}"),
    responses((status = 201, description = "The created Group, with a Location header"), (status = 401, description = "Not an administrator"), (status = 422, description = "Invalid fields")), security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    origin: Origin,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    let row = service::create(&state, &caller, &json_object(&body)?).await?;
    let location = origin.url(&format!("/api/v2/group/{}", row.id_group));
    let selection = Selection::from_query(query.as_deref());
    Ok((
        StatusCode::CREATED,
        [(LOCATION, location)],
        axum::Json(render(&row, &selection)),
    )
        .into_response())
}

#[utoipa::path(patch, path = "/api/v2/group/{id}", tag = "groups", params(("id" = String, Path)), request_body(content = Object, description = "{label?, type?, subtype?, id_country?}"),
    responses((status = 200, description = "The updated Group"), (status = 401, description = "Role below manager"), (status = 404, description = "Not found"), (status = 422, description = "Invalid fields")), security(("bearer" = [])))]
pub async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Json, ApiError> {
    let row = service::update(&state, &caller, &id, &json_object(&body)?).await?;
    Ok(axum::Json(render(&row, &Selection::from_query(query.as_deref()))))
}

#[utoipa::path(delete, path = "/api/v2/group/{id}", tag = "groups", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted (deleted_at set)"), (status = 401, description = "Role below manager"), (status = 404, description = "Not found")), security(("bearer" = [])))]
pub async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    service::delete(&state, &caller, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(put, path = "/api/v2/group/{id}/member/{id_user}", tag = "groups", params(("id" = String, Path), ("id_user" = String, Path)),
    request_body(content = Object, description = "{role: viewer|operator|manager}"),
    responses((status = 200, description = "{id_group, id_user, role}"), (status = 401, description = "Neither administrator nor manager"), (status = 404, description = "Group or user not found"), (status = 422, description = "Invalid role")), security(("bearer" = [])))]
pub async fn put_member(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, id_user)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json, ApiError> {
    let role = memberships::put(&state, &caller, &id, &id_user, &json_object(&body)?).await?;
    Ok(axum::Json(json!({"id_group": id, "id_user": id_user, "role": role})))
}

#[utoipa::path(delete, path = "/api/v2/group/{id}/member/{id_user}", tag = "groups", params(("id" = String, Path), ("id_user" = String, Path)),
    responses((status = 204, description = "Role removed"), (status = 401, description = "Neither administrator nor manager"), (status = 404, description = "No such membership")), security(("bearer" = [])))]
pub async fn remove_member(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, id_user)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    memberships::remove(&state, &caller, &id, &id_user).await?;
    Ok(StatusCode::NO_CONTENT)
}
