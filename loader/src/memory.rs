//! One memory budget for the whole loader, split into shares by use, with exact accounting
//! of every large buffer the loader holds and a high-water mark.
//!
//! Shares are fixed when an epoch starts (see `pipeline::EpochPipeline`), so no use can starve
//! another: batch buffers wait for the consumer, the block-shuffle cache admits fragments
//! in schedule order, and fetch/decode buffers are split into per-worker allowances that a
//! worker never exceeds. What is *not* counted: libtorch's and the allocator's own overhead,
//! thread stacks, the reference reader's cache of parsed footers, and tensors the training
//! loop creates itself.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{LoaderError, Result};

/// What a counted buffer is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryUse {
    /// Batch buffers: being filled, waiting in the queue, or held by the consumer.
    Ready,
    /// Bytes fetched from storage: workers' scratch buffers, object-store staging buffers and
    /// the cache of decoded pages.
    Fetch,
    /// The block-shuffle window: decoded pages of the fragments of the current window(s).
    Shuffle,
    /// The epoch plan and per-file indexes (page tables, ragged sizes, validity).
    Metadata,
}

impl MemoryUse {
    /// All uses, in the order [`MemoryStats::by_use`] lists them.
    pub const ALL: [MemoryUse; 4] = [Self::Ready, Self::Fetch, Self::Shuffle, Self::Metadata];

    fn index(self) -> usize {
        match self {
            Self::Ready => 0,
            Self::Fetch => 1,
            Self::Shuffle => 2,
            Self::Metadata => 3,
        }
    }
}

/// Accounting of one use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UseStats {
    /// The share of the budget this use may hold in the current epoch.
    pub share: u64,
    /// Bytes held now.
    pub current: u64,
    /// Most bytes ever held at once.
    pub high_water: u64,
}

/// A snapshot of the loader's memory accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// The configured budget.
    pub budget: u64,
    /// Bytes held now, all uses together.
    pub current: u64,
    /// Most bytes held at once, all uses together.
    pub high_water: u64,
    /// Per use, in [`MemoryUse::ALL`] order.
    pub by_use: [UseStats; 4],
    /// Times a share was exceeded to guarantee progress (the oldest unfinished batch needed
    /// more than its share could ever free, because a ragged batch or a fragment was larger
    /// than estimated). Zero in a correctly sized configuration.
    pub overcommits: u64,
    /// The block-shuffle window's buffers (zero in other shuffle modes).
    pub window: WindowBufferStats,
    /// Bytes of decoded pages cached for later batches and epochs (counted in
    /// [`MemoryUse::Fetch`], kept between epochs).
    pub cached_pages: u64,
    /// Bytes of batch buffers idle in the pool, kept for the next epoch (counted in
    /// [`MemoryUse::Ready`]; buffers of batches the consumer still holds are not idle).
    pub idle_buffers: u64,
    /// Bytes of object-store staging buffers, lent or idle (counted in [`MemoryUse::Fetch`],
    /// kept between epochs).
    pub staging_buffers: u64,
}

/// The block-shuffle window's buffers ("extents"): allocated once, then reused from fragment
/// to fragment and epoch to epoch. Idle extents kept for the next epoch are counted in
/// [`MemoryStats::current`] (as [`MemoryUse::Shuffle`]) until the loader is dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowBufferStats {
    /// Extents allocated since the loader opened.
    pub allocations: u64,
    /// Times an idle extent was lent again instead of allocating one.
    pub reuses: u64,
    /// Bytes of the extents held now, lent or idle.
    pub held_bytes: u64,
}

#[derive(Debug, Default)]
struct State {
    shares: [u64; 4],
    used: [u64; 4],
    high: [u64; 4],
    total_high: u64,
    overcommits: u64,
}

impl State {
    fn total(&self) -> u64 {
        self.used.iter().sum()
    }

    fn add(&mut self, i: usize, bytes: u64) {
        self.used[i] += bytes;
        self.high[i] = self.high[i].max(self.used[i]);
        self.total_high = self.total_high.max(self.total());
    }
}

/// The loader-wide accountant.
#[derive(Debug)]
pub(crate) struct Accountant {
    budget: u64,
    state: Mutex<State>,
    freed: Condvar,
}

/// Bytes counted against a use; released on drop.
#[derive(Debug)]
pub(crate) struct Charge {
    acct: Arc<Accountant>,
    use_: MemoryUse,
    bytes: u64,
}

impl Accountant {
    pub(crate) fn new(budget: u64) -> Arc<Self> {
        Arc::new(Self { budget, state: Mutex::new(State::default()), freed: Condvar::new() })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the counters inconsistent (each
        // update is one statement), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn budget(&self) -> u64 {
        self.budget
    }

    /// Sets the shares for the next epoch.
    pub(crate) fn set_shares(&self, shares: [(MemoryUse, u64); 4]) {
        let mut s = self.lock();
        for (u, b) in shares {
            s.shares[u.index()] = b;
        }
    }

    pub(crate) fn share(&self, use_: MemoryUse) -> u64 {
        self.lock().shares[use_.index()]
    }

    /// Counts `bytes` without waiting. For uses whose caller enforces its own bound.
    pub(crate) fn charge(self: &Arc<Self>, use_: MemoryUse, bytes: u64) -> Charge {
        self.lock().add(use_.index(), bytes);
        Charge { acct: self.clone(), use_, bytes }
    }

    /// Counts `bytes` once they fit in the use's share, waiting for releases. While waiting,
    /// `may_overcommit()` is asked whether the caller holds up everyone else (then the bytes
    /// are taken anyway and the overcommit is recorded), and `stopped` ends the wait.
    ///
    /// # Errors
    /// [`LoaderError::Budget`] when `bytes` exceeds the whole share and overcommitting is not
    /// allowed; [`LoaderError::Stopped`] when the loader stops.
    pub(crate) fn acquire(
        self: &Arc<Self>,
        use_: MemoryUse,
        bytes: u64,
        stopped: &AtomicBool,
        may_overcommit: &dyn Fn() -> bool,
    ) -> Result<Charge> {
        let i = use_.index();
        let mut s = self.lock();
        loop {
            if stopped.load(Ordering::Acquire) {
                return Err(LoaderError::Stopped);
            }
            if s.used[i] + bytes <= s.shares[i] {
                break;
            }
            if may_overcommit() {
                s.overcommits += 1;
                break;
            }
            if bytes > s.shares[i] && s.used[i] == 0 {
                // One buffer larger than its use's whole share (a share sized by an estimate
                // that a skewed batch outgrew): move the difference from the share with the
                // most room left, if one has it, so the total stays within the budget.
                let need = bytes - s.shares[i];
                let roomiest = (0..s.shares.len())
                    .filter(|&j| j != i)
                    .max_by_key(|&j| s.shares[j].saturating_sub(s.used[j]))
                    .filter(|&j| s.shares[j].saturating_sub(s.used[j]) >= need);
                if let Some(j) = roomiest {
                    s.shares[j] -= need;
                    s.shares[i] += need;
                    continue;
                }
                return Err(LoaderError::Budget {
                    budget: self.budget,
                    what: format!("one {use_:?} buffer (share {} bytes)", s.shares[i]),
                    needed: bytes,
                });
            }
            // Timed wait: a release always notifies, the timeout only re-checks the
            // overcommit predicate, whose inputs change under other locks.
            s = self.freed.wait_timeout(s, Duration::from_millis(20)).map_or_else(|e| e.into_inner().0, |r| r.0);
        }
        s.add(i, bytes);
        Ok(Charge { acct: self.clone(), use_, bytes })
    }

    /// Wakes waiters (after a state change they poll, like a batch finishing or a stop).
    pub(crate) fn notify(&self) {
        let _s = self.lock();
        self.freed.notify_all();
    }

    pub(crate) fn stats(&self) -> MemoryStats {
        let s = self.lock();
        let mut by_use = [UseStats::default(); 4];
        for (i, u) in by_use.iter_mut().enumerate() {
            *u = UseStats { share: s.shares[i], current: s.used[i], high_water: s.high[i] };
        }
        MemoryStats {
            budget: self.budget,
            current: s.total(),
            high_water: s.total_high,
            by_use,
            overcommits: s.overcommits,
            window: WindowBufferStats::default(),
            cached_pages: 0,
            idle_buffers: 0,
            staging_buffers: 0,
        }
    }

    fn release(&self, use_: MemoryUse, bytes: u64) {
        let mut s = self.lock();
        let i = use_.index();
        s.used[i] = s.used[i].saturating_sub(bytes);
        self.freed.notify_all();
    }
}

impl Charge {
    /// Bytes counted.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Changes the counted amount without waiting (the caller checked its own bound).
    pub(crate) fn resize(&mut self, bytes: u64) {
        if bytes > self.bytes {
            self.acct.lock().add(self.use_.index(), bytes - self.bytes);
        } else if bytes < self.bytes {
            self.acct.release(self.use_, self.bytes - bytes);
        }
        self.bytes = bytes;
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.acct.release(self.use_, self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_are_counted_and_released() {
        let a = Accountant::new(100);
        a.set_shares([
            (MemoryUse::Ready, 50),
            (MemoryUse::Fetch, 30),
            (MemoryUse::Shuffle, 0),
            (MemoryUse::Metadata, 20),
        ]);
        let stop = AtomicBool::new(false);
        let c1 = a.acquire(MemoryUse::Ready, 40, &stop, &|| false).unwrap();
        let mut c2 = a.charge(MemoryUse::Fetch, 10);
        c2.resize(25);
        assert_eq!(a.stats().current, 65);
        drop(c1);
        c2.resize(5);
        let s = a.stats();
        assert_eq!((s.current, s.high_water, s.by_use[0].high_water), (5, 65, 40));
        // Larger than the whole share with nothing held: the share takes the difference from
        // the roomiest other share (Fetch: 25 of its 30 free)...
        let big = a.acquire(MemoryUse::Ready, 60, &stop, &|| false).unwrap();
        let s = a.stats();
        assert_eq!((s.by_use[0].share, s.by_use[1].share), (60, 20));
        drop(big);
        // ... and is an error, not a hang, when no share has the room.
        assert!(matches!(a.acquire(MemoryUse::Ready, 95, &stop, &|| false), Err(LoaderError::Budget { .. })));
        // Overcommit when allowed is recorded.
        let _held = a.acquire(MemoryUse::Ready, 50, &stop, &|| false).unwrap();
        let _more = a.acquire(MemoryUse::Ready, 20, &stop, &|| true).unwrap();
        assert_eq!(a.stats().overcommits, 1);
        stop.store(true, Ordering::Release);
        assert!(matches!(a.acquire(MemoryUse::Ready, 10, &stop, &|| false), Err(LoaderError::Stopped)));
    }

    #[test]
    fn a_waiter_proceeds_when_bytes_are_released() {
        let a = Accountant::new(10);
        a.set_shares([
            (MemoryUse::Ready, 10),
            (MemoryUse::Fetch, 0),
            (MemoryUse::Shuffle, 0),
            (MemoryUse::Metadata, 0),
        ]);
        let held = a.charge(MemoryUse::Ready, 8);
        let a2 = a.clone();
        let t = std::thread::spawn(move || {
            let stop = AtomicBool::new(false);
            a2.acquire(MemoryUse::Ready, 5, &stop, &|| false).map(|c| c.bytes())
        });
        std::thread::sleep(Duration::from_millis(30));
        drop(held);
        assert_eq!(t.join().unwrap().unwrap(), 5);
    }
}
