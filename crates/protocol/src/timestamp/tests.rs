use super::*;

const NOW: i64 = 1_763_726_400;

fn ts(seconds: i64, microseconds: u32) -> Timestamp {
    Timestamp::new(seconds, microseconds).unwrap()
}

fn parse(text: &str) -> Result<Timestamp, Rejection> {
    Timestamp::from_json(&serde_json::from_str(text).unwrap(), NOW)
}

#[test]
fn rounds_to_the_nearest_microsecond() {
    let table = [
        ("1763726400", ts(1_763_726_400, 0)),
        ("1763726400.0", ts(1_763_726_400, 0)),
        ("1763726400.25", ts(1_763_726_400, 250_000)),
        ("1763726400.250000", ts(1_763_726_400, 250_000)),
        ("1763726400.1", ts(1_763_726_400, 100_000)),
        ("1763726400.123456", ts(1_763_726_400, 123_456)),
        ("1763726400.999999", ts(1_763_726_400, 999_999)),
        ("1763726400.9999996", ts(1_763_726_401, 0)),
        ("1763726400.99999999", ts(1_763_726_401, 0)),
        ("1763726400.0000004", ts(1_763_726_400, 0)),
        ("1763726400.0000006", ts(1_763_726_400, 1)),
        ("1763726400.5", ts(1_763_726_400, 500_000)),
        ("1.7637264001e9", ts(1_763_726_400, 100_000)),
        ("946684800", ts(MIN_SECONDS, 0)),
        ("946684799.9999999", ts(MIN_SECONDS, 0)),
    ];
    for (text, want) in table {
        assert_eq!(parse(text), Ok(want), "{text}");
    }
}

#[test]
fn window() {
    let bad = |text: &str| parse(text).unwrap_err().reason();
    assert_eq!(bad("946684799"), RejectReason::BadTimestamp);
    assert_eq!(bad("946684799.999"), RejectReason::BadTimestamp);
    assert_eq!(bad("0"), RejectReason::BadTimestamp);
    assert_eq!(bad("-1763726400"), RejectReason::BadTimestamp);
    assert_eq!(parse("1763812800"), Ok(ts(NOW + MAX_AHEAD_SECONDS, 0)));
    assert_eq!(bad("1763812800.000001"), RejectReason::BadTimestamp);
    assert_eq!(bad("1763812801"), RejectReason::BadTimestamp);
    assert_eq!(bad("18446744073709551615"), RejectReason::BadTimestamp);
    assert_eq!(bad("1e300"), RejectReason::BadTimestamp);
    assert_eq!(bad("-1e300"), RejectReason::BadTimestamp);
    assert_eq!(bad("\"1763726400\""), RejectReason::BadTimestamp);
    assert_eq!(bad("true"), RejectReason::BadTimestamp);
    assert_eq!(bad("[1763726400]"), RejectReason::BadTimestamp);
    // `now` at the edge of i64 saturates instead of overflowing.
    let far = serde_json::json!(i64::MAX);
    assert_eq!(Timestamp::from_json(&far, i64::MAX), Ok(ts(i64::MAX, 0)));
}

#[test]
fn from_f64_edges() {
    assert_eq!(Timestamp::from_unix_f64(f64::NAN), None);
    assert_eq!(Timestamp::from_unix_f64(f64::INFINITY), None);
    assert_eq!(Timestamp::from_unix_f64(f64::NEG_INFINITY), None);
    assert_eq!(Timestamp::from_unix_f64(1e19), None);
    assert_eq!(Timestamp::from_unix_f64(-1e19), None);
    assert_eq!(Timestamp::from_unix_f64(-0.25), Some(ts(-1, 750_000)));
    assert_eq!(Timestamp::from_unix_f64(0.0), Some(ts(0, 0)));
    assert_eq!(
        Timestamp::from_unix_f64(-9_223_372_036_854_775_808.0),
        Some(ts(i64::MIN, 0))
    );
    assert_eq!(Timestamp::new(1, 1_000_000), None);
}

#[test]
fn to_f64_round_trips() {
    for t in [
        ts(MIN_SECONDS, 0),
        ts(1_763_726_400, 1),
        ts(1_763_726_400, 100_000),
        ts(1_763_726_400, 999_999),
        ts(8_000_000_000, 999_999),
        ts(0, 5),
        ts(-1, 750_000),
    ] {
        assert_eq!(Timestamp::from_unix_f64(t.to_f64()), Some(t), "{t:?}");
    }
    assert_eq!(ts(1_763_726_400, 0).to_json().to_string(), "1763726400");
    assert_eq!(ts(1_763_726_400, 250_000).to_json().to_string(), "1763726400.25");
    assert_eq!(ts(1_763_726_400, 100_000).to_json().to_string(), "1763726400.1");
}
