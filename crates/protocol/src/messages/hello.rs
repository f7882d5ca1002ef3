//! `v1/gateway/hello` (docs/gateway-protocol.md, "Messages"): the birth message a gateway sends
//! after every CONNACK; it marks the gateway connected and feeds the device expands.

use serde_json::{Map, Value};

use crate::json::{self, MAX_IDENTIFIER_CHARS};
use crate::kinds::{ConnectionKind, ModuleKind};
use crate::rejection::{RejectReason, Rejection};

/// A validated birth message.
#[derive(Debug, Clone, PartialEq)]
pub struct Hello {
    /// The module kind; the server refuses the connection when it differs from the provisioned
    /// kind (docs/gateway-protocol.md, "Messages").
    pub kind: ModuleKind,
    /// The link in use, recorded as event 208 ([`ConnectionKind::event_value`]).
    pub connection: ConnectionKind,
    /// Signal strength as the module reports it (any integer; units are the module's).
    pub signal: Option<i64>,
    /// At most 64 characters, no control characters.
    pub platform_software_version: Option<String>,
    /// At most 64 characters, no control characters.
    pub app_software_version: Option<String>,
    /// Whether Wi-Fi is switched on.
    pub wifi_enabled: Option<bool>,
    /// A JSON object (`iccid`, `imsi`, `operator`, …), kept as given for the `simCard` expand.
    pub sim: Option<Value>,
    /// A JSON object (`latitude`, `longitude`, `accuracy_m`, …) for the `location` expand.
    pub location: Option<Value>,
    /// A JSON object with `name` (non-empty string) and `registers` (array of objects), kept as
    /// given for `currentModbusTemplate` and `modbusTemplateHistory`.
    pub modbus_template: Option<Value>,
}

impl Hello {
    /// A hello with only the two required keys.
    pub fn new(kind: ModuleKind, connection: ConnectionKind) -> Hello {
        Hello {
            kind,
            connection,
            signal: None,
            platform_software_version: None,
            app_software_version: None,
            wifi_enabled: None,
            sim: None,
            location: None,
            modbus_template: None,
        }
    }

    /// The protocol's JSON object; keys absent when `None`.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("kind".into(), Value::from(self.kind.as_str()));
        map.insert("connection".into(), Value::from(self.connection.as_str()));
        let optional = [
            ("signal", self.signal.map(Value::from)),
            (
                "platform_software_version",
                self.platform_software_version.as_deref().map(Value::from),
            ),
            (
                "app_software_version",
                self.app_software_version.as_deref().map(Value::from),
            ),
            ("wifi_enabled", self.wifi_enabled.map(Value::from)),
            ("sim", self.sim.clone()),
            ("location", self.location.clone()),
            ("modbus_template", self.modbus_template.clone()),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                map.insert(key.into(), value);
            }
        }
        Value::Object(map)
    }

    /// The payload, as a gateway publishes it (for the simulator).
    pub fn to_payload(&self) -> Vec<u8> {
        json::to_bytes(&self.to_json())
    }
}

/// Parses a hello payload: one JSON object. `kind` (`GO`, `CORE`, `PLUS`) and `connection`
/// (`cellular`, `wifi`, `ethernet`) are required and case-sensitive; `signal` must be an integer,
/// `wifi_enabled` a boolean, the versions short text, and `sim`, `location`, `modbus_template`
/// objects. Every rejection is [`crate::RejectReason::BadField`] (or not JSON).
pub fn parse_hello(payload: &[u8]) -> Result<Hello, Rejection> {
    let value = json::read(payload)?;
    let map = json::object(&value, "hello")?;
    let kind = match json::required(map, "kind")? {
        Value::String(s) => s.parse()?,
        _ => return Err(json::bad_field("kind must be GO, CORE or PLUS")),
    };
    let connection = match json::required(map, "connection")? {
        Value::String(s) => s.parse()?,
        _ => return Err(json::bad_field("connection must be cellular, wifi or ethernet")),
    };
    let signal = json::optional(map, "signal")
        .map(|v| v.as_i64().ok_or_else(|| json::bad_field("signal must be an integer")))
        .transpose()?;
    let version = |key: &str| {
        json::optional(map, key)
            .map(|v| json::text(v, key, MAX_IDENTIFIER_CHARS))
            .transpose()
    };
    let platform_software_version = version("platform_software_version")?;
    let app_software_version = version("app_software_version")?;
    let wifi_enabled = json::optional(map, "wifi_enabled")
        .map(|v| {
            v.as_bool()
                .ok_or_else(|| json::bad_field("wifi_enabled must be a boolean"))
        })
        .transpose()?;
    let block = |key: &str| {
        json::optional(map, key)
            .map(|v| json::object(v, key).map(|_| v.clone()))
            .transpose()
    };
    let sim = block("sim")?;
    let location = block("location")?;
    let modbus_template = block("modbus_template")?;
    if let Some(template) = &modbus_template {
        check_template(template)?;
    }
    Ok(Hello {
        kind,
        connection,
        signal,
        platform_software_version,
        app_software_version,
        wifi_enabled,
        sim,
        location,
        modbus_template,
    })
}

/// The largest Modbus template, as JSON text: every template is kept in the device's history
/// and returned by `modbusTemplateHistory` (docs/gateway-protocol.md, "Limits").
pub const MAX_TEMPLATE_BYTES: usize = 64 * 1024;

/// A Modbus template needs a name (it is what `modbusTemplateHistory` tracks) and a list of
/// register objects; the registers' own keys are the gateway's business and kept as given.
fn check_template(template: &Value) -> Result<(), Rejection> {
    let size = json::to_bytes(template).len();
    if size > MAX_TEMPLATE_BYTES {
        return Err(Rejection::invalid(
            RejectReason::TooLarge,
            format!("modbus_template is {size} bytes; at most {MAX_TEMPLATE_BYTES} are allowed"),
        ));
    }
    match template.get("name") {
        Some(Value::String(name)) if !name.is_empty() => {}
        _ => return Err(json::bad_field("modbus_template.name must be a non-empty string")),
    }
    match template.get("registers") {
        Some(Value::Array(registers)) if registers.iter().all(Value::is_object) => Ok(()),
        _ => Err(json::bad_field("modbus_template.registers must be an array of objects")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RejectReason;
    use serde_json::json;

    fn parse(value: Value) -> Result<Hello, Rejection> {
        parse_hello(value.to_string().as_bytes())
    }

    #[test]
    fn the_specification_example() {
        let hello = parse(json!({"kind": "GO", "connection": "cellular", "signal": 17,
            "platform_software_version": "5.1.2", "app_software_version": "2.4.0", "wifi_enabled": true}))
        .unwrap();
        assert_eq!(
            hello,
            Hello {
                signal: Some(17),
                platform_software_version: Some("5.1.2".into()),
                app_software_version: Some("2.4.0".into()),
                wifi_enabled: Some(true),
                ..Hello::new(ModuleKind::Go, ConnectionKind::Cellular)
            }
        );
    }

    #[test]
    fn blocks() {
        let sim = json!({"iccid": "8931", "imsi": "2040", "operator": "KPN"});
        let location = json!({"latitude": 52.37, "longitude": 4.89, "accuracy_m": 12});
        let template = json!({"name": "flowmeter-v2", "registers": [{"datatype": 12, "address": 40001,
            "type": "u16", "scale": 0.1, "label": "Flow", "unit": "m3/h"}]});
        let hello = parse(
            json!({"kind": "PLUS", "connection": "wifi", "sim": sim, "location": location,
            "modbus_template": template, "future_key": {"x": 1}}),
        )
        .unwrap();
        assert_eq!(hello.kind, ModuleKind::Plus);
        assert_eq!(hello.connection, ConnectionKind::Wifi);
        assert_eq!(hello.sim, Some(sim));
        assert_eq!(hello.location, Some(location));
        assert_eq!(hello.modbus_template, Some(template));
        let empty = parse(
            json!({"kind": "CORE", "connection": "ethernet", "modbus_template": {"name": "t",
            "registers": []}, "sim": null, "signal": null}),
        )
        .unwrap();
        assert_eq!(empty.sim, None);
        assert_eq!(empty.signal, None);
        assert!(empty.modbus_template.is_some());
    }

    #[test]
    fn template_size() {
        let template = |filler: usize| {
            json!({"kind": "PLUS", "connection": "wifi",
                "modbus_template": {"name": "t", "registers": [{"label": "x".repeat(filler)}]}})
        };
        // `{"name":"t","registers":[{"label":""}]}` is 39 bytes.
        assert!(parse(template(MAX_TEMPLATE_BYTES - 39)).is_ok());
        let refused = parse(template(MAX_TEMPLATE_BYTES - 38)).unwrap_err();
        assert_eq!(refused.reason(), RejectReason::TooLarge);
        assert_eq!(
            refused.to_string(),
            "modbus_template is 65537 bytes; at most 65536 are allowed"
        );
    }

    #[test]
    fn rejections() {
        let base = || json!({"kind": "GO", "connection": "cellular"});
        let with = |key: &str, value: Value| {
            let mut v = base();
            v[key] = value;
            parse(v).unwrap_err()
        };
        let cases = [
            ("kind", json!("go"), "kind must be GO, CORE or PLUS"),
            ("kind", json!(1), "kind must be GO, CORE or PLUS"),
            ("kind", Value::Null, "kind is required"),
            (
                "connection",
                json!("lte"),
                "connection must be cellular, wifi or ethernet",
            ),
            (
                "connection",
                json!(["wifi"]),
                "connection must be cellular, wifi or ethernet",
            ),
            ("signal", json!(17.5), "signal must be an integer"),
            ("signal", json!("17"), "signal must be an integer"),
            ("wifi_enabled", json!(1), "wifi_enabled must be a boolean"),
            (
                "app_software_version",
                json!(2),
                "app_software_version must be a string",
            ),
            (
                "platform_software_version",
                json!("x".repeat(65)),
                "platform_software_version must be at most 64 characters",
            ),
            ("sim", json!("KPN"), "sim must be a JSON object"),
            ("location", json!([52.37, 4.89]), "location must be a JSON object"),
            ("modbus_template", json!(true), "modbus_template must be a JSON object"),
            (
                "modbus_template",
                json!({"registers": []}),
                "modbus_template.name must be a non-empty string",
            ),
            (
                "modbus_template",
                json!({"name": "", "registers": []}),
                "modbus_template.name must be a non-empty string",
            ),
            (
                "modbus_template",
                json!({"name": "t"}),
                "modbus_template.registers must be an array of objects",
            ),
            (
                "modbus_template",
                json!({"name": "t", "registers": [1]}),
                "modbus_template.registers must be an array of objects",
            ),
        ];
        for (key, value, message) in cases {
            let err = with(key, value.clone());
            assert_eq!(err.reason(), RejectReason::BadField, "{key} {value}");
            assert_eq!(err.description(), message, "{key} {value}");
        }
        assert_eq!(
            parse(json!({"connection": "wifi"})).unwrap_err().description(),
            "kind is required"
        );
        assert_eq!(
            parse(json!({"kind": "GO"})).unwrap_err().description(),
            "connection is required"
        );
        assert_eq!(
            parse(json!([])).unwrap_err().description(),
            "hello must be a JSON object"
        );
        assert!(matches!(parse_hello(b"{"), Err(Rejection::NotJson(_))));
        assert_eq!(parse_hello(b"\xff"), Err(Rejection::NotUtf8));
    }

    #[test]
    fn payloads() {
        let full = Hello {
            signal: Some(-70),
            platform_software_version: Some("5.1.2".into()),
            app_software_version: Some(String::new()),
            wifi_enabled: Some(false),
            sim: Some(json!({"iccid": "1"})),
            location: Some(json!({})),
            modbus_template: Some(json!({"name": "t", "registers": [{}]})),
            ..Hello::new(ModuleKind::Core, ConnectionKind::Ethernet)
        };
        assert_eq!(parse_hello(&full.to_payload()), Ok(full));
        let bare = Hello::new(ModuleKind::Go, ConnectionKind::Cellular);
        assert_eq!(
            String::from_utf8(bare.to_payload()).unwrap(),
            r#"{"kind":"GO","connection":"cellular"}"#
        );
        assert_eq!(parse_hello(&bare.to_payload()), Ok(bare));
    }
}
