//! Rate limit of the sign-in form: failed attempts are counted per client address and per
//! username over a sliding window; past the limit the form answers 429 until the oldest
//! counted failure leaves the window. Counting per username too stops a spread-out guessing
//! attack on one account; counting per address stops one client from trying many accounts.
//!
//! The counts live in memory: a restart forgets them, and each node counts its own.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures allowed per key within [`WINDOW`].
pub const MAX_FAILURES: usize = 10;
/// The sliding window.
pub const WINDOW: Duration = Duration::from_secs(300);
/// Keys kept at most; beyond, expired keys are dropped, then the oldest.
const MAX_KEYS: usize = 100_000;

/// Failed sign-ins by key (`ip:<addr>` and `user:<lowercase name>`).
#[derive(Debug, Default)]
pub struct LoginLimiter {
    failures: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl LoginLimiter {
    /// Counts an attempt against every key before the password is checked, so that requests
    /// sent at once cannot all pass; `Err` with the seconds to wait when a key is at its limit
    /// (nothing is counted then). A success takes its count back ([`Self::succeeded`]).
    pub fn attempt(&self, keys: &[String], now: Instant) -> Result<(), u64> {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let wait = keys
            .iter()
            .filter_map(|key| {
                let times = failures.get_mut(key)?;
                expire(times, now);
                (times.len() >= MAX_FAILURES).then(|| {
                    let oldest = times.front().copied().unwrap_or(now);
                    (WINDOW.saturating_sub(now.duration_since(oldest))).as_secs().max(1)
                })
            })
            .max();
        if let Some(wait) = wait {
            return Err(wait);
        }
        make_room(&mut failures, now);
        for key in keys {
            let times = failures.entry(key.clone()).or_default();
            expire(times, now);
            times.push_back(now);
        }
        Ok(())
    }

    /// After a successful sign-in: the username's failures are forgotten, and the address
    /// gets back the attempt just counted (its earlier failures stay: one success must not
    /// reset a guessing run across accounts).
    pub fn succeeded(&self, user_key: &str, address_key: &str) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures.remove(user_key);
        if let Some(times) = failures.get_mut(address_key) {
            times.pop_back();
        }
    }
}

/// Keeps the map under [`MAX_KEYS`]: expired keys go first, then the least recently failed
/// ones that are not at their limit (a blocked key is never forgotten early).
fn make_room(failures: &mut HashMap<String, VecDeque<Instant>>, now: Instant) {
    if failures.len() < MAX_KEYS {
        return;
    }
    failures.retain(|_, times| {
        expire(times, now);
        !times.is_empty()
    });
    if failures.len() < MAX_KEYS {
        return;
    }
    let mut open: Vec<(Instant, String)> = failures
        .iter()
        .filter(|(_, times)| times.len() < MAX_FAILURES)
        .filter_map(|(key, times)| times.back().map(|t| (*t, key.clone())))
        .collect();
    open.sort();
    for (_, key) in open.into_iter().take(failures.len() + 1 - MAX_KEYS) {
        failures.remove(&key);
    }
}

fn expire(times: &mut VecDeque<Instant>, now: Instant) {
    while times.front().is_some_and(|t| now.duration_since(*t) >= WINDOW) {
        times.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_after_the_limit_until_the_window_passes() {
        let limiter = LoginLimiter::default();
        let keys = vec!["ip:127.0.0.1".to_string(), "user:ann".to_string()];
        let start = Instant::now();
        for i in 0..MAX_FAILURES {
            assert_eq!(limiter.attempt(&keys, start), Ok(()), "attempt {i}");
        }
        let later = start + Duration::from_secs(10);
        assert_eq!(limiter.attempt(&keys, later), Err(WINDOW.as_secs() - 10));
        // Another address is still blocked for the same username.
        assert!(
            limiter
                .attempt(&["ip:10.0.0.1".into(), "user:ann".into()], later)
                .is_err()
        );
        assert_eq!(limiter.attempt(&keys, start + WINDOW), Ok(()));
    }

    #[test]
    fn a_success_gives_back_its_attempt_and_clears_the_username() {
        let limiter = LoginLimiter::default();
        let start = Instant::now();
        let keys = vec!["ip:a".to_string(), "user:bob".to_string()];
        for _ in 0..MAX_FAILURES - 1 {
            limiter.attempt(&keys, start).unwrap();
        }
        limiter.attempt(&keys, start).unwrap();
        limiter.succeeded("user:bob", "ip:a");
        // The address has its nine failures, one more is allowed; the username starts over.
        assert_eq!(limiter.attempt(&["ip:a".into()], start), Ok(()));
        assert!(limiter.attempt(&["ip:a".into()], start).is_err());
        assert_eq!(limiter.attempt(&["user:bob".into()], start), Ok(()));
    }
}
