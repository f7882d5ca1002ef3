//! The store's one error type: what the layers above need to tell apart.

/// Errors of the store layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A unique constraint refused the write; the payload names the conflicting field.
    #[error("{0} already exists")]
    Conflict(&'static str),
    /// Any other database failure: logged by the caller, never shown to clients.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// Migrations could not be applied at start.
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A page aggregated as JSON by the database did not decode (a bug, never client input).
    #[error("cannot decode a page: {0}")]
    Decode(String),
    /// The database URL is neither SQLite nor PostgreSQL.
    #[error("unsupported database URL (expected sqlite:… or postgres://…): {0}")]
    UnsupportedUrl(String),
}

impl StoreError {
    /// Maps a unique-violation from either database to `Conflict(field)`, leaving others as they are.
    pub(crate) fn conflict_on(err: sqlx::Error, field: &'static str) -> StoreError {
        match &err {
            sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::Conflict(field),
            _ => StoreError::Database(err),
        }
    }
}
