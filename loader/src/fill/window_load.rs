//! Block mode: bringing a batch's window fragments in. The worker whose turn it is lays a
//! fragment out (every page this rank needs from it, in file order, packed into extents
//! taken from the loader's pool within the `Shuffle` share) and publishes one job per extent;
//! any worker waiting for the fragment runs jobs: one ranged read of neighbouring pages
//! straight into the extent (a positioned read locally, a range GET on an object store),
//! checked in place, or staged and decoded into it for compressed pages. On an object store a
//! worker takes every pending job (up to `max_requests_in_flight`) and sends their GETs
//! together, so a window's fragments load in about one round trip, not one per extent.

use std::ops::Range;
use std::sync::Arc;

use tessera::Codec;

use super::{Worker, verify};
use crate::catalog::FileMeta;
use crate::error::{LoaderError, Result, from_format};
use crate::source::{Dest, RangeRequest};
use crate::window::{
    Fault, FragmentData, Job, PageFault, PageIn, PageLoc, PageMap, Run, Step, WindowCache, extent_len,
};

/// Neighbouring pages closer than this share one read (the gap is read and ignored); blocks
/// are 64-byte aligned, so pages of one column chunk are at most 63 bytes apart.
const RUN_GAP: u64 = 4 << 10;
/// Fragments after the one being planned whose files open with its own, when its own are not
/// open yet, on an object store (their indexes then wait in the catalog's cache, within the
/// metadata share).
const OPEN_AHEAD: usize = 4;

/// A data file's pages laid out in extents: (extent lengths, runs per extent, where each
/// page's raw bytes will be: column position, page, place).
type Layout = (Vec<u64>, Vec<Vec<Run>>, Vec<(usize, usize, PageLoc)>);

/// Lays out the pages of one data file in extents: (extent lengths, runs per extent, where
/// each page's raw bytes will be). Pages go in file order; a run grows while the next page
/// is near, of the same kind (stored as is, or to decode) and fits the extent; an extent is
/// closed when the next page does not fit; a page larger than the regular extent gets an
/// extent of its own. A run of pages to decode stays within `stage` stored bytes (one page
/// at least), the staging buffer the worker reads it into.
fn layout(meta: &FileMeta, pages: &[(usize, usize)], regular: u64, stage: u64) -> Layout {
    let mut sorted: Vec<(usize, usize)> = pages.to_vec();
    sorted.sort_by_key(|&(pos, p)| meta.chunks[pos].pages()[p].block.offset);
    let mut lens: Vec<u64> = Vec::new();
    let mut runs: Vec<Vec<Run>> = Vec::new();
    let mut locs = Vec::with_capacity(sorted.len());
    let mut used = 0u64; // bytes used in the current (last) extent
    for (pos, p) in sorted {
        let block = meta.chunks[pos].pages()[p].block;
        let direct = block.codec == Codec::None;
        let space = if direct { block.stored_len } else { block.raw_len };
        // Extend the last run?
        let extend = lens.last().is_some_and(|&cap| {
            runs.last().and_then(|r| r.last()).is_some_and(|run| {
                let gap = block.offset.saturating_sub(run.range.end);
                block.offset >= run.range.end
                    && gap <= RUN_GAP
                    && run.direct == direct
                    && if direct {
                        used + gap + space <= cap
                    } else {
                        used + space <= cap && block.offset + block.stored_len - run.range.start <= stage
                    }
            })
        });
        if extend {
            let Some(run) = runs.last_mut().and_then(|r| r.last_mut()) else { continue };
            let at = if direct { run.at + (block.offset - run.range.start) as usize } else { used as usize };
            used = if direct { (at as u64) + space } else { used + space };
            run.range.end = block.offset + block.stored_len;
            run.pages.push(PageIn { pos, page: p, at });
            locs.push((pos, p, PageLoc::new(lens.len() - 1, at, block.raw_len as usize)));
            continue;
        }
        // A new run: in the current extent if it fits, else in a new one.
        if lens.last().is_none_or(|&cap| used + space > cap) {
            lens.push(extent_len(space, regular));
            runs.push(Vec::new());
            used = 0;
        }
        let at = used as usize;
        used += space;
        let run = Run { range: block.range(), direct, at, pages: vec![PageIn { pos, page: p, at }] };
        if let Some(r) = runs.last_mut() {
            r.push(run);
        }
        locs.push((pos, p, PageLoc::new(lens.len() - 1, at, block.raw_len as usize)));
    }
    (lens, runs, locs)
}

/// Records a page's data fault; any other error fails the job.
fn page_fault(faults: &mut Vec<PageFault>, fi: usize, pg: &PageIn, r: Result<()>) -> Result<()> {
    match r {
        Ok(()) => Ok(()),
        Err(e) => match Fault::of(&e) {
            Some(fault) => {
                faults.push((fi, pg.pos, pg.page, fault));
                Ok(())
            }
            None => Err(e),
        },
    }
}

/// Hands out an extent's bytes in ascending, disjoint pieces.
struct Carver<'b> {
    /// The part not yet handed out, which starts at `base` in the extent.
    rest: &'b mut [u8],
    base: usize,
}

impl<'b> Carver<'b> {
    /// The extent's bytes `at..at + len`.
    fn take(&mut self, at: usize, len: usize) -> Result<&'b mut [u8]> {
        let skip = at.checked_sub(self.base).filter(|&s| s + len <= self.rest.len());
        let skip = skip.ok_or_else(|| LoaderError::WorkerPanicked("a run outside its extent".into()))?;
        let (_, tail) = std::mem::take(&mut self.rest).split_at_mut(skip);
        let (dst, tail) = tail.split_at_mut(len);
        self.rest = tail;
        self.base = at + len;
        Ok(dst)
    }
}

/// The extent bytes a page's raw bytes occupy.
fn slot(ext: &mut [u8], at: usize, len: u64) -> Result<&mut [u8]> {
    ext.get_mut(at..at + len as usize).ok_or_else(|| LoaderError::WorkerPanicked("a page outside its extent".into()))
}

impl Worker {
    /// Brings a batch's units (ascending ids) into the window: every one planned first, in
    /// admission order, then each resident, this worker running pending jobs meanwhile. A
    /// batch of a rank of many draws from many fragments a few rows each; planned one after
    /// another, each unit's read would wait for the one before it (a round trip each), where
    /// planned together their range GETs go out in one wave.
    pub(super) fn admit_all(&mut self, window: &WindowCache, units: &[usize]) -> Result<Vec<Arc<FragmentData>>> {
        // Their files' indexes first, together and outside the turn: the worker whose turn it
        // is then lays its units out from the cache, while later batches' workers open theirs
        // at the same time (a failure is met again, and reported, by the unit's plan).
        let entries: Vec<_> = units.iter().filter_map(|&u| window.unit(u).ok()).map(|u| u.entry.clone()).collect();
        drop(self.open_files(&entries));
        for &u in units {
            self.admit(window, u, true)?;
        }
        let mut held = Vec::with_capacity(units.len());
        for &u in units {
            match self.admit(window, u, false)? {
                Some(d) => held.push(d),
                None => return Err(LoaderError::WorkerPanicked(format!("unit {u} admitted without its data"))),
            }
        }
        Ok(held)
    }

    /// Brings fragment `f` into the window: resident, or planned by this worker (its turn),
    /// running pending jobs while it loads; with `plan_only`, `None` once the unit is planned
    /// (by whoever).
    fn admit(&mut self, window: &WindowCache, f: usize, plan_only: bool) -> Result<Option<Arc<FragmentData>>> {
        let sh = self.sh.clone();
        loop {
            match window.admit(f, plan_only, &sh.stopped)? {
                Step::Ready(d) => return Ok(Some(d)),
                Step::Planned => return Ok(None),
                Step::Plan => match self.plan_fragment(window, f, false) {
                    Ok(Some((files, jobs))) => window.planned(f, files, jobs),
                    Ok(None) => window.abandon(f), // not reached: a plan that waits
                    Err(e) => {
                        window.abandon(f);
                        return Err(e);
                    }
                },
                Step::Run(job) => {
                    // On an object store, more pending jobs join this one: their range GETs
                    // go out together (at most `max_requests_in_flight`), one round trip for
                    // all. Locally, reads are positioned and cost no round trip.
                    let mut jobs = vec![*job];
                    if !sh.fetcher.is_local() {
                        jobs.extend(window.take_pending(sh.set.max_requests.saturating_sub(1)));
                    }
                    self.finish_jobs(window, jobs)?;
                }
            }
        }
    }

    /// Loads the next fragment in admission order before a batch needs it, when its
    /// extents fit in the `Shuffle` share now: plans it and runs its jobs. Without this, a
    /// fragment would start loading only when a claimed batch needs it, and every fragment's
    /// round trips and transfer would stall the batches waiting for it; the share holds one
    /// fragment more than the window's sweep peak (when the budget allows) for this.
    pub(crate) fn load_ahead(&mut self, window: &WindowCache) -> Result<()> {
        let Some(f) = window.claim_turn() else { return Ok(()) };
        match self.plan_fragment(window, f, true) {
            Ok(Some((files, jobs))) => window.planned(f, files, jobs),
            Ok(None) => {
                window.abandon(f);
                return Ok(());
            }
            Err(e) => {
                window.abandon(f);
                return Err(e);
            }
        }
        loop {
            let jobs = window.take_pending_of(f, self.sh.set.max_requests);
            if jobs.is_empty() {
                return Ok(());
            }
            self.finish_jobs(window, jobs)?;
        }
    }

    /// Runs `jobs` ([`Worker::run_jobs`]) and reports each finished to the window; on an
    /// error every job goes back to the window's queue.
    fn finish_jobs(&mut self, window: &WindowCache, mut jobs: Vec<Job>) -> Result<()> {
        match self.run_jobs(&mut jobs) {
            Ok(faults) => {
                for (job, faults) in jobs.into_iter().zip(faults) {
                    window.finished(job, faults);
                }
                Ok(())
            }
            Err(e) => {
                for job in jobs {
                    window.requeue(job);
                }
                Err(e)
            }
        }
    }

    /// Lays out every page unit `u` needs (of its fragment, for this rank's rows of its
    /// window) in extents taken from the pool (waiting for them within the `Shuffle` share,
    /// or with `ahead` not waiting: `None` when they do not fit now) and makes one job per
    /// extent.
    #[allow(clippy::type_complexity)]
    fn plan_fragment(
        &mut self,
        window: &WindowCache,
        u: usize,
        ahead: bool,
    ) -> Result<Option<(Vec<std::result::Result<Vec<PageMap>, Fault>>, Vec<Job>)>> {
        let sh = self.sh.clone();
        let unit = window.unit(u)?;
        let (f, entry, needed) = (unit.frag, &unit.entry, &unit.needed);
        let stage = (sh.allowance / 2).max(1);
        let mut files = Vec::with_capacity(entry.files.len());
        let mut lens: Vec<u64> = Vec::new();
        let mut plans: Vec<(usize, Arc<FileMeta>, Vec<Run>)> = Vec::new();
        // On an object store, a fragment whose files are not open yet opens them together with
        // those of the next few in admission order: one footer and one index round trip for
        // all of them, not two ahead of every fragment's data. The fragments after it then find
        // theirs open.
        let unopened = (0..entry.files.len()).any(|fi| !sh.catalog.has_meta(f, fi));
        let also = if unopened { OPEN_AHEAD } else { 0 };
        let upcoming: Vec<_> = window.upcoming(u, 1 + also).into_iter().map(|u| u.entry.clone()).collect();
        let mut opened = self.open_files(&upcoming);
        for fi in 0..entry.files.len() {
            let opened = opened.remove(&(f, fi));
            let meta =
                match opened.unwrap_or_else(|| sh.catalog.file_meta(entry, fi, &sh.acct, sh.meta_cap, &sh.stopped)) {
                    Ok(m) => m,
                    Err(e) => match Fault::of(&e) {
                        Some(fault) => {
                            files.push(Err(fault));
                            continue;
                        }
                        None => return Err(e),
                    },
                };
            let mut pages: Vec<(usize, usize)> = Vec::new();
            for (pos, chunk) in meta.chunks.iter().enumerate() {
                let mut ps: Vec<usize> = needed.iter().map(|&r| chunk.page_of(r)).collect();
                ps.dedup();
                ps.sort_unstable();
                ps.dedup();
                pages.extend(ps.into_iter().map(|p| (pos, p)));
            }
            let (file_lens, file_runs, locs) = layout(&meta, &pages, window.extent(), stage);
            let mut maps: Vec<PageMap> = meta.chunks.iter().map(|_| PageMap::new()).collect();
            let base = lens.len();
            for (pos, p, loc) in locs {
                maps[pos].insert(p, Ok(loc.offset_extent(base)));
            }
            files.push(Ok(maps));
            lens.extend(file_lens);
            plans.extend(file_runs.into_iter().map(|runs| (fi, meta.clone(), runs)));
        }
        let first_need = unit.first_need;
        let extents = if ahead {
            let Some(extents) = sh.set.window_pool.try_take(&lens) else { return Ok(None) };
            extents
        } else {
            sh.set.window_pool.take(&lens, &sh.stopped, &|| first_need <= sh.oldest())?
        };
        let jobs = plans
            .into_iter()
            .zip(extents)
            .enumerate()
            .map(|(index, ((fi, meta, runs), extent))| {
                let key = entry.files[fi].file.path.clone();
                Job { unit: u, fi, key, meta, index, extent, runs }
            })
            .collect();
        Ok(Some((files, jobs)))
    }

    /// Fills the jobs' extents: every job's runs as range GETs sent together (the window
    /// serves object stores only; local files read rows straight into the batch, the page
    /// cache being their window), pages checked in place (or staged and decoded into place).
    /// With checksums on, a run's pages are verified as they land, while in cache, not in a
    /// pass over the whole extent afterwards. Returns each job's page data faults.
    fn run_jobs(&mut self, jobs: &mut [Job]) -> Result<Vec<Vec<PageFault>>> {
        let sh = self.sh.clone();
        let keys: Vec<String> = jobs.iter().map(|j| j.key.clone()).collect();
        // Per job, per page of its direct runs (in run order): verified as it landed.
        let mut verified: Vec<Vec<bool>> =
            jobs.iter().map(|j| vec![false; j.runs.iter().filter(|r| r.direct).map(|r| r.pages.len()).sum()]).collect();
        let mut requests = Vec::new();
        // (job, page) of each destination, in request order.
        let mut tags: Vec<(usize, usize)> = Vec::new();
        for (j, (job, key)) in jobs.iter_mut().zip(&keys).enumerate() {
            let Job { extent, runs, meta, .. } = job;
            let meta: &FileMeta = meta;
            let mut carver = Carver { rest: extent.bytes_mut(), base: 0 };
            let mut k = 0;
            for run in runs.iter().filter(|r| r.direct) {
                if !sh.set.verify {
                    // Nothing to verify: the run lands whole, in one read.
                    let dst = carver.take(run.at, (run.range.end - run.range.start) as usize)?;
                    requests.push(RangeRequest {
                        key: key.as_str(),
                        range: run.range.clone(),
                        dests: vec![Dest::new(0, dst)],
                    });
                    continue;
                }
                // One destination per page, verified as it lands (the gaps are not landed).
                let mut dests = Vec::with_capacity(run.pages.len());
                for pg in &run.pages {
                    let block = &meta.chunks[pg.pos].pages()[pg.page].block;
                    let off = block.offset - run.range.start;
                    let dst = carver.take(run.at + off as usize, block.stored_len as usize)?;
                    dests.push(Dest { check: Some(block), ..Dest::new(off, dst) });
                    tags.push((j, k));
                    k += 1;
                }
                requests.push(RangeRequest { key: key.as_str(), range: run.range.clone(), dests });
            }
        }
        if !requests.is_empty() {
            sh.fetcher.run_requests(&mut requests, sh.set.max_requests, &sh.stopped)?;
        }
        for (d, &(j, k)) in requests.iter().flat_map(|q| &q.dests).zip(&tags) {
            verified[j][k] = d.verified;
        }
        jobs.iter_mut()
            .zip(&keys)
            .zip(&verified)
            .map(|((job, key), verified)| self.check_job(job, key, verified))
            .collect()
    }

    /// Checks a job's landed pages in place (those not `verified` as they landed) and
    /// decodes its compressed runs into place. Returns the pages' data faults.
    fn check_job(&mut self, job: &mut Job, key: &str, verified: &[bool]) -> Result<Vec<PageFault>> {
        let sh = self.sh.clone();
        let meta = job.meta.clone();
        let fi = job.fi;
        let what = |pos: usize, p: usize| format!("{key}: projected column #{pos} page {p}");
        let check = sh.set.verify;
        let mut faults = Vec::new();
        let ext = job.extent.bytes_mut();
        let mut landed = verified.iter();
        for run in &job.runs {
            if run.direct {
                for pg in &run.pages {
                    let block = meta.chunks[pg.pos].pages()[pg.page].block;
                    let check = check && !landed.next().copied().unwrap_or(false);
                    let r = slot(ext, pg.at, block.stored_len)
                        .and_then(|stored| verify(&block, stored, check, &|| what(pg.pos, pg.page)));
                    page_fault(&mut faults, fi, pg, r)?;
                }
                continue;
            }
            // Pages to decode: the run's stored bytes are staged, each page decoded into place.
            let staged = self.stage_run(key, &run.range)?;
            for pg in &run.pages {
                let chunk = &meta.chunks[pg.pos];
                let block = chunk.pages()[pg.page].block;
                let from = (block.offset - run.range.start) as usize;
                let r = staged
                    .get(from..from + block.stored_len as usize)
                    .ok_or_else(|| LoaderError::WorkerPanicked("a page outside its run".into()))
                    .and_then(|stored| {
                        let dst = slot(ext, pg.at, block.raw_len)?;
                        chunk
                            .decode_page_into(pg.page, stored, dst, check, &|| what(pg.pos, pg.page))
                            .map_err(|e| from_format(&what(pg.pos, pg.page), e))
                    });
                page_fault(&mut faults, fi, pg, r)?;
            }
            self.scratch = staged;
        }
        Ok(faults)
    }

    /// Reads a run of stored pages into the worker's scratch buffer (handed out; the caller
    /// puts it back), within the worker's allowance.
    fn stage_run(&mut self, key: &str, range: &Range<u64>) -> Result<Vec<u8>> {
        let sh = self.sh.clone();
        let n = (range.end - range.start) as usize;
        self.scratch(n)?;
        let mut stored = std::mem::take(&mut self.scratch);
        let r = if sh.fetcher.is_local() {
            sh.fetcher.read_into(key, range.start, &mut stored[..n], &sh.stopped)
        } else {
            let mut req = [RangeRequest { key, range: range.clone(), dests: vec![Dest::new(0, &mut stored[..n])] }];
            sh.fetcher.run_requests(&mut req, 1, &sh.stopped)
        };
        match r {
            Ok(()) => Ok(stored),
            Err(e) => {
                self.scratch = stored;
                Err(e)
            }
        }
    }
}
