//! Time series in chunks: a series' closed points packed column-wise into one row a chunk
//! (docs/operations.md, "Compressed chunks"; docs/benchmarks.md, "Compressed chunks").
//!
//! A point is first a row of `raw_points`, written by the ingest transaction as before. The
//! packer ([`packing`]) later moves a series' points older than the packing horizon into
//! `point_chunks`, merging them with the chunk they extend or overlap. Reads ([`scan`]) merge the
//! two, so an answer does not depend on where a point is kept; ingest ([`stored`]) looks in the
//! chunks for a point sent again, so a resend is still stored once.

pub mod codec;
mod cut;
pub mod ordered;
pub mod packing;
pub mod scan;
pub(crate) mod stored;

pub use codec::Columns;
pub use ordered::{Ordered, Point};
pub use packing::{Packed, pack_closed};
pub use scan::{Range, SeriesPoints, count, scan};

/// The most points a chunk holds: past 3,600 the codec gains a few percent, and a chunk of
/// 10,000 decodes in well under a millisecond (docs/benchmarks.md, "Compressed chunks").
pub const MAX_POINTS: usize = 10_000;

/// A chunk never spans two UTC days, so retention (by whole days of age) removes whole chunks.
pub const DAY_US: i64 = 86_400 * 1_000_000;
