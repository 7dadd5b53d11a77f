//! The byte-bounded, least-recently-used cache of what a [`crate::Dataset`] opens once and
//! reuses: data files' validated footers and fragments' deletion vectors.
//!
//! Without a bound a reader that walks a dataset of many files (verify, export, a scan) would
//! keep every footer it opened, and a footer may be up to 64 MiB `[LIM-06]`. Entries are
//! charged an estimate of their memory; the least recently used leave when a new one would
//! pass the bound. An entry larger than the whole bound is handed out and not kept.

use std::sync::Arc;

use lru::LruCache;

use crate::datafile::DataFile;
use crate::manifest::DataFileRef;

/// Default bound of one dataset's cache, in charged bytes.
pub const DEFAULT_CACHE_BYTES: u64 = 256 << 20;

/// What the cache holds, keyed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    /// A data file: the whole reference and the fragment's row count (two references to one
    /// path with other columns, sizes, CRCs or rows are validated apart).
    File(DataFileRef, u64),
    /// The deleted rows of a fragment, by fragment id.
    Deleted(u64),
}

/// A cached value.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    File(Arc<DataFile>),
    Deleted(Arc<Vec<u64>>),
}

impl Value {
    /// Bytes charged for the entry: what it holds on the heap, and a fixed overhead for the
    /// entry itself.
    fn charge(&self) -> u64 {
        const OVERHEAD: u64 = 256;
        OVERHEAD
            + match self {
                Self::File(f) => f.heap_bytes(),
                Self::Deleted(rows) => 8 * rows.capacity() as u64,
            }
    }
}

/// How full a dataset's cache is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Entries held.
    pub entries: usize,
    /// Bytes charged for them.
    pub bytes: u64,
    /// The bound.
    pub cap: u64,
}

/// The cache: entries in use order with their charges, and the charges' sum.
#[derive(Debug)]
pub(crate) struct Cache {
    entries: LruCache<Key, (Value, u64)>,
    bytes: u64,
    cap: u64,
}

impl Cache {
    pub(crate) fn new(cap: u64) -> Self {
        Self { entries: LruCache::unbounded(), bytes: 0, cap }
    }

    /// The entry under `key`, now the most recently used.
    pub(crate) fn get(&mut self, key: &Key) -> Option<Value> {
        self.entries.get(key).map(|(value, _)| value.clone())
    }

    /// Keeps `value` under `key`, evicting the least recently used entries it needs room from;
    /// keeps nothing when the value alone is above the bound.
    pub(crate) fn insert(&mut self, key: Key, value: Value) {
        if let Some((_, old)) = self.entries.pop(&key) {
            self.bytes -= old;
        }
        let charge = value.charge();
        if charge > self.cap {
            return;
        }
        while self.bytes + charge > self.cap {
            let Some((_, (_, evicted))) = self.entries.pop_lru() else { break };
            self.bytes -= evicted;
        }
        self.entries.put(key, (value, charge));
        self.bytes += charge;
    }

    pub(crate) fn stats(&self) -> CacheStats {
        CacheStats { entries: self.entries.len(), bytes: self.bytes, cap: self.cap }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deleted(n: usize) -> Value {
        Value::Deleted(Arc::new(vec![0; n]))
    }

    #[test]
    fn the_least_recently_used_leave_first_and_the_bound_holds() {
        // Each entry charges 256 + 8 × 100 = 1,056 bytes; three fit in 3,200.
        let mut c = Cache::new(3_200);
        for id in 0..3 {
            c.insert(Key::Deleted(id), deleted(100));
        }
        assert_eq!(c.stats().entries, 3);
        assert!(c.get(&Key::Deleted(0)).is_some()); // 0 is now the most recent
        c.insert(Key::Deleted(3), deleted(100));
        assert!(c.get(&Key::Deleted(1)).is_none(), "1 was the least recently used");
        for id in [0, 2, 3] {
            assert!(c.get(&Key::Deleted(id)).is_some(), "{id} stays");
        }
        assert_eq!(c.stats(), CacheStats { entries: 3, bytes: 3 * 1_056, cap: 3_200 });
        // A larger entry pushes out as many as it needs.
        c.insert(Key::Deleted(4), deleted(200)); // 1,856 bytes: only one other fits
        assert_eq!(c.stats().entries, 2);
        assert!(c.stats().bytes <= 3_200);
        assert!(c.get(&Key::Deleted(4)).is_some());
    }

    #[test]
    fn an_entry_above_the_bound_is_not_kept_and_a_replaced_entry_is_recharged() {
        let mut c = Cache::new(1_000);
        c.insert(Key::Deleted(1), deleted(10));
        c.insert(Key::Deleted(2), deleted(1_000));
        assert!(c.get(&Key::Deleted(2)).is_none());
        assert!(c.get(&Key::Deleted(1)).is_some(), "a value too large to keep evicts nothing");
        c.insert(Key::Deleted(1), deleted(20));
        assert_eq!(c.stats(), CacheStats { entries: 1, bytes: 256 + 160, cap: 1_000 });
        let mut none = Cache::new(0);
        none.insert(Key::Deleted(1), deleted(0));
        assert_eq!(none.stats().entries, 0);
    }
}
