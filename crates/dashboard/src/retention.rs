//! A group's retention in the dashboard: `GET /groups/<id>/retention` shows how many days the
//! group keeps raw points and each rollup, to every member; managers change it there (`POST`),
//! through the operation behind `PUT /api/v2/group/<id>/retention`, so the API's rules hold
//! (docs/operations.md, "Retention").

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use devicecloud_store::groups::GroupRow;
use devicecloud_store::retention::Retention;
use maud::{Markup, html};
use serde_json::{Map, Value, json};

use crate::layout::{self, Section};
use crate::page::{PageError, field_errors};
use crate::sign_in::Posted;
use crate::viewer::Viewer;
use devicecloud_engine::auth::Role;
use devicecloud_web::http::error::FieldError;
use devicecloud_web::service::retention::{FIELDS, MAX_DAYS};
use devicecloud_web::service::{ServiceError, retention as service};
use devicecloud_web::state::AppState;

/// The heading of each field, in the record's order.
const HEADINGS: [&str; 4] = ["Raw points", "Minute rollups", "Hour rollups", "Day rollups"];

/// Days as words: `30 days`, `forever`.
pub fn days(value: Option<i64>) -> String {
    match value {
        None => "forever".into(),
        Some(1) => "1 day".into(),
        Some(n) => format!("{n} days"),
    }
}

/// The days `kept` of each kind, in the record's order.
fn values(kept: &Retention) -> [Option<i64>; 4] {
    FIELDS.map(|(_, kind)| kind.days(kept))
}

/// One line for the group page: what the group keeps.
pub fn summary(kept: &Retention) -> String {
    let values = values(kept);
    HEADINGS
        .iter()
        .zip(values)
        .map(|(heading, value)| format!("{} {}", heading.to_lowercase(), days(value)))
        .collect::<Vec<_>>()
        .join(" · ")
}

async fn render(
    state: &AppState,
    viewer: &Viewer,
    group: &GroupRow,
    notice: Option<&str>,
    errors: &[FieldError],
) -> Result<Markup, PageError> {
    let values = values(&service::in_force(state, &group.id_group).await?);
    let manager = viewer.caller.role_in(group).is_some_and(|r| r >= Role::Manager);
    Ok(html! {
        p.muted { a href=(format!("/groups/{}", group.id_group)) { "← " (group.label) } }
        @if let Some(notice) = notice { p.notice role="status" { (notice) } }
        @if manager {
            form.stack method="post" action=(format!("/groups/{}/retention", group.id_group)) {
                (layout::csrf(viewer))
                @for ((field, _), (heading, value)) in FIELDS.iter().zip(HEADINGS.iter().zip(values)) {
                    label { (heading) " kept, in days (empty: forever)"
                        input name=(field) type="number" min="1" max=(MAX_DAYS)
                            value=(value.map(|v| v.to_string()).unwrap_or_default());
                        (field_errors(errors, field)) }
                }
                button type="submit" { "Save retention" }
            }
        } @else {
            dl.fields {
                @for (heading, value) in HEADINGS.iter().zip(values) {
                    dt { (heading) } dd { (days(value)) }
                }
            }
            p.muted { "Managers of the group change its retention." }
        }
        p.muted { "A day kept is a whole UTC day before today; older data is removed within the retention interval. "
            "A data session whose points go is marked archived; its record stays." }
    })
}

fn respond(viewer: &Viewer, status: StatusCode, group: &GroupRow, content: Markup) -> Response {
    let title = format!("Retention of {}", group.label);
    let page = layout::page(viewer, Section::Fleet, &title, content);
    (status, Html(page.into_string())).into_response()
}

/// `GET /groups/<id>/retention`
pub async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let group = devicecloud_web::service::access::group(&state, &viewer.caller, &id, Role::Viewer).await?;
    let content = render(&state, &viewer, &group, None, &[]).await?;
    Ok(respond(&viewer, StatusCode::OK, &group, content))
}

/// `POST /groups/<id>/retention`: the four fields, each days or empty (forever); the page again
/// with a notice, or with the field errors (422).
pub async fn update(
    State(state): State<AppState>,
    Path(id): Path<String>,
    posted: Posted,
) -> Result<Response, PageError> {
    let viewer = &posted.viewer;
    let input: Map<String, Value> = FIELDS
        .iter()
        .filter_map(|(field, _)| posted.fields.get(*field).map(|v| (field.to_string(), json!(v.trim()))))
        .collect();
    let result = service::put(&state, &viewer.caller, &id, &input).await;
    let group = devicecloud_web::service::access::group(&state, &viewer.caller, &id, Role::Viewer).await?;
    match result {
        Ok(_) => {
            let content = render(&state, viewer, &group, Some("Retention saved."), &[]).await?;
            Ok(respond(viewer, StatusCode::OK, &group, content))
        }
        Err(ServiceError::Invalid(errors)) => {
            let content = render(&state, viewer, &group, None, &errors).await?;
            Ok(respond(viewer, StatusCode::UNPROCESSABLE_ENTITY, &group, content))
        }
        Err(e) => Err(e.into()),
    }
}
