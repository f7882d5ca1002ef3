//! Webhook secrets at rest (docs/operations.md, "Secret key"): a webhook's `secret` and
//! `authorization` are stored sealed with XChaCha20-Poly1305 (an AEAD: a changed or swapped
//! value fails to open rather than yielding garbage) under a 32-byte key kept in a file apart
//! from the database, so that a copy of the database alone (a backup, a dump) does not hand out
//! the credentials of customers' endpoints.
//!
//! A sealed value is `sealed:v1:` and the base64 (URL alphabet, unpadded) of a random 24-byte
//! nonce followed by the ciphertext; the field name (`secret`, `authorization`) is the
//! associated data, so one field's value cannot stand in for the other's. Anything without the
//! prefix is a clear value written by an older version, which the service seals at start
//! ([`seal_stored`]) and reads meanwhile as it is.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rand::RngCore;

pub use crate::key_file::KeyError;
use crate::key_file::{self, KEY_BYTES, KeyKind};

/// The field names sealed values are bound to.
pub const SECRET: &str = "secret";
pub const AUTHORIZATION: &str = "authorization";

/// What marks a sealed value.
const PREFIX: &str = "sealed:v1:";
const NONCE_BYTES: usize = 24;

/// The secret key file, as messages name it.
pub static SECRET_KEY: KeyKind = KeyKind {
    name: "secret key",
    variable: "DEVICECLOUD_SECRET_KEY_FILE",
    replaced: "a new key cannot open the webhook secrets sealed with the old one",
};

/// A stored value that cannot be opened: sealed with another key, or damaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a stored webhook credential cannot be opened with this secret key (another key, or a damaged value)")]
pub struct Unopenable;

/// The key and the cipher built from it.
pub struct Vault {
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Vault(..)")
    }
}

impl Vault {
    /// The vault of the key file at `path`, made (32 random bytes as hex, mode 0600) when there
    /// is no file; with no path, a random key kept in memory only (tests, throw-away stores).
    pub fn load(path: Option<&Path>) -> Result<Vault, KeyError> {
        let key = match path {
            Some(path) => key_file::read_or_create(path, &SECRET_KEY)?,
            None => key_file::random_key(),
        };
        Ok(Vault::from_key(&key))
    }

    fn from_key(key: &[u8; KEY_BYTES]) -> Vault {
        Vault {
            cipher: XChaCha20Poly1305::new(key.into()),
        }
    }

    /// Whether a stored value is sealed (rather than clear text from an older version).
    pub fn is_sealed(stored: &str) -> bool {
        stored.starts_with(PREFIX)
    }

    /// Seals the clear value of `field`.
    pub fn seal(&self, field: &str, clear: &str) -> String {
        let mut nonce = [0u8; NONCE_BYTES];
        rand::rng().fill_bytes(&mut nonce);
        let payload = Payload {
            msg: clear.as_bytes(),
            aad: field.as_bytes(),
        };
        // Encryption fails only for messages beyond 256 GiB.
        let sealed = self
            .cipher
            .encrypt(&XNonce::from(nonce), payload)
            .expect("a webhook credential is far below the cipher's message limit");
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes))
    }

    /// The clear value of a stored `field`: opened if sealed, as it is otherwise.
    pub fn open(&self, field: &str, stored: &str) -> Result<String, Unopenable> {
        let Some(encoded) = stored.strip_prefix(PREFIX) else {
            return Ok(stored.to_string());
        };
        let bytes = URL_SAFE_NO_PAD.decode(encoded).map_err(|_| Unopenable)?;
        if bytes.len() < NONCE_BYTES {
            return Err(Unopenable);
        }
        let (nonce, sealed) = bytes.split_at(NONCE_BYTES);
        let nonce = XNonce::try_from(nonce).map_err(|_| Unopenable)?;
        let payload = Payload {
            msg: sealed,
            aad: field.as_bytes(),
        };
        let clear = self.cipher.decrypt(&nonce, payload).map_err(|_| Unopenable)?;
        String::from_utf8(clear).map_err(|_| Unopenable)
    }
}

/// Seals the `secret` and `authorization` that an older version stored in clear text; sealed
/// ones are left as they are, so running it again (every start, every node) changes nothing.
/// Returns how many webhooks were sealed.
pub async fn seal_stored(db: &devicecloud_store::Db, vault: &Vault) -> Result<u64, devicecloud_store::StoreError> {
    let mut sealed = 0;
    for (id, secret, authorization) in devicecloud_store::webhooks::stored_secrets(db).await? {
        let clear_secret = !Vault::is_sealed(&secret);
        let clear_authorization = authorization.as_deref().is_some_and(|a| !Vault::is_sealed(a));
        if !clear_secret && !clear_authorization {
            continue;
        }
        let new_secret = if clear_secret {
            vault.seal(SECRET, &secret)
        } else {
            secret.clone()
        };
        let new_authorization = match authorization.as_deref() {
            Some(a) if clear_authorization => Some(vault.seal(AUTHORIZATION, a)),
            other => other.map(str::to_string),
        };
        let old = (secret.as_str(), authorization.as_deref());
        let new = (new_secret.as_str(), new_authorization.as_deref());
        if devicecloud_store::webhooks::replace_secrets(db, &id, old, new).await? {
            sealed += 1;
        }
    }
    Ok(sealed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_path(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("dc-vault-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("secret.key")
    }

    #[test]
    fn sealed_values_open_and_clear_ones_pass() {
        let vault = Vault::load(None).unwrap();
        let sealed = vault.seal("secret", "s3cret");
        assert!(Vault::is_sealed(&sealed));
        assert!(!sealed.contains("s3cret"));
        assert_ne!(sealed, vault.seal("secret", "s3cret"), "a fresh nonce each time");
        assert_eq!(vault.open("secret", &sealed).unwrap(), "s3cret");
        assert_eq!(vault.open("secret", "clear text").unwrap(), "clear text");
        // Another field, another key, a damaged value: refused.
        assert_eq!(vault.open("authorization", &sealed), Err(Unopenable));
        assert_eq!(Vault::load(None).unwrap().open("secret", &sealed), Err(Unopenable));
        assert_eq!(vault.open("secret", &format!("{sealed}AA")), Err(Unopenable));
        assert_eq!(vault.open("secret", "sealed:v1:%%"), Err(Unopenable));
        assert_eq!(vault.open("secret", "sealed:v1:"), Err(Unopenable));
    }

    #[test]
    fn the_key_file_is_made_once_owner_only_and_read_back() {
        let path = temp_path("made");
        let first = Vault::load(Some(&path)).unwrap();
        let sealed = first.seal("secret", "value");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.trim_end().len(), 64);
        let again = Vault::load(Some(&path)).unwrap();
        assert_eq!(again.open("secret", &sealed).unwrap(), "value");
        // 32 raw bytes are a key too.
        let raw = temp_path("raw");
        std::fs::create_dir_all(raw.parent().unwrap()).unwrap();
        std::fs::write(&raw, [7u8; 32]).unwrap();
        assert!(Vault::load(Some(&raw)).is_ok());
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
        let _ = std::fs::remove_dir_all(raw.parent().unwrap());
    }

    #[test]
    fn a_malformed_key_file_is_refused_with_its_name() {
        let path = temp_path("bad");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        for content in [&b"too short"[..], b"", &[b'z'; 64][..], &[1u8; 33][..]] {
            std::fs::write(&path, content).unwrap();
            let error = Vault::load(Some(&path)).unwrap_err();
            assert!(matches!(error, KeyError::Malformed { .. }), "{error}");
            assert!(error.to_string().contains(&path.display().to_string()));
        }
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}
