//! The firmware signing key (docs/operations.md, "Firmware signing key"): an Ed25519 key whose
//! 32-byte seed lives in a file beside the store (`signing_key_file`, by default `signing.key`
//! in the data dir), made on first start, the same file on every node and kept with the backups.
//! Gateways check every image's manifest with its public key before installing it.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signer as _, SigningKey};

use crate::key_file::{self, KeyError, KeyKind};

/// The signing key file, as messages name it.
pub static SIGNING_KEY: KeyKind = KeyKind {
    name: "firmware signing key",
    variable: "DEVICECLOUD_SIGNING_KEY_FILE",
    replaced: "gateways check images with the public key of the old one",
};

/// The key that signs firmware manifests.
pub struct Signer {
    key: SigningKey,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("public_key", &self.public_key())
            .finish()
    }
}

impl Signer {
    /// The signer of the key file at `path`, made when there is none; with no path, a random
    /// key kept in memory only (tests, throw-away stores).
    pub fn load(path: Option<&Path>) -> Result<Signer, KeyError> {
        let seed = match path {
            Some(path) => key_file::read_or_create(path, &SIGNING_KEY)?,
            None => key_file::random_key(),
        };
        Ok(Signer {
            key: SigningKey::from_bytes(&seed),
        })
    }

    /// The public key: standard base64 (with padding) of its raw 32 bytes.
    pub fn public_key(&self) -> String {
        STANDARD.encode(self.key.verifying_key().to_bytes())
    }

    /// The signature of `manifest`: standard base64 of its 64 bytes.
    pub fn sign(&self, manifest: &str) -> String {
        STANDARD.encode(self.key.sign(manifest.as_bytes()).to_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devicecloud_protocol::firmware::signature_holds;

    #[test]
    fn the_key_file_is_made_once_and_its_signatures_hold() {
        let dir = std::env::temp_dir().join(format!("dc-signing-{}", uuid::Uuid::new_v4()));
        let path = dir.join("signing.key");
        let first = Signer::load(Some(&path)).unwrap();
        let again = Signer::load(Some(&path)).unwrap();
        assert_eq!(first.public_key(), again.public_key());
        let signature = first.sign("manifest");
        assert!(signature_holds(&again.public_key(), "manifest", &signature));
        let other = Signer::load(None).unwrap();
        assert!(!signature_holds(&other.public_key(), "manifest", &signature));
        std::fs::write(&path, b"short").unwrap();
        assert!(matches!(
            Signer::load(Some(&path)),
            Err(KeyError::Malformed { len: 5, .. })
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
