//! The block-shuffle window: decoded pages of the fragments the current batches draw from.
//!
//! In [`ShuffleMode::Block`](crate::ShuffleMode::Block) an epoch visits windows of fragments
//! one after another and shuffles rows only within a window. Each fragment is read **once
//! per epoch**: the first batch that needs it loads every page this rank will need from it
//! (one ranged read per data file), later batches copy rows out of memory, and the fragment
//! is dropped when the last of its rows has been copied (an exact reference count derived
//! from the plan).
//!
//! Memory stays bounded because fragments are *admitted in the order batches first need
//! them* and each admission waits for its bytes in the `Shuffle` share. Once every batch
//! before the oldest unfinished one has finished, the resident fragments are exactly those
//! that span it, so admission can always proceed when the share holds the peak of that
//! sweep (computed when the epoch starts, see [`sweep_peak`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;

use crate::error::{LoaderError, Result};
use crate::memory::Charge;

/// A stored-bytes fault remembered for a page, re-raised for every row that needs it.
#[derive(Clone, Debug)]
pub(crate) enum Fault {
    Checksum { what: String, stored: u32, computed: u32 },
    Corrupt { what: String, reason: String, class: tessera::ErrorClass },
}

impl Fault {
    /// The fault of a data error (`None` for other errors).
    pub(crate) fn of(e: &LoaderError) -> Option<Self> {
        match e {
            LoaderError::Checksum { what, stored, computed } => {
                Some(Self::Checksum { what: what.clone(), stored: *stored, computed: *computed })
            }
            LoaderError::Corrupt { what, reason, class } => {
                Some(Self::Corrupt { what: what.clone(), reason: reason.clone(), class: *class })
            }
            e if e.is_data_error() => Some(Self::Corrupt {
                what: "data".into(),
                reason: e.to_string(),
                class: e.class().unwrap_or(tessera::ErrorClass::Invalid),
            }),
            _ => None,
        }
    }

    pub(crate) fn to_error(&self) -> LoaderError {
        match self {
            Self::Checksum { what, stored, computed } => {
                LoaderError::Checksum { what: what.clone(), stored: *stored, computed: *computed }
            }
            Self::Corrupt { what, reason, class } => {
                LoaderError::Corrupt { what: what.clone(), reason: reason.clone(), class: *class }
            }
        }
    }
}

/// Decoded pages of one column chunk: page index → raw bytes or the page's fault.
pub(crate) type PageMap = HashMap<usize, std::result::Result<Bytes, Fault>>;

/// What was loaded of a fragment: per file (as in `FragmentEntry::files`) either the
/// fault that made the whole file unreadable, or per projected column of the file its pages.
#[derive(Debug)]
pub(crate) struct FragmentData {
    pub(crate) files: Vec<std::result::Result<Vec<PageMap>, Fault>>,
    /// The `Shuffle` bytes, released when the last holder drops the data.
    pub(crate) _charge: Option<Charge>,
}

#[derive(Debug)]
enum Slot {
    Loading,
    Ready { data: Arc<FragmentData>, remaining: u64 },
}

#[derive(Debug)]
struct State {
    /// Admission position whose turn it is.
    turn: usize,
    slots: HashMap<usize, Slot>,
}

/// The window cache of one epoch on one rank.
#[derive(Debug)]
pub(crate) struct WindowCache {
    /// Admission position of each fragment (`usize::MAX` when this rank never needs it).
    position: Vec<usize>,
    /// Real rows of this rank's remaining batches per fragment.
    uses: Vec<u64>,
    /// First batch needing each fragment.
    first_need: Vec<usize>,
    state: Mutex<State>,
    changed: Condvar,
}

/// What admission tells the caller to do.
#[derive(Debug)]
pub(crate) enum Admission {
    /// Resident (or loaded by another worker while waiting).
    Ready(Arc<FragmentData>),
    /// This caller holds the turn and must load the fragment, then call
    /// [`WindowCache::loaded`] (or [`WindowCache::abandon`] on failure).
    Load,
}

impl WindowCache {
    /// `first_need[f]` and `uses[f]` come from the plan; fragments with no uses are never
    /// admitted.
    pub(crate) fn new(first_need: Vec<usize>, uses: Vec<u64>) -> Self {
        let mut order: Vec<usize> = (0..uses.len()).filter(|&f| uses[f] > 0).collect();
        order.sort_by_key(|&f| (first_need[f], f));
        let mut position = vec![usize::MAX; uses.len()];
        for (p, &f) in order.iter().enumerate() {
            position[f] = p;
        }
        Self {
            position,
            uses,
            first_need,
            state: Mutex::new(State { turn: 0, slots: HashMap::new() }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Admission position of `frag` (for sorting a batch's fragments).
    pub(crate) fn position(&self, frag: usize) -> usize {
        self.position.get(frag).copied().unwrap_or(usize::MAX)
    }

    /// The first batch that needs `frag`.
    pub(crate) fn first_need(&self, frag: usize) -> usize {
        self.first_need.get(frag).copied().unwrap_or(usize::MAX)
    }

    /// Waits until `frag` is resident or it is this caller's turn to load it. Callers take
    /// the fragments of one batch in ascending [`WindowCache::position`].
    ///
    /// # Errors
    /// [`LoaderError::Stopped`] on stop; [`LoaderError::Config`] for a fragment this rank
    /// was not planned to need (a bug).
    pub(crate) fn admit(&self, frag: usize, stopped: &AtomicBool) -> Result<Admission> {
        let pos = self.position(frag);
        if pos == usize::MAX {
            return Err(LoaderError::config(format!("fragment {frag} is not in this rank's block schedule")));
        }
        let mut s = self.lock();
        loop {
            if stopped.load(Ordering::Acquire) {
                return Err(LoaderError::Stopped);
            }
            match s.slots.get(&frag) {
                Some(Slot::Ready { data, .. }) => return Ok(Admission::Ready(data.clone())),
                None if s.turn == pos => {
                    s.slots.insert(frag, Slot::Loading);
                    return Ok(Admission::Load);
                }
                None if s.turn > pos => {
                    return Err(LoaderError::config(format!("fragment {frag} was evicted before its last use")));
                }
                Some(Slot::Loading) | None => {}
            }
            s = self.changed.wait_timeout(s, Duration::from_millis(50)).map_or_else(|e| e.into_inner().0, |r| r.0);
        }
    }

    /// Publishes a loaded fragment and passes the turn on.
    pub(crate) fn loaded(&self, frag: usize, data: Arc<FragmentData>) {
        let mut s = self.lock();
        s.slots.insert(frag, Slot::Ready { data, remaining: self.uses.get(frag).copied().unwrap_or(0) });
        s.turn += 1;
        drop(s);
        self.changed.notify_all();
    }

    /// Gives the turn back after a failed load (the epoch is failing; waiters see the stop).
    pub(crate) fn abandon(&self, frag: usize) {
        let mut s = self.lock();
        s.slots.remove(&frag);
        drop(s);
        self.changed.notify_all();
    }

    /// The fragment's data when resident (for padding rows and substitutes).
    pub(crate) fn resident(&self, frag: usize) -> Option<Arc<FragmentData>> {
        match self.lock().slots.get(&frag) {
            Some(Slot::Ready { data, .. }) => Some(data.clone()),
            _ => None,
        }
    }

    /// Counts `n` real rows of `frag` as copied; the fragment leaves the cache after its last.
    pub(crate) fn release(&self, frag: usize, n: u64) {
        let mut s = self.lock();
        let done = match s.slots.get_mut(&frag) {
            Some(Slot::Ready { remaining, .. }) => {
                *remaining = remaining.saturating_sub(n);
                *remaining == 0
            }
            _ => false,
        };
        if done {
            s.slots.remove(&frag);
        }
        drop(s);
        self.changed.notify_all();
    }

    /// Wakes waiters (stop).
    pub(crate) fn notify(&self) {
        let _s = self.lock();
        self.changed.notify_all();
    }
}

/// The most bytes resident at once if batches run in order and each fragment stays from its
/// first to its last needing batch: the `Shuffle` share a block-shuffle epoch needs.
pub(crate) fn sweep_peak(first_need: &[usize], last_need: &[usize], bytes: &[u64], batches: usize) -> u64 {
    let mut delta = vec![0i128; batches + 2];
    for f in 0..bytes.len() {
        let (a, b) = (first_need[f], last_need[f]);
        if a <= b && b < batches {
            delta[a] += i128::from(bytes[f]);
            delta[b + 1] -= i128::from(bytes[f]);
        }
    }
    let mut cur = 0i128;
    let mut peak = 0i128;
    for d in delta {
        cur += d;
        peak = peak.max(cur);
    }
    peak as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> Arc<FragmentData> {
        Arc::new(FragmentData { files: Vec::new(), _charge: None })
    }

    #[test]
    fn fragments_are_admitted_in_order_and_released_after_their_last_row() {
        // Fragment 2 is needed first, then 0; fragment 1 never.
        let w = Arc::new(WindowCache::new(vec![1, usize::MAX, 0], vec![3, 0, 2]));
        let stop = AtomicBool::new(false);
        assert!(w.admit(1, &stop).is_err());
        // Fragment 0 must wait for fragment 2's admission.
        let w2 = w.clone();
        let t = std::thread::spawn(move || matches!(w2.admit(0, &AtomicBool::new(false)), Ok(Admission::Load)));
        std::thread::sleep(Duration::from_millis(30));
        assert!(!t.is_finished());
        assert!(matches!(w.admit(2, &stop), Ok(Admission::Load)));
        w.loaded(2, data());
        assert!(t.join().unwrap());
        w.loaded(0, data());
        assert!(matches!(w.admit(2, &stop), Ok(Admission::Ready(_))));
        w.release(2, 1);
        assert!(w.resident(2).is_some());
        w.release(2, 1);
        assert!(w.resident(2).is_none());
        assert!(w.admit(2, &stop).is_err(), "evicted fragments are not reloaded");
    }

    #[test]
    fn sweep_counts_overlapping_fragments() {
        // f0 spans batches 0..=1, f1 1..=2, f2 3..=3.
        assert_eq!(sweep_peak(&[0, 1, 3], &[1, 2, 3], &[10, 20, 5], 4), 30);
        assert_eq!(sweep_peak(&[], &[], &[], 0), 0);
    }
}
