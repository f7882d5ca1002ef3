//! What a job does to each device (docs/api.md, "Jobs"): a command as a gateway gets it, a
//! merge patch of the desired document, or a firmware update. Read once when the job is created
//! (the API's 422 names what is wrong) and again by the runner from the stored text.

use devicecloud_protocol::twin;
use devicecloud_protocol::{CommandMethod, CommandRequest};
use serde_json::{Map, Value, json};

/// A job's operation.
#[derive(Clone, Debug, PartialEq)]
pub enum Operation {
    /// `{"command": "<method>", "params": {…}}`.
    Command(CommandRequest),
    /// `{"twin": <desired merge patch>}`.
    Twin(Map<String, Value>),
    /// `{"firmware": "<id_firmware>"}`.
    Firmware(String),
}

impl Operation {
    /// The stored `kind` of the job.
    pub fn kind(&self) -> &'static str {
        match self {
            Operation::Command(_) => "command",
            Operation::Twin(_) => "twin",
            Operation::Firmware(_) => "firmware",
        }
    }

    /// Whether only gateways may be targeted (commands and firmware go to a gateway itself).
    pub fn gateways_only(&self) -> bool {
        !matches!(self, Operation::Twin(_))
    }
}

/// Reads an operation; the error is a sentence naming what is wrong.
pub fn parse(value: &Value) -> Result<Operation, String> {
    let Value::Object(map) = value else {
        return Err("Operation must be a JSON object with one of command, twin or firmware.".into());
    };
    let named: Vec<&str> = ["command", "twin", "firmware"]
        .into_iter()
        .filter(|k| map.contains_key(*k))
        .collect();
    let [kind] = named.as_slice() else {
        return Err("Operation must name exactly one of command, twin or firmware.".into());
    };
    match *kind {
        "command" => {
            let Some(Value::String(method)) = map.get("command") else {
                return Err("Operation command must be the name of a method.".into());
            };
            if method == CommandMethod::Update.as_str() {
                return Err(
                    "Operation command update is sent by firmware jobs: use {\"firmware\": \"<id_firmware>\"}.".into(),
                );
            }
            let params = map.get("params").cloned().unwrap_or(Value::Null);
            let payload = json!({"method": method, "params": params}).to_string();
            CommandRequest::parse(payload.as_bytes())
                .map(Operation::Command)
                .map_err(|e| format!("Operation: {e}."))
        }
        "twin" => match map.get("twin") {
            Some(Value::Object(patch)) => match twin::document_error(&Value::Object(patch.clone())) {
                None => Ok(Operation::Twin(patch.clone())),
                Some(why) => Err(format!("Operation twin {why}.")),
            },
            _ => Err("Operation twin must be a JSON object (a merge patch of the desired document).".into()),
        },
        _ => match map.get("firmware") {
            Some(Value::String(id)) if !id.is_empty() => Ok(Operation::Firmware(id.clone())),
            _ => Err("Operation firmware must be the id of a firmware image.".into()),
        },
    }
}

/// Reads a stored operation (written by [`parse`]'s caller, so it reads).
pub fn stored(text: &str) -> Option<Operation> {
    serde_json::from_str(text).ok().and_then(|v| parse(&v).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_read_as_the_api_takes_them() {
        let ping = parse(&json!({"command": "ping"})).unwrap();
        assert_eq!(ping.kind(), "command");
        assert!(ping.gateways_only());
        let wifi = parse(&json!({"command": "wifi-connect", "params": {"ssid": "plant"}})).unwrap();
        assert!(matches!(wifi, Operation::Command(r) if r.params["ssid"] == "plant"));
        let twin = parse(&json!({"twin": {"reporting_interval_s": 5}})).unwrap();
        assert!(!twin.gateways_only());
        assert_eq!(
            parse(&json!({"firmware": "f-1"})).unwrap(),
            Operation::Firmware("f-1".into())
        );
        for bad in [
            json!([]),
            json!({}),
            json!({"command": "ping", "twin": {}}),
            json!({"command": "dance"}),
            json!({"command": 1}),
            json!({"command": "wifi-connect", "params": {}}),
            json!({"command": "ping", "params": [1]}),
            json!({"twin": [1]}),
            json!({"twin": {"a": "x".repeat(33 * 1024)}}),
            json!({"firmware": ""}),
            json!({"command": "update", "params": {}}),
        ] {
            assert!(parse(&bad).is_err(), "{bad}");
        }
        let text = json!({"command": "ping"}).to_string();
        assert_eq!(stored(&text), Some(ping));
    }
}
