//! Time series in chunks: a series' points packed column-wise into one row per chunk
//! (docs/benchmarks.md, "Compressed chunks").

pub mod codec;
