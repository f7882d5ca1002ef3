//! A raw point and the series (container) it belongs to: the key a series is stored under,
//! made on first use within the per-device limit, and what a series holds once written (for
//! verification and export).

use sea_query::Values;
use sea_query_sqlx::SqlxValues;

use super::sql::int;
use crate::database::Result;
use crate::database::StoreError;
use crate::database::db::{Db, Tx, values};
use crate::database::new_id;
use crate::sql::point_time;

/// One raw point of a series (container).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub container_key: i64,
    pub seconds: i64,
    pub microseconds: i64,
    pub value: f64,
    /// The data session the point belongs to (GO gateways), if any.
    pub session_key: Option<i64>,
}

/// What a batch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Points stored for the first time.
    pub inserted: usize,
    /// Points that were already stored (resent) or repeated within the batch.
    pub duplicates: usize,
}

/// The series a (group, source device, datatype) triple is stored under; ordered as the key of
/// its table.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesId {
    pub id_group: String,
    pub source_device: String,
    pub datatype: i64,
}

/// The integer key of a series, creating the series on first use unless its device already has
/// `max_per_device` series: then `None` (docs/gateway-protocol.md, "Limits").
pub async fn container_key(db: &Db, series: &SeriesId, max_per_device: usize) -> Result<Option<i64>> {
    Ok(container_keys(db, std::slice::from_ref(series), max_per_device)
        .await?
        .pop()
        .flatten())
}

/// The keys of several series, in their order, as [`container_key`] gives each. The series not
/// stored yet are made in one transaction: a gateway's first message names all its series, and a
/// commit each (a flush of the log each) made a fleet's first minute slow.
pub async fn container_keys(db: &Db, series: &[SeriesId], max_per_device: usize) -> Result<Vec<Option<i64>>> {
    // The count and the insert are one statement, so two connections cannot both pass the
    // limit on their own count; a series that exists is found whatever the count.
    let insert = "INSERT INTO containers (id_container_data_latest, id_group, source_device, datatype) \
                  SELECT $1, $2, $3, $4 \
                  WHERE (SELECT count(*) FROM containers WHERE id_group = $2 AND source_device = $3) < $5 \
                  ON CONFLICT (id_group, source_device, datatype) DO NOTHING";
    let select = "SELECT container_key FROM containers WHERE id_group = $1 AND source_device = $2 AND datatype = $3";
    let max = i64::try_from(max_per_device).unwrap_or(i64::MAX);
    let key = |s: &SeriesId| {
        let values = values![s.id_group.as_str(), s.source_device.as_str(), s.datatype];
        async move { Ok::<_, StoreError>(db.row::<(i64,)>(select, values).await?.map(|(found,)| found)) }
    };
    let mut keys = Vec::with_capacity(series.len());
    for s in series {
        keys.push(key(s).await?);
    }
    if keys.iter().all(Option::is_some) {
        return Ok(keys);
    }
    // Made in key order, so that two transactions making the same series (a gateway taken
    // over by another node) wait for each other rather than deadlock.
    let mut missing: Vec<&SeriesId> = series
        .iter()
        .zip(&keys)
        .filter(|(_, k)| k.is_none())
        .map(|(s, _)| s)
        .collect();
    missing.sort();
    let mut tx = Tx::begin(db).await?;
    for s in missing {
        let values = values![new_id(), s.id_group.as_str(), s.source_device.as_str(), s.datatype, max];
        tx.execute(insert.to_string(), values).await?;
    }
    tx.commit().await?;
    for (s, k) in series.iter().zip(keys.iter_mut()) {
        if k.is_none() {
            *k = key(s).await?;
        }
    }
    Ok(keys)
}

/// The stored points of a series as (seconds, microseconds), packed or not, in time order: for
/// verification (`devicecloud-bench crash`).
pub async fn series_points(db: &Db, container_key: i64) -> Result<Vec<(i64, i64)>> {
    let scanned = crate::chunks::scan(db, &[container_key], crate::chunks::Range::ALL, None).await?;
    Ok(scanned
        .iter()
        .flat_map(|s| s.points.times_us.iter())
        .map(|t| (t.div_euclid(point_time::MICROS), t.rem_euclid(point_time::MICROS)))
        .collect())
}

/// How many points of a series the minute, hour and day rollups count.
pub async fn rollup_counts(db: &Db, container_key: i64) -> Result<(i64, i64, i64)> {
    let sql = "SELECT (SELECT COALESCE(SUM(count_val), 0) FROM rollup_minute WHERE container_key = $1) AS a, \
               (SELECT COALESCE(SUM(count_val), 0) FROM rollup_hour WHERE container_key = $1) AS b, \
               (SELECT COALESCE(SUM(count_val), 0) FROM rollup_day WHERE container_key = $1) AS c";
    let select =
        format!("SELECT CAST(a AS BIGINT) AS a, CAST(b AS BIGINT) AS b, CAST(c AS BIGINT) AS c FROM ({sql}) AS counts");
    let mut tx = Tx::begin(db).await?;
    let rows = tx.triples(select, SqlxValues(Values(vec![int(container_key)]))).await?;
    tx.commit().await?;
    Ok(rows.first().copied().unwrap_or_default())
}
