//! Reading a payload into a serde_json value, and the field rules every message shares: null
//! means absent, identifiers are short printable text, datatypes are canonical integers.

use serde_json::{Map, Number, Value};

use crate::rejection::{RejectReason, Rejection};

/// Longest serial, asset type or software version, in characters.
pub(crate) const MAX_IDENTIFIER_CHARS: usize = 64;
/// Longest asset label, in characters.
pub(crate) const MAX_LABEL_CHARS: usize = 255;
/// How much of a client's text an error message quotes.
const QUOTE_CHARS: usize = 32;
/// Integers up to 2^53 are exact in an `f64`, so they can be written as JSON integers.
const EXACT_INTEGER: f64 = 9_007_199_254_740_992.0;

/// UTF-8 → JSON → a value free of U+0000. serde_json bounds the nesting (128 levels) and refuses
/// numbers that overflow an `f64`, so neither can cause harm later.
pub(crate) fn read(payload: &[u8]) -> Result<Value, Rejection> {
    let text = std::str::from_utf8(payload).map_err(|_| Rejection::NotUtf8)?;
    let value: Value = serde_json::from_str(text).map_err(|e| Rejection::NotJson(e.to_string()))?;
    reject_nul(&value)?;
    Ok(value)
}

/// Refuses U+0000 anywhere, in keys too: PostgreSQL can store it neither in `text` nor in
/// `jsonb`, so a message holding one could never be committed. Walks with an explicit stack.
fn reject_nul(value: &Value) -> Result<(), Rejection> {
    let nul = || Rejection::invalid(RejectReason::BadField, "text must not contain U+0000");
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if s.contains('\0') => return Err(nul()),
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                if map.keys().any(|k| k.contains('\0')) {
                    return Err(nul());
                }
                stack.extend(map.values());
            }
            _ => {}
        }
    }
    Ok(())
}

/// Shorthand for a [`RejectReason::BadField`] rejection.
pub(crate) fn bad_field(detail: impl Into<String>) -> Rejection {
    Rejection::invalid(RejectReason::BadField, detail)
}

/// The top level of a single message: it must be an object.
pub(crate) fn object<'a>(value: &'a Value, what: &str) -> Result<&'a Map<String, Value>, Rejection> {
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(bad_field(format!("{what} must be a JSON object"))),
    }
}

/// An optional key: absent and `null` both mean "not given", as JSON encoders write `None`
/// either way.
pub(crate) fn optional<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).filter(|v| !v.is_null())
}

/// A required key; `null` counts as missing.
pub(crate) fn required<'a>(map: &'a Map<String, Value>, key: &str) -> Result<&'a Value, Rejection> {
    optional(map, key).ok_or_else(|| bad_field(format!("{key} is required")))
}

/// A string of at most `max_chars` characters without control characters. Empty allowed.
pub(crate) fn text(value: &Value, key: &str, max_chars: usize) -> Result<String, Rejection> {
    let Value::String(s) = value else {
        return Err(bad_field(format!("{key} must be a string")));
    };
    if s.chars().nth(max_chars).is_some() {
        return Err(bad_field(format!("{key} must be at most {max_chars} characters")));
    }
    if s.chars().any(char::is_control) {
        return Err(bad_field(format!("{key} must not contain control characters")));
    }
    Ok(s.clone())
}

/// A serial or type: non-empty, at most 64 characters, no control characters.
pub(crate) fn identifier(value: &Value, key: &str) -> Result<String, Rejection> {
    let s = text(value, key, MAX_IDENTIFIER_CHARS)?;
    if s.is_empty() {
        return Err(bad_field(format!("{key} must not be empty")));
    }
    Ok(s)
}

/// A datatype given as a JSON value (event `datatype`, modbus-write): an integer in `u32`.
pub(crate) fn datatype_value(value: &Value) -> Option<u32> {
    value.as_u64().and_then(|n| u32::try_from(n).ok())
}

/// A datatype written as an object key (measurement `values`): canonical decimal digits only,
/// `0` or no leading zero, at most `u32::MAX`. `"-1"`, `"+1"`, `"01"`, `"1.5"`, `"1e2"`, `" 1"`
/// and `""` are refused, so each datatype has exactly one spelling and a message cannot carry
/// two values for one datatype under different keys.
pub(crate) fn datatype_key(key: &str) -> Option<u32> {
    let canonical = key == "0" || (!key.starts_with('0') && !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit()));
    if canonical { key.parse().ok() } else { None }
}

/// A client's text for an error message: escaped, and cut short so that an event description
/// stays small whatever was sent.
pub(crate) fn quoted(s: &str) -> String {
    let mut cut: String = s.chars().take(QUOTE_CHARS).collect();
    if s.chars().nth(QUOTE_CHARS).is_some() {
        cut.push('…');
    }
    format!("{cut:?}")
}

/// A number as the protocol writes it: integral values as JSON integers (`1013`, not `1013.0`),
/// others in the shortest form that reads back to the same `f64`. NaN and infinities have no
/// JSON form and become `null`, which the reader refuses.
pub(crate) fn number(value: f64) -> Value {
    if value.fract() == 0.0 && value.abs() <= EXACT_INTEGER {
        Value::from(value as i64)
    } else {
        Number::from_f64(value).map_or(Value::Null, Value::Number)
    }
}

/// Serializes a value; serializing a `Value` cannot fail (its keys are strings).
pub(crate) fn to_bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_payloads() {
        assert_eq!(read(b"{\"a\": 1}"), Ok(json!({"a": 1})));
        assert_eq!(read(b"\xff{}"), Err(Rejection::NotUtf8));
        assert_eq!(read(b"").unwrap_err().reason(), RejectReason::NotJson);
        assert_eq!(read(b"{").unwrap_err().reason(), RejectReason::NotJson);
        assert_eq!(read(b"NaN").unwrap_err().reason(), RejectReason::NotJson);
        assert_eq!(read(b"[1e400]").unwrap_err().reason(), RejectReason::NotJson);
        assert_eq!(read(b"[-1e400]").unwrap_err().reason(), RejectReason::NotJson);
        assert_eq!(read(b"\"a\x00\"").unwrap_err().reason(), RejectReason::NotJson);
        assert!(matches!(read(b"{\"a\": 1} x"), Err(Rejection::NotJson(_))));
        // Past serde_json's recursion limit: refused, not a stack overflow.
        let deep = "[".repeat(100_000);
        assert!(matches!(read(deep.as_bytes()), Err(Rejection::NotJson(_))));
    }

    #[test]
    fn refuses_nul_anywhere() {
        for text in [
            r#""\u0000""#,
            r#"{"a": ["x", {"b": "y\u0000"}]}"#,
            r#"{"a\u0000": 1}"#,
            r#"[[[[{"x": {"\u0000": null}}]]]]"#,
        ] {
            let err = read(text.as_bytes()).unwrap_err();
            assert_eq!(err.reason(), RejectReason::BadField, "{text}");
            assert_eq!(err.description(), "text must not contain U+0000");
        }
        assert!(read(br#"{"a": "\u0001"}"#).is_ok());
    }

    #[test]
    fn datatype_keys() {
        for (key, want) in [("0", Some(0)), ("12", Some(12)), ("4294967295", Some(u32::MAX))] {
            assert_eq!(datatype_key(key), want, "{key}");
        }
        for key in [
            "",
            "-1",
            "+1",
            "01",
            "00",
            "1.5",
            "1e2",
            " 1",
            "1 ",
            "a",
            "4294967296",
            "99999999999999999999",
            "١",
        ] {
            assert_eq!(datatype_key(key), None, "{key}");
        }
    }

    #[test]
    fn datatype_values() {
        assert_eq!(datatype_value(&json!(0)), Some(0));
        assert_eq!(datatype_value(&json!(4_294_967_295_u64)), Some(u32::MAX));
        for v in [
            json!(-1),
            json!(1.5),
            json!(1.0),
            json!("1"),
            json!(4_294_967_296_u64),
            json!(null),
        ] {
            assert_eq!(datatype_value(&v), None, "{v}");
        }
    }

    #[test]
    fn field_rules() {
        let map = json!({"a": null, "b": 1}).as_object().unwrap().clone();
        assert_eq!(optional(&map, "a"), None);
        assert_eq!(optional(&map, "missing"), None);
        assert_eq!(optional(&map, "b"), Some(&json!(1)));
        assert_eq!(required(&map, "a").unwrap_err().description(), "a is required");
        assert_eq!(identifier(&json!("MB-7781"), "serial"), Ok("MB-7781".to_owned()));
        assert_eq!(identifier(&json!("é".repeat(64)), "serial"), Ok("é".repeat(64)));
        let err = |v: Value| identifier(&v, "serial").unwrap_err().description();
        assert_eq!(err(json!("")), "serial must not be empty");
        assert_eq!(err(json!("x".repeat(65))), "serial must be at most 64 characters");
        assert_eq!(err(json!("a\tb")), "serial must not contain control characters");
        assert_eq!(err(json!("a\u{7f}")), "serial must not contain control characters");
        assert_eq!(err(json!("a\u{85}")), "serial must not contain control characters");
        assert_eq!(err(json!(12)), "serial must be a string");
        assert_eq!(text(&json!(""), "label", 255), Ok(String::new()));
    }

    #[test]
    fn numbers_and_quotes() {
        assert_eq!(number(1013.0), json!(1013));
        assert_eq!(number(-0.0), json!(0));
        assert_eq!(number(21.5), json!(21.5));
        assert_eq!(number(1e300).to_string(), "1e+300");
        assert_eq!(number(f64::NAN), Value::Null);
        assert_eq!(number(f64::INFINITY), Value::Null);
        assert_eq!(quoted("ab\"c"), r#""ab\"c""#);
        assert_eq!(quoted(&"x".repeat(40)), format!("\"{}…\"", "x".repeat(32)));
    }
}
