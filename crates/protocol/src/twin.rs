//! Device twins (docs/gateway-protocol.md, "Twin"; docs/api.md, "Twins"): the documents' rules
//! (JSON objects of at most 32 KiB, nested at most 8 levels), the JSON merge patch that changes
//! them (RFC 7386), the delta between desired and reported, and the three twin messages.
//!
//! Recursion here is bounded: every document and patch is checked against [`MAX_DEPTH`] before
//! it is merged or compared, and the JSON reader refuses nesting past 128 levels anyway.

use serde_json::{Map, Value};

use crate::json;
use crate::rejection::{RejectReason, Rejection};

/// Largest desired or reported document, serialized.
pub const MAX_DOCUMENT_BYTES: usize = 32 * 1024;
/// Deepest nesting of a document: the document itself is level 1, each object or array inside
/// it one more.
pub const MAX_DEPTH: usize = 8;

/// The topic the cloud publishes desired documents on (the gateway subscribes to it).
pub const DESIRED_TOPIC: &str = "v1/gateway/twin/desired";

/// Why a document breaks the rules, as a sentence.
pub fn document_error(document: &Value) -> Option<String> {
    if !document.is_object() {
        return Some("must be a JSON object".into());
    }
    if depth(document) > MAX_DEPTH {
        return Some(format!("must not be nested deeper than {MAX_DEPTH} levels"));
    }
    let bytes = serde_json::to_vec(document).map_or(usize::MAX, |b| b.len());
    if bytes > MAX_DOCUMENT_BYTES {
        return Some(format!(
            "must be at most {MAX_DOCUMENT_BYTES} bytes serialized ({bytes} given)"
        ));
    }
    None
}

/// How deeply `value` nests: a scalar 0, an object or array one more than its deepest member.
/// Walks with an explicit stack, whatever the input.
pub fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, level)) = stack.pop() {
        match v {
            Value::Object(map) => {
                deepest = deepest.max(level);
                stack.extend(map.values().map(|m| (m, level + 1)));
            }
            Value::Array(items) => {
                deepest = deepest.max(level);
                stack.extend(items.iter().map(|m| (m, level + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// Applies a JSON merge patch (RFC 7386) to `target`: members of an object patch replace or,
/// when null, remove the target's; nested objects merge; anything else replaces the target.
/// Callers bound the patch's depth first ([`document_error`]).
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(changes) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(map) = target {
        for (key, change) in changes {
            if change.is_null() {
                map.remove(key);
            } else {
                merge_patch(map.entry(key.as_str()).or_insert(Value::Null), change);
            }
        }
    }
}

/// The merge patch that turns `old` into `new` (both objects): removed keys as null, nested
/// objects as their own patch, changed values whole. Empty when nothing differs. The dashboard
/// edits a whole desired document and sends this.
pub fn diff_patch(old: &Map<String, Value>, new: &Map<String, Value>) -> Map<String, Value> {
    let mut patch = Map::new();
    for key in old.keys().filter(|k| !new.contains_key(*k)) {
        patch.insert(key.clone(), Value::Null);
    }
    for (key, value) in new {
        match (old.get(key), value) {
            (Some(before), after) if before == after => {}
            (Some(Value::Object(before)), Value::Object(after)) => {
                patch.insert(key.clone(), Value::Object(diff_patch(before, after)));
            }
            _ => {
                patch.insert(key.clone(), value.clone());
            }
        }
    }
    patch
}

/// Every desired key, recursively, whose value differs from the reported one or is missing
/// there: where both sides hold objects the delta holds only their differing members.
pub fn delta(desired: &Map<String, Value>, reported: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, want) in desired {
        match (want, reported.get(key)) {
            (_, Some(have)) if have == want => {}
            (Value::Object(want), Some(Value::Object(have))) => {
                let inner = delta(want, have);
                if !inner.is_empty() {
                    out.insert(key.clone(), Value::Object(inner));
                }
            }
            _ => {
                out.insert(key.clone(), want.clone());
            }
        }
    }
    out
}

/// A document stored as text, read back (an unreadable one, which the service never writes,
/// reads as empty).
pub fn document(text: &str) -> Map<String, Value> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// `v1/gateway/twin/desired`: the whole desired document of the gateway (`device` absent) or
/// of one of its assets, with its version. `desired` is the stored document's text.
pub fn desired_payload(device: Option<&str>, version: i64, desired: &str) -> Vec<u8> {
    let device = device.map_or(String::new(), |d| format!("\"device\":{},", Value::from(d)));
    format!("{{{device}\"version\":{version},\"desired\":{desired}}}").into_bytes()
}

/// A `v1/gateway/twin/desired` message, as a gateway reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    /// The asset it is for; `None`: the gateway itself.
    pub device: Option<String>,
    pub version: i64,
    pub desired: Map<String, Value>,
}

/// Parses `v1/gateway/twin/desired` (the gateway's side, as the simulator reads it).
pub fn parse_desired(payload: &[u8]) -> Result<Desired, Rejection> {
    let value = json::read(payload)?;
    let map = json::object(&value, "desired document")?;
    let version = json::required(map, "version")?
        .as_i64()
        .ok_or_else(|| json::bad_field("version must be an integer"))?;
    let desired = json::object(json::required(map, "desired")?, "desired")?.clone();
    Ok(Desired {
        device: device_of(map)?,
        version,
        desired,
    })
}

/// A `v1/gateway/twin/reported` message.
#[derive(Debug, Clone, PartialEq)]
pub struct Reported {
    /// The asset it is about; `None`: the gateway itself.
    pub device: Option<String>,
    /// The merge patch of the reported document.
    pub reported: Value,
    /// The desired version the device applied, if it says.
    pub version: Option<i64>,
}

impl Reported {
    /// The payload, as a gateway publishes it.
    pub fn to_payload(&self) -> Vec<u8> {
        let mut map = Map::new();
        if let Some(device) = &self.device {
            map.insert("device".into(), Value::from(device.as_str()));
        }
        map.insert("reported".into(), self.reported.clone());
        if let Some(version) = self.version {
            map.insert("version".into(), Value::from(version));
        }
        json::to_bytes(&Value::Object(map))
    }
}

/// The `device` of a twin message: absent or null for the gateway itself.
fn device_of(map: &Map<String, Value>) -> Result<Option<String>, Rejection> {
    json::optional(map, "device")
        .map(|d| json::identifier(d, "device"))
        .transpose()
}

/// Parses `v1/gateway/twin/reported`: `reported` an object within the document limits, `version`
/// a non-negative integer. The limits apply to the patch here; the server applies them to the
/// merged document too.
pub fn parse_reported(payload: &[u8]) -> Result<Reported, Rejection> {
    let value = json::read(payload)?;
    let map = json::object(&value, "twin report")?;
    let device = device_of(map)?;
    let reported = json::required(map, "reported")?;
    if !reported.is_object() {
        return Err(json::bad_field("reported must be a JSON object"));
    }
    if let Some(why) = document_error(reported) {
        return Err(too_large(format!("reported {why}")));
    }
    let version = match json::optional(map, "version") {
        None => None,
        Some(v) => Some(
            v.as_i64()
                .filter(|n| *n >= 0)
                .ok_or_else(|| json::bad_field("version must be a non-negative integer"))?,
        ),
    };
    Ok(Reported {
        device,
        reported: reported.clone(),
        version,
    })
}

/// The rejection of a document past the limits.
pub fn too_large(detail: impl Into<String>) -> Rejection {
    Rejection::invalid(RejectReason::TooLarge, detail)
}

/// Parses `v1/gateway/twin/get`: `{"device": "<serial>"?}` (an empty payload asks for the
/// gateway's own).
pub fn parse_get(payload: &[u8]) -> Result<Option<String>, Rejection> {
    if payload.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value = json::read(payload)?;
    device_of(json::object(&value, "twin request")?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn merge_patch_follows_rfc_7386() {
        // The examples of RFC 7386, appendix A.
        for (target, patch, result) in [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "b"}), json!({"b": "c"}), json!({"a": "b", "b": "c"})),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (json!({"a": "b", "b": "c"}), json!({"a": null}), json!({"b": "c"})),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (json!({"a": [{"b": "c"}]}), json!({"a": [1]}), json!({"a": [1]})),
            (json!({"e": null}), json!({"a": 1}), json!({"e": null, "a": 1})),
            (json!([1, 2]), json!({"a": "b", "c": null}), json!({"a": "b"})),
            (json!({}), json!({"a": {"bb": {"ccc": null}}}), json!({"a": {"bb": {}}})),
        ] {
            let mut doc = target.clone();
            merge_patch(&mut doc, &patch);
            assert_eq!(doc, result, "{target} + {patch}");
        }
    }

    #[test]
    fn a_diff_patch_turns_the_old_document_into_the_new() {
        let old = json!({"a": 1, "b": {"x": 1, "y": 2}, "c": [1], "gone": true});
        let new = json!({"a": 1, "b": {"x": 1, "z": 3}, "c": [2], "new": "n"});
        let patch = diff_patch(&obj(old.clone()), &obj(new.clone()));
        assert_eq!(
            Value::Object(patch.clone()),
            json!({"gone": null, "b": {"y": null, "z": 3}, "c": [2], "new": "n"})
        );
        let mut doc = old;
        merge_patch(&mut doc, &Value::Object(patch));
        assert_eq!(doc, new);
        assert!(diff_patch(&obj(new.clone()), &obj(new)).is_empty());
    }

    #[test]
    fn the_delta_holds_what_is_not_reported_yet() {
        let desired = json!({"interval": 60, "led": {"on": true, "colour": "red"}, "mode": "eco", "list": [1, 2]});
        let reported =
            json!({"interval": 60, "led": {"on": true, "colour": "blue"}, "mode": {"x": 1}, "list": [1], "extra": 5});
        assert_eq!(
            Value::Object(delta(&obj(desired.clone()), &obj(reported))),
            json!({"led": {"colour": "red"}, "mode": "eco", "list": [1, 2]})
        );
        assert!(delta(&obj(desired.clone()), &obj(desired)).is_empty());
        assert_eq!(
            Value::Object(delta(&obj(json!({"a": {}})), &obj(json!({})))),
            json!({"a": {}})
        );
    }

    #[test]
    fn documents_have_limits() {
        assert_eq!(document_error(&json!({"a": 1})), None);
        assert!(document_error(&json!([1])).unwrap().contains("JSON object"));
        let mut deep = json!(1);
        for _ in 0..8 {
            deep = json!({ "k": deep });
        }
        assert_eq!(depth(&deep), 8);
        assert_eq!(document_error(&deep), None);
        let deeper = json!({ "k": deep });
        assert!(document_error(&deeper).unwrap().contains("8 levels"));
        let big = json!({"a": "x".repeat(MAX_DOCUMENT_BYTES)});
        assert!(document_error(&big).unwrap().contains("bytes"));
        assert_eq!(depth(&json!({"a": [[1]]})), 3);
    }

    #[test]
    fn twin_messages() {
        let report = Reported {
            device: Some("Z-1".into()),
            reported: json!({"interval": 60}),
            version: Some(3),
        };
        assert_eq!(parse_reported(&report.to_payload()), Ok(report));
        let own = parse_reported(br#"{"reported": {}}"#).unwrap();
        assert_eq!((own.device, own.version), (None, None));
        for bad in [
            &br#"{"version": 1}"#[..],
            br#"{"reported": [1]}"#,
            br#"{"reported": {}, "version": -1}"#,
            br#"{"reported": {}, "version": 1.5}"#,
            br#"{"reported": {}, "device": ""}"#,
            b"[]",
        ] {
            assert!(parse_reported(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_get(b""), Ok(None));
        assert_eq!(parse_get(b"{}"), Ok(None));
        assert_eq!(parse_get(br#"{"device": "Z-1"}"#), Ok(Some("Z-1".into())));
        assert!(parse_get(b"1").is_err());
        let payload = desired_payload(Some("Z-\"1"), 4, r#"{"a":1}"#);
        let parsed = parse_desired(&payload).unwrap();
        assert_eq!((parsed.device.as_deref(), parsed.version), (Some("Z-\"1"), 4));
        let read: Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(read, json!({"device": "Z-\"1", "version": 4, "desired": {"a": 1}}));
        assert_eq!(desired_payload(None, 0, "{}"), br#"{"version":0,"desired":{}}"#);
    }
}
