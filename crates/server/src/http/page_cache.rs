//! Short-lived memory of collection pages, so that a collection polled by many clients costs a
//! map look-up instead of two queries and a rendering (architecture: "hot reads from memory").
//!
//! A page is remembered per caller (administrators share one view), per query string and JSON
//! body. Any write through this node that can change a collection bumps the version, which
//! voids every remembered page at once; writes through other nodes (or `devicecloud admin`) are
//! seen when an entry expires, after [`PAGE_TTL`] — the same bound the token cache has.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use devicecloud_query::Page;

use super::collection::RawCollection;
use crate::auth::Caller;

/// How long a remembered page may be served.
pub const PAGE_TTL: Duration = Duration::from_secs(2);

/// Above this many entries the map is cleared rather than grown.
const MAX_ENTRIES: usize = 10_000;

/// A rendered page: its pagination facts and its items as a JSON array text.
#[derive(Debug)]
pub struct CachedPage {
    pub page: Page,
    pub items: Arc<str>,
}

/// A remembered page with the version it was computed at and when.
#[derive(Debug)]
struct Entry {
    version: u64,
    at: Instant,
    page: Arc<CachedPage>,
}

#[derive(Debug, Default)]
pub struct PageCache {
    version: AtomicU64,
    entries: RwLock<HashMap<String, Entry>>,
}

impl PageCache {
    /// The key of a request: the resource, who asks, and exactly what they ask.
    pub fn key(resource: &str, caller: &Caller, raw: &RawCollection) -> String {
        let who = if caller.is_admin { "*" } else { caller.id_user.as_str() };
        format!(
            "{resource}\0{who}\0{}\0{}",
            String::from_utf8_lossy(raw.query_bytes()),
            raw.body_text()
        )
    }

    /// The version to pass to [`PageCache::put`]; read it before querying the store.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    pub fn get(&self, key: &str) -> Option<Arc<CachedPage>> {
        let version = self.version();
        let map = self.entries.read().ok()?;
        let entry = map.get(key)?;
        (entry.version == version && entry.at.elapsed() < PAGE_TTL).then(|| entry.page.clone())
    }

    /// Remembers a page computed from the store as it was at `version`; a write that happened
    /// meanwhile has bumped the version, and the entry is then void from the start.
    pub fn put(&self, key: String, version: u64, page: Arc<CachedPage>) {
        if let Ok(mut map) = self.entries.write() {
            if map.len() >= MAX_ENTRIES {
                map.clear();
            }
            map.insert(
                key,
                Entry {
                    version,
                    at: Instant::now(),
                    page,
                },
            );
        }
    }

    /// Voids every remembered page (after a write).
    pub fn invalidate(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
    }
}
