//! The command panel of a device page and `POST /devices/<id>/command`, which runs the
//! API's own command handler for the chosen command (same rights, validation, routing,
//! timeout and event record) and shows the device's answer as a table.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, Response};
use devicecloud_store::devices::DeviceRow;
use maud::{Markup, html};
use serde_json::{Value, json};

use super::PageError;
use super::layout::{self, Section};
use super::series::DatatypeName;
use super::session::{Posted, Viewer};
use crate::error::ApiError;
use crate::http::commands;
use crate::state::AppState;

/// Whether the device is a Z-wave node behind a gateway (what `DELETE …/zwave-node` accepts).
fn is_zwave_node(device: &DeviceRow) -> bool {
    device.id_parent.is_some() && matches!(device.id_device_type.to_ascii_lowercase().as_str(), "zwave" | "asset")
}

/// One command button (with its extra inputs) posting to the device's command route.
fn form(viewer: &Viewer, id: &str, command: &str, label: &str, inputs: Markup) -> Markup {
    html! {
        form.inline method="post" action=(format!("/devices/{id}/command")) data-async {
            (layout::csrf(viewer))
            input type="hidden" name="command" value=(command);
            (inputs)
            button type="submit" name="run" value=(command) { (label) }
        }
    }
}

/// The panel shown to operators.
pub fn panel(viewer: &Viewer, device: &DeviceRow, names: &HashMap<i64, DatatypeName>) -> Markup {
    let id = device.id_physical_device.as_str();
    let gateway = device.id_parent.is_none();
    let go = device.kind.as_deref() == Some("GO");
    let mut registers: Vec<(&i64, &DatatypeName)> = names.iter().collect();
    registers.sort_by_key(|(d, _)| **d);
    html! {
        div.commands {
            (form(viewer, id, "ping", "Ping", html! {}))
            @if gateway {
                (form(viewer, id, "status", "Self-test", html! {}))
                (form(viewer, id, "request-measurement", "Request measurement", html! {}))
                (form(viewer, id, "restart", "Restart", html! {}))
                @if !go {
                    (form(viewer, id, "wifi-scan", "Wi-Fi scan", html! {}))
                    (form(viewer, id, "wifi-connect", "Wi-Fi connect", html! {
                        input name="ssid" placeholder="SSID" aria-label="SSID";
                        input name="password" type="password" placeholder="Password" aria-label="Wi-Fi password";
                    }))
                    (form(viewer, id, "wifi-disconnect", "Wi-Fi disconnect", html! {}))
                }
                (form(viewer, id, "reset-main-counter", "Reset main counter", html! {}))
                (form(viewer, id, "reset-daily-counter", "Reset daily counter", html! {}))
                (form(viewer, id, "modbus-write", "Modbus write", html! {
                    @if registers.is_empty() {
                        input name="datatype" placeholder="datatype" aria-label="Datatype" size="8";
                    } @else {
                        select name="datatype" aria-label="Datatype" {
                            @for (datatype, name) in &registers { option value=(datatype) { (datatype) " · " (name.label) } }
                        }
                    }
                    input name="value" placeholder="value" aria-label="Value" size="8";
                }))
            }
            @if is_zwave_node(device) {
                (form(viewer, id, "zwave-exclude", "Exclude Z-wave node", html! {}))
            }
        }
        div #command-result role="status" {}
    }
}

/// A JSON value as nested tables: objects as key/value rows, lists of objects as one table
/// with a column per key.
pub fn json_table(value: &Value) -> Markup {
    match value {
        Value::Object(map) => html! {
            table { tbody { @for (k, v) in map { tr { th { (k) } td { (json_table(v)) } } } } }
        },
        Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object) => {
            let mut columns: Vec<&String> = Vec::new();
            for item in items.iter().filter_map(Value::as_object) {
                for k in item.keys() {
                    if !columns.contains(&k) {
                        columns.push(k);
                    }
                }
            }
            html! {
                table {
                    thead { tr { @for c in &columns { th { (c) } } } }
                    tbody { @for item in items { tr { @for c in &columns { td { (json_table(item.get(c.as_str()).unwrap_or(&Value::Null))) } } } } }
                }
            }
        }
        Value::Array(items) => html! { @for (i, v) in items.iter().enumerate() { @if i > 0 { ", " } (json_table(v)) } },
        Value::String(s) => html! { (s) },
        Value::Null => html! { span.muted { "null" } },
        other => html! { (other.to_string()) },
    }
}

/// A number where the text is one, else the text itself (the API then names the error).
fn number_or_text(text: &str) -> Value {
    if let Ok(i) = text.parse::<i64>() {
        return json!(i);
    }
    text.parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .map_or_else(|| json!(text), |f| json!(f))
}

/// Runs the API handler of `command`.
async fn call(state: &AppState, viewer: &Viewer, id: &str, command: &str, form: &Posted) -> Result<Response, ApiError> {
    let (s, c, p) = (State(state.clone()), viewer.caller.clone(), Path(id.to_string()));
    match command {
        "ping" => commands::ping(s, c, p).await,
        "restart" => commands::restart(s, c, p).await,
        "status" => commands::status(s, c, p).await,
        "request-measurement" => commands::request_measurement(s, c, p).await,
        "wifi-scan" => commands::wifi_scan(s, c, p).await,
        "wifi-disconnect" => commands::wifi_disconnect(s, c, p).await,
        "wifi-connect" => {
            let mut body = json!({"ssid": form.field("ssid")});
            if !form.raw_field("password").is_empty() {
                body["password"] = json!(form.raw_field("password"));
            }
            commands::wifi_connect(s, c, p, Bytes::from(body.to_string())).await
        }
        "reset-main-counter" => commands::reset_main_counter(s, c, p).await,
        "reset-daily-counter" => commands::reset_daily_counter(s, c, p).await,
        "modbus-write" => {
            let body = json!({"datatype": number_or_text(form.field("datatype")), "value": number_or_text(form.field("value"))});
            commands::modbus_write(s, c, p, Bytes::from(body.to_string())).await
        }
        "zwave-exclude" => commands::zwave_node(s, c, p).await,
        other => Err(ApiError::BadRequest(format!("Unknown command: {other}"))),
    }
}

/// The outcome as a person reads it: what the device answered, or why it could not.
async fn outcome(command: &str, result: Result<Response, ApiError>) -> Result<Markup, PageError> {
    let (status, body) = match result {
        Ok(response) => {
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), 4 * 1024 * 1024)
                .await
                .map_err(|e| ApiError::Internal(e.to_string()))?;
            (status, serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null))
        }
        // Rights and absence are the page's refusal, as for any other page.
        Err(e @ (ApiError::Unauthorized(_) | ApiError::NotFound(_) | ApiError::Internal(_))) => return Err(e.into()),
        Err(e) => {
            let status = match &e {
                ApiError::Status(status, _) => *status,
                _ => StatusCode::BAD_REQUEST,
            };
            (status, json!({"message": e.to_string()}))
        }
    };
    let ok = status.is_success()
        && body
            .get("status")
            .and_then(Value::as_i64)
            .is_none_or(|s| (200..300).contains(&s));
    Ok(html! {
        div.card {
            p class=(if ok { "" } else { "error" }) {
                strong { (command) } ": "
                @if ok { "done" } @else { "failed" }
                " (HTTP " (status.as_u16()) @if let Some(s) = body.get("status").and_then(Value::as_i64) { ", device status " (s) } ")"
            }
            @match body.get("payload") {
                Some(payload) => (json_table(payload)),
                None => (json_table(&body)),
            }
        }
    })
}

/// `POST /devices/<id>/command`: the answer alone for the page's script (`X-Fragment`), or a
/// page with the answer when the browser runs no script.
pub async fn run(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    posted: Posted,
) -> Result<Response, PageError> {
    let command = posted.field("command").to_string();
    let result = call(&state, &posted.viewer, &id, &command, &posted).await;
    let markup = outcome(&command, result).await?;
    let fragment = headers.get("x-fragment").is_some();
    let body = if fragment {
        markup.into_string()
    } else {
        let content = html! { (markup) p { a href=(format!("/devices/{id}")) { "← Back to the device" } } };
        layout::page(&posted.viewer, Section::Fleet, "Command", content).into_string()
    };
    Ok(axum::response::IntoResponse::into_response(Html(body)))
}
