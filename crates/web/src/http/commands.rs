//! Commands to gateways and the assets behind them (specification "Commands to connectivity
//! modules" and "Commands to Modbus devices", docs/api.md, "Commands"): rights, body validation,
//! the request through the command router, and the answer — the device's `{status, payload}` passed
//! through, or the specification's error body for offline (404, 400 for the counter resets),
//! timeout (504) and malformed requests (400).

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use devicecloud_protocol::{CommandMethod, CommandRequest, CommandResponse};
use serde_json::{Map, Value, json};

use super::body::json_object;
use super::record::OneRecord;
use crate::http::error::ApiError;
use crate::service::commands as service;
use crate::state::AppState;

/// A method a command route does not take, HEAD included: HEAD on a command read with GET is
/// refused rather than served by the GET handler (axum's default), because it would send the
/// command to the gateway; so `Allow` never lists it (docs/api.md, "Commands").
fn refused(allow: &'static str) -> Response {
    let allow = axum::http::HeaderValue::from_static(allow);
    (StatusCode::METHOD_NOT_ALLOWED, [(axum::http::header::ALLOW, allow)]).into_response()
}

async fn only_get() -> Response {
    refused("GET")
}

async fn only_wifi_methods() -> Response {
    refused("GET, PUT, DELETE")
}

/// Where the commands of a device live.
const BASE: &str = "/api/v2/physical-device/{id}";

/// The command routes under [`BASE`]; each waits for the gateway's answer.
const COMMANDS: [&str; 9] = [
    "/ping",
    "/restart",
    "/status",
    "/request-measurement",
    "/wifi",
    "/reset-main-counter",
    "/reset-daily-counter",
    "/modbus-write",
    "/zwave-node",
];

/// Whether the route template `route` waits for a gateway (its time bound is the command
/// timeout on top of the query timeout, see `http::limits`). The dashboard's command form
/// (`/devices/{id}/command`) sends its commands through the same service, so it waits as long.
pub fn waits_for_gateway(route: &str) -> bool {
    route == "/devices/{id}/command" || route.strip_prefix(BASE).is_some_and(|rest| COMMANDS.contains(&rest))
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route(&format!("{BASE}/ping"), get(ping).head(only_get).fallback(only_get))
        .route(&format!("{BASE}/restart"), post(restart))
        .route(&format!("{BASE}/status"), get(status).head(only_get).fallback(only_get))
        .route(&format!("{BASE}/request-measurement"), put(request_measurement))
        .route(
            &format!("{BASE}/wifi"),
            get(wifi_scan)
                .head(only_wifi_methods)
                .put(wifi_connect)
                .delete(wifi_disconnect)
                .fallback(only_wifi_methods),
        )
        .route(&format!("{BASE}/reset-main-counter"), put(reset_main_counter))
        .route(&format!("{BASE}/reset-daily-counter"), put(reset_daily_counter))
        .route(&format!("{BASE}/modbus-write"), put(modbus_write))
        .route(&format!("{BASE}/zwave-node"), delete(zwave_node))
}

/// A command without parameters to the device the request names.
async fn simple(one: OneRecord, method: CommandMethod) -> Result<Response, ApiError> {
    let target = service::target(&one.state, &one.caller, &one.id).await?;
    let response = service::run(&one.state, &one.caller, &target, CommandRequest::new(method)).await?;
    Ok(device_answer(&response))
}

/// The handler of a command without parameters, with its OpenAPI description: each is its
/// own function (the OpenAPI document lists one operation per function), and each sends its
/// method through [`simple`]. `$offline` is the status of "not online" (400 for the counter
/// resets, 404 for the others); `$extra` lists answers only some commands have.
macro_rules! simple_command {
    ($(#[doc = $doc:literal])* $name:ident, $verb:ident $path:literal, $method:ident, $ok:literal, $offline:literal $(, $extra:tt)*) => {
        $(#[doc = $doc])*
        #[doc = ""]
        #[doc = "Sent to the device's gateway over its live connection; the answer is the device's own \
                 `{status, payload}`. Operator of the device's group (401 below); 404 when the device \
                 is invisible or not online (400 for the counter resets); 504 without an answer within \
                 the command timeout. Other methods, HEAD included, answer 405."]
        #[utoipa::path($verb, path = $path, tag = "commands", params(("id" = String, Path)),
            responses((status = 200, description = $ok, body = super::schemas::records::DeviceAnswer), $($extra,)* (status = 401, description = "Role below operator"),
                (status = $offline, description = "Not found, not visible, or not online"),
                (status = 504, description = "No answer within the command timeout")),
            security(("bearer" = [])))]
        pub async fn $name(one: OneRecord) -> Result<Response, ApiError> {
            simple(one, CommandMethod::$method).await
        }
    };
}

simple_command!(
    /// `GET …/ping`: `{data: "pong", result: "success"}` from an online module.
    ping, get "/api/v2/physical-device/{id}/ping", Ping,
    "200: {status: 200, payload: {data: pong, result: success}}", 404
);
simple_command!(
    /// `POST …/restart`: the module answers, then reconnects.
    restart, post "/api/v2/physical-device/{id}/restart", Restart,
    "200: {status: 200, payload: {result: success}}; the gateway reconnects", 404
);
simple_command!(
    /// `GET …/status`: the self-test payload, also kept as the device's `deviceInfo`.
    status, get "/api/v2/physical-device/{id}/status", Status,
    "200: {status: 200, payload: <self-test>}; kept as deviceInfo", 404
);
simple_command!(
    /// `PUT …/request-measurement`: the module asks its assets for their latest values.
    request_measurement, put "/api/v2/physical-device/{id}/request-measurement", RequestMeasurement,
    "200: {status: 200, payload: {result: success}}", 404
);
simple_command!(
    /// `GET …/wifi`: scan.
    wifi_scan, get "/api/v2/physical-device/{id}/wifi", WifiScan,
    "200: {status: 200, payload: {wifiAccessPoints, result}}", 404, ( status = 501, description = "Wifi disabled: {status: 501, payload: {result: failed, cause: Wifi disabled}}", body = super::schemas::records::DeviceAnswer )
);
simple_command!(
    /// `DELETE …/wifi`: disconnect.
    wifi_disconnect, delete "/api/v2/physical-device/{id}/wifi", WifiDisconnect,
    "200: {status: 200, payload: {wifiAccessPoints, result}}", 404, ( status = 501, description = "Wifi disabled: {status: 501, payload: {result: failed, cause: Wifi disabled}}", body = super::schemas::records::DeviceAnswer )
);
simple_command!(
    /// `PUT …/reset-main-counter`: `{"status": 200, "payload": {"status": "200"}}`.
    reset_main_counter, put "/api/v2/physical-device/{id}/reset-main-counter", ResetMainCounter,
    "200: {status: 200, payload: {status: 200}}", 400
);
simple_command!(
    /// `PUT …/reset-daily-counter`: as the main counter.
    reset_daily_counter, put "/api/v2/physical-device/{id}/reset-daily-counter", ResetDailyCounter,
    "200: {status: 200, payload: {status: 200}}", 400
);

/// `PUT …/wifi` with `{ssid, password?}`: connect to a Wi-Fi network.
///
/// A missing or empty `ssid`, or a `password` that is not a string, answers 400. Operator of
/// the device's group; 404 when not online; 501 `Wifi disabled` on a GO module; 504 without an
/// answer in time.
#[utoipa::path(put, path = "/api/v2/physical-device/{id}/wifi", tag = "commands", params(("id" = String, Path)),
    request_body(content = super::schemas::bodies::WifiNetwork),
    responses((status = 200, description = "200: {status: 200, payload: {wifiAccessPoints, result}}"), (status = 400, description = "Malformed body"), (status = 501, description = "Wifi disabled: {status: 501, payload: {result: failed, cause: Wifi disabled}}", body = super::schemas::records::DeviceAnswer), (status = 401, description = "Role below operator"), (status = 404, description = "Not found, not visible, or not online"), (status = 504, description = "No answer within the command timeout")),
    security(("bearer" = [])))]
pub async fn wifi_connect(one: OneRecord, body: Bytes) -> Result<Response, ApiError> {
    let target = service::target(&one.state, &one.caller, &one.id).await?;
    let request = service::wifi_connect(&json_object(&body)?)?;
    Ok(device_answer(
        &service::run(&one.state, &one.caller, &target, request).await?,
    ))
}

/// `PUT …/modbus-write`: write Modbus registers.
///
/// One `{datatype, value}` or an array of them: 400 with the reason for a malformed body, else
/// the gateway's answer. Operator of the device's group; 404 when not online; 504 without an
/// answer in time.
#[utoipa::path(put, path = "/api/v2/physical-device/{id}/modbus-write", tag = "commands", params(("id" = String, Path)),
    request_body(content = super::schemas::bodies::ModbusWrites),
    responses((status = 200, description = "200: {status: 200, payload: {result: success}}"), (status = 400, description = "Malformed body"), (status = 401, description = "Role below operator"), (status = 404, description = "Not found, not visible, or not online"), (status = 504, description = "No answer within the command timeout")),
    security(("bearer" = [])))]
pub async fn modbus_write(one: OneRecord, body: Bytes) -> Result<Response, ApiError> {
    let target = service::target(&one.state, &one.caller, &one.id).await?;
    let body: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("Invalid JSON data in request body: {e}")))?;
    let request = service::modbus_write(&body)?;
    Ok(device_answer(
        &service::run(&one.state, &one.caller, &target, request).await?,
    ))
}

/// `DELETE …/zwave-node`: asks the node's gateway to exclude it. The gateway's acceptance is
/// answered, unwrapped, as `{fromCloud, message, routeToPollEvents, tips}`; the outcome follows
/// as event 420 on the node. A refusal by the gateway passes through as `{status, payload}`.
///
/// The target must be a device behind a gateway whose type is `zwave` (announced so by its
/// gateway) or `asset` (never announced: only the gateway knows, and answers 404 for a node it
/// does not have); any other type (`modbus`, `sensor`, …) and a gateway itself are a 400
/// (docs/api.md, "Commands").
#[utoipa::path(delete, path = "/api/v2/physical-device/{id}/zwave-node", tag = "commands", params(("id" = String, Path)),
    responses((status = 200, description = "The gateway accepted the exclusion (not wrapped)", body = super::schemas::records::ZwaveExclusion), (status = 400, description = "Not a Z-wave node behind a gateway"), (status = 401, description = "Role below operator"), (status = 404, description = "Not found, not visible, or not online"), (status = 504, description = "No answer within the command timeout")),
    security(("bearer" = [])))]
pub async fn zwave_node(one: OneRecord) -> Result<Response, ApiError> {
    let (state, caller) = (&one.state, &one.caller);
    let target = service::target(state, caller, &one.id).await?;
    let request = service::zwave_exclude(&target)?;
    let response = service::run(state, caller, &target, request).await?;
    if response.status != 200 {
        return Ok(device_answer(&response));
    }
    let node = &target.device.id_physical_device;
    // What the event 420 values mean (docs/gateway-protocol.md, "Commands"), from the event
    // catalogue.
    let tips: Vec<Value> =
        devicecloud_engine::event_catalogue::lookup(devicecloud_engine::event_types::ZWAVE_EXCLUSION)
            .map(|t| t.values)
            .unwrap_or_default()
            .iter()
            .map(|v| json!({"value": v.value, "description": v.description}))
            .collect();
    let mut body = Map::new();
    // The gateway itself accepted the request: the answer did not come from the cloud alone.
    body.insert("fromCloud".into(), json!(false));
    body.insert(
        "message".into(),
        json!(format!(
            "Exclusion of Z-wave node {} requested from gateway {}; poll routeToPollEvents for the outcome.",
            target.device.serial_hardware, target.gateway.serial_hardware
        )),
    );
    body.insert(
        "routeToPollEvents".into(),
        json!(format!(
            "/api/v2/event?filter[source_device]={node}&filter[event_type]={}",
            devicecloud_engine::event_types::ZWAVE_EXCLUSION
        )),
    );
    body.insert("tips".into(), Value::Array(tips));
    Ok((StatusCode::OK, axum::Json(Value::Object(body))).into_response())
}

/// The device's envelope `{status, payload}` under its own status. A status HTTP cannot carry
/// with a body (1xx, 204, 205, 304) becomes 502.
pub fn device_answer(response: &CommandResponse) -> Response {
    let usable = devicecloud_engine::commands::answer_status(response.status) == response.status;
    match StatusCode::from_u16(response.status).ok().filter(|_| usable) {
        Some(status) => (
            status,
            axum::Json(json!({"status": response.status, "payload": response.payload})),
        )
            .into_response(),
        None => ApiError::Status(
            StatusCode::BAD_GATEWAY,
            format!("The device answered with status {}.", response.status),
        )
        .into_response(),
    }
}
