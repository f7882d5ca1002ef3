//! The few PHP scalar rules Yii2's behaviour rests on: `(int)` casts, numeric strings and
//! integer array keys (PHP 8.2, as Yii reads a query string).

/// The bytes PHP's numeric-string parser treats as whitespace (`" \t\n\r\v\f"`).
fn is_php_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C)
}

/// A number read from the start of a string.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum PhpNumber {
    Int(i64),
    Float(f64),
}

impl PhpNumber {
    fn as_f64(self) -> f64 {
        match self {
            PhpNumber::Int(i) => i as f64,
            PhpNumber::Float(f) => f,
        }
    }
}

/// The numeric prefix of `s` as PHP's `is_numeric_string` reads it with errors allowed:
/// leading whitespace, an optional sign, digits with an optional fraction, an optional exponent.
/// An integer literal too large for 64 bits becomes a float, as in PHP. Returns the number and
/// the byte length consumed, or `None` when `s` does not start with a number.
pub(crate) fn numeric_prefix(s: &str) -> Option<(PhpNumber, usize)> {
    let b = s.as_bytes();
    let digit_at = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let mut i = 0;
    while b.get(i).copied().is_some_and(is_php_space) {
        i += 1;
    }
    let start = i;
    if matches!(b.get(i), Some(b'+' | b'-')) {
        i += 1;
    }
    let int_start = i;
    while digit_at(i) {
        i += 1;
    }
    let int_digits = i - int_start;
    let mut is_float = false;
    if b.get(i) == Some(&b'.') {
        let mut j = i + 1;
        while digit_at(j) {
            j += 1;
        }
        // "1." and ".5" are numbers, a lone "." is not.
        if int_digits > 0 || j > i + 1 {
            is_float = true;
            i = j;
        }
    }
    if int_digits == 0 && !is_float {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let exp_start = j;
        while digit_at(j) {
            j += 1;
        }
        // The exponent counts only with at least one digit ("1e" reads as 1).
        if j > exp_start {
            is_float = true;
            i = j;
        }
    }
    let text = s.get(start..i)?;
    let number = if is_float {
        PhpNumber::Float(text.parse::<f64>().ok()?)
    } else {
        match text.parse::<i64>() {
            Ok(v) => PhpNumber::Int(v),
            Err(_) => PhpNumber::Float(text.parse::<f64>().ok()?),
        }
    };
    Some((number, i))
}

/// The value of `s` when the whole string is numeric in PHP 8 terms (surrounding whitespace
/// allowed): what a loose `==` against a numeric string compares.
pub(crate) fn numeric_value(s: &str) -> Option<f64> {
    let (number, end) = numeric_prefix(s)?;
    let rest = s.as_bytes().get(end..)?;
    rest.iter().all(|&b| is_php_space(b)).then(|| number.as_f64())
}

/// PHP's `(int)` cast of a string: the numeric prefix, truncated toward zero, saturated to the
/// 64-bit range (`zend_dval_to_lval_cap`); infinities and non-numbers give 0.
pub(crate) fn intval(s: &str) -> i64 {
    match numeric_prefix(s) {
        None => 0,
        Some((PhpNumber::Int(v), _)) => v,
        Some((PhpNumber::Float(f), _)) if !f.is_finite() => 0,
        // `as` truncates toward zero and saturates, like the cap.
        Some((PhpNumber::Float(f), _)) => f as i64,
    }
}

/// The integer a PHP array key string turns into (`ZEND_HANDLE_NUMERIC_STR`): a canonical
/// decimal ("0", "17", "-3"; not "01", "-0", "+1", " 1") within the 64-bit range.
pub(crate) fn int_key(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let mut bytes = digits.bytes();
    let first = bytes.next()?;
    if !first.is_ascii_digit() || (first == b'0' && digits.len() > 1) || !bytes.all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits == "0" && s.starts_with('-') {
        return None;
    }
    s.parse::<i64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intval_follows_php_casts() {
        for (s, v) in [
            ("5", 5),
            ("5abc", 5),
            ("1.9", 1),
            ("1e1", 10),
            (" 5", 5),
            ("\t\n5", 5),
            ("abc", 0),
            ("", 0),
            ("-3", -3),
            ("+7", 7),
            ("-1.9", -1),
            (".5", 0),
            ("1.", 1),
            ("1e", 1),
            ("1e+2", 100),
            ("1.5e1x", 15),
            ("0x1A", 0),
            ("99999999999999999999", i64::MAX),
            ("-99999999999999999999", i64::MIN),
            ("1e999", 0),
            ("9223372036854775807", i64::MAX),
            ("-", 0),
            ("e5", 0),
        ] {
            assert_eq!(intval(s), v, "(int) {s:?}");
        }
    }

    #[test]
    fn numeric_value_needs_the_whole_string() {
        assert_eq!(numeric_value(" 1 "), Some(1.0));
        assert_eq!(numeric_value("1.0"), Some(1.0));
        assert_eq!(numeric_value("0e5"), Some(0.0));
        assert_eq!(numeric_value("1x"), None);
        assert_eq!(numeric_value(""), None);
        assert_eq!(numeric_value("yes"), None);
    }

    #[test]
    fn int_keys_are_canonical_decimals() {
        assert_eq!(int_key("0"), Some(0));
        assert_eq!(int_key("17"), Some(17));
        assert_eq!(int_key("-3"), Some(-3));
        assert_eq!(int_key("-9223372036854775808"), Some(i64::MIN));
        for s in ["", "-", "-0", "01", "+1", " 1", "1 ", "1a", "9223372036854775808", "x"] {
            assert_eq!(int_key(s), None, "{s:?}");
        }
    }
}
