//! Short-lived memory of bearer tokens and roles, so that an authenticated read costs one hash
//! and two map look-ups instead of two queries (architecture: "hot reads from memory").
//!
//! Entries expire after a few seconds, which bounds how long another node's change (a revoked
//! role, say) can go unseen; changes made through this node invalidate at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use super::rights::Roles;

/// What a token hash resolved to.
#[derive(Clone, Debug)]
pub struct TokenEntry {
    pub id_user: String,
    pub is_admin: bool,
    pub client_id: String,
    pub expires_at: i64,
}

/// The cache itself; one per service, shared through `AppState`.
#[derive(Debug)]
pub struct AuthCache {
    ttl: Duration,
    tokens: RwLock<HashMap<String, (TokenEntry, Instant)>>,
    roles: RwLock<HashMap<String, (Arc<Roles>, Instant)>>,
    /// Counts the changes of rights made through this node (a token revoked, a role changed, a
    /// group deleted), so that long-lived requests re-check at once when it moves.
    changes: AtomicU64,
}

/// Above this many entries a map is cleared rather than grown: a flood of distinct bogus
/// tokens must not become unbounded memory.
const MAX_ENTRIES: usize = 100_000;

impl AuthCache {
    pub fn new(ttl: Duration) -> AuthCache {
        AuthCache {
            ttl,
            tokens: RwLock::default(),
            roles: RwLock::default(),
            changes: AtomicU64::new(0),
        }
    }

    /// The number of rights changes so far (see [`AuthCache::rights_changed`]).
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }

    /// Notes a change of rights made through this node: whoever holds rights checked earlier
    /// (a live stream) checks again. Every `forget_*` notes one.
    pub fn rights_changed(&self) {
        self.changes.fetch_add(1, Ordering::SeqCst);
    }

    pub fn token(&self, hash: &str) -> Option<TokenEntry> {
        let map = self.tokens.read().ok()?;
        map.get(hash)
            .filter(|(_, at)| at.elapsed() < self.ttl)
            .map(|(e, _)| e.clone())
    }

    pub fn put_token(&self, hash: String, entry: TokenEntry) {
        if let Ok(mut map) = self.tokens.write() {
            if map.len() >= MAX_ENTRIES {
                map.clear();
            }
            map.insert(hash, (entry, Instant::now()));
        }
    }

    /// Forgets a token, after a refresh changed its expiry or a revocation ended it.
    pub fn forget_token(&self, hash: &str) {
        if let Ok(mut map) = self.tokens.write() {
            map.remove(hash);
        }
        // After the entry is gone: a re-check prompted by the change reads the store.
        self.rights_changed();
    }

    /// Forgets every token of an account, after its tokens were revoked (a disabled account,
    /// a changed password): the next request with any of them reads the store, and fails.
    pub fn forget_user(&self, id_user: &str) {
        if let Ok(mut map) = self.tokens.write() {
            map.retain(|_, (entry, _)| entry.id_user != id_user);
        }
        // After the entry is gone: a re-check prompted by the change reads the store.
        self.rights_changed();
    }

    pub fn roles(&self, id_user: &str) -> Option<Arc<Roles>> {
        let map = self.roles.read().ok()?;
        map.get(id_user)
            .filter(|(_, at)| at.elapsed() < self.ttl)
            .map(|(r, _)| r.clone())
    }

    pub fn put_roles(&self, id_user: String, roles: Arc<Roles>) {
        if let Ok(mut map) = self.roles.write() {
            if map.len() >= MAX_ENTRIES {
                map.clear();
            }
            map.insert(id_user, (roles, Instant::now()));
        }
    }

    /// Forgets a user's roles, after a membership change.
    pub fn forget_roles(&self, id_user: &str) {
        if let Ok(mut map) = self.roles.write() {
            map.remove(id_user);
        }
        // After the entry is gone: a re-check prompted by the change reads the store.
        self.rights_changed();
    }
}
