//! `GET` and `PUT /api/v2/group/<id>/retention` (docs/api.md, "Retention"): how many days a
//! group keeps raw points and each rollup, null keeping forever. Managers of the group.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::routing::get;
use devicecloud_store::retention::Retention;

use super::body::json_object;
use crate::caller::Caller;
use crate::http::error::ApiError;
use crate::service::retention as service;
use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new().route(
        "/api/v2/group/{id}/retention",
        get(view_retention).put(update_retention),
    )
}

/// Get a group's retention
///
/// Days kept for raw points and each rollup (null: forever). Manager of the group.
#[utoipa::path(get, path = "/api/v2/group/{id}/retention", tag = "groups", params(("id" = String, Path)),
    responses((status = 200, description = "Days kept per tier, null for ever", body = super::schemas::records::Retention), (status = 401, description = "Not a manager of the group"), (status = 404, description = "Not found or not visible")),
    security(("bearer" = [])))]
pub async fn view_retention(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<axum::Json<Retention>, ApiError> {
    Ok(axum::Json(service::get(&state, &caller, &id).await?))
}

/// Set a group's retention
///
/// `{raw_days, minute_days, hour_days, day_days}`, each a positive integer or null. Manager of the
/// group; 422 on invalid values.
#[utoipa::path(put, path = "/api/v2/group/{id}/retention", tag = "groups", params(("id" = String, Path)),
    request_body(content = super::schemas::bodies::RetentionChanges, description = "Any of raw_days, minute_days, hour_days, day_days: whole days from 1 to 36500, or null to keep forever; a field left out keeps its value"),
    responses((status = 200, description = "The retention now in force", body = super::schemas::records::Retention), (status = 401, description = "Not a manager of the group"), (status = 404, description = "Not found or not visible"), (status = 422, description = "Invalid value")),
    security(("bearer" = [])))]
pub async fn update_retention(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<axum::Json<Retention>, ApiError> {
    Ok(axum::Json(
        service::put(&state, &caller, &id, &json_object(&body)?).await?,
    ))
}
