//! The devicecloud store: one database API over SQLite (embedded default) and PostgreSQL
//! (multi-node), with migrations for both, one module per table family, and the translation of
//! collection queries (the `query` crate's AST) into SQL through sea-query.

pub mod chunks;
mod collection;
mod database;
pub mod ingest;
mod lifecycle;
mod reads;
mod sql;
mod tables;

pub use database::notify;
pub use database::partitions;
pub use database::primary;
pub use database::wal;
pub use lifecycle::backup;
pub use lifecycle::retention;
pub use reads::chart_series;
pub use reads::device_collection;
pub use reads::downsampled;
pub use reads::event_collection;
pub use reads::export;
pub use reads::raw_data;
pub use reads::series;
pub use reads::session_collection;
pub use tables::accounts;
pub use tables::alarm_rules;
pub use tables::alarms;
pub use tables::clients;
pub use tables::data_sessions;
pub use tables::device_info;
pub use tables::devices;
pub use tables::events;
pub use tables::firmware;
pub use tables::groups;
pub use tables::jobs;
pub use tables::memberships;
pub use tables::nodes;
pub use tables::sign_in_sessions;
pub use tables::tokens;
pub use tables::twins;
pub use tables::webhooks;

pub use collection::{Column, ListArgs, ListRequest, Listing, attributes, names};
pub use database::{Db, Result, StoreError, new_id, unix_now};
pub use sql::{Backend, TimePart};
