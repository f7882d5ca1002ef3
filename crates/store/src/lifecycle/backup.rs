//! Backups of an SQLite store (docs/operations.md, "Backup and restore"): a copy taken while
//! `serve` writes, a check that a file is a backup this version can restore, and the copy of a
//! backup into place.
//!
//! The copy is `VACUUM INTO` on a connection of the store: it reads the whole database inside
//! one read transaction, so the copy is the store as of the moment that transaction starts,
//! every commit before it included (a gateway's PUBACK is only sent after its commit), and
//! ingest goes on meanwhile (in WAL mode a reader never blocks the writer). Every file this
//! module makes is written under a temporary name beside its destination, synced, and only then
//! given its final name, which is never taken from an existing file: a half-written copy never
//! carries the name of a backup or a store, and nothing is ever overwritten.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions, Connection};

use crate::database::db::{Db, SQLITE_MIGRATIONS};

/// What can go wrong with a backup or a restore; each names the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// A file could not be read, written, synced or renamed.
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// The destination exists: a backup or a restore never replaces a file.
    #[error("{0} already exists: choose another name or remove it first (nothing is ever overwritten)")]
    Exists(PathBuf),
    /// SQLite takes file names as text.
    #[error("{0} is not valid UTF-8, which SQLite needs for a file name")]
    NotUtf8(PathBuf),
    /// The store is not an SQLite one (PostgreSQL is copied with its own tools).
    #[error("the store is not SQLite: back up PostgreSQL with pg_dump")]
    NotSqlite,
    /// The copy itself failed in the database.
    #[error("cannot copy the store into {path}: {source}")]
    Copy { path: PathBuf, source: sqlx::Error },
    /// The file is not a backup of a devicecloud store this version can restore.
    #[error("{path} is not a devicecloud backup: {reason}")]
    NotABackup { path: PathBuf, reason: String },
}

type Result<T> = std::result::Result<T, BackupError>;

/// Copies the SQLite store behind `db` into the new file `to` while the store stays in use;
/// returns the size of the copy in bytes. Fails without touching anything when `to` exists.
pub async fn sqlite_backup(db: &Db, to: &Path) -> Result<u64> {
    let Db::Sqlite(pool, ..) = db else {
        return Err(BackupError::NotSqlite);
    };
    refuse_existing(to)?;
    let (partial, file) = create_partial(to)?;
    // The connection is opened with URI file names on: an absolute path can never be read as
    // one (`file:…`), whatever the file is called.
    let absolute = std::path::absolute(&partial).map_err(|source| io(&partial, source))?;
    let name = absolute
        .to_str()
        .ok_or_else(|| BackupError::NotUtf8(to.to_path_buf()))?;
    let copied = async {
        // A connection of its own with the store's options, whose statement is not logged as
        // slow: a copy of a large store takes seconds by nature.
        let options = (*pool.connect_options()).clone().disable_statement_logging();
        let mut conn = SqliteConnection::connect_with(&options).await?;
        // `VACUUM INTO` takes an expression: the name is bound, never spliced into the SQL. It
        // accepts an existing empty file, which `create_partial` made with the backup's mode.
        let copied = sqlx::query("VACUUM INTO $1").bind(name).execute(&mut conn).await;
        let _ = conn.close().await;
        copied
    }
    .await;
    if let Err(source) = copied {
        let _ = std::fs::remove_file(&partial);
        return Err(BackupError::Copy {
            path: to.to_path_buf(),
            source,
        });
    }
    // `VACUUM INTO` does not sync what it wrote.
    finish(&partial, &file, to)
}

/// What [`check_sqlite_backup`] found in a backup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackupInfo {
    /// The newest migration applied in the backup.
    pub migration: i64,
    /// The newest migration of this version, which opening the restored store applies.
    pub latest_migration: i64,
}

/// Checks that `path` is an undamaged SQLite database holding a devicecloud store whose
/// migrations are all known to this version (an older store is carried forward when it is
/// opened; a newer one cannot be, so it is refused here, before anything is copied).
pub async fn check_sqlite_backup(path: &Path) -> Result<BackupInfo> {
    let not_a_backup = |reason: String| BackupError::NotABackup {
        path: path.to_path_buf(),
        reason,
    };
    // Read first, for an error that says why (missing, unreadable, a directory, too short).
    let mut header = [0u8; 16];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .map_err(|source| match source.kind() {
            ErrorKind::UnexpectedEof => not_a_backup("not an SQLite database (too short)".into()),
            _ => io(path, source),
        })?;
    if &header != b"SQLite format 3\0" {
        return Err(not_a_backup("not an SQLite database".into()));
    }
    // A live store's last commits may still be in its write-ahead log, which a copy of the
    // database file alone would lose.
    let wal = sidecar(path, "-wal");
    if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
        return Err(not_a_backup(format!(
            "{} lies beside it, so it is a store in use or not closed cleanly: make a backup of it with `devicecloud admin backup`",
            wal.display()
        )));
    }
    // Immutable: nothing is written beside the file (no -shm, no -wal), not even a lock.
    let options = SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .immutable(true)
        .disable_statement_logging();
    let mut conn = SqliteConnection::connect_with(&options)
        .await
        .map_err(|e| not_a_backup(format!("cannot open it as an SQLite database: {e}")))?;
    let checked = check_open(&mut conn).await;
    let _ = conn.close().await;
    checked.map_err(not_a_backup)
}

/// The checks of [`check_sqlite_backup`] on the opened file; the reason of a refusal.
async fn check_open(conn: &mut SqliteConnection) -> std::result::Result<BackupInfo, String> {
    // Every page read and every b-tree's structure checked, and every index entry against its
    // table: the raw points and rollups have no index but their key, so this takes about 1.5
    // times as long as `quick_check`, which skips the last step (about a second for 10 million
    // points, docs/operations.md, "Backup and restore").
    let report: Vec<String> = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| format!("cannot check it: {e}"))?;
    if report != ["ok"] {
        return Err(format!("it is damaged: {}", report.join("; ")));
    }
    let applied: Vec<(i64, Vec<u8>, bool)> =
        sqlx::query_as("SELECT version, checksum, success FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&mut *conn)
            .await
            .map_err(|_| "an SQLite database without the migrations of a devicecloud store".to_string())?;
    let known: Vec<_> = SQLITE_MIGRATIONS
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .collect();
    let latest_migration = known.iter().map(|m| m.version).max().unwrap_or(0);
    for (version, checksum, success) in &applied {
        if !success {
            return Err(format!("its migration {version} did not complete"));
        }
        match known.iter().find(|m| m.version == *version) {
            Some(m) if *m.checksum == checksum[..] => {}
            Some(_) => return Err(format!("its migration {version} differs from this version's")),
            None => {
                return Err(format!(
                    "it was made by a newer version (migration {version}; this version knows up to {latest_migration}): \
                     restore it with that version or a later one"
                ));
            }
        }
    }
    let Some(&(migration, _, _)) = applied.last() else {
        return Err("no migration was ever applied to it".into());
    };
    Ok(BackupInfo {
        migration,
        latest_migration,
    })
}

/// Copies the file `from` to the new file `to` (under a temporary name, synced, then renamed);
/// returns the bytes copied. Fails when `to` exists. Files made are readable by their owner
/// only: a store, a backup and a secret key hold what only the service should read.
pub fn copy_new_file(from: &Path, to: &Path) -> Result<u64> {
    refuse_existing(to)?;
    let mut source = File::open(from).map_err(|e| io(from, e))?;
    let (partial, mut file) = create_partial(to)?;
    if let Err(e) = std::io::copy(&mut source, &mut file) {
        let _ = std::fs::remove_file(&partial);
        return Err(io(to, e));
    }
    finish(&partial, &file, to)
}

/// The file beside `path` whose name adds `suffix` (`store.db` → `store.db-wal`).
pub fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn io(path: &Path, source: std::io::Error) -> BackupError {
    BackupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn refuse_existing(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Err(BackupError::Exists(path.to_path_buf())),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(path, e)),
    }
}

/// Creates the empty temporary file of `to` beside it (`.<name>.partial-<pid>`), owner-only.
fn create_partial(to: &Path) -> Result<(PathBuf, File)> {
    let name = to
        .file_name()
        .ok_or_else(|| io(to, std::io::Error::new(ErrorKind::InvalidInput, "not a file name")))?;
    let mut partial_name = std::ffi::OsString::from(".");
    partial_name.push(name);
    partial_name.push(format!(".partial-{}", std::process::id()));
    let partial = to.with_file_name(partial_name);
    // Left over by a copy of this process id that was killed: no one else writes this name.
    let _ = std::fs::remove_file(&partial);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    // Named after `to`, which the caller asked for: the temporary name means nothing to them.
    let file = options.open(&partial).map_err(|e| io(to, e))?;
    Ok((partial, file))
}

/// Syncs the written `partial`, gives it the name `to` unless that exists, and syncs the
/// directory so the name survives a crash; returns the size. The temporary file is removed on
/// failure.
fn finish(partial: &Path, file: &File, to: &Path) -> Result<u64> {
    let done = (|| {
        file.sync_all().map_err(|e| io(partial, e))?;
        let bytes = file.metadata().map_err(|e| io(partial, e))?.len();
        link_new(partial, to)?;
        Ok(bytes)
    })();
    let _ = std::fs::remove_file(partial);
    let bytes = done?;
    let dir = match to.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    #[cfg(unix)]
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io(dir, e))?;
    Ok(bytes)
}

/// Gives `partial` the name `to` without ever replacing a file: a hard link fails when the
/// name is taken, at the moment it is made. On a file system without hard links, a rename
/// after a last look.
fn link_new(partial: &Path, to: &Path) -> Result<()> {
    match std::fs::hard_link(partial, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Err(BackupError::Exists(to.to_path_buf())),
        Err(_) => {
            refuse_existing(to)?;
            std::fs::rename(partial, to).map_err(|e| io(to, e))
        }
    }
}
