//! The command panel of a device page and `POST /devices/<id>/command`, which sends the chosen
//! command through the service layer the JSON API uses (same rights, validation, routing,
//! timeout and event record) and shows the device's answer as a table.

use std::collections::HashMap;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{Html, IntoResponse, Response};
use devicecloud_protocol::{CommandMethod, CommandRequest, CommandResponse};
use devicecloud_store::devices::DeviceRow;
use maud::{Markup, html};
use serde_json::{Map, Value, json};

use crate::layout::{self, Section};
use crate::page::{PageError, PageResult};
use crate::series::DatatypeName;
use crate::sign_in::Posted;
use crate::viewer::Viewer;
use devicecloud_web::http::commands::device_answer;
use devicecloud_web::http::error::ApiError;
use devicecloud_web::service::ServiceError;
use devicecloud_web::service::commands as service;
use devicecloud_web::state::AppState;

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
            @if service::Target::is_zwave_node(device) {
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

/// The command request the form asks for, built as the JSON API builds it (same validation).
fn request(target: &service::Target, command: &str, form: &Posted) -> Result<CommandRequest, ServiceError> {
    let simple = match command {
        "ping" => CommandMethod::Ping,
        "restart" => CommandMethod::Restart,
        "status" => CommandMethod::Status,
        "request-measurement" => CommandMethod::RequestMeasurement,
        "wifi-scan" => CommandMethod::WifiScan,
        "wifi-disconnect" => CommandMethod::WifiDisconnect,
        "reset-main-counter" => CommandMethod::ResetMainCounter,
        "reset-daily-counter" => CommandMethod::ResetDailyCounter,
        "wifi-connect" => {
            let mut input = Map::new();
            input.insert("ssid".into(), json!(form.field("ssid")));
            if !form.raw_field("password").is_empty() {
                input.insert("password".into(), json!(form.raw_field("password")));
            }
            return service::wifi_connect(&input);
        }
        "modbus-write" => {
            let input = json!({"datatype": number_or_text(form.field("datatype")), "value": number_or_text(form.field("value"))});
            return service::modbus_write(&input);
        }
        "zwave-exclude" => return service::zwave_exclude(target),
        other => return Err(ServiceError::BadInput(format!("Unknown command: {other}"))),
    };
    Ok(CommandRequest::new(simple))
}

/// Sends the command of the form through the service layer, as the JSON API does.
async fn call(
    state: &AppState,
    viewer: &Viewer,
    id: &str,
    command: &str,
    form: &Posted,
) -> Result<CommandResponse, ServiceError> {
    let target = service::target(state, &viewer.caller, id).await?;
    let request = request(&target, command, form)?;
    service::run(state, &viewer.caller, &target, request).await
}

/// The outcome as a person reads it: what the device answered, or why it could not, with the
/// HTTP status the JSON API answers for the same outcome.
fn outcome(command: &str, result: Result<CommandResponse, ServiceError>) -> Result<Markup, PageError> {
    let (http, device, body) = match result {
        Ok(response) => (
            device_answer(&response).status(),
            Some(response.status),
            response.payload,
        ),
        // Rights and absence are the page's refusal, as for any other page.
        Err(
            e @ (ServiceError::NotFound(_)
            | ServiceError::NotAllowed
            | ServiceError::Store(_)
            | ServiceError::Internal(_)),
        ) => {
            return Err(ApiError::from(e).into());
        }
        Err(e) => {
            let error = ApiError::from(e);
            let message = error.to_string();
            (error.into_response().status(), None, json!({"message": message}))
        }
    };
    let ok = http.is_success() && device.is_none_or(|s| (200..300).contains(&s));
    Ok(html! {
        div.card {
            p class=(if ok { "" } else { "error" }) {
                strong { (command) } ": "
                @if ok { "done" } @else { "failed" }
                " (HTTP " (http.as_u16()) @if let Some(s) = device { ", device status " (s) } ")"
            }
            (json_table(&body))
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
) -> PageResult<Response> {
    let command = posted.field("command").to_string();
    let result = call(&state, &posted.viewer, &id, &command, &posted).await;
    let markup = outcome(&command, result)?;
    let fragment = headers.get("x-fragment").is_some();
    let body = if fragment {
        markup.into_string()
    } else {
        let content = html! { (markup) p { a href=(format!("/devices/{id}")) { "← Back to the device" } } };
        layout::page(&posted.viewer, Section::Fleet, "Command", content).into_string()
    };
    Ok(axum::response::IntoResponse::into_response(Html(body)))
}
