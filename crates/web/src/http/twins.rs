//! Device twins (docs/api.md, "Twins"): `GET|PATCH /api/v2/physical-device/<id>/twin` and the
//! collection `GET /api/v2/twin`, which finds the devices out of sync. Viewers read twins;
//! operators change the desired document.

use axum::Router;
use axum::routing::get;
use devicecloud_query::CollectionSpec;
use devicecloud_store::twins::{self, TwinRow};
use devicecloud_store::{ListArgs, Listing};
use serde_json::{Value, json};

use super::collection::{CollectionGet, CollectionPage, Listed, Rendered, Selection, spec};
use super::record::{Input, OneRecord};
use crate::http::error::ApiError;
use crate::service::twins as service;
use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/twin", get(index))
        .route("/api/v2/physical-device/{id}/twin", get(view).patch(update))
}

/// The twin record with its links.
fn render(row: &TwinRow, selection: &Selection) -> Value {
    let id = &row.id_physical_device;
    let links = json!({
        "self": {"href": format!("/api/v2/physical-device/{id}/twin")},
        "device": {"href": format!("/api/v2/physical-device/{id}")},
    });
    selection.render(devicecloud_engine::twins::record(row), Vec::new(), Some(links))
}

/// The twins of the caller's groups.
struct Twins;

impl Listed for Twins {
    type Row = TwinRow;
    const SPEC: CollectionSpec = spec(&twins::ATTRIBUTES, &twins::SORTABLE);

    async fn list(&self, state: &AppState, args: ListArgs<'_>) -> Result<Listing<TwinRow>, ApiError> {
        Ok(twins::list(&state.db, args).await?)
    }

    async fn render(&self, _: &AppState, rows: &[TwinRow], selection: &Selection) -> Rendered {
        Ok(rows.iter().map(|row| render(row, selection)).collect())
    }
}

/// List twins
///
/// The twins of the devices of the caller's groups, by device; `filter[in_sync]=0` finds the
/// devices that have not applied their desired configuration yet. Any account.
#[utoipa::path(get, path = "/api/v2/twin", tag = "twins",
    params(("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query), ("sort" = Option<String>, Query), ("fields" = Option<String>, Query)),
    responses((status = 200, description = "Collection envelope of Twin records", body = super::schemas::records::TwinCollection), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn index(get: CollectionGet) -> Result<CollectionPage, ApiError> {
    get.serve(&Twins).await
}

/// Get a device's twin
///
/// Desired, reported, their delta and versions. Viewer of the device's group.
#[utoipa::path(get, path = "/api/v2/physical-device/{id}/twin", tag = "twins", params(("id" = String, Path)),
    responses((status = 200, description = "A Twin record", body = super::schemas::records::Twin), (status = 404, description = "Not found or not visible")),
    security(("bearer" = [])))]
pub async fn view(one: OneRecord) -> Result<axum::Json<Value>, ApiError> {
    let row = service::get(&one.state, &one.caller, &one.id).await?;
    Ok(axum::Json(render(&row, &one.selection)))
}

/// Change a device's desired configuration
///
/// A JSON merge patch of `desired`, applied only at `version` when given (409 otherwise); the
/// device's gateway gets the new document at once when connected, otherwise right after its next
/// hello. A patch that changes nothing leaves the twin as it is. Operator of the device's group.
#[utoipa::path(patch, path = "/api/v2/physical-device/{id}/twin", tag = "twins", params(("id" = String, Path)),
    request_body(content = super::schemas::bodies::TwinChange),
    responses((status = 200, description = "The twin after the change", body = super::schemas::records::Twin), (status = 401, description = "Role below operator"), (status = 404, description = "Not found or not visible"), (status = 409, description = "The desired document is not at the version given"), (status = 422, description = "Not a JSON object, or a document past 32 KiB or 8 levels")),
    security(("bearer" = [])))]
pub async fn update(one: OneRecord, Input(input): Input) -> Result<axum::Json<Value>, ApiError> {
    let row = service::change(&one.state, &one.caller, &one.id, &input).await?;
    Ok(axum::Json(render(&row, &one.selection)))
}
