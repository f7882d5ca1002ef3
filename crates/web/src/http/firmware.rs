//! Firmware (docs/api.md, "Firmware"): `POST|GET /api/v2/firmware`, `GET|DELETE
//! /api/v2/firmware/<id>` and `GET /api/v2/firmware/public-key`, the key gateways check every
//! image's signed manifest with. The download is the gateway's (`http::firmware_download`).
//!
//! An upload is `multipart/form-data` streamed to the store as it arrives
//! (`http::firmware_upload`).

use axum::Router;
use axum::extract::multipart::MultipartRejection;
use axum::extract::{DefaultBodyLimit, Multipart, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use devicecloud_engine::auth::Role;
use devicecloud_query::CollectionSpec;
use devicecloud_store::firmware::{self, FirmwareRow};
use devicecloud_store::{ListArgs, Listing};
use serde_json::{Map, Value, json};

use super::collection::{CollectionGet, CollectionPage, Listed, Rendered, Selection, spec};
use super::firmware_upload::{MULTIPART_OVERHEAD_BYTES, receive};
use super::record::{OneRecord, created};
use crate::caller::Caller;
use crate::http::error::ApiError;
use crate::origin::Origin;
use crate::service::firmware as service;
use crate::state::AppState;

/// The routes of this resource.
pub fn router(state: &AppState) -> Router<AppState> {
    let upload_limit = state
        .settings
        .firmware_max_bytes
        .saturating_add(MULTIPART_OVERHEAD_BYTES);
    Router::new()
        .route(
            "/api/v2/firmware",
            get(index).post(upload).layer(DefaultBodyLimit::max(
                usize::try_from(upload_limit).unwrap_or(usize::MAX),
            )),
        )
        .route("/api/v2/firmware/public-key", get(public_key))
        .route("/api/v2/firmware/{id}", get(view).delete(remove))
}

/// The image record, in its documented order.
fn image_fields(row: &FirmwareRow) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("id_firmware".into(), json!(row.id_firmware));
    map.insert("kind".into(), json!(row.kind));
    map.insert("component".into(), json!(row.component));
    map.insert("version".into(), json!(row.version));
    map.insert("size".into(), json!(row.size));
    map.insert("sha256".into(), json!(row.sha256));
    map.insert("signature".into(), json!(row.signature));
    map.insert("manifest".into(), json!(row.manifest));
    map.insert("id_group".into(), json!(row.id_group));
    map.insert("created_at".into(), json!(row.created_at));
    map.insert("created_by".into(), json!(row.created_by));
    map
}

fn render(row: &FirmwareRow, selection: &Selection) -> Value {
    let links = json!({
        "self": {"href": format!("/api/v2/firmware/{}", row.id_firmware)},
        "download": {"href": devicecloud_protocol::firmware::download_path(&row.id_firmware)},
    });
    selection.render(image_fields(row), Vec::new(), Some(links))
}

/// The images the caller sees.
struct Images;

impl Listed for Images {
    type Row = FirmwareRow;
    const SPEC: CollectionSpec = spec(&firmware::ATTRIBUTES, &firmware::SORTABLE);

    async fn list(&self, state: &AppState, args: ListArgs<'_>) -> Result<Listing<FirmwareRow>, ApiError> {
        Ok(firmware::list(&state.db, args).await?)
    }

    async fn render(&self, _: &AppState, rows: &[FirmwareRow], selection: &Selection) -> Rendered {
        Ok(rows.iter().map(|row| render(row, selection)).collect())
    }
}

/// List firmware images
///
/// The images for every group and for the groups the caller sees, newest first.
#[utoipa::path(get, path = "/api/v2/firmware", tag = "firmware",
    params(("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query), ("sort" = Option<String>, Query), ("fields" = Option<String>, Query)),
    responses((status = 200, description = "Collection envelope of Firmware records", body = super::schemas::records::FirmwareCollection), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn index(get: CollectionGet) -> Result<CollectionPage, ApiError> {
    get.serve(&Images).await
}

/// Upload a firmware image
///
/// `multipart/form-data` with the image as `file` and the fields `kind` (GO, CORE, PLUS),
/// `component` (platform, app), `version` and `id_group` (left out: an image for every group,
/// administrators only). The image is streamed to the store, hashed and its manifest signed;
/// sent before the file, the fields are checked before a byte of it is stored. A manager of
/// `id_group` or an administrator; 413 past `DEVICECLOUD_FIRMWARE_MAX_BYTES`, 422 for a version
/// that exists.
#[utoipa::path(post, path = "/api/v2/firmware", tag = "firmware",
    request_body(content = super::schemas::bodies::NewFirmware, content_type = "multipart/form-data"),
    responses((status = 201, description = "The stored image, with a Location header", body = super::schemas::records::Firmware), (status = 400, description = "A body that is not readable multipart"), (status = 401, description = "Role below manager, or no group for a non-administrator"), (status = 413, description = "An image past the size limit"), (status = 415, description = "Not multipart/form-data"), (status = 422, description = "Invalid fields, an empty file, or a version that exists")),
    security(("bearer" = [])))]
pub async fn upload(
    State(state): State<AppState>,
    caller: Caller,
    origin: Origin,
    RawQuery(query): RawQuery,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Response, ApiError> {
    let multipart = multipart.map_err(|_| {
        ApiError::Status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "The body must be multipart/form-data with a file and the fields kind, component, version and id_group."
                .into(),
        )
    })?;
    let row = receive(&state, &caller, multipart, |_| Ok(())).await?;
    let record = render(&row, &Selection::from_query(query.as_deref()));
    Ok(created(
        &origin,
        &format!("/api/v2/firmware/{}", row.id_firmware),
        record,
    ))
}

/// Get a firmware image
///
/// Its description, signed manifest and signature. Whoever sees its group (an image for every
/// group: anyone signed in).
#[utoipa::path(get, path = "/api/v2/firmware/{id}", tag = "firmware", params(("id" = String, Path)),
    responses((status = 200, description = "A Firmware record", body = super::schemas::records::Firmware), (status = 404, description = "Not found or not visible")),
    security(("bearer" = [])))]
pub async fn view(one: OneRecord) -> Result<axum::Json<Value>, ApiError> {
    let image = service::get(&one.state, &one.caller, &one.id, Role::Viewer).await?;
    Ok(axum::Json(render(&image, &one.selection)))
}

/// Delete a firmware image
///
/// A manager of its group, or an administrator (an image for every group: administrators
/// only); 409 while a job with executions not ended installs it.
#[utoipa::path(delete, path = "/api/v2/firmware/{id}", tag = "firmware", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 401, description = "Role below manager"), (status = 404, description = "Not found or not visible"), (status = 409, description = "A job with executions not ended installs it")),
    security(("bearer" = [])))]
pub async fn remove(one: OneRecord) -> Result<StatusCode, ApiError> {
    service::delete(&one.state, &one.caller, &one.id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The firmware signing key
///
/// The Ed25519 public key that signs every image's manifest: the raw 32 bytes in standard
/// base64. The same on every node; it changes only if the signing key file is replaced.
#[utoipa::path(get, path = "/api/v2/firmware/public-key", tag = "firmware",
    responses((status = 200, description = "The public key", body = super::schemas::records::FirmwarePublicKey), (status = 401, description = "Invalid credentials")),
    security(("bearer" = [])))]
pub async fn public_key(State(state): State<AppState>, _caller: Caller) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(json!({
        "algorithm": "ed25519",
        "public_key": state.signer.public_key(),
    })))
}
