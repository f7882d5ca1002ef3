//! One `serve` per SQLite store (docs/operations.md, "Several nodes"): several processes on one
//! SQLite file would each believe they are the only node (gateway registry, webhook lanes,
//! caches), so a second `serve` on the same store refuses to start and says why. Several nodes
//! need PostgreSQL.
//!
//! The lock is an exclusive `flock` on a file beside the database, held for the life of the
//! process and released by the kernel however it ends (`kill -9` included), so a stale lock never
//! blocks a restart. The database file itself is not locked this way: closing any descriptor of
//! it would release SQLite's own locks.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The lock of one SQLite store, held until dropped.
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
}

/// Takes the lock of the SQLite store at `database_url`; `None` for PostgreSQL or an in-memory
/// store, which need none.
pub fn acquire(database_url: &str) -> Result<Option<StoreLock>> {
    let Some(database) = sqlite_file(database_url) else {
        return Ok(None);
    };
    lock(&database, |path| {
        format!(
            "another devicecloud serve is already running on the SQLite store {} (it holds {}); \
             one SQLite store serves one process: run several nodes on PostgreSQL (docs/operations.md, \"Several nodes\")",
            database.display(),
            path.display()
        )
    })
    .map(Some)
}

/// Takes the lock of the SQLite store `database` for a restore into it, which must not run
/// beside a `serve` of that store, and which no `serve` may start beside until it is done.
pub fn acquire_for_restore(database: &Path) -> Result<StoreLock> {
    lock(database, |path| {
        format!(
            "a devicecloud serve is running on the SQLite store {} (it holds {}): stop it before restoring into that store",
            database.display(),
            path.display()
        )
    })
}

/// Locks the file beside `database`; `held` words the refusal when another process holds it.
fn lock(database: &Path, held: impl FnOnce(&Path) -> String) -> Result<StoreLock> {
    let path = lock_path(database);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open the lock file {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(StoreLock { _file: file }),
        Err(TryLockError::WouldBlock) => bail!(held(&path)),
        Err(TryLockError::Error(e)) => Err(e).with_context(|| format!("cannot lock {}", path.display())),
    }
}

/// The file of an SQLite URL (`sqlite://path`, `sqlite:path`, with or without `?options`).
pub fn sqlite_file(url: &str) -> Option<PathBuf> {
    let rest = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or_default();
    (!path.is_empty() && path != ":memory:").then(|| PathBuf::from(path))
}

fn lock_path(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push(".serve-lock");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_name_their_file() {
        assert_eq!(
            sqlite_file("sqlite://./data/devicecloud.db"),
            Some("./data/devicecloud.db".into())
        );
        assert_eq!(
            sqlite_file("sqlite:/var/lib/x.db?mode=rwc"),
            Some("/var/lib/x.db".into())
        );
        assert_eq!(sqlite_file("sqlite::memory:"), None);
        assert_eq!(sqlite_file("postgres://u@h/db"), None);
    }

    #[test]
    fn a_second_lock_on_one_store_is_refused_and_the_first_released_on_drop() {
        let dir = std::env::temp_dir().join(format!("dc-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("devicecloud.db").display());
        let first = acquire(&url).unwrap();
        assert!(first.is_some());
        let refused = acquire(&url).unwrap_err().to_string();
        assert!(refused.contains("another devicecloud serve"), "{refused}");
        drop(first);
        assert!(acquire(&url).unwrap().is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
