//! `GET /devices/<id>/live` and `GET /groups/<id>/live`: the live stream (docs/api.md, "Live
//! stream") for the dashboard's pages, signed in with the session cookie. The device page gets
//! its latest values, new events and command outcomes; a group page its events and command
//! outcomes. Each record comes as the page shows it, formatted here, so that the page's script
//! only puts it in place; the event ids are the stream's, so a browser that reconnects by
//! itself (with `Last-Event-ID`) misses nothing the node still holds.
//!
//! The events sent, each with a JSON body:
//! - `latest` `{datatype, value, measured, measured_utc}`: a new value of one of the device's
//!   series;
//! - `event` `{html}`: a row of the events table;
//! - `command` `{html}`: an item of the command outcomes' list;
//! - `overflow` `{}`: records were lost (the page reloads what it shows), then the end.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use devicecloud_store::unix_now;
use maud::{Markup, html};
use serde_json::{Value, json};

use crate::events::{self, Line};
use crate::format;
use crate::page::PageError;
use crate::page::PageResult;
use crate::viewer::Viewer;
use devicecloud_engine::auth::Role;
use devicecloud_engine::stream::ring::{Kind, Record};
use devicecloud_web::http::stream::client::{Client, Credential, Next, Request};
use devicecloud_web::service::access;
use devicecloud_web::state::AppState;

/// `GET /devices/<id>/live`: the device's own values, events and command outcomes.
pub async fn device(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> PageResult<Response> {
    let rights_seen = state.auth.changes();
    let device = access::device(&state, &viewer.caller, &id, Role::Viewer).await?;
    let groups = vec![device.id_group];
    Ok(open(
        state,
        viewer,
        &headers,
        groups,
        Some(id),
        Kind::ALL.to_vec(),
        rights_seen,
    ))
}

/// `GET /groups/<id>/live`: the events and command outcomes of every device of the group.
pub async fn group(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> PageResult<Response> {
    let rights_seen = state.auth.changes();
    devicecloud_web::service::access::group(&state, &viewer.caller, &id, Role::Viewer).await?;
    let kinds = vec![Kind::Event, Kind::Command];
    Ok(open(state, viewer, &headers, vec![id], None, kinds, rights_seen))
}

/// The stream of a viewer whose rights to `groups` were just checked. A `Last-Event-ID` that
/// is no id of this node's stream (a restart) starts from the newest record: the page it
/// belongs to was loaded before, and reloads what it shows on `overflow` only.
fn open(
    state: AppState,
    viewer: Viewer,
    headers: &HeaderMap,
    groups: Vec<String>,
    device: Option<String>,
    kinds: Vec<Kind>,
    rights_seen: u64,
) -> Response {
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|id| state.stream.parse_id(id));
    let max = state.settings.limits.streams_per_account;
    let slot = match state.stream.accounts.reserve(&viewer.caller.id_user, max) {
        Ok(slot) => slot,
        Err(full) => return PageError::Api(full.into()).into_response(),
    };
    let request = Request {
        credential: Credential::Session(viewer.session_hash),
        groups,
        device,
        kinds,
        resume,
    };
    Client::new(state, request, rights_seen, slot).into_response(event)
}

fn event(next: Next) -> Event {
    match next {
        Next::Record(record, id) => {
            let (name, body) = shown(&record);
            Event::default().event(name).id(id).data(body.to_string())
        }
        Next::Heartbeat => Event::default().comment("heartbeat"),
        Next::Overflow(id) => Event::default().event("overflow").id(id).data("{}"),
    }
}

/// The event name and body of a record as the page shows it.
fn shown(record: &Record) -> (&'static str, Value) {
    let data: Value = serde_json::from_str(&record.data).unwrap_or_default();
    let now = unix_now();
    match record.kind {
        Kind::Measurement => {
            let measured = data["timestamp_seconds"].as_i64();
            let body = json!({
                "datatype": data["datatype"],
                "value": format::number(data["value"].as_f64().unwrap_or(f64::NAN)),
                "measured": format::ago(measured, now),
                "measured_utc": format::utc(measured),
            });
            ("latest", body)
        }
        Kind::Event => ("event", json!({ "html": event_row(&data, now).into_string() })),
        Kind::Command => ("command", json!({ "html": command_item(&data).into_string() })),
        Kind::Twin => ("twin", data),
        Kind::Alarm => ("alarm", data),
    }
}

/// An event record (the `event` endpoint's fields) as a row of the events table.
fn event_row(data: &Value, now: i64) -> Markup {
    let text = |key: &str| data[key].as_str().unwrap_or_default();
    events::row(
        &Line {
            occurred_at: data["occurred_at"].as_i64().unwrap_or_default(),
            source_device: text("source_device"),
            event_type: text("event_type"),
            type_label: text("event_type_label"),
            value: text("value"),
            value_label: text("event_value_label"),
            value_description: text("event_value_description"),
        },
        now,
    )
}

/// A command outcome as an item of the outcomes' list: what, to which device, how it ended,
/// how long it took.
fn command_item(data: &Value) -> Markup {
    let device = data["id_physical_device"].as_str().unwrap_or_default();
    let status = match (&data["reason"], &data["device_status"]) {
        (Value::String(reason), _) => format!("{} ({reason})", data["status"]),
        (_, Value::Number(n)) => format!("status {n}"),
        _ => format!("status {}", data["status"]),
    };
    html! {
        li {
            (format::utc(data["requested_at"].as_i64())) " · "
            strong { (data["method"].as_str().unwrap_or_default()) } " to "
            a href=(format!("/devices/{device}")) { code { (device.get(..8).unwrap_or(device)) } }
            " · " (status) " · " (data["duration_ms"]) " ms"
        }
    }
}
