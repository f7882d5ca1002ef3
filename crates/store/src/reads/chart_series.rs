//! The points one device's charts draw: every datatype of the device over an interval, at the
//! resolution the API's rule gives that interval (rollups, or raw points for an hour or less),
//! merged by the database into the chart's pixel columns.
//!
//! A chart cannot show more points than it has columns, so the rollups of each column are
//! grouped in the database (lowest minimum, highest maximum, average of the values) and a day
//! of 1 Hz points costs a page a few hundred rows, not eighty thousand; on SQLite the rows come
//! back as one JSON array (rows cross a thread one by one in sqlx). Raw points, an hour or less,
//! are read through the chunks and grouped the same way here.

use std::collections::{BTreeMap, HashMap};

use crate::chunks::{self, Range};
use crate::database::Result;
use crate::database::StoreError;
use crate::database::db::{Db, values};
use crate::reads::downsampled::Resolution;
use crate::sql::point_time::MICROS;

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
    let Some(table) = resolution.table() else {
        return raw_points(db, id_group, source_device, columns).await;
    };
    let inner = format!(
        "SELECT c.datatype AS datatype, ((r.bucket - $3) * $4 - 1) / $5 AS col, MIN(r.min_val) AS min, \
         MAX(r.max_val) AS max, SUM(r.sum_val) / CAST(SUM(r.count_val) AS DOUBLE PRECISION) AS avg \
         FROM containers c JOIN {table} r ON r.container_key = c.container_key \
         WHERE c.id_group = $1 AND c.source_device = $2 AND r.bucket > $3 AND r.bucket <= $6 \
         GROUP BY c.datatype, col ORDER BY c.datatype, col"
    );
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

/// The raw points of an hour or less, read through [`chunks::scan`] (packed chunks and rows
/// alike) and grouped into the chart's columns here, as the rollups are grouped in SQL.
async fn raw_points(db: &Db, id_group: &str, source_device: &str, columns: Columns) -> Result<Vec<ChartPoint>> {
    let series: Vec<(i64, i64)> = db
        .rows(
            "SELECT container_key, datatype FROM containers WHERE id_group = $1 AND source_device = $2",
            values![id_group, source_device],
        )
        .await?;
    let datatypes: HashMap<i64, i64> = series.iter().copied().collect();
    let keys: Vec<i64> = datatypes.keys().copied().collect();
    let span = Ord::max(columns.to - columns.from, 1);
    // (datatype, column) → (min, max, sum, count)
    let mut cells: BTreeMap<(i64, i64), (f64, f64, f64, i64)> = BTreeMap::new();
    let range = Range::seconds(Some(columns.from), Some(columns.to));
    for points in chunks::scan(db, &keys, range, None).await? {
        let datatype = datatypes[&points.container_key];
        let p = &points.points;
        for i in 0..p.len() {
            let seconds = p.times_us[i].div_euclid(MICROS);
            // As the rollups' column: integer division, which truncates as SQL's does.
            let col = ((seconds - columns.from) * columns.count - 1) / span;
            let v = p.values[i];
            let cell = cells.entry((datatype, col)).or_insert((v, v, 0.0, 0));
            cell.0 = cell.0.min(v);
            cell.1 = cell.1.max(v);
            cell.2 += v;
            cell.3 += 1;
        }
    }
    Ok(cells
        .into_iter()
        .map(|((datatype, col), (min, max, sum, count))| ChartPoint {
            datatype,
            t: columns.middle(col),
            min,
            max,
            avg: sum / count as f64,
        })
        .collect())
}
