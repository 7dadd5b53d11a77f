//! The block-shuffle window: the pages of the fragments the current batches draw from.
//!
//! In [`ShuffleMode::Block`](crate::ShuffleMode::Block) an epoch visits windows of blocks of
//! rows one after another and shuffles rows only within a window. The unit of loading
//! ([`Unit`]) is one fragment's part of one window: the pages this rank needs from it for
//! that window's rows (where fragments hold equal row counts, a block is a fragment and a
//! unit a whole fragment). Units are worked out a window at a time as batches reach them
//! (`schedule`), so nothing here grows with the dataset. Each unit is read **once per
//! epoch**, with large ranged reads: when the first batch that needs it arrives, its pages
//! are laid out in extents (`extents`: large buffers recycled from unit to unit and epoch to
//! epoch), one job per extent, each job one ranged read of neighbouring pages straight into
//! its extent, verified there (compressed pages are decoded into it). Any worker whose batch
//! waits for a loading unit runs that unit's pending jobs (or an earlier unit's) instead of
//! sleeping, so a window loads on every worker at once. Later batches copy rows out of the
//! extents, each row once, into their batch buffers; the unit's extents go back to the pool
//! when the last of its rows has been copied (an exact count: a window's batches are all
//! scheduled together).
//!
//! Memory stays bounded because units are *admitted in the order batches first need them*
//! and each admission waits for its extents within the `Shuffle` share, which holds about
//! two windows (the one being read and the next, loading ahead).

mod extents;
mod schedule;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

#[cfg(test)]
use extents::MIN_EXTENT;
pub(crate) use extents::{Extent, ExtentPool, extent_len, extent_size};
pub(crate) use schedule::{BlockSchedule, Positions};

use crate::catalog::{FileMeta, FragmentEntry};
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
    /// The unit ([`Unit`]) the job loads.
    pub(crate) unit: usize,
    /// The data file's position in its fragment, and its key.
    pub(crate) fi: usize,
    pub(crate) key: String,
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
    /// Admission position (unit) whose turn it is.
    turn: usize,
    slots: HashMap<usize, Slot>,
    /// Units registered and not gone yet, by id.
    units: BTreeMap<usize, Arc<Unit>>,
    /// Units registered so far: ids `0..registered`.
    registered: usize,
}

/// What the window loads as one piece: the pages this rank needs from one fragment for the
/// rows of one block window (the same fragment in another window is another unit). Units are
/// numbered in admission order, the order batches first need them.
#[derive(Debug)]
pub(crate) struct Unit {
    /// The fragment, and its index in the catalog (its file metadata's key).
    pub(crate) frag: usize,
    pub(crate) entry: Arc<FragmentEntry>,
    /// Physical rows this rank reads from it, ascending, once each.
    pub(crate) needed: Vec<u64>,
    /// First batch needing it.
    pub(crate) first_need: usize,
    /// Real rows of this rank's batches that it serves.
    pub(crate) uses: u64,
}

/// The window cache of one epoch on one rank.
#[derive(Debug)]
pub(crate) struct WindowCache {
    /// Regular extent length of this epoch.
    extent: u64,
    state: Mutex<State>,
    changed: Condvar,
}

/// What admission tells the caller to do next.
#[derive(Debug)]
pub(crate) enum Step {
    /// The unit is resident.
    Ready(Arc<FragmentData>),
    /// This caller holds the turn: it lays the unit out, takes its extents and calls
    /// [`WindowCache::planned`] (or [`WindowCache::abandon`] on failure).
    Plan,
    /// Run this job (of this or an earlier unit), then call [`WindowCache::finished`]
    /// (or [`WindowCache::requeue`] on failure).
    Run(Box<Job>),
    /// The unit is planned (or being planned by another caller) and still loading: only
    /// when the caller asked for a plan, not for the data.
    Planned,
}

impl WindowCache {
    /// An empty window whose extents are `extent` long; units come by
    /// [`WindowCache::register`].
    pub(crate) fn new(extent: u64) -> Self {
        let state = State { turn: 0, slots: HashMap::new(), units: BTreeMap::new(), registered: 0 };
        Self { extent, state: Mutex::new(state), changed: Condvar::new() }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds units after those registered (in admission order; units without uses are never
    /// admitted and are not kept); returns the id of the first.
    pub(crate) fn register(&self, units: Vec<Unit>) -> usize {
        let mut s = self.lock();
        let first = s.registered;
        for (i, u) in units.into_iter().enumerate() {
            s.units.insert(first + i, Arc::new(u));
            s.registered += 1;
        }
        drop(s);
        self.changed.notify_all();
        first
    }

    /// A registered unit not gone yet.
    pub(crate) fn unit(&self, unit: usize) -> Result<Arc<Unit>> {
        self.lock()
            .units
            .get(&unit)
            .cloned()
            .ok_or_else(|| LoaderError::WorkerPanicked(format!("unit {unit} is not in the block window")))
    }

    /// `unit` and the units after it in admission order, `n` in all (fewer at the end of
    /// those registered).
    pub(crate) fn upcoming(&self, unit: usize, n: usize) -> Vec<Arc<Unit>> {
        self.lock().units.range(unit..).take(n).map(|(_, u)| u.clone()).collect()
    }

    /// The regular extent length of this epoch.
    pub(crate) fn extent(&self) -> u64 {
        self.extent
    }

    /// The next step towards having `unit` resident: it is, or the caller plans it (its
    /// turn), or the caller runs a pending job (of `unit`, else of the earliest loading
    /// unit) instead of waiting. With `plan_only`, a unit planned and loading is
    /// [`Step::Planned`]: a caller plans every unit of its batch first, so that their reads
    /// go out together, then waits for their data. Callers take the units of one batch in
    /// ascending id (admission order).
    ///
    /// # Errors
    /// [`LoaderError::Stopped`] on stop; [`LoaderError::Config`] for a unit not registered
    /// or gone before its last use (a bug).
    pub(crate) fn admit(&self, unit: usize, plan_only: bool, stopped: &AtomicBool) -> Result<Step> {
        let pos = unit;
        let mut s = self.lock();
        if pos >= s.registered {
            return Err(LoaderError::config(format!("unit {unit} is not in this rank's block schedule")));
        }
        loop {
            if stopped.load(Ordering::Acquire) {
                return Err(LoaderError::Stopped);
            }
            let turn = s.turn;
            match s.slots.get_mut(&unit) {
                Some(Slot::Ready { data, .. }) => return Ok(Step::Ready(data.clone())),
                Some(Slot::Loading(_) | Slot::Planning) if plan_only => return Ok(Step::Planned),
                Some(Slot::Loading(l)) if !l.pending.is_empty() => {
                    if let Some(job) = l.pending.pop_front() {
                        return Ok(Step::Run(Box::new(job)));
                    }
                }
                None if turn == pos => {
                    s.slots.insert(unit, Slot::Planning);
                    return Ok(Step::Plan);
                }
                None if turn > pos => {
                    return Err(LoaderError::config(format!("unit {unit} was evicted before its last use")));
                }
                Some(_) | None => {}
            }
            // Help: the earliest loading unit's next job.
            let earliest = s
                .slots
                .iter()
                .filter(|(_, slot)| matches!(slot, Slot::Loading(l) if !l.pending.is_empty()))
                .map(|(&u, _)| u)
                .min();
            if let Some(Slot::Loading(l)) = earliest.and_then(|u| s.slots.get_mut(&u))
                && let Some(job) = l.pending.pop_front()
            {
                return Ok(Step::Run(Box::new(job)));
            }
            s = self.changed.wait_timeout(s, Duration::from_millis(50)).map_or_else(|e| e.into_inner().0, |r| r.0);
        }
    }

    /// Publishes a planned unit (its page layout and the jobs filling its extents; ready at
    /// once without jobs) and passes the turn on.
    pub(crate) fn planned(&self, unit: usize, files: Vec<std::result::Result<Vec<PageMap>, Fault>>, jobs: Vec<Job>) {
        let mut s = self.lock();
        let remaining = s.units.get(&unit).map_or(0, |u| u.uses);
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
        s.slots.insert(unit, slot);
        s.turn += 1;
        drop(s);
        self.changed.notify_all();
    }

    /// Records a finished job (its extent filled, the faults of its pages); the unit is
    /// ready after its last job.
    pub(crate) fn finished(&self, job: Job, faults: Vec<PageFault>) {
        let mut s = self.lock();
        let unit = job.unit;
        let remaining = s.units.get(&unit).map_or(0, |u| u.uses);
        let Some(Slot::Loading(l)) = s.slots.get_mut(&unit) else { return };
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
            let files = std::mem::take(&mut l.files);
            let extents = std::mem::take(&mut l.extents).into_iter().flatten().collect();
            s.slots.insert(unit, Slot::Ready { data: Arc::new(FragmentData { files, extents }), remaining });
        }
        drop(s);
        self.changed.notify_all();
    }

    /// Takes the turn to plan the next unit in admission order ahead of any batch that needs
    /// it (loading ahead): `Some(unit)` when it is registered and not planned yet; the caller
    /// then plans it ([`WindowCache::planned`]) or gives the turn back
    /// ([`WindowCache::abandon`]).
    pub(crate) fn claim_turn(&self) -> Option<usize> {
        let mut s = self.lock();
        let unit = s.turn;
        if unit >= s.registered || s.slots.contains_key(&unit) {
            return None;
        }
        s.slots.insert(unit, Slot::Planning);
        Some(unit)
    }

    /// Up to `max` pending jobs of unit `unit`.
    pub(crate) fn take_pending_of(&self, unit: usize, max: usize) -> Vec<Job> {
        let mut s = self.lock();
        let Some(Slot::Loading(l)) = s.slots.get_mut(&unit) else { return Vec::new() };
        let n = max.min(l.pending.len());
        l.pending.drain(..n).collect()
    }

    /// Up to `max` more pending jobs, of the earliest loading units first: a worker on an
    /// object store runs them together with the job [`WindowCache::admit`] gave it, so that
    /// their range GETs share the round trip instead of waiting for one another.
    pub(crate) fn take_pending(&self, max: usize) -> Vec<Job> {
        let mut s = self.lock();
        let mut loading: Vec<usize> = s
            .slots
            .iter()
            .filter(|(_, slot)| matches!(slot, Slot::Loading(l) if !l.pending.is_empty()))
            .map(|(&u, _)| u)
            .collect();
        loading.sort_unstable();
        let mut jobs = Vec::new();
        for u in loading {
            let Some(Slot::Loading(l)) = s.slots.get_mut(&u) else { continue };
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
        if let Some(Slot::Loading(l)) = s.slots.get_mut(&job.unit) {
            l.pending.push_front(job);
        }
        drop(s);
        self.changed.notify_all();
    }

    /// Gives the turn back after a failed plan (the epoch is failing; waiters see the stop)
    /// or a load ahead that found no room (the unit is planned when a batch needs it).
    pub(crate) fn abandon(&self, unit: usize) {
        let mut s = self.lock();
        s.slots.remove(&unit);
        drop(s);
        self.changed.notify_all();
    }

    /// Whether `unit` is resident.
    #[cfg(test)]
    fn resident(&self, unit: usize) -> bool {
        matches!(self.lock().slots.get(&unit), Some(Slot::Ready { .. }))
    }

    /// Counts `n` real rows of `unit` as copied; the unit leaves the cache after its last.
    pub(crate) fn release(&self, unit: usize, n: u64) {
        let mut s = self.lock();
        let done = match s.slots.get_mut(&unit) {
            Some(Slot::Ready { remaining, .. }) => {
                *remaining = remaining.saturating_sub(n);
                *remaining == 0
            }
            _ => false,
        };
        let gone = if done { (s.slots.remove(&unit), s.units.remove(&unit)) } else { (None, None) };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Units of fragments `frags` in that admission order, each serving `uses` rows, first
    /// needed by batch `first`.
    fn units(frags: &[usize], uses: u64, first: usize) -> Vec<Unit> {
        let unit = |f: usize| Unit {
            frag: f,
            entry: Arc::new(FragmentEntry::empty(f)),
            needed: Vec::new(),
            first_need: first,
            uses,
        };
        frags.iter().map(|&f| unit(f)).collect()
    }

    #[test]
    fn upcoming_units_follow_registration() {
        let w = WindowCache::new(MIN_EXTENT);
        assert_eq!(w.register(units(&[3, 0], 1, 0)), 0);
        assert_eq!(w.register(units(&[2], 1, 4)), 2);
        let frags = |v: Vec<Arc<Unit>>| v.iter().map(|u| u.frag).collect::<Vec<_>>();
        assert_eq!(frags(w.upcoming(0, 2)), vec![3, 0]);
        assert_eq!(frags(w.upcoming(1, 5)), vec![0, 2]);
        assert!(w.upcoming(3, 3).is_empty(), "nothing is registered past unit 2");
        assert_eq!(w.unit(2).unwrap().first_need, 4);
        assert!(w.unit(3).is_err());
    }

    #[test]
    fn units_are_admitted_in_order_and_released_after_their_last_row() {
        let w = Arc::new(WindowCache::new(MIN_EXTENT));
        let stop = AtomicBool::new(false);
        w.register(units(&[2, 0], 2, 0));
        assert!(w.admit(2, false, &stop).is_err(), "unit 2 is not registered");
        // Unit 1 must wait for unit 0's admission.
        let w2 = w.clone();
        let t = std::thread::spawn(move || matches!(w2.admit(1, false, &AtomicBool::new(false)), Ok(Step::Plan)));
        std::thread::sleep(Duration::from_millis(30));
        assert!(!t.is_finished());
        assert!(matches!(w.admit(0, false, &stop), Ok(Step::Plan)));
        // A unit being planned is neither resident nor plannable twice.
        assert!(!w.resident(0));
        w.planned(0, Vec::new(), Vec::new());
        assert!(t.join().unwrap());
        w.planned(1, Vec::new(), Vec::new());
        assert!(matches!(w.admit(0, false, &stop), Ok(Step::Ready(_))));
        w.release(0, 1);
        assert!(w.resident(0));
        w.release(0, 1);
        assert!(!w.resident(0));
        assert!(w.unit(0).is_err(), "a unit leaves with its last row");
        assert!(w.admit(0, false, &stop).is_err(), "evicted units are not reloaded");
        // A failed plan gives the turn back: the unit can be planned again.
        let w = WindowCache::new(MIN_EXTENT);
        w.register(units(&[0], 1, 0));
        assert!(matches!(w.admit(0, false, &stop), Ok(Step::Plan)));
        w.abandon(0);
        assert!(matches!(w.admit(0, false, &stop), Ok(Step::Plan)));
        stop.store(true, Ordering::Release);
        assert!(matches!(w.admit(0, false, &stop), Err(LoaderError::Stopped)));
    }

    #[test]
    fn a_plan_only_admission_moves_on_once_a_unit_is_planned() {
        let w = Arc::new(WindowCache::new(MIN_EXTENT));
        let stop = AtomicBool::new(false);
        w.register(units(&[0, 1], 1, 0));
        // Not its turn: a plan-only caller waits for unit 0's plan like any other.
        let w2 = w.clone();
        let t = std::thread::spawn(move || matches!(w2.admit(1, true, &AtomicBool::new(false)), Ok(Step::Plan)));
        std::thread::sleep(Duration::from_millis(30));
        assert!(!t.is_finished());
        assert!(matches!(w.admit(0, true, &stop), Ok(Step::Plan)), "its turn: plan it");
        assert!(matches!(w.admit(0, true, &stop), Ok(Step::Planned)), "being planned by another caller");
        w.planned(0, Vec::new(), Vec::new());
        assert!(t.join().unwrap(), "the turn passed on once unit 0 was planned");
        assert!(matches!(w.admit(0, true, &stop), Ok(Step::Ready(_))), "ready without jobs");
    }

    #[test]
    fn loading_ahead_takes_the_next_registered_turn_only() {
        let w = WindowCache::new(MIN_EXTENT);
        let stop = AtomicBool::new(false);
        assert_eq!(w.claim_turn(), None, "nothing registered yet");
        w.register(units(&[2, 0], 3, 0));
        assert_eq!(w.claim_turn(), Some(0));
        assert_eq!(w.claim_turn(), None, "unit 0 is being planned");
        // No room now: the turn goes back, and the batch that needs unit 0 plans it.
        w.abandon(0);
        assert!(matches!(w.admit(0, false, &stop), Ok(Step::Plan)));
        w.planned(0, Vec::new(), Vec::new());
        assert_eq!(w.claim_turn(), Some(1));
        w.planned(1, Vec::new(), Vec::new());
        assert!(matches!(w.admit(1, false, &stop), Ok(Step::Ready(_))), "loaded ahead, resident for its batch");
        assert_eq!(w.claim_turn(), None, "every registered unit was admitted");
        w.register(units(&[5], 1, 9));
        assert_eq!(w.claim_turn(), Some(2), "a later window's unit can load ahead once registered");
        assert!(w.take_pending_of(1, 8).is_empty());
    }
}
