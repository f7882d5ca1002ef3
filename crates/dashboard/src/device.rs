//! `GET /devices/<id>`: one device — status, latest values, charts of its downsampled data over
//! 1 h … 1 year, the command panel for operators, its children, its newest events, and every
//! field of its record. With scripts, the latest values, new events and command outcomes come
//! in as they happen (`live`), and the latest values are polled while the stream is not open.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::response::Html;
use devicecloud_store::chart_series::{self, Columns};
use devicecloud_store::device_collection::{self, ATTRIBUTES as DEVICE_ATTRIBUTES, DeviceDocuments, LatestRow};
use devicecloud_store::devices::{self, DeviceRow};
use devicecloud_store::downsampled::Resolution;
use devicecloud_store::event_collection::{self, ATTRIBUTES as EVENT_ATTRIBUTES};
use devicecloud_store::{groups, unix_now};
use maud::{Markup, html};
use serde_json::{Value, json};

use crate::chart::{self, Chart, Point};
use crate::device_commands::{self, json_table};
use crate::format;
use crate::layout::{self, Section};
use crate::page::{PageError, PageResult, filter, list_args, status_badge};
use crate::series::{DatatypeName, datatype_names, datatype_title};
use crate::viewer::Viewer;
use crate::{alarms, events};
use devicecloud_engine::auth::Role;
use devicecloud_web::render::device_fields;
use devicecloud_web::service::access;
use devicecloud_web::state::AppState;

/// The chart ranges offered, with their length in seconds.
pub const RANGES: [(&str, &str, i64); 5] = [
    ("1h", "1 hour", 3600),
    ("1d", "1 day", 86_400),
    ("1w", "1 week", 7 * 86_400),
    ("3w", "3 weeks", 21 * 86_400),
    ("1y", "1 year", 366 * 86_400),
];

#[derive(serde::Deserialize)]
pub struct DeviceQuery {
    range: Option<String>,
}

/// The device's own documents (last self-test, template) and the datatype names of its Modbus
/// template, else its gateway's: one query for both.
pub(super) async fn documents(
    state: &AppState,
    device: &DeviceRow,
) -> Result<(Option<DeviceDocuments>, HashMap<i64, DatatypeName>), PageError> {
    let mut ids = vec![device.id_physical_device.as_str()];
    ids.extend(device.id_parent.as_deref());
    let docs: Vec<DeviceDocuments> = device_collection::documents(&state.db, &ids).await?;
    let names_of = |id: &str| {
        datatype_names(
            docs.iter()
                .find(|d| d.id_physical_device == id)
                .and_then(|d| d.modbus_template_json.as_deref()),
        )
    };
    let mut names = names_of(&device.id_physical_device);
    if names.is_empty()
        && let Some(parent) = &device.id_parent
    {
        names = names_of(parent);
    }
    let own = docs
        .into_iter()
        .find(|d| d.id_physical_device == device.id_physical_device);
    Ok((own, names))
}

fn latest_table(rows: &[LatestRow], names: &HashMap<i64, DatatypeName>, now: i64) -> Markup {
    html! {
        @if rows.is_empty() { p.muted { "No measurements yet." } }
        @else {
            table {
                thead { tr { th { "Datatype" } th.num { "Value" } th { "Unit" } th { "Measured" } } }
                tbody {
                    @for r in rows {
                        tr data-datatype=(r.datatype) {
                            td { (datatype_title(names, r.datatype)) }
                            td.num.value { (format::number(r.latest_value)) }
                            td { (names.get(&r.datatype).map_or("", |n| n.unit.as_str())) }
                            td.measured title=(format::utc(Some(r.latest_seconds))) { (format::ago(Some(r.latest_seconds), now)) }
                        }
                    }
                }
            }
        }
    }
}

/// Where the live stream lists command outcomes as they come (whoever sent the command);
/// shown from the first one.
pub(super) fn live_commands() -> Markup {
    html! {
        section hidden data-live-commands {
            h2 { "Command outcomes" }
            ul.outcomes {}
        }
    }
}

/// `GET /devices/<id>/latest`: the latest-values table alone, for the in-place refresh.
pub async fn latest(State(state): State<AppState>, viewer: Viewer, Path(id): Path<String>) -> PageResult {
    let device = access::device(&state, &viewer.caller, &id, Role::Viewer).await?;
    let rows = device_collection::latest_of_devices(&state.db, &[id.as_str()]).await?;
    let (_, names) = documents(&state, &device).await?;
    Ok(Html(latest_table(&rows, &names, unix_now()).into_string()))
}

/// The charts of the device's own series over the range, at the API's resolution for it.
async fn charts(
    state: &AppState,
    device: &DeviceRow,
    names: &HashMap<i64, DatatypeName>,
    range_s: i64,
    now: i64,
) -> Result<Markup, PageError> {
    let from = now - range_s;
    let resolution = Resolution::between(Some(from as f64), None, now as f64);
    let step = resolution.bucket_seconds().map(|s| s as f64);
    let columns = Columns {
        from,
        to: now,
        count: chart::COLUMNS,
    };
    let rows = chart_series::device_points(
        &state.db,
        &device.id_group,
        &device.id_physical_device,
        columns,
        resolution,
    )
    .await?;
    Ok(html! {
        @if rows.is_empty() { p.muted { "No data in this range." } }
        div.grid {
            @for series in rows.chunk_by(|a, b| a.datatype == b.datatype) {
                @let datatype = series[0].datatype;
                @let points: Vec<Point> = series.iter().map(|p| Point { t: p.t, min: p.min, max: p.max, avg: p.avg }).collect();
                div.card {
                    (chart::render(&Chart {
                        title: &datatype_title(names, datatype),
                        unit: names.get(&datatype).map(|n| n.unit.as_str()),
                        from: from as f64,
                        to: now as f64,
                        step,
                        points: &points,
                    }))
                }
            }
        }
    })
}

pub async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
    Query(q): Query<DeviceQuery>,
) -> PageResult {
    let device = access::device(&state, &viewer.caller, &id, Role::Viewer).await?;
    let now = unix_now();
    let range = q.range.as_deref().unwrap_or("1d");
    let (range_key, _, range_s) = RANGES.iter().copied().find(|r| r.0 == range).unwrap_or(RANGES[1]);
    let group = groups::get(&state.db, &device.id_group).await?;
    let (info, names) = documents(&state, &device).await?;
    let latest_rows = device_collection::latest_of_devices(&state.db, &[id.as_str()]).await?;
    let children_filter = filter(&json!({"id_parent": id, "archived_at": null}), &DEVICE_ATTRIBUTES)?;
    let children = device_collection::list(
        &state.db,
        list_args(&viewer.caller, children_filter.as_ref(), None, Some(1), 200),
    )
    .await?;
    let events_filter = filter(&json!({"source_device": id}), &EVENT_ATTRIBUTES)?;
    let recent = event_collection::list(
        &state.db,
        list_args(&viewer.caller, events_filter.as_ref(), None, Some(1), 10),
    )
    .await?;
    let charts = charts(&state, &device, &names, range_s, now).await?;
    let connected = match &device.id_parent {
        Some(parent) => devices::get(&state.db, parent).await?.map_or(0, |g| g.is_connected),
        None => device.is_connected,
    };
    let may_command = viewer.caller.role_in_group(&device.id_group) >= Some(Role::Operator);
    let twin = devicecloud_store::twins::get(&state.db, &id).await?;
    let updates = match device.id_parent {
        None => devicecloud_store::jobs::updates::history(&state.db, &id, 20).await?,
        Some(_) => Vec::new(),
    };
    let alarm_history = alarms::history(&state, &viewer, &id).await?;
    let title = if device.label.is_empty() {
        device.serial_hardware.clone()
    } else {
        device.label.clone()
    };
    let content = html! {
        div hidden data-live=(format!("/devices/{id}/live")) {}
        p {
            (status_badge(connected, device.device_status)) " "
            span.muted {
                (device.kind.as_deref().unwrap_or(&device.id_device_type)) " · serial " code { (device.serial_hardware) } " · group "
                @if let Some(g) = &group { a href=(format!("/groups/{}", g.id_group)) { (g.label) } }
                @if let Some(parent) = &device.id_parent { " · behind " a href=(format!("/devices/{parent}")) { "its gateway" } }
                " · last data " (format::ago(format::known(device.last_data_at), now))
            }
        }
        h2 { "Alarms" }
        (alarm_history)
        h2 { "Latest values" }
        div #latest data-refresh=(format!("/devices/{id}/latest")) data-every="15" { (latest_table(&latest_rows, &names, now)) }
        h2 { "Charts" }
        nav.ranges {
            @for (key, label, _) in RANGES {
                a href=(format!("/devices/{id}?range={key}")) class=[(key == range_key).then_some("active")] { (label) }
            }
        }
        (charts)
        @if may_command {
            h2 { "Commands" }
            (device_commands::panel(&viewer, &device, &names))
        }
        (live_commands())
        @if let Some(twin) = &twin {
            h2 { "Configuration (twin)" }
            (crate::twin::panel(&viewer, twin, may_command, None))
        }
        @if device.id_parent.is_none() {
            h2 { "Firmware" }
            p {
                "platform " code { (device.platform_software_version) } " · app " code { (device.app_software_version) }
            }
            @if !updates.is_empty() {
                table {
                    thead { tr { th { "Campaign" } th { "Image" } th { "Status" } th { "Started" } th { "Finished" } th { "Outcome" } } }
                    tbody {
                        @for u in &updates {
                            tr {
                                td { a href=(format!("/jobs/{}", u.id_job)) { (u.label) } }
                                td { (u.component.as_deref().unwrap_or("")) " " (u.version.as_deref().unwrap_or("(deleted)")) }
                                td { (crate::jobs::badge(&u.status)) }
                                td { (format::utc(u.started_at)) }
                                td { (format::utc(u.finished_at)) }
                                td { @if let Some(r) = &u.result { code { (r) } } }
                            }
                        }
                    }
                }
            }
        }
        @if !children.items.is_empty() {
            h2 { "Devices behind this gateway" }
            table {
                thead { tr { th { "Label" } th { "Serial" } th { "Type" } th { "Status" } th { "Last data" } } }
                tbody {
                    @for c in &children.items {
                        tr {
                            td { a href=(format!("/devices/{}", c.id_physical_device)) { @if c.label.is_empty() { (c.serial_hardware) } @else { (c.label) } } }
                            td { code { (c.serial_hardware) } }
                            td { (c.id_device_type) }
                            td { (status_badge(device.is_connected, c.device_status)) }
                            td { (format::ago(format::known(c.last_data_at), now)) }
                        }
                    }
                }
            }
        }
        h2 { "Events" }
        (events::table(&recent.items, now))
        p { a href=(format!("/events{}", format::query(&[("device", &id)]))) { "All events of this device →" } }
        @if let Some(payload) = info.as_ref().and_then(|d| d.device_info_json.as_deref()).and_then(|j| serde_json::from_str::<Value>(j).ok()) {
            h2 { "Last self-test" }
            p.muted { (format::utc(info.as_ref().and_then(|d| d.device_info_at))) }
            (json_table(&payload))
        }
        h2 { "All fields" }
        dl.fields {
            @for (key, value) in device_fields(&device) {
                dt { (key) }
                dd { @match value { Value::Null => span.muted { "null" }, Value::String(s) => (s), other => (other.to_string()) } }
            }
        }
    };
    Ok(Html(
        layout::page(&viewer, Section::Fleet, &title, content).into_string(),
    ))
}
