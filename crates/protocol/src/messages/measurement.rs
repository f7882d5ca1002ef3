//! `v1/gateway/measurements` (docs/gateway-protocol.md, "Messages"): datatype → value pairs of the
//! gateway or of one asset behind it, one object or a batch.

use serde_json::{Map, Value};

use super::{Shape, array_payload, batch, source_json, source_of};
use crate::json;
use crate::rejection::{RejectReason, Rejection};
use crate::timestamp::Timestamp;

/// One measurement object: values of one source at one time.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// `serial_hardware` of the source asset; `None` is the gateway itself. An unknown serial
    /// onboards a new child device (docs/gateway-protocol.md, "Messages").
    pub device: Option<String>,
    /// When it was measured; `None`: when the cloud received it.
    pub ts: Option<Timestamp>,
    /// `(datatype, value)` in the order the message gives them. May be empty: `"values": {}` is
    /// valid and stores nothing. A datatype given twice keeps the last value (JSON's usual
    /// reading of a repeated key) at the place of the first.
    pub values: Vec<(u32, f64)>,
}

impl Measurement {
    /// The protocol's JSON object; keys absent when `None`, values in order.
    pub fn to_json(&self) -> Value {
        let mut map = source_json(self.device.as_deref(), self.ts);
        let values = self
            .values
            .iter()
            .map(|&(datatype, value)| (datatype.to_string(), json::number(value)))
            .collect();
        map.insert("values".into(), Value::Object(values));
        Value::Object(map)
    }

    /// The payload of one measurement, as a gateway publishes it (for the simulator). A
    /// non-finite value is written as `null`, which [`parse_measurements`] refuses.
    pub fn to_payload(&self) -> Vec<u8> {
        json::to_bytes(&self.to_json())
    }
}

/// A batch of measurements as one payload (a JSON array).
pub fn measurements_payload(measurements: &[Measurement]) -> Vec<u8> {
    array_payload(measurements, Measurement::to_json)
}

/// Parses a measurements payload: one object or an array (a batch; `[]` gives no measurement).
/// Refused whole when anything is invalid (docs/gateway-protocol.md, "Messages"): not JSON, a value
/// that is not a finite number ([`RejectReason::BadValue`]), a key of `values` that is not a
/// canonical datatype ([`RejectReason::BadDatatype`]), a `ts` before 2000-01-01T00:00:00Z or more
/// than one day after `now` (Unix seconds of the cloud's clock; [`RejectReason::BadTimestamp`]), a
/// bad `device` or `values` that is missing or not an object ([`RejectReason::BadField`]), more
/// than [`super::MAX_BATCH`] items ([`RejectReason::TooLarge`]).
pub fn parse_measurements(payload: &[u8], now: i64) -> Result<Vec<Measurement>, Rejection> {
    batch(payload, Shape::ObjectOrArray, "a measurements message", |map| {
        measurement(map, now)
    })
}

/// The largest magnitude a measurement value may have (docs/gateway-protocol.md, "Messages"):
/// far above any physical reading, and low enough that the sums of a rollup bucket (up to
/// about 10^8 points of one series) stay finite on both stores.
pub const MAX_MAGNITUDE: f64 = 1e300;

fn measurement(map: &Map<String, Value>, now: i64) -> Result<Measurement, Rejection> {
    let (device, ts) = source_of(map, now)?;
    let Value::Object(entries) = json::required(map, "values")? else {
        return Err(json::bad_field("values must be a JSON object of datatype → number"));
    };
    let values = entries
        .iter()
        .map(|(key, value)| {
            let datatype = json::datatype_key(key).ok_or_else(|| {
                Rejection::invalid(
                    RejectReason::BadDatatype,
                    format!(
                        "values: key {} is not a datatype (a non-negative integer up to 4294967295, \
                         without sign, fraction or leading zero)",
                        json::quoted(key)
                    ),
                )
            })?;
            match value.as_f64() {
                Some(v) if v.is_finite() && v.abs() <= MAX_MAGNITUDE => Ok((datatype, v)),
                Some(v) if v.is_finite() => Err(Rejection::invalid(
                    RejectReason::BadValue,
                    format!("values: datatype {datatype} must be at most 1e300 in magnitude"),
                )),
                _ => Err(Rejection::invalid(
                    RejectReason::BadValue,
                    format!("values: datatype {datatype} must be a finite number"),
                )),
            }
        })
        .collect::<Result<_, _>>()?;
    Ok(Measurement { device, ts, values })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_763_726_400;

    fn parse(text: &str) -> Result<Vec<Measurement>, Rejection> {
        parse_measurements(text.as_bytes(), NOW)
    }

    fn reject(text: &str) -> (RejectReason, String) {
        let err = parse(text).unwrap_err();
        (err.reason(), err.description())
    }

    #[test]
    fn the_specification_example() {
        let got = parse(r#"{"device": "MB-7781", "ts": 1763726400.250000, "values": {"12": 21.5, "13": 1013}}"#);
        assert_eq!(
            got,
            Ok(vec![Measurement {
                device: Some("MB-7781".into()),
                ts: Timestamp::new(1_763_726_400, 250_000),
                values: vec![(12, 21.5), (13, 1013.0)],
            }])
        );
    }

    #[test]
    fn optional_keys_and_order() {
        let got = parse(r#"{"values": {"13": -1.5e3, "0": 0, "12": 4294967296, "4294967295": 1e300}}"#).unwrap();
        assert_eq!(
            got,
            vec![Measurement {
                device: None,
                ts: None,
                values: vec![(13, -1500.0), (0, 0.0), (12, 4_294_967_296.0), (u32::MAX, 1e300)],
            }]
        );
        // null is absent; unknown keys are ignored; an empty values object is valid.
        let got = parse(r#"{"device": null, "ts": null, "values": {}, "extra": [1, {"x": "y"}]}"#).unwrap();
        assert_eq!(
            got,
            vec![Measurement {
                device: None,
                ts: None,
                values: vec![]
            }]
        );
        // A repeated datatype keeps the last value.
        assert_eq!(
            parse(r#"{"values": {"1": 1, "2": 2, "1": 3}}"#).unwrap()[0].values,
            vec![(1, 3.0), (2, 2.0)]
        );
    }

    #[test]
    fn batches() {
        assert_eq!(parse("[]"), Ok(vec![]));
        let got = parse(r#"[{"values": {"1": 1}}, {"device": "A", "ts": 946684800, "values": {"2": 2.5}}]"#).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].device.as_deref(), Some("A"));
        assert_eq!(got[1].ts, Timestamp::new(946_684_800, 0));
        assert_eq!(
            reject(r#"[{"values": {"1": 1}}, {"values": {"1": "x"}}]"#),
            (
                RejectReason::BadValue,
                "item 1: values: datatype 1 must be a finite number".into()
            )
        );
    }

    #[test]
    fn bad_values() {
        for text in [
            r#"{"values": {"12": "21.5"}}"#,
            r#"{"values": {"12": null}}"#,
            r#"{"values": {"12": true}}"#,
            r#"{"values": {"12": [1]}}"#,
            r#"{"values": {"12": {"v": 1}}}"#,
        ] {
            assert_eq!(reject(text).0, RejectReason::BadValue, "{text}");
        }
        // Finite but past the bound, which keeps rollup sums finite.
        assert_eq!(reject(r#"{"values": {"12": 1.7e308}}"#).0, RejectReason::BadValue);
        assert_eq!(reject(r#"{"values": {"12": -1e301}}"#).0, RejectReason::BadValue);
        assert!(parse(r#"{"values": {"12": -1e300}}"#).is_ok());
        // Too large for an f64: serde_json refuses the text itself.
        assert_eq!(reject(r#"{"values": {"12": 1e400}}"#).0, RejectReason::NotJson);
        assert_eq!(reject(r#"{"values": {"12": NaN}}"#).0, RejectReason::NotJson);
        assert_eq!(reject(r#"{"values": {"12": Infinity}}"#).0, RejectReason::NotJson);
    }

    #[test]
    fn bad_datatypes() {
        for key in ["-1", "1.5", "01", "+1", "", " 1", "1e2", "x", "4294967296", "12a"] {
            let text = format!(r#"{{"values": {{"{key}": 1}}}}"#);
            assert_eq!(reject(&text).0, RejectReason::BadDatatype, "{key}");
        }
        assert_eq!(
            reject(r#"{"values": {"01": 1}}"#).1,
            "values: key \"01\" is not a datatype (a non-negative integer up to 4294967295, without sign, \
             fraction or leading zero)"
        );
    }

    #[test]
    fn bad_timestamps() {
        for ts in ["946684799", "1763812801", "\"1763726400\"", "true", "-1", "1e300"] {
            let text = format!(r#"{{"ts": {ts}, "values": {{"1": 1}}}}"#);
            assert_eq!(reject(&text).0, RejectReason::BadTimestamp, "{ts}");
        }
    }

    #[test]
    fn bad_fields() {
        let long = format!(r#"{{"device": "{}", "values": {{}}}}"#, "x".repeat(65));
        for text in [
            "{}",
            r#"{"values": null}"#,
            r#"{"values": [1, 2]}"#,
            r#"{"values": 5}"#,
            r#"{"device": "", "values": {}}"#,
            r#"{"device": 7781, "values": {}}"#,
            r#"{"device": "a\nb", "values": {}}"#,
            r#"{"device": "a\u0000b", "values": {}}"#,
            &long,
            "5",
            "\"x\"",
            "null",
            "[5]",
        ] {
            assert_eq!(reject(text).0, RejectReason::BadField, "{text}");
        }
        assert_eq!(reject("{}").1, "values is required");
    }

    #[test]
    fn not_json() {
        assert_eq!(parse_measurements(b"\xc3\x28", NOW), Err(Rejection::NotUtf8));
        for text in ["", "{", "{\"values\": {}} {}", "{'values': {}}"] {
            assert!(matches!(parse(text), Err(Rejection::NotJson(_))), "{text}");
        }
    }

    #[test]
    fn payloads() {
        let m = Measurement {
            device: Some("MB-7781".into()),
            ts: Timestamp::new(1_763_726_400, 250_000),
            values: vec![(12, 21.5), (13, 1013.0)],
        };
        assert_eq!(
            String::from_utf8(m.to_payload()).unwrap(),
            r#"{"device":"MB-7781","ts":1763726400.25,"values":{"12":21.5,"13":1013}}"#
        );
        assert_eq!(parse_measurements(&m.to_payload(), NOW), Ok(vec![m.clone()]));
        let bare = Measurement {
            device: None,
            ts: None,
            values: vec![],
        };
        assert_eq!(String::from_utf8(bare.to_payload()).unwrap(), r#"{"values":{}}"#);
        let batch = vec![m, bare];
        assert_eq!(parse_measurements(&measurements_payload(&batch), NOW), Ok(batch));
        let nan = Measurement {
            device: None,
            ts: None,
            values: vec![(1, f64::NAN)],
        };
        assert_eq!(
            parse_measurements(&nan.to_payload(), NOW).unwrap_err().reason(),
            RejectReason::BadValue
        );
    }
}
