//! Maps keyed by our own integer keys (a series' `container_key`), hashed by one multiplication:
//! they are looked up for every committed point, where the default hasher (SipHash) was a visible
//! share of the time (docs/benchmarks.md, "Live stream").

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map by integer key.
pub type KeyMap<V> = HashMap<i64, V, BuildHasherDefault<KeyHasher>>;

/// Fibonacci hashing of an integer key.
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_i64(&mut self, key: i64) {
        self.0 = (key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}
