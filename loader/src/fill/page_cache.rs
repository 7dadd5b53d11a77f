//! The loader's cache of decoded pages, shared by every worker and kept from epoch to epoch:
//! hits when rows of one batch or of later ones (on any worker, in any epoch) share a page.
//! Inserting evicts the least recently used pages to stay within the cache's part of the
//! `Fetch` share, which each epoch sets ([`PageCache::set_cap`]). A lookup costs a hash, whatever
//! the number of pages cached (thousands for small columns).
//!
//! One cache for all workers (not one each) keeps its hit rate independent of how many
//! workers fill batches at once: an object-store epoch may run many more fills than
//! `workers` to hide latency (see `crate::depth`), and each of them would otherwise warm a
//! cache of its own. Keeping it across epochs means the small columns of a dataset (labels,
//! embeddings, token ids: many rows per page) are read once, not once per epoch, whenever
//! their pages fit.

use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use lru::LruCache;

use crate::memory::{Accountant, Charge, MemoryUse};

/// A page-cache key: fragment, file, column position in the file, page.
pub(crate) type PageKey = (usize, usize, usize, usize);

#[derive(Debug)]
struct Entries {
    /// Pages in use order.
    pages: LruCache<PageKey, Bytes>,
    bytes: u64,
    cap: u64,
    mem: Charge,
}

impl Entries {
    /// Evicts the least recently used pages until `n` more bytes fit the cap.
    fn evict_for(&mut self, n: u64) {
        while self.bytes + n > self.cap {
            let Some((_, b)) = self.pages.pop_lru() else { break };
            self.bytes -= b.len() as u64;
        }
        let bytes = self.bytes;
        self.mem.resize(bytes);
    }
}

/// Decoded pages, within a cap counted against the `Fetch` share.
#[derive(Debug)]
pub(crate) struct PageCache {
    entries: Mutex<Entries>,
}

impl PageCache {
    pub(crate) fn new(acct: &Arc<Accountant>, cap: u64) -> Self {
        let mem = acct.charge(MemoryUse::Fetch, 0);
        Self { entries: Mutex::new(Entries { pages: LruCache::unbounded(), bytes: 0, cap, mem }) }
    }

    /// Sets the cap (when an epoch starts, from its shares), evicting what no longer fits.
    pub(crate) fn set_cap(&self, cap: u64) {
        let mut e = self.lock();
        e.cap = cap;
        e.evict_for(0);
    }

    /// Bytes of the cached pages.
    pub(crate) fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        // Each update leaves the entries consistent, so a poisoned lock is still usable.
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The largest page worth caching: a quarter of the cache.
    pub(crate) fn max_page(&self) -> u64 {
        self.lock().cap / 4
    }

    pub(crate) fn get(&self, key: PageKey) -> Option<Bytes> {
        self.lock().pages.get(&key).cloned()
    }

    /// Caches `raw` (owned bytes, never a slice of a larger body), evicting the least
    /// recently used pages to stay within the cap; a page above [`PageCache::max_page`] or
    /// one already cached (another worker was faster) is not added.
    pub(crate) fn insert(&self, key: PageKey, raw: Bytes) {
        let n = raw.len() as u64;
        let mut e = self.lock();
        if n > e.cap / 4 || e.pages.contains(&key) {
            return;
        }
        e.evict_for(n);
        e.bytes += n;
        e.pages.put(key, raw);
        let bytes = e.bytes;
        e.mem.resize(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_stays_within_its_cap_and_evicts_the_least_recently_used() {
        let acct = Accountant::new(1 << 20);
        let cache = PageCache::new(&acct, 400);
        let page = |b: u8| Bytes::from(vec![b; 100]);
        for p in 0..4 {
            cache.insert((0, 0, 0, p), page(p as u8));
        }
        assert_eq!(acct.stats().by_use[1].current, 400);
        assert!(cache.get((0, 0, 0, 0)).is_some()); // 0 is now the most recent
        cache.insert((0, 0, 0, 9), page(9));
        assert!(cache.get((0, 0, 0, 1)).is_none(), "the least recently used page went first");
        assert_eq!(cache.get((0, 0, 0, 0)).as_deref(), Some(&[0u8; 100][..]));
        assert_eq!(acct.stats().by_use[1].current, 400);
        cache.insert((0, 0, 0, 7), Bytes::from(vec![7; 101])); // above a quarter of the cap
        assert!(cache.get((0, 0, 0, 7)).is_none());
        // A smaller cap (the next epoch's share) evicts the least recently used.
        cache.set_cap(200);
        assert_eq!((cache.bytes(), acct.stats().by_use[1].current), (200, 200));
        assert!(cache.get((0, 0, 0, 0)).is_some(), "the most recently used pages stay");
        drop(cache);
        assert_eq!(acct.stats().current, 0);
    }
}
