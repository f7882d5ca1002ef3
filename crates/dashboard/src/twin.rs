//! A device's twin on its page (docs/api.md, "Twins"): desired, reported and the delta that is
//! still missing, highlighted; operators edit the whole desired document, saved through the
//! service layer the JSON API uses (as the merge patch that turns the current document into the
//! edited one, at the version shown, so an edit over someone else's change is refused).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use devicecloud_protocol::twin;
use devicecloud_store::twins::TwinRow;
use maud::{Markup, html};
use serde_json::Value;

use crate::format;
use crate::layout::{self, Section};
use crate::page::{PageResult, see_other};
use crate::sign_in::Posted;
use crate::viewer::Viewer;
use devicecloud_web::service::{ServiceError, twins as service};
use devicecloud_web::state::AppState;

/// A document, indented.
fn pretty(document: &serde_json::Map<String, Value>) -> String {
    serde_json::to_string_pretty(document).unwrap_or_default()
}

/// The twin panel; `editable` for operators, with `draft` (text and why it was refused) after a
/// refused edit.
pub fn panel(viewer: &Viewer, row: &TwinRow, editable: bool, draft: Option<(&str, &str)>) -> Markup {
    let id = &row.id_physical_device;
    let desired = twin::document(&row.desired);
    let reported = twin::document(&row.reported);
    let delta = twin::delta(&desired, &reported);
    let applied = row.reported_version.map_or("none yet".to_string(), |v| v.to_string());
    html! {
        section #twin {
            p {
                @if delta.is_empty() { span.status.on { "in sync" } } @else { span.status.alarm { "not in sync" } }
                " "
                span.muted {
                    "desired version " (row.version) " · applied " (applied)
                    " · desired changed " (format::utc(row.desired_updated_at))
                    " · reported " (format::utc(row.reported_updated_at))
                }
            }
            div.twin {
                div {
                    h3 { "Desired" }
                    @if editable {
                        form method="post" action=(format!("/devices/{id}/twin")) {
                            (layout::csrf(viewer))
                            input type="hidden" name="version" value=(row.version);
                            @if let Some((_, why)) = draft { p.error { (why) } }
                            textarea name="desired" rows="10" aria-label="Desired document (JSON)" {
                                (draft.map_or_else(|| pretty(&desired), |(text, _)| text.to_string()))
                            }
                            button type="submit" { "Save desired" }
                        }
                    } @else {
                        pre { (pretty(&desired)) }
                    }
                }
                div {
                    h3 { "Reported" }
                    pre { (pretty(&reported)) }
                }
                div {
                    h3 { "Delta" }
                    @if delta.is_empty() {
                        p.muted { "Nothing: the device reported everything desired." }
                    } @else {
                        pre.delta { (pretty(&delta)) }
                    }
                }
            }
        }
    }
}

/// `POST /devices/<id>/twin`: saves the edited desired document, then back to the device; an
/// edit that is not a JSON object, breaks the limits or comes after another change is shown
/// again with why.
pub async fn update(State(state): State<AppState>, Path(id): Path<String>, posted: Posted) -> PageResult<Response> {
    let text = posted.field("desired").to_string();
    let version = posted.field("version").parse::<i64>().unwrap_or(-1);
    let refused = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(document)) => {
            match service::replace(&state, &posted.viewer.caller, &id, &document, version).await {
                Ok(_) => return Ok(see_other(&format!("/devices/{id}#twin"))),
                Err(ServiceError::Invalid(errors)) => {
                    errors.iter().map(|e| e.message.clone()).collect::<Vec<_>>().join(" ")
                }
                Err(ServiceError::Conflict(message)) => message,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(_) => "The desired document must be a JSON object.".to_string(),
        Err(e) => format!("The desired document is not JSON: {e}."),
    };
    let row = service::get(&state, &posted.viewer.caller, &id).await?;
    let content = html! {
        (panel(&posted.viewer, &row, true, Some((&text, &refused))))
        p { a href=(format!("/devices/{id}")) { "← Back to the device" } }
    };
    let page = layout::page(&posted.viewer, Section::Fleet, "Twin", content);
    Ok((StatusCode::UNPROCESSABLE_ENTITY, Html(page.into_string())).into_response())
}
