//! Short-lived memory of collection pages, so that a collection polled by many clients costs a
//! map look-up instead of two queries and a rendering (architecture: "hot reads from memory").
//!
//! A page is remembered per caller (administrators share one view), per query string and JSON
//! body. Any write through this node that can change a collection bumps the version, which
//! voids every remembered page at once; writes through other nodes (or `devicecloud admin`) are
//! seen when an entry expires, after [`PAGE_TTL`] — the same bound the token cache has.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use devicecloud_query::Page;

/// How long a remembered page may be served.
pub const PAGE_TTL: Duration = Duration::from_secs(2);

/// Requests whose key (query string and JSON body) is longer are not remembered: a key is held
/// in memory as long as its page, and such requests are not the polled ones worth it.
const MAX_KEY_BYTES: usize = 4096;

/// What an entry costs beyond its key and items (the entry, the page facts, map slots).
const ENTRY_OVERHEAD: u64 = 160;

/// A rendered page: its pagination facts and its items as a JSON array text.
#[derive(Debug)]
pub struct CachedPage {
    pub page: Page,
    pub items: Arc<str>,
}

/// A remembered page with the version it was computed at and when.
#[derive(Clone, Debug)]
struct Entry {
    version: u64,
    at: Instant,
    page: Arc<CachedPage>,
}

/// An entry weighs its key and its items in bytes, so the cache's capacity is a memory bound
/// (docs/operations.md, "Limits": `DEVICECLOUD_PAGE_CACHE_MB`).
#[derive(Clone, Copy, Debug)]
struct Bytes;

impl quick_cache::Weighter<String, Entry> for Bytes {
    fn weight(&self, key: &String, entry: &Entry) -> u64 {
        (key.len() + entry.page.items.len()) as u64 + ENTRY_OVERHEAD
    }
}

pub struct PageCache {
    version: AtomicU64,
    entries: quick_cache::sync::Cache<String, Entry, Bytes>,
}

impl std::fmt::Debug for PageCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageCache")
            .field("version", &self.version)
            .field("bytes", &self.entries.weight())
            .finish()
    }
}

impl PageCache {
    /// A cache that holds at most `capacity_bytes` of keys and pages; the least used entries
    /// make room for new ones.
    pub fn new(capacity_bytes: usize) -> PageCache {
        // The item estimate only sizes the map up front: pages of ~8 KiB on average.
        let estimated = (capacity_bytes / 8192).clamp(16, 1 << 16);
        PageCache {
            version: AtomicU64::new(0),
            entries: quick_cache::sync::Cache::with_weighter(estimated, capacity_bytes as u64, Bytes),
        }
    }

    /// The key of a request: the resource, who asks (administrators all see the same pages),
    /// and exactly what they ask (the query string and the JSON body text); `None` when the
    /// request is too long to be worth remembering.
    pub fn key(resource: &str, id_user: &str, is_admin: bool, query: &[u8], body: &str) -> Option<String> {
        if query.len() + body.len() > MAX_KEY_BYTES {
            return None;
        }
        let who = if is_admin { "*" } else { id_user };
        Some(format!("{resource}\0{who}\0{}\0{body}", String::from_utf8_lossy(query)))
    }

    /// The version to pass to [`PageCache::put`]; read it before querying the store.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    pub fn get(&self, key: &str) -> Option<Arc<CachedPage>> {
        let version = self.version();
        let entry = self.entries.get(key)?;
        (entry.version == version && entry.at.elapsed() < PAGE_TTL).then_some(entry.page)
    }

    /// Remembers a page computed from the store as it was at `version`; a write that happened
    /// meanwhile has bumped the version, and the entry is then void from the start. A page
    /// heavier than the whole capacity is not kept.
    pub fn put(&self, key: String, version: u64, page: Arc<CachedPage>) {
        self.entries.insert(
            key,
            Entry {
                version,
                at: Instant::now(),
                page,
            },
        );
    }

    /// Voids every remembered page (after a write).
    pub fn invalidate(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Bytes held now (keys, pages and overhead), for `/metrics`.
    pub fn weight(&self) -> u64 {
        self.entries.weight()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(bytes: usize) -> Arc<CachedPage> {
        Arc::new(CachedPage {
            page: devicecloud_query::PageRequest {
                page: 1,
                per_page: 1,
                default_per_page: 1,
            }
            .resolve(1),
            items: "x".repeat(bytes).into(),
        })
    }

    #[test]
    fn holds_no_more_than_its_capacity() {
        let cache = PageCache::new(1 << 20);
        for i in 0..2000 {
            cache.put(format!("key{i}"), 0, page(10_000));
            assert!(cache.weight() <= 1 << 20, "{} bytes after {i} pages", cache.weight());
        }
        assert!(cache.get("key1999").is_some());
    }

    #[test]
    fn a_write_voids_every_page() {
        let cache = PageCache::new(1 << 20);
        cache.put("a".into(), cache.version(), page(10));
        assert!(cache.get("a").is_some());
        cache.invalidate();
        assert!(cache.get("a").is_none());
    }
}
