//! Window memory: large buffers ("extents") that the block-shuffle window reads pages into,
//! allocated once and recycled from fragment to fragment and epoch to epoch.
//!
//! A fresh allocation per page or per fragment costs a page fault and the kernel's zeroing of
//! every 4 KiB it touches, on top of the read itself (the profile of the window before this
//! pool: a quarter of its CPU time). Extents live as long as the loader: a fragment takes
//! the extents it needs when it is admitted to the window and gives them back when its last
//! row has been copied; the next fragment reads into the same, already resident, memory.
//!
//! Every extent the pool holds, lent or idle, is counted against the `Shuffle` use (one
//! [`Charge`] per extent), so the accounting stays exact: idle extents kept for the next
//! epoch show in [`MemoryStats::current`](crate::MemoryStats) between epochs, and the pool
//! trims itself to the share when an epoch starts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{LoaderError, Result};
use crate::memory::{Accountant, Charge, MemoryUse, WindowBufferStats};

/// Largest regular extent: one ranged read of up to this many bytes fills it.
pub(crate) const MAX_EXTENT: u64 = 4 << 20;
/// Smallest regular extent (tiny budgets).
pub(crate) const MIN_EXTENT: u64 = 64 << 10;
/// Lengths of extents larger than the regular size (one oversized page) are rounded up to
/// this, so pages of similar sizes share free extents.
const ROUND: u64 = 64 << 10;

/// The regular extent size for a window share: about 1/32 of it, a power of two within
/// [`MIN_EXTENT`]..=[`MAX_EXTENT`] (so a window holds many extents and little is wasted at
/// the end of each fragment).
pub(crate) fn extent_size(share: u64) -> u64 {
    let target = (share / 32).clamp(MIN_EXTENT, MAX_EXTENT);
    1u64 << target.ilog2()
}

/// The length of an extent that must hold `bytes` (regular size `regular`, or one oversized
/// page rounded up).
pub(crate) fn extent_len(bytes: u64, regular: u64) -> u64 {
    if bytes <= regular { regular } else { bytes.div_ceil(ROUND) * ROUND }
}

/// One buffer and the bytes it is counted for.
#[derive(Debug)]
struct Slab {
    buf: Box<[u8]>,
    _charge: Charge,
}

#[derive(Debug, Default)]
struct PoolState {
    idle: Vec<Slab>,
    /// Bytes of every slab, idle or lent.
    held: u64,
    stats: WindowBufferStats,
}

impl PoolState {
    /// Whether extents of `lens` fit in `share` (idle extents of a wanted length are reused,
    /// the other idle ones freed), and the bytes the idle extents cannot serve.
    fn fits(&self, lens: &[u64], share: u64) -> (bool, u64) {
        let mut idle_lens: Vec<u64> = self.idle.iter().map(|slab| slab.buf.len() as u64).collect();
        let mut missing = 0u64;
        for &len in lens {
            match idle_lens.iter().position(|&l| l == len) {
                Some(i) => {
                    idle_lens.swap_remove(i);
                }
                None => missing += len,
            }
        }
        let unused: u64 = idle_lens.iter().sum();
        (self.held - unused + missing <= share, missing)
    }
}

/// The loader's pool of window extents.
#[derive(Debug)]
pub(crate) struct ExtentPool {
    acct: Arc<Accountant>,
    state: Mutex<PoolState>,
    returned: Condvar,
}

/// An extent lent to a window fragment; back to the pool on drop.
#[derive(Debug)]
pub(crate) struct Extent {
    slab: Option<Slab>,
    pool: Arc<ExtentPool>,
}

impl Extent {
    /// The extent's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        self.slab.as_ref().map_or(&[][..], |s| &s.buf[..])
    }

    /// The extent's bytes, to read into.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        self.slab.as_mut().map_or(&mut [][..], |s| &mut s.buf[..])
    }
}

impl Drop for Extent {
    fn drop(&mut self) {
        if let Some(slab) = self.slab.take() {
            self.pool.give_back(slab);
        }
    }
}

impl ExtentPool {
    pub(crate) fn new(acct: Arc<Accountant>) -> Arc<Self> {
        Arc::new(Self { acct, state: Mutex::new(PoolState::default()), returned: Condvar::new() })
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // Every update is a push, a pop or a counter: a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counters of the pool (allocations, reuses, bytes held).
    pub(crate) fn stats(&self) -> WindowBufferStats {
        let s = self.lock();
        WindowBufferStats { held_bytes: s.held, ..s.stats }
    }

    /// When an epoch starts: keeps at most `share` bytes, idle extents of length `regular`
    /// first (the ones the epoch will use).
    pub(crate) fn trim(&self, share: u64, regular: u64) {
        let dropped = {
            let mut s = self.lock();
            let idle = std::mem::take(&mut s.idle);
            let (keep, mut dropped): (Vec<Slab>, Vec<Slab>) =
                idle.into_iter().partition(|slab| slab.buf.len() as u64 == regular);
            s.idle = keep;
            s.held -= dropped.iter().map(|slab| slab.buf.len() as u64).sum::<u64>();
            while s.held > share {
                let Some(slab) = s.idle.pop() else { break };
                s.held -= slab.buf.len() as u64;
                dropped.push(slab);
            }
            dropped
        };
        drop(dropped); // outside the lock: releasing takes the accountant's
    }

    fn give_back(&self, slab: Slab) {
        self.lock().idle.push(slab);
        self.returned.notify_all();
    }

    /// Wakes waiters (stop).
    pub(crate) fn notify(&self) {
        let _s = self.lock();
        self.returned.notify_all();
    }

    /// Takes extents of the given lengths, all at once: idle ones first, new ones while the
    /// `Shuffle` share has room (idle extents of other lengths are freed to make room). While
    /// waiting for extents to come back, `may_overcommit()` is asked whether the caller holds
    /// up everyone else (then the missing extents are allocated anyway and the overcommit is
    /// recorded) and `stopped` ends the wait.
    ///
    /// # Errors
    /// [`LoaderError::Stopped`]; [`LoaderError::Budget`] when the lengths exceed the whole
    /// share and nothing is lent that could come back.
    pub(crate) fn take(
        self: &Arc<Self>,
        lens: &[u64],
        stopped: &AtomicBool,
        may_overcommit: &dyn Fn() -> bool,
    ) -> Result<Vec<Extent>> {
        let share = self.acct.share(MemoryUse::Shuffle);
        let mut s = self.lock();
        loop {
            if stopped.load(Ordering::Acquire) {
                return Err(LoaderError::Stopped);
            }
            let (fits, missing) = s.fits(lens, share);
            let lent = s.held - s.idle.iter().map(|slab| slab.buf.len() as u64).sum::<u64>();
            if fits || may_overcommit() {
                let overcommit = !fits;
                return Ok(self.lend(&mut s, lens, share, overcommit));
            }
            if lent == 0 && missing > share {
                return Err(LoaderError::Budget {
                    budget: self.acct.budget(),
                    what: format!("one block-shuffle fragment (window share {share} bytes)"),
                    needed: lens.iter().sum(),
                });
            }
            // Timed wait: a returned extent always notifies; the timeout re-checks the
            // overcommit predicate, whose inputs change under other locks.
            s = self.returned.wait_timeout(s, Duration::from_millis(20)).map_or_else(|e| e.into_inner().0, |r| r.0);
        }
    }

    /// [`ExtentPool::take`] without waiting and without going past the share: `None` when
    /// the extents do not fit now (loading ahead is optional).
    pub(crate) fn try_take(self: &Arc<Self>, lens: &[u64]) -> Option<Vec<Extent>> {
        let share = self.acct.share(MemoryUse::Shuffle);
        let mut s = self.lock();
        s.fits(lens, share).0.then(|| self.lend(&mut s, lens, share, false))
    }

    /// Lends `lens` from the idle extents, freeing idle extents of other lengths while the
    /// pool is over `share`, and allocating the rest.
    fn lend(self: &Arc<Self>, s: &mut PoolState, lens: &[u64], share: u64, overcommit: bool) -> Vec<Extent> {
        let mut out = Vec::with_capacity(lens.len());
        let mut fresh = Vec::new();
        for &len in lens {
            if let Some(i) = s.idle.iter().position(|slab| slab.buf.len() as u64 == len) {
                s.stats.reuses += 1;
                out.push(Some(s.idle.swap_remove(i)));
            } else {
                out.push(None);
                fresh.push(len);
            }
        }
        let need: u64 = fresh.iter().sum();
        while s.held + need > share && !s.idle.is_empty() {
            let slab = s.idle.swap_remove(0);
            s.held -= slab.buf.len() as u64;
            drop(slab);
        }
        let mut fresh = fresh.into_iter();
        out.into_iter()
            .map(|slab| {
                let slab = slab.unwrap_or_else(|| {
                    let len = fresh.next().unwrap_or(0);
                    s.held += len;
                    s.stats.allocations += 1;
                    let charge = if overcommit {
                        // Counted past the share (and recorded) so the oldest batch can go on.
                        self.acct.acquire(MemoryUse::Shuffle, len, &AtomicBool::new(false), &|| true)
                    } else {
                        Ok(self.acct.charge(MemoryUse::Shuffle, len))
                    };
                    let charge = charge.unwrap_or_else(|_| self.acct.charge(MemoryUse::Shuffle, len));
                    Slab { buf: vec![0u8; len as usize].into_boxed_slice(), _charge: charge }
                });
                Extent { slab: Some(slab), pool: self.clone() }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(share: u64) -> Arc<ExtentPool> {
        let acct = Accountant::new(share);
        acct.set_shares([
            (MemoryUse::Ready, 0),
            (MemoryUse::Fetch, 0),
            (MemoryUse::Shuffle, share),
            (MemoryUse::Metadata, 0),
        ]);
        ExtentPool::new(acct)
    }

    #[test]
    fn extents_are_reused_and_counted() {
        let p = pool(1 << 20);
        let stop = AtomicBool::new(false);
        for _ in 0..10 {
            let mut got = p.take(&[256 << 10, 256 << 10], &stop, &|| false).unwrap();
            got[0].bytes_mut()[0] = 1;
            assert_eq!(p.acct.stats().by_use[2].current, 512 << 10);
        }
        let s = p.stats();
        assert_eq!((s.allocations, s.reuses, s.held_bytes), (2, 18, 512 << 10));
        // Idle extents stay counted until trimmed.
        assert_eq!(p.acct.stats().current, 512 << 10);
        p.trim(256 << 10, 256 << 10);
        assert_eq!((p.stats().held_bytes, p.acct.stats().current), (256 << 10, 256 << 10));
        p.trim(1 << 20, 128 << 10);
        assert_eq!(p.stats().held_bytes, 0, "extents of another size are dropped");
    }

    #[test]
    fn a_taker_waits_for_returned_extents_or_overcommits() {
        let p = pool(512 << 10);
        let stop = AtomicBool::new(false);
        let held = p.take(&[256 << 10, 256 << 10], &stop, &|| false).unwrap();
        let p2 = p.clone();
        let t = std::thread::spawn(move || p2.take(&[256 << 10], &AtomicBool::new(false), &|| false).map(|e| e.len()));
        std::thread::sleep(Duration::from_millis(40));
        assert!(!t.is_finished(), "no room: waits");
        drop(held);
        assert_eq!(t.join().unwrap().unwrap(), 1);
        assert_eq!(p.stats().allocations, 2, "the returned extent was reused");
        let _a = p.take(&[256 << 10, 256 << 10], &stop, &|| false).unwrap();
        let _b = p.take(&[256 << 10], &stop, &|| true).unwrap();
        assert_eq!(p.acct.stats().overcommits, 1);
        assert!(matches!(pool(100).take(&[MIN_EXTENT], &stop, &|| false), Err(LoaderError::Budget { .. })));
        stop.store(true, Ordering::Release);
        assert!(matches!(p.take(&[256 << 10], &stop, &|| false), Err(LoaderError::Stopped)));
    }

    #[test]
    fn taking_ahead_never_waits_nor_overcommits() {
        let p = pool(512 << 10);
        let held = p.try_take(&[256 << 10, 256 << 10]).expect("fits the share");
        assert!(p.try_take(&[256 << 10]).is_none(), "no room: no extent, no wait");
        assert_eq!(p.acct.stats().overcommits, 0);
        drop(held);
        assert_eq!(p.try_take(&[256 << 10]).map(|e| e.len()), Some(1));
        assert_eq!(p.stats().reuses, 1, "an idle extent is reused");
    }

    #[test]
    fn extent_sizes() {
        assert_eq!(extent_size(1 << 30), MAX_EXTENT);
        assert_eq!(extent_size(0), MIN_EXTENT);
        assert_eq!(extent_size(3 << 20), 64 << 10);
        assert_eq!(extent_size(5 << 20), 128 << 10);
        assert_eq!(extent_len(10, 64 << 10), 64 << 10);
        assert_eq!(extent_len((64 << 10) + 1, 64 << 10), 128 << 10);
    }
}
