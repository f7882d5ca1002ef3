//! The rate limit per account on `/api/v2/` (docs/operations.md, "Limits"): `N` requests per `S`
//! seconds, as a token bucket that holds `N` and refills one request every `S / N` (governor's
//! GCRA, which is exactly that bucket without a timer per account). The numbers a client sees
//! are Yii2's: the limit, what remains, and the seconds until the bucket is full again.
//!
//! Keys are account ids of valid tokens only, so the map holds at most one entry per account;
//! entries of accounts whose bucket is full again are swept out once per period, which keeps it
//! to the accounts active within the last `S` seconds.
//!
//! With several nodes, each node also counts the requests it let through per account and
//! reports them to the others every half second (`peers`), which take as many from their own
//! buckets: an account spreading its requests over the nodes meets one limit, within the half
//! second a report takes.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::{Quota, RateLimiter};

/// `N` requests per `per` for one account (docs/operations.md, "Limits").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    pub requests: u32,
    pub per: Duration,
}

impl RateLimit {
    /// Reads `N/S` (`6000/60`) or `off`.
    pub fn parse(text: &str) -> Result<Option<RateLimit>, String> {
        let text = text.trim();
        if text == "off" {
            return Ok(None);
        }
        let parsed = text.split_once('/').and_then(|(n, s)| {
            let requests: u32 = n.trim().parse().ok().filter(|n| *n > 0)?;
            let seconds: u64 = s.trim().parse().ok().filter(|s| *s > 0)?;
            Some(RateLimit {
                requests,
                per: Duration::from_secs(seconds),
            })
        });
        parsed
            .map(Some)
            .ok_or_else(|| format!("{text} is not N/S (N requests per S seconds, such as 6000/60) or off"))
    }
}

/// The answer for one request: its numbers, and whether it may go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allowance {
    /// `X-Rate-Limit-Limit`: requests per period.
    pub limit: u32,
    /// `X-Rate-Limit-Remaining`: requests left right now, this one counted.
    pub remaining: u32,
    /// `X-Rate-Limit-Reset`: whole seconds until all `limit` requests are available again.
    pub reset_s: u64,
    /// `None` when the request may go on; otherwise the seconds until one more request is
    /// allowed (`Retry-After`, at least 1).
    pub retry_after_s: Option<u64>,
}

type Keyed = RateLimiter<String, DashMapStateStore<String>, DefaultClock, StateInformationMiddleware>;

/// The buckets of every account.
pub struct AccountLimiter {
    limit: u32,
    /// The time one request takes to come back (`S / N`).
    refill: Duration,
    period: Duration,
    buckets: Keyed,
    clock: DefaultClock,
    /// When this limiter was made: the origin of `next_sweep_ms`.
    started: Instant,
    /// Milliseconds after `started` when the next sweep is due. An atomic read per request
    /// (a lock taken by every request on every core measured as a cost of its own).
    next_sweep_ms: AtomicU64,
    /// Requests let through per account since the last report to the other nodes; `None` with
    /// no other nodes to tell (SQLite).
    unreported: Option<DashMap<String, u32>>,
}

impl std::fmt::Debug for AccountLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountLimiter")
            .field("limit", &self.limit)
            .field("period", &self.period)
            .finish_non_exhaustive()
    }
}

impl AccountLimiter {
    /// Buckets for `settings`: `None` when the setting is `off` (or cannot make a bucket).
    pub fn new(settings: Option<RateLimit>) -> Option<AccountLimiter> {
        let RateLimit { requests, per } = settings?;
        let burst = NonZeroU32::new(requests)?;
        let refill = per / requests;
        let quota = Quota::with_period(refill)?.allow_burst(burst);
        Some(AccountLimiter {
            limit: requests,
            refill,
            period: per,
            buckets: RateLimiter::dashmap(quota).with_middleware::<StateInformationMiddleware>(),
            clock: DefaultClock::default(),
            started: Instant::now(),
            next_sweep_ms: AtomicU64::new(millis(per)),
            unreported: None,
        })
    }

    /// Counts the requests it lets through for the other nodes ([`AccountLimiter::reports`]).
    pub fn reporting(mut self) -> AccountLimiter {
        self.unreported = Some(DashMap::new());
        self
    }

    /// The requests let through per account since the last call, for the other nodes.
    pub fn reports(&self) -> Vec<(String, u32)> {
        let Some(unreported) = &self.unreported else {
            return Vec::new();
        };
        let accounts: Vec<String> = unreported.iter().map(|e| e.key().clone()).collect();
        accounts
            .into_iter()
            .filter_map(|account| unreported.remove(&account))
            .collect()
    }

    /// Takes `requests` that another node let through from `id_user`'s bucket, as far as it
    /// holds them.
    pub fn used_elsewhere(&self, id_user: &str, requests: u32) {
        let key = id_user.to_string();
        for _ in 0..requests.min(self.limit) {
            if self.buckets.check_key(&key).is_err() {
                break;
            }
        }
    }

    /// Takes one request from `id_user`'s bucket, if there is one to take.
    pub fn check(&self, id_user: &str) -> Allowance {
        self.sweep();
        let key = id_user.to_string();
        match self.buckets.check_key(&key) {
            Ok(state) => {
                if let Some(unreported) = &self.unreported {
                    *unreported.entry(key).or_insert(0) += 1;
                }
                let remaining = state.remaining_burst_capacity();
                Allowance {
                    limit: self.limit,
                    remaining,
                    reset_s: seconds_up(self.refill * (self.limit - remaining.min(self.limit))),
                    retry_after_s: None,
                }
            }
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.clock.now());
                Allowance {
                    limit: self.limit,
                    remaining: 0,
                    // Empty: one request back after `wait`, all of them `limit - 1` refills later.
                    reset_s: seconds_up(wait + self.refill * (self.limit - 1)),
                    retry_after_s: Some(seconds_up(wait).max(1)),
                }
            }
        }
    }

    /// Drops the buckets that are full again, at most once per period (the request that finds
    /// the sweep due and wins the exchange does it).
    fn sweep(&self) {
        let now = millis(self.started.elapsed());
        let due = self.next_sweep_ms.load(Ordering::Relaxed);
        if now < due {
            return;
        }
        let next = now.saturating_add(millis(self.period));
        if self
            .next_sweep_ms
            .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            self.buckets.retain_recent();
            self.buckets.shrink_to_fit();
        }
    }

    /// Accounts with a bucket in memory.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Whether no account has a bucket in memory.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Whole seconds, rounded up.
fn seconds_up(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(requests: u32, seconds: u64) -> AccountLimiter {
        AccountLimiter::new(Some(RateLimit {
            requests,
            per: Duration::from_secs(seconds),
        }))
        .unwrap()
    }

    #[test]
    fn counts_down_then_refuses_with_the_wait() {
        let l = limiter(3, 30);
        let first = l.check("ann");
        assert_eq!((first.limit, first.remaining, first.retry_after_s), (3, 2, None));
        assert_eq!(first.reset_s, 10);
        assert_eq!(l.check("ann").remaining, 1);
        let last = l.check("ann");
        assert_eq!((last.remaining, last.reset_s), (0, 30));
        let refused = l.check("ann");
        assert_eq!(refused.remaining, 0);
        let retry = refused.retry_after_s.unwrap();
        assert!((9..=10).contains(&retry), "{retry}");
        assert!((29..=30).contains(&refused.reset_s), "{}", refused.reset_s);
        // Another account has its own bucket.
        assert_eq!(l.check("bob").remaining, 2);
    }

    #[test]
    fn off_is_no_limiter() {
        assert!(AccountLimiter::new(None).is_none());
    }

    #[test]
    fn full_buckets_are_swept() {
        let l = AccountLimiter::new(Some(RateLimit {
            requests: 1000,
            per: Duration::from_millis(10),
        }))
        .unwrap();
        for i in 0..100 {
            l.check(&format!("user{i}"));
        }
        assert_eq!(l.len(), 100);
        std::thread::sleep(Duration::from_millis(20));
        l.check("last");
        assert!(l.len() <= 1, "{}", l.len());
    }

    #[test]
    fn requests_are_reported_once_and_those_of_other_nodes_taken() {
        let l = limiter(10, 60).reporting();
        for _ in 0..3 {
            l.check("a");
        }
        assert_eq!(l.reports(), vec![("a".to_string(), 3)]);
        assert!(l.reports().is_empty());
        // A refused request is not reported.
        l.used_elsewhere("b", 10);
        assert!(l.check("b").retry_after_s.is_some());
        assert!(l.reports().is_empty());
        // Without other nodes nothing is counted for them.
        let alone = limiter(10, 60);
        alone.check("a");
        assert!(alone.reports().is_empty());
    }
}
