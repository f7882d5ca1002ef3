//! What gateways send (docs/gateway-protocol.md, "Messages" to "Commands"): each topic's payload
//! parsed and validated into a typed message, and written back by `to_payload` for the simulator.
//!
//! Rules shared by every message: a message is accepted whole or refused whole; unknown keys
//! are ignored, so that newer gateway firmware can add keys without being refused; `null` counts
//! as absent; no text anywhere may contain U+0000.

mod asset;
mod event;
mod hello;
mod measurement;
mod power;
mod response;

use serde_json::{Map, Value};

use crate::json;
use crate::rejection::{RejectReason, Rejection};
use crate::timestamp::Timestamp;

pub use asset::{Asset, devices_payload, parse_devices};
pub use event::{Event, events_payload, parse_events};
pub use hello::{Hello, parse_hello};
pub use measurement::{Measurement, measurements_payload, parse_measurements};
pub use power::{Power, PowerState, parse_power};
pub use response::{CommandResponse, parse_response};

/// Most items (measurements, events, assets) in one message, so that one message cannot
/// monopolize the ingest path. About 8,000 one-value measurements fill the default 256 KiB packet.
pub const MAX_BATCH: usize = 10_000;

/// Which shapes a batch topic accepts at the top level.
#[derive(Clone, Copy)]
enum Shape {
    /// One object or an array of objects (docs/gateway-protocol.md, "Messages").
    ObjectOrArray,
    /// An array of objects only (docs/gateway-protocol.md, "Messages").
    Array,
}

/// Parses the items of a batch message. An error inside an array names the item (`item 3: …`),
/// counted from 0; the first error found is the one reported.
fn batch<T>(
    payload: &[u8],
    shape: Shape,
    what: &str,
    mut item: impl FnMut(&Map<String, Value>) -> Result<T, Rejection>,
) -> Result<Vec<T>, Rejection> {
    let value = json::read(payload)?;
    let items = match (&value, shape) {
        (Value::Object(map), Shape::ObjectOrArray) => return Ok(vec![item(map)?]),
        (Value::Array(items), _) => items,
        (_, Shape::ObjectOrArray) => {
            return Err(json::bad_field(format!(
                "{what} must be a JSON object or an array of objects"
            )));
        }
        (_, Shape::Array) => return Err(json::bad_field(format!("{what} must be a JSON array of objects"))),
    };
    if items.len() > MAX_BATCH {
        return Err(Rejection::invalid(
            RejectReason::TooLarge,
            format!("{} items in one message, at most {MAX_BATCH} allowed", items.len()),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::Object(map) => item(map).map_err(|e| in_item(e, i)),
            _ => Err(json::bad_field(format!("item {i}: must be a JSON object"))),
        })
        .collect()
}

/// Prefixes a rejection's detail with the position of the item it comes from.
fn in_item(rejection: Rejection, index: usize) -> Rejection {
    match rejection {
        Rejection::Invalid { reason, detail } => Rejection::invalid(reason, format!("item {index}: {detail}")),
        other => other,
    }
}

/// A batch written as the protocol's JSON array.
fn array_payload<T>(items: &[T], to_json: impl Fn(&T) -> Value) -> Vec<u8> {
    json::to_bytes(&Value::Array(items.iter().map(to_json).collect()))
}

/// `{device?, ts?}`, the head of a measurement or an event as the protocol writes it: the asset
/// it comes from (none: the gateway) and when (none: on receipt).
fn source_json(device: Option<&str>, ts: Option<Timestamp>) -> Map<String, Value> {
    let mut map = Map::new();
    if let Some(device) = device {
        map.insert("device".into(), Value::from(device));
    }
    if let Some(ts) = ts {
        map.insert("ts".into(), ts.to_json());
    }
    map
}

/// The `device` and `ts` of a measurement or an event, both optional: a serial, and a time
/// within the range `now` allows.
fn source_of(map: &Map<String, Value>, now: i64) -> Result<(Option<String>, Option<Timestamp>), Rejection> {
    let device = json::optional(map, "device")
        .map(|v| json::identifier(v, "device"))
        .transpose()?;
    let ts = json::optional(map, "ts")
        .map(|v| Timestamp::from_json(v, now))
        .transpose()?;
    Ok((device, ts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(payload: &str, shape: Shape) -> Result<Vec<i64>, Rejection> {
        batch(payload.as_bytes(), shape, "thing", |map| {
            json::required(map, "n")?
                .as_i64()
                .ok_or_else(|| json::bad_field("n must be an integer"))
        })
    }

    #[test]
    fn shapes() {
        assert_eq!(parse(r#"{"n": 1}"#, Shape::ObjectOrArray), Ok(vec![1]));
        assert_eq!(parse(r#"[{"n": 1}, {"n": 2}]"#, Shape::ObjectOrArray), Ok(vec![1, 2]));
        assert_eq!(parse("[]", Shape::ObjectOrArray), Ok(vec![]));
        assert_eq!(parse("[]", Shape::Array), Ok(vec![]));
        let err = |p: &str, s: Shape| parse(p, s).unwrap_err().description();
        assert_eq!(
            err(r#"{"n": 1}"#, Shape::Array),
            "thing must be a JSON array of objects"
        );
        assert_eq!(
            err("5", Shape::ObjectOrArray),
            "thing must be a JSON object or an array of objects"
        );
        assert_eq!(
            err("null", Shape::ObjectOrArray),
            "thing must be a JSON object or an array of objects"
        );
        assert_eq!(
            err(r#"[{"n": 1}, 5]"#, Shape::ObjectOrArray),
            "item 1: must be a JSON object"
        );
        assert_eq!(
            err(r#"[{"n": 1}, [{"n": 2}]]"#, Shape::ObjectOrArray),
            "item 1: must be a JSON object"
        );
        assert_eq!(
            err(r#"[{"n": 1}, {"n": "x"}]"#, Shape::Array),
            "item 1: n must be an integer"
        );
        assert_eq!(err(r#"{"n": "x"}"#, Shape::ObjectOrArray), "n must be an integer");
    }

    #[test]
    fn batch_limit() {
        let items = |n: usize| format!("[{}]", vec![r#"{"n":1}"#; n].join(","));
        assert_eq!(parse(&items(MAX_BATCH), Shape::Array).map(|v| v.len()), Ok(MAX_BATCH));
        let err = parse(&items(MAX_BATCH + 1), Shape::Array).unwrap_err();
        assert_eq!(err.reason(), RejectReason::TooLarge);
        assert_eq!(err.description(), "10001 items in one message, at most 10000 allowed");
        // The limit is checked before any item is read.
        let junk = format!("[{}]", vec!["1"; MAX_BATCH + 1].join(","));
        assert_eq!(parse(&junk, Shape::Array).unwrap_err().reason(), RejectReason::TooLarge);
    }
}
