//! Block mode: the units ([`Unit`]) a rank's batches read, worked out a window at a time as
//! the batches reach it, so what an epoch holds grows with a window, not with the dataset.
//!
//! When a worker needs batch `i` and it is not scheduled yet, the schedule walks this rank's
//! batches from the first unscheduled one through the last that overlaps the window of
//! batch `i` and the window after it (so that the next window can load ahead), and through
//! the end of any further window a straddling batch reaches. Every batch of a window is thus
//! scheduled together, so each unit's `uses` (the rows its batches copy out) are complete when
//! it is registered, and the window cache can release it after its last row. At least
//! [`SCHEDULE_AHEAD`] batches are scheduled at once (a rank of many ranks meets a new window
//! at every batch), and the rows of a lazy catalog are located through the fragment tree that
//! many batches at a time (one round trip per level for all of them).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::{Unit, WindowCache};
use crate::catalog::Catalog;
use crate::error::{LoaderError, Result};
use crate::sampler::Plan;

/// Batches scheduled at least, from the one asked for; and batches whose fragments one tree
/// lookup finds together.
const SCHEDULE_AHEAD: usize = 8;

/// Where this rank's batches lie in the plan.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Positions {
    /// First global position this epoch serves.
    pub(crate) start: u64,
    pub(crate) global_batch: u64,
    pub(crate) rank: usize,
    pub(crate) batch_size: usize,
    /// This rank's batches.
    pub(crate) total: usize,
    /// Rows of the version: positions at or past it are padding.
    pub(crate) rows: u64,
}

impl Positions {
    /// Global position of row `j` of batch `i`.
    pub(crate) fn of(&self, i: usize, j: usize) -> u64 {
        self.start + i as u64 * self.global_batch + (self.rank * self.batch_size + j) as u64
    }

    /// The last batch with a position below `end` (0 when none is).
    fn last_batch_before(&self, end: u64) -> usize {
        let first = self.of(0, 0);
        if end <= first || self.total == 0 {
            return 0;
        }
        let i = (end - 1 - first) / self.global_batch;
        usize::try_from(i).unwrap_or(usize::MAX).min(self.total - 1)
    }
}

/// The schedule of one epoch's block windows on one rank.
#[derive(Debug)]
pub(crate) struct BlockSchedule {
    at: Positions,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The first batch not scheduled yet.
    next_batch: usize,
    /// The id the next unit gets.
    next_unit: usize,
    /// Per scheduled batch not yet taken: the unit of each row (`None` for padding).
    batches: HashMap<usize, Vec<Option<usize>>>,
}

impl BlockSchedule {
    pub(crate) fn new(at: Positions) -> Self {
        Self { at, state: Mutex::default() }
    }

    /// The unit of each row of batch `i` (`None` for padding), scheduling the windows it
    /// reaches first (their units are then registered with `window`). Each batch's units are
    /// handed out once.
    ///
    /// # Errors
    /// Lookup errors of a lazy catalog; `WorkerPanicked` for a batch taken twice.
    pub(crate) fn take(
        &self,
        i: usize,
        plan: &Plan,
        catalog: &Catalog,
        window: &WindowCache,
    ) -> Result<Vec<Option<usize>>> {
        let mut s = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if s.next_batch <= i {
            self.schedule(&mut s, i, plan, catalog, window)?;
        }
        s.batches.remove(&i).ok_or_else(|| LoaderError::WorkerPanicked(format!("batch {i} taken twice")))
    }

    /// Schedules from the first unscheduled batch through every batch of the window of batch
    /// `i` and of the window after it, and through batch `i + SCHEDULE_AHEAD - 1` (and of any
    /// further window a scheduled batch reaches).
    fn schedule(&self, s: &mut State, i: usize, plan: &Plan, catalog: &Catalog, window: &WindowCache) -> Result<()> {
        let at = self.at;
        let mut target = i;
        let mut reached = None::<u64>;
        // Extends the target through the end of window `k`.
        let through = |target: &mut usize, k_end: u64| *target = (*target).max(at.last_batch_before(k_end));
        let last_real = (0..at.batch_size).rev().map(|j| at.of(i, j)).find(|&p| p < at.rows);
        if let Some((k, range)) = last_real.and_then(|p| plan.block_window(p)) {
            through(&mut target, range.end);
            if range.end < at.rows
                && let Some((_, next)) = plan.block_window(range.end)
            {
                through(&mut target, next.end);
            }
            reached = Some(k);
        }
        // At least the next SCHEDULE_AHEAD batches: a rank of many meets a new window at
        // every batch, and its next batches' fragments are found in one tree lookup.
        target = target.max(i + SCHEDULE_AHEAD - 1);
        let mut units: Vec<Unit> = Vec::new();
        let mut ids: HashMap<(u64, usize), usize> = HashMap::new();
        // The rows of the batches found in the last lookup and not scheduled yet, in order.
        let mut found: VecDeque<Vec<u64>> = VecDeque::new();
        while s.next_batch <= target && s.next_batch < at.total {
            let b = s.next_batch;
            if found.is_empty() {
                // A lazy catalog finds the fragments of the next batches together (one round
                // trip per tree level for all of them).
                let end = (b + SCHEDULE_AHEAD).min(target + 1).min(at.total);
                for n in b..end {
                    let mut rows = Vec::with_capacity(at.batch_size);
                    if !plan.batch_into(n, &mut rows) {
                        return Err(LoaderError::WorkerPanicked(format!("no batch {n}")));
                    }
                    found.push_back(rows);
                }
                let all: Vec<u64> = found.iter().flatten().copied().collect();
                catalog.find(&all)?;
            }
            let rows = found.pop_front().ok_or_else(|| LoaderError::WorkerPanicked(format!("no batch {b}")))?;
            let mut of_rows = Vec::with_capacity(rows.len());
            for (j, &row) in rows.iter().enumerate() {
                let pos = at.of(b, j);
                if pos >= at.rows {
                    of_rows.push(None); // padding: read directly, not through the window
                    continue;
                }
                let (k, range) = plan
                    .block_window(pos)
                    .ok_or_else(|| LoaderError::WorkerPanicked("a block plan without windows".into()))?;
                if reached.is_none_or(|r| k > r) {
                    through(&mut target, range.end);
                    reached = Some(k);
                }
                let (entry, phys) = catalog
                    .locate(row)?
                    .ok_or_else(|| LoaderError::WorkerPanicked(format!("row {row} is outside the dataset")))?;
                let local = *ids.entry((k, entry.index)).or_insert_with(|| {
                    units.push(Unit {
                        frag: entry.index,
                        entry: entry.clone(),
                        needed: Vec::new(),
                        first_need: b,
                        uses: 0,
                    });
                    units.len() - 1
                });
                let unit = &mut units[local];
                unit.needed.push(phys);
                unit.uses += 1;
                of_rows.push(Some(s.next_unit + local));
            }
            s.batches.insert(b, of_rows);
            s.next_batch += 1;
        }
        for u in &mut units {
            u.needed.sort_unstable();
            u.needed.dedup();
        }
        s.next_unit += units.len();
        window.register(units);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_batch_before_a_position() {
        // Rank 1 of 2, batches of 4: rank 1's batch i starts at 8i + 4.
        let at = Positions { start: 0, global_batch: 8, rank: 1, batch_size: 4, total: 10, rows: 80 };
        assert_eq!(at.of(2, 1), 21);
        assert_eq!(at.last_batch_before(4), 0, "no batch starts before 4");
        assert_eq!(at.last_batch_before(5), 0);
        assert_eq!(at.last_batch_before(13), 1);
        assert_eq!(at.last_batch_before(12), 0);
        assert_eq!(at.last_batch_before(10_000), 9, "clamped to the last batch");
        // Resumed after 3 global batches.
        let at = Positions { start: 24, ..at };
        assert_eq!(at.last_batch_before(29), 0);
        assert_eq!(at.last_batch_before(37), 1);
    }
}
