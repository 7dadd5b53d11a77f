//! A worker's small cache of decoded pages: hits when consecutive rows (of one batch or the
//! next ones) share a page. Most recently used last; the worker evicts from the front to stay
//! within its allowance.

use bytes::Bytes;

/// A page-cache key: fragment, file, column position in the file, page.
pub(super) type PageKey = (usize, usize, usize, usize);

#[derive(Debug, Default)]
pub(super) struct PageCache {
    entries: Vec<(PageKey, Bytes)>,
    bytes: u64,
}

impl PageCache {
    /// Bytes of every cached page.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    pub(super) fn get(&mut self, key: PageKey) -> Option<Bytes> {
        let i = self.entries.iter().position(|(k, _)| *k == key)?;
        let e = self.entries.remove(i);
        let b = e.1.clone();
        self.entries.push(e);
        Some(b)
    }

    pub(super) fn insert(&mut self, key: PageKey, raw: Bytes) {
        self.bytes += raw.len() as u64;
        self.entries.push((key, raw));
    }

    /// Evicts the least recently used pages until at most `cap` bytes are cached.
    pub(super) fn evict_to(&mut self, cap: u64) {
        while self.bytes > cap && !self.entries.is_empty() {
            let (_, b) = self.entries.remove(0);
            self.bytes -= b.len() as u64;
        }
    }
}
