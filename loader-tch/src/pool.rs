//! Reuse of batch buffers.
//!
//! A pool holds at most `max_sets` *buffer sets* (one [`HostBuffer`] per projected column).
//! A worker takes a set before it claims a batch, grows a column's buffer when a batch needs
//! more bytes, and hands the set to the batch as a [`Lease`]. When the consumer drops the
//! batch (every clone and split of it), the lease returns the set and the next batch reuses
//! the same memory: no allocation, no page faults, no zeroing on the hot path. The number of
//! sets is the pipeline's depth, so it is also its backpressure.
//!
//! With `reuse = false` the buffers are freed instead, and every batch allocates fresh
//! tensors (for consumers that keep batch tensors past the batch's life).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use tch::Device;

use crate::error::{LoaderError, Result};
use crate::memory::{Accountant, Charge, MemoryUse};
use crate::slots::HostBuffer;

/// One buffer per projected column, each counted against the `Ready` share.
#[derive(Debug)]
pub(crate) struct BufferSet {
    pub(crate) bufs: Vec<Option<(HostBuffer, Charge)>>,
    /// CUDA device whose stream may still read these buffers (a non-blocking copy was
    /// queued from them); the next user synchronises it first.
    pub(crate) pending_cuda: Option<usize>,
}

#[derive(Debug, Default)]
struct PoolState {
    idle: Vec<BufferSet>,
    outstanding: usize,
}

/// The pool of buffer sets for one epoch.
#[derive(Debug)]
pub(crate) struct BufferPool {
    state: Mutex<PoolState>,
    returned: Condvar,
    acct: Arc<Accountant>,
    columns: usize,
    max_sets: usize,
    pin: Option<Device>,
    reuse: bool,
    /// Workers waiting for `Ready` bytes: returned sets are then freed rather than kept.
    starved: AtomicUsize,
}

impl BufferPool {
    pub(crate) fn new(
        acct: Arc<Accountant>,
        columns: usize,
        max_sets: usize,
        pin: Option<Device>,
        reuse: bool,
    ) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(PoolState::default()),
            returned: Condvar::new(),
            acct,
            columns,
            max_sets,
            pin,
            reuse,
            starved: AtomicUsize::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes a set, waiting while `max_sets` are out (in workers, the queue or the consumer).
    ///
    /// # Errors
    /// [`LoaderError::Stopped`] when `stopped` becomes true while waiting.
    pub(crate) fn take(&self, stopped: &AtomicBool) -> Result<BufferSet> {
        let mut s = self.lock();
        loop {
            if stopped.load(Ordering::Acquire) {
                return Err(LoaderError::Stopped);
            }
            if let Some(set) = s.idle.pop() {
                s.outstanding += 1;
                drop(s);
                return Ok(Self::synced(set));
            }
            if s.outstanding < self.max_sets {
                s.outstanding += 1;
                return Ok(BufferSet { bufs: (0..self.columns).map(|_| None).collect(), pending_cuda: None });
            }
            s = self.returned.wait_timeout(s, Duration::from_millis(50)).map_or_else(|e| e.into_inner().0, |r| r.0);
        }
    }

    fn synced(mut set: BufferSet) -> BufferSet {
        if let Some(index) = set.pending_cuda.take() {
            // The H2D copy queued from these pinned bytes must finish before they are
            // overwritten; tch exposes no events, so wait for the device.
            tch::Cuda::synchronize(index as i64);
        }
        set
    }

    /// Makes column `col`'s buffer hold at least `bytes`, replacing a smaller one.
    ///
    /// # Errors
    /// [`LoaderError::Budget`]/[`LoaderError::Stopped`] from the accountant, or an allocation
    /// failure.
    pub(crate) fn ensure(
        &self,
        set: &mut BufferSet,
        col: usize,
        bytes: usize,
        stopped: &AtomicBool,
        may_overcommit: &dyn Fn() -> bool,
    ) -> Result<()> {
        if set.bufs[col].as_ref().is_some_and(|(b, _)| b.capacity() >= bytes) {
            return Ok(());
        }
        set.bufs[col] = None; // release the smaller buffer first
        let want = bytes as u64;
        let share = self.acct.share(MemoryUse::Ready);
        if self.acct.stats().by_use[0].current + want > share {
            // Free idle sets' memory before waiting on busy ones.
            let idle = std::mem::take(&mut self.lock().idle);
            drop(idle);
        }
        self.starved.fetch_add(1, Ordering::AcqRel);
        let charge = self.acct.acquire(MemoryUse::Ready, want, stopped, may_overcommit);
        self.starved.fetch_sub(1, Ordering::AcqRel);
        let charge = charge?;
        let buffer = HostBuffer::new(bytes, self.pin)?;
        set.bufs[col] = Some((buffer, charge));
        Ok(())
    }

    /// Returns a set (from a dropped lease).
    pub(crate) fn give_back(&self, set: BufferSet) {
        let keep = self.reuse && self.starved.load(Ordering::Acquire) == 0;
        let freed = {
            let mut s = self.lock();
            s.outstanding = s.outstanding.saturating_sub(1);
            if keep {
                s.idle.push(set);
                None
            } else {
                Some(set)
            }
        };
        drop(freed); // outside the pool lock: releasing takes the accountant's
        self.returned.notify_all();
    }

    /// Wakes waiters so they can see a stop.
    pub(crate) fn notify(&self) {
        let _s = self.lock();
        self.returned.notify_all();
    }
}

/// A batch's claim on its buffer set; returns the set to the pool when the last holder
/// (the batch and its splits) drops it.
#[derive(Debug)]
pub(crate) struct Lease {
    pool: Arc<BufferPool>,
    set: Mutex<Option<BufferSet>>,
}

impl Lease {
    pub(crate) fn new(pool: Arc<BufferPool>, set: BufferSet) -> Arc<Self> {
        Arc::new(Self { pool, set: Mutex::new(Some(set)) })
    }

    fn lock(&self) -> MutexGuard<'_, Option<BufferSet>> {
        self.set.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Gives up column `col`'s buffer: its memory now belongs to a tensor the consumer took,
    /// so it must never be written again. It is no longer counted or reused.
    pub(crate) fn forfeit(&self, col: usize) {
        if let Some(set) = self.lock().as_mut()
            && let Some(slot) = set.bufs.get_mut(col)
        {
            *slot = None;
        }
    }

    /// Records that a non-blocking copy to CUDA device `index` reads these buffers.
    pub(crate) fn mark_cuda(&self, index: usize) {
        if let Some(set) = self.lock().as_mut() {
            set.pending_cuda = Some(index);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(set) = self.lock().take() {
            self.pool.give_back(set);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_are_recycled_and_bounded() {
        let acct = Accountant::new(1 << 20);
        acct.set_shares([
            (MemoryUse::Ready, 1 << 20),
            (MemoryUse::Fetch, 0),
            (MemoryUse::Shuffle, 0),
            (MemoryUse::Metadata, 0),
        ]);
        let pool = BufferPool::new(acct.clone(), 2, 2, None, true);
        let stop = AtomicBool::new(false);
        let mut a = pool.take(&stop).unwrap();
        pool.ensure(&mut a, 0, 100, &stop, &|| false).unwrap();
        pool.ensure(&mut a, 1, 10, &stop, &|| false).unwrap();
        let ptr = a.bufs[0].as_mut().unwrap().0.bytes_mut().as_ptr();
        let b = pool.take(&stop).unwrap();
        assert_eq!(acct.stats().current, 110);
        // Two sets are out: a third waits until one comes back.
        let lease = Lease::new(pool.clone(), a);
        let pool2 = pool.clone();
        let t = std::thread::spawn(move || {
            let stop = AtomicBool::new(false);
            let mut c = pool2.take(&stop).unwrap();
            let p = c.bufs[0].as_mut().unwrap().0.bytes_mut().as_ptr() as usize;
            pool2.give_back(c);
            p
        });
        std::thread::sleep(Duration::from_millis(30));
        drop(lease);
        assert_eq!(t.join().unwrap(), ptr as usize, "the returned buffer is reused");
        pool.give_back(b);
        // A forfeited buffer is neither counted nor reused.
        let mut set = pool.take(&stop).unwrap();
        pool.ensure(&mut set, 0, 100, &stop, &|| false).unwrap();
        let lease = Lease::new(pool.clone(), set);
        lease.forfeit(0);
        assert_eq!(acct.stats().current, 110, "only the idle set (100 + 10) is still counted");
        drop(lease);
        stop.store(true, Ordering::Release);
        assert!(matches!(pool.take(&stop), Err(LoaderError::Stopped)));
    }
}
