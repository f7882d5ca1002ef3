//! Statements over many rows at once: `IN (…)` lists and multi-row `VALUES`, with numbered
//! marks both databases read. A batch (a job's changes, a wave of gateways' reports) is then a
//! few statements however large, not a few per row: on SQLite every statement is a round trip
//! to the connection's thread.

use sea_query::Value;
use sea_query_sqlx::SqlxValues;

/// Rows one statement takes at most: a few values each, well under either database's limit of
/// bound values.
pub(crate) const ROWS_PER_STATEMENT: usize = 500;

/// `$1, $2, …` for `ids` and their values: an `IN (…)` list.
pub(crate) fn in_list<S: AsRef<str>>(ids: &[S]) -> (String, SqlxValues) {
    let marks = (1..=ids.len()).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ");
    let values = SqlxValues(sea_query::Values(
        ids.iter().map(|id| Value::from(id.as_ref())).collect(),
    ));
    (marks, values)
}

/// `UPDATE <table> SET <set> FROM (VALUES …) AS v WHERE <table>.<key> = v.column1 <also>`
/// over `rows` (each row's values in order: `v.column1`, `v.column2`, …; the first is the key),
/// then `now` as the mark `$now` that `set` may name. Both databases name the columns of a
/// `VALUES` list `column1`, `column2`, ….
pub(crate) fn update_from_values<const N: usize>(
    table: &str,
    key: &str,
    set: &str,
    also: &str,
    rows: &[[Value; N]],
    now: i64,
) -> (String, SqlxValues) {
    let marks = (0..rows.len())
        .map(|r| {
            let row: Vec<String> = (1..=N).map(|c| format!("${}", r * N + c)).collect();
            format!("({})", row.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ");
    let now_mark = format!("${}", rows.len() * N + 1);
    let set = set.replace("$now", &now_mark);
    let sql = format!("UPDATE {table} SET {set} FROM (VALUES {marks}) AS v WHERE {table}.{key} = v.column1 {also}");
    let mut values: Vec<Value> = rows.iter().flat_map(|row| row.iter().cloned()).collect();
    values.push(now.into());
    (sql, SqlxValues(sea_query::Values(values)))
}
