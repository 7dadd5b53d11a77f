//! Reuse of batch buffers.
//!
//! A pool holds at most `max_sets` *buffer sets* (one [`HostBuffer`] per projected column).
//! A worker takes a set before it claims a batch, grows a column's buffer when a batch needs
//! more bytes, and hands the set to the batch as a [`Lease`]. When the consumer drops the
//! batch (every clone and split of it), the lease returns the set and the next batch reuses
//! the same memory: no allocation, no page faults, no zeroing on the hot path. The number of
//! sets is the pipeline's depth, so it is also its backpressure.
//!
//! When the training loop holds every set out (it keeps batches: collects them, say), the
//! pool hands out one more set instead of waiting: no batch in the pipeline could finish and
//! return one, so waiting would never end. Such a loop holds that memory itself; the
//! accountant counts it as an overcommit of the `Ready` share.
//!
//! A buffer goes back into use only when libtorch says no tensor but the pool's own handle
//! shares its storage ([`HostBuffer::is_exclusive`]): a batch tensor the training loop keeps
//! (a view, a `shallow_clone`) keeps its values, and that buffer is replaced by a new one.
//!
//! The pool is the loader's, not an epoch's: sets idle at the end of an epoch serve the next
//! one, so an epoch starts without allocating (and zero-filling) its depth's worth of buffers.
//! Each epoch sets its own bound ([`BufferPool::start_epoch`]), and idle sets beyond it or
//! beyond the `Ready` share are freed then.
//!
//! With `reuse = false` the buffers are freed instead, and every batch allocates fresh
//! tensors (for consumers that keep batch tensors past the batch's life).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::buffer::{AlignedAllocator, AlignedBuffer, BufferAllocator, HostBuffer};
use crate::error::{LoaderError, Result};
use crate::memory::{Accountant, Charge, MemoryUse};

/// A buffer and its charge against the `Ready` share.
pub(crate) type Slot<B> = Option<(B, Charge)>;

/// One buffer per projected column, each counted against the `Ready` share; a transformed
/// column also has a staging buffer its stored rows land in (the loader's own memory, never
/// handed out), and its output buffer is the one an adapter sees.
#[derive(Debug)]
pub(crate) struct BufferSet<B> {
    pub(crate) bufs: Vec<Slot<B>>,
    /// Stored rows of transformed columns (`None` elsewhere): the loader's own memory.
    pub(crate) staged: Vec<Slot<AlignedBuffer>>,
    /// Which columns are transformed.
    transformed: Arc<[bool]>,
}

impl<B: HostBuffer> BufferSet<B> {
    /// The bytes its buffers are charged for.
    fn bytes(&self) -> u64 {
        let staged = self.staged.iter().flatten().map(|(_, charge)| charge.bytes());
        self.bufs.iter().flatten().map(|(_, charge)| charge.bytes()).chain(staged).sum()
    }

    /// The bytes column `c`'s stored rows are filled into: its staging buffer when the
    /// column is transformed, else its output buffer. `None` when the buffer is missing or
    /// still shared with a tensor.
    pub(crate) fn fill_bytes(&mut self, c: usize) -> Option<&mut [u8]> {
        if self.transformed.get(c).copied().unwrap_or(false) {
            self.staged.get_mut(c)?.as_mut()?.0.bytes_mut()
        } else {
            self.bufs.get_mut(c)?.as_mut()?.0.bytes_mut()
        }
    }

    /// Every column's [`BufferSet::fill_bytes`], in column order; `Err(c)` for a column
    /// whose buffer is missing or shared (only columns `wanted` are looked at; the others
    /// give an empty slice).
    pub(crate) fn all_fill_bytes(&mut self, wanted: &dyn Fn(usize) -> bool) -> Result<Vec<&mut [u8]>, usize> {
        let transformed = self.transformed.clone();
        self.bufs
            .iter_mut()
            .zip(self.staged.iter_mut())
            .enumerate()
            .map(|(c, (out, staged))| {
                if !wanted(c) {
                    return Ok(&mut [][..]);
                }
                let bytes = if transformed.get(c).copied().unwrap_or(false) {
                    staged.as_mut().and_then(|(b, _)| b.bytes_mut())
                } else {
                    out.as_mut().and_then(|(b, _)| b.bytes_mut())
                };
                bytes.ok_or(c)
            })
            .collect()
    }

    /// Column `c`'s staged rows and its output buffer, both (transformed columns); `None`
    /// when either is missing or shared.
    pub(crate) fn staged_and_output(&mut self, c: usize) -> Option<(&mut [u8], &mut [u8])> {
        let staged = self.staged.get_mut(c)?.as_mut()?.0.bytes_mut()?;
        let out = self.bufs.get_mut(c)?.as_mut()?.0.bytes_mut()?;
        Some((staged, out))
    }
}

/// Which of a column's buffers a fill grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Grown {
    /// The buffer its stored rows land in ([`BufferPool::ensure`]).
    Fill,
    /// A transformed column's output buffer, the adapter's ([`BufferPool::ensure_output`]).
    Output,
}

/// What filling a batch needs of its buffer set, whatever the adapter's buffer type: the
/// fill code works through this object-safe view and is not generic over the buffers.
pub(crate) trait FillTarget {
    /// Makes column `col`'s `which` buffer hold at least `bytes`.
    fn ensure(
        &mut self,
        which: Grown,
        col: usize,
        bytes: usize,
        stopped: &AtomicBool,
        may_overcommit: &dyn Fn() -> bool,
    ) -> Result<()>;

    /// [`BufferSet::fill_bytes`].
    fn fill_bytes(&mut self, c: usize) -> Option<&mut [u8]>;

    /// [`BufferSet::all_fill_bytes`].
    fn all_fill_bytes(&mut self, wanted: &dyn Fn(usize) -> bool) -> Result<Vec<&mut [u8]>, usize>;

    /// [`BufferSet::staged_and_output`].
    fn staged_and_output(&mut self, c: usize) -> Option<(&mut [u8], &mut [u8])>;

    /// Bytes column `c`'s output buffer holds (`None`: it has none).
    fn output_capacity(&self, c: usize) -> Option<usize>;
}

/// A set being filled, with the pool its buffers grow from.
pub(crate) struct Filling<'a, B> {
    pub(crate) pool: &'a BufferPool<B>,
    pub(crate) set: &'a mut BufferSet<B>,
}

impl<B: HostBuffer> FillTarget for Filling<'_, B> {
    fn ensure(
        &mut self,
        which: Grown,
        col: usize,
        bytes: usize,
        stopped: &AtomicBool,
        may_overcommit: &dyn Fn() -> bool,
    ) -> Result<()> {
        match which {
            Grown::Fill => self.pool.ensure(self.set, col, bytes, stopped, may_overcommit),
            Grown::Output => self.pool.ensure_output(self.set, col, bytes, stopped, may_overcommit),
        }
    }

    fn fill_bytes(&mut self, c: usize) -> Option<&mut [u8]> {
        self.set.fill_bytes(c)
    }

    fn all_fill_bytes(&mut self, wanted: &dyn Fn(usize) -> bool) -> Result<Vec<&mut [u8]>, usize> {
        self.set.all_fill_bytes(wanted)
    }

    fn staged_and_output(&mut self, c: usize) -> Option<(&mut [u8], &mut [u8])> {
        self.set.staged_and_output(c)
    }

    fn output_capacity(&self, c: usize) -> Option<usize> {
        Some(self.set.bufs.get(c)?.as_ref()?.0.capacity())
    }
}

#[derive(Debug)]
struct PoolState<B> {
    idle: Vec<BufferSet<B>>,
    outstanding: usize,
    /// Outstanding sets whose batch the consumer has received ([`Lease::deliver`]).
    delivered: usize,
}

impl<B> Default for PoolState<B> {
    fn default() -> Self {
        Self { idle: Vec::new(), outstanding: 0, delivered: 0 }
    }
}

/// The loader's pool of buffer sets, bounded per epoch.
#[derive(Debug)]
pub(crate) struct BufferPool<B> {
    state: Mutex<PoolState<B>>,
    returned: Condvar,
    acct: Arc<Accountant>,
    columns: usize,
    /// The running epoch's bound on sets out at once.
    max_sets: AtomicUsize,
    alloc: Arc<dyn BufferAllocator<Buffer = B>>,
    reuse: bool,
    /// Columns whose stored rows are staged for a transform.
    transformed: Arc<[bool]>,
    /// Workers waiting for `Ready` bytes: returned sets are then freed rather than kept.
    starved: AtomicUsize,
    /// Per buffer of a set (the output buffers, then the staging buffers), the most bytes a
    /// batch has needed in it: what the next epoch sizes its `Ready` share by.
    largest: Box<[AtomicU64]>,
}

impl<B: HostBuffer> BufferPool<B> {
    pub(crate) fn new(
        acct: Arc<Accountant>,
        columns: usize,
        max_sets: usize,
        alloc: Arc<dyn BufferAllocator<Buffer = B>>,
        reuse: bool,
        transformed: Vec<bool>,
    ) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(PoolState::default()),
            returned: Condvar::new(),
            acct,
            columns,
            max_sets: AtomicUsize::new(max_sets),
            alloc,
            reuse,
            transformed: transformed.into(),
            starved: AtomicUsize::new(0),
            largest: (0..2 * columns).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, PoolState<B>> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The most bytes one set's buffers have needed for a batch so far (0 before the first
    /// batch): the sum over its buffers of each one's largest need.
    ///
    /// A ragged column's batch bytes are only estimated before its batches are read (padded
    /// batches pay every ragged dim's batch maximum); a `Ready` share sized below what sets
    /// really need makes workers wait for bytes, free idle sets and allocate (and page in)
    /// fresh buffers batch after batch. Each epoch after the first sizes the share by this.
    pub(crate) fn largest_set_bytes(&self) -> u64 {
        self.largest.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// Bytes of the idle sets' buffers.
    pub(crate) fn idle_bytes(&self) -> u64 {
        self.lock().idle.iter().map(BufferSet::bytes).sum()
    }

    /// Bounds the coming epoch to `max_sets` sets out at once, and frees idle sets beyond
    /// that bound and beyond the `Ready` share (set for this epoch before), largest first.
    /// The rest serve the epoch as they are.
    pub(crate) fn start_epoch(&self, max_sets: usize) {
        self.max_sets.store(max_sets, Ordering::Release);
        let share = self.acct.share(MemoryUse::Ready);
        let freed = {
            let mut s = self.lock();
            let keep = max_sets.saturating_sub(s.outstanding);
            let mut freed: Vec<BufferSet<B>> =
                if s.idle.len() > keep { s.idle.drain(keep..).collect() } else { Vec::new() };
            s.idle.sort_by_key(BufferSet::bytes);
            let mut kept = self.acct.stats().by_use[0].current.saturating_sub(freed.iter().map(BufferSet::bytes).sum());
            while kept > share
                && let Some(set) = s.idle.pop()
            {
                kept = kept.saturating_sub(set.bytes());
                freed.push(set);
            }
            freed
        };
        drop(freed); // outside the pool lock: releasing takes the accountant's
    }

    /// Takes a set, waiting while `max_sets` are out (in workers, the queue or the consumer).
    ///
    /// # Errors
    /// [`LoaderError::Stopped`] when `stopped` becomes true while waiting.
    pub(crate) fn take(&self, stopped: &AtomicBool) -> Result<BufferSet<B>> {
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
            // Beyond `max_sets` only when the consumer holds every set out: then no batch in
            // the pipeline can finish and return one, and waiting would never end.
            if s.outstanding < self.max_sets.load(Ordering::Acquire) || s.delivered >= s.outstanding {
                s.outstanding += 1;
                return Ok(BufferSet {
                    bufs: (0..self.columns).map(|_| None).collect(),
                    staged: (0..self.columns).map(|_| None).collect(),
                    transformed: self.transformed.clone(),
                });
            }
            s = self.returned.wait_timeout(s, Duration::from_millis(50)).map_or_else(|e| e.into_inner().0, |r| r.0);
        }
    }

    fn synced(mut set: BufferSet<B>) -> BufferSet<B> {
        // For example, a device copy queued from these bytes must finish before they are
        // overwritten: the adapter's buffers know.
        for (b, _) in set.bufs.iter_mut().flatten() {
            b.before_reuse();
        }
        set
    }

    /// Makes the buffer column `col`'s stored rows are filled into hold at least `bytes`
    /// ([`BufferSet::fill_slot`]), replacing a smaller one.
    ///
    /// # Errors
    /// [`LoaderError::Budget`]/[`LoaderError::Stopped`] from the accountant, or an allocation
    /// failure.
    pub(crate) fn ensure(
        &self,
        set: &mut BufferSet<B>,
        col: usize,
        bytes: usize,
        stopped: &AtomicBool,
        may_overcommit: &dyn Fn() -> bool,
    ) -> Result<()> {
        let staged = self.transformed.get(col).copied().unwrap_or(false);
        self.record(if staged { self.columns + col } else { col }, bytes);
        let missing = || LoaderError::WorkerPanicked(format!("no column {col}"));
        if staged {
            // Staging buffers are the loader's own memory: the framework-free allocator.
            let slot = set.staged.get_mut(col).ok_or_else(missing)?;
            self.ensure_slot(slot, &AlignedAllocator, bytes, stopped, may_overcommit)
        } else {
            let slot = set.bufs.get_mut(col).ok_or_else(missing)?;
            self.ensure_slot(slot, self.alloc.as_ref(), bytes, stopped, may_overcommit)
        }
    }

    /// Makes transformed column `col`'s output buffer (the adapter's) hold at least `bytes`.
    ///
    /// # Errors
    /// As [`BufferPool::ensure`].
    pub(crate) fn ensure_output(
        &self,
        set: &mut BufferSet<B>,
        col: usize,
        bytes: usize,
        stopped: &AtomicBool,
        may_overcommit: &dyn Fn() -> bool,
    ) -> Result<()> {
        self.record(col, bytes);
        let slot = set.bufs.get_mut(col).ok_or_else(|| LoaderError::WorkerPanicked(format!("no column {col}")))?;
        self.ensure_slot(slot, self.alloc.as_ref(), bytes, stopped, may_overcommit)
    }

    /// Notes that buffer `i` of a set (see `largest`) needed `bytes` for a batch.
    fn record(&self, i: usize, bytes: usize) {
        if let Some(b) = self.largest.get(i) {
            b.fetch_max(bytes as u64, Ordering::Relaxed);
        }
    }

    fn ensure_slot<T: HostBuffer>(
        &self,
        slot: &mut Slot<T>,
        alloc: &dyn BufferAllocator<Buffer = T>,
        bytes: usize,
        stopped: &AtomicBool,
        may_overcommit: &dyn Fn() -> bool,
    ) -> Result<()> {
        if slot.as_ref().is_some_and(|(b, _)| b.capacity() >= bytes) {
            return Ok(());
        }
        // A buffer that grows (packed columns follow each batch's actual bytes) grows with
        // an eighth of headroom when the share has room for it, so batches of varying size
        // settle on one buffer instead of reallocating on every new maximum.
        let grows = slot.is_some();
        *slot = None; // release the smaller buffer first
        let share = self.acct.share(MemoryUse::Ready);
        let roomy = bytes.saturating_add(bytes / 8).next_multiple_of(crate::buffer::BUFFER_ALIGN);
        let bytes = if grows && self.acct.stats().by_use[0].current + roomy as u64 <= share { roomy } else { bytes };
        let want = bytes as u64;
        if self.acct.stats().by_use[0].current + want > share {
            // Free idle sets' memory before waiting on busy ones.
            let idle = std::mem::take(&mut self.lock().idle);
            drop(idle);
        }
        self.starved.fetch_add(1, Ordering::AcqRel);
        let charge = self.acct.acquire(MemoryUse::Ready, want, stopped, may_overcommit);
        self.starved.fetch_sub(1, Ordering::AcqRel);
        let charge = charge?;
        let buffer = alloc.allocate(bytes)?;
        *slot = Some((buffer, charge));
        Ok(())
    }

    /// Returns a set (from a dropped lease).
    pub(crate) fn give_back(&self, set: BufferSet<B>) {
        self.give_back_from(set, false);
    }

    fn give_back_from(&self, mut set: BufferSet<B>, delivered: bool) {
        let keep = self.reuse && self.starved.load(Ordering::Acquire) == 0;
        // A buffer whose storage a tensor of the user still shares (a view or shallow clone
        // kept past the batch) is let go, never refilled: the user's tensor keeps the memory
        // and its values, and the next batch gets a fresh buffer.
        for slot in &mut set.bufs {
            if slot.as_ref().is_some_and(|(b, _)| !b.is_exclusive()) {
                *slot = None;
            }
        }
        let freed = {
            let mut s = self.lock();
            s.outstanding = s.outstanding.saturating_sub(1);
            if delivered {
                s.delivered = s.delivered.saturating_sub(1);
            }
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
pub struct Lease<B: HostBuffer = AlignedBuffer> {
    pool: Arc<BufferPool<B>>,
    set: Mutex<Option<BufferSet<B>>>,
    delivered: AtomicBool,
}

impl<B: HostBuffer> Lease<B> {
    pub(crate) fn new(pool: Arc<BufferPool<B>>, set: BufferSet<B>) -> Arc<Self> {
        Arc::new(Self { pool, set: Mutex::new(Some(set)), delivered: AtomicBool::new(false) })
    }

    /// Records that the batch reached the consumer: from now on its set is the consumer's
    /// and no longer counts towards the pipeline's depth (see the module docs).
    pub(crate) fn deliver(&self) {
        if !self.delivered.swap(true, Ordering::AcqRel) {
            self.pool.lock().delivered += 1;
            self.pool.returned.notify_all();
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<BufferSet<B>>> {
        self.set.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Gives up column `col`'s buffer: its memory now belongs to a tensor the consumer took,
    /// so it must never be written again. It is no longer counted or reused.
    pub fn forfeit(&self, col: usize) {
        if let Some(set) = self.lock().as_mut()
            && let Some(slot) = set.bufs.get_mut(col)
        {
            *slot = None;
        }
    }

    /// Runs `f` on column `col`'s buffer (for an adapter wrapping it as a tensor).
    pub fn with_buffer<R>(&self, col: usize, f: impl FnOnce(&B) -> R) -> Option<R> {
        let set = self.lock();
        let (b, _) = set.as_ref()?.bufs.get(col)?.as_ref()?;
        Some(f(b))
    }

    /// Runs `f` on column `col`'s buffer mutably (for an adapter recording, say, that a
    /// device copy reads it).
    pub fn with_buffer_mut<R>(&self, col: usize, f: impl FnOnce(&mut B) -> R) -> Option<R> {
        let mut set = self.lock();
        let (b, _) = set.as_mut()?.bufs.get_mut(col)?.as_mut()?;
        Some(f(b))
    }
}

impl<B: HostBuffer> Drop for Lease<B> {
    fn drop(&mut self) {
        let delivered = self.delivered.load(Ordering::Acquire);
        if let Some(set) = self.lock().take() {
            self.pool.give_back_from(set, delivered);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An accountant whose whole budget is the `Ready` share.
    fn ready_only(budget: u64) -> Arc<Accountant> {
        let acct = Accountant::new(budget);
        acct.set_shares([
            (MemoryUse::Ready, budget),
            (MemoryUse::Fetch, 0),
            (MemoryUse::Shuffle, 0),
            (MemoryUse::Metadata, 0),
        ]);
        acct
    }

    #[test]
    fn sets_are_recycled_and_bounded() {
        let acct = ready_only(1 << 20);
        let pool = BufferPool::new(acct.clone(), 2, 2, Arc::new(AlignedAllocator), true, vec![false; 2]);
        let stop = AtomicBool::new(false);
        let mut a = pool.take(&stop).unwrap();
        pool.ensure(&mut a, 0, 100, &stop, &|| false).unwrap();
        pool.ensure(&mut a, 1, 10, &stop, &|| false).unwrap();
        let ptr = a.bufs[0].as_mut().unwrap().0.bytes_mut().unwrap().as_ptr();
        let b = pool.take(&stop).unwrap();
        assert_eq!(acct.stats().current, 110);
        // Two sets are out: a third waits until one comes back.
        let lease = Lease::new(pool.clone(), a);
        let pool2 = pool.clone();
        let t = std::thread::spawn(move || {
            let stop = AtomicBool::new(false);
            let mut c = pool2.take(&stop).unwrap();
            let p = c.bufs[0].as_mut().unwrap().0.bytes_mut().unwrap().as_ptr() as usize;
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

    #[test]
    fn delivered_sets_do_not_block_the_pipeline() {
        let acct = ready_only(1 << 20);
        let pool = BufferPool::new(acct, 1, 2, Arc::new(AlignedAllocator), true, vec![false; 1]);
        let stop = AtomicBool::new(false);
        // The consumer keeps both sets' batches: the pipeline may still make a third.
        let kept: Vec<Arc<Lease<AlignedBuffer>>> =
            (0..2).map(|_| Lease::new(pool.clone(), pool.take(&stop).unwrap())).collect();
        for l in &kept {
            l.deliver();
        }
        let third = pool.take(&stop).unwrap();
        // With a set in the pipeline, the next waits for a set to come back.
        let pool2 = pool.clone();
        let waiter = std::thread::spawn(move || {
            let stop = AtomicBool::new(false);
            pool2.take(&stop).map(|set| pool2.give_back(set)).is_ok()
        });
        std::thread::sleep(Duration::from_millis(30));
        assert!(!waiter.is_finished(), "a fourth set waits while one undelivered set is out");
        pool.give_back(third);
        assert!(waiter.join().unwrap());
        drop(kept);
        let s = pool.lock();
        assert_eq!((s.outstanding, s.delivered), (0, 0), "counts return to zero");
    }

    #[test]
    fn idle_sets_outlive_the_epoch_within_its_bounds() {
        let acct = ready_only(1 << 20);
        let pool = BufferPool::new(acct.clone(), 1, 0, Arc::new(AlignedAllocator), true, vec![false; 1]);
        let stop = AtomicBool::new(false);
        let ptr_of =
            |set: &mut BufferSet<AlignedBuffer>| set.bufs[0].as_mut().unwrap().0.bytes_mut().unwrap().as_ptr() as usize;
        pool.start_epoch(3);
        let mut sets: Vec<BufferSet<AlignedBuffer>> = (0..3).map(|_| pool.take(&stop).unwrap()).collect();
        for (set, bytes) in sets.iter_mut().zip([1000, 3000, 2000]) {
            pool.ensure(set, 0, bytes, &stop, &|| false).unwrap();
        }
        let ptrs: Vec<usize> = sets.iter_mut().map(ptr_of).collect();
        for set in sets {
            pool.give_back(set);
        }
        assert_eq!(acct.stats().current, 6000);
        // The next epoch takes the same buffers: nothing is allocated.
        pool.start_epoch(3);
        let mut again: Vec<BufferSet<AlignedBuffer>> = (0..3).map(|_| pool.take(&stop).unwrap()).collect();
        let mut reused: Vec<usize> = again.iter_mut().map(ptr_of).collect();
        reused.sort_unstable();
        let mut want = ptrs.clone();
        want.sort_unstable();
        assert_eq!(reused, want, "every buffer is reused");
        assert_eq!(acct.stats().current, 6000);
        for set in again {
            pool.give_back(set);
        }
        // A smaller bound frees the sets beyond it.
        pool.start_epoch(2);
        assert_eq!(pool.lock().idle.len(), 2);
        // A smaller share frees the largest idle sets until the rest fit.
        acct.set_shares([
            (MemoryUse::Ready, 2500),
            (MemoryUse::Fetch, 0),
            (MemoryUse::Shuffle, 0),
            (MemoryUse::Metadata, 0),
        ]);
        pool.start_epoch(2);
        let current = acct.stats().current;
        assert!(current <= 2500, "{current} bytes kept over a 2,500-byte share");
        assert_eq!(pool.lock().idle.len(), 1);
        pool.start_epoch(0);
        assert_eq!(acct.stats().current, 0, "a zero bound frees every idle set");
    }
}
