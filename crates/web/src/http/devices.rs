//! Physical devices: provisioning of gateways and their management (docs/api.md, "Management
//! endpoints"), and the single-record view. Gateways authenticate over MQTT with the `device_token`
//! handed out here.

use axum::Router;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use devicecloud_store::devices::DeviceRow;
use serde_json::{Value, json};

use super::collection::Selection;
use super::device_collection::{self, render_one};
use super::record::{Input, NewRecord, OneRecord};
use crate::http::error::ApiError;
use crate::render::{device_fields, device_links};
use crate::service::access;
use crate::service::devices as service;
use crate::state::AppState;
use devicecloud_engine::auth::Role;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/physical-device", get(device_collection::index).post(provision))
        // As every collection: the list also at `…/index` (a static segment, ahead of `{id}`).
        .route("/api/v2/physical-device/index", get(device_collection::index))
        .route("/api/v2/physical-device/{id}", get(view).patch(update).delete(archive))
        .route("/api/v2/physical-device/{id}/rotate-token", post(rotate_token))
}

fn render(row: &DeviceRow, selection: &Selection) -> Value {
    selection.render(
        device_fields(row),
        Vec::new(),
        Some(device_links(&row.id_physical_device)),
    )
}

/// Provision a gateway
///
/// Creates a gateway (GO, CORE or PLUS) in a group and answers 201 with its record and its
/// `device_token`, shown this once. Manager of the group; 422 on invalid fields or a serial already
/// provisioned.
#[utoipa::path(post, path = "/api/v2/physical-device", tag = "physical devices",
    request_body(content = super::schemas::bodies::NewGateway),
    responses((status = 201, description = "The device with its device_token (shown this once) and a Location header", body = super::schemas::records::PhysicalDevice), (status = 401, description = "Role below manager"), (status = 422, description = "Invalid fields, serial already provisioned, or a group the caller cannot see")),
    security(("bearer" = [])))]
pub async fn provision(new: NewRecord) -> Result<Response, ApiError> {
    let provisioned = service::provision(&new.state, &new.caller, &new.input).await?;
    let (row, token) = (provisioned.row, provisioned.device_token);
    let mut record = render(&row, &Selection::default());
    if let Value::Object(map) = &mut record {
        map.insert("device_token".into(), json!(token));
    }
    Ok(new.created(&format!("/api/v2/physical-device/{}", row.id_physical_device), record))
}

/// Get a physical device
///
/// One device with `fields` and `expand` as on the collection. Viewer of its group; 404 when it
/// does not exist or its group is invisible.
#[utoipa::path(get, path = "/api/v2/physical-device/{id}", tag = "physical devices", params(("id" = String, Path)),
    responses((status = 200, description = "A Physical Device record", body = super::schemas::records::PhysicalDevice), (status = 404, description = "Not found or not visible")), security(("bearer" = [])))]
pub async fn view(one: OneRecord) -> Result<axum::Json<Value>, ApiError> {
    let device = access::device(&one.state, &one.caller, &one.id, Role::Viewer).await?;
    Ok(axum::Json(render_one(&one.state, device, &one.selection).await?))
}

/// Change a physical device
///
/// `label`, `expected_offline_interval`, `expected_live_status`; the device's `device_status`
/// follows at once. Manager of its group (401 below); 422 on invalid fields.
#[utoipa::path(patch, path = "/api/v2/physical-device/{id}", tag = "physical devices", params(("id" = String, Path)),
    request_body(content = super::schemas::bodies::DeviceChanges),
    responses((status = 200, description = "The updated device", body = super::schemas::records::PhysicalDevice), (status = 401, description = "Role below manager"), (status = 404, description = "Not found"), (status = 422, description = "Invalid fields")),
    security(("bearer" = [])))]
pub async fn update(one: OneRecord, Input(input): Input) -> Result<axum::Json<Value>, ApiError> {
    let row = service::update(&one.state, &one.caller, &one.id, &input).await?;
    Ok(axum::Json(render_one(&one.state, row, &one.selection).await?))
}

/// Archive a physical device
///
/// Archives the device (204): a gateway's connection is closed wherever it is and its CONNECTs are
/// refused; an asset's gateway stops sending its data to it. Manager of its group.
#[utoipa::path(delete, path = "/api/v2/physical-device/{id}", tag = "physical devices", params(("id" = String, Path)),
    responses((status = 204, description = "Archived"), (status = 401, description = "Role below manager"), (status = 404, description = "Not found or already archived")),
    security(("bearer" = [])))]
pub async fn archive(one: OneRecord) -> Result<StatusCode, ApiError> {
    service::archive(&one.state, &one.caller, &one.id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Rotate a gateway's token
///
/// A new device token, shown this once; the connection that used the old one is closed. Manager of
/// its group.
#[utoipa::path(post, path = "/api/v2/physical-device/{id}/rotate-token", tag = "physical devices", params(("id" = String, Path)),
    responses((status = 200, description = "The new token; the old one stops working at once", body = super::schemas::records::NewDeviceToken), (status = 401, description = "Role below manager"), (status = 404, description = "Not found, archived, or not a gateway")),
    security(("bearer" = [])))]
pub async fn rotate_token(one: OneRecord) -> Result<axum::Json<Value>, ApiError> {
    let token = service::rotate_token(&one.state, &one.caller, &one.id).await?;
    Ok(axum::Json(json!({"id_physical_device": one.id, "device_token": token})))
}
