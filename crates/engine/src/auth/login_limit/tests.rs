use super::*;

const WINDOW: Duration = Duration::from_secs(300);

fn key(user: &str, ip: &str) -> SignInKey {
    SignInKey::new(user, ip.parse().unwrap())
}

#[test]
fn blocks_the_pair_after_the_limit_until_the_window_passes() {
    let limiter = LoginLimiter::new(10, 1000, WINDOW);
    let ann = key("Ann", "127.0.0.1");
    let start = Instant::now();
    for i in 0..10 {
        assert_eq!(limiter.attempt(&ann, start), Ok(()), "attempt {i}");
    }
    let later = start + Duration::from_secs(10);
    assert_eq!(limiter.attempt(&ann, later), Err(WINDOW.as_secs() - 10));
    assert_eq!(limiter.attempt(&key(" ann ", "127.0.0.1"), later), Err(290));
    // The same username from another address, another username from this one: open.
    assert_eq!(limiter.attempt(&key("ann", "10.0.0.1"), later), Ok(()));
    assert_eq!(limiter.attempt(&key("bob", "127.0.0.1"), later), Ok(()));
    assert_eq!(limiter.attempt(&ann, start + WINDOW), Ok(()));
}

#[test]
fn a_success_forgets_the_pair() {
    let limiter = LoginLimiter::new(3, 1000, WINDOW);
    let bob = key("bob", "10.0.0.2");
    let start = Instant::now();
    for _ in 0..3 {
        limiter.attempt(&bob, start).unwrap();
    }
    limiter.succeeded(&bob);
    for _ in 0..3 {
        assert_eq!(limiter.attempt(&bob, start), Ok(()));
    }
    assert!(limiter.attempt(&bob, start).is_err());
}

#[test]
fn ipv6_clients_are_limited_by_their_64() {
    assert_eq!(key("a", "2001:db8:1:2:aaaa::1"), key("a", "2001:db8:1:2:bbbb::9"));
    assert_ne!(key("a", "2001:db8:1:3::1"), key("a", "2001:db8:1:2::1"));
}

#[test]
fn memory_stays_bounded() {
    let limiter = LoginLimiter::new(1, u32::MAX, WINDOW);
    let now = Instant::now();
    for i in 0..MAX_KEYS + 10 {
        let _ = limiter.attempt(&key(&format!("user{i}"), "10.0.0.3"), now);
    }
    assert!(limiter.pairs.lock().len() <= MAX_KEYS);
}

#[test]
fn an_address_is_limited_whatever_the_usernames() {
    let limiter = LoginLimiter::new(10, 30, WINDOW);
    let start = Instant::now();
    for i in 0..30 {
        assert_eq!(limiter.attempt(&key(&format!("user{i}"), "10.0.0.4"), start), Ok(()));
    }
    assert_eq!(limiter.attempt(&key("user99", "10.0.0.4"), start), Err(300));
    assert_eq!(limiter.attempt(&key("user99", "10.0.0.5"), start), Ok(()));
    // A success takes back its own attempt only; it does not reset the address.
    let later = start + WINDOW;
    let own = key("own", "10.0.0.6");
    for i in 0..29 {
        limiter.attempt(&key(&format!("guess{i}"), "10.0.0.6"), later).unwrap();
    }
    limiter.attempt(&own, later).unwrap();
    limiter.take_back(&own);
    limiter.succeeded(&own);
    limiter.attempt(&key("guess29", "10.0.0.6"), later).unwrap();
    assert!(limiter.attempt(&key("guess30", "10.0.0.6"), later).is_err());
}
