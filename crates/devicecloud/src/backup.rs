//! `devicecloud admin backup` and `devicecloud admin restore` (docs/operations.md, "Backup and
//! restore"). On SQLite they copy the store themselves: a backup is taken while `serve` runs
//! (`devicecloud_store::backup`), a restore fills an empty data dir and is refused beside a
//! running `serve`. On PostgreSQL the database's own tools do it better (and from any machine),
//! so they print the `pg_dump` and `pg_restore` commands to run.
//!
//! The key files are not in the store: the secret key that encrypts webhook secrets (a store
//! restored without it cannot deliver to webhooks that have credentials) and the firmware
//! signing key (gateways check images with its public key). An SQLite backup `FILE` is
//! accompanied by copies of both, `FILE.secret.key` and `FILE.signing.key`, which a restore puts
//! back.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use devicecloud_store::Db;
use devicecloud_store::backup::{self as store_backup, sidecar};
use serde_json::{Value, json};

use crate::settings::Settings;
use crate::store_lock;

/// A key file kept beside the store, and copied beside its backups.
struct KeyFile {
    /// The field of the printed summary (`secret_key`, `signing_key`).
    field: &'static str,
    /// Where the service reads it.
    path: PathBuf,
    /// What the copy beside a backup `FILE` is named: `FILE<suffix>`.
    suffix: &'static str,
    /// Its setting, named when a restore refuses another key.
    variable: &'static str,
    /// What another key in its place would break.
    breaks: &'static str,
}

impl KeyFile {
    /// Where the copy kept with the backup `file` is.
    fn beside(&self, file: &Path) -> PathBuf {
        sidecar(file, self.suffix)
    }
}

/// The key files of the service `settings` describes.
fn key_files(settings: &Settings) -> [KeyFile; 2] {
    [
        KeyFile {
            field: "secret_key",
            path: settings.secret_key_file(),
            suffix: ".secret.key",
            variable: "DEVICECLOUD_SECRET_KEY_FILE",
            breaks: "the restored webhook secrets could not be opened with it",
        },
        KeyFile {
            field: "signing_key",
            path: settings.signing_key_file(),
            suffix: ".signing.key",
            variable: "DEVICECLOUD_SIGNING_KEY_FILE",
            breaks: "gateways check firmware images with the backup's public key",
        },
    ]
}

/// `admin backup --to FILE`.
pub async fn backup(settings: &Settings, to: &Path) -> Result<Value> {
    let url = settings.database_url()?;
    if is_postgres(&url) {
        refuse_existing(to)?;
        let argv = [
            "pg_dump",
            "--format=custom",
            "--file",
            &text(to)?,
            "--dbname",
            &without_password(&url)?,
        ];
        return Ok(postgres_command(&argv, settings));
    }
    let store = sqlite_store(&url)?;
    if !store.exists() {
        bail!("there is no store at {} to back up", store.display());
    }
    let keys = key_files(settings);
    // Every name is checked before the copy starts, which may take minutes.
    refuse_existing(to)?;
    for key in &keys {
        refuse_existing(&key.beside(to))?;
    }
    let started = Instant::now();
    let db = Db::connect(&url)
        .await
        .with_context(|| format!("cannot open the store {}", store.display()))?;
    let copied = store_backup::sqlite_backup(&db, to).await;
    db.close().await;
    let bytes = copied?;
    let took_ms = started.elapsed().as_millis();
    let mut summary = json!({
        "backend": "sqlite",
        "store": store.display().to_string(),
        "backup": to.display().to_string(),
        "bytes": bytes,
        "took_ms": took_ms,
    });
    for key in &keys {
        // No key yet: no `serve` ever ran on this data dir, so nothing was sealed or signed.
        let copy = key.beside(to);
        let kept = if key.path.exists() {
            store_backup::copy_new_file(&key.path, &copy)?;
            Some(copy.display().to_string())
        } else {
            tracing::warn!(key = %key.path.display(), "no {} file to keep with the backup", key.field);
            None
        };
        summary[key.field] = json!(kept);
    }
    Ok(summary)
}

/// `admin restore --from FILE`.
pub async fn restore(settings: &Settings, from: &Path) -> Result<Value> {
    let url = settings.database_url()?;
    if is_postgres(&url) {
        check_pg_archive(from)?;
        let argv = [
            "pg_restore",
            "--no-owner",
            "--no-privileges",
            "--exit-on-error",
            "--single-transaction",
            "--dbname",
            &without_password(&url)?,
            &text(from)?,
        ];
        return Ok(postgres_command(&argv, settings));
    }
    let store = sqlite_store(&url)?;
    if let Some(dir) = store.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create the directory {}", dir.display()))?;
    }
    // Held until the end: no `serve` starts on the store while it is being put in place.
    let _lock = store_lock::acquire_for_restore(&store)?;
    // A store, or what is left of one, is never replaced: its write-ahead log or rollback
    // journal would be replayed into the restored file.
    for file in [store.clone(), sidecar(&store, "-wal"), sidecar(&store, "-journal")] {
        if std::fs::metadata(&file).is_ok_and(|m| m.len() > 0) {
            bail!(
                "{} already exists and is not empty: a restore fills an empty data dir only (move the store away first)",
                file.display()
            );
        }
    }
    let keys = key_files(settings);
    let mut restore_keys = Vec::with_capacity(keys.len());
    for key in &keys {
        let copy = key.beside(from);
        restore_keys.push(copy.exists() && check_key(&copy, key)?);
    }
    let started = Instant::now();
    let info = store_backup::check_sqlite_backup(from).await?;
    // Empty files (the store of an interrupted start, its shared-memory index) make way.
    for file in [store.clone(), sidecar(&store, "-wal"), sidecar(&store, "-shm")] {
        match std::fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("cannot remove the empty {}", file.display()));
            }
            _ => {}
        }
    }
    let bytes = store_backup::copy_new_file(from, &store)?;
    for (key, restore) in keys.iter().zip(&restore_keys) {
        if !restore {
            continue;
        }
        if let Some(dir) = key.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create the directory {}", dir.display()))?;
        }
        store_backup::copy_new_file(&key.beside(from), &key.path)?;
    }
    // Opening applies the migrations this version has and the backup had not.
    let db = Db::connect(&url)
        .await
        .with_context(|| format!("cannot open the restored store {}", store.display()))?;
    db.close().await;
    let mut summary = json!({
        "backend": "sqlite",
        "backup": from.display().to_string(),
        "store": store.display().to_string(),
        "bytes": bytes,
        "took_ms": started.elapsed().as_millis(),
        "backup_migration": info.migration,
        "migration": info.latest_migration,
    });
    for (key, restored) in keys.iter().zip(restore_keys) {
        let outcome = match (key.beside(from).exists(), restored) {
            (_, true) => "restored",
            (true, false) => "already in place",
            (false, _) => "not in the backup",
        };
        summary[format!("{}_file", key.field)] = json!(key.path.display().to_string());
        summary[key.field] = json!(outcome);
    }
    Ok(summary)
}

/// Whether the key kept with a backup must be copied to `key`'s place: yes when there is none
/// there, no when the same key is; a different key there stops the restore, since what the
/// store holds was sealed or signed with the backup's.
fn check_key(key_copy: &Path, key: &KeyFile) -> Result<bool> {
    if !key.path.exists() {
        return Ok(true);
    }
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("cannot read {}", p.display()));
    if read(key_copy)? == read(&key.path)? {
        return Ok(false);
    }
    bail!(
        "{} holds another key than the backup's {}: {}; move it away so that the backup's is put in its place ({})",
        key.path.display(),
        key_copy.display(),
        key.breaks,
        key.variable
    )
}

fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// The database file of an SQLite store URL.
fn sqlite_store(url: &str) -> Result<PathBuf> {
    store_lock::sqlite_file(url)
        .with_context(|| format!("{url} is not an SQLite file: an in-memory store has nothing to copy"))
}

fn refuse_existing(path: &Path) -> Result<()> {
    if std::fs::symlink_metadata(path).is_ok() {
        bail!(
            "{} already exists: a backup never overwrites a file; choose another name or remove it first",
            path.display()
        );
    }
    Ok(())
}

fn text(path: &Path) -> Result<String> {
    path.to_str()
        .map(str::to_string)
        .with_context(|| format!("{} is not valid UTF-8", path.display()))
}

/// What is printed for PostgreSQL: the command as arguments and as one shell line. The
/// database is given as its URL without the password, which the tool reads from `PGPASSWORD`
/// or `~/.pgpass`.
fn postgres_command(argv: &[&str], settings: &Settings) -> Value {
    let shell = argv.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ");
    json!({
        "backend": "postgres",
        "command": argv,
        "shell": shell,
        "password": "not shown: give it through PGPASSWORD or ~/.pgpass",
        "secret_key_file": settings.secret_key_file().display().to_string(),
        "secret_key": "keep a copy of secret_key_file with the dump: the webhook secrets in the database are sealed with it",
        "signing_key_file": settings.signing_key_file().display().to_string(),
        "signing_key": "keep a copy of signing_key_file with the dump: gateways check firmware images with its public key",
    })
}

/// A `pg_dump --format=custom` archive starts with `PGDMP`.
fn check_pg_archive(file: &Path) -> Result<()> {
    use std::io::Read;
    let mut magic = [0u8; 5];
    std::fs::File::open(file)
        .and_then(|mut f| f.read_exact(&mut magic))
        .with_context(|| format!("cannot read {}", file.display()))?;
    if &magic != b"PGDMP" {
        bail!(
            "{} is not a pg_dump archive in the custom format (pg_dump --format=custom)",
            file.display()
        );
    }
    Ok(())
}

/// The connection URL with its password removed, whether given as `user:password@` or as a
/// `password=` parameter.
fn without_password(url: &str) -> Result<String> {
    let mut parsed = url::Url::parse(url).context("DEVICECLOUD_DATABASE_URL is not a valid URL")?;
    // Only a URL that cannot have a password refuses to drop it, and it has none then.
    let _ = parsed.set_password(None);
    let kept: Vec<(String, String)> = parsed
        .query_pairs()
        .filter(|(k, _)| k != "password")
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if kept.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(kept);
    }
    Ok(parsed.to_string())
}

/// `arg` as one word of a POSIX shell line: as it is when made of plain characters only,
/// otherwise in single quotes.
fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_never_appears_in_a_printed_command() {
        assert_eq!(
            without_password("postgres://dc:s3cret@db.example.com:5433/devicecloud?sslmode=require").unwrap(),
            "postgres://dc@db.example.com:5433/devicecloud?sslmode=require"
        );
        assert_eq!(
            without_password("postgresql://dc@db/devicecloud?password=s3cret&sslmode=require").unwrap(),
            "postgresql://dc@db/devicecloud?sslmode=require"
        );
        assert_eq!(
            without_password("postgres://dc@db/devicecloud?password=s3cret").unwrap(),
            "postgres://dc@db/devicecloud"
        );
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_quote("--format=custom"), "--format=custom");
        assert_eq!(shell_quote("/var/backups/dc 1.dump"), "'/var/backups/dc 1.dump'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
