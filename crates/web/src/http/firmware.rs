//! Firmware (docs/api.md, "Firmware"): `POST|GET /api/v2/firmware`, `GET|DELETE
//! /api/v2/firmware/<id>` and `GET /api/v2/firmware/public-key`, the key gateways check every
//! image's signed manifest with. The download is the gateway's (`http::firmware_download`).
//!
//! An upload is `multipart/form-data` streamed to the store as it arrives: the request guard
//! does not read its body first ([`streams_body`]); each piece must come within the body
//! timeout instead, and the body as a whole may be as large as the image limit.

use std::future::Future;

use axum::Router;
use axum::extract::multipart::{Field, MultipartError, MultipartRejection};
use axum::extract::{DefaultBodyLimit, Multipart, RawQuery, State};
use axum::http::header::LOCATION;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use devicecloud_engine::auth::Role;
use devicecloud_engine::firmware::upload::Upload;
use devicecloud_query::CollectionSpec;
use devicecloud_store::firmware::{self, FirmwareRow};
use devicecloud_store::{ListArgs, Listing};
use serde_json::{Map, Value, json};

use super::collection::{CollectionGet, CollectionPage, Listed, Rendered, Selection, spec};
use super::record::OneRecord;
use crate::caller::Caller;
use crate::http::error::ApiError;
use crate::origin::Origin;
use crate::service::firmware::{self as service, NewImage};
use crate::service::{Input, ServiceError};
use crate::state::AppState;

/// The upload's route.
const UPLOAD_PATH: &str = "/api/v2/firmware";
/// The text fields of an upload.
const TEXT_FIELDS: [&str; 4] = ["kind", "component", "version", "id_group"];
/// Longest text field of an upload, in bytes.
const TEXT_FIELD_MAX_BYTES: usize = 1024;
/// What a multipart body may carry beyond the image itself (boundaries, headers, text fields).
const MULTIPART_OVERHEAD_BYTES: u64 = 64 * 1024;

/// The routes of this resource.
pub fn router(state: &AppState) -> Router<AppState> {
    let upload_limit = state
        .settings
        .firmware_max_bytes
        .saturating_add(MULTIPART_OVERHEAD_BYTES);
    Router::new()
        .route(
            UPLOAD_PATH,
            get(index).post(upload).layer(DefaultBodyLimit::max(
                usize::try_from(upload_limit).unwrap_or(usize::MAX),
            )),
        )
        .route("/api/v2/firmware/public-key", get(public_key))
        .route("/api/v2/firmware/{id}", get(view).delete(remove))
}

/// Whether a request streams its body to its handler instead of having it read first: a
/// firmware upload, as large as an image.
pub fn streams_body(method: &Method, route: &str) -> bool {
    method == Method::POST && route == UPLOAD_PATH
}

/// The image record, in its documented order.
pub fn image_fields(row: &FirmwareRow) -> Map<String, Value> {
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
        "download": {"href": format!("/gateway/v1/firmware/{}", row.id_firmware)},
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
    let mut received = Received::default();
    let stored = match received.read(&state, &caller, multipart).await {
        Ok(()) => received.store(&state, &caller).await,
        Err(e) => Err(e),
    };
    let row = match stored {
        Ok(row) => row,
        Err(e) => {
            if let Some(upload) = received.upload.take() {
                upload.abandon().await;
            }
            return Err(e);
        }
    };
    let record = render(&row, &Selection::from_query(query.as_deref()));
    let location = origin.url(&format!("/api/v2/firmware/{}", row.id_firmware));
    Ok((StatusCode::CREATED, [(LOCATION, location)], axum::Json(record)).into_response())
}

/// What an upload's body brought so far.
#[derive(Default)]
struct Received {
    fields: Input,
    /// The fields, checked (with the caller's right) once they were all there.
    image: Option<NewImage>,
    upload: Option<Upload>,
}

impl Received {
    /// Reads every part: the text fields into `fields`, the file into the store.
    async fn read(&mut self, state: &AppState, caller: &Caller, mut multipart: Multipart) -> Result<(), ApiError> {
        while let Some(mut field) = piece(state, multipart.next_field()).await? {
            match field.name() {
                Some("file") => self.file(state, caller, &mut field).await?,
                Some(name) if TEXT_FIELDS.contains(&name) => {
                    let name = name.to_string();
                    let text = text(state, &mut field, &name).await?;
                    self.fields.insert(name, Value::String(text));
                }
                // Other parts are read past, as other JSON keys are ignored.
                _ => while piece(state, field.chunk()).await?.is_some() {},
            }
        }
        Ok(())
    }

    /// Streams the file into a new upload; the fields sent before it are checked first.
    async fn file(&mut self, state: &AppState, caller: &Caller, field: &mut Field<'_>) -> Result<(), ApiError> {
        if self.upload.is_some() {
            return Err(ServiceError::invalid("file", "Only one file may be sent.").into());
        }
        if ["kind", "component", "version"]
            .iter()
            .all(|k| self.fields.contains_key(*k))
        {
            self.image = Some(service::check_new(state, caller, &self.fields).await?);
        }
        let max = state.settings.firmware_max_bytes;
        let upload = self.upload.insert(
            Upload::begin(&state.db, max)
                .await
                .map_err(|e| service::refused(e, max))?,
        );
        while let Some(bytes) = piece(state, field.chunk()).await? {
            upload.push(&bytes).await.map_err(|e| service::refused(e, max))?;
        }
        Ok(())
    }

    /// Stores the image once the body is whole.
    async fn store(&mut self, state: &AppState, caller: &Caller) -> Result<FirmwareRow, ApiError> {
        let image = match self.image.take() {
            Some(image) => image,
            None => service::check_new(state, caller, &self.fields).await?,
        };
        let Some(upload) = self.upload.take() else {
            return Err(ServiceError::invalid("file", "File cannot be blank.").into());
        };
        Ok(service::store(state, caller, upload, &image).await?)
    }
}

/// A text field, at most [`TEXT_FIELD_MAX_BYTES`] of UTF-8.
async fn text(state: &AppState, field: &mut Field<'_>, name: &str) -> Result<String, ApiError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = piece(state, field.chunk()).await? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > TEXT_FIELD_MAX_BYTES {
            return Err(ServiceError::invalid(name, format!("At most {TEXT_FIELD_MAX_BYTES} bytes.")).into());
        }
    }
    String::from_utf8(bytes).map_err(|_| ServiceError::invalid(name, "Not UTF-8 text.").into())
}

/// The next piece of the body: within the body timeout (408), unless the service stops (503).
async fn piece<T>(state: &AppState, next: impl Future<Output = Result<T, MultipartError>>) -> Result<T, ApiError> {
    let timeout = state.settings.limits.http_body_timeout;
    tokio::select! {
        _ = state.shutdown.cancelled() => Err(ApiError::Busy("The service is shutting down.".into())),
        read = tokio::time::timeout(timeout, next) => match read {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(ApiError::Status(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "The image is larger than DEVICECLOUD_FIRMWARE_MAX_BYTES ({} bytes).",
                    state.settings.firmware_max_bytes
                ),
            )),
            Ok(Err(e)) => Err(ApiError::BadRequest(format!("The multipart body could not be read: {}.", e.body_text()))),
            Err(_) => {
                metrics::counter!("devicecloud_http_timeouts_total").increment(1);
                Err(ApiError::Status(
                    StatusCode::REQUEST_TIMEOUT,
                    format!("The request body stalled for more than {} s.", timeout.as_secs()),
                ))
            }
        },
    }
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
