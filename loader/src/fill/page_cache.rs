//! The epoch's cache of decoded pages, shared by every worker: hits when rows of one batch or
//! of later ones (on any worker) share a page. Most recently used last; inserting evicts from
//! the front to stay within the cache's part of the `Fetch` share.
//!
//! One cache for all workers (not one each) keeps its hit rate independent of how many
//! workers fill batches at once: an object-store epoch may run many more fills than
//! `workers` to hide latency (see `crate::depth`), and each of them would otherwise warm a
//! cache of its own.

use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use crate::memory::{Accountant, Charge, MemoryUse};

/// A page-cache key: fragment, file, column position in the file, page.
pub(crate) type PageKey = (usize, usize, usize, usize);

#[derive(Debug)]
struct Entries {
    pages: Vec<(PageKey, Bytes)>,
    bytes: u64,
    mem: Charge,
}

/// Decoded pages, within `cap` bytes counted against the `Fetch` share.
#[derive(Debug)]
pub(crate) struct PageCache {
    entries: Mutex<Entries>,
    cap: u64,
}

impl PageCache {
    pub(crate) fn new(acct: &Arc<Accountant>, cap: u64) -> Self {
        let mem = acct.charge(MemoryUse::Fetch, 0);
        Self { entries: Mutex::new(Entries { pages: Vec::new(), bytes: 0, mem }), cap }
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        // Each update leaves the entries consistent, so a poisoned lock is still usable.
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The largest page worth caching: a quarter of the cache.
    pub(crate) fn max_page(&self) -> u64 {
        self.cap / 4
    }

    pub(crate) fn get(&self, key: PageKey) -> Option<Bytes> {
        let mut e = self.lock();
        let i = e.pages.iter().rposition(|(k, _)| *k == key)?;
        let entry = e.pages.remove(i);
        let b = entry.1.clone();
        e.pages.push(entry);
        Some(b)
    }

    /// Caches `raw` (owned bytes, never a slice of a larger body), evicting the least
    /// recently used pages to stay within the cap; a page above [`PageCache::max_page`] or
    /// one already cached (another worker was faster) is not added.
    pub(crate) fn insert(&self, key: PageKey, raw: Bytes) {
        let n = raw.len() as u64;
        if n > self.max_page() {
            return;
        }
        let mut e = self.lock();
        if e.pages.iter().any(|(k, _)| *k == key) {
            return;
        }
        while e.bytes + n > self.cap && !e.pages.is_empty() {
            let (_, b) = e.pages.remove(0);
            e.bytes -= b.len() as u64;
        }
        e.bytes += n;
        e.pages.push((key, raw));
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
        drop(cache);
        assert_eq!(acct.stats().current, 0);
    }
}
