//! Staging buffers for object-store fills, shared by every filling thread of an epoch.
//!
//! On an object store the epoch runs many filling threads (the self-tuned depth), and a
//! batch's bytes that cannot land in its slots (whole pages of small rows, compressed pages)
//! are staged before they are verified and decoded. A per-thread allowance would be a small
//! slice of the `Fetch` share and cut a batch's staged pages into many waves, one round trip
//! each; instead a wave takes one buffer of the size it needs from this pool, up to the
//! pool's cap, and gives it back when the wave is served. Idle buffers are reused (no fresh
//! allocation, no page faults per wave); every buffer, lent or idle, is counted against
//! `Fetch` with its own [`Charge`]. A thread holds at most one buffer at a time, so a wait
//! for one always ends when another wave is served. The pool is the loader's: each epoch
//! sets its cap ([`StagePool::set_cap`]), and idle buffers serve the next epoch.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{LoaderError, Result};
use crate::memory::{Accountant, Charge, MemoryUse};

/// Buffer lengths are rounded up to this, so waves of similar sizes share buffers.
const ROUND: usize = 256 << 10;

#[derive(Debug)]
struct Buf {
    bytes: Vec<u8>,
    _charge: Charge,
}

#[derive(Debug, Default)]
struct State {
    idle: Vec<Buf>,
    /// Bytes of every buffer, idle or lent.
    held: u64,
}

/// The loader's staging buffers, within the running epoch's `cap` bytes.
#[derive(Debug)]
pub(crate) struct StagePool {
    acct: Arc<Accountant>,
    cap: AtomicU64,
    state: Mutex<State>,
    returned: Condvar,
}

/// A staging buffer lent to one wave; back to the pool on drop.
#[derive(Debug)]
pub(crate) struct Staged<'p> {
    buf: Option<Buf>,
    pool: &'p StagePool,
}

impl Staged<'_> {
    /// The buffer's bytes (at least the length asked for).
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        self.buf.as_mut().map_or(&mut [][..], |b| &mut b.bytes[..])
    }
}

impl Drop for Staged<'_> {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            let mut s = self.pool.lock();
            s.idle.push(buf);
            drop(s);
            self.pool.returned.notify_all();
        }
    }
}

impl StagePool {
    pub(crate) fn new(acct: Arc<Accountant>, cap: u64) -> Self {
        Self { acct, cap: AtomicU64::new(cap), state: Mutex::new(State::default()), returned: Condvar::new() }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update is a push, a pop or a counter: a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The most bytes one wave may stage.
    pub(crate) fn cap(&self) -> u64 {
        self.cap.load(Ordering::Acquire)
    }

    /// Bytes of every buffer, lent or idle.
    pub(crate) fn held(&self) -> u64 {
        self.lock().held
    }

    /// Sets the coming epoch's cap; idle buffers beyond it are freed.
    pub(crate) fn set_cap(&self, cap: u64) {
        self.cap.store(cap, Ordering::Release);
        let mut freed = Vec::new();
        let mut s = self.lock();
        while s.held > cap
            && let Some(buf) = s.idle.pop()
        {
            s.held -= buf.bytes.len() as u64;
            freed.push(buf);
        }
        drop(s);
        drop(freed); // outside the lock: releasing takes the accountant's
    }

    /// Lends a buffer of at least `n` bytes: an idle one that fits, else a new one while the
    /// pool holds less than its cap (idle buffers that do not fit are freed to make room),
    /// else waits for one to come back.
    ///
    /// # Errors
    /// [`LoaderError::Budget`] when `n` exceeds the cap; [`LoaderError::Stopped`] on stop.
    pub(crate) fn take(&self, n: usize, stopped: &AtomicBool) -> Result<Staged<'_>> {
        let cap = self.cap();
        let len = n.div_ceil(ROUND).max(1) * ROUND;
        if n as u64 > cap {
            return Err(LoaderError::Budget {
                budget: self.acct.budget(),
                what: format!("one wave of staged object-store bytes (the staging share is {cap} bytes)"),
                needed: n as u64,
            });
        }
        let len = len.min(usize::try_from(cap).unwrap_or(usize::MAX)).max(n);
        let mut s = self.lock();
        loop {
            if stopped.load(Ordering::Acquire) {
                return Err(LoaderError::Stopped);
            }
            // The smallest idle buffer that fits.
            let fit = (0..s.idle.len()).filter(|&i| s.idle[i].bytes.len() >= n).min_by_key(|&i| s.idle[i].bytes.len());
            if let Some(i) = fit {
                let buf = s.idle.swap_remove(i);
                return Ok(Staged { buf: Some(buf), pool: self });
            }
            while s.held + len as u64 > cap && !s.idle.is_empty() {
                let freed = s.idle.swap_remove(0);
                s.held -= freed.bytes.len() as u64;
            }
            if s.held + len as u64 <= cap {
                s.held += len as u64;
                drop(s);
                let charge = self.acct.charge(MemoryUse::Fetch, len as u64);
                return Ok(Staged { buf: Some(Buf { bytes: vec![0u8; len], _charge: charge }), pool: self });
            }
            s = self.returned.wait_timeout(s, Duration::from_millis(20)).map_or_else(|e| e.into_inner().0, |r| r.0);
        }
    }

    /// Wakes waiters (on stop).
    pub(crate) fn notify(&self) {
        let _s = self.lock();
        self.returned.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_and_stay_within_the_cap() {
        let acct = Accountant::new(64 << 20);
        let pool = StagePool::new(acct.clone(), 2 << 20);
        let stop = AtomicBool::new(false);
        let mut a = pool.take(300 << 10, &stop).unwrap();
        assert_eq!(a.bytes_mut().len(), 512 << 10, "rounded up");
        let ptr = a.bytes_mut().as_ptr();
        drop(a);
        let mut b = pool.take(100 << 10, &stop).unwrap();
        assert_eq!(b.bytes_mut().as_ptr(), ptr, "the idle buffer is lent again");
        // The pool is full with b lent: a second taker waits until b comes back.
        let big = std::thread::scope(|s| {
            let t = s.spawn(|| pool.take(1700 << 10, &stop).map(|mut x| x.bytes_mut().len()));
            std::thread::sleep(Duration::from_millis(50));
            assert!(!t.is_finished(), "waits while the cap is held");
            drop(b);
            t.join().unwrap()
        });
        assert_eq!(big.unwrap(), 1792 << 10);
        assert!(acct.stats().by_use[1].current <= 2 << 20);
        assert!(matches!(pool.take(3 << 20, &stop), Err(LoaderError::Budget { .. })));
        stop.store(true, Ordering::Release);
        let hold = pool.take(2 << 20, &AtomicBool::new(false)).unwrap();
        assert!(matches!(pool.take(1 << 20, &stop), Err(LoaderError::Stopped)));
        drop(hold);
        // A later epoch's smaller cap frees idle buffers beyond it; a zero cap frees them all.
        pool.set_cap(1 << 20);
        assert!(acct.stats().by_use[1].current <= 1 << 20);
        pool.set_cap(0);
        assert_eq!(acct.stats().current, 0);
        drop(pool);
        assert_eq!(acct.stats().current, 0);
    }
}
