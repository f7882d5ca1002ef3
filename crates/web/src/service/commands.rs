//! Commands to gateways and the assets behind them (docs/api.md, "Commands"): which device a
//! command may address and through which gateway, the typed request for each command's input,
//! and the effects of sending one — the command log, the metric, and a self-test kept as the
//! device's `deviceInfo`.

use devicecloud_protocol::{CommandMethod, CommandRequest, CommandResponse, ModuleKind, parse_modbus_writes};
use devicecloud_store::devices::{self, DeviceRow};
use devicecloud_store::{device_info, unix_now};
use serde_json::Value;

use super::{Input, Result, ServiceError, access};
use crate::caller::Caller;
use crate::state::AppState;
use devicecloud_engine::auth::Role;
use devicecloud_engine::commands::{self, CommandRecord};
use devicecloud_engine::peers;

/// The addressed device and the gateway that carries its commands (itself, or its parent for an
/// asset).
#[derive(Clone, Debug)]
pub struct Target {
    pub device: DeviceRow,
    pub gateway: DeviceRow,
    kind: Option<ModuleKind>,
    /// The node holding the gateway's connection, as read with the rights check (`None`: not
    /// connected).
    node: Option<String>,
}

impl Target {
    /// Whether the device is a Z-wave node behind a gateway: its type is `zwave` (announced so)
    /// or `asset` (never announced: only the gateway knows, and answers 404 for a node it does
    /// not have). Any other type, and a gateway itself, is not.
    pub fn is_zwave_node(device: &DeviceRow) -> bool {
        device.id_parent.is_some() && matches!(device.id_device_type.to_ascii_lowercase().as_str(), "zwave" | "asset")
    }
}

/// The device `id` as the caller may command it (operator at least).
pub async fn target(state: &AppState, caller: &Caller, id: &str) -> Result<Target> {
    let owned = access::owned_device(state, caller, id, Role::Operator).await?;
    let (device, gateway) = match &owned.device.id_parent {
        Some(parent) => {
            let gateway = devices::get_owned(&state.db, parent)
                .await?
                .ok_or_else(|| ServiceError::not_found("Physical device", id))?;
            (owned.device, gateway)
        }
        None => (owned.device.clone(), owned),
    };
    let kind = gateway.device.kind.as_deref().and_then(|k| k.parse().ok());
    Ok(Target {
        device,
        gateway: gateway.device,
        kind,
        node: gateway.connected_node,
    })
}

/// The Wi-Fi connect request from `{ssid, password?}`: a missing or empty `ssid`, or a
/// `password` that is not a string, is refused.
pub fn wifi_connect(input: &Input) -> Result<CommandRequest> {
    let ssid = match input.get("ssid") {
        Some(Value::String(ssid)) if !ssid.is_empty() => ssid,
        _ => {
            return Err(ServiceError::BadInput(
                "ssid is required and must be a non-empty string.".into(),
            ));
        }
    };
    let password = match input.get("password") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) => Some(p.as_str()),
        Some(_) => return Err(ServiceError::BadInput("password must be a string.".into())),
    };
    Ok(CommandRequest::wifi_connect(ssid, password))
}

/// The Modbus write request from one `{datatype, value}` or an array of them.
pub fn modbus_write(input: &Value) -> Result<CommandRequest> {
    let writes = parse_modbus_writes(input).map_err(|message| ServiceError::BadInput(format!("{message}.")))?;
    Ok(CommandRequest::modbus_write(&writes))
}

/// The Z-wave exclusion request for the target's node.
pub fn zwave_exclude(target: &Target) -> Result<CommandRequest> {
    if !Target::is_zwave_node(&target.device) {
        return Err(ServiceError::BadInput(format!(
            "Physical device {} is not a Z-wave node behind a gateway.",
            target.device.id_physical_device
        )));
    }
    Ok(devicecloud_protocol::zwave_exclude(&target.device.serial_hardware))
}

/// Sends `request` to the target's gateway and returns the device's answer; records the command
/// (event 213 with its outcome), counts it, and keeps a self-test answer as `deviceInfo`.
pub async fn run(
    state: &AppState,
    caller: &Caller,
    target: &Target,
    request: CommandRequest,
) -> Result<CommandResponse> {
    let method = request.method;
    let request_id = commands::request_id();
    let mut record = CommandRecord {
        id_group: target.device.id_group.clone(),
        source_device: target.device.id_physical_device.clone(),
        method: method.as_str(),
        caller: caller.id_user.clone(),
        request_id: request_id.clone(),
        outcome: String::new(),
        http_status: 0,
        occurred_at: unix_now(),
        duration_ms: 0,
    };
    let started = std::time::Instant::now();
    // A kind without the method (Wi-Fi on a GO module) answers as the device layer would: the
    // specification's only Wi-Fi failure, 501 `Wifi disabled`. Nothing is published.
    if target.kind.is_some_and(|kind| !method.supported_by(kind)) {
        record.outcome = "not supported".into();
        record.http_status = 501;
        state.command_log.record(record).await;
        return Ok(CommandResponse::failure(501, "Wifi disabled"));
    }
    let gateway = &target.gateway.id_physical_device;
    // A gateway connected to another node gets the command through that node.
    let outcome = match state.gateways.commands(gateway) {
        Some(queue) => commands::send(Some(queue), state.settings.command_timeout, request_id, &request).await,
        None => peers::commands::call(&state.peers, gateway, target.node.as_deref(), request_id, &request).await,
    };
    (record.outcome, record.http_status) = match &outcome {
        Ok(response) => (response.status.to_string(), commands::answer_status(response.status)),
        Err(e) => (e.outcome().to_string(), e.http_status(method)),
    };
    record.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    // The gateway chooses its status: outside 100–599 it counts as one label, so a gateway
    // cannot grow the metric without bound.
    let label = match &outcome {
        Ok(response) if !(100..=599).contains(&response.status) => "other".to_owned(),
        _ => record.outcome.clone(),
    };
    metrics::counter!("devicecloud_commands_total", "method" => method.as_str(), "outcome" => label).increment(1);
    state.command_log.record(record).await;
    let response = outcome.map_err(|error| ServiceError::Command { method, error })?;
    if method == CommandMethod::Status && response.status == 200 && response.payload.is_object() {
        device_info::set(
            &state.db,
            &target.gateway.id_physical_device,
            &response.payload.to_string(),
            unix_now(),
        )
        .await?;
    }
    Ok(response)
}
