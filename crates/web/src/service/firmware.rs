//! Firmware images (docs/api.md, "Firmware"): who may store, read and delete them. An image for
//! one group is its managers' (and administrators'); an image for every group (no `id_group`)
//! is an administrator's to store and delete, and every signed-in user reads it.

use devicecloud_engine::auth::Role;
use devicecloud_engine::firmware::upload::{Description, Upload, UploadError};
use devicecloud_protocol::ModuleKind;
use devicecloud_protocol::firmware::COMPONENTS;
use devicecloud_store::firmware::{self, Deleted, FirmwareRow};

use super::validate::Fields;
use super::{Input, Result, ServiceError, access};
use crate::caller::Caller;
use crate::state::AppState;

/// Longest version text.
const VERSION_MAX_CHARS: usize = 64;

/// An image's description as its upload gives it, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewImage {
    pub kind: String,
    pub component: String,
    pub version: String,
    pub id_group: Option<String>,
}

/// Checks the fields of an upload (`kind`, `component`, `version`, `id_group`?) and the
/// caller's right to store the image they describe: a manager of `id_group`, or an
/// administrator (the only one who may leave `id_group` out).
pub async fn check_new(state: &AppState, caller: &Caller, input: &Input) -> Result<NewImage> {
    let mut f = Fields::new(input);
    let kind = f.string("kind", true, 8);
    if kind.is_some_and(|k| k.parse::<ModuleKind>().is_err()) {
        f.error("kind", "Kind is invalid: GO, CORE or PLUS.");
    }
    let component = f.string("component", true, 16);
    if component.is_some_and(|c| !COMPONENTS.contains(&c)) {
        f.error("component", "Component is invalid: platform or app.");
    }
    let version = f.string("version", true, VERSION_MAX_CHARS);
    if version.is_some_and(|v| v.chars().any(|c| c.is_control() || c.is_whitespace())) {
        f.error("version", "Version must not contain spaces or control characters.");
    }
    let id_group = f.string("id_group", false, 64).filter(|g| !g.is_empty());
    f.finish()?;
    let (Some(kind), Some(component), Some(version)) = (kind, component, version) else {
        return Err(ServiceError::invalid("version", "Version cannot be blank."));
    };
    match id_group {
        Some(id_group) => {
            access::input_group(state, caller, id_group, Role::Manager).await?;
        }
        None if !caller.is_admin => return Err(ServiceError::NotAllowed),
        None => {}
    }
    Ok(NewImage {
        kind: kind.to_string(),
        component: component.to_string(),
        version: version.to_string(),
        id_group: id_group.map(str::to_string),
    })
}

/// Stores the image whose bytes `upload` received, signed: 422 for a version that exists or
/// an empty file, 413 past the size limit. Nothing is kept on any error.
pub async fn store(state: &AppState, caller: &Caller, upload: Upload, image: &NewImage) -> Result<FirmwareRow> {
    let description = Description {
        kind: &image.kind,
        component: &image.component,
        version: &image.version,
        id_group: image.id_group.as_deref(),
        created_by: Some(&caller.id_user),
    };
    upload
        .finish(&description, &state.signer)
        .await
        .map_err(|e| refused(e, state.settings.firmware_max_bytes))
}

/// The answer to an upload that was refused.
pub fn refused(error: UploadError, max: u64) -> ServiceError {
    match error {
        UploadError::TooLarge { .. } => ServiceError::TooLarge(format!(
            "The image is larger than DEVICECLOUD_FIRMWARE_MAX_BYTES ({max} bytes)."
        )),
        UploadError::Empty => ServiceError::invalid("file", "File cannot be blank."),
        UploadError::Exists => ServiceError::invalid(
            "version",
            "An image of this kind, component and version exists for this group.",
        ),
        UploadError::Store(e) => e.into(),
    }
}

/// The image `id` if the caller may see it (an image for every group: anyone signed in),
/// with `need` in its group.
pub async fn get(state: &AppState, caller: &Caller, id: &str, need: Role) -> Result<FirmwareRow> {
    match firmware::get(&state.db, id).await? {
        Some(image) if image.id_group.is_none() => {
            if need > Role::Viewer && !caller.is_admin {
                return Err(ServiceError::NotAllowed);
            }
            Ok(image)
        }
        image => access::firmware(state, caller, id, image, need).await,
    }
}

/// Deletes the image `id`: a manager of its group, or an administrator; 409 while a job that
/// has executions left installs it.
pub async fn delete(state: &AppState, caller: &Caller, id: &str) -> Result<()> {
    get(state, caller, id, Role::Manager).await?;
    match firmware::delete(&state.db, id).await? {
        Deleted::Done => Ok(()),
        Deleted::NotFound => Err(ServiceError::not_found("Firmware", id)),
        Deleted::InUse => Err(ServiceError::Conflict(
            "A job with executions not ended installs this image; cancel it or wait for it to end.".into(),
        )),
    }
}
