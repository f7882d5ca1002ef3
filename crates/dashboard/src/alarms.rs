//! Alarms and alarm rules in the dashboard (docs/dashboard.md, "Alarms"): the open alarms first,
//! with an acknowledge button for operators; the rules of the viewer's groups, created and edited
//! with a live check of their conditions, disabled, deleted. Every change goes through the service
//! layer the JSON API uses, with the form as its input, so the same conditions are refused with the
//! same words.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use devicecloud_store::alarm_rules::{self, RuleRow};
use devicecloud_store::alarms::{self, ATTRIBUTES, AlarmRow};
use devicecloud_store::unix_now;
use maud::{Markup, html};
use serde_json::{Map, Value, json};

use crate::format;
use crate::layout::{self, Section};
use crate::page::{Draft, PageError, PageQuery, PageResult, filter, list_args, manageable_groups, pager, see_other};
use crate::sign_in::Posted;
use crate::viewer::Viewer;
use devicecloud_engine::auth::Role;
use devicecloud_web::http::error::ApiError;
use devicecloud_web::service::ServiceError;
use devicecloud_web::service::alarms::{self as service, SEVERITIES};
use devicecloud_web::state::AppState;

/// The alarms not cleared that `condition` (the API's filter grammar) selects among the viewer's
/// groups, newest first, with an acknowledge button where the viewer is an operator; `back` is
/// where an acknowledgement returns to.
pub(crate) async fn open_alarms(
    state: &AppState,
    viewer: &Viewer,
    mut condition: Map<String, Value>,
    back: &str,
) -> Result<Markup, PageError> {
    condition.insert("status".into(), json!({"in": ["active", "acknowledged"]}));
    let open = filter(&Value::Object(condition), &ATTRIBUTES)?;
    let listing = alarms::list(&state.db, list_args(&viewer.caller, open.as_ref(), None, Some(1), 100)).await?;
    Ok(html! {
        @if listing.items.is_empty() { p.muted { "No open alarm." } }
        @else { (table(viewer, &listing.items, back)) }
    })
}

/// Every alarm of a device, newest first: its history.
pub(crate) async fn history(state: &AppState, viewer: &Viewer, device: &str) -> Result<Markup, PageError> {
    let of_device = filter(&json!({"source_device": device}), &ATTRIBUTES)?;
    let listing = alarms::list(
        &state.db,
        list_args(&viewer.caller, of_device.as_ref(), None, Some(1), 50),
    )
    .await?;
    Ok(html! {
        @if listing.items.is_empty() { p.muted { "No alarm so far." } }
        @else { (table(viewer, &listing.items, &format!("/devices/{device}"))) }
    })
}

fn table(viewer: &Viewer, rows: &[AlarmRow], back: &str) -> Markup {
    let now = unix_now();
    html! {
        table.alarms {
            thead { tr { th { "Severity" } th { "Status" } th { "Device" } th.num { "Datatype" } th.num { "Value" } th.num { "Matches" } th { "Raised" } th { "Rule" } th {} } }
            tbody {
                @for a in rows {
                    tr {
                        td { span class=(format!("severity {}", a.severity)) { (a.severity) } }
                        td { (status(&a.status)) }
                        td { a href=(format!("/devices/{}", a.source_device)) { (short(&a.source_device)) } }
                        td.num { @match a.datatype { Some(d) => (d), None => span.muted { "any" } } }
                        td.num { @match a.value { Some(v) => (format::number(v)), None => span.muted { "silent" } } }
                        td.num { (a.count) }
                        td title=(format::utc(Some(a.raised_at))) { (format::ago(Some(a.raised_at), now)) }
                        td { a href=(format!("/alarm-rules/{}", a.id_alarm_rule)) { "rule" } }
                        td {
                            @if a.acknowledged_at.is_none() && viewer.caller.role_in_group(&a.id_group) >= Some(Role::Operator) {
                                form.inline method="post" action=(format!("/alarms/{}/acknowledge", a.id_alarm)) {
                                    (layout::csrf(viewer))
                                    input type="hidden" name="back" value=(back);
                                    button.secondary type="submit" { "Acknowledge" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn status(status: &str) -> Markup {
    html! {
        @match status {
            "active" => span.status.alarm { "active" },
            "acknowledged" => span.status.warn { "acknowledged" },
            other => span.status.off { (other) },
        }
    }
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// `GET /alarms`: the open alarms of the viewer's groups, then the newest cleared ones.
pub async fn list(State(state): State<AppState>, viewer: Viewer, Query(q): Query<PageQuery>) -> PageResult {
    let open = open_alarms(&state, &viewer, Map::new(), "/alarms").await?;
    let cleared_only = filter(&json!({"status": "cleared"}), &ATTRIBUTES)?;
    let cleared = alarms::list(
        &state.db,
        list_args(&viewer.caller, cleared_only.as_ref(), None, q.page, 50),
    )
    .await?;
    let content = html! {
        p { a href="/alarm-rules" { "Alarm rules →" } }
        h2 { "Open" }
        (open)
        h2 { "Cleared" }
        @if cleared.items.is_empty() { p.muted { "None yet." } }
        @else {
            (table(&viewer, &cleared.items, "/alarms"))
            (pager(&cleared.page, "/alarms"))
        }
    };
    Ok(Html(
        layout::page(&viewer, Section::Alarms, "Alarms", content).into_string(),
    ))
}

/// `POST /alarms/<id>/acknowledge`: back to the page it was pressed on.
pub async fn acknowledge(
    State(state): State<AppState>,
    Path(id): Path<String>,
    posted: Posted,
) -> PageResult<Response> {
    service::acknowledge(&state, &posted.viewer.caller, &id).await?;
    let back = posted.field("back");
    // Only a path of this site (browsers read `/\host` as `//host`).
    let back = if back.starts_with('/') && !back.starts_with("//") && !back.starts_with("/\\") {
        back
    } else {
        "/alarms"
    };
    Ok(see_other(back))
}

/// `GET /alarm-rules`
pub async fn rules(State(state): State<AppState>, viewer: Viewer, Query(q): Query<PageQuery>) -> PageResult {
    let listing = alarm_rules::list(&state.db, list_args(&viewer.caller, None, None, q.page, 50)).await?;
    let manages_any = !manageable_groups(&state, &viewer).await?.is_empty();
    let content = html! {
        @if manages_any { p { a href="/alarm-rules/new" { "New rule" } } }
        @if listing.items.is_empty() { p.muted { "No alarm rules in your groups." } }
        @else {
            table {
                thead { tr { th { "Label" } th { "Severity" } th { "Raises when" } th.num { "Datatype" } th { "Active" } } }
                tbody {
                    @for r in &listing.items {
                        tr {
                            td { a href=(format!("/alarm-rules/{}", r.id_alarm_rule)) { (r.label) } }
                            td { span class=(format!("severity {}", r.severity)) { (r.severity) } }
                            td { (describe(r)) }
                            td.num { @match r.datatype { Some(d) => (d), None => span.muted { "any" } } }
                            td { @if r.is_active == 1 { span.status.on { "enabled" } } @else { span.status.off { "disabled" } } }
                        }
                    }
                }
            }
            (pager(&listing.page, "/alarm-rules"))
        }
    };
    Ok(Html(
        layout::page(&viewer, Section::Alarms, "Alarm rules", content).into_string(),
    ))
}

/// What a rule raises on, in a few words.
fn describe(rule: &RuleRow) -> Markup {
    html! {
        @match (&rule.condition, rule.inactivity_s) {
            (Some(c), _) => {
                code { (c) }
                @if rule.for_s > 0 { " for " (rule.for_s) " s" }
            },
            (None, Some(s)) => { "no point for " (s) " s" },
            (None, None) => span.muted { "—" },
        }
    }
}

/// The create form (`existing: None`) or the edit form of a rule. The condition fields are
/// checked as they are typed (`data-check`, by `/assets/dashboard.js`).
fn form(viewer: &Viewer, draft: &Draft, groups: &[(String, String)], existing: Option<&str>) -> Markup {
    let action = existing.map_or_else(|| "/alarm-rules".to_string(), |id| format!("/alarm-rules/{id}"));
    let active = match draft.values.get("is_active") {
        Some(Value::Bool(on)) => *on,
        Some(Value::Number(n)) => n.as_i64() != Some(0),
        _ => true,
    };
    let number = |key: &str| match draft.values.get(key) {
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    };
    html! {
        form.stack method="post" action=(action) {
            (layout::csrf(viewer))
            @if existing.is_none() {
                label { "Group"
                    select name="id_group" {
                        @for (id, label) in groups { option value=(id) selected[draft.text("id_group") == *id] { (label) } }
                    }
                    (draft.errors_of("id_group"))
                }
            }
            label { "Label" input name="label" value=(draft.text("label")) required; (draft.errors_of("label")) }
            label { "Severity"
                select name="severity" {
                    @for s in SEVERITIES { option value=(s) selected[draft.text("severity") == s] { (s) } }
                }
                (draft.errors_of("severity"))
            }
            label { "Condition (CEL over value, previous, rate, datatype, serial; e.g. value > 30.0)"
                textarea name="condition" rows="2" data-check="1" { (draft.text("condition")) }
                span.check aria-live="polite" {}
                (draft.errors_of("condition"))
            }
            label { "Clear condition (optional; default: the condition no longer holds)"
                textarea name="clear_condition" rows="2" data-check="1" { (draft.text("clear_condition")) }
                span.check aria-live="polite" {}
                (draft.errors_of("clear_condition"))
            }
            label { "Or: raise when no point comes for this many seconds (instead of a condition)"
                input name="inactivity_s" type="number" min="1" value=(number("inactivity_s")); (draft.errors_of("inactivity_s")) }
            label { "Datatype (optional)" input name="datatype" type="number" min="0" value=(number("datatype")); (draft.errors_of("datatype")) }
            label { "Source device id (optional)" input name="source_device" value=(draft.text("source_device")); (draft.errors_of("source_device")) }
            label { "Hold for seconds before raising" input name="for_s" type="number" min="0" value=(number("for_s")); (draft.errors_of("for_s")) }
            label.check { input type="checkbox" name="is_active" value="1" checked[active]; " Enabled" }
            button type="submit" { @if existing.is_some() { "Save" } @else { "Create rule" } }
        }
    }
}

/// The JSON body of the API for a submitted form: an empty field is null (cleared, or left at its
/// default for a new rule).
fn body_of(posted: &Posted, creating: bool) -> Map<String, Value> {
    let mut body = Map::new();
    let mut keys = vec![
        "label",
        "severity",
        "condition",
        "clear_condition",
        "inactivity_s",
        "datatype",
        "source_device",
        "for_s",
    ];
    if creating {
        keys.push("id_group");
    }
    for key in keys {
        let value = posted.field(key);
        body.insert(key.into(), if value.is_empty() { Value::Null } else { json!(value) });
    }
    body.insert("is_active".into(), json!(posted.field("is_active") == "1"));
    body
}

/// `GET /alarm-rules/new`
pub async fn new_form(State(state): State<AppState>, viewer: Viewer) -> PageResult {
    let groups = manageable_groups(&state, &viewer).await?;
    if groups.is_empty() {
        return Err(ApiError::forbidden().into());
    }
    let content = form(&viewer, &Draft::default(), &groups, None);
    Ok(Html(
        layout::page(&viewer, Section::Alarms, "New alarm rule", content).into_string(),
    ))
}

/// `POST /alarm-rules`
pub async fn create(State(state): State<AppState>, posted: Posted) -> PageResult<Response> {
    let body = body_of(&posted, true);
    let viewer = &posted.viewer;
    match service::create(&state, &viewer.caller, &body).await {
        Ok(rule) => Ok(see_other(&format!("/alarm-rules/{}", rule.id_alarm_rule))),
        Err(ServiceError::Invalid(errors)) => {
            let groups = manageable_groups(&state, viewer).await?;
            let draft = Draft { values: body, errors };
            let content = form(viewer, &draft, &groups, None);
            let page = layout::page(viewer, Section::Alarms, "New alarm rule", content);
            Ok((StatusCode::UNPROCESSABLE_ENTITY, Html(page.into_string())).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

/// A rule's page: what it raises on, its open alarms, and for managers the edit form.
async fn render_rule(state: &AppState, viewer: &Viewer, id: &str, draft: Option<Draft>) -> Result<Markup, PageError> {
    let rule = service::get_rule(state, &viewer.caller, id, Role::Viewer).await?;
    let manager = viewer.caller.role_in_group(&rule.id_group) >= Some(Role::Manager);
    let mut of_rule = Map::new();
    of_rule.insert("id_alarm_rule".into(), json!(id));
    let open = open_alarms(state, viewer, of_rule, &format!("/alarm-rules/{id}")).await?;
    let values = match serde_json::to_value(RuleFields::from(&rule)) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let draft = draft.unwrap_or(Draft {
        values,
        errors: Vec::new(),
    });
    Ok(html! {
        p { "Raises " span class=(format!("severity {}", rule.severity)) { (rule.severity) } " when " (describe(&rule)) "." }
        h2 { "Open alarms" }
        (open)
        @if manager {
            h2 { "Change" }
            div.commands {
                form.inline method="post" action=(format!("/alarm-rules/{id}/toggle")) {
                    (layout::csrf(viewer))
                    button.secondary type="submit" { @if rule.is_active == 1 { "Disable" } @else { "Enable" } }
                }
                form.inline method="post" action=(format!("/alarm-rules/{id}/delete")) {
                    (layout::csrf(viewer))
                    button.danger type="submit" { "Delete" }
                }
            }
            (form(viewer, &draft, &[], Some(id)))
        }
    })
}

/// A rule's fields as its form shows them.
#[derive(serde::Serialize)]
struct RuleFields<'a> {
    label: &'a str,
    severity: &'a str,
    condition: Option<&'a str>,
    clear_condition: Option<&'a str>,
    inactivity_s: Option<i64>,
    datatype: Option<i64>,
    source_device: Option<&'a str>,
    for_s: Option<i64>,
    is_active: bool,
}

impl<'a> From<&'a RuleRow> for RuleFields<'a> {
    fn from(r: &'a RuleRow) -> Self {
        RuleFields {
            label: &r.label,
            severity: &r.severity,
            condition: r.condition.as_deref(),
            clear_condition: r.clear_condition.as_deref(),
            inactivity_s: r.inactivity_s,
            datatype: r.datatype,
            source_device: r.source_device.as_deref(),
            for_s: (r.for_s > 0).then_some(r.for_s),
            is_active: r.is_active == 1,
        }
    }
}

/// `GET /alarm-rules/<id>`
pub async fn rule_page(State(state): State<AppState>, viewer: Viewer, Path(id): Path<String>) -> PageResult {
    let content = render_rule(&state, &viewer, &id, None).await?;
    Ok(Html(
        layout::page(&viewer, Section::Alarms, "Alarm rule", content).into_string(),
    ))
}

/// `POST /alarm-rules/<id>`: the edit form.
pub async fn update(State(state): State<AppState>, Path(id): Path<String>, posted: Posted) -> PageResult<Response> {
    let body = body_of(&posted, false);
    match service::update(&state, &posted.viewer.caller, &id, &body).await {
        Ok(_) => Ok(see_other(&format!("/alarm-rules/{id}"))),
        Err(ServiceError::Invalid(errors)) => {
            let draft = Draft { values: body, errors };
            let content = render_rule(&state, &posted.viewer, &id, Some(draft)).await?;
            let page = layout::page(&posted.viewer, Section::Alarms, "Alarm rule", content);
            Ok((StatusCode::UNPROCESSABLE_ENTITY, Html(page.into_string())).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

/// `POST /alarm-rules/<id>/toggle`: disables an enabled rule (its open alarms clear), enables a
/// disabled one.
pub async fn toggle(State(state): State<AppState>, Path(id): Path<String>, posted: Posted) -> PageResult<Response> {
    let rule = service::get_rule(&state, &posted.viewer.caller, &id, Role::Manager).await?;
    let mut body = Map::new();
    body.insert("is_active".into(), Value::Bool(rule.is_active != 1));
    service::update(&state, &posted.viewer.caller, &id, &body).await?;
    Ok(see_other(&format!("/alarm-rules/{id}")))
}

/// `POST /alarm-rules/<id>/delete`
pub async fn delete(State(state): State<AppState>, Path(id): Path<String>, posted: Posted) -> PageResult<Response> {
    service::delete(&state, &posted.viewer.caller, &id).await?;
    Ok(see_other("/alarm-rules"))
}

/// The text a condition field is checked with as it is typed.
#[derive(serde::Deserialize)]
pub struct Check {
    #[serde(default)]
    condition: String,
}

/// `GET /alarm-rules/check?condition=…`: 200 "compiles" or 422 with where and why, as the rule's
/// save would answer (a condition changes nothing: a GET).
pub async fn check(_viewer: Viewer, Query(q): Query<Check>) -> Response {
    if q.condition.trim().is_empty() {
        return (StatusCode::OK, "").into_response();
    }
    match service::check_condition(&q.condition) {
        Ok(()) => (StatusCode::OK, "✓ compiles").into_response(),
        Err(message) => (StatusCode::UNPROCESSABLE_ENTITY, message).into_response(),
    }
}
