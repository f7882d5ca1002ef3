//! The 32-byte key files the service keeps beside its store (docs/operations.md, "Secret key"
//! and "Firmware signing key"): read when there, made (random, as hex, mode 0600) on first start
//! when not, never replaced. Every node of one service needs the same files.

use std::io::Write;
use std::path::{Path, PathBuf};

use rand::RngCore;

/// Key length: 256 bits.
pub const KEY_BYTES: usize = 32;

/// Which key file: how it is named in messages, its setting, and what a new key in its place
/// would break.
#[derive(Debug)]
pub struct KeyKind {
    pub name: &'static str,
    pub variable: &'static str,
    pub replaced: &'static str,
}

/// Why a key file cannot be used; the service refuses to start with this message.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read or create the {name} file {path} ({variable}): {source}", name = .kind.name, variable = .kind.variable)]
    Io {
        kind: &'static KeyKind,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the {name} file {path} ({variable}) holds {len} bytes, which is not a key: it must hold 32 bytes, or 64 \
         hexadecimal digits and an optional line break. Restore the right file; {replaced}",
        name = .kind.name, variable = .kind.variable, replaced = .kind.replaced
    )]
    Malformed {
        kind: &'static KeyKind,
        path: PathBuf,
        len: usize,
    },
}

/// 32 random bytes.
pub fn random_key() -> [u8; KEY_BYTES] {
    let mut key = [0u8; KEY_BYTES];
    rand::rng().fill_bytes(&mut key);
    key
}

/// Reads the key file of `kind` at `path`, or makes it when there is none.
pub fn read_or_create(path: &Path, kind: &'static KeyKind) -> Result<[u8; KEY_BYTES], KeyError> {
    let io = |source| KeyError::Io {
        kind,
        path: path.to_path_buf(),
        source,
    };
    match std::fs::read(path) {
        Ok(bytes) => parse_key(&bytes).ok_or_else(|| KeyError::Malformed {
            kind,
            path: path.to_path_buf(),
            len: bytes.len(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = random_key();
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(io)?;
            }
            match create_new(path, &key) {
                Ok(()) => {
                    tracing::info!(path = %path.display(), "{} file created", kind.name);
                    Ok(key)
                }
                // Another process (a second node, a racing admin command) made it first.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_or_create(path, kind),
                Err(e) => Err(io(e)),
            }
        }
        Err(e) => Err(io(e)),
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
