//! The ingest write path: one transaction stores a batch of raw points, the minute, hour and
//! day rollups of the points that were new, the latest value of each series, and the devices'
//! `last_data_at` (architecture: group commit, rollups at write time). The statements are
//! built beforehand by [`Batch`].
//!
//! A resent point (same series, second and microsecond) is stored once and counted once: the
//! insert skips it (SQLite) or stops at it (PostgreSQL: `OnStored::Abort`), and when the
//! inserts report fewer rows than they were given, the transaction is rolled back and redone
//! with the points already stored left out, before any rollup is touched.

mod batch;
mod copy;
mod point;
mod sql;
mod write;

pub use batch::Batch;
pub use point::{Point, SeriesId, Written, container_key, container_keys, rollup_counts, series_points};
pub use write::{Routed, write, write_slices};
