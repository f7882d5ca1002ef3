//! The `ts` of measurements and events (docs/gateway-protocol.md, "Messages"): Unix seconds with a
//! fraction, kept as whole seconds plus microseconds, rounded to the nearest microsecond
//! (docs/gateway-protocol.md, "Messages").

use serde_json::{Number, Value};

use crate::rejection::{RejectReason, Rejection};

/// 2000-01-01T00:00:00Z: no `ts` before it is accepted (docs/gateway-protocol.md, "Messages").
pub const MIN_SECONDS: i64 = 946_684_800;
/// How far a `ts` may be ahead of the cloud's clock (docs/gateway-protocol.md, "Messages": one
/// day).
pub const MAX_AHEAD_SECONDS: i64 = 86_400;

const MICROS_PER_SECOND: u32 = 1_000_000;

/// A point in time as the store keeps it: `seconds + microseconds / 10⁶` since the Unix epoch.
/// The derived order is the order in time, because `microseconds` is always below 10⁶.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Timestamp {
    /// Whole seconds since 1970-01-01T00:00:00Z (the floor, also for negative times).
    pub seconds: i64,
    /// The fraction, in `0..1_000_000`.
    pub microseconds: u32,
}

impl Timestamp {
    /// A timestamp, or `None` when `microseconds` is not below one million.
    pub fn new(seconds: i64, microseconds: u32) -> Option<Timestamp> {
        (microseconds < MICROS_PER_SECOND).then_some(Timestamp { seconds, microseconds })
    }

    /// Unix seconds with a fraction, rounded to the nearest microsecond (docs/gateway-protocol.md,
    /// "Messages": `.1` → 100000); a fraction that rounds up to a whole second carries into
    /// `seconds` (`.9999996` → next second, 0). `None` for NaN, infinities and times outside `i64`.
    pub fn from_unix_f64(unix: f64) -> Option<Timestamp> {
        // 2^63 as f64, exactly; the valid floors are [-2^63, 2^63).
        const LIMIT: f64 = 9_223_372_036_854_775_808.0;
        let floor = unix.floor();
        if !(-LIMIT..LIMIT).contains(&floor) {
            return None;
        }
        // `unix - floor` is exact in binary floating point; the product is off by far less
        // than the half microsecond that rounding forgives.
        let micros = ((unix - floor) * f64::from(MICROS_PER_SECOND)).round();
        let seconds = floor as i64;
        if micros >= f64::from(MICROS_PER_SECOND) {
            Some(Timestamp {
                seconds: seconds.checked_add(1)?,
                microseconds: 0,
            })
        } else {
            Some(Timestamp {
                seconds,
                microseconds: micros as u32,
            })
        }
    }

    /// The nearest `f64` to `seconds.microseconds`. [`Timestamp::from_unix_f64`] gives the same
    /// timestamp back for every time from 1970 up to the year 2242, where an `f64` stops
    /// resolving microseconds.
    pub fn to_f64(&self) -> f64 {
        let approx = self.seconds as f64 + f64::from(self.microseconds) / f64::from(MICROS_PER_SECOND);
        if self.seconds < 0 {
            return approx;
        }
        // Parsing the decimal text rounds once, correctly; the sum above rounds twice.
        format!("{}.{:06}", self.seconds, self.microseconds)
            .parse()
            .unwrap_or(approx)
    }

    /// Reads a `ts` and checks it against the window [2000-01-01, now + 1 day]
    /// (docs/gateway-protocol.md, "Messages"). The bounds apply to the rounded value. An integer is
    /// taken exactly; any other number is rounded.
    pub(crate) fn from_json(value: &Value, now: i64) -> Result<Timestamp, Rejection> {
        let bad = |detail: &str| Rejection::invalid(RejectReason::BadTimestamp, detail);
        let Value::Number(n) = value else {
            return Err(bad("ts must be a number of Unix seconds"));
        };
        let ts = match (n.as_i64(), n.as_f64()) {
            (Some(seconds), _) => Timestamp {
                seconds,
                microseconds: 0,
            },
            (None, Some(unix)) => Timestamp::from_unix_f64(unix).ok_or_else(|| bad("ts is out of range"))?,
            (None, None) => return Err(bad("ts is out of range")),
        };
        if ts.seconds < MIN_SECONDS {
            return Err(bad("ts is before 2000-01-01T00:00:00Z"));
        }
        let latest = Timestamp {
            seconds: now.saturating_add(MAX_AHEAD_SECONDS),
            microseconds: 0,
        };
        if ts > latest {
            return Err(bad("ts is more than one day ahead of the cloud's clock"));
        }
        Ok(ts)
    }

    /// The protocol's JSON number: an integer when there is no fraction (`1763726400`), else
    /// seconds with the fraction (`1763726400.25`).
    pub(crate) fn to_json(self) -> Value {
        if self.microseconds == 0 {
            Value::from(self.seconds)
        } else {
            Number::from_f64(self.to_f64()).map_or(Value::Null, Value::Number)
        }
    }
}

#[cfg(test)]
mod tests;
