//! Who may read what the service writes (docs/operations.md, "Files"): the store holds token
//! hashes, password hashes and every measurement, the key files decrypt webhook credentials. So
//! every file the process creates is readable by its own user only (0600, directories 0700),
//! whichever code creates it (the database engine's store, log and shared-memory files, the
//! key files, backups), and a store made by an older version is tightened at start.
#![expect(unsafe_code, reason = "umask(2) has no safe binding in the standard library")]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Makes every file and directory this process creates from now on private to its user.
pub fn private_from_now_on() {
    // SAFETY: umask only sets the process's file-creation mask and cannot fail; it is called
    // before any thread of the runtime starts, so no concurrent file creation sees it change.
    unsafe {
        libc::umask(0o077);
    }
}

/// Tightens the SQLite store at `path` and its log and shared-memory files, when they exist,
/// to 0600 (an older version created them by the umask of its day).
pub fn tighten_store(path: &Path) -> std::io::Result<()> {
    let mut files = vec![path.to_path_buf()];
    for suffix in ["-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        files.push(name.into());
    }
    for file in files {
        match std::fs::metadata(&file) {
            Ok(meta) if meta.permissions().mode() & 0o077 != 0 => {
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))?;
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
