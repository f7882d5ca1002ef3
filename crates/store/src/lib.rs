//! The devicecloud store: one database API over SQLite (embedded default) and PostgreSQL
//! (multi-node), with migrations for both, one module per table family, and the translation of
//! collection queries (the `query` crate's AST) into SQL through sea-query.

mod backend;
mod collection;
mod comparison;
mod db;
mod deadline;
mod error;
mod expiry;
mod point_time;
pub mod primary;
mod quick_read;
mod scope;
mod write_turn;

pub mod accounts;
pub mod backup;
pub mod chart_series;
pub mod clients;
pub mod data_sessions;
pub mod device_collection;
pub mod device_info;
pub mod devices;
pub mod downsampled;
pub mod event_collection;
pub mod events;
pub mod groups;
pub mod ingest;
pub mod memberships;
pub mod nodes;
pub mod notify;
pub mod partitions;
pub mod raw_data;
pub mod retention;
pub mod series;
pub mod session_collection;
pub mod sign_in_sessions;
pub mod tokens;
pub mod wal;
pub mod webhooks;

pub use backend::Backend;
pub use collection::{Column, ListArgs, ListRequest, Listing, attributes, names};
pub use db::Db;
pub use error::StoreError;
pub use point_time::TimePart;

/// Result of every store call.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Current Unix time in whole seconds; the store never reads the clock itself except here.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A fresh random identifier in the UUID text form every `id_*` field uses.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
