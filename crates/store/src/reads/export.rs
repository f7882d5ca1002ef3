//! The streamed export of raw points (`GET /api/v2/data/export`, docs/api.md, "Export"): every
//! point the filters of `data` allow, oldest first (ties by series), a batch at a time in flat
//! memory however many there are.
//!
//! The series are chosen as for `data` (SQL applies the part of the filter that names series
//! attributes, the rest is applied to each point); the points come from [`Ordered`], which reads
//! packed chunks and rows window by window.

use std::collections::HashMap;

use devicecloud_query::Filter;

use crate::chunks::{self, Ordered, Point, Range};
use crate::collection;
use crate::database::Result;
use crate::database::db::Db;
use crate::reads::raw_data::{self, SERIES_OUTPUT};
use crate::reads::series::Series;
use crate::sql::scope::GroupScope;

/// An export being read.
pub struct Export {
    series: HashMap<i64, Series>,
    points: Option<Filter>,
    ordered: Option<Ordered>,
}

/// The export of the points of the groups `scope` sees that match `filter`, in batches of
/// about `batch` points.
pub async fn open(db: &Db, scope: &GroupScope<'_>, filter: Option<&Filter>, batch: usize) -> Result<Export> {
    let (series_filter, points) = raw_data::split(filter);
    let mut select = raw_data::containers(scope, series_filter.as_ref(), db);
    select.clear_selects().columns(SERIES_OUTPUT.map(|c| ("c", c)));
    let series: Vec<Series> = collection::fetch(db, &select, &SERIES_OUTPUT).await?;
    let keys: Vec<i64> = series.iter().map(|s| s.container_key).collect();
    let wanted = raw_data::time_range(points.as_ref());
    let ordered = chunks::scan::span(db, &keys).await?.and_then(|stored| {
        let range = Range {
            from_us: Ord::max(stored.from_us, wanted.from_us),
            to_us: Ord::min(stored.to_us, wanted.to_us),
        };
        (!range.is_empty()).then(|| Ordered::new(db.clone(), &keys, range, None, batch))
    });
    // A filter of whole-second bounds alone is the range itself: no point is tested again.
    let points = points.filter(|f| raw_data::exact_seconds(f).is_none());
    Ok(Export {
        series: series.into_iter().map(|s| (s.container_key, s)).collect(),
        points,
        ordered,
    })
}

impl Export {
    /// The next points in time order (ties by series) that pass the filter, never empty;
    /// `None` at the end.
    pub async fn next_batch(&mut self) -> Result<Option<Vec<Point>>> {
        let Some(ordered) = self.ordered.as_mut() else {
            return Ok(None);
        };
        while let Some(mut batch) = ordered.next_batch().await? {
            if let Some(filter) = &self.points {
                let series = &self.series;
                batch.retain(|p| {
                    series
                        .get(&p.key)
                        .is_some_and(|s| filter.matches_fields(&|attr| raw_data::field(s, p.time_us, p.value, attr)))
                });
            }
            if !batch.is_empty() {
                return Ok(Some(batch));
            }
        }
        Ok(None)
    }

    /// The series the export covers by key: every key a batch holds is one.
    pub fn series(&self) -> &HashMap<i64, Series> {
        &self.series
    }
}
