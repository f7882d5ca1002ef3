//! `v1/gateway/power` (docs/gateway-protocol.md, "Messages"): the module says it is turning off,
//! which closes a GO module's data session before it disconnects.

use serde_json::{Map, Value};

use crate::json;
use crate::rejection::Rejection;

/// A power message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Power {
    /// The announced state.
    pub state: PowerState,
}

/// The power states a gateway can announce; only `off` exists in v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PowerState {
    /// `off`: the module is being turned off.
    Off,
}

impl PowerState {
    /// The wire spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            PowerState::Off => "off",
        }
    }
}

impl Power {
    /// The payload, as a gateway publishes it: `{"state":"off"}`.
    pub fn to_payload(&self) -> Vec<u8> {
        let mut map = Map::new();
        map.insert("state".into(), Value::from(self.state.as_str()));
        json::to_bytes(&Value::Object(map))
    }
}

/// Parses a power payload: an object whose `state` is `"off"` (case-sensitive). Anything else is
/// [`crate::RejectReason::BadField`], so an unknown state never closes a data session.
pub fn parse_power(payload: &[u8]) -> Result<Power, Rejection> {
    let value = json::read(payload)?;
    let map = json::object(&value, "power")?;
    match json::required(map, "state")? {
        Value::String(s) if s == "off" => Ok(Power { state: PowerState::Off }),
        _ => Err(json::bad_field("state must be \"off\"")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RejectReason;

    #[test]
    fn parses_off() {
        let off = Power { state: PowerState::Off };
        assert_eq!(parse_power(br#"{"state": "off"}"#), Ok(off));
        assert_eq!(parse_power(br#"{"state": "off", "reason": "battery"}"#), Ok(off));
        assert_eq!(off.to_payload(), br#"{"state":"off"}"#);
        assert_eq!(parse_power(&off.to_payload()), Ok(off));
    }

    #[test]
    fn rejections() {
        for (text, message) in [
            ("{}", "state is required"),
            (r#"{"state": null}"#, "state is required"),
            (r#"{"state": "OFF"}"#, "state must be \"off\""),
            (r#"{"state": "on"}"#, "state must be \"off\""),
            (r#"{"state": 0}"#, "state must be \"off\""),
            (r#"["off"]"#, "power must be a JSON object"),
            (r#""off""#, "power must be a JSON object"),
        ] {
            let err = parse_power(text.as_bytes()).unwrap_err();
            assert_eq!(err.reason(), RejectReason::BadField, "{text}");
            assert_eq!(err.description(), message, "{text}");
        }
        assert!(matches!(parse_power(b"off"), Err(Rejection::NotJson(_))));
    }
}
