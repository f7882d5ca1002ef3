//! Database plumbing: the pools over SQLite or PostgreSQL (`Db`), the write turn and quick
//! reads of SQLite, its WAL checkpointer, PostgreSQL's time partitions and LISTEN/NOTIFY, the
//! failover check of a primary, statement deadlines, the store's one error type and its clock.

pub mod clock;
pub mod db;
pub mod deadline;
pub mod error;
pub mod notify;
pub mod partitions;
pub mod primary;
pub mod quick_read;
pub mod snapshot;
pub mod wal;
pub mod write_turn;

pub use clock::{new_id, unix_now};
pub use db::Db;
pub use error::{Result, StoreError};
