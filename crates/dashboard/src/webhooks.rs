//! The webhooks of the viewer's groups: list, create, edit, enable / disable, delete, and the
//! delivery attempts with their status codes. Every change goes through the service layer the
//! JSON API uses, with the form as its input, so validation (field errors, the private address
//! rule) and rights are the same; field errors come back on the form.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use devicecloud_query::SortKey;
use devicecloud_store::webhooks::{self as store, FORWARDING_TYPES};
use devicecloud_store::{ListArgs, unix_now};
use maud::{Markup, html};
use serde_json::{Map, Value, json};

use crate::format;
use crate::layout::{self, Section};
use crate::page::{
    Draft, PageError, PageQuery, PageResult, list_args, manageable_groups, page_request, pager, see_other,
};
use crate::sign_in::Posted;
use crate::viewer::Viewer;
use devicecloud_engine::auth::Role;
use devicecloud_engine::webhooks::format::FORMATTERS;
use devicecloud_web::http::error::ApiError;
use devicecloud_web::render::webhook_fields;
use devicecloud_web::service::webhooks as service;
use devicecloud_web::service::{ServiceError, access};
use devicecloud_web::state::AppState;

/// `GET /webhooks`
pub async fn list(State(state): State<AppState>, viewer: Viewer, Query(q): Query<PageQuery>) -> PageResult {
    let listing = store::list(&state.db, list_args(&viewer.caller, None, None, q.page, 50)).await?;
    let manages_any = !manageable_groups(&state, &viewer).await?.is_empty();
    let content = html! {
        @if manages_any { p { a href="/webhooks/new" { "New webhook" } } }
        @if listing.items.is_empty() { p.muted { "No webhooks in your groups." } }
        @else {
            table {
                thead { tr { th { "Label" } th { "Forwards" } th { "Formatter" } th { "URL" } th { "Active" } } }
                tbody {
                    @for w in &listing.items {
                        tr {
                            td { a href=(format!("/webhooks/{}", w.id_webhook)) { (w.label) } }
                            td { (w.forwarding_type) }
                            td { (w.formatter) }
                            td { code { (w.url) } }
                            td { @if w.is_active == 1 { span.status.on { "enabled" } } @else { span.status.off { "disabled" } } }
                        }
                    }
                }
            }
            (pager(&listing.page, "/webhooks"))
        }
    };
    Ok(Html(
        layout::page(&viewer, Section::Webhooks, "Webhooks", content).into_string(),
    ))
}

/// The create form (`existing: None`) or the edit form of a webhook.
fn form(viewer: &Viewer, draft: &Draft, groups: &[(String, String)], existing: Option<&str>) -> Markup {
    let action = existing.map_or_else(|| "/webhooks".to_string(), |id| format!("/webhooks/{id}"));
    // The API's record says 0 / 1, a submitted form true / false.
    let active = match draft.values.get("is_active") {
        Some(Value::Bool(on)) => *on,
        Some(Value::Number(n)) => n.as_i64() != Some(0),
        _ => true,
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
                label { "Forwards"
                    select name="forwarding_type" {
                        @for t in FORWARDING_TYPES { option value=(t) selected[draft.text("forwarding_type") == t] { (t) } }
                    }
                    (draft.errors_of("forwarding_type"))
                }
            }
            label { "Label" input name="label" value=(draft.text("label")) required; (draft.errors_of("label")) }
            label { "Formatter"
                select name="formatter" {
                    @for f in FORMATTERS { option value=(f.name) selected[draft.text("formatter") == f.name] { (f.name) " — " (f.description) } }
                }
                (draft.errors_of("formatter"))
            }
            label { "URL" input name="url" type="url" value=(draft.text("url")) required size="60"; (draft.errors_of("url")) }
            label { "Authorization header (sent verbatim; " @if existing.is_some() { "leave empty to keep the current one" } @else { "optional" } ")"
                input name="authorization" autocomplete="off"; (draft.errors_of("authorization")) }
            label { input type="checkbox" name="is_active" value="1" checked[active]; " Enabled" }
            button type="submit" { @if existing.is_some() { "Save" } @else { "Create webhook" } }
        }
    }
}

/// The JSON body of the API for a submitted form.
fn body_of(posted: &Posted, creating: bool) -> Map<String, Value> {
    let mut body = Map::new();
    let mut keys = vec!["label", "formatter", "url"];
    if creating {
        keys.extend(["id_group", "forwarding_type"]);
    }
    for key in keys {
        body.insert(key.into(), json!(posted.field(key)));
    }
    if !posted.field("authorization").is_empty() {
        body.insert("authorization".into(), json!(posted.field("authorization")));
    }
    body.insert("is_active".into(), json!(posted.field("is_active") == "1"));
    body
}

/// `GET /webhooks/new`
pub async fn new_form(State(state): State<AppState>, viewer: Viewer) -> PageResult {
    let groups = manageable_groups(&state, &viewer).await?;
    if groups.is_empty() {
        return Err(ApiError::forbidden().into());
    }
    let content = form(&viewer, &Draft::default(), &groups, None);
    Ok(Html(
        layout::page(&viewer, Section::Webhooks, "New webhook", content).into_string(),
    ))
}

/// `POST /webhooks`: shows the signing secret this once.
pub async fn create(State(state): State<AppState>, posted: Posted) -> PageResult<Response> {
    let body = body_of(&posted, true);
    let viewer = &posted.viewer;
    match service::create(&state, &viewer.caller, &body).await {
        Ok(created) => {
            let id = &created.row.id_webhook;
            let content = html! {
                p.notice { "The webhook was created. Its signing secret is shown this once: keep it to check "
                    code { "X-Devicecloud-Signature" } "." }
                p.secret { (created.secret) }
                p { a href=(format!("/webhooks/{id}")) { "Open the webhook →" } }
            };
            let page = layout::page(viewer, Section::Webhooks, "Webhook created", content);
            Ok((StatusCode::CREATED, Html(page.into_string())).into_response())
        }
        Err(ServiceError::Invalid(errors)) => {
            let groups = manageable_groups(&state, viewer).await?;
            let draft = Draft { values: body, errors };
            let content = form(viewer, &draft, &groups, None);
            let page = layout::page(viewer, Section::Webhooks, "New webhook", content);
            Ok((StatusCode::UNPROCESSABLE_ENTITY, Html(page.into_string())).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

/// The webhook page: fields, backlog, edit form for managers, the newest attempts.
async fn render_page(
    state: &AppState,
    viewer: &Viewer,
    id: &str,
    draft: Option<Draft>,
    page: Option<i64>,
) -> Result<Markup, PageError> {
    let row = access::webhook(state, &viewer.caller, id, Role::Viewer).await?;
    let (queued, pending, failed) = store::backlog(&state.db, id).await?;
    let mut record = webhook_fields(&row, &state.webhooks.vault);
    record.insert(
        "backlog".into(),
        json!({"queued_items": queued, "pending_deliveries": pending, "failed_deliveries": failed}),
    );
    let manager = viewer.caller.role_in_group(&row.id_group) >= Some(Role::Manager);
    let newest_first = SortKey::desc("id_attempt");
    let newest = ListArgs::unscoped(None, Some(&newest_first), page_request(page, 50), false);
    let attempts = store::attempts(&state.db, id, newest).await?;
    let active = row.is_active == 1;
    let draft = draft.unwrap_or_else(|| Draft {
        values: record.clone(),
        errors: Vec::new(),
    });
    let now = unix_now();
    Ok(html! {
        dl.fields {
            @for (key, value) in &record {
                dt { (key) }
                dd { @match value { Value::Null => span.muted { "null" }, Value::String(s) => (s), other => (other.to_string()) } }
            }
        }
        @if manager {
            h2 { "Change" }
            div.commands {
                form.inline method="post" action=(format!("/webhooks/{id}/toggle")) {
                    (layout::csrf(viewer))
                    button.secondary type="submit" { @if active { "Disable" } @else { "Enable" } }
                }
                form.inline method="post" action=(format!("/webhooks/{id}/delete")) {
                    (layout::csrf(viewer))
                    button.danger type="submit" { "Delete" }
                }
            }
            (form(viewer, &draft, &[], Some(id)))
        }
        h2 { "Delivery attempts" }
        @if attempts.items.is_empty() { p.muted { "No deliveries attempted yet." } }
        @else {
            table {
                thead { tr { th { "When" } th.num { "Status" } th.num { "Duration" } th.num { "Items" } th.num { "Try" } th { "Error" } } }
                tbody {
                    @for a in &attempts.items {
                        tr {
                            td title=(format::ago(Some(a.attempted_at), now)) { (format::utc(Some(a.attempted_at))) }
                            td.num { @match a.status_code { Some(code) if (200..300).contains(&code) => span.status.on { (code) },
                                Some(code) => span.status.alarm { (code) }, None => span.status.alarm { "no answer" } } }
                            td.num { (a.duration_ms) " ms" }
                            td.num { (a.item_count) }
                            td.num { (a.attempt) }
                            td { (a.error.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
            (pager(&attempts.page, &format!("/webhooks/{id}")))
        }
    })
}

/// `GET /webhooks/<id>`
pub async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> PageResult {
    let content = render_page(&state, &viewer, &id, None, q.page).await?;
    Ok(Html(
        layout::page(&viewer, Section::Webhooks, "Webhook", content).into_string(),
    ))
}

/// `POST /webhooks/<id>`: the edit form.
pub async fn update(State(state): State<AppState>, Path(id): Path<String>, posted: Posted) -> PageResult<Response> {
    let body = body_of(&posted, false);
    match service::update(&state, &posted.viewer.caller, &id, &body).await {
        Ok(_) => Ok(see_other(&format!("/webhooks/{id}"))),
        Err(ServiceError::Invalid(errors)) => {
            let draft = Draft { values: body, errors };
            let content = render_page(&state, &posted.viewer, &id, Some(draft), None).await?;
            let page = layout::page(&posted.viewer, Section::Webhooks, "Webhook", content);
            Ok((StatusCode::UNPROCESSABLE_ENTITY, Html(page.into_string())).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

/// `POST /webhooks/<id>/toggle`: enables a disabled webhook, disables an enabled one.
pub async fn toggle(State(state): State<AppState>, Path(id): Path<String>, posted: Posted) -> PageResult<Response> {
    service::toggle(&state, &posted.viewer.caller, &id).await?;
    Ok(see_other(&format!("/webhooks/{id}")))
}

/// `POST /webhooks/<id>/delete`
pub async fn delete(State(state): State<AppState>, Path(id): Path<String>, posted: Posted) -> PageResult<Response> {
    service::delete(&state, &posted.viewer.caller, &id).await?;
    Ok(see_other("/webhooks"))
}
