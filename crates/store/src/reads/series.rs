//! The series (containers) points belong to, by key: what a [`RawPoint`] says about its series
//! and the bare [`Point`] of the ingest path does not. The live stream turns the points of a
//! commit into `data` records with it, once per series it has not met yet.

use crate::database::Result;
use crate::database::db::{Db, values};
use crate::ingest::Point;
use crate::reads::raw_data::RawPoint;

/// The fields of a raw data record that belong to its series (also what a request for raw
/// points reads of the series it covers).
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow, serde::Deserialize)]
pub struct Series {
    pub container_key: i64,
    pub id_container_data_latest: String,
    pub id_group: String,
    pub datatype: i64,
    pub source_device: String,
}

impl Series {
    /// A point of this series as the `data` endpoint's record.
    pub fn point(&self, p: &Point) -> RawPoint {
        RawPoint {
            id_container_data_latest: self.id_container_data_latest.clone(),
            id_group: self.id_group.clone(),
            datatype: self.datatype,
            source_device: self.source_device.clone(),
            timestamp_seconds: p.seconds,
            microseconds: p.microseconds,
            value: p.value,
        }
    }
}

/// The series of `keys` that exist (one query per 500 keys).
pub async fn of_keys(db: &Db, keys: &[i64]) -> Result<Vec<Series>> {
    let mut found = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(500) {
        // The keys are integers of ours, written as literals.
        let list = chunk.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        let sql = format!(
            "SELECT container_key, id_container_data_latest, id_group, datatype, source_device \
             FROM containers WHERE container_key IN ({list})"
        );
        let rows: Vec<Series> = db.rows(sqlx::AssertSqlSafe(sql), values![]).await?;
        found.extend(rows);
    }
    Ok(found)
}
