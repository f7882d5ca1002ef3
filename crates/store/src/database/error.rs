//! The store's one error type: what the layers above need to tell apart.

/// Errors of the store layer.
/// Result of every store call.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A unique constraint refused the write; the payload names the conflicting field.
    #[error("{0} already exists")]
    Conflict(&'static str),
    /// A text the database cannot hold (PostgreSQL refuses NUL characters): the client's
    /// input, answered as a bad request.
    #[error("text the store cannot hold: {0}")]
    InvalidText(String),
    /// The store did not answer in time: a request's statement ran past the query timeout
    /// (cancelled), no connection was free in time, or the SQLite write lock stayed taken.
    /// Answered 503 with `Retry-After` (docs/operations.md, "Limits").
    #[error("the store did not answer in time: {0}")]
    Timeout(String),
    /// The disk under the store is full (SQLite `SQLITE_FULL`, PostgreSQL 53100 `disk_full`,
    /// or the operating system's "no space left"): nothing of the write was kept. Answered 503
    /// with `Retry-After` (docs/operations.md, "Limits").
    #[error("the store's disk is full: {0}")]
    DiskFull(String),
    /// The database cannot be reached, or the connection is not to a writable primary: a
    /// connection refused or cut, a server shutting down or starting (PostgreSQL 57P01–57P03,
    /// class 08), a standby refusing a write (25006, as after a failover, when a pooled
    /// connection still leads to the demoted primary). Answered 503 with `Retry-After`; the
    /// pool checks its connections for a while after (`primary`), so that the next request
    /// gets one to the new primary (docs/scaling.md, "High availability").
    #[error("the store is not available: {0}")]
    Unavailable(String),
    /// Any other database failure: logged by the caller, never shown to clients.
    #[error("database error: {0}")]
    Database(sqlx::Error),
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

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> StoreError {
        match &err {
            sqlx::Error::PoolTimedOut => return StoreError::Timeout(err.to_string()),
            sqlx::Error::Io(io) if io.kind() != std::io::ErrorKind::StorageFull => {
                crate::database::primary::suspect();
                return StoreError::Unavailable(io.to_string());
            }
            sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::StorageFull => {
                return StoreError::DiskFull(io.to_string());
            }
            sqlx::Error::Database(db) => {
                let code = db.code();
                match code.as_deref() {
                    // 22021 character_not_in_repertoire (a NUL byte in text), 22P05
                    // untranslatable_character.
                    Some("22021" | "22P05") => return StoreError::InvalidText(db.message().to_string()),
                    // PostgreSQL 57014 query_canceled: the statement timeout.
                    Some("57014") => return StoreError::Timeout(db.message().to_string()),
                    // PostgreSQL 53100 disk_full.
                    Some("53100") => return StoreError::DiskFull(db.message().to_string()),
                    // 25006 read_only_sql_transaction (a standby, or a demoted primary), 57P01
                    // admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now, and the
                    // connection exceptions of class 08.
                    Some(code)
                        if db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>().is_some()
                            && (matches!(code, "25006" | "57P01" | "57P02" | "57P03") || code.starts_with("08")) =>
                    {
                        crate::database::primary::suspect();
                        return StoreError::Unavailable(db.message().to_string());
                    }
                    // SQLite reports extended codes; the primary code is the low byte:
                    // 9 SQLITE_INTERRUPT (the request's deadline), 5 SQLITE_BUSY (the write
                    // lock stayed taken past the busy timeout), 13 SQLITE_FULL.
                    Some(text) if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() => {
                        if let Ok(code) = text.parse::<i32>() {
                            match code & 0xff {
                                5 | 9 => return StoreError::Timeout(db.message().to_string()),
                                // 13 SQLITE_FULL: the disk (or the file system's quota) is full.
                                13 => return StoreError::DiskFull(db.message().to_string()),
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        StoreError::Database(err)
    }
}

impl StoreError {
    /// Whether this is a unique-violation, from either database.
    pub(crate) fn is_unique_violation(&self) -> bool {
        matches!(self, StoreError::Database(sqlx::Error::Database(db)) if db.is_unique_violation())
    }

    /// A unique-violation as `Conflict(field)`, anything else as it is.
    pub(crate) fn conflict_on(self, field: &'static str) -> StoreError {
        if self.is_unique_violation() {
            StoreError::Conflict(field)
        } else {
            self
        }
    }
}
