//! Read models: the collections of the API (devices, raw and downsampled data, events, data
//! sessions) and the chart series, each a query over the tables with its filters and sort.

pub mod chart_series;
pub mod device_collection;
pub mod downsampled;
pub mod event_collection;
pub mod export;
pub mod raw_data;
pub mod series;
pub mod session_collection;
