//! The points one device's charts draw: every datatype of the device over an interval, at the
//! resolution the API's rule gives that interval (rollups, or raw points for an hour or less).
//!
//! The same rollups as `GET /api/v2/data-downsampled`, read without the collection envelope:
//! only the numbers a chart needs, one statement for all datatypes, and on SQLite one JSON
//! array instead of a row per point (rows cross a thread one by one in sqlx), so a day of
//! 1 Hz points stays cheap enough for a page.

use crate::db::Db;
use crate::downsampled::Resolution;
use crate::{Result, StoreError};

/// One point: its datatype, time (bucket start or raw time, seconds), min, max and average.
#[derive(Clone, Copy, Debug, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct ChartPoint {
    pub datatype: i64,
    pub t: f64,
    pub min: f64,
    pub max: f64,
    pub avg: f64,
}

/// Most points returned: a day of 1 Hz points for two datatypes.
pub const MAX_POINTS: i64 = 200_000;

/// The device's points of group `id_group` after `from` (exclusive) up to now, ordered by
/// datatype then time, at `resolution`.
pub async fn device_points(
    db: &Db,
    id_group: &str,
    source_device: &str,
    from: i64,
    resolution: Resolution,
) -> Result<Vec<ChartPoint>> {
    let inner = match resolution.table() {
        Some(table) => format!(
            "SELECT c.datatype AS datatype, CAST(r.bucket AS DOUBLE PRECISION) AS t, r.min_val AS min, \
             r.max_val AS max, r.sum_val / r.count_val AS avg \
             FROM containers c JOIN {table} r ON r.container_key = c.container_key \
             WHERE c.id_group = $1 AND c.source_device = $2 AND r.bucket > $3 \
             ORDER BY c.datatype, r.bucket LIMIT {MAX_POINTS}"
        ),
        None => format!(
            "SELECT c.datatype AS datatype, CAST(r.seconds + r.microseconds / 1000000.0 AS DOUBLE PRECISION) AS t, \
             r.value AS min, r.value AS max, r.value AS avg \
             FROM containers c JOIN raw_points r ON r.container_key = c.container_key \
             WHERE c.id_group = $1 AND c.source_device = $2 AND r.seconds >= $3 \
             ORDER BY c.datatype, r.seconds, r.microseconds LIMIT {MAX_POINTS}"
        ),
    };
    let mut points: Vec<ChartPoint> = match db {
        Db::Sqlite(pool) => {
            let sql = format!(
                "SELECT COALESCE(json_group_array(json_object('datatype', datatype, 't', t, 'min', min, \
                 'max', max, 'avg', avg)), '[]') FROM ({inner})"
            );
            let text: String = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .bind(id_group)
                .bind(source_device)
                .bind(from)
                .fetch_one(pool)
                .await?;
            serde_json::from_str(&text).map_err(|e| StoreError::Decode(e.to_string()))?
        }
        Db::Postgres(pool) => {
            sqlx::query_as::<_, ChartPoint>(sqlx::AssertSqlSafe(inner))
                .bind(id_group)
                .bind(source_device)
                .bind(from)
                .fetch_all(pool)
                .await?
        }
    };
    // Raw rows were bounded by whole seconds; the interval itself is exclusive.
    points.retain(|p| p.t > from as f64);
    Ok(points)
}
