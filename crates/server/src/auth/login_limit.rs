//! The limit on failed sign-ins (docs/operations.md, "Limits"): the OAuth password grant and the
//! dashboard's form count failures per (username, client address) over a sliding window; past
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
}

/// Failed sign-ins by pair.
#[derive(Debug)]
pub struct LoginLimiter {
    max_failures: usize,
    window: Duration,
    failures: Mutex<HashMap<SignInKey, VecDeque<Instant>>>,
}

impl LoginLimiter {
    /// A limiter that blocks a pair after `max_failures` failures within `window`.
    pub fn new(max_failures: u32, window: Duration) -> LoginLimiter {
        LoginLimiter {
            max_failures: usize::try_from(max_failures).unwrap_or(usize::MAX).max(1),
            window,
            failures: Mutex::default(),
        }
    }

    /// Counts an attempt before the password is checked, so that requests sent at once cannot
    /// all pass; `Err` with the seconds to wait when the pair is at its limit (nothing is
    /// counted then). A success takes its count back ([`Self::succeeded`]).
    pub fn attempt(&self, key: &SignInKey, now: Instant) -> Result<(), u64> {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(times) = failures.get_mut(key) {
            self.expire(times, now);
            if times.len() >= self.max_failures {
                let oldest = times.front().copied().unwrap_or(now);
                let wait = self.window.saturating_sub(now.duration_since(oldest));
                // Whole seconds, rounded up, at least 1: waiting that long is enough.
                return Err((wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1));
            }
        } else {
            self.make_room(&mut failures, now);
        }
        failures.entry(key.clone()).or_default().push_back(now);
        Ok(())
    }

    /// Counts a failure of the pair made through another node.
    pub fn failed_elsewhere(&self, key: &SignInKey, now: Instant) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if !failures.contains_key(key) {
            self.make_room(&mut failures, now);
        }
        let times = failures.entry(key.clone()).or_default();
        self.expire(times, now);
        times.push_back(now);
    }

    /// After a successful sign-in the pair's failures are forgotten.
    pub fn succeeded(&self, key: &SignInKey) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures.remove(key);
    }

    /// Keeps the map under [`MAX_KEYS`]: expired pairs go first, then those that failed least
    /// recently, pairs still open before blocked ones, a tenth of the map at a time so that the
    /// sort is rare.
    fn make_room(&self, failures: &mut HashMap<SignInKey, VecDeque<Instant>>, now: Instant) {
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
        let mut by_age: Vec<(bool, Instant, SignInKey)> = failures
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
