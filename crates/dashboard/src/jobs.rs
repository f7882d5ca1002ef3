//! Jobs (docs/api.md, "Jobs"): the list with each job's progress and, for managers, a form to
//! create one over a group or a device filter; a job's page with its counts, its executions and
//! a cancel button. Every change goes through the service layer the JSON API uses.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use devicecloud_protocol::CommandMethod;
use devicecloud_store::ListArgs;
use devicecloud_store::firmware::{self, FirmwareRow};
use devicecloud_store::jobs::{self as store, JobRow};
use maud::{Markup, html};
use serde_json::{Map, Value, json};

use crate::format;
use crate::layout::{self, Section};
use crate::page::{Draft, PageQuery, PageResult, list_args, manageable_groups, page_request, pager, see_other};
use crate::sign_in::Posted;
use crate::viewer::Viewer;
use devicecloud_engine::auth::Role;
use devicecloud_web::http::error::FieldError;
use devicecloud_web::service::{ServiceError, jobs as service};
use devicecloud_web::state::AppState;

/// A job's progress at a glance: the counts that are not zero.
fn progress(job: &JobRow) -> Markup {
    let parts = [
        ("succeeded", job.succeeded),
        ("failed", job.failed),
        ("timed out", job.timed_out),
        ("cancelled", job.cancelled),
        ("in progress", job.in_progress),
        ("pending", job.pending),
    ];
    html! {
        progress value=(job.total - job.pending - job.in_progress) max=(job.total.max(1)) {}
        " "
        span.muted {
            @for (i, (label, n)) in parts.iter().filter(|(_, n)| *n > 0).enumerate() {
                @if i > 0 { " · " }
                (n) " " (label)
            }
            " of " (job.total)
        }
    }
}

/// A job's or an execution's status as a badge.
pub(crate) fn badge(status: &str) -> Markup {
    let class = match status {
        "succeeded" => "on",
        "failed" | "aborted" | "expired" | "timed_out" => "alarm",
        _ => "off",
    };
    html! { span class=(format!("status {class}")) { (status.replace('_', " ")) } }
}

/// The create form.
fn form(viewer: &Viewer, draft: &Draft, groups: &[(String, String)], images: &[FirmwareRow]) -> Markup {
    let kind = draft.text("kind");
    let method = draft.text("method");
    let image = draft.text("id_firmware");
    html! {
        h2 { "New job" }
        form.stack method="post" action="/jobs" {
            (layout::csrf(viewer))
            label { "Label" input name="label" value=(draft.text("label")) required; (draft.errors_of("label")) }
            label { "Group"
                select name="id_group" {
                    @for (id, label) in groups { option value=(id) selected[draft.text("id_group") == *id] { (label) } }
                }
            }
            label { "Or a device filter (JSON, as the API's target filter; it replaces the group)"
                textarea name="filter" rows="2" placeholder=r#"{"id_group": "…", "kind": "PLUS"}"# { (draft.text("filter")) }
                (draft.errors_of("target"))
            }
            label { "Operation"
                select name="kind" {
                    option value="command" selected[kind != "twin" && kind != "firmware"] { "Command" }
                    option value="twin" selected[kind == "twin"] { "Desired configuration (twin patch)" }
                    option value="firmware" selected[kind == "firmware"] { "Firmware update (a campaign)" }
                }
            }
            label { "Firmware image (for a firmware update: gateways of its kind in the target get it)"
                select name="id_firmware" {
                    option value="" { "—" }
                    @for i in images {
                        option value=(i.id_firmware) selected[image == i.id_firmware] { (i.kind) " " (i.component) " " (i.version) }
                    }
                }
            }
            label { "Command"
                select name="method" {
                    @for m in CommandMethod::ALL { option value=(m.as_str()) selected[method == m.as_str()] { (m.as_str()) } }
                }
            }
            label { "Parameters of the command, or the twin patch (JSON object)"
                textarea name="document" rows="3" placeholder=r#"{"reporting_interval_s": 60}"# { (draft.text("document")) }
                (draft.errors_of("operation"))
            }
            label { "Starts per minute" input name="rate_per_minute" value=(draft.text("rate_per_minute")) placeholder="6000"; (draft.errors_of("rate_per_minute")) }
            label { "Abort past this share of failures (%)" input name="max_failures_percent" value=(draft.text("max_failures_percent")) placeholder="100"; (draft.errors_of("max_failures_percent")) }
            label { "Seconds per device" input name="timeout_s" value=(draft.text("timeout_s")) placeholder="60 (firmware: 900)"; (draft.errors_of("timeout_s")) }
            button type="submit" { "Start the job" }
        }
    }
}

/// The jobs table and, for managers, the form.
async fn list_page(state: &AppState, viewer: &Viewer, page: Option<i64>, draft: &Draft) -> PageResult<Markup> {
    let args: ListArgs = list_args(&viewer.caller, None, None, page, 50);
    let listing = store::list(&state.db, args).await?;
    let groups = manageable_groups(state, viewer).await?;
    // The images a campaign may install, for the form (shown to managers only).
    let images = match groups.is_empty() {
        true => Vec::new(),
        false => {
            firmware::list(&state.db, list_args(&viewer.caller, None, None, Some(1), 100))
                .await?
                .items
        }
    };
    Ok(html! {
        @if listing.items.is_empty() { p.muted { "No jobs in your groups yet." } }
        @else {
            table {
                thead { tr { th { "Label" } th { "Status" } th { "Progress" } th { "Created" } } }
                tbody {
                    @for job in &listing.items {
                        tr {
                            td { a href=(format!("/jobs/{}", job.id_job)) { (job.label) } }
                            td { (badge(&job.status)) }
                            td { (progress(job)) }
                            td { (format::utc(Some(job.created_at))) }
                        }
                    }
                }
            }
            (pager(&listing.page, "/jobs"))
        }
        @if !groups.is_empty() { (form(viewer, draft, &groups, &images)) }
    })
}

/// The query of the jobs page: its page, and an image to start a campaign with (the firmware
/// page's link).
#[derive(serde::Deserialize)]
pub struct JobsQuery {
    #[serde(default, deserialize_with = "crate::page::lenient_page")]
    page: Option<i64>,
    firmware: Option<String>,
}

/// `GET /jobs`
pub async fn list(State(state): State<AppState>, viewer: Viewer, Query(q): Query<JobsQuery>) -> PageResult {
    let mut draft = Draft::default();
    if let Some(image) = q.firmware {
        draft.values.insert("kind".into(), json!("firmware"));
        draft.values.insert("id_firmware".into(), json!(image));
    }
    let content = list_page(&state, &viewer, q.page, &draft).await?;
    Ok(Html(
        layout::page(&viewer, Section::Jobs, "Jobs", content).into_string(),
    ))
}

/// The API's body from the form, or the field errors of what does not read as JSON.
fn body_of(posted: &Posted) -> (Map<String, Value>, Vec<FieldError>) {
    let mut errors = Vec::new();
    let mut body = Map::new();
    let object = |text: &str, field: &str, errors: &mut Vec<FieldError>| -> Option<Value> {
        if text.trim().is_empty() {
            return Some(json!({}));
        }
        match serde_json::from_str::<Value>(text) {
            Ok(value @ Value::Object(_)) => Some(value),
            _ => {
                errors.push(FieldError::new(field, "Must be a JSON object."));
                None
            }
        }
    };
    body.insert("label".into(), json!(posted.field("label")));
    let filter = posted.field("filter");
    let target = if filter.trim().is_empty() {
        Some(json!({"id_group": posted.field("id_group")}))
    } else {
        object(filter, "target", &mut errors)
    };
    if let Some(filter) = target {
        body.insert("target".into(), json!({"filter": filter}));
    }
    if posted.field("kind") == "firmware" {
        body.insert("operation".into(), json!({"firmware": posted.field("id_firmware")}));
    } else if let Some(document) = object(posted.field("document"), "operation", &mut errors) {
        let operation = if posted.field("kind") == "twin" {
            json!({"twin": document})
        } else {
            json!({"command": posted.field("method"), "params": document})
        };
        body.insert("operation".into(), operation);
    }
    for key in ["rate_per_minute", "max_failures_percent", "timeout_s"] {
        let text = posted.field(key).trim();
        if !text.is_empty() {
            body.insert(key.into(), json!(text));
        }
    }
    (body, errors)
}

/// `POST /jobs`: the new job's page, or the form again with why.
pub async fn create(State(state): State<AppState>, posted: Posted) -> PageResult<Response> {
    let viewer = &posted.viewer;
    let (body, mut errors) = body_of(&posted);
    if errors.is_empty() {
        match service::create(&state, &viewer.caller, &body).await {
            Ok(job) => return Ok(see_other(&format!("/jobs/{}", job.id_job))),
            Err(ServiceError::Invalid(invalid)) => errors = invalid,
            Err(e) => return Err(e.into()),
        }
    }
    let mut values = Map::new();
    for key in [
        "label",
        "id_group",
        "filter",
        "kind",
        "method",
        "id_firmware",
        "document",
        "rate_per_minute",
        "max_failures_percent",
        "timeout_s",
    ] {
        values.insert(key.into(), json!(posted.field(key)));
    }
    let draft = Draft { values, errors };
    let content = list_page(&state, viewer, None, &draft).await?;
    let page = layout::page(viewer, Section::Jobs, "Jobs", content);
    Ok((StatusCode::UNPROCESSABLE_ENTITY, Html(page.into_string())).into_response())
}

/// `GET /jobs/<id>`
pub async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> PageResult {
    let job = service::get(&state, &viewer.caller, &id, Role::Viewer).await?;
    let may_cancel = service::get(&state, &viewer.caller, &id, Role::Manager).await.is_ok()
        && job.finished_at.is_none()
        && matches!(job.status.as_str(), "queued" | "in_progress");
    let args = ListArgs {
        scope: viewer.caller.group_scope(),
        filter: None,
        sort: None,
        page: page_request(q.page, 100),
        count_only: false,
    };
    let executions = store::executions(&state.db, &id, args).await?;
    let failures = store::updates::failures(&state.db, &id).await?;
    let content = html! {
        p { (badge(&job.status)) " " (progress(&job)) }
        dl.fields {
            dt { "Operation" } dd { code { (job.operation) } }
            dt { "Target" } dd { code { (job.target) } }
            dt { "Created" } dd { (format::utc(Some(job.created_at))) }
            dt { "Started" } dd { (format::utc(job.started_at)) }
            dt { "Finished" } dd { (format::utc(job.finished_at)) }
            dt { "Pace" } dd { (job.rate_per_minute) " a minute, " (job.timeout_s) " s per device, abort past " (job.max_failures_percent) " % failures" }
            dt { "Expires" } dd { (format::utc(Some(job.expires_at))) }
        }
        @if may_cancel {
            form method="post" action=(format!("/jobs/{id}/cancel")) {
                (layout::csrf(&viewer))
                button.danger type="submit" { "Cancel the pending executions" }
            }
        }
        @if !failures.is_empty() {
            h2 { "Failures by cause" }
            table {
                thead { tr { th { "Devices" } th { "Status" } th { "Answer" } } }
                tbody {
                    @for (status, result, n) in &failures {
                        tr {
                            td { (n) }
                            td { (badge(status)) }
                            td { @match result { Some(r) => code { (r) }, None => span.muted { "no answer" } } }
                        }
                    }
                }
            }
        }
        h2 { "Executions" }
        table {
            thead { tr { th { "Device" } th { "Status" } th { "Attempts" } th { "Finished" } th { "Answer" } } }
            tbody {
                @for e in &executions.items {
                    tr {
                        td { a href=(format!("/devices/{}", e.id_physical_device)) { code { (e.id_physical_device.get(..8).unwrap_or(&e.id_physical_device)) } } }
                        td { (badge(&e.status)) }
                        td { (e.attempts) }
                        td { (format::utc(e.finished_at)) }
                        td { @if let Some(result) = &e.result { code { (result) } } }
                    }
                }
            }
        }
        (pager(&executions.page, &format!("/jobs/{id}")))
    };
    Ok(Html(
        layout::page(&viewer, Section::Jobs, &job.label, content).into_string(),
    ))
}

/// `POST /jobs/<id>/cancel`
pub async fn cancel(State(state): State<AppState>, Path(id): Path<String>, posted: Posted) -> PageResult<Response> {
    service::cancel(&state, &posted.viewer.caller, &id).await?;
    Ok(see_other(&format!("/jobs/{id}")))
}
