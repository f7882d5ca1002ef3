//! Which points of an ingest batch are in a chunk already: a resend of a point packed since it
//! was first stored. Only a series whose newest packed point (`containers.packed_until_us`) is
//! at or after one of the batch's points is looked at, so a batch of fresh points costs one
//! probe of the series' rows and no chunk is read.

use std::collections::{BTreeMap, HashSet};

use super::{DAY_US, codec};
use crate::database::db::{Tx, values};
use crate::ingest::Point;
use crate::sql::point_time;

/// The keys (series, seconds, microseconds) of `points` found in a chunk.
pub(crate) async fn in_chunks(tx: &mut Tx, points: &[Point]) -> sqlx::Result<HashSet<(i64, i64, i64)>> {
    let mut by_series: BTreeMap<i64, Vec<&Point>> = BTreeMap::new();
    for p in points {
        by_series.entry(p.container_key).or_default().push(p);
    }
    let mut found = HashSet::new();
    if by_series.is_empty() {
        return Ok(found);
    }
    let keys: Vec<i64> = by_series.keys().copied().collect();
    let packed: Vec<(i64, i64)> = tx
        .rows(
            format!(
                "SELECT container_key, packed_until_us FROM containers \
                 WHERE container_key IN ({}) AND packed_until_us IS NOT NULL",
                super::scan::key_list(&keys)
            ),
            values![],
        )
        .await?;
    for (key, until) in packed {
        let times: Vec<(i64, &Point)> = by_series[&key]
            .iter()
            .map(|p| (point_time::time_us(p.seconds, p.microseconds), *p))
            .filter(|(t, _)| *t <= until)
            .collect();
        let (Some(lo), Some(hi)) = (times.iter().map(|t| t.0).min(), times.iter().map(|t| t.0).max()) else {
            continue;
        };
        let chunks: Vec<(Vec<u8>,)> = tx
            .rows(
                format!(
                    "SELECT payload FROM point_chunks WHERE container_key = $1 AND first_us > $2 - {DAY_US} \
                     AND last_us >= $2 AND first_us <= $3"
                ),
                values![key, lo, hi],
            )
            .await?;
        for (payload,) in chunks {
            let chunk = codec::unpack(&payload).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
            for (t, p) in &times {
                if chunk.times_us.binary_search(t).is_ok() {
                    found.insert((p.container_key, p.seconds, p.microseconds));
                }
            }
        }
    }
    Ok(found)
}
