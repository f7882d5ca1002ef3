//! The limit on failed sign-ins (docs/operations.md, "Limits"): the OAuth password grant and the
//! dashboard's form count failures per (username, client address), and per client address
//! alone with a higher limit, over a sliding window; past
//! the limit that pair answers 429 until its oldest counted failure leaves the window, and the
//! password is not even checked meanwhile. Keying by the pair, not by the username alone, means
//! that a guesser elsewhere cannot lock an account's owner out; keying by the address alone
//! would let one address behind a shared proxy lock out everyone behind it.
//!
//! The counts live in memory, at most [`MAX_KEYS`] pairs: a restart forgets them. With several
//! nodes, each failure and each success is told to the other nodes (`peers`), so that a guesser
//! spreading attempts over the nodes meets one limit, not one per node.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Pairs remembered at most. Beyond, expired pairs are dropped first, then the pairs that
/// failed least recently (blocked ones last), so a flood of distinct usernames costs bounded
/// memory.
const MAX_KEYS: usize = 100_000;

/// One (username, client address) pair: the username lower-cased (sign-in compares it so), an
/// IPv6 client by its /64 (one host usually holds a whole /64 and could otherwise take a fresh
/// address for every attempt).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SignInKey {
    username: String,
    address: String,
}

impl SignInKey {
    pub fn new(username: &str, client: IpAddr) -> SignInKey {
        let address = match client {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        };
        SignInKey {
            username: username.trim().to_lowercase(),
            address,
        }
    }

    /// The client address part, as it is limited on its own.
    fn address(&self) -> &str {
        &self.address
    }
}

/// Failed sign-ins by pair, and by client address whatever the username (so that one address
/// cannot spray one password over every account).
#[derive(Debug)]
pub struct LoginLimiter {
    pairs: Windows<SignInKey>,
    addresses: Windows<String>,
}

impl LoginLimiter {
    /// A limiter that blocks a pair after `max_failures` failures within `window`, and an
    /// address after `max_per_address` failures of any usernames within the same window.
    pub fn new(max_failures: u32, max_per_address: u32, window: Duration) -> LoginLimiter {
        LoginLimiter {
            pairs: Windows::new(max_failures, window),
            addresses: Windows::new(max_per_address, window),
        }
    }

    /// Counts an attempt before the password is checked, so that requests sent at once cannot
    /// all pass; `Err` with the seconds to wait when the pair or its address is at its limit
    /// (nothing is counted then). A success takes its count back ([`Self::succeeded`],
    /// [`Self::take_back`]).
    pub fn attempt(&self, key: &SignInKey, now: Instant) -> Result<(), u64> {
        let mut pairs = self.pairs.lock();
        let mut addresses = self.addresses.lock();
        let address = key.address().to_string();
        let pair_wait = self.pairs.wait(&mut pairs, key, now);
        let address_wait = self.addresses.wait(&mut addresses, &address, now);
        if let Some(wait) = pair_wait.max(address_wait) {
            return Err(wait);
        }
        self.pairs.push(&mut pairs, key, now);
        self.addresses.push(&mut addresses, &address, now);
        Ok(())
    }

    /// Counts a failure of the pair made through another node.
    pub fn failed_elsewhere(&self, key: &SignInKey, now: Instant) {
        self.pairs.push(&mut self.pairs.lock(), key, now);
        self.addresses
            .push(&mut self.addresses.lock(), &key.address().to_string(), now);
    }

    /// After a successful sign-in (here or through another node) the pair's failures are
    /// forgotten. The address keeps its count: signing in to one's own account must not reset
    /// the budget of guesses at others.
    pub fn succeeded(&self, key: &SignInKey) {
        self.pairs.lock().remove(key);
    }

    /// Takes back both counts of an attempt made here whose password was never checked.
    pub fn undo(&self, key: &SignInKey) {
        if let Some(times) = self.pairs.lock().get_mut(key) {
            times.pop_back();
        }
        self.take_back(key);
    }

    /// Takes back the address's count of a sign-in made here that succeeded.
    pub fn take_back(&self, key: &SignInKey) {
        if let Some(times) = self.addresses.lock().get_mut(key.address()) {
            times.pop_back();
        }
    }
}

/// Times of failures by key within a sliding window, at most [`MAX_KEYS`] keys.
#[derive(Debug)]
struct Windows<K> {
    max_failures: usize,
    window: Duration,
    failures: Mutex<HashMap<K, VecDeque<Instant>>>,
}

type Map<K> = HashMap<K, VecDeque<Instant>>;

impl<K: Clone + Eq + std::hash::Hash> Windows<K> {
    fn new(max_failures: u32, window: Duration) -> Windows<K> {
        Windows {
            max_failures: usize::try_from(max_failures).unwrap_or(usize::MAX).max(1),
            window,
            failures: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Map<K>> {
        self.failures.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The seconds `key` must wait when it is at its limit.
    fn wait(&self, failures: &mut Map<K>, key: &K, now: Instant) -> Option<u64> {
        let times = failures.get_mut(key)?;
        self.expire(times, now);
        if times.len() < self.max_failures {
            return None;
        }
        let oldest = times.front().copied().unwrap_or(now);
        let wait = self.window.saturating_sub(now.duration_since(oldest));
        // Whole seconds, rounded up, at least 1: waiting that long is enough.
        Some((wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1))
    }

    fn push(&self, failures: &mut Map<K>, key: &K, now: Instant) {
        if !failures.contains_key(key) {
            self.make_room(failures, now);
        }
        let times = failures.entry(key.clone()).or_default();
        self.expire(times, now);
        times.push_back(now);
    }

    /// Keeps the map under [`MAX_KEYS`]: expired keys go first, then those that failed least
    /// recently, keys still open before blocked ones, a tenth of the map at a time so that the
    /// sort is rare.
    fn make_room(&self, failures: &mut Map<K>, now: Instant) {
        if failures.len() < MAX_KEYS {
            return;
        }
        failures.retain(|_, times| {
            self.expire(times, now);
            !times.is_empty()
        });
        if failures.len() < MAX_KEYS {
            return;
        }
        let mut by_age: Vec<(bool, Instant, K)> = failures
            .iter()
            .filter_map(|(key, times)| {
                let blocked = times.len() >= self.max_failures;
                times.back().map(|last| (blocked, *last, key.clone()))
            })
            .collect();
        by_age.sort_by_key(|a| (a.0, a.1));
        let excess = (failures.len() + 1 - MAX_KEYS).max(MAX_KEYS / 10);
        for (_, _, key) in by_age.into_iter().take(excess) {
            failures.remove(&key);
        }
    }

    fn expire(&self, times: &mut VecDeque<Instant>, now: Instant) {
        while times.front().is_some_and(|t| now.duration_since(*t) >= self.window) {
            times.pop_front();
        }
    }
}

#[cfg(test)]
mod tests;
