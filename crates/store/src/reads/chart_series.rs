//! The points one device's charts draw: every datatype of the device over an interval, at the
//! resolution the API's rule gives that interval (rollups, or raw points for an hour or less),
//! merged by the database into the chart's pixel columns.
//!
//! A chart cannot show more points than it has columns, so the database groups the rollups or
//! raw points of each column (lowest minimum, highest maximum, average of the values) and a day
//! of 1 Hz points costs a page a few hundred rows, not eighty thousand. On SQLite the rows come
//! back as one JSON array (rows cross a thread one by one in sqlx).

use crate::database::Result;
use crate::database::StoreError;
use crate::database::db::Db;
use crate::reads::downsampled::Resolution;
use crate::sql::point_time::{self, TimePart};

/// One point: its datatype, time (the middle of its pixel column), min, max and average.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChartPoint {
    pub datatype: i64,
    pub t: f64,
    pub min: f64,
    pub max: f64,
    pub avg: f64,
}

/// The interval of a chart and how many pixel columns it has.
#[derive(Clone, Copy, Debug)]
pub struct Columns {
    /// Exclusive start, Unix seconds.
    pub from: i64,
    /// End, Unix seconds.
    pub to: i64,
    pub count: i64,
}

impl Columns {
    /// The middle of column `col`.
    fn middle(&self, col: i64) -> f64 {
        let width = (self.to - self.from).max(1) as f64 / self.count as f64;
        self.from as f64 + (col as f64 + 0.5) * width
    }
}

/// The device's points of group `id_group` in the chart's interval at `resolution`, one per
/// datatype and pixel column that holds data, ordered by datatype then time.
pub async fn device_points(
    db: &Db,
    id_group: &str,
    source_device: &str,
    columns: Columns,
    resolution: Resolution,
) -> Result<Vec<ChartPoint>> {
    let span = (columns.to - columns.from).max(1);
    // Integer arithmetic on both databases: the column of a time t in (from, to] is
    // ceil((t - from) * n / span) - 1, so that `to` itself falls in the last column (a raw
    // point in the whole second of `from` lands in column 0: integer division truncates).
    let inner = match resolution.table() {
        Some(table) => format!(
            "SELECT c.datatype AS datatype, ((r.bucket - $3) * $4 - 1) / $5 AS col, MIN(r.min_val) AS min, \
             MAX(r.max_val) AS max, SUM(r.sum_val) / CAST(SUM(r.count_val) AS DOUBLE PRECISION) AS avg \
             FROM containers c JOIN {table} r ON r.container_key = c.container_key \
             WHERE c.id_group = $1 AND c.source_device = $2 AND r.bucket > $3 AND r.bucket <= $6 \
             GROUP BY c.datatype, col ORDER BY c.datatype, col"
        ),
        None => {
            let seconds = TimePart::Seconds.sql(db.backend(), "r");
            let within = point_time::seconds_within_sql(db.backend(), "r", "$3", "$6");
            format!(
                "SELECT c.datatype AS datatype, (({seconds} - $3) * $4 - 1) / $5 AS col, MIN(r.value) AS min, \
                 MAX(r.value) AS max, AVG(r.value) AS avg \
                 FROM containers c JOIN raw_points r ON r.container_key = c.container_key \
                 WHERE c.id_group = $1 AND c.source_device = $2 AND {within} \
                 GROUP BY c.datatype, col ORDER BY c.datatype, col"
            )
        }
    };
    // The parameters of `inner` in its order, bound alike on both databases (the two query
    // types share no trait to bind through).
    macro_rules! bound {
        ($query:expr) => {
            $query
                .bind(id_group)
                .bind(source_device)
                .bind(columns.from)
                .bind(columns.count)
                .bind(span)
                .bind(columns.to)
        };
    }
    let rows: Vec<(i64, i64, f64, f64, f64)> = match db {
        Db::Sqlite(pool, ..) => {
            let sql = format!(
                "SELECT COALESCE(json_group_array(json_array(datatype, col, min, max, avg)), '[]') FROM ({inner})"
            );
            let text: String = bound!(sqlx::query_scalar(sqlx::AssertSqlSafe(sql)))
                .fetch_one(pool)
                .await?;
            serde_json::from_str(&text).map_err(|e| StoreError::Decode(e.to_string()))?
        }
        Db::Postgres(pool) => {
            bound!(sqlx::query_as::<_, (i64, i64, f64, f64, f64)>(sqlx::AssertSqlSafe(
                inner
            )))
            .fetch_all(pool)
            .await?
        }
    };
    Ok(rows
        .into_iter()
        .map(|(datatype, col, min, max, avg)| ChartPoint {
            datatype,
            t: columns.middle(col),
            min,
            max,
            avg,
        })
        .collect())
}
