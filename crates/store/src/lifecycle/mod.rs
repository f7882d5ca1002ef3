//! What happens to the store over time: the retention pass, and backups of an SQLite store.

pub mod backup;
pub mod retention;
