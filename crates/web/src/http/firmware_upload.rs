//! Receiving a firmware image from a `multipart/form-data` body (docs/api.md, "Firmware"),
//! for the API's upload and the dashboard's form alike: the text parts are read into fields,
//! the file part is streamed into the store as it arrives (never held whole), and the image is
//! stored once the body is whole and its fields and the caller's right checked. Anything that
//! fails removes what was written.
//!
//! The request guard does not read these bodies first ([`streams_body`]); each piece must come
//! within the body timeout instead. Every part is bounded: the file by the image limit, at most
//! 16 named text parts of 1 KiB each, and a part without a name is refused.

use std::future::Future;

use axum::extract::Multipart;
use axum::extract::multipart::{Field, MultipartError};
use axum::http::{Method, StatusCode};
use devicecloud_engine::firmware::upload::Upload;
use devicecloud_store::firmware::FirmwareRow;
use serde_json::Value;

use crate::caller::Caller;
use crate::http::error::ApiError;
use crate::http::limits::within_body_timeout;
use crate::service::firmware as service;
use crate::service::{Input, ServiceError};
use crate::state::AppState;

/// The API's upload.
const UPLOAD_ROUTE: &str = "/api/v2/firmware";
/// Text parts read, at most (`kind`, `component`, `version`, `id_group`, and whatever else a
/// form sends, such as the dashboard's CSRF token; parts the upload does not know are ignored).
const MAX_TEXT_PARTS: usize = 16;
/// Longest text part of an upload, in bytes.
const TEXT_FIELD_MAX_BYTES: usize = 1024;
/// What a multipart body may carry beyond the image itself (boundaries, headers, text parts).
pub const MULTIPART_OVERHEAD_BYTES: u64 = 64 * 1024;

/// Whether a request streams its body to its handler instead of having it read first: a
/// firmware upload, as large as an image, through the API or a page that takes one.
pub fn streams_body(state: &AppState, method: &Method, route: &str) -> bool {
    method == Method::POST && (route == UPLOAD_ROUTE || state.page_uploads.contains(&route))
}

/// An upload refused: why, and the text parts it had (a form shows them again).
#[derive(Debug)]
pub struct Refused {
    pub error: ApiError,
    pub fields: Input,
}

impl From<Refused> for ApiError {
    fn from(refused: Refused) -> ApiError {
        refused.error
    }
}

/// Reads an upload and stores its image. `before_file` sees every text part sent before the
/// file (the dashboard's CSRF token among them) and may refuse the upload before a byte of the
/// image is stored.
pub async fn receive(
    state: &AppState,
    caller: &Caller,
    multipart: Multipart,
    before_file: impl Fn(&Input) -> Result<(), ApiError>,
) -> Result<FirmwareRow, Refused> {
    let mut received = Received::default();
    let stored = match received.read(state, caller, multipart, &before_file).await {
        Ok(()) => received.store(state, caller).await,
        Err(e) => Err(e),
    };
    match stored {
        Ok(row) => Ok(row),
        Err(error) => {
            if let Some(upload) = received.upload.take() {
                upload.abandon().await;
            }
            Err(Refused {
                error,
                fields: received.fields,
            })
        }
    }
}

/// What an upload's body brought so far.
#[derive(Default)]
struct Received {
    fields: Input,
    upload: Option<Upload>,
}

impl Received {
    /// Reads every part: the text parts into `fields`, the file into the store.
    async fn read(
        &mut self,
        state: &AppState,
        caller: &Caller,
        mut multipart: Multipart,
        before_file: &impl Fn(&Input) -> Result<(), ApiError>,
    ) -> Result<(), ApiError> {
        while let Some(mut field) = piece(state, multipart.next_field()).await? {
            match field.name() {
                Some("file") => {
                    before_file(&self.fields)?;
                    self.file(state, caller, &mut field).await?;
                }
                Some(name) => {
                    if self.fields.len() >= MAX_TEXT_PARTS {
                        return Err(ApiError::BadRequest(format!(
                            "At most {MAX_TEXT_PARTS} text parts are read."
                        )));
                    }
                    let name = name.to_string();
                    let text = text(state, &mut field, &name).await?;
                    self.fields.insert(name, Value::String(text));
                }
                None => return Err(ApiError::BadRequest("Every part of the form needs a name.".into())),
            }
        }
        Ok(())
    }

    /// Streams the file into a new upload. When the fields came before it they are checked
    /// first, so a refusal stores nothing; they are checked again once the body is whole (a part
    /// after the file may change them).
    async fn file(&mut self, state: &AppState, caller: &Caller, field: &mut Field<'_>) -> Result<(), ApiError> {
        if self.upload.is_some() {
            return Err(ServiceError::invalid("file", "Only one file may be sent.").into());
        }
        if ["kind", "component", "version"]
            .iter()
            .all(|k| self.fields.contains_key(*k))
        {
            service::check_new(state, caller, &self.fields).await?;
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
        let image = service::check_new(state, caller, &self.fields).await?;
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
    within_body_timeout(state, next).await?.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::Status(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "The image is larger than DEVICECLOUD_FIRMWARE_MAX_BYTES ({} bytes).",
                    state.settings.firmware_max_bytes
                ),
            )
        } else {
            ApiError::BadRequest(format!("The multipart body could not be read: {}.", e.body_text()))
        }
    })
}
