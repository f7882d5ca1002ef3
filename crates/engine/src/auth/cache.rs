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

/// The cache itself; one per service, shared by the front ends and the peers (`peers::Context`).
#[derive(Debug)]
pub struct AuthCache {
    ttl: Duration,
    tokens: Expiring<TokenEntry>,
    roles: Expiring<Arc<Roles>>,
    /// Counts the changes of rights made through this node (a token revoked, a role changed, a
    /// group deleted), so that long-lived requests re-check at once when it moves.
    changes: AtomicU64,
}

/// Above this many entries a map is cleared rather than grown: a flood of distinct bogus
/// tokens must not become unbounded memory.
const MAX_ENTRIES: usize = 100_000;

/// Entries by key with the time each was put, at most [`MAX_ENTRIES`] of them.
#[derive(Debug)]
struct Expiring<V>(RwLock<HashMap<String, (V, Instant)>>);

impl<V: Clone> Expiring<V> {
    /// The entry of `key` if it was put less than `ttl` ago.
    fn get(&self, key: &str, ttl: Duration) -> Option<V> {
        let map = self.0.read().ok()?;
        map.get(key)
            .filter(|(_, at)| at.elapsed() < ttl)
            .map(|(v, _)| v.clone())
    }

    fn put(&self, key: String, value: V) {
        if let Ok(mut map) = self.0.write() {
            if map.len() >= MAX_ENTRIES {
                map.clear();
            }
            map.insert(key, (value, Instant::now()));
        }
    }

    fn remove(&self, key: &str) {
        if let Ok(mut map) = self.0.write() {
            map.remove(key);
        }
    }

    /// Keeps only the entries `keep` accepts.
    fn retain(&self, mut keep: impl FnMut(&V) -> bool) {
        if let Ok(mut map) = self.0.write() {
            map.retain(|_, (value, _)| keep(value));
        }
    }
}

impl AuthCache {
    pub fn new(ttl: Duration) -> AuthCache {
        AuthCache {
            ttl,
            tokens: Expiring(RwLock::default()),
            roles: Expiring(RwLock::default()),
            changes: AtomicU64::new(0),
        }
    }

    /// The number of rights changes so far (see [`AuthCache::rights_changed`]).
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }

    /// Notes a change of rights made through this node: whoever holds rights checked earlier
    /// (a live stream) checks again. Every `forget_*` notes one, once its entries are gone, so
    /// that a re-check prompted by the change reads the store.
    pub fn rights_changed(&self) {
        self.changes.fetch_add(1, Ordering::SeqCst);
    }

    pub fn token(&self, hash: &str) -> Option<TokenEntry> {
        self.tokens.get(hash, self.ttl)
    }

    pub fn put_token(&self, hash: String, entry: TokenEntry) {
        self.tokens.put(hash, entry);
    }

    /// Forgets a token, after a refresh changed its expiry or a revocation ended it.
    pub fn forget_token(&self, hash: &str) {
        self.tokens.remove(hash);
        self.rights_changed();
    }

    /// Forgets every token of an account, after its tokens were revoked (a disabled account,
    /// a changed password): the next request with any of them reads the store, and fails.
    pub fn forget_user(&self, id_user: &str) {
        self.tokens.retain(|entry| entry.id_user != id_user);
        self.rights_changed();
    }

    /// Forgets every token and role (changes made through other nodes may have been missed).
    pub fn forget_all(&self) {
        self.tokens.retain(|_| false);
        self.roles.retain(|_| false);
        self.rights_changed();
    }

    pub fn roles(&self, id_user: &str) -> Option<Arc<Roles>> {
        self.roles.get(id_user, self.ttl)
    }

    pub fn put_roles(&self, id_user: String, roles: Arc<Roles>) {
        self.roles.put(id_user, roles);
    }

    /// Forgets a user's roles, after a membership change.
    pub fn forget_roles(&self, id_user: &str) {
        self.roles.remove(id_user);
        self.rights_changed();
    }
}
