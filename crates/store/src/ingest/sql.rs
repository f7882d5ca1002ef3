//! The statements of a batch's points as SQL text and values: multi-row inserts of the points
//! (with or without skipping those already stored), the webhook queue rows they route, and the
//! helpers every statement of the ingest path shares (placeholders of both dialects, chunks
//! below SQLite's parameter bound).

use std::collections::HashMap;

use sea_query::{Value, Values};
use sea_query_sqlx::SqlxValues;

use super::Point;
use crate::sql::backend::Backend;
use crate::sql::point_time;
use crate::tables::webhooks::packed::{self, PackedPoint};

/// Rows per statement: well below SQLite's 32,766 bound parameters.
pub(super) const CHUNK: usize = 1000;

/// One statement of a batch.
pub(super) struct Statement {
    pub sql: String,
    pub values: SqlxValues,
}

/// Placeholders for `rows` rows of `width` values: `($1, $2), ($3, $4)` on PostgreSQL, and
/// `(?, ?), (?, ?)` on SQLite, where a numbered name costs a linear search per bound value
/// (`sqlite3_bind_parameter_name`), which made a 5,000-value statement quadratic.
pub(super) fn placeholders(rows: usize, width: usize, backend: Backend) -> String {
    let mut out = String::with_capacity(rows * width * 6);
    for r in 0..rows {
        out.push_str(if r == 0 { "(" } else { ", (" });
        for c in 0..width {
            if c > 0 {
                out.push_str(", ");
            }
            match backend {
                Backend::Sqlite => out.push('?'),
                Backend::Postgres => {
                    out.push('$');
                    out.push_str(&(r * width + c + 1).to_string());
                }
            }
        }
        out.push(')');
    }
    out
}

pub(super) fn int(v: i64) -> Value {
    Value::BigInt(Some(v))
}

pub(super) fn real(v: f64) -> Value {
    Value::Double(Some(v))
}

/// Statements of up to [`CHUNK`] rows of `width` values each: `sql` receives the placeholders.
pub(super) fn chunked<T>(
    rows: &[T],
    width: usize,
    backend: Backend,
    sql: impl Fn(&str) -> String,
    values: impl Fn(&T) -> Vec<Value>,
) -> Vec<Statement> {
    rows.chunks(CHUNK)
        .map(|chunk| Statement {
            sql: sql(&placeholders(chunk.len(), width, backend)),
            values: SqlxValues(Values(chunk.iter().flat_map(&values).collect())),
        })
        .collect()
}

/// How a batch's raw points go in: statements of many rows (SQLite), or the whole batch as
/// columns (PostgreSQL), copied in binary (`copy`) or, on the retry of a batch holding resent
/// points, inserted by one statement that unnests four arrays: one statement with four
/// parameters either way, instead of one per thousand rows with four thousand parameters.
pub(super) enum Inserts {
    Statements(Vec<Statement>),
    Columns(PointColumns),
}

impl Default for Inserts {
    fn default() -> Inserts {
        Inserts::Statements(Vec::new())
    }
}

/// Points as PostgreSQL's columns, in key order: the time in microseconds (`point_time`).
#[derive(Default)]
pub(super) struct PointColumns {
    pub keys: Vec<i64>,
    pub times: Vec<i64>,
    pub values: Vec<f64>,
    pub sessions: Vec<Option<i64>>,
}

impl PointColumns {
    pub(super) fn of(points: &[Point]) -> PointColumns {
        let mut c = PointColumns::default();
        for p in points {
            c.keys.push(p.container_key);
            c.times.push(point_time::time_us(p.seconds, p.microseconds));
            c.values.push(p.value);
            c.sessions.push(p.session_key);
        }
        c
    }
}

/// SQLite's inserts of points, ignoring any already stored.
///
/// `INSERT OR IGNORE` rather than `ON CONFLICT DO NOTHING`: the latter still lets a
/// NOT NULL violation abort the statement, so SQLite keeps a statement journal of every page
/// the statement changes; with OR IGNORE no row can abort it and the journal is skipped. The
/// two differ only for a null in a NOT NULL column, which OR IGNORE skips: keys are integers,
/// the session may be null, and a value is null only if it is NaN (SQLite binds NaN as NULL;
/// the protocol refuses non-finite values). A skipped row is not lost silently either: the
/// write counts the rows each insert took and fails when they fall short of the new points.
pub(super) fn insert_points(points: &[Point]) -> Vec<Statement> {
    let sql = |rows: &str| {
        format!(
            "INSERT OR IGNORE INTO raw_points (container_key, seconds, microseconds, value, session_key) VALUES {rows}"
        )
    };
    chunked(points, 5, Backend::Sqlite, sql, |p| {
        vec![
            int(p.container_key),
            int(p.seconds),
            int(p.microseconds),
            real(p.value),
            Value::BigInt(p.session_key),
        ]
    })
}

/// Most points one outbox row holds: a delivery takes whole rows and splits the last one it
/// needs, so a row is rewritten at most a few times.
const OUTBOX_ROW_POINTS: usize = 2_000;

/// Queues every point for each webhook of its series' group: for each webhook its points of
/// the batch, in the order of `points` (the order the gateways sent them in), packed into rows
/// of at most [`OUTBOX_ROW_POINTS`]; returns the statements and the number of points queued
/// (a point once per webhook).
pub(super) fn queue_points(
    points: &[Point],
    targets: &HashMap<i64, &[String]>,
    backend: Backend,
) -> (Vec<Statement>, usize) {
    let mut by_hook: Vec<(&String, Vec<PackedPoint>)> = Vec::new();
    let mut index: HashMap<&String, usize> = HashMap::new();
    for p in points {
        for hook in targets.get(&p.container_key).copied().unwrap_or_default() {
            let at = *index.entry(hook).or_insert_with(|| {
                by_hook.push((hook, Vec::new()));
                by_hook.len() - 1
            });
            by_hook[at].1.push(PackedPoint {
                container_key: p.container_key,
                time_us: point_time::time_us(p.seconds, p.microseconds),
                value: p.value,
            });
        }
    }
    let queued = by_hook.iter().map(|(_, points)| points.len()).sum();
    let rows: Vec<(&String, &[PackedPoint])> = by_hook
        .iter()
        .flat_map(|(hook, points)| points.chunks(OUTBOX_ROW_POINTS).map(move |part| (*hook, part)))
        .collect();
    let sql = |rows: &str| format!("INSERT INTO webhook_outbox (id_webhook, items, points) VALUES {rows}");
    let statements = chunked(&rows, 3, backend, sql, |(hook, part)| {
        vec![
            Value::String(Some(hook.to_string())),
            int(part.len() as i64),
            Value::Bytes(Some(packed::pack(part.iter().copied()))),
        ]
    });
    (statements, queued)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_number_rows_and_columns() {
        assert_eq!(placeholders(2, 3, Backend::Postgres), "($1, $2, $3), ($4, $5, $6)");
        assert_eq!(placeholders(1, 1, Backend::Postgres), "($1)");
        assert_eq!(placeholders(2, 2, Backend::Sqlite), "(?, ?), (?, ?)");
    }
}
