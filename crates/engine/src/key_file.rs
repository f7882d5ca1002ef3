//! The 32-byte key files the service keeps beside its store (docs/operations.md, "Secret key"
//! and "Firmware signing key"): read when there, made (random, as hex, mode 0600) on first start
//! when not, never replaced. Every node of one service needs the same files.

use std::io::Write;
use std::path::Path;

use rand::RngCore;

/// Key length: 256 bits.
pub const KEY_BYTES: usize = 32;

/// Why a key file cannot be used.
#[derive(Debug)]
pub enum KeyFileError {
    /// It cannot be read or made.
    Io(std::io::Error),
    /// It holds this many bytes, which are not a key.
    Malformed(usize),
}

/// 32 random bytes.
pub fn random_key() -> [u8; KEY_BYTES] {
    let mut key = [0u8; KEY_BYTES];
    rand::rng().fill_bytes(&mut key);
    key
}

/// Reads the key file at `path`, or makes it when there is none (`what` names it in the log).
pub fn read_or_create(path: &Path, what: &str) -> Result<[u8; KEY_BYTES], KeyFileError> {
    match std::fs::read(path) {
        Ok(bytes) => parse_key(&bytes).ok_or(KeyFileError::Malformed(bytes.len())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = random_key();
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(KeyFileError::Io)?;
            }
            match create_new(path, &key) {
                Ok(()) => {
                    tracing::info!(path = %path.display(), "{what} file created");
                    Ok(key)
                }
                // Another process (a second node, a racing admin command) made it first.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_or_create(path, what),
                Err(e) => Err(KeyFileError::Io(e)),
            }
        }
        Err(e) => Err(KeyFileError::Io(e)),
    }
}

/// A key file's content: 32 raw bytes, or 64 hex digits with an optional line break.
pub fn parse_key(bytes: &[u8]) -> Option<[u8; KEY_BYTES]> {
    if let Ok(key) = <[u8; KEY_BYTES]>::try_from(bytes) {
        return Some(key);
    }
    let text = std::str::from_utf8(bytes).ok()?;
    let text = text.strip_suffix('\n').unwrap_or(text);
    let text = text.strip_suffix('\r').unwrap_or(text);
    let decoded = hex::decode(text).ok()?;
    <[u8; KEY_BYTES]>::try_from(decoded.as_slice()).ok()
}

/// Writes a new key file readable by its owner only, never replacing one.
fn create_new(path: &Path, key: &[u8; KEY_BYTES]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(format!("{}\n", hex::encode(key)).as_bytes())?;
    file.sync_all()
}
