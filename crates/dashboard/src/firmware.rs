//! Firmware (docs/api.md, "Firmware"): the images the viewer sees, an upload form for those who
//! manage a group (an image for every group: administrators), deletion, and a link to start a
//! campaign with an image. The upload streams through the same code as the API's
//! (`devicecloud_web::http::firmware_upload`), the CSRF token checked before a byte is stored.

use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use devicecloud_store::firmware::{self as store, FirmwareRow};
use maud::{Markup, html};
use serde_json::Map;

use crate::format;
use crate::layout::{self, Section};
use crate::page::{Draft, PageError, PageQuery, PageResult, list_args, manageable_groups, pager, see_other};
use crate::sign_in::Posted;
use crate::viewer::{CSRF_FIELD, Viewer};
use devicecloud_engine::auth::Role;
use devicecloud_web::http::error::ApiError;
use devicecloud_web::http::firmware_upload::{Refused, receive};
use devicecloud_web::service::firmware as service;
use devicecloud_web::state::AppState;

/// The upload form: the text fields first, so that they (and the CSRF token) are checked before
/// the file is received.
fn form(viewer: &Viewer, draft: &Draft, groups: &[(String, String)]) -> Markup {
    let kind = draft.text("kind");
    let component = draft.text("component");
    html! {
        h2 { "Upload an image" }
        form.stack method="post" action="/firmware" enctype="multipart/form-data" {
            (layout::csrf(viewer))
            label { "Kind"
                select name="kind" {
                    @for k in ["GO", "CORE", "PLUS"] { option value=(k) selected[kind == k] { (k) } }
                }
                (draft.errors_of("kind"))
            }
            label { "Component"
                select name="component" {
                    option value="app" selected[component != "platform"] { "app" }
                    option value="platform" selected[component == "platform"] { "platform" }
                }
                (draft.errors_of("component"))
            }
            label { "Version" input name="version" value=(draft.text("version")) required; (draft.errors_of("version")) }
            label { "Group"
                select name="id_group" {
                    @if viewer.caller.is_admin { option value="" { "Every group" } }
                    @for (id, label) in groups { option value=(id) selected[draft.text("id_group") == *id] { (label) } }
                }
                (draft.errors_of("id_group"))
            }
            label { "Image" input type="file" name="file" required; (draft.errors_of("file")) }
            button type="submit" { "Upload and sign" }
        }
    }
}

/// The images table and, for those who may, the form.
async fn list_page(state: &AppState, viewer: &Viewer, page: Option<i64>, draft: &Draft) -> PageResult<Markup> {
    let listing = store::list(&state.db, list_args(&viewer.caller, None, None, page, 50)).await?;
    let groups = manageable_groups(state, viewer).await?;
    let may_delete = |image: &FirmwareRow| match &image.id_group {
        None => viewer.caller.is_admin,
        Some(group) => viewer.caller.is_admin || viewer.caller.role_in_group(group) >= Some(Role::Manager),
    };
    Ok(html! {
        @if listing.items.is_empty() { p.muted { "No firmware images yet." } }
        @else {
            table {
                thead { tr { th { "Version" } th { "Kind" } th { "Component" } th { "For" } th { "Size" } th { "sha256" } th { "Uploaded" } th {} } }
                tbody {
                    @for image in &listing.items {
                        tr {
                            td { strong { (image.version) } }
                            td { (image.kind) }
                            td { (image.component) }
                            td { @match &image.id_group { Some(g) => a href=(format!("/groups/{g}")) { "its group" }, None => span.muted { "every group" } } }
                            td { (format::bytes(image.size)) }
                            td { code title=(image.sha256) { (image.sha256.get(..12).unwrap_or(&image.sha256)) "…" } }
                            td { (format::utc(Some(image.created_at))) }
                            td {
                                @if !groups.is_empty() {
                                    a href=(format!("/jobs?firmware={}", image.id_firmware)) { "Start a campaign" }
                                }
                                @if may_delete(image) {
                                    form.inline method="post" action=(format!("/firmware/{}/delete", image.id_firmware)) {
                                        (layout::csrf(viewer))
                                        button.danger type="submit" { "Delete" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            (pager(&listing.page, "/firmware"))
        }
        @if !groups.is_empty() || viewer.caller.is_admin { (form(viewer, draft, &groups)) }
    })
}

/// `GET /firmware`
pub async fn list(State(state): State<AppState>, viewer: Viewer, Query(q): Query<PageQuery>) -> PageResult {
    let content = list_page(&state, &viewer, q.page, &Draft::default()).await?;
    Ok(Html(
        layout::page(&viewer, Section::Firmware, "Firmware", content).into_string(),
    ))
}

/// `POST /firmware` (multipart): the list with the new image, or the form again with why.
pub async fn upload(
    State(state): State<AppState>,
    viewer: Viewer,
    multipart: Result<Multipart, MultipartRejection>,
) -> PageResult<Response> {
    let multipart = multipart
        .map_err(|_| ApiError::Status(StatusCode::UNSUPPORTED_MEDIA_TYPE, "The form must be multipart.".into()))?;
    // Checked before the file is received; refused, the upload is answered as every form
    // without its token is.
    let csrf_holds = |fields: &Map<String, serde_json::Value>| {
        let sent = fields.get(CSRF_FIELD).and_then(|v| v.as_str()).unwrap_or_default();
        match viewer.csrf_holds(sent) {
            true => Ok(()),
            false => Err(ApiError::Status(StatusCode::FORBIDDEN, String::new())),
        }
    };
    let (errors, mut values) = match receive(&state, &viewer.caller, multipart, csrf_holds).await {
        Ok(_) => return Ok(see_other("/firmware")),
        Err(Refused {
            error: ApiError::Validation(errors),
            fields,
        }) => (errors, fields),
        Err(Refused {
            error: ApiError::Status(StatusCode::FORBIDDEN, _),
            ..
        }) => return Err(PageError::Csrf),
        Err(refused) => return Err(ApiError::from(refused).into()),
    };
    // The file is not shown again; the other fields are.
    values.remove(CSRF_FIELD);
    let draft = Draft { values, errors };
    let content = list_page(&state, &viewer, None, &draft).await?;
    let page = layout::page(&viewer, Section::Firmware, "Firmware", content);
    Ok((StatusCode::UNPROCESSABLE_ENTITY, Html(page.into_string())).into_response())
}

/// `POST /firmware/<id>/delete`
pub async fn delete(State(state): State<AppState>, Path(id): Path<String>, posted: Posted) -> PageResult<Response> {
    service::delete(&state, &posted.viewer.caller, &id).await?;
    Ok(see_other("/firmware"))
}
