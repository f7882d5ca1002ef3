//! What expires when (docs/operations.md, "Retention"): the days a group keeps each kind of
//! time-series data, and the cutoff they give. Plain values, below the store's connections, so
//! that both the retention pass and the partition upkeep read them.

use serde::{Deserialize, Serialize};

use crate::sql::backend::Backend;

const DAY: i64 = 86_400;

/// Days to keep, per kind of data; `None` keeps forever. The record of
/// `GET /api/v2/group/<id>/retention`, in its field order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct Retention {
    pub raw_days: Option<i64>,
    pub minute_days: Option<i64>,
    pub hour_days: Option<i64>,
    pub day_days: Option<i64>,
}

/// One kind of time-series data: a table and its time column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Raw,
    Minute,
    Hour,
    Day,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Raw, Kind::Minute, Kind::Hour, Kind::Day];

    pub(crate) fn table(self) -> &'static str {
        match self {
            Kind::Raw => "raw_points",
            Kind::Minute => "rollup_minute",
            Kind::Hour => "rollup_hour",
            Kind::Day => "rollup_day",
        }
    }

    /// The column a row's time is in on `backend`, and how many of its units make a second:
    /// a raw point's second on SQLite, its microsecond on PostgreSQL (`point_time`), a rollup's
    /// bucket start (seconds).
    pub(crate) fn time_column(self, backend: Backend) -> (&'static str, i64) {
        match (self, backend) {
            (Kind::Raw, Backend::Sqlite) => ("seconds", 1),
            (Kind::Raw, Backend::Postgres) => ("time_us", crate::sql::point_time::MICROS),
            _ => ("bucket", 1),
        }
    }

    /// The days `retention` keeps of this kind.
    pub fn days(self, retention: &Retention) -> Option<i64> {
        let mut copy = *retention;
        *self.days_of(&mut copy)
    }

    /// The field of `retention` that holds this kind's days.
    pub fn days_of(self, retention: &mut Retention) -> &mut Option<i64> {
        match self {
            Kind::Raw => &mut retention.raw_days,
            Kind::Minute => &mut retention.minute_days,
            Kind::Hour => &mut retention.hour_days,
            Kind::Day => &mut retention.day_days,
        }
    }
}

/// The first second that `days` keeps at `now`: rows with an earlier time are removed.
pub fn cutoff(days: i64, now: i64) -> i64 {
    now.div_euclid(DAY) * DAY - days.saturating_mul(DAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cutoff_is_a_utc_midnight_days_before_today() {
        let now = 1_700_000_000; // 2023-11-14T22:13:20Z
        let midnight = 1_699_920_000; // 2023-11-14T00:00:00Z
        assert_eq!(cutoff(0, now), midnight);
        assert_eq!(cutoff(7, now), midnight - 7 * DAY);
        assert_eq!(cutoff(1, midnight), midnight - DAY);
    }
}
