//! Filter operands through the search model's validators (Yii2 `NumberValidator`,
//! `BooleanValidator`, `StringValidator`), with Yii's `NULL` and skip-on-empty rules.

use serde_json::Value;

use super::{AttrKind, Attribute, Scalar};
use crate::error::QueryError;
use crate::php;

/// An operand after `DataFilter::validateAttributeValue`.
#[derive(Debug, PartialEq)]
pub(super) enum Operand {
    /// SQL NULL: JSON null or the exact string "NULL" (`DataFilter::$nullValue`, Yii ≥ 2.0.40).
    Null,
    /// Skipped by the validator (`skipOnEmpty`): an empty container, or "" on a non-string
    /// attribute. What it matches is decided by the operator (docs/api.md, "Collections").
    Empty,
    /// A valid, typed value.
    Value(Scalar),
}

/// Validates one operand against the attribute's type.
pub(super) fn operand(attr: &Attribute, v: &Value) -> Result<Operand, QueryError> {
    match v {
        Value::Null => Ok(Operand::Null),
        Value::String(s) if s == "NULL" => Ok(Operand::Null),
        // Validator::isEmpty: '' and [] skip validation. "" is still a real value for a string
        // column (`name = ''`); for other types it matches nothing (docs/api.md, "Collections").
        Value::String(s) if s.is_empty() && attr.kind != AttrKind::String => Ok(Operand::Empty),
        Value::Array(a) if a.is_empty() => Ok(Operand::Empty),
        Value::Object(o) if o.is_empty() => Ok(Operand::Empty),
        _ => typed(attr, v).map(Operand::Value),
    }
}

/// The attribute's validator on a non-empty, non-NULL value.
fn typed(attr: &Attribute, v: &Value) -> Result<Scalar, QueryError> {
    let parsed = match attr.kind {
        AttrKind::Integer => integer(v),
        AttrKind::Number => number(v),
        AttrKind::Boolean => boolean(v),
        AttrKind::String => match v {
            Value::String(s) => Some(Scalar::Str(s.clone())),
            _ => None,
        },
    };
    parsed.ok_or_else(|| message(attr))
}

/// The validator's error message for this attribute.
fn message(attr: &Attribute) -> QueryError {
    let label = attr.label();
    QueryError::Filter(match attr.kind {
        AttrKind::Integer => format!("{label} must be an integer."),
        AttrKind::Number => format!("{label} must be a number."),
        AttrKind::Boolean => format!("{label} must be either \"1\" or \"0\"."),
        AttrKind::String => format!("{label} must be a string."),
    })
}

/// PCRE's `$` also matches before one final newline: Yii's patterns accept "5\n".
fn pattern_subject(s: &str) -> &str {
    s.strip_suffix('\n').unwrap_or(s)
}

/// `NumberValidator` with `integerOnly`: pattern `/^[+-]?\d+$/` on strings; JSON integers;
/// JSON floats whose PHP string form is an integer (5.0 → "5"). Booleans and arrays fail.
fn integer(v: &Value) -> Option<Scalar> {
    match v {
        Value::String(s) => {
            let text = pattern_subject(s);
            let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Valid for Yii even beyond 64 bits; such a value still compares as a number.
            Some(match text.parse::<i64>() {
                Ok(i) => Scalar::Int(i),
                Err(_) => Scalar::Float(finite(text.parse::<f64>().ok()?)),
            })
        }
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(Scalar::Int(i))
            } else if let Some(u) = n.as_u64() {
                Some(Scalar::Float(u as f64))
            } else {
                // PHP prints floats with 14 significant digits: only integral values below
                // 1e14 print as an integer and pass the pattern.
                let f = n.as_f64()?;
                (f.fract() == 0.0 && f.abs() < 1e14).then_some(Scalar::Int(f as i64))
            }
        }
        _ => None,
    }
}

/// `NumberValidator`: pattern `/^[-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$/` on strings; any JSON
/// number. Always a float.
fn number(v: &Value) -> Option<Scalar> {
    match v {
        Value::String(s) => {
            let text = pattern_subject(s);
            if !is_number_literal(text) {
                return None;
            }
            Some(Scalar::Float(finite(text.parse::<f64>().ok()?)))
        }
        Value::Number(n) => Some(Scalar::Float(n.as_f64()?)),
        _ => None,
    }
}

/// Matches `[-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?` exactly.
fn is_number_literal(s: &str) -> bool {
    let b = s.as_bytes();
    let digits_from = |mut i: usize| {
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let int_end = digits_from(i);
    let mut saw_digits = int_end > i;
    i = int_end;
    if b.get(i) == Some(&b'.') {
        // After a dot at least one digit is required ("5." fails, ".5" passes).
        let frac_end = digits_from(i + 1);
        if frac_end == i + 1 {
            return false;
        }
        saw_digits = true;
        i = frac_end;
    }
    if !saw_digits {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let exp_end = digits_from(j);
        if exp_end == j {
            return false;
        }
        i = exp_end;
    }
    i == b.len()
}

/// Overflowing literals ("1e999") are valid for Yii; they compare as the largest finite value.
fn finite(f: f64) -> f64 {
    if f.is_finite() {
        f
    } else if f.is_sign_negative() {
        f64::MIN
    } else {
        f64::MAX
    }
}

/// `BooleanValidator` (non-strict): the value must loosely equal (`==`) "1" or "0". In PHP 8
/// that is true/false, the numbers 1/0, and numeric strings worth 1 or 0 (" 1", "1.0", "0e5").
fn boolean(v: &Value) -> Option<Scalar> {
    let n = match v {
        Value::Bool(b) => return Some(Scalar::Bool(*b)),
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => php::numeric_value(s)?,
        _ => return None,
    };
    if n == 1.0 {
        Some(Scalar::Bool(true))
    } else if n == 0.0 {
        Some(Scalar::Bool(false))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ID: Attribute = Attribute::new("id", AttrKind::Integer);
    const WEIGHT: Attribute = Attribute::new("weight", AttrKind::Number);
    const ACTIVE: Attribute = Attribute::new("active", AttrKind::Boolean);
    const NAME: Attribute = Attribute::new("name", AttrKind::String);

    fn ok(attr: &Attribute, v: Value) -> Scalar {
        match operand(attr, &v) {
            Ok(Operand::Value(s)) => s,
            other => panic!("{v}: {other:?}"),
        }
    }

    fn err(attr: &Attribute, v: Value) -> String {
        match operand(attr, &v) {
            Err(QueryError::Filter(m)) => m,
            other => panic!("{v}: {other:?}"),
        }
    }

    #[test]
    fn integers() {
        assert_eq!(ok(&ID, json!("5")), Scalar::Int(5));
        assert_eq!(ok(&ID, json!("-5")), Scalar::Int(-5));
        assert_eq!(ok(&ID, json!("+5")), Scalar::Int(5));
        assert_eq!(ok(&ID, json!("007")), Scalar::Int(7));
        assert_eq!(ok(&ID, json!("5\n")), Scalar::Int(5));
        assert_eq!(ok(&ID, json!(5)), Scalar::Int(5));
        assert_eq!(ok(&ID, json!(5.0)), Scalar::Int(5));
        assert_eq!(ok(&ID, json!(u64::MAX)), Scalar::Float(u64::MAX as f64));
        assert_eq!(ok(&ID, json!("99999999999999999999")), Scalar::Float(1e20));
        for bad in [
            json!("abc"),
            json!("1.5"),
            json!(" 5"),
            json!("5 "),
            json!("1e3"),
            json!("-"),
            json!(1.5),
            json!(true),
            json!([1]),
            json!({"a": 1}),
            json!("5\n\n"),
        ] {
            assert_eq!(err(&ID, bad), "Id must be an integer.");
        }
    }

    #[test]
    fn numbers() {
        assert_eq!(ok(&WEIGHT, json!("1.5")), Scalar::Float(1.5));
        assert_eq!(ok(&WEIGHT, json!(".5")), Scalar::Float(0.5));
        assert_eq!(ok(&WEIGHT, json!("-1.23e-10")), Scalar::Float(-1.23e-10));
        assert_eq!(ok(&WEIGHT, json!("5")), Scalar::Float(5.0));
        assert_eq!(ok(&WEIGHT, json!(2)), Scalar::Float(2.0));
        assert_eq!(ok(&WEIGHT, json!("1e999")), Scalar::Float(f64::MAX));
        for bad in [
            json!("x"),
            json!("5."),
            json!("1e"),
            json!("."),
            json!("1.2.3"),
            json!(false),
            json!(["1"]),
        ] {
            assert_eq!(err(&WEIGHT, bad), "Weight must be a number.");
        }
    }

    #[test]
    fn booleans() {
        for t in [json!("1"), json!(" 1"), json!("1.0"), json!(1), json!(true), json!(1.0)] {
            assert_eq!(ok(&ACTIVE, t), Scalar::Bool(true));
        }
        for f in [json!("0"), json!("-0"), json!("0e5"), json!(0), json!(false)] {
            assert_eq!(ok(&ACTIVE, f), Scalar::Bool(false));
        }
        for bad in [json!("yes"), json!("true"), json!("2"), json!(2), json!(["1"])] {
            assert_eq!(err(&ACTIVE, bad), "Active must be either \"1\" or \"0\".");
        }
    }

    #[test]
    fn strings() {
        assert_eq!(ok(&NAME, json!("x")), Scalar::Str("x".into()));
        assert_eq!(ok(&NAME, json!("")), Scalar::Str(String::new()));
        for bad in [json!(5), json!(true), json!(["a"])] {
            assert_eq!(err(&NAME, bad), "Name must be a string.");
        }
    }

    #[test]
    fn null_and_empty() {
        for attr in [&ID, &WEIGHT, &ACTIVE, &NAME] {
            assert_eq!(operand(attr, &json!(null)), Ok(Operand::Null));
            assert_eq!(operand(attr, &json!("NULL")), Ok(Operand::Null));
            assert_eq!(operand(attr, &json!([])), Ok(Operand::Empty));
            assert_eq!(operand(attr, &json!({})), Ok(Operand::Empty));
        }
        assert_eq!(operand(&ID, &json!("")), Ok(Operand::Empty));
        assert_eq!(operand(&ACTIVE, &json!("")), Ok(Operand::Empty));
        // "null" is just a string.
        assert_eq!(err(&ID, json!("null")), "Id must be an integer.");
    }
}
