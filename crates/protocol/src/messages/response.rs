//! `v1/gateway/responses/<request_id>` (docs/gateway-protocol.md, "Commands"): a gateway's answer
//! to a command, in the envelope the HTTP API passes through.

use serde_json::{Map, Value};

use crate::json;
use crate::rejection::Rejection;

/// The answer to one command request: `{"status": …, "payload": …}`.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandResponse {
    /// The HTTP status the API answers with (200, or 400 / 404 / 501 on failure), 100–599.
    pub status: u16,
    /// The body passed through to the API client; usually an object, any JSON value but `null`.
    pub payload: Value,
}

impl CommandResponse {
    /// A success: status 200 with `payload`.
    pub fn success(payload: Value) -> CommandResponse {
        CommandResponse { status: 200, payload }
    }

    /// A failure as docs/gateway-protocol.md (docs/gateway-protocol.md, "Commands") writes it:
    /// `{"result": "failed", "cause": …}` with the given status (for example 501 with cause `Wifi
    /// disabled`).
    pub fn failure(status: u16, cause: &str) -> CommandResponse {
        let mut payload = Map::new();
        payload.insert("result".into(), Value::from("failed"));
        payload.insert("cause".into(), Value::from(cause));
        CommandResponse {
            status,
            payload: Value::Object(payload),
        }
    }

    /// The payload, as a gateway publishes it (for the simulator).
    pub fn to_payload(&self) -> Vec<u8> {
        let mut map = Map::new();
        map.insert("status".into(), Value::from(self.status));
        map.insert("payload".into(), self.payload.clone());
        json::to_bytes(&Value::Object(map))
    }
}

/// Parses a command response: an object with `status`, an integer from 100 to 599, and
/// `payload`, any JSON value but `null`. Every rejection is [`crate::RejectReason::BadField`].
pub fn parse_response(payload: &[u8]) -> Result<CommandResponse, Rejection> {
    let value = json::read(payload)?;
    let map = json::object(&value, "a command response")?;
    let status = json::required(map, "status")?
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
        .filter(|s| (100..=599).contains(s))
        .ok_or_else(|| json::bad_field("status must be an HTTP status code (an integer from 100 to 599)"))?;
    let payload = json::required(map, "payload")?.clone();
    Ok(CommandResponse { status, payload })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RejectReason;
    use serde_json::json;

    #[test]
    fn parses_envelopes() {
        let got = parse_response(br#"{"status": 200, "payload": {"wifiAccessPoints": [], "result": "success"}}"#);
        assert_eq!(
            got,
            Ok(CommandResponse::success(
                json!({"wifiAccessPoints": [], "result": "success"})
            ))
        );
        let got = parse_response(br#"{"status": 501, "payload": {"result": "failed", "cause": "Wifi disabled"}}"#);
        assert_eq!(got, Ok(CommandResponse::failure(501, "Wifi disabled")));
        let got = parse_response(br#"{"payload": "pong", "status": 100, "extra": 1}"#).unwrap();
        assert_eq!((got.status, got.payload), (100, json!("pong")));
    }

    #[test]
    fn rejections() {
        for (text, message) in [
            (r#"{"payload": {}}"#, "status is required"),
            (r#"{"status": 200}"#, "payload is required"),
            (r#"{"status": 200, "payload": null}"#, "payload is required"),
            (r#"[200, {}]"#, "a command response must be a JSON object"),
        ] {
            let err = parse_response(text.as_bytes()).unwrap_err();
            assert_eq!(err.reason(), RejectReason::BadField, "{text}");
            assert_eq!(err.description(), message, "{text}");
        }
        for status in ["99", "600", "-200", "200.0", "\"200\"", "65736", "true"] {
            let text = format!(r#"{{"status": {status}, "payload": {{}}}}"#);
            let err = parse_response(text.as_bytes()).unwrap_err();
            assert_eq!(
                err.description(),
                "status must be an HTTP status code (an integer from 100 to 599)",
                "{status}"
            );
        }
    }

    #[test]
    fn payloads() {
        let r = CommandResponse::success(json!({"data": "pong", "result": "success"}));
        assert_eq!(
            String::from_utf8(r.to_payload()).unwrap(),
            r#"{"status":200,"payload":{"data":"pong","result":"success"}}"#
        );
        assert_eq!(parse_response(&r.to_payload()), Ok(r));
    }
}
