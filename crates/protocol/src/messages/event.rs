//! `v1/gateway/events` (docs/gateway-protocol.md, "Messages"): coded events of the gateway or of an
//! asset behind it, one object or a batch, stored with `from_device` 1.

use serde_json::{Map, Value};

use super::{Shape, array_payload, batch, source_json, source_of};
use crate::json;
use crate::rejection::{RejectReason, Rejection};
use crate::timestamp::Timestamp;

/// One event reported by a gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// `serial_hardware` of the asset it concerns; `None` is the gateway itself.
    pub device: Option<String>,
    /// When it happened; `None`: when the cloud received it.
    pub ts: Option<Timestamp>,
    /// The event code (`type` on the wire), e.g. 420 for a Z-wave exclusion outcome.
    pub event_type: i64,
    /// The value as stored (events keep text). A JSON number becomes serde_json's text of it:
    /// `1` → `"1"`, `2.5` → `"2.5"`, `1e3` → `"1000.0"`.
    pub value: String,
    /// The datatype the event is about, when there is one.
    pub datatype: Option<u32>,
}

impl Event {
    /// The protocol's JSON object; `value` always written as a string.
    pub fn to_json(&self) -> Value {
        let mut map = source_json(self.device.as_deref(), self.ts);
        map.insert("type".into(), Value::from(self.event_type));
        map.insert("value".into(), Value::from(self.value.as_str()));
        if let Some(datatype) = self.datatype {
            map.insert("datatype".into(), Value::from(datatype));
        }
        Value::Object(map)
    }

    /// The payload of one event, as a gateway publishes it (for the simulator).
    pub fn to_payload(&self) -> Vec<u8> {
        json::to_bytes(&self.to_json())
    }
}

/// A batch of events as one payload (a JSON array).
pub fn events_payload(events: &[Event]) -> Vec<u8> {
    array_payload(events, Event::to_json)
}

/// Parses an events payload: one object or an array (`[]` gives no event). Refused whole when
/// anything is invalid: `type` missing or not an integer, `value` missing
/// ([`RejectReason::BadField`]) or neither a string nor a number ([`RejectReason::BadValue`]),
/// `datatype` not a non-negative 32-bit integer ([`RejectReason::BadDatatype`]), and `device` /
/// `ts` / batch size as for measurements ([`super::parse_measurements`]).
pub fn parse_events(payload: &[u8], now: i64) -> Result<Vec<Event>, Rejection> {
    batch(payload, Shape::ObjectOrArray, "an events message", |map| {
        event(map, now)
    })
}

fn event(map: &Map<String, Value>, now: i64) -> Result<Event, Rejection> {
    let (device, ts) = source_of(map, now)?;
    let event_type = json::required(map, "type")?
        .as_i64()
        .ok_or_else(|| json::bad_field("type must be an integer event code"))?;
    let value = match json::required(map, "value")? {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => {
            return Err(Rejection::invalid(
                RejectReason::BadValue,
                "value must be a string or a number",
            ));
        }
    };
    let datatype = json::optional(map, "datatype")
        .map(|v| {
            json::datatype_value(v).ok_or_else(|| {
                Rejection::invalid(
                    RejectReason::BadDatatype,
                    "datatype must be a non-negative integer up to 4294967295",
                )
            })
        })
        .transpose()?;
    Ok(Event {
        device,
        ts,
        event_type,
        value,
        datatype,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_763_726_400;

    fn parse(text: &str) -> Result<Vec<Event>, Rejection> {
        parse_events(text.as_bytes(), NOW)
    }

    fn reason(text: &str) -> RejectReason {
        parse(text).unwrap_err().reason()
    }

    #[test]
    fn the_specification_example() {
        let got = parse(r#"{"device": "Z-1", "ts": 1763726400, "type": 310, "value": "1", "datatype": 12}"#);
        assert_eq!(
            got,
            Ok(vec![Event {
                device: Some("Z-1".into()),
                ts: Timestamp::new(1_763_726_400, 0),
                event_type: 310,
                value: "1".into(),
                datatype: Some(12),
            }])
        );
    }

    #[test]
    fn values_as_text() {
        let value = |v: &str| {
            parse(&format!(r#"{{"type": 1, "value": {v}}}"#)).unwrap()[0]
                .value
                .clone()
        };
        assert_eq!(value("1"), "1");
        assert_eq!(value("-7"), "-7");
        assert_eq!(value("2.5"), "2.5");
        assert_eq!(value("1e3"), "1000.0");
        assert_eq!(value("18446744073709551615"), "18446744073709551615");
        assert_eq!(value(r#""""#), "");
        assert_eq!(value(r#""excluded""#), "excluded");
    }

    #[test]
    fn minimal_and_batches() {
        let got = parse(r#"[{"type": -5, "value": 0, "datatype": null, "extra": 1}, {"type": 420, "value": "0"}]"#);
        let got = got.unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].event_type, got[0].value.as_str(), got[0].datatype),
            (-5, "0", None)
        );
        assert_eq!(got[1].device, None);
        assert_eq!(got[1].ts, None);
        assert_eq!(parse("[]"), Ok(vec![]));
    }

    #[test]
    fn rejections() {
        assert_eq!(reason(r#"{"value": "1"}"#), RejectReason::BadField);
        assert_eq!(reason(r#"{"type": null, "value": "1"}"#), RejectReason::BadField);
        assert_eq!(reason(r#"{"type": 1.5, "value": "1"}"#), RejectReason::BadField);
        assert_eq!(reason(r#"{"type": "310", "value": "1"}"#), RejectReason::BadField);
        assert_eq!(
            reason(r#"{"type": 18446744073709551615, "value": "1"}"#),
            RejectReason::BadField
        );
        assert_eq!(reason(r#"{"type": 1}"#), RejectReason::BadField);
        assert_eq!(reason(r#"{"type": 1, "value": true}"#), RejectReason::BadValue);
        assert_eq!(reason(r#"{"type": 1, "value": [1]}"#), RejectReason::BadValue);
        assert_eq!(reason(r#"{"type": 1, "value": {}}"#), RejectReason::BadValue);
        assert_eq!(reason(r#"{"type": 1, "value": "a\u0000"}"#), RejectReason::BadField);
        for dt in ["-1", "1.5", "\"12\"", "4294967296", "true"] {
            let text = format!(r#"{{"type": 1, "value": "1", "datatype": {dt}}}"#);
            assert_eq!(reason(&text), RejectReason::BadDatatype, "{dt}");
        }
        assert_eq!(
            reason(r#"{"type": 1, "value": "1", "ts": 1}"#),
            RejectReason::BadTimestamp
        );
        assert_eq!(
            reason(r#"{"type": 1, "value": "1", "device": ""}"#),
            RejectReason::BadField
        );
        assert_eq!(reason(r#"[{"type": 1, "value": "1"}, 3]"#), RejectReason::BadField);
        assert_eq!(
            parse(r#"[{"type": 1, "value": "1"}, {"type": 1, "value": false}]"#)
                .unwrap_err()
                .description(),
            "item 1: value must be a string or a number"
        );
    }

    #[test]
    fn payloads() {
        let e = Event {
            device: Some("Z-1".into()),
            ts: Timestamp::new(1_763_726_400, 1),
            event_type: 420,
            value: "0".into(),
            datatype: Some(3),
        };
        assert_eq!(
            String::from_utf8(e.to_payload()).unwrap(),
            r#"{"device":"Z-1","ts":1763726400.000001,"type":420,"value":"0","datatype":3}"#
        );
        assert_eq!(parse_events(&e.to_payload(), NOW), Ok(vec![e.clone()]));
        let bare = Event {
            device: None,
            ts: None,
            event_type: 1,
            value: String::new(),
            datatype: None,
        };
        let both = vec![e, bare];
        assert_eq!(parse_events(&events_payload(&both), NOW), Ok(both));
    }
}
