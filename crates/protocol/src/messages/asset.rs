//! `v1/gateway/devices` (docs/gateway-protocol.md, "Messages"): the assets attached to a gateway,
//! each created or updated as a child physical device.

use serde_json::{Map, Value};

use super::{Shape, array_payload, batch};
use crate::json::{self, MAX_LABEL_CHARS};
use crate::rejection::Rejection;

/// One attached asset (a sensor, a Modbus device, a Z-wave node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asset {
    /// Its `serial_hardware`: non-empty, at most 64 characters, no control characters.
    pub serial: String,
    /// Its device type (`id_device_type`), e.g. `modbus`: same rules as the serial.
    pub r#type: String,
    /// A label for people: at most 255 characters, no control characters, may be empty.
    pub label: Option<String>,
}

impl Asset {
    /// The protocol's JSON object.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("serial".into(), Value::from(self.serial.as_str()));
        map.insert("type".into(), Value::from(self.r#type.as_str()));
        if let Some(label) = &self.label {
            map.insert("label".into(), Value::from(label.as_str()));
        }
        Value::Object(map)
    }
}

/// The payload listing a gateway's assets, as a gateway publishes it (for the simulator).
pub fn devices_payload(assets: &[Asset]) -> Vec<u8> {
    array_payload(assets, Asset::to_json)
}

/// Parses a devices payload: a JSON array of `{serial, type, label?}` (a lone object is refused;
/// `[]` lists nothing). Every rejection is [`crate::RejectReason::BadField`], or
/// [`crate::RejectReason::TooLarge`] beyond [`super::MAX_BATCH`] entries.
pub fn parse_devices(payload: &[u8]) -> Result<Vec<Asset>, Rejection> {
    batch(payload, Shape::Array, "a devices message", asset)
}

fn asset(map: &Map<String, Value>) -> Result<Asset, Rejection> {
    Ok(Asset {
        serial: json::identifier(json::required(map, "serial")?, "serial")?,
        r#type: json::identifier(json::required(map, "type")?, "type")?,
        label: json::optional(map, "label")
            .map(|v| json::text(v, "label", MAX_LABEL_CHARS))
            .transpose()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RejectReason;

    fn parse(text: &str) -> Result<Vec<Asset>, Rejection> {
        parse_devices(text.as_bytes())
    }

    #[test]
    fn the_specification_example() {
        assert_eq!(
            parse(r#"[{"serial": "MB-7781", "type": "modbus", "label": "Flow meter"}]"#),
            Ok(vec![Asset {
                serial: "MB-7781".into(),
                r#type: "modbus".into(),
                label: Some("Flow meter".into()),
            }])
        );
        assert_eq!(
            parse(r#"[{"serial": "Z-1", "type": "zwave", "label": null, "extra": 1}]"#),
            Ok(vec![Asset {
                serial: "Z-1".into(),
                r#type: "zwave".into(),
                label: None,
            }])
        );
        assert_eq!(parse("[]"), Ok(vec![]));
    }

    #[test]
    fn rejections() {
        let long_label = format!(r#"[{{"serial": "a", "type": "t", "label": "{}"}}]"#, "x".repeat(256));
        let cases = [
            (
                r#"{"serial": "a", "type": "t"}"#,
                "a devices message must be a JSON array of objects",
            ),
            (r#"[{"type": "t"}]"#, "item 0: serial is required"),
            (r#"[{"serial": "a"}]"#, "item 0: type is required"),
            (r#"[{"serial": "", "type": "t"}]"#, "item 0: serial must not be empty"),
            (r#"[{"serial": 5, "type": "t"}]"#, "item 0: serial must be a string"),
            (r#"[{"serial": "a", "type": ""}]"#, "item 0: type must not be empty"),
            (
                r#"[{"serial": "a", "type": "t", "label": 5}]"#,
                "item 0: label must be a string",
            ),
            (
                r#"[{"serial": "a", "type": "t", "label": "a\rb"}]"#,
                "item 0: label must not contain control characters",
            ),
            (&long_label, "item 0: label must be at most 255 characters"),
            (
                r#"[{"serial": "a", "type": "t"}, "b"]"#,
                "item 1: must be a JSON object",
            ),
        ];
        for (text, message) in cases {
            let err = parse(text).unwrap_err();
            assert_eq!(err.reason(), RejectReason::BadField, "{text}");
            assert_eq!(err.description(), message, "{text}");
        }
        let ok_label = format!(r#"[{{"serial": "a", "type": "t", "label": "{}"}}]"#, "é".repeat(255));
        assert!(parse(&ok_label).is_ok());
    }

    #[test]
    fn payloads() {
        let assets = vec![
            Asset {
                serial: "MB-7781".into(),
                r#type: "modbus".into(),
                label: Some(String::new()),
            },
            Asset {
                serial: "Z-1".into(),
                r#type: "zwave".into(),
                label: None,
            },
        ];
        let payload = devices_payload(&assets);
        assert_eq!(
            String::from_utf8(payload.clone()).unwrap(),
            r#"[{"serial":"MB-7781","type":"modbus","label":""},{"serial":"Z-1","type":"zwave"}]"#
        );
        assert_eq!(parse_devices(&payload), Ok(assets));
    }
}
