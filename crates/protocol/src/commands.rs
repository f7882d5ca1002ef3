//! What the cloud sends (docs/gateway-protocol.md, "Commands"): command requests published on
//! `v1/gateway/commands/<request_id>`, built by the server and parsed by the simulator.

mod modbus;

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::json;
use crate::kinds::ModuleKind;
use crate::rejection::Rejection;

pub use modbus::{ModbusWrite, parse_modbus_writes};

/// A command method (docs/gateway-protocol.md, "Commands"), spelled on the wire as
/// [`CommandMethod::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommandMethod {
    /// `ping`: answers `{"data": "pong", "result": "success"}`.
    Ping,
    /// `restart`: answers, then reconnects.
    Restart,
    /// `status`: the self-test payload.
    Status,
    /// `request-measurement`: the gateway publishes the latest measurements of its assets.
    RequestMeasurement,
    /// `wifi-scan`.
    WifiScan,
    /// `wifi-connect`, params `ssid` and optional `password`.
    WifiConnect,
    /// `wifi-disconnect`.
    WifiDisconnect,
    /// `reset-main-counter`.
    ResetMainCounter,
    /// `reset-daily-counter`.
    ResetDailyCounter,
    /// `modbus-write`, params `writes`.
    ModbusWrite,
    /// `zwave-exclude`, params `node`.
    ZwaveExclude,
    /// `update`, params as [`crate::firmware::UpdateParams`]: sent by firmware jobs only
    /// (docs/gateway-protocol.md, "Firmware update"), so not among [`CommandMethod::ALL`].
    Update,
}

impl CommandMethod {
    /// Every method an operator sends (as a command or a command job), in the order of
    /// docs/gateway-protocol.md, "Commands". `update` is not one: a firmware job sends it.
    pub const ALL: [CommandMethod; 11] = [
        CommandMethod::Ping,
        CommandMethod::Restart,
        CommandMethod::Status,
        CommandMethod::RequestMeasurement,
        CommandMethod::WifiScan,
        CommandMethod::WifiConnect,
        CommandMethod::WifiDisconnect,
        CommandMethod::ResetMainCounter,
        CommandMethod::ResetDailyCounter,
        CommandMethod::ModbusWrite,
        CommandMethod::ZwaveExclude,
    ];

    /// The wire name: `ping`, `restart`, `status`, `request-measurement`, `wifi-scan`,
    /// `wifi-connect`, `wifi-disconnect`, `reset-main-counter`, `reset-daily-counter`,
    /// `modbus-write`, `zwave-exclude`.
    pub fn as_str(&self) -> &'static str {
        match self {
            CommandMethod::Ping => "ping",
            CommandMethod::Restart => "restart",
            CommandMethod::Status => "status",
            CommandMethod::RequestMeasurement => "request-measurement",
            CommandMethod::WifiScan => "wifi-scan",
            CommandMethod::WifiConnect => "wifi-connect",
            CommandMethod::WifiDisconnect => "wifi-disconnect",
            CommandMethod::ResetMainCounter => "reset-main-counter",
            CommandMethod::ResetDailyCounter => "reset-daily-counter",
            CommandMethod::ModbusWrite => "modbus-write",
            CommandMethod::ZwaveExclude => "zwave-exclude",
            CommandMethod::Update => "update",
        }
    }

    /// The method with this wire name (exact, case-sensitive), `update` included.
    pub fn parse(name: &str) -> Option<CommandMethod> {
        CommandMethod::ALL
            .into_iter()
            .chain([CommandMethod::Update])
            .find(|m| m.as_str() == name)
    }

    /// Module kinds that support it: the Wi-Fi commands only CORE and PLUS (a GO module has no
    /// Wi-Fi, API specification "Commands to connectivity modules"); everything else all kinds.
    pub fn supported_by(&self, kind: ModuleKind) -> bool {
        match self {
            CommandMethod::WifiScan | CommandMethod::WifiConnect | CommandMethod::WifiDisconnect => {
                kind != ModuleKind::Go
            }
            _ => true,
        }
    }
}

impl fmt::Display for CommandMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One command request: `{"method": …, "params": {…}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandRequest {
    /// What to do.
    pub method: CommandMethod,
    /// Always a JSON object; `{}` for methods without parameters.
    pub params: Value,
}

impl CommandRequest {
    /// A request without parameters.
    pub fn new(method: CommandMethod) -> CommandRequest {
        CommandRequest {
            method,
            params: Value::Object(Map::new()),
        }
    }

    /// `wifi-connect` with `ssid` and, when given, `password`.
    pub fn wifi_connect(ssid: &str, password: Option<&str>) -> CommandRequest {
        let mut params = Map::new();
        params.insert("ssid".into(), Value::from(ssid));
        if let Some(password) = password {
            params.insert("password".into(), Value::from(password));
        }
        CommandRequest {
            method: CommandMethod::WifiConnect,
            params: Value::Object(params),
        }
    }

    /// `modbus-write` with `writes` in the given order.
    pub fn modbus_write(writes: &[ModbusWrite]) -> CommandRequest {
        let mut params = Map::new();
        params.insert(
            "writes".into(),
            Value::Array(writes.iter().map(ModbusWrite::to_json).collect()),
        );
        CommandRequest {
            method: CommandMethod::ModbusWrite,
            params: Value::Object(params),
        }
    }

    /// `update` with the image to install (docs/gateway-protocol.md, "Firmware update").
    pub fn update(params: &crate::firmware::UpdateParams) -> CommandRequest {
        CommandRequest {
            method: CommandMethod::Update,
            params: serde_json::to_value(params).unwrap_or_default(),
        }
    }

    /// The payload the cloud publishes on [`crate::command_topic`].
    pub fn to_payload(&self) -> Vec<u8> {
        let mut map = Map::new();
        map.insert("method".into(), Value::from(self.method.as_str()));
        map.insert("params".into(), self.params.clone());
        json::to_bytes(&Value::Object(map))
    }

    /// Parses a command request (the simulator's side). `method` must be a known name;
    /// `params` an object (absent or `null` → `{}`), holding what the method needs:
    /// `wifi-connect` a non-empty string `ssid` and an optional string `password`,
    /// `modbus-write` a `writes` array as [`parse_modbus_writes`] accepts it, `zwave-exclude`
    /// a `node` serial. Other keys are ignored. Every rejection is
    /// [`crate::RejectReason::BadField`] (or not JSON).
    pub fn parse(payload: &[u8]) -> Result<CommandRequest, Rejection> {
        let value = json::read(payload)?;
        let map = json::object(&value, "a command request")?;
        let method = match json::required(map, "method")? {
            Value::String(name) => CommandMethod::parse(name)
                .ok_or_else(|| json::bad_field(format!("unknown method {}", json::quoted(name))))?,
            _ => return Err(json::bad_field("method must be a string")),
        };
        let params = match json::optional(map, "params") {
            None => Value::Object(Map::new()),
            Some(params @ Value::Object(_)) => params.clone(),
            Some(_) => return Err(json::bad_field("params must be a JSON object")),
        };
        check_params(method, &params)?;
        Ok(CommandRequest { method, params })
    }
}

/// `zwave-exclude` for one Z-wave node: params `{"node": <serial>}`. The outcome comes back as
/// event 420 on the node (docs/gateway-protocol.md, "Commands").
pub fn zwave_exclude(node_serial: &str) -> CommandRequest {
    let mut params = Map::new();
    params.insert("node".into(), Value::from(node_serial));
    CommandRequest {
        method: CommandMethod::ZwaveExclude,
        params: Value::Object(params),
    }
}

/// The parameters a method cannot do without (docs/gateway-protocol.md, "Commands").
fn check_params(method: CommandMethod, params: &Value) -> Result<(), Rejection> {
    match method {
        CommandMethod::WifiConnect => {
            match params.get("ssid") {
                Some(Value::String(ssid)) if !ssid.is_empty() => {}
                _ => return Err(json::bad_field("params.ssid must be a non-empty string")),
            }
            match params.get("password") {
                None | Some(Value::Null | Value::String(_)) => Ok(()),
                Some(_) => Err(json::bad_field("params.password must be a string")),
            }
        }
        CommandMethod::ModbusWrite => match params.get("writes") {
            Some(writes @ Value::Array(_)) => parse_modbus_writes(writes)
                .map(|_| ())
                .map_err(|message| json::bad_field(format!("params.writes: {message}"))),
            _ => Err(json::bad_field("params.writes must be an array")),
        },
        CommandMethod::ZwaveExclude => match params.get("node") {
            Some(node) => json::identifier(node, "params.node").map(|_| ()),
            None => Err(json::bad_field("params.node is required")),
        },
        CommandMethod::Update => crate::firmware::UpdateParams::read(params).map(|_| ()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
