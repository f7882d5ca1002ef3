//! Which database the store talks to: the one fact most SQL of the store is built from, kept
//! apart from the pools (`db`) so that the modules writing dialect-specific SQL depend on it
//! alone.

/// Which database a [`crate::database::Db`] talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}
