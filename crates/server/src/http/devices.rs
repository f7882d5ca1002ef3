//! Physical devices: provisioning of gateways and their management (docs/api.md, "Management
//! endpoints"), and the single-record view. Gateways authenticate over MQTT with the `device_token`
//! handed out here.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, header::LOCATION};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use devicecloud_store::devices::{self, DeviceChanges, DeviceRow, NewGateway};
use devicecloud_store::unix_now;
use serde_json::{Value, json};

use super::body::json_object;
use super::collection::Selection;
use super::device_collection::{self, device_fields, device_links, render_one};
use super::origin::Origin;
use crate::auth::secrets::{random_token, token_hash};
use crate::auth::{Caller, Role};
use crate::error::ApiError;
use crate::service::access;
use crate::service::validate::Fields;
use crate::state::AppState;

/// Module kinds a gateway may be provisioned as (specification: GO, CORE, PLUS).
pub const MODULE_KINDS: [&str; 3] = ["GO", "CORE", "PLUS"];

/// Default `expected_offline_interval` in seconds: a gateway silent for an hour is late.
const DEFAULT_OFFLINE_INTERVAL_S: i64 = 3600;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/physical-device", get(device_collection::index).post(provision))
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

/// Serials: printable, no spaces, at most 64 characters (they are MQTT user names too).
fn valid_serial(serial: &str) -> bool {
    !serial.is_empty() && serial.chars().count() <= 64 && serial.chars().all(|c| c.is_ascii_graphic())
}

#[utoipa::path(post, path = "/api/v2/physical-device", tag = "physical devices",
    request_body(content = Object, description = "{id_group, serial_hardware, kind: GO|CORE|PLUS, label?, expected_offline_interval?}"),
    responses((status = 201, description = "The device with its device_token (shown this once) and a Location header"), (status = 401, description = "Role below manager"), (status = 422, description = "Invalid fields, serial already provisioned, or a group the caller cannot see")),
    security(("bearer" = [])))]
pub async fn provision(
    State(state): State<AppState>,
    caller: Caller,
    origin: Origin,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_object(&body)?;
    let mut f = Fields::new(&body);
    let id_group = f.string("id_group", true, 64).map(str::to_string);
    let serial = f.string("serial_hardware", true, 64).map(str::to_string);
    if serial.as_deref().is_some_and(|s| !valid_serial(s)) {
        f.error(
            "serial_hardware",
            "Serial Hardware must be 1 to 64 printable characters without spaces.",
        );
    }
    let kind = f.string("kind", true, 8).map(str::to_string);
    if kind.as_deref().is_some_and(|k| !MODULE_KINDS.contains(&k)) {
        f.error("kind", "Kind must be one of GO, CORE, PLUS.");
    }
    let label = f.string("label", false, 255).unwrap_or_default().to_string();
    let interval = f.integer("expected_offline_interval", false, 0, 31_536_000);
    f.finish()?;
    let (id_group, serial, kind) = (
        id_group.unwrap_or_default(),
        serial.unwrap_or_default(),
        kind.unwrap_or_default(),
    );

    access::input_group(&state, &caller, &id_group, Role::Manager).await?;
    let token = random_token();
    let gateway = NewGateway {
        id_group: &id_group,
        serial_hardware: &serial,
        kind: &kind,
        label: &label,
        expected_offline_interval: interval.unwrap_or(DEFAULT_OFFLINE_INTERVAL_S),
    };
    let row = devices::provision(&state.db, &gateway, &token_hash(&token), unix_now()).await?;
    let mut record = render(&row, &Selection::default());
    if let Value::Object(map) = &mut record {
        map.insert("device_token".into(), json!(token));
    }
    let location = origin.url(&format!("/api/v2/physical-device/{}", row.id_physical_device));
    Ok((StatusCode::CREATED, [(LOCATION, location)], axum::Json(record)).into_response())
}

#[utoipa::path(get, path = "/api/v2/physical-device/{id}", tag = "physical devices", params(("id" = String, Path)),
    responses((status = 200, description = "A Physical Device record"), (status = 404, description = "Not found or not visible")), security(("bearer" = [])))]
pub async fn view(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<axum::Json<Value>, ApiError> {
    let device = access::device(&state, &caller, &id, Role::Viewer).await?;
    let selection = Selection::from_query(query.as_deref());
    Ok(axum::Json(render_one(&state, device, &selection).await?))
}

#[utoipa::path(patch, path = "/api/v2/physical-device/{id}", tag = "physical devices", params(("id" = String, Path)),
    request_body(content = Object, description = "{label?, expected_offline_interval?, expected_live_status?: 0|1}"),
    responses((status = 200, description = "The updated device"), (status = 401, description = "Role below manager"), (status = 404, description = "Not found"), (status = 422, description = "Invalid fields")),
    security(("bearer" = [])))]
pub async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<axum::Json<Value>, ApiError> {
    access::device(&state, &caller, &id, Role::Manager).await?;
    let body = json_object(&body)?;
    let mut f = Fields::new(&body);
    let label = f.string("label", false, 255).map(str::to_string);
    let interval = f.integer("expected_offline_interval", false, 0, 31_536_000);
    let live = f.integer("expected_live_status", false, 0, 1);
    f.finish()?;
    let changes = DeviceChanges {
        label: label.as_deref(),
        expected_offline_interval: interval,
        expected_live_status: live,
    };
    devices::update(&state.db, &id, &changes).await?;
    // A changed expectation shows in device_status at once, not at the next refresh.
    devices::refresh_status(&state.db, unix_now()).await?;
    let row = devices::get(&state.db, &id)
        .await?
        .ok_or_else(|| ApiError::not_found("Physical device", &id))?;
    let selection = Selection::from_query(query.as_deref());
    Ok(axum::Json(render_one(&state, row, &selection).await?))
}

#[utoipa::path(delete, path = "/api/v2/physical-device/{id}", tag = "physical devices", params(("id" = String, Path)),
    responses((status = 204, description = "Archived"), (status = 401, description = "Role below manager"), (status = 404, description = "Not found or already archived")),
    security(("bearer" = [])))]
pub async fn archive(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    access::device(&state, &caller, &id, Role::Manager).await?;
    if !devices::archive(&state.db, &id, &caller.id_user, unix_now()).await? {
        return Err(ApiError::not_found("Physical device", &id));
    }
    // Its live connection ends now; a later CONNECT is refused as not authorized.
    state.gateways.revoke(&id);
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/api/v2/physical-device/{id}/rotate-token", tag = "physical devices", params(("id" = String, Path)),
    responses((status = 200, description = "{id_physical_device, device_token}: the new token; the old one stops working at once"), (status = 401, description = "Role below manager"), (status = 404, description = "Not found, archived, or not a gateway")),
    security(("bearer" = [])))]
pub async fn rotate_token(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    access::device(&state, &caller, &id, Role::Manager).await?;
    let token = random_token();
    if !devices::rotate_token(&state.db, &id, &token_hash(&token)).await? {
        return Err(ApiError::not_found("Physical device", &id));
    }
    // The connection that used the old token ends now.
    state.gateways.revoke(&id);
    Ok(axum::Json(json!({"id_physical_device": id, "device_token": token})))
}
