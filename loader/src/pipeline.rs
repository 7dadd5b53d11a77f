//! The pipeline of one epoch: worker threads claim batches in order, fill them (the `fill`
//! module) and hand them over through a bounded channel; the consumer re-orders them.
//!
//! ```text
//!  worker: pool.take ─► claim batch i ─► fill its buffers ─► send (i, batch) ─┐
//!                                                             bounded channel │
//!  consumer: next_batch ◄─ re-order by i: batch 0, 1, 2, … ◄──────────────────┘
//! ```
//!
//! Bounds: at most `sets` batches exist at once (pool), which also bounds the channel; each
//! worker's fetch and decode bytes stay within its allowance (`Shares` splits the memory
//! budget when the epoch starts); block-shuffle fragments are admitted in schedule order
//! (`block_schedule`) against the `Shuffle` share. Output never depends on the number of
//! workers: batch `i` holds exactly the plan's batch `i` (or its deterministic substitutes).
//!
//! Depth: on local files `workers` threads fill at most `prefetch_batches` batches. On an
//! object store a fill mostly waits for round trips, so a batch may be claimed while fewer
//! than the self-tuned depth (`crate::depth`: from each fill's CPU time and storage waiting)
//! are claimed and not yet delivered, up to as many as the budget holds batch buffers (at
//! most [`MAX_DEPTH`]). Filling threads start as the depth asks for them: the epoch starts
//! the depth it begins at, and a thread admitted with room for one more claim and no idle
//! thread to wake starts another, up to that ceiling; so an epoch runs about as many threads
//! as it keeps batches in flight, not the ceiling (at +0 ms a depth of 10-30 where the
//! budget holds 52). The CPU work is the same; only the waiting overlaps. An object store read through a disk cache that
//! served the loader's last finished epoch alone (no store request, no miss) runs the next
//! epoch as local files do: the cache's files are local reads with nothing to wait for, so
//! `workers` threads and `prefetch_batches` batches, not up to [`MAX_DEPTH`] of each; a miss
//! in such an epoch makes the next one self-tuned again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::batch::{HostBatch as Batch, SkippedSample};
use crate::buffer::HostBuffer;
use crate::catalog::Catalog;
use crate::depth::thread_cpu_time;
use crate::error::{LoaderError, Result};
use crate::fill::Worker;
use crate::fill::page_cache::PageCache;
use crate::fill::staging::StagePool;
use crate::memory::{Accountant, Charge, MemoryUse};
use crate::pool::BufferPool;
use crate::sampler::Plan;
use crate::source::{Fetcher, Warmth, take_waited};
use crate::transform::Pipeline;
use crate::window::{BlockSchedule, ExtentPool, Positions, WindowCache, extent_size};

/// Smallest per-worker fetch/decode allowance accepted when an epoch starts.
const MIN_ALLOWANCE: u64 = 256 << 10;
/// Most batches an object-store epoch fills at once (and filling threads it starts).
pub(crate) const MAX_DEPTH: usize = 128;
/// Share of the budget (after plan, indexes and window) an object-store epoch keeps for
/// fetch buffers and the page cache, as a divisor: the rest holds batches in flight. Half:
/// with checksums on, a row of a small column (a label, an embedding) costs its whole page,
/// so the cache must hold the small columns' pages; at an eighth, mm224 at 40,000 rows
/// outgrew it and read 2.6 bytes per byte delivered (1,751 against 30,213 samples/s at
/// +20 ms). The lower depth cap half leaves (51 batches at 1 GiB) still covers a 100 ms
/// link: 17,811 samples/s there, against 15,503 at an eighth.
const REMOTE_FETCH_DIVISOR: u64 = 2;
/// Object stores, global shuffle: claims' starts are spaced this fraction of the idle round
/// trip / depth apart (see [`Pacer`]).
const PACE: f64 = 1.0;
/// Spacing below this (a fast link) is not enforced: sleeping costs more than it spreads.
const MIN_SPACING: Duration = Duration::from_micros(200);

/// Settings of one epoch's pipeline.
#[derive(Clone, Debug)]
#[allow(clippy::struct_excessive_bools)] // independent switches, each documented
pub(crate) struct PipelineSettings {
    pub(crate) workers: usize,
    pub(crate) prefetch_batches: usize,
    pub(crate) verify: bool,
    pub(crate) skip_bad: bool,
    pub(crate) ragged_offsets: bool,
    pub(crate) max_fetch: u64,
    pub(crate) max_requests: usize,
    /// Coalescing gap of object-store range GETs (`None`: measured).
    pub(crate) coalesce_gap: Option<u64>,
    pub(crate) block: bool,
    /// Object-store staging buffers (the loader's, kept from epoch to epoch).
    pub(crate) staging: Arc<StagePool>,
    /// Block shuffle: the window's extents (the loader's, kept from epoch to epoch).
    pub(crate) window_pool: Arc<ExtentPool>,
    /// Decoded pages (the loader's, kept from epoch to epoch).
    pub(crate) pages: Arc<PageCache>,
    /// Per projected column, its augmentation pipeline.
    pub(crate) transforms: Arc<[Option<Pipeline>]>,
    /// The run's seed (transform draws).
    pub(crate) seed: u64,
}

/// Spaces the starts of claims over a round trip, so batches in flight do not move as one.
///
/// Claims started together finish their round trips together, wait together for the
/// oldest to be delivered, and start again together: a convoy whose CPU work never overlaps
/// its waiting. On mm224 at +100 ms, 51 fills in flight took 170 ms a round for 100 ms
/// round trips; spaced, the warm epoch ran 25-35% faster. The spacing follows the link's
/// idle round trip, never the measured rate (a spacing from the rate ratchets a slow phase
/// down further), and `depth` claims per round trip is at least what `depth` claims in
/// flight sustain, so it only breaks up bursts. Block shuffle is not paced: its fills wait
/// for window fragments, not one round trip each.
#[derive(Debug, Default)]
struct Pacer {
    next_start: Option<Instant>,
}

impl Pacer {
    /// [`PACE`] × `rtt` / `depth`; `None` (no pacing) below [`MIN_SPACING`].
    fn spacing(rtt: Duration, depth: usize) -> Option<Duration> {
        let spacing = rtt.mul_f64(PACE / depth.max(1) as f64);
        (spacing >= MIN_SPACING).then_some(spacing)
    }

    /// Reserves the next start at or after `now`, `spacing` after the last one reserved;
    /// returns it where it lies ahead of `now`. Without a spacing, every claim starts now.
    fn reserve(&mut self, now: Instant, spacing: Option<Duration>) -> Option<Instant> {
        let Some(spacing) = spacing else {
            self.next_start = None;
            return None;
        };
        let start = self.next_start.map_or(now, |at| at.max(now));
        self.next_start = Some(start + spacing);
        (start > now).then_some(start)
    }
}

#[derive(Debug, Default)]
struct Claims {
    next: usize,
    unfinished: BTreeSet<usize>,
    /// Threads admitted by the depth gate that have not claimed yet.
    admitted: usize,
    /// Threads waiting at the depth gate.
    idle: usize,
    /// Spaces the starts of admitted claims (object stores).
    pacer: Pacer,
}

/// State shared by the workers of one epoch.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) fetcher: Arc<Fetcher>,
    pub(crate) acct: Arc<Accountant>,
    pub(crate) plan: Arc<Plan>,
    pub(crate) set: PipelineSettings,
    pub(crate) epoch: u64,
    /// Where this rank's batches lie in the padded global order (`at.rows`, N: positions at
    /// or past it are padding; `at.total`: this rank's batches).
    pub(crate) at: Positions,
    claims: Mutex<Claims>,
    /// Signalled when the consumer takes a batch (the depth gate may admit another).
    turn: Condvar,
    /// Batches the consumer has taken (`0..delivered`).
    delivered: AtomicUsize,
    /// Most filling threads; more than `set.workers` on an object store (self-tuned depth).
    threads: usize,
    /// Filling threads started so far, and their handles (joined at shutdown).
    started: AtomicUsize,
    handles: Mutex<Vec<JoinHandle<()>>>,
    /// Whether the depth is self-tuned (object stores).
    tuned: bool,
    pub(crate) stopped: AtomicBool,
    /// Block mode on an object store: the window, and which units each batch reads from it.
    pub(crate) window: Option<(WindowCache, BlockSchedule)>,
    pub(crate) meta_cap: u64,
    /// Each worker's share of the `Fetch` memory use.
    pub(crate) allowance: u64,
    pub(crate) skipped: Arc<Mutex<Vec<SkippedSample>>>,
}

impl Shared {
    fn claims(&self) -> MutexGuard<'_, Claims> {
        self.claims.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The smallest batch index not yet finished.
    pub(crate) fn oldest(&self) -> usize {
        let c = self.claims();
        c.unfinished.first().copied().unwrap_or(c.next)
    }

    /// Position in the padded global order of slot `j` of batch `batch`.
    pub(crate) fn position(&self, batch: usize, j: usize) -> u64 {
        self.at.of(batch, j)
    }

    /// The self-tuned depth now: at least `prefetch_batches` and `workers`, at most
    /// [`Shared::threads`] (what the budget holds).
    fn tuned_depth(&self) -> usize {
        let floor = self.set.prefetch_batches.max(self.set.workers);
        self.fetcher.depth.target(self.set.workers, floor, self.threads)
    }

    /// Waits until the depth gate admits one more claim (always, with a fixed depth):
    /// `Some(grow)`, `grow` when there is room for one more and no idle thread to take it (the
    /// caller then starts one); `None` when the epoch stops or every batch is claimed.
    fn admit(&self) -> Option<bool> {
        let mut c = self.claims();
        loop {
            if self.stopped.load(Ordering::Acquire) || c.next >= self.at.total {
                return None;
            }
            let depth = if self.tuned { self.tuned_depth() } else { usize::MAX };
            let claimed = c.next + c.admitted;
            let limit = self.delivered.load(Ordering::Acquire).saturating_add(depth);
            if claimed < self.at.total && claimed < limit {
                c.admitted += 1;
                let mut grow = false;
                if claimed + 1 < self.at.total.min(limit) {
                    // Room for more (a depth that grew): pass the wake-up on, one at a time,
                    // or start a thread where none waits.
                    if c.idle > 0 {
                        self.turn.notify_one();
                    } else {
                        grow = self.started.load(Ordering::Acquire) < self.threads;
                    }
                }
                let start = self.pace(&mut c, depth);
                drop(c);
                return start.is_none_or(|at| self.sleep_until(at)).then_some(grow);
            }
            // Woken by a delivered batch; the timeout also sees a depth that grew.
            c.idle += 1;
            c = self.turn.wait_timeout(c, Duration::from_millis(20)).map_or_else(|e| e.into_inner().0, |r| r.0);
            c.idle -= 1;
        }
    }

    /// Global shuffle on an object store: spaces claims' starts [`PACE`] × the link's idle
    /// round trip / `depth` apart (see [`Pacer`]). Returns when this claim may start (`None`:
    /// now).
    fn pace(&self, c: &mut Claims, depth: usize) -> Option<Instant> {
        let rtt = if self.window.is_none() { self.fetcher.link.idle_latency() } else { None };
        c.pacer.reserve(Instant::now(), rtt.and_then(|rtt| Pacer::spacing(rtt, depth)))
    }

    /// Sleeps until `at`, in steps that notice a stop; `false` when the epoch stopped.
    fn sleep_until(&self, at: Instant) -> bool {
        loop {
            if self.stopped.load(Ordering::Acquire) {
                self.claims().admitted -= 1;
                return false;
            }
            let left = at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(Duration::from_millis(10)));
        }
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.turn.notify_all();
        self.acct.notify();
        if let Some((w, _)) = &self.window {
            w.notify();
        }
        self.set.window_pool.notify();
        self.set.staging.notify();
    }
}

/// Starts one more filling thread, unless the epoch has its most already.
fn start_worker<B: HostBuffer>(
    sh: &Arc<Shared>,
    pool: &Arc<BufferPool<B>>,
    tx: &SyncSender<(usize, Result<Batch<B>>)>,
) -> Result<()> {
    let w = sh.started.fetch_add(1, Ordering::AcqRel);
    if w >= sh.threads {
        sh.started.fetch_sub(1, Ordering::AcqRel);
        return Ok(());
    }
    let worker = Worker::new(sh.clone());
    let (shared, pool, tx) = (sh.clone(), pool.clone(), tx.clone());
    let spawned = std::thread::Builder::new()
        .name(format!("tessera-loader-{w}"))
        .spawn(move || work(&shared, &pool, worker, &tx))
        .map_err(|e| LoaderError::config(format!("cannot start a worker thread: {e}")));
    match spawned {
        Ok(h) => {
            sh.fetcher.threads.fetch_max(w as u64 + 1, Ordering::Relaxed);
            sh.handles.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(h);
            Ok(())
        }
        Err(e) => {
            sh.started.fetch_sub(1, Ordering::AcqRel);
            Err(e)
        }
    }
}

/// A worker thread: wait for the depth gate, take a buffer set, claim the next batch, fill
/// it, send it; until every batch is claimed, the pipeline stops or the consumer is gone.
fn work<B: HostBuffer>(
    sh: &Arc<Shared>,
    pool: &Arc<BufferPool<B>>,
    mut worker: Worker,
    tx: &SyncSender<(usize, Result<Batch<B>>)>,
) {
    loop {
        let Some(grow) = sh.admit() else { return };
        // The depth asks for more batches in flight than threads wait to fill them. A thread
        // that cannot start leaves the others to carry the depth.
        if grow {
            let _ = start_worker(sh, pool, tx);
        }
        let Ok(set) = pool.take(&sh.stopped) else {
            sh.claims().admitted -= 1;
            return;
        };
        let index = {
            let mut c = sh.claims();
            c.admitted -= 1;
            if c.next >= sh.at.total {
                drop(c);
                pool.give_back(set);
                return;
            }
            let i = c.next;
            c.next += 1;
            c.unfinished.insert(i);
            i
        };
        let started = Instant::now();
        let cpu0 = thread_cpu_time();
        take_waited();
        // Every cache this thread reads through sees it (a mixture's sources have their own).
        let first = (index == 0).then(crate::disk_cache::FirstBatch::enter);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker.assemble(index, set, pool)))
            .unwrap_or_else(|p| {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(ToString::to_string)
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(LoaderError::WorkerPanicked(msg))
            });
        drop(first);
        if sh.tuned && result.is_ok() {
            let cpu = thread_cpu_time().zip(cpu0).map(|(t1, t0)| t1.saturating_sub(t0));
            sh.fetcher.depth.observe(started.elapsed(), take_waited(), cpu);
        }
        sh.claims().unfinished.remove(&index);
        sh.acct.notify();
        if tx.send((index, result)).is_err() {
            return;
        }
        // Block shuffle on an object store: with its batch handed over, the thread loads the
        // next window fragment ahead of the batches that need it. A failure is not this
        // batch's: the fragment's unfinished work stays for the batch that needs it, which
        // retries it and reports what fails.
        if let Some((window, _)) = &sh.window {
            let _ = worker.load_ahead(window);
        }
    }
}

/// How one epoch splits the memory budget.
#[derive(Debug)]
struct Shares {
    meta: u64,
    meta_cap: u64,
    ready: u64,
    fetch: u64,
    sets: usize,
    threads: usize,
    /// The shared page cache's part of `fetch`.
    pages: u64,
    /// The shared staging pool's part of `fetch` (object stores).
    staging: u64,
    allowance: u64,
}

impl Shares {
    /// Plan and indexes first, then the block window (its sweep peak), at least two batch
    /// buffers and a minimal fetch allowance per worker. Local files: spare
    /// bytes go to more batch buffers (up to `prefetch_batches`) and then to fetch/decode
    /// buffers. Object stores (`tuned`): a fetch share of 1/[`REMOTE_FETCH_DIVISOR`] of what
    /// is left, and as many batch buffers (and filling threads) as the rest holds, up to
    /// [`MAX_DEPTH`]: the ceiling of the self-tuned depth. Local files: half the fetch share
    /// is the page cache (less where the workers' minimal allowances need it), the rest is
    /// split between the workers. Object stores (`remote`, tuned or read from a warm disk
    /// cache): a quarter each for the page cache and the staging pool the threads' waves
    /// share, half split between the threads.
    fn size(
        budget: u64,
        plan_bytes: u64,
        shuffle: u64,
        batch_bytes: u64,
        set: &PipelineSettings,
        (tuned, remote): (bool, bool),
    ) -> Result<Self> {
        let meta_cap = (budget / 16).max(64 << 10);
        let meta = plan_bytes + meta_cap;
        let min_fetch = MIN_ALLOWANCE * set.workers as u64;
        let fixed = meta + shuffle + min_fetch;
        if fixed + 2 * batch_bytes > budget {
            return Err(LoaderError::Budget {
                budget,
                what: format!(
                    "plan and indexes ({meta}) + block-shuffle window ({shuffle}) + fetch buffers ({min_fetch}) + \
                     two batch buffers ({})",
                    2 * batch_bytes
                ),
                needed: fixed + 2 * batch_bytes,
            });
        }
        let (sets, threads) = if tuned {
            let spare = budget - meta - shuffle;
            let mut sets = ((spare - spare / REMOTE_FETCH_DIVISOR) / batch_bytes).clamp(2, MAX_DEPTH as u64) as usize;
            // Every thread needs its allowance and its part of the page cache next to the
            // batch buffers.
            let per_thread = 2 * MIN_ALLOWANCE;
            while sets > 2 && sets as u64 * (batch_bytes + per_thread) > spare {
                sets -= 1;
            }
            (sets, sets.max(set.workers))
        } else {
            let sets = (set.prefetch_batches as u64).min((budget - fixed) / batch_bytes).max(2) as usize;
            (sets, set.workers)
        };
        let ready = sets as u64 * batch_bytes;
        let fetch = budget - meta - shuffle - ready;
        let (pages, staging) = if remote {
            (fetch / 4, fetch / 4)
        } else {
            // Half for the page cache, as long as every worker keeps its minimal allowance (a
            // tight budget caches fewer pages, or none).
            ((fetch / 2).min(fetch.saturating_sub(MIN_ALLOWANCE * threads as u64)), 0)
        };
        let allowance = (fetch - pages - staging) / threads as u64;
        Ok(Self { meta, meta_cap, ready, fetch, sets, threads, pages, staging, allowance })
    }
}

/// Block mode: the bytes the window's units take at their peak (two windows: the one being
/// read and the next, loading ahead), the regular extent length, and the bytes of one block
/// (what loading one unit more ahead takes). Estimated from the window's rows and the
/// catalog's bytes per row, as if this rank needed every page of a window (it does when the
/// rows of a page outnumber the ranks), with room for the extents' unused ends.
fn block_window_bytes(catalog: &Catalog, plan: &Plan) -> (u64, u64, u64) {
    let (window_rows, block_rows) = plan.block_rows().unwrap_or((0, 0));
    let row_bytes: u64 = (0..catalog.columns.len()).map(|c| catalog.estimated_slot_bytes(c)).sum();
    let files = catalog.files_per_fragment() as u64;
    let window = window_rows.saturating_mul(row_bytes);
    let extent = extent_size(2 * window);
    let units = 2 * (window_rows.div_ceil(block_rows.max(1)) + 1);
    let peak = 2 * (window + window / 16) + extent * files * units;
    let block = block_rows.saturating_mul(row_bytes) + extent * files;
    (peak, extent, block)
}

/// One epoch's running pipeline, owned by the consumer.
#[derive(Debug)]
pub(crate) struct EpochPipeline<B: HostBuffer> {
    shared: Arc<Shared>,
    /// Batch buffers (the loader's, kept from epoch to epoch).
    buffers: Arc<BufferPool<B>>,
    rx: Option<Receiver<(usize, Result<Batch<B>>)>>,
    pending: BTreeMap<usize, Result<Batch<B>>>,
    next: usize,
    /// The disk cache's counters when the epoch started (see [`Fetcher::note_epoch`]).
    warmth: Option<Warmth>,
    /// Every batch was delivered.
    completed: bool,
    _plan_charge: Charge,
}

impl<B: HostBuffer> EpochPipeline<B> {
    /// Sizes the memory shares, builds the block schedule, and starts the workers.
    #[allow(clippy::too_many_arguments)] // the loader's parts an epoch runs on, each distinct
    pub(crate) fn start(
        catalog: Arc<Catalog>,
        fetcher: Arc<Fetcher>,
        acct: Arc<Accountant>,
        plan: Arc<Plan>,
        set: PipelineSettings,
        buffers: Arc<BufferPool<B>>,
        skipped: Arc<Mutex<Vec<SkippedSample>>>,
    ) -> Result<Self> {
        let pc = plan.config();
        let at = Positions {
            start: plan.checkpoint(0, 0).map_or(0, |s| s.samples_consumed_global),
            global_batch: plan.global_batch_size() as u64,
            rank: pc.rank,
            batch_size: pc.batch_size,
            total: plan.batches_per_rank(),
            rows: plan.rows(),
        };
        let (batch_size, total) = (at.batch_size, at.total);
        // Block shuffle reads through the window on object stores, where it turns a batch's
        // scattered rows into a few large ranged reads per fragment. On local files the
        // kernel's page cache already is that window: reading rows straight into the batch
        // (the block order, the global path's reads) copies each byte once, where the window
        // copied it twice (into the window, then out of it) and ran at about half the rate.
        let (window, peak, ahead) = if set.block && !fetcher.is_local() {
            let (peak, extent, block) = block_window_bytes(&catalog, &plan);
            (Some((WindowCache::new(extent), BlockSchedule::new(at))), peak, block)
        } else {
            (None, 0, 0)
        };
        let plan_bytes = plan.heap_bytes();
        // An object store whose disk cache served the last finished epoch alone runs like
        // local files (see the module docs); a mixture's other sources have their own caches,
        // so a mixture stays self-tuned.
        let remote = !fetcher.is_local();
        let warm = fetcher.cache_warm() && !catalog.mixture;
        let tuned = remote && !warm;
        let mode = (tuned, remote);
        let warmth = fetcher.warmth();
        let budget = acct.budget();
        // Estimated from the files before the first batch; when sets have needed more since
        // (padded ragged batches pay each ragged dim's batch maximum, often twice the
        // estimate), that with an eighth of headroom, where the budget holds two such batches
        // (else the estimate: the epoch overcommits for its largest batches as the first did,
        // rather than failing where the first ran). Fixed shapes are estimated exactly.
        let estimated: u64 =
            (0..catalog.columns.len()).map(|c| catalog.estimated_slot_bytes(c) * batch_size as u64).sum::<u64>().max(1);
        let seen = buffers.largest_set_bytes();
        let batch_bytes = match (seen > estimated).then(|| seen.saturating_add(seen / 8)) {
            Some(learned) if Shares::size(budget, plan_bytes, peak, learned, &set, mode).is_ok() => learned,
            _ => estimated,
        };
        // The window's share holds one fragment more than its sweep peak where the budget
        // allows (loading ahead, see `Worker::load_ahead`), else the peak.
        let (shuffle_share, shares) = match Shares::size(budget, plan_bytes, peak + ahead, batch_bytes, &set, mode) {
            Ok(shares) if ahead > 0 => (peak + ahead, shares),
            _ => (peak, Shares::size(budget, plan_bytes, peak, batch_bytes, &set, mode)?),
        };
        let (sets, meta_cap, allowance) = (shares.sets, shares.meta_cap, shares.allowance);
        // No more filling threads than the epoch has batches (a short epoch on an object
        // store would otherwise start the depth's ceiling of threads for a few batches).
        let threads = shares.threads.min(total.max(1));
        acct.set_shares([
            (MemoryUse::Ready, shares.ready),
            (MemoryUse::Fetch, shares.fetch),
            (MemoryUse::Shuffle, shuffle_share),
            (MemoryUse::Metadata, shares.meta),
        ]);
        // Extents kept from the last epoch: those of this epoch's size, within its share.
        set.window_pool.trim(shuffle_share, window.as_ref().map_or(0, |(w, _)| w.extent()));
        let plan_charge = acct.charge(MemoryUse::Metadata, plan_bytes);
        buffers.start_epoch(sets);
        set.pages.set_cap(shares.pages);
        set.staging.set_cap(shares.staging);
        let shared = Arc::new(Shared {
            catalog,
            fetcher,
            acct,
            epoch: plan.epoch(),
            plan,
            set,
            at,
            claims: Mutex::new(Claims::default()),
            turn: Condvar::new(),
            delivered: AtomicUsize::new(0),
            threads,
            started: AtomicUsize::new(0),
            handles: Mutex::new(Vec::with_capacity(threads)),
            tuned,
            stopped: AtomicBool::new(false),
            window,
            meta_cap,
            allowance,
            skipped,
        });
        shared.fetcher.threads.store(0, Ordering::Relaxed);
        // Threads for the depth the epoch starts at (a self-tuned one grows by more).
        let initial = if tuned { shared.tuned_depth().max(shared.set.workers).min(threads) } else { threads };
        let (tx, rx) = sync_channel(sets);
        for _ in 0..initial {
            if let Err(e) = start_worker(&shared, &buffers, &tx) {
                shared.stop();
                buffers.notify();
                Self::join(&shared);
                return Err(e);
            }
        }
        drop(tx);
        Ok(Self {
            shared,
            buffers,
            rx: Some(rx),
            pending: BTreeMap::new(),
            next: 0,
            warmth,
            completed: false,
            _plan_charge: plan_charge,
        })
    }

    /// Waits for every filling thread, those a thread started while it was being joined
    /// included (a stopped epoch starts no more).
    fn join(shared: &Shared) {
        loop {
            let handles: Vec<JoinHandle<()>> =
                std::mem::take(&mut *shared.handles.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
            if handles.is_empty() {
                return;
            }
            for h in handles {
                let _ = h.join();
            }
        }
    }

    /// Batches this pipeline yields in total.
    pub(crate) fn total(&self) -> usize {
        self.shared.at.total
    }

    /// The next batch in order; `None` after the last.
    pub(crate) fn next_batch(&mut self) -> Option<Result<Batch<B>>> {
        if self.next >= self.shared.at.total {
            self.completed = true;
            self.shutdown();
            return None;
        }
        loop {
            if let Some(r) = self.pending.remove(&self.next) {
                self.next += 1;
                self.shared.delivered.store(self.next, Ordering::Release);
                // One delivery admits one more claim: wake one waiting worker, not all of
                // them (up to `MAX_DEPTH` on an object store) to have all but one sleep again.
                // A worker admitted with room for more wakes the next (`admit`).
                self.shared.turn.notify_one();
                if let Ok(Some(lease)) = r.as_ref().map(|b| b.lease.as_ref()) {
                    lease.deliver();
                }
                return Some(r);
            }
            let rx = self.rx.as_ref()?;
            let Ok((i, r)) = rx.recv() else {
                self.next = self.shared.at.total;
                return Some(Err(LoaderError::WorkerPanicked("every worker exited early".into())));
            };
            self.pending.insert(i, r);
        }
    }

    /// Stops the workers and waits for them.
    pub(crate) fn shutdown(&mut self) {
        self.shared.stop();
        self.buffers.notify();
        self.rx = None;
        self.pending.clear();
        Self::join(&self.shared);
        if let Some(from) = self.warmth.take() {
            self.shared.fetcher.note_epoch(from, self.completed);
        }
        // The catalog keeps the file indexes (within its cap of the `Metadata` share): the
        // next epoch opens no file again.
    }
}

impl<B: HostBuffer> Drop for EpochPipeline<B> {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_pacer_spreads_a_burst_over_a_round_trip() {
        // 100 ms round trips, 50 claims in flight: 2 ms apart.
        let spacing = Pacer::spacing(100 * MS, 50);
        assert_eq!(spacing, Some(2 * MS));
        let mut p = Pacer::default();
        let t0 = Instant::now();
        // A burst of 50 claims at once starts over 98 ms, 2 ms apart.
        let starts: Vec<Option<Instant>> = (0..50).map(|_| p.reserve(t0, spacing)).collect();
        assert_eq!(starts[0], None, "the first starts now");
        for (k, s) in starts.iter().enumerate().skip(1) {
            assert_eq!(*s, Some(t0 + 2 * MS * k as u32), "claim {k}");
        }
        // After a lull, the next claim starts at once: no debt is carried.
        assert_eq!(p.reserve(t0 + Duration::from_secs(1), spacing), None);
        // A fast link is not paced, and forgets the schedule.
        assert_eq!(Pacer::spacing(MS, 50), None);
        assert_eq!(p.reserve(t0 + Duration::from_secs(1), None), None);
        assert_eq!(p.next_start, None);
    }
}
