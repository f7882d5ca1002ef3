//! Where a raw point's time is kept on each database, and the SQL that reads it.
//!
//! SQLite keeps two integer columns, `seconds` and `microseconds`: its integers are
//! variable-length, so a whole-second time takes 4 bytes and its zero fraction none.
//! PostgreSQL's integers are fixed-width and its rows aligned to 8 bytes, so it keeps one
//! `BIGINT`, `time_us` (microseconds since the Unix epoch): a 48-byte row and a 16-byte key
//! instead of 56 and 24 (docs/operations.md, "Retention", gives the bytes a point takes).
//!
//! Every query on raw points builds its time expressions here, so that a condition on whole
//! seconds stays a range of the primary key (container, time) on both databases. Points are
//! never older than 2000-01-01 (the gateway protocol refuses them), so PostgreSQL's integer
//! division of a time is its floor.

use devicecloud_query::CompareOp;
use sea_query::{Expr, ExprTrait};

use crate::sql::backend::Backend;
use crate::sql::comparison;

/// Microseconds in a second.
pub(crate) const MICROS: i64 = 1_000_000;

/// A part of a raw point's time, as the API shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimePart {
    /// Whole Unix seconds (`timestamp_seconds`).
    Seconds,
    /// The fraction, `0..1_000_000` (`microseconds`).
    Micros,
}

impl TimePart {
    /// The part of the point aliased `table`, as SQL text.
    pub(crate) fn sql(self, backend: Backend, table: &str) -> String {
        match (self, backend) {
            (TimePart::Seconds, Backend::Sqlite) => format!("{table}.seconds"),
            (TimePart::Micros, Backend::Sqlite) => format!("{table}.microseconds"),
            (TimePart::Seconds, Backend::Postgres) => format!("({table}.time_us / {MICROS})"),
            (TimePart::Micros, Backend::Postgres) => format!("({table}.time_us % {MICROS})"),
        }
    }

    /// The part of the point aliased `table`.
    pub(crate) fn expr(self, backend: Backend, table: &str) -> Expr {
        Expr::cust(self.sql(backend, table))
    }

    /// What to order points by this part: whole seconds by the stored time, which the key
    /// serves (the tie-breakers after it order the fraction alike).
    pub(crate) fn sort_expr(self, backend: Backend, table: &'static str) -> Expr {
        match (self, backend) {
            (TimePart::Seconds, Backend::Postgres) => Expr::col((table, "time_us")),
            _ => self.expr(backend, table),
        }
    }
}

/// SQL for "the point aliased `table` lies in the whole seconds `from` to `to`, both included",
/// the bounds being SQL expressions (parameters): a range of the stored time.
pub(crate) fn seconds_within_sql(backend: Backend, table: &str, from: &str, to: &str) -> String {
    match backend {
        Backend::Sqlite => format!("{table}.seconds >= {from} AND {table}.seconds <= {to}"),
        Backend::Postgres => {
            format!("{table}.time_us >= {from} * {MICROS} AND {table}.time_us < ({to} + 1) * {MICROS}")
        }
    }
}

/// SQL for "the point aliased `table` lies in the microseconds `$1` (included) to `$2`
/// (excluded)"; on SQLite also "in the whole seconds `$3` to `$4`" (those of `$1` and of
/// `$2 - 1`), which keeps the condition a range of the key. Returns the SQL and how many
/// parameters it takes.
pub(crate) fn micros_within_sql(backend: Backend, table: &str) -> (String, usize) {
    match backend {
        Backend::Sqlite => (
            format!(
                "{table}.seconds >= $3 AND {table}.seconds <= $4 \
                 AND {table}.seconds * {MICROS} + {table}.microseconds >= $1 \
                 AND {table}.seconds * {MICROS} + {table}.microseconds < $2"
            ),
            4,
        ),
        Backend::Postgres => (format!("{table}.time_us >= $1 AND {table}.time_us < $2"), 2),
    }
}

/// SQL for the stored time of the points of `table` in microseconds since the Unix epoch.
pub(crate) fn time_us_sql(backend: Backend, table: &str) -> String {
    match backend {
        Backend::Sqlite => format!("({table}.seconds * {MICROS} + {table}.microseconds)"),
        Backend::Postgres => format!("{table}.time_us"),
    }
}

/// SQL for "the point aliased `table` is before the whole second `seconds`" (an SQL
/// expression): a range of the stored time.
pub(crate) fn before_second_sql(backend: Backend, table: &str, seconds: &str) -> String {
    match backend {
        Backend::Sqlite => format!("{table}.seconds < {seconds}"),
        Backend::Postgres => format!("{table}.time_us < {seconds} * {MICROS}"),
    }
}

/// SQL for "the point aliased `table` is at `seconds` and `micros`" (SQL expressions).
pub(crate) fn at_sql(backend: Backend, table: &str, seconds: &str, micros: &str) -> String {
    match backend {
        Backend::Sqlite => format!("{table}.seconds = {seconds} AND {table}.microseconds = {micros}"),
        Backend::Postgres => format!("{table}.time_us = {seconds} * {MICROS} + {micros}"),
    }
}

/// `seconds <op> value` for the points of `table`, as a range of the stored time (the key's
/// second column): on PostgreSQL a whole second is the range `[value, value + 1)` of `time_us`.
pub(crate) fn compare_seconds(backend: Backend, table: &'static str, op: CompareOp, value: i64) -> Expr {
    if backend == Backend::Sqlite {
        return comparison::compare(Expr::col((table, "seconds")), op, Expr::val(value));
    }
    let time = || Expr::col((table, "time_us"));
    // Saturating: a filter value far outside i64 microseconds matches as the nearest bound.
    let (start, next) = (
        value.saturating_mul(MICROS),
        value.saturating_add(1).saturating_mul(MICROS),
    );
    match op {
        CompareOp::Eq => time().gte(start).and(time().lt(next)),
        CompareOp::Neq => time().lt(start).or(time().gte(next)),
        CompareOp::Lt => time().lt(start),
        CompareOp::Lte => time().lt(next),
        CompareOp::Gt => time().gte(next),
        CompareOp::Gte => time().gte(start),
    }
}

/// SQL for the whole seconds of the aggregate `f` (`MIN`, `MAX`) of the stored time of
/// `table`'s points: the aggregate reads the stored column, so an index on it serves it.
pub(crate) fn seconds_of_aggregate(backend: Backend, f: &str, table: &str) -> String {
    match backend {
        Backend::Sqlite => format!("{f}({table}.seconds)"),
        Backend::Postgres => format!("({f}({table}.time_us) / {MICROS})"),
    }
}

/// The time PostgreSQL stores for `seconds` and `microseconds`.
pub(crate) fn time_us(seconds: i64, microseconds: i64) -> i64 {
    seconds.saturating_mul(MICROS).saturating_add(microseconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_second_is_a_range_of_microseconds_on_postgres() {
        let render = |op| {
            let mut select = sea_query::Query::select();
            select
                .expr(Expr::val(1))
                .from("raw_points")
                .and_where(compare_seconds(Backend::Postgres, "r", op, 7));
            select.to_string(sea_query::PostgresQueryBuilder)
        };
        assert!(render(CompareOp::Eq).ends_with(r#"WHERE "r"."time_us" >= 7000000 AND "r"."time_us" < 8000000"#));
        assert!(render(CompareOp::Lte).ends_with(r#"WHERE "r"."time_us" < 8000000"#));
        assert!(render(CompareOp::Gt).ends_with(r#"WHERE "r"."time_us" >= 8000000"#));
        assert!(render(CompareOp::Lt).ends_with(r#"WHERE "r"."time_us" < 7000000"#));
        assert_eq!(time_us(7, 250_000), 7_250_000);
        // "Not this second" stays one condition beside others.
        let mut select = sea_query::Query::select();
        select
            .expr(Expr::val(1))
            .from("raw_points")
            .and_where(Expr::col(("r", "container_key")).eq(1))
            .and_where(compare_seconds(Backend::Postgres, "r", CompareOp::Neq, 7));
        assert!(
            select.to_string(sea_query::PostgresQueryBuilder).ends_with(
                r#"WHERE "r"."container_key" = 1 AND ("r"."time_us" < 7000000 OR "r"."time_us" >= 8000000)"#
            ),
            "{}",
            select.to_string(sea_query::PostgresQueryBuilder)
        );
    }
}
