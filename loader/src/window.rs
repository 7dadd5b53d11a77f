//! The block-shuffle window: the pages of the fragments the current batches draw from.
//!
//! In [`ShuffleMode::Block`](crate::ShuffleMode::Block) an epoch visits windows of fragments
//! one after another and shuffles rows only within a window. Each fragment is read **once
//! per epoch**, with large ranged reads: when the first batch that needs it arrives, the
//! pages this rank needs from it are laid out in extents (`extents`: large buffers recycled
//! from fragment to fragment and epoch to epoch), one job per extent, each job one ranged
//! read of neighbouring pages straight into its extent, verified there (compressed pages are
//! decoded into it). Any worker whose batch waits for a loading fragment runs that
//! fragment's pending jobs (or an earlier fragment's) instead of sleeping, so a window loads
//! on every worker at once. Later batches copy rows out of the extents, each row once, into
//! their batch buffers; the fragment's extents go back to the pool when the last of its rows
//! has been copied (an exact reference count derived from the plan).
//!
//! Memory stays bounded because fragments are *admitted in the order batches first need
//! them* and each admission waits for its extents within the `Shuffle` share. Once every
//! batch before the oldest unfinished one has finished, the resident fragments are exactly
//! those that span it, so admission can always proceed when the share holds the peak of that
//! sweep (computed when the epoch starts, see [`sweep_peak`]).

mod extents;

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

#[cfg(test)]
use extents::MIN_EXTENT;
pub(crate) use extents::{Extent, ExtentPool, extent_len, extent_size};

use crate::catalog::FileMeta;
use crate::error::{LoaderError, Result};

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

/// Where a loaded page's raw (decoded) bytes are: an extent of the fragment and a range in it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PageLoc {
    extent: usize,
    start: usize,
    len: usize,
}

impl PageLoc {
    pub(crate) fn new(extent: usize, start: usize, len: usize) -> Self {
        Self { extent, start, len }
    }

    /// The same place, with extents numbered from `base` (the fragment's earlier files).
    pub(crate) fn offset_extent(self, base: usize) -> Self {
        Self { extent: self.extent + base, ..self }
    }
}

/// Pages of one column chunk: page index → where its bytes are, or the page's fault.
pub(crate) type PageMap = HashMap<usize, std::result::Result<PageLoc, Fault>>;

/// A loaded fragment: per file (as in `FragmentEntry::files`) either the fault that made the
/// whole file unreadable, or per projected column of the file its pages; and the extents
/// holding the pages (back to the pool when the last holder drops the data).
#[derive(Debug)]
pub(crate) struct FragmentData {
    pub(crate) files: Vec<std::result::Result<Vec<PageMap>, Fault>>,
    extents: Vec<Extent>,
}

impl FragmentData {
    /// The bytes of a page located by `loc` (empty if `loc` does not fit, which the layout
    /// rules out).
    pub(crate) fn bytes(&self, loc: &PageLoc) -> &[u8] {
        self.extents.get(loc.extent).and_then(|e| e.bytes().get(loc.start..loc.start + loc.len)).unwrap_or_default()
    }
}

/// One page a [`Run`] brings in: its column position in the file, its index, and where its
/// raw bytes land in the job's extent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PageIn {
    pub(crate) pos: usize,
    pub(crate) page: usize,
    pub(crate) at: usize,
}

/// One ranged read of a job: neighbouring pages of one data file. `direct` runs land as
/// stored at `at` in the extent (uncompressed pages, verified in place); the others are
/// staged and each page is decoded to its own place.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) range: Range<u64>,
    pub(crate) direct: bool,
    pub(crate) at: usize,
    pub(crate) pages: Vec<PageIn>,
}

/// Filling one extent of a loading fragment: the unit of work any waiting worker can run.
#[derive(Debug)]
pub(crate) struct Job {
    pub(crate) frag: usize,
    /// The data file's position in its fragment.
    pub(crate) fi: usize,
    pub(crate) meta: Arc<FileMeta>,
    /// The extent's index in the fragment.
    pub(crate) index: usize,
    pub(crate) extent: Extent,
    pub(crate) runs: Vec<Run>,
}

/// A page fault found by a job: (file, column position, page, fault).
pub(crate) type PageFault = (usize, usize, usize, Fault);

#[derive(Debug)]
struct Loading {
    pending: VecDeque<Job>,
    /// Jobs not finished (pending or running).
    outstanding: usize,
    files: Vec<std::result::Result<Vec<PageMap>, Fault>>,
    extents: Vec<Option<Extent>>,
}

#[derive(Debug)]
enum Slot {
    /// A worker is laying the fragment out and taking its extents.
    Planning,
    Loading(Loading),
    Ready {
        data: Arc<FragmentData>,
        remaining: u64,
    },
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
    /// The fragments in admission order (the inverse of `position`).
    order: Vec<usize>,
    /// Real rows of this rank's remaining batches per fragment.
    uses: Vec<u64>,
    /// First batch needing each fragment.
    first_need: Vec<usize>,
    /// Regular extent length of this epoch.
    extent: u64,
    state: Mutex<State>,
    changed: Condvar,
}

/// What admission tells the caller to do next.
#[derive(Debug)]
pub(crate) enum Step {
    /// The fragment is resident.
    Ready(Arc<FragmentData>),
    /// This caller holds the turn: it lays the fragment out, takes its extents and calls
    /// [`WindowCache::planned`] (or [`WindowCache::abandon`] on failure).
    Plan,
    /// Run this job (of this or an earlier fragment), then call [`WindowCache::finished`]
    /// (or [`WindowCache::requeue`] on failure).
    Run(Box<Job>),
}

impl WindowCache {
    /// `first_need[f]` and `uses[f]` come from the plan; fragments with no uses are never
    /// admitted. `extent` is the regular extent length of the epoch.
    pub(crate) fn new(first_need: Vec<usize>, uses: Vec<u64>, extent: u64) -> Self {
        let mut order: Vec<usize> = (0..uses.len()).filter(|&f| uses[f] > 0).collect();
        order.sort_by_key(|&f| (first_need[f], f));
        let mut position = vec![usize::MAX; uses.len()];
        for (p, &f) in order.iter().enumerate() {
            position[f] = p;
        }
        Self {
            position,
            order,
            uses,
            first_need,
            extent,
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

    /// `frag` and the fragments after it in admission order, `n` in all (fewer at the end).
    pub(crate) fn upcoming(&self, frag: usize, n: usize) -> Vec<usize> {
        let pos = self.position(frag);
        self.order.iter().skip(pos).take(n).copied().collect()
    }

    /// The first batch that needs `frag`.
    pub(crate) fn first_need(&self, frag: usize) -> usize {
        self.first_need.get(frag).copied().unwrap_or(usize::MAX)
    }

    /// The regular extent length of this epoch.
    pub(crate) fn extent(&self) -> u64 {
        self.extent
    }

    /// The next step towards having `frag` resident: it is, or the caller plans it (its
    /// turn), or the caller runs a pending job (of `frag`, else of the earliest loading
    /// fragment) instead of waiting. Callers take the fragments of one batch in ascending
    /// [`WindowCache::position`].
    ///
    /// # Errors
    /// [`LoaderError::Stopped`] on stop; [`LoaderError::Config`] for a fragment this rank
    /// was not planned to need (a bug).
    pub(crate) fn admit(&self, frag: usize, stopped: &AtomicBool) -> Result<Step> {
        let pos = self.position(frag);
        if pos == usize::MAX {
            return Err(LoaderError::config(format!("fragment {frag} is not in this rank's block schedule")));
        }
        let mut s = self.lock();
        loop {
            if stopped.load(Ordering::Acquire) {
                return Err(LoaderError::Stopped);
            }
            let turn = s.turn;
            match s.slots.get_mut(&frag) {
                Some(Slot::Ready { data, .. }) => return Ok(Step::Ready(data.clone())),
                Some(Slot::Loading(l)) if !l.pending.is_empty() => {
                    if let Some(job) = l.pending.pop_front() {
                        return Ok(Step::Run(Box::new(job)));
                    }
                }
                None if turn == pos => {
                    s.slots.insert(frag, Slot::Planning);
                    return Ok(Step::Plan);
                }
                None if turn > pos => {
                    return Err(LoaderError::config(format!("fragment {frag} was evicted before its last use")));
                }
                Some(_) | None => {}
            }
            // Help: the earliest loading fragment's next job.
            let earliest = s
                .slots
                .iter()
                .filter(|(_, slot)| matches!(slot, Slot::Loading(l) if !l.pending.is_empty()))
                .map(|(&f, _)| f)
                .min_by_key(|&f| self.position(f));
            if let Some(Slot::Loading(l)) = earliest.and_then(|f| s.slots.get_mut(&f))
                && let Some(job) = l.pending.pop_front()
            {
                return Ok(Step::Run(Box::new(job)));
            }
            s = self.changed.wait_timeout(s, Duration::from_millis(50)).map_or_else(|e| e.into_inner().0, |r| r.0);
        }
    }

    /// Publishes a planned fragment (its page layout and the jobs filling its extents; ready
    /// at once without jobs) and passes the turn on.
    pub(crate) fn planned(&self, frag: usize, files: Vec<std::result::Result<Vec<PageMap>, Fault>>, jobs: Vec<Job>) {
        let remaining = self.uses.get(frag).copied().unwrap_or(0);
        let slot = if jobs.is_empty() {
            Slot::Ready { data: Arc::new(FragmentData { files, extents: Vec::new() }), remaining }
        } else {
            let n = jobs.len();
            Slot::Loading(Loading {
                pending: jobs.into(),
                outstanding: n,
                files,
                extents: std::iter::repeat_with(|| None).take(n).collect(),
            })
        };
        let mut s = self.lock();
        s.slots.insert(frag, slot);
        s.turn += 1;
        drop(s);
        self.changed.notify_all();
    }

    /// Records a finished job (its extent filled, the faults of its pages); the fragment is
    /// ready after its last job.
    pub(crate) fn finished(&self, job: Job, faults: Vec<PageFault>) {
        let mut s = self.lock();
        let frag = job.frag;
        let Some(Slot::Loading(l)) = s.slots.get_mut(&frag) else { return };
        for (fi, pos, page, fault) in faults {
            if let Some(Ok(maps)) = l.files.get_mut(fi)
                && let Some(map) = maps.get_mut(pos)
            {
                map.insert(page, Err(fault));
            }
        }
        if let Some(slot) = l.extents.get_mut(job.index) {
            *slot = Some(job.extent);
        }
        l.outstanding = l.outstanding.saturating_sub(1);
        if l.outstanding == 0 {
            let remaining = self.uses.get(frag).copied().unwrap_or(0);
            let files = std::mem::take(&mut l.files);
            let extents = std::mem::take(&mut l.extents).into_iter().flatten().collect();
            s.slots.insert(frag, Slot::Ready { data: Arc::new(FragmentData { files, extents }), remaining });
        }
        drop(s);
        self.changed.notify_all();
    }

    /// Takes the turn to plan the next fragment in admission order ahead of any batch that
    /// needs it (loading ahead): `Some(fragment)` when it is not planned yet; the caller then
    /// plans it ([`WindowCache::planned`]) or gives the turn back ([`WindowCache::abandon`]).
    pub(crate) fn claim_turn(&self) -> Option<usize> {
        let mut s = self.lock();
        let frag = *self.order.get(s.turn)?;
        if s.slots.contains_key(&frag) {
            return None;
        }
        s.slots.insert(frag, Slot::Planning);
        Some(frag)
    }

    /// Up to `max` pending jobs of fragment `frag`.
    pub(crate) fn take_pending_of(&self, frag: usize, max: usize) -> Vec<Job> {
        let mut s = self.lock();
        let Some(Slot::Loading(l)) = s.slots.get_mut(&frag) else { return Vec::new() };
        let n = max.min(l.pending.len());
        l.pending.drain(..n).collect()
    }

    /// Up to `max` more pending jobs, of the earliest loading fragments first: a worker on an
    /// object store runs them together with the job [`WindowCache::admit`] gave it, so that
    /// their range GETs share the round trip instead of waiting for one another.
    pub(crate) fn take_pending(&self, max: usize) -> Vec<Job> {
        let mut s = self.lock();
        let mut loading: Vec<usize> = s
            .slots
            .iter()
            .filter(|(_, slot)| matches!(slot, Slot::Loading(l) if !l.pending.is_empty()))
            .map(|(&f, _)| f)
            .collect();
        loading.sort_by_key(|&f| self.position(f));
        let mut jobs = Vec::new();
        for f in loading {
            let Some(Slot::Loading(l)) = s.slots.get_mut(&f) else { continue };
            while jobs.len() < max {
                let Some(job) = l.pending.pop_front() else { break };
                jobs.push(job);
            }
        }
        jobs
    }

    /// Puts back a job whose run failed (the epoch is failing; another worker may retry it).
    pub(crate) fn requeue(&self, job: Job) {
        let mut s = self.lock();
        if let Some(Slot::Loading(l)) = s.slots.get_mut(&job.frag) {
            l.pending.push_front(job);
        }
        drop(s);
        self.changed.notify_all();
    }

    /// Gives the turn back after a failed plan (the epoch is failing; waiters see the stop)
    /// or a load ahead that found no room (the fragment is planned when a batch needs it).
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
        let gone = if done { s.slots.remove(&frag) } else { None };
        drop(s);
        drop(gone); // outside the lock: the extents go back to their pool
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

    #[test]
    fn upcoming_fragments_follow_admission_order() {
        // Admission order: 3, 0, 2 (fragment 1 is never needed).
        let w = WindowCache::new(vec![1, usize::MAX, 2, 0], vec![3, 0, 2, 1], MIN_EXTENT);
        assert_eq!(w.upcoming(3, 2), vec![3, 0]);
        assert_eq!(w.upcoming(0, 5), vec![0, 2]);
        assert_eq!(w.upcoming(2, 1), vec![2]);
        assert!(w.upcoming(1, 3).is_empty(), "a fragment outside the schedule has none");
    }

    #[test]
    fn fragments_are_admitted_in_order_and_released_after_their_last_row() {
        // Fragment 2 is needed first, then 0; fragment 1 never.
        let w = Arc::new(WindowCache::new(vec![1, usize::MAX, 0], vec![3, 0, 2], MIN_EXTENT));
        let stop = AtomicBool::new(false);
        assert!(w.admit(1, &stop).is_err());
        // Fragment 0 must wait for fragment 2's admission.
        let w2 = w.clone();
        let t = std::thread::spawn(move || matches!(w2.admit(0, &AtomicBool::new(false)), Ok(Step::Plan)));
        std::thread::sleep(Duration::from_millis(30));
        assert!(!t.is_finished());
        assert!(matches!(w.admit(2, &stop), Ok(Step::Plan)));
        // A fragment being planned is neither resident nor plannable twice.
        assert!(w.resident(2).is_none());
        w.planned(2, Vec::new(), Vec::new());
        assert!(t.join().unwrap());
        w.planned(0, Vec::new(), Vec::new());
        assert!(matches!(w.admit(2, &stop), Ok(Step::Ready(_))));
        w.release(2, 1);
        assert!(w.resident(2).is_some());
        w.release(2, 1);
        assert!(w.resident(2).is_none());
        assert!(w.admit(2, &stop).is_err(), "evicted fragments are not reloaded");
        // A failed plan gives the turn back: the fragment can be planned again.
        let w = WindowCache::new(vec![0], vec![1], MIN_EXTENT);
        assert!(matches!(w.admit(0, &stop), Ok(Step::Plan)));
        w.abandon(0);
        assert!(matches!(w.admit(0, &stop), Ok(Step::Plan)));
        stop.store(true, Ordering::Release);
        assert!(matches!(w.admit(0, &stop), Err(LoaderError::Stopped)));
    }

    #[test]
    fn loading_ahead_takes_the_next_turn_only() {
        // Admission order: fragment 2, then 0 (fragment 1 is never needed).
        let w = WindowCache::new(vec![1, usize::MAX, 0], vec![3, 0, 2], MIN_EXTENT);
        let stop = AtomicBool::new(false);
        assert_eq!(w.claim_turn(), Some(2));
        assert_eq!(w.claim_turn(), None, "fragment 2 is being planned");
        // No room now: the turn goes back, and the batch that needs fragment 2 plans it.
        w.abandon(2);
        assert!(matches!(w.admit(2, &stop), Ok(Step::Plan)));
        w.planned(2, Vec::new(), Vec::new());
        assert_eq!(w.claim_turn(), Some(0));
        w.planned(0, Vec::new(), Vec::new());
        assert!(matches!(w.admit(0, &stop), Ok(Step::Ready(_))), "loaded ahead, resident for its batch");
        assert_eq!(w.claim_turn(), None, "every needed fragment was admitted");
        assert!(w.take_pending_of(0, 8).is_empty());
    }

    #[test]
    fn sweep_counts_overlapping_fragments() {
        // f0 spans batches 0..=1, f1 1..=2, f2 3..=3.
        assert_eq!(sweep_peak(&[0, 1, 3], &[1, 2, 3], &[10, 20, 5], 4), 30);
        assert_eq!(sweep_peak(&[], &[], &[], 0), 0);
    }
}
