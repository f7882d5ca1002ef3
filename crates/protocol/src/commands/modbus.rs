//! The body of `PUT /api/v2/physical-device/<id>/modbus-write` (API specification, "Commands to
//! Modbus devices") and the `writes` of the `modbus-write` request (docs/gateway-protocol.md,
//! "Commands").

use serde_json::{Map, Value};

use crate::json;
use crate::messages::MAX_BATCH;

/// One register write: the datatype the gateway assigned to the register, and the value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModbusWrite {
    /// The register's datatype index.
    pub datatype: u32,
    /// The value to write; integral values travel as JSON integers.
    pub value: f64,
}

impl ModbusWrite {
    /// `{"datatype": …, "value": …}`.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("datatype".into(), Value::from(self.datatype));
        map.insert("value".into(), json::number(self.value));
        Value::Object(map)
    }
}

/// Validates the HTTP body of modbus-write: one object or an array of objects (1 to
/// [`MAX_BATCH`]), each with `datatype` (integer, required) and `value` (integer or number,
/// required); other keys are ignored. `Err(message)` names the problem for the 400 answer
/// ("datatype must be an integer", "value must be a number", …), prefixed with the position
/// (`item 1: …`, from 0) when the body is an array.
pub fn parse_modbus_writes(body: &Value) -> Result<Vec<ModbusWrite>, String> {
    match body {
        Value::Object(map) => Ok(vec![write(map)?]),
        Value::Array(items) if items.is_empty() => Err("at least one write is required".to_owned()),
        Value::Array(items) if items.len() > MAX_BATCH => Err(format!("at most {MAX_BATCH} writes are allowed")),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::Object(map) => write(map).map_err(|message| format!("item {i}: {message}")),
                _ => Err(format!(
                    "item {i}: each write must be an object with datatype and value"
                )),
            })
            .collect(),
        _ => Err("the body must be an object or an array of objects with datatype and value".to_owned()),
    }
}

fn write(map: &Map<String, Value>) -> Result<ModbusWrite, String> {
    let datatype = match json::optional(map, "datatype") {
        None => return Err("datatype is required".to_owned()),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) if i < 0 => return Err("datatype must be no less than 0".to_owned()),
            (_, Some(u)) => u32::try_from(u).map_err(|_| format!("datatype must be no greater than {}", u32::MAX))?,
            _ => return Err("datatype must be an integer".to_owned()),
        },
        Some(_) => return Err("datatype must be an integer".to_owned()),
    };
    let value = match json::optional(map, "value") {
        None => return Err("value is required".to_owned()),
        Some(Value::Number(n)) => n.as_f64().filter(|v| v.is_finite()),
        Some(_) => None,
    }
    .ok_or_else(|| "value must be a number".to_owned())?;
    Ok(ModbusWrite { datatype, value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn w(datatype: u32, value: f64) -> ModbusWrite {
        ModbusWrite { datatype, value }
    }

    #[test]
    fn accepts_one_or_many() {
        assert_eq!(
            parse_modbus_writes(&json!({"datatype": 12, "value": 5})),
            Ok(vec![w(12, 5.0)])
        );
        assert_eq!(
            parse_modbus_writes(&json!([{"datatype": 12, "value": 2.5}, {"datatype": 0, "value": -1, "x": 1}])),
            Ok(vec![w(12, 2.5), w(0, -1.0)])
        );
        assert_eq!(
            parse_modbus_writes(&json!({"datatype": 4_294_967_295_u64, "value": 1e300})),
            Ok(vec![w(u32::MAX, 1e300)])
        );
    }

    #[test]
    fn messages() {
        let cases = [
            (json!({"value": 1}), "datatype is required"),
            (json!({"datatype": null, "value": 1}), "datatype is required"),
            (json!({"datatype": "12", "value": 1}), "datatype must be an integer"),
            (json!({"datatype": 1.5, "value": 1}), "datatype must be an integer"),
            (json!({"datatype": 12.0, "value": 1}), "datatype must be an integer"),
            (json!({"datatype": true, "value": 1}), "datatype must be an integer"),
            (json!({"datatype": -1, "value": 1}), "datatype must be no less than 0"),
            (
                json!({"datatype": 4_294_967_296_u64, "value": 1}),
                "datatype must be no greater than 4294967295",
            ),
            (json!({"datatype": 1}), "value is required"),
            (json!({"datatype": 1, "value": "5"}), "value must be a number"),
            (json!({"datatype": 1, "value": [5]}), "value must be a number"),
            (json!({"datatype": 1, "value": false}), "value must be a number"),
            (json!([]), "at least one write is required"),
            (
                json!([{"datatype": 1, "value": 1}, 5]),
                "item 1: each write must be an object with datatype and value",
            ),
            (
                json!([{"datatype": 1, "value": 1}, {"datatype": 1, "value": "x"}]),
                "item 1: value must be a number",
            ),
            (
                json!("x"),
                "the body must be an object or an array of objects with datatype and value",
            ),
            (
                json!(null),
                "the body must be an object or an array of objects with datatype and value",
            ),
        ];
        for (body, message) in cases {
            assert_eq!(parse_modbus_writes(&body), Err(message.to_owned()), "{body}");
        }
        let many = Value::Array(vec![json!({"datatype": 1, "value": 1}); MAX_BATCH + 1]);
        assert_eq!(
            parse_modbus_writes(&many),
            Err("at most 10000 writes are allowed".to_owned())
        );
        let most = Value::Array(vec![json!({"datatype": 1, "value": 1}); MAX_BATCH]);
        assert_eq!(parse_modbus_writes(&most).map(|v| v.len()), Ok(MAX_BATCH));
    }

    #[test]
    fn writes_as_json() {
        assert_eq!(w(12, 5.0).to_json(), json!({"datatype": 12, "value": 5}));
        assert_eq!(w(12, 2.5).to_json(), json!({"datatype": 12, "value": 2.5}));
    }
}
