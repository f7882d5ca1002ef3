//! How values read on a page: UTC times, ages, numbers, and query strings.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use time::OffsetDateTime;
use time::macros::format_description;

/// `2026-11-22 05:34:46 UTC`, or an em dash for no time.
pub fn utc(seconds: Option<i64>) -> String {
    let Some(at) = seconds.and_then(|s| OffsetDateTime::from_unix_timestamp(s).ok()) else {
        return "—".into();
    };
    at.format(format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC"))
        .unwrap_or_default()
}

/// A device time the API writes as 0 until known (`last_data_at`): `None` for 0.
pub fn known(seconds: i64) -> Option<i64> {
    (seconds > 0).then_some(seconds)
}

/// How long ago `seconds` was, in the largest whole unit (`42 s ago`, `3 h ago`).
pub fn ago(seconds: Option<i64>, now: i64) -> String {
    let Some(at) = seconds else {
        return "never".into();
    };
    let d = (now - at).max(0);
    match d {
        0..60 => format!("{d} s ago"),
        60..3600 => format!("{} min ago", d / 60),
        3600..86_400 => format!("{} h ago", d / 3600),
        _ => format!("{} d ago", d / 86_400),
    }
}

/// A measurement as people read it: up to 6 significant decimals, no trailing zeros, and
/// exponent form for very large or small magnitudes.
pub fn number(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return value.to_string();
    }
    let magnitude = value.abs();
    if !(1e-4..1e9).contains(&magnitude) {
        return format!("{value:.4e}");
    }
    let text = format!("{value:.6}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A size in bytes as people read it: `512 B`, `300.0 KiB`, `1.0 MiB`.
pub fn bytes(n: i64) -> String {
    match n {
        ..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KiB", n as f64 / 1024.0),
        _ => format!("{:.1} MiB", n as f64 / 1_048_576.0),
    }
}

/// What a query-string value keeps as it is: RFC 3986's unreserved characters.
const ENCODED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// Percent-encodes one query-string value.
pub fn url_encode(value: &str) -> String {
    utf8_percent_encode(value, ENCODED).to_string()
}

/// `?a=1&b=2` from pairs, leaving out empty values.
pub fn query(pairs: &[(&str, &str)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{}={}", url_encode(k), url_encode(v)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_numbers_read_well() {
        assert_eq!(utc(Some(1_763_726_400)), "2025-11-21 12:00:00 UTC");
        assert_eq!(utc(None), "—");
        assert_eq!(ago(Some(100), 190), "1 min ago");
        assert_eq!(ago(Some(100), 100 + 3 * 86_400), "3 d ago");
        assert_eq!(number(21.5), "21.5");
        assert_eq!(number(-0.000_123), "-0.000123");
        assert_eq!(number(1.602_176_634e-19), "1.6022e-19");
        assert_eq!(query(&[("range", "1d"), ("page", "")]), "?range=1d");
        assert_eq!(url_encode("/devices/a-b c"), "%2Fdevices%2Fa-b%20c");
    }
}
