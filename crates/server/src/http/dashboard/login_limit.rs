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
    /// Seconds to wait before another attempt for any of `keys`; `None` when allowed.
    pub fn blocked(&self, keys: &[String], now: Instant) -> Option<u64> {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        keys.iter()
            .filter_map(|key| {
                let times = failures.get_mut(key)?;
                expire(times, now);
                (times.len() >= MAX_FAILURES).then(|| {
                    let oldest = times.front().copied().unwrap_or(now);
                    (WINDOW.saturating_sub(now.duration_since(oldest))).as_secs().max(1)
                })
            })
            .max()
    }

    /// Counts a failed attempt against every key.
    pub fn failed(&self, keys: &[String], now: Instant) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() >= MAX_KEYS {
            failures.retain(|_, times| {
                expire(times, now);
                !times.is_empty()
            });
        }
        while failures.len() >= MAX_KEYS {
            let Some(oldest) = failures
                .iter()
                .min_by_key(|(_, times)| times.back().copied())
                .map(|(key, _)| key.clone())
            else {
                break;
            };
            failures.remove(&oldest);
        }
        for key in keys {
            let times = failures.entry(key.clone()).or_default();
            expire(times, now);
            times.push_back(now);
        }
    }

    /// Forgets the failures of a username after a successful sign-in (the address keeps its
    /// count: one success must not reset a guessing run across accounts).
    pub fn succeeded(&self, user_key: &str) {
        self.failures.lock().unwrap_or_else(|e| e.into_inner()).remove(user_key);
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
            assert_eq!(limiter.blocked(&keys, start), None, "attempt {i}");
            limiter.failed(&keys, start);
        }
        let wait = limiter
            .blocked(&keys, start + Duration::from_secs(10))
            .expect("blocked");
        assert_eq!(wait, WINDOW.as_secs() - 10);
        // Another address is still blocked for the same username.
        assert!(
            limiter
                .blocked(&["ip:10.0.0.1".into(), "user:ann".into()], start)
                .is_some()
        );
        assert_eq!(limiter.blocked(&keys, start + WINDOW), None);
        limiter.succeeded("user:ann");
        assert_eq!(limiter.blocked(&["user:ann".into()], start), None);
    }
}
