//! A batch made ready for its transaction: points sorted, repeats dropped, rollups aggregated
//! and every statement's text and values built. This is CPU work with no database in it, so
//! the service prepares the next batch while the previous one commits (architecture: group
//! commit), and the transaction itself only runs statements.
//!
//! Every statement carries many rows (`INSERT … VALUES (…), (…)`, `UPDATE … FROM (VALUES …)`),
//! so a batch costs a handful of statements whatever its size. The points are written sorted
//! by series and time: each B-tree is then written leaf after leaf rather than in the order
//! the gateways' messages interleave, and repeats, rollup buckets and each series' newest
//! point are runs of neighbours found in one pass.

use std::collections::{BTreeMap, HashSet};

use sea_query::Value;

use super::Point;
use super::sql::{Inserts, PointColumns, Statement, chunked, insert_points, int, real};
use crate::sql::backend::Backend;

/// Points and device times ready to be written in one transaction.
pub struct Batch {
    backend: Backend,
    /// How many points were submitted, repeats included.
    pub(super) submitted: usize,
    /// The distinct points in the order they were sent (webhooks get them in this order).
    pub(super) sent: Vec<Point>,
    /// The same points sorted by series and time.
    pub(super) sorted: Vec<Point>,
    devices: Vec<(String, i64)>,
    /// Inserts of `sorted`, ignoring points already stored.
    pub(super) inserts: Inserts,
    /// Rollups, latest values, devices' `last_data_at` and session counts, valid when every
    /// point of `sorted` was new.
    pub(super) updates: Vec<Statement>,
}

impl Batch {
    /// Prepares points and the devices whose `last_data_at` moves to the given time (only ever
    /// forward) for a store of the given kind.
    pub fn new(points: Vec<Point>, devices: Vec<(String, i64)>, backend: Backend) -> Batch {
        let submitted = points.len();
        // A stable sort keeps a repeat inside the batch behind its first occurrence, which is
        // the one kept (the database would count repeats as new once).
        let mut sorted = points.clone();
        sorted.sort_by_key(key);
        sorted.dedup_by_key(|p| key(p));
        let sent = if sorted.len() == points.len() {
            points
        } else {
            first_occurrences(points, &sorted)
        };
        Batch::of_distinct(submitted, sent, sorted, devices, backend)
    }

    fn of_distinct(
        submitted: usize,
        sent: Vec<Point>,
        sorted: Vec<Point>,
        devices: Vec<(String, i64)>,
        backend: Backend,
    ) -> Batch {
        let inserts = match backend {
            Backend::Sqlite => Inserts::Statements(insert_points(&sorted)),
            Backend::Postgres => Inserts::Columns(PointColumns::of(&sorted)),
        };
        let mut updates = Vec::new();
        for (table, width) in [("rollup_minute", 60), ("rollup_hour", 3_600), ("rollup_day", 86_400)] {
            updates.extend(upsert_rollups(table, &rollups(&sorted, width), backend));
        }
        updates.extend(update_latest(&sorted, backend));
        updates.extend(touch_devices(&devices, backend));
        updates.extend(count_session_points(&sorted, backend));
        Batch {
            backend,
            submitted,
            sent,
            sorted,
            devices,
            inserts,
            updates,
        }
    }

    /// The same batch without the points already stored (a resend).
    pub(super) fn without(self, stored: &HashSet<(i64, i64, i64)>) -> Batch {
        let sent = self.sent.into_iter().filter(|p| !stored.contains(&key(p))).collect();
        let sorted = self.sorted.into_iter().filter(|p| !stored.contains(&key(p))).collect();
        Batch::of_distinct(self.submitted, sent, sorted, self.devices, self.backend)
    }

    /// The devices whose `last_data_at` the batch moves.
    pub(super) fn devices(&self) -> impl Iterator<Item = &str> {
        self.devices.iter().map(|(id, _)| id.as_str())
    }

    /// The series the batch writes to.
    pub(super) fn series(&self) -> HashSet<i64> {
        self.sorted.iter().map(|p| p.container_key).collect()
    }
}

/// What identifies a stored point, and the order points are written in.
pub(super) fn key(p: &Point) -> (i64, i64, i64) {
    (p.container_key, p.seconds, p.microseconds)
}

/// The first occurrence of each of the `distinct` points, in the order of `points`.
fn first_occurrences(points: Vec<Point>, distinct: &[Point]) -> Vec<Point> {
    let mut left: HashSet<(i64, i64, i64)> = distinct.iter().map(key).collect();
    points.into_iter().filter(|p| left.remove(&key(p))).collect()
}

/// One rollup bucket of one series, aggregated from the new points of a batch.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Bucket {
    min: f64,
    max: f64,
    sum: f64,
    count: i64,
}

/// One bucket of a rollup: (series, bucket start) and the aggregate.
type Rollup = ((i64, i64), Bucket);

/// Aggregates points sorted by series and time into UTC-aligned buckets of `width` seconds, in
/// the same order: the points of one bucket are neighbours.
fn rollups(points: &[Point], width: i64) -> Vec<Rollup> {
    let start = |p: &Point| p.seconds - p.seconds.rem_euclid(width);
    points
        .chunk_by(|a, b| a.container_key == b.container_key && start(a) == start(b))
        .map(|run| {
            let first = run[0].value;
            let bucket = run.iter().skip(1).fold(
                Bucket {
                    min: first,
                    max: first,
                    sum: first,
                    count: 1,
                },
                |b, p| Bucket {
                    min: b.min.min(p.value),
                    max: b.max.max(p.value),
                    sum: b.sum + p.value,
                    count: b.count + 1,
                },
            );
            ((run[0].container_key, start(&run[0])), bucket)
        })
        .collect()
}

/// Merges buckets into a rollup table (`min`/`max` are SQLite's two-argument scalars,
/// `LEAST`/`GREATEST` on PostgreSQL).
fn upsert_rollups(table: &str, rows: &[Rollup], backend: Backend) -> Vec<Statement> {
    let (least, greatest) = match backend {
        Backend::Sqlite => ("min", "max"),
        Backend::Postgres => ("LEAST", "GREATEST"),
    };
    let sql = |rows: &str| {
        format!(
            "INSERT INTO {table} (container_key, bucket, min_val, max_val, sum_val, count_val) VALUES {rows} \
             ON CONFLICT (container_key, bucket) DO UPDATE SET \
             min_val = {least}({table}.min_val, excluded.min_val), max_val = {greatest}({table}.max_val, excluded.max_val), \
             sum_val = {table}.sum_val + excluded.sum_val, count_val = {table}.count_val + excluded.count_val"
        )
    };
    chunked(rows, 6, backend, sql, |((key, start), b)| {
        vec![
            int(*key),
            int(*start),
            real(b.min),
            real(b.max),
            real(b.sum),
            int(b.count),
        ]
    })
}

/// Moves each series' latest value forward to its newest new point (the last of its run, the
/// points being sorted by series and time).
fn update_latest(points: &[Point], backend: Backend) -> Vec<Statement> {
    let rows: Vec<Point> = points
        .chunk_by(|a, b| a.container_key == b.container_key)
        .filter_map(|run| run.last().copied())
        .collect();
    let sql = |rows: &str| {
        format!(
            "UPDATE containers SET latest_seconds = v.column2, latest_microseconds = v.column3, latest_value = v.column4 \
             FROM (VALUES {rows}) AS v WHERE containers.container_key = v.column1 AND (containers.latest_seconds IS NULL \
             OR containers.latest_seconds < v.column2 \
             OR (containers.latest_seconds = v.column2 AND containers.latest_microseconds < v.column3))"
        )
    };
    chunked(&rows, 4, backend, sql, |p| {
        vec![int(p.container_key), int(p.seconds), int(p.microseconds), real(p.value)]
    })
}

/// Moves `last_data_at` of devices forward (each device once, to its latest time: an update
/// joined to several rows for one target row would take any one of them).
fn touch_devices(devices: &[(String, i64)], backend: Backend) -> Vec<Statement> {
    let mut latest: BTreeMap<&str, i64> = BTreeMap::new();
    for (id, at) in devices {
        let entry = latest.entry(id.as_str()).or_insert(*at);
        *entry = (*entry).max(*at);
    }
    let rows: Vec<(&str, i64)> = latest.into_iter().collect();
    let sql = |rows: &str| {
        format!(
            "UPDATE physical_devices SET last_data_at = v.column2 FROM (VALUES {rows}) AS v \
             WHERE physical_devices.id_physical_device = v.column1 \
             AND (physical_devices.last_data_at IS NULL OR physical_devices.last_data_at < v.column2)"
        )
    };
    chunked(&rows, 2, backend, sql, |(id, at)| {
        vec![Value::String(Some(id.to_string())), int(*at)]
    })
}

/// Adds the new points of each data session to its `datapoint_count`.
fn count_session_points(points: &[Point], backend: Backend) -> Vec<Statement> {
    let mut counts: BTreeMap<i64, i64> = BTreeMap::new();
    for key in points.iter().filter_map(|p| p.session_key) {
        *counts.entry(key).or_default() += 1;
    }
    let rows: Vec<(i64, i64)> = counts.into_iter().collect();
    let sql = |rows: &str| {
        format!(
            "UPDATE data_sessions SET datapoint_count = datapoint_count + v.column2 FROM (VALUES {rows}) AS v \
             WHERE data_sessions.session_key = v.column1"
        )
    };
    chunked(&rows, 2, backend, sql, |(key, n)| vec![int(*key), int(*n)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(container_key: i64, seconds: i64, value: f64) -> Point {
        Point {
            container_key,
            seconds,
            microseconds: 0,
            value,
            session_key: None,
        }
    }

    #[test]
    fn rollups_align_to_utc_buckets() {
        let bucket = |min, max, sum, count| Bucket { min, max, sum, count };
        // Sorted by series and time, as a batch holds them.
        let points = [
            point(7, -1, 3.0),
            point(7, 86_399, 1.0),
            point(7, 86_400, 5.0),
            point(7, 86_459, -2.0),
            point(8, 86_400, 4.0),
        ];
        assert_eq!(
            rollups(&points, 60),
            [
                ((7, -60), bucket(3.0, 3.0, 3.0, 1)),
                ((7, 86_340), bucket(1.0, 1.0, 1.0, 1)),
                ((7, 86_400), bucket(-2.0, 5.0, 3.0, 2)),
                ((8, 86_400), bucket(4.0, 4.0, 4.0, 1)),
            ]
        );
        assert_eq!(
            rollups(&points, 86_400),
            [
                ((7, -86_400), bucket(3.0, 3.0, 3.0, 1)),
                ((7, 0), bucket(1.0, 1.0, 1.0, 1)),
                ((7, 86_400), bucket(-2.0, 5.0, 3.0, 2)),
                ((8, 86_400), bucket(4.0, 4.0, 4.0, 1)),
            ]
        );
    }

    #[test]
    fn a_batch_keeps_the_first_of_repeats_in_sent_order() {
        let points = vec![point(9, 5, 1.0), point(3, 7, 2.0), point(9, 5, 3.0), point(3, 6, 4.0)];
        let batch = Batch::new(points, Vec::new(), Backend::Sqlite);
        assert_eq!(batch.submitted, 4);
        let values = |ps: &[Point]| ps.iter().map(|p| p.value).collect::<Vec<_>>();
        assert_eq!(values(&batch.sent), [1.0, 2.0, 4.0]);
        assert_eq!(values(&batch.sorted), [4.0, 2.0, 1.0]);
        let stored = HashSet::from([(3, 7, 0)]);
        let rest = batch.without(&stored);
        assert_eq!(
            (rest.submitted, values(&rest.sent), values(&rest.sorted)),
            (4, vec![1.0, 4.0], vec![4.0, 1.0])
        );
    }
}
