//! Secrets handed out and checked by the service: random tokens stored as SHA-256 hashes, and
//! passwords stored with argon2 (docs/api.md, "Authentication").

use argon2::{Argon2, PasswordHasher, PasswordVerifier};
use rand::RngCore;
use sha2::{Digest, Sha256};

/// A fresh random secret of 256 bits, as 64 lowercase hex characters.
///
/// Tokens are opaque (docs/api.md, "Authentication"): nothing in them can be decoded, so a stolen database of
/// hashes yields nothing usable.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// The stored form of a token or client secret. High-entropy random values need no slow hash:
/// SHA-256 keeps the bearer check in microseconds.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The argon2 PHC string of a password (random salt, the crate's recommended parameters).
pub fn hash_password(password: &str) -> Result<String, String> {
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

/// Whether `password` matches the stored argon2 `hash` (the comparison is constant-time).
pub fn verify_password(password: &str, hash: &str) -> bool {
    Argon2::default().verify_password(password.as_bytes(), hash).is_ok()
}

/// Constant-time equality of two hashes, for client secrets.
pub fn same_hash(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// Registers an API client and returns its id and its secret, which exists only in this answer
/// (the store keeps its hash). Used by `devicecloud admin create-client` and the dashboard.
pub async fn register_client(
    db: &devicecloud_store::Db,
    name: &str,
) -> devicecloud_store::Result<(devicecloud_store::clients::ClientRow, String)> {
    let (client_id, secret) = (devicecloud_store::new_id(), random_token());
    let row = devicecloud_store::clients::create(
        db,
        &client_id,
        name,
        &token_hash(&secret),
        devicecloud_store::unix_now(),
    )
    .await?;
    Ok((row, secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_256_bit_and_distinct() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert_ne!(token_hash(&a), a);
    }

    #[test]
    fn passwords_verify() {
        let hash = hash_password("s3cret").unwrap();
        assert!(hash.starts_with("$argon2id$"));
        assert!(verify_password("s3cret", &hash));
        assert!(!verify_password("s3cre", &hash));
        assert!(!verify_password("s3cret", "not a hash"));
    }
}
