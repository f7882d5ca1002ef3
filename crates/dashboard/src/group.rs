//! `GET /groups/<id>`: the devices of a group, a page at a time, sortable by the columns, and
//! its events: the newest ones, then (with scripts) new events and command outcomes as they
//! happen, from the live stream.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::response::{Html, Response};
use devicecloud_query::{CompareOp, Filter, Param, Scalar, parse_sort};
use devicecloud_store::device_collection::{self, ATTRIBUTES, SORTABLE};
use devicecloud_store::devices::DeviceRow;
use devicecloud_store::event_collection::{self, ATTRIBUTES as EVENT_ATTRIBUTES};
use devicecloud_store::unix_now;
use maud::html;
use serde_json::json;

use crate::format;
use crate::layout::{self, Section};
use crate::page::{PageError, filter, list_args, pager, role_name, status_badge};
use crate::viewer::Viewer;
use crate::{alarms, device, events, retention};
use devicecloud_engine::auth::Role;
use devicecloud_web::render::export_response;
use devicecloud_web::service::export::Format;
use devicecloud_web::state::AppState;

/// Devices per page.
const PER_PAGE: u64 = 50;

/// The newest events shown before live ones come in.
const EVENTS: u64 = 10;

#[derive(serde::Deserialize)]
pub struct GroupQuery {
    page: Option<i64>,
    sort: Option<String>,
}

/// The sortable columns: (attribute, heading).
const COLUMNS: [(&str, &str); 7] = [
    ("label", "Label"),
    ("serial_hardware", "Serial"),
    ("kind", "Kind"),
    ("device_status", "Status"),
    ("last_data_at", "Last data"),
    ("signal", "Signal"),
    ("id_parent", "Behind gateway"),
];

pub async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
    Query(q): Query<GroupQuery>,
) -> Result<Html<String>, PageError> {
    let group = devicecloud_web::service::access::group(&state, &viewer.caller, &id, Role::Viewer).await?;
    let sort_param = q.sort.clone().map(Param::Scalar);
    let sort = parse_sort(sort_param.as_ref(), SORTABLE);
    let condition = filter(&json!({"id_group": id, "archived_at": null}), &ATTRIBUTES)?;
    let listing = device_collection::list(
        &state.db,
        list_args(&viewer.caller, condition.as_ref(), sort.as_ref(), q.page, PER_PAGE),
    )
    .await?;
    // Devices behind a gateway are online while their gateway is.
    let parent_ids: Vec<&str> = listing.items.iter().filter_map(|d| d.id_parent.as_deref()).collect();
    let gateways: HashMap<String, i64> = device_collection::devices(&state.db, &parent_ids)
        .await?
        .into_iter()
        .map(|g| (g.id_physical_device, g.is_connected))
        .collect();
    let connected = |d: &DeviceRow| {
        d.id_parent
            .as_ref()
            .and_then(|p| gateways.get(p).copied())
            .unwrap_or(d.is_connected)
    };
    let events_filter = filter(&json!({"id_group": id}), &EVENT_ATTRIBUTES)?;
    let recent = event_collection::list(
        &state.db,
        list_args(&viewer.caller, events_filter.as_ref(), None, Some(1), EVENTS),
    )
    .await?;
    let kept = devicecloud_web::service::retention::in_force(&state, &id).await?;
    let mut of_group = serde_json::Map::new();
    of_group.insert("id_group".into(), json!(id));
    let open = alarms::open_alarms(&state, &viewer, of_group, &format!("/groups/{id}")).await?;
    let now = unix_now();
    let current = q.sort.as_deref().unwrap_or("");
    let base = format!("/groups/{id}{}", format::query(&[("sort", current)]));
    let content = html! {
        div hidden data-live=(format!("/groups/{id}/live")) {}
        p.muted { (group.r#type) " · " (listing.page.total) " devices · your role: "
            (role_name(&viewer.caller, &group.id_group)) }
        p.muted { "Keeps " (retention::summary(&kept)) " · "
            a href=(format!("/groups/{id}/retention")) { "retention" } " · export all points as "
            a href=(format!("/groups/{id}/export?format=csv")) download { "CSV" } " or "
            a href=(format!("/groups/{id}/export?format=parquet")) download { "Parquet" } }
        h2 { "Open alarms" }
        (open)
        h2 { "Devices" }
        table {
            thead { tr {
                @for (attr, heading) in COLUMNS {
                    @let next = if current == attr { format!("-{attr}") } else { attr.to_string() };
                    th { a href=(format!("/groups/{id}?sort={next}")) { (heading)
                        @if current == attr { " ▲" } @else if current.strip_prefix('-') == Some(attr) { " ▼" } } }
                }
            } }
            tbody {
                @for d in &listing.items {
                    tr {
                        td { a href=(format!("/devices/{}", d.id_physical_device)) { @if d.label.is_empty() { (d.serial_hardware) } @else { (d.label) } } }
                        td { code { (d.serial_hardware) } }
                        td { (d.kind.as_deref().unwrap_or(&d.id_device_type)) }
                        td { (status_badge(connected(d), d.device_status)) }
                        td title=(format::utc(format::known(d.last_data_at))) { (format::ago(format::known(d.last_data_at), now)) }
                        td.num { (d.signal) }
                        td { @if let Some(parent) = &d.id_parent { a href=(format!("/devices/{parent}")) { "gateway" } } }
                    }
                }
            }
        }
        (pager(&listing.page, &base))
        h2 { "Events" }
        (events::table(&recent.items, now))
        p { a href="/events" { "All events →" } }
        (device::live_commands())
    };
    Ok(Html(
        layout::page(&viewer, Section::Fleet, &group.label, content).into_string(),
    ))
}

/// What `GET /groups/<id>/export` takes: `format`, `csv` (the default) or `parquet`.
#[derive(Debug, Default, serde::Deserialize)]
pub struct ExportQuery {
    format: Option<String>,
}

/// `GET /groups/<id>/export`: every raw point of the group, oldest first, as the API's export
/// streams it (docs/api.md, "Export"), for the signed-in viewer.
pub async fn export(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
    Query(q): Query<ExportQuery>,
) -> Result<Response, PageError> {
    devicecloud_web::service::access::group(&state, &viewer.caller, &id, Role::Viewer).await?;
    let format = match q.format.as_deref() {
        Some("parquet") => Format::Parquet,
        _ => Format::Csv,
    };
    let group = Filter::Compare {
        attr: "id_group",
        op: CompareOp::Eq,
        value: Scalar::Str(id),
    };
    let body = devicecloud_web::service::export::export(&state, &viewer.caller, Some(&group), format).await?;
    Ok(export_response(body))
}
