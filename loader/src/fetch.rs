//! The pipeline of one epoch: worker threads that fetch, verify, decompress and assemble
//! batches into pooled tensors, and the in-order hand-over to the consumer.
//!
//! ```text
//!  pool.take ─► claim batch i ─► [block mode: admit window fragments] ─► per data file:
//!  one ranged read (object store) or positioned reads (local) of the needed pages / rows,
//!  CRC, decompress into the tensor slot ─► send (i, batch) on a bounded channel ─► the
//!  consumer re-orders by i and yields batch 0, 1, 2, …
//! ```
//!
//! Bounds: at most `sets` batches exist at once (pool), which also bounds the channel; each
//! worker's fetch and decode bytes stay within its allowance; block-shuffle fragments are
//! admitted in schedule order against the `Shuffle` share. Output never depends on the
//! number of workers: batch `i` holds exactly the plan's batch `i` (or its deterministic
//! substitutes).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use bytes::Bytes;
use tessera::Codec;
use tessera::datafile::{self, Block};

use crate::assemble::ColumnPlan;
use crate::batch::{HostBatch as Batch, HostColumn, SkippedSample};
use crate::buffer::BufferAllocator;
use crate::catalog::{Catalog, FileMeta};
use crate::error::{LoaderError, Result, from_format};
use crate::memory::{Accountant, Charge, MemoryUse};
use crate::pool::{BufferPool, BufferSet, Lease};
use crate::sampler::Plan;
use crate::source::Fetcher;
use crate::window::{Admission, Fault, FragmentData, PageMap, WindowCache, sweep_peak};

/// Smallest per-worker fetch/decode allowance accepted when an epoch starts.
const MIN_ALLOWANCE: u64 = 256 << 10;

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
    pub(crate) block: bool,
    pub(crate) reuse: bool,
    pub(crate) alloc: Arc<dyn BufferAllocator>,
}

#[derive(Debug, Default)]
struct Claims {
    next: usize,
    unfinished: BTreeSet<usize>,
}

/// State shared by the workers of one epoch.
#[derive(Debug)]
struct Shared {
    catalog: Arc<Catalog>,
    fetcher: Arc<Fetcher>,
    acct: Arc<Accountant>,
    plan: Arc<Plan>,
    set: PipelineSettings,
    epoch: u64,
    /// N: real rows in the global order; positions at or past it are padding.
    rows_n: u64,
    /// Position in the padded global order where this plan starts.
    start: u64,
    global_batch: u64,
    batch_size: usize,
    rank: usize,
    total: usize,
    claims: Mutex<Claims>,
    stopped: AtomicBool,
    pool: Arc<BufferPool>,
    window: Option<WindowCache>,
    /// Physical rows of each fragment this rank reads in real positions (block mode).
    needed: Vec<Vec<u64>>,
    meta_cap: u64,
    allowance: u64,
    skipped: Arc<Mutex<Vec<SkippedSample>>>,
}

impl Shared {
    fn claims(&self) -> MutexGuard<'_, Claims> {
        self.claims.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The smallest batch index not yet finished.
    fn oldest(&self) -> usize {
        let c = self.claims();
        c.unfinished.first().copied().unwrap_or(c.next)
    }

    fn position(&self, batch: usize, j: usize) -> u64 {
        self.start + batch as u64 * self.global_batch + (self.rank * self.batch_size + j) as u64
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.pool.notify();
        self.acct.notify();
        if let Some(w) = &self.window {
            w.notify();
        }
    }
}

/// One row slot of a batch being assembled.
#[derive(Clone, Copy, Debug)]
struct SlotRow {
    row: u64,
    frag: usize,
    phys: u64,
    /// Position in the padded global order this slot's row comes from (advances on
    /// substitution).
    pos: u64,
    /// A real (not padding, not substituted) row: served by the block window.
    real: bool,
}

/// Why a fill attempt failed.
#[derive(Debug)]
enum FillError {
    /// Data errors of these slots (skip mode substitutes them and retries).
    Rows(Vec<(usize, LoaderError)>),
    /// Anything else.
    Fatal(LoaderError),
}

impl From<LoaderError> for FillError {
    fn from(e: LoaderError) -> Self {
        Self::Fatal(e)
    }
}

/// Records a slot's data error, or fails the batch for any other error.
fn slot_error(fails: &mut Vec<(usize, LoaderError)>, j: usize, e: LoaderError) -> std::result::Result<(), FillError> {
    if e.is_data_error() {
        fails.push((j, e));
        Ok(())
    } else {
        Err(FillError::Fatal(e))
    }
}

fn clone_fault(e: &LoaderError) -> LoaderError {
    Fault::of(e).map_or_else(|| LoaderError::corrupt("data", e.to_string()), |f| f.to_error())
}

/// A filled batch: column plans and validity per column.
type Filled = (Vec<ColumnPlan>, Vec<Option<Vec<bool>>>);

/// A filled batch with its (possibly substituted) slots and what was skipped.
type Assembled = (Vec<SlotRow>, Vec<ColumnPlan>, Vec<Option<Vec<bool>>>, Vec<SkippedSample>);

/// A page-cache key: fragment, file, column position in the file, page.
type PageKey = (usize, usize, usize, usize);

/// A worker's small cache of decoded pages (hits when consecutive rows share a page).
#[derive(Debug, Default)]
struct PageCache {
    entries: Vec<(PageKey, Bytes)>,
    bytes: u64,
}

impl PageCache {
    fn get(&mut self, key: PageKey) -> Option<Bytes> {
        let i = self.entries.iter().position(|(k, _)| *k == key)?;
        let e = self.entries.remove(i);
        let b = e.1.clone();
        self.entries.push(e);
        Some(b)
    }

    fn insert(&mut self, key: PageKey, raw: Bytes) {
        self.bytes += raw.len() as u64;
        self.entries.push((key, raw));
    }

    fn evict_to(&mut self, cap: u64) {
        while self.bytes > cap && !self.entries.is_empty() {
            let (_, b) = self.entries.remove(0);
            self.bytes -= b.len() as u64;
        }
    }
}

/// What one column of one data file needs from storage for a batch.
#[derive(Debug)]
enum Need {
    /// One row read on its own (uncompressed, checksums off).
    Row { col: usize, j: usize, range: Range<u64> },
    /// A page holding one wanted row that is the whole page: read/decompressed into the slot.
    Single { col: usize, j: usize, block: Block },
    /// A whole page, verified and decoded, then rows copied out (and the page cached).
    Page { pos: usize, col: usize, page: usize, block: Block, items: Vec<(usize, u64)> },
    /// A page already in the worker's cache.
    Cached { pos: usize, col: usize, raw: Bytes, items: Vec<(usize, u64)> },
}

impl Need {
    fn range(&self) -> Option<Range<u64>> {
        match self {
            Need::Row { range, .. } => Some(range.clone()),
            Need::Single { block, .. } | Need::Page { block, .. } => Some(block.range()),
            Need::Cached { .. } => None,
        }
    }
}

/// An object-store data file a batch reads from: what to serve, the ranges to fetch for it
/// (one per need with a range, in order) and the bodies fetched so far.
struct RemoteFile {
    frag: usize,
    fi: usize,
    meta: Arc<FileMeta>,
    key: String,
    needs: std::collections::VecDeque<Need>,
    ranges: Vec<Range<u64>>,
    fetched: std::collections::VecDeque<Bytes>,
}

/// Per-thread worker state.
struct Worker {
    sh: Arc<Shared>,
    scratch: Vec<u8>,
    cache: PageCache,
    /// Bytes of the storage request being processed (object stores).
    inflight: u64,
    /// Everything above, counted against the `Fetch` share.
    mem: Charge,
}

fn column_buf(set: &mut BufferSet, c: usize) -> Result<&mut [u8]> {
    set.bufs
        .get_mut(c)
        .and_then(Option::as_mut)
        .ok_or_else(|| LoaderError::WorkerPanicked(format!("column {c} has no buffer")))?
        .0
        .bytes_mut()
        .ok_or_else(|| LoaderError::WorkerPanicked(format!("column {c}'s buffer is still shared with a tensor")))
}

/// Checks a block's stored bytes through the reference (length; CRC-32 when `verify`).
fn verify(block: &Block, stored: &[u8], verify: bool, what: &dyn Fn() -> String) -> Result<()> {
    datafile::verify_block(block, stored, verify, what).map_err(|e| from_format(&what(), e))
}

/// Verifies (optionally) and decodes a stored page into owned raw bytes, through the
/// reference's decoder.
fn decode_page(block: &Block, stored: &[u8], check: bool, what: &dyn Fn() -> String) -> Result<Bytes> {
    if block.codec == Codec::None {
        verify(block, stored, check, what)?;
        return Ok(Bytes::copy_from_slice(stored));
    }
    // Sizes were bounded by the footer's validation: at most the block limit.
    let mut raw = vec![0u8; block.raw_len as usize];
    datafile::decode_block_into(block, stored, &mut raw, check, what).map_err(|e| from_format(&what(), e))?;
    Ok(Bytes::from(raw))
}

impl Worker {
    fn new(sh: Arc<Shared>) -> Self {
        let mem = sh.acct.charge(MemoryUse::Fetch, 0);
        Self { sh, scratch: Vec::new(), cache: PageCache::default(), inflight: 0, mem }
    }

    fn account(&mut self) {
        let used = self.scratch.capacity() as u64 + self.cache.bytes + self.inflight;
        self.mem.resize(used);
    }

    /// Makes room for `n` more bytes within the allowance (evicting cached pages, then the
    /// scratch buffer), or fails when `n` can never fit.
    fn make_room(&mut self, n: u64, keep_scratch: bool) -> Result<()> {
        let allowance = self.sh.allowance;
        if n > allowance {
            return Err(LoaderError::Budget {
                budget: self.sh.acct.budget(),
                what: format!("a read of {n} bytes (per-worker fetch allowance {allowance})"),
                needed: n,
            });
        }
        let fixed = self.inflight + if keep_scratch { self.scratch.capacity() as u64 } else { 0 };
        self.cache.evict_to(allowance.saturating_sub(n + fixed));
        if self.cache.bytes + self.scratch.capacity() as u64 + self.inflight + n > allowance {
            self.scratch = Vec::new();
        }
        if self.cache.bytes + self.scratch.capacity() as u64 + self.inflight + n > allowance {
            return Err(LoaderError::Budget {
                budget: self.sh.acct.budget(),
                what: format!("a read of {n} bytes next to {} bytes in flight (allowance {allowance})", self.inflight),
                needed: n + self.inflight,
            });
        }
        self.account();
        Ok(())
    }

    fn scratch(&mut self, n: usize) -> Result<&mut [u8]> {
        if self.scratch.len() < n {
            self.make_room(n as u64, false)?;
            self.scratch.resize(n, 0);
            self.account();
        }
        Ok(&mut self.scratch[..n])
    }

    /// The worker loop: take a buffer set, claim the next batch, assemble, send.
    fn run(mut self, tx: &SyncSender<(usize, Result<Batch>)>) {
        let sh = self.sh.clone();
        loop {
            if sh.stopped.load(Ordering::Acquire) {
                return;
            }
            let Ok(set) = sh.pool.take(&sh.stopped) else { return };
            let index = {
                let mut c = sh.claims();
                if c.next >= sh.total {
                    drop(c);
                    sh.pool.give_back(set);
                    return;
                }
                let i = c.next;
                c.next += 1;
                c.unfinished.insert(i);
                i
            };
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.assemble(index, set)))
                .unwrap_or_else(|p| {
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(ToString::to_string)
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    Err(LoaderError::WorkerPanicked(msg))
                });
            sh.claims().unfinished.remove(&index);
            sh.acct.notify();
            if tx.send((index, result)).is_err() {
                return;
            }
        }
    }

    /// Assembles batch `index` into `set`, substituting bad samples in skip mode.
    fn assemble(&mut self, index: usize, mut set: BufferSet) -> Result<Batch> {
        let sh = self.sh.clone();
        match self.assemble_into(index, &mut set) {
            Ok((slots, plans, validity, skipped)) => match self.finish(index, &slots, &plans, &validity, skipped, &set)
            {
                Ok(mut batch) => {
                    batch.lease = Some(Lease::new(sh.pool.clone(), set));
                    Ok(batch)
                }
                Err(e) => {
                    sh.pool.give_back(set);
                    Err(e)
                }
            },
            Err(e) => {
                sh.pool.give_back(set);
                Err(e)
            }
        }
    }

    fn assemble_into(&mut self, index: usize, set: &mut BufferSet) -> Result<Assembled> {
        let sh = self.sh.clone();
        let rows = sh.plan.batch(index).ok_or_else(|| LoaderError::WorkerPanicked(format!("no batch {index}")))?;
        let mut slots = Vec::with_capacity(rows.len());
        for (j, &row) in rows.iter().enumerate() {
            let pos = sh.position(index, j);
            let (frag, phys) = sh
                .catalog
                .locate(row)
                .ok_or_else(|| LoaderError::WorkerPanicked(format!("row {row} is outside the dataset")))?;
            slots.push(SlotRow { row, frag, phys, pos, real: pos < sh.rows_n });
        }
        // Block mode: the window fragments of this batch's real rows, admitted in order.
        let mut held: HashMap<usize, Arc<FragmentData>> = HashMap::new();
        let mut releases: BTreeMap<usize, u64> = BTreeMap::new();
        if let Some(window) = &sh.window {
            for s in slots.iter().filter(|s| s.real) {
                *releases.entry(s.frag).or_default() += 1;
            }
            let mut frags: Vec<usize> = releases.keys().copied().collect();
            frags.sort_by_key(|&f| window.position(f));
            for f in frags {
                let data = self.admit(window, f)?;
                held.insert(f, data);
            }
        }
        let mut skipped = Vec::new();
        let max_attempts = 16 + 4 * slots.len();
        for _ in 0..max_attempts {
            match self.try_fill(index, &slots, &held, set) {
                Ok((plans, validity)) => {
                    if let Some(window) = &sh.window {
                        for (f, n) in releases {
                            window.release(f, n);
                        }
                    }
                    for s in &mut skipped {
                        let s: &mut SkippedSample = s;
                        s.replacement = slots[s.slot].row;
                    }
                    return Ok((slots, plans, validity, skipped));
                }
                Err(FillError::Fatal(e)) => return Err(e),
                Err(FillError::Rows(fails)) => {
                    if !sh.set.skip_bad {
                        let (_, e) = fails.into_iter().next().ok_or(LoaderError::Stopped)?;
                        return Err(e);
                    }
                    let mut seen = BTreeSet::new();
                    for (j, e) in fails {
                        if !seen.insert(j) {
                            continue;
                        }
                        skipped.push(SkippedSample {
                            epoch: sh.epoch,
                            batch: index,
                            slot: j,
                            row: slots[j].row,
                            replacement: slots[j].row,
                            error: e.to_string(),
                        });
                        slots[j] = self.substitute(slots[j])?;
                    }
                }
            }
        }
        Err(LoaderError::corrupt(format!("batch {index}"), "too many unreadable samples to substitute"))
    }

    /// The next row of the epoch's order after `slot`'s position (wrapping), as a substitute.
    fn substitute(&self, slot: SlotRow) -> Result<SlotRow> {
        let sh = &self.sh;
        let g = sh.plan.global_order();
        if g.is_empty() {
            return Err(LoaderError::corrupt("dataset", "no readable rows"));
        }
        let pos = slot.pos + 1;
        let row = g[(pos % g.len() as u64) as usize];
        let (frag, phys) =
            sh.catalog.locate(row).ok_or_else(|| LoaderError::WorkerPanicked(format!("row {row} is outside")))?;
        Ok(SlotRow { row, frag, phys, pos, real: false })
    }

    /// Admits fragment `f` into the window, loading it if it is this worker's turn.
    fn admit(&mut self, window: &WindowCache, f: usize) -> Result<Arc<FragmentData>> {
        let sh = self.sh.clone();
        match window.admit(f, &sh.stopped)? {
            Admission::Ready(d) => Ok(d),
            Admission::Load => match self.load_fragment(window, f) {
                Ok(d) => {
                    let d = Arc::new(d);
                    window.loaded(f, d.clone());
                    Ok(d)
                }
                Err(e) => {
                    window.abandon(f);
                    Err(e)
                }
            },
        }
    }

    /// Reads and decodes every page of fragment `f` this rank needs (one ranged read per
    /// data file), after reserving its bytes in the `Shuffle` share.
    fn load_fragment(&mut self, window: &WindowCache, f: usize) -> Result<FragmentData> {
        let sh = self.sh.clone();
        let entry = &sh.catalog.fragments[f];
        let needed = &sh.needed[f];
        let mut metas: Vec<std::result::Result<Arc<FileMeta>, Fault>> = Vec::with_capacity(entry.files.len());
        for fi in 0..entry.files.len() {
            match sh.catalog.file_meta(f, fi, &sh.fetcher, &sh.acct, sh.meta_cap, &sh.stopped) {
                Ok(m) => metas.push(Ok(m)),
                Err(e) => match Fault::of(&e) {
                    Some(fault) => metas.push(Err(fault)),
                    None => return Err(e),
                },
            }
        }
        // Pages per file and column.
        let mut wanted: Vec<Vec<Vec<usize>>> = Vec::with_capacity(metas.len());
        let mut bytes = 0u64;
        for m in &metas {
            let mut cols = Vec::new();
            if let Ok(meta) = m {
                for chunk in &meta.chunks {
                    let mut pages: Vec<usize> = needed.iter().map(|&r| chunk.page_of(r)).collect();
                    pages.dedup();
                    pages.sort_unstable();
                    pages.dedup();
                    bytes += pages.iter().map(|&p| chunk.pages()[p].block.raw_len).sum::<u64>();
                    cols.push(pages);
                }
            }
            wanted.push(cols);
        }
        let first_need = window.first_need(f);
        let charge = sh.acct.acquire(MemoryUse::Shuffle, bytes, &sh.stopped, &|| first_need <= sh.oldest())?;
        let mut files = Vec::with_capacity(metas.len());
        for (fi, m) in metas.into_iter().enumerate() {
            match m {
                Err(fault) => files.push(Err(fault)),
                Ok(meta) => files.push(Ok(self.load_pages(f, fi, &meta, &wanted[fi])?)),
            }
        }
        Ok(FragmentData { files, _charge: Some(charge) })
    }

    /// Loads the given pages of one data file: decoded bytes or the page's fault.
    fn load_pages(&mut self, f: usize, fi: usize, meta: &FileMeta, wanted: &[Vec<usize>]) -> Result<Vec<PageMap>> {
        let sh = self.sh.clone();
        let key = sh.catalog.fragments[f].files[fi].file.path.clone();
        let mut out: Vec<PageMap> = wanted.iter().map(|_| PageMap::new()).collect();
        let mut list: Vec<(usize, usize, Block)> = Vec::new();
        for (pos, pages) in wanted.iter().enumerate() {
            for &p in pages {
                list.push((pos, p, meta.chunks[pos].pages()[p].block));
            }
        }
        let what = |pos: usize, p: usize| format!("{key}: projected column #{pos} page {p}");
        if sh.fetcher.is_local() {
            for (pos, p, block) in list {
                let raw = if block.codec == Codec::None {
                    self.make_room(0, true)?;
                    let mut v = vec![0u8; block.stored_len as usize];
                    sh.fetcher.read_into(&key, block.offset, &mut v, &sh.stopped)?;
                    verify(&block, &v, sh.set.verify, &|| what(pos, p)).map(|()| Bytes::from(v))
                } else {
                    let n = block.stored_len as usize;
                    self.scratch(n)?;
                    let mut stored = std::mem::take(&mut self.scratch);
                    let r = sh.fetcher.read_into(&key, block.offset, &mut stored[..n], &sh.stopped);
                    let decoded = r.and_then(|()| decode_page(&block, &stored[..n], sh.set.verify, &|| what(pos, p)));
                    self.scratch = stored;
                    decoded
                };
                Self::record_page(&mut out[pos], p, raw)?;
            }
        } else {
            for chunk in self.chunked(&list.iter().map(|(_, _, b)| b.range()).collect::<Vec<_>>()) {
                let ranges: Vec<Range<u64>> = chunk.clone().map(|k| list[k].2.range()).collect();
                self.begin_inflight(ranges.iter().map(|r| r.end - r.start).sum())?;
                let got = sh.fetcher.fetch(&key, &ranges, &sh.stopped)?;
                for (k, stored) in chunk.zip(got) {
                    let (pos, p, block) = list[k];
                    let raw = decode_page(&block, &stored, sh.set.verify, &|| what(pos, p));
                    Self::record_page(&mut out[pos], p, raw)?;
                }
            }
            self.end_inflight();
        }
        Ok(out)
    }

    fn record_page(map: &mut PageMap, p: usize, raw: Result<Bytes>) -> Result<()> {
        match raw {
            Ok(b) => {
                map.insert(p, Ok(b));
                Ok(())
            }
            Err(e) => match Fault::of(&e) {
                Some(fault) => {
                    map.insert(p, Err(fault));
                    Ok(())
                }
                None => Err(e),
            },
        }
    }

    /// Splits ranges into consecutive groups of at most the request limit (a single larger
    /// range forms its own group).
    fn chunked(&self, ranges: &[Range<u64>]) -> Vec<Range<usize>> {
        let limit = self.sh.set.max_fetch.min(self.sh.allowance / 2).max(1);
        let mut out = Vec::new();
        let mut start = 0;
        let mut sum = 0u64;
        for (i, r) in ranges.iter().enumerate() {
            let n = r.end - r.start;
            if i > start && sum + n > limit {
                out.push(start..i);
                start = i;
                sum = 0;
            }
            sum += n;
        }
        if start < ranges.len() {
            out.push(start..ranges.len());
        }
        out
    }

    /// Counts the bytes of one in-flight request against this worker's allowance (until
    /// [`Worker::end_inflight`]).
    fn begin_inflight(&mut self, n: u64) -> Result<()> {
        self.end_inflight();
        self.make_room(n, true)?;
        self.inflight = n;
        self.account();
        Ok(())
    }

    fn end_inflight(&mut self) {
        self.inflight = 0;
        self.account();
    }

    /// One fill attempt: every slot's bytes into the column buffers.
    fn try_fill(
        &mut self,
        index: usize,
        slots: &[SlotRow],
        held: &HashMap<usize, Arc<FragmentData>>,
        set: &mut BufferSet,
    ) -> std::result::Result<Filled, FillError> {
        let sh = self.sh.clone();
        let cat = &sh.catalog;
        let b = slots.len();
        let mut fails: Vec<(usize, LoaderError)> = Vec::new();
        // Indexes of every file the batch touches.
        let mut metas: HashMap<(usize, usize), Arc<FileMeta>> = HashMap::new();
        let mut bad_frags: BTreeMap<usize, LoaderError> = BTreeMap::new();
        for s in slots {
            for fi in 0..cat.fragments[s.frag].files.len() {
                if metas.contains_key(&(s.frag, fi)) || bad_frags.contains_key(&s.frag) {
                    continue;
                }
                match cat.file_meta(s.frag, fi, &sh.fetcher, &sh.acct, sh.meta_cap, &sh.stopped) {
                    Ok(m) => {
                        if s.phys >= m.data_file.footer().row_count {
                            return Err(FillError::Fatal(LoaderError::corrupt(
                                format!("fragment {}", s.frag),
                                "deletion vector points past the file",
                            )));
                        }
                        metas.insert((s.frag, fi), m);
                    }
                    Err(e) if e.is_data_error() => {
                        bad_frags.insert(s.frag, e);
                    }
                    Err(e) => return Err(FillError::Fatal(e)),
                }
            }
        }
        if !bad_frags.is_empty() {
            for (j, s) in slots.iter().enumerate() {
                if let Some(e) = bad_frags.get(&s.frag) {
                    fails.push((j, clone_fault(e)));
                }
            }
            return Err(FillError::Rows(fails));
        }
        // Layout of every column, then buffers large enough.
        let mut plans = Vec::with_capacity(cat.columns.len());
        let mut validity = Vec::with_capacity(cat.columns.len());
        for (c, layout) in cat.columns.iter().enumerate() {
            let mut sizes = Vec::with_capacity(b * layout.ragged);
            let mut valid = Vec::with_capacity(if layout.nullable { b } else { 0 });
            for s in slots {
                let (fi, pos) = cat.fragments[s.frag].column_file[c];
                let m = metas
                    .get(&(s.frag, fi))
                    .ok_or_else(|| FillError::Fatal(LoaderError::WorkerPanicked("file index missing".into())))?;
                sizes.extend_from_slice(m.chunks[pos].sizes(s.phys));
                if layout.nullable {
                    valid.push(m.chunks[pos].is_valid(s.phys));
                }
            }
            plans.push(ColumnPlan::new(layout, b, sizes)?);
            validity.push(layout.nullable.then_some(valid));
        }
        for (c, plan) in plans.iter().enumerate() {
            sh.pool.ensure(set, c, plan.buffer_bytes(b), &sh.stopped, &|| sh.oldest() >= index)?;
        }
        // Group slots by data file; serve window rows from memory, the rest from storage.
        let mut groups: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
        for (j, s) in slots.iter().enumerate() {
            for fi in 0..cat.fragments[s.frag].files.len() {
                groups.entry((s.frag, fi)).or_default().push(j);
            }
        }
        let mut remote = Vec::new();
        for ((frag, fi), js) in groups {
            let meta = metas
                .get(&(frag, fi))
                .cloned()
                .ok_or_else(|| FillError::Fatal(LoaderError::WorkerPanicked("file index missing".into())))?;
            let window_data = held.get(&frag).cloned().or_else(|| sh.window.as_ref().and_then(|w| w.resident(frag)));
            let direct = match window_data {
                Some(data) => self.fill_from_window(&data, fi, &meta, &js, slots, &plans, set, &mut fails)?,
                None => js,
            };
            if direct.is_empty() {
                continue;
            }
            if sh.fetcher.is_local() {
                self.fill_local(frag, fi, &meta, &direct, slots, &plans, set, &mut fails)?;
            } else {
                let needs: std::collections::VecDeque<Need> =
                    self.direct_needs(frag, fi, &meta, &direct, slots, &plans).into();
                let ranges = needs.iter().filter_map(Need::range).collect();
                let key = cat.fragments[frag].files[fi].file.path.clone();
                remote.push(RemoteFile {
                    frag,
                    fi,
                    meta,
                    key,
                    needs,
                    ranges,
                    fetched: std::collections::VecDeque::new(),
                });
            }
        }
        if !remote.is_empty() {
            self.fill_remote(remote, &plans, set, &mut fails)?;
        }
        self.account();
        if fails.is_empty() { Ok((plans, validity)) } else { Err(FillError::Rows(fails)) }
    }

    /// Copies rows out of window pages; returns the slots whose pages are not resident.
    #[allow(clippy::too_many_arguments)]
    fn fill_from_window(
        &mut self,
        data: &FragmentData,
        fi: usize,
        meta: &FileMeta,
        js: &[usize],
        slots: &[SlotRow],
        plans: &[ColumnPlan],
        set: &mut BufferSet,
        fails: &mut Vec<(usize, LoaderError)>,
    ) -> std::result::Result<Vec<usize>, FillError> {
        let sh = self.sh.clone();
        let cat = &sh.catalog;
        let fe = &cat.fragments[slots[js[0]].frag].files[fi];
        let pages = match data.files.get(fi) {
            Some(Ok(p)) => p,
            Some(Err(fault)) => {
                for &j in js {
                    fails.push((j, fault.to_error()));
                }
                return Ok(Vec::new());
            }
            None => return Ok(js.to_vec()),
        };
        // A slot is served from the window only if every column's page is resident.
        let mut direct = Vec::new();
        let mut served = Vec::new();
        for &j in js {
            let all = fe.columns.iter().enumerate().all(|(pos, _)| {
                let page = meta.chunks[pos].page_of(slots[j].phys);
                pages.get(pos).is_some_and(|m| m.contains_key(&page))
            });
            if all { served.push(j) } else { direct.push(j) }
        }
        for (pos, &c) in fe.columns.iter().enumerate() {
            let layout = &cat.columns[c];
            let chunk = &meta.chunks[pos];
            let buf = column_buf(set, c)?;
            for &j in &served {
                let (page, range) = chunk.locate(slots[j].phys);
                match pages.get(pos).and_then(|m| m.get(&page)) {
                    Some(Ok(raw)) => {
                        let r = raw
                            .get(range)
                            .ok_or_else(|| LoaderError::corrupt(&fe.file.path, "row outside its page"))
                            .and_then(|src| plans[c].write_row(layout, buf, j, src));
                        if let Err(e) = r {
                            slot_error(fails, j, e)?;
                        }
                    }
                    Some(Err(fault)) => fails.push((j, fault.to_error())),
                    None => return Err(FillError::Fatal(LoaderError::WorkerPanicked("window page vanished".into()))),
                }
            }
        }
        Ok(direct)
    }

    /// What serving slots `js` from data file `fi` of fragment `frag` takes: rows, pages and
    /// cached pages, in the order they are served.
    fn direct_needs(
        &mut self,
        frag: usize,
        fi: usize,
        meta: &FileMeta,
        js: &[usize],
        slots: &[SlotRow],
        plans: &[ColumnPlan],
    ) -> Vec<Need> {
        let sh = self.sh.clone();
        let cat = &sh.catalog;
        let fe = &cat.fragments[frag].files[fi];
        let local = sh.fetcher.is_local();
        let verify = sh.set.verify;
        let mut needs = Vec::new();
        for (pos, &c) in fe.columns.iter().enumerate() {
            let chunk = &meta.chunks[pos];
            let layout = &cat.columns[c];
            let mut items: Vec<(usize, u64)> = js.iter().map(|&j| (j, slots[j].phys)).collect();
            items.sort_by_key(|&(j, phys)| (phys, j));
            let mut k = 0;
            while k < items.len() {
                let page = chunk.page_of(items[k].1);
                let mut end = k + 1;
                while end < items.len() && chunk.page_of(items[end].1) == page {
                    end += 1;
                }
                let group = items[k..end].to_vec();
                k = end;
                let block = chunk.pages()[page].block;
                if !verify && block.codec == Codec::None {
                    for (j, phys) in group {
                        let (_, r) = chunk.locate(phys);
                        let range = block.offset + r.start as u64..block.offset + r.end as u64;
                        needs.push(Need::Row { col: c, j, range });
                    }
                } else if let Some(raw) = self.cache.get((frag, fi, pos, page)) {
                    needs.push(Need::Cached { pos, col: c, raw, items: group });
                } else if local
                    && group.len() == 1
                    && chunk.pages()[page].row_count == 1
                    && plans[c].direct_range(layout, group[0].0).is_some_and(|d| d.len() as u64 == block.raw_len)
                {
                    needs.push(Need::Single { col: c, j: group[0].0, block });
                } else {
                    needs.push(Need::Page { pos, col: c, page, block, items: group });
                }
            }
        }
        needs
    }

    /// Serves slots `js` from a local data file with positioned reads.
    #[allow(clippy::too_many_arguments)]
    fn fill_local(
        &mut self,
        frag: usize,
        fi: usize,
        meta: &FileMeta,
        js: &[usize],
        slots: &[SlotRow],
        plans: &[ColumnPlan],
        set: &mut BufferSet,
        fails: &mut Vec<(usize, LoaderError)>,
    ) -> std::result::Result<(), FillError> {
        let key = self.sh.catalog.fragments[frag].files[fi].file.path.clone();
        for need in self.direct_needs(frag, fi, meta, js, slots, plans) {
            self.serve(frag, fi, meta, &key, need, None, plans, set, fails)?;
        }
        self.account();
        Ok(())
    }

    /// Serves the object-store files of a batch. Every file's ranges are split into requests
    /// of at most the request limit, and requests are packed into waves of at most that many
    /// bytes and `max_requests_in_flight` requests; the requests of a wave (usually every file the batch touches) go out at once,
    /// so a batch costs about one round trip, not one per file. Each wave is counted while in
    /// flight, and what it brought is served before the next wave starts.
    fn fill_remote(
        &mut self,
        mut files: Vec<RemoteFile>,
        plans: &[ColumnPlan],
        set: &mut BufferSet,
        fails: &mut Vec<(usize, LoaderError)>,
    ) -> std::result::Result<(), FillError> {
        let sh = self.sh.clone();
        let limit = self.sh.set.max_fetch.min(self.sh.allowance / 2).max(1);
        // (file, its range group, bytes) in order, then waves of consecutive units.
        let mut units: Vec<(usize, Range<usize>, u64)> = Vec::new();
        for (f, file) in files.iter().enumerate() {
            for g in self.chunked(&file.ranges) {
                let n = file.ranges[g.clone()].iter().map(|r| r.end - r.start).sum();
                units.push((f, g, n));
            }
        }
        let mut waves: Vec<Range<usize>> = Vec::new();
        let (mut start, mut sum) = (0, 0u64);
        for (i, u) in units.iter().enumerate() {
            if i > start && (sum + u.2 > limit || i - start >= sh.set.max_requests) {
                waves.push(start..i);
                start = i;
                sum = 0;
            }
            sum += u.2;
        }
        if start < units.len() {
            waves.push(start..units.len());
        }
        for wave in waves {
            let wave = &units[wave];
            self.begin_inflight(wave.iter().map(|u| u.2).sum())?; // the previous wave is served
            let requests: Vec<(&str, &[Range<u64>])> =
                wave.iter().map(|(f, g, _)| (files[*f].key.as_str(), &files[*f].ranges[g.clone()])).collect();
            let got = sh.fetcher.fetch_many(&requests, &sh.stopped)?;
            for ((f, _, _), bodies) in wave.iter().zip(got) {
                files[*f].fetched.extend(bodies);
            }
            for file in &mut files {
                self.serve_ready(file, plans, set, fails)?;
            }
        }
        for file in &mut files {
            self.serve_ready(file, plans, set, fails)?; // files with cached pages only
        }
        self.end_inflight();
        Ok(())
    }

    /// Serves a remote file's needs in order while their bytes are here.
    fn serve_ready(
        &mut self,
        file: &mut RemoteFile,
        plans: &[ColumnPlan],
        set: &mut BufferSet,
        fails: &mut Vec<(usize, LoaderError)>,
    ) -> std::result::Result<(), FillError> {
        while let Some(need) = file.needs.front() {
            let stored = if need.range().is_some() {
                match file.fetched.pop_front() {
                    Some(b) => Some(b),
                    None => break,
                }
            } else {
                None
            };
            let Some(need) = file.needs.pop_front() else { break };
            let meta = file.meta.clone();
            self.serve(file.frag, file.fi, &meta, &file.key, need, stored, plans, set, fails)?;
        }
        Ok(())
    }

    /// Serves one need: with `stored` bytes already fetched (object store), or by reading
    /// them now (local). Data errors go to `fails`, anything else fails the batch.
    #[allow(clippy::too_many_arguments)]
    fn serve(
        &mut self,
        frag: usize,
        fi: usize,
        meta: &FileMeta,
        key: &str,
        need: Need,
        stored: Option<Bytes>,
        plans: &[ColumnPlan],
        set: &mut BufferSet,
        fails: &mut Vec<(usize, LoaderError)>,
    ) -> std::result::Result<(), FillError> {
        match need {
            Need::Row { col, j, range } => {
                if let Err(e) = self.read_row(key, col, j, &range, stored.as_deref(), &plans[col], set) {
                    slot_error(fails, j, e)?;
                }
            }
            Need::Single { col, j, block } => {
                if let Err(e) = self.read_single(key, col, j, &block, &plans[col], set) {
                    slot_error(fails, j, e)?;
                }
            }
            Need::Page { pos, col, page, block, items } => {
                let fetched = stored.is_some();
                match self.read_page(key, col, page, &block, stored) {
                    Ok(raw) => {
                        self.write_rows(&raw, meta, pos, col, &items, plans, set, fails)?;
                        // Cache the page only if it holds rows this batch did not take (a later
                        // batch may want them), and never as a slice of a fetched body, which
                        // would keep the whole coalesced body alive unaccounted.
                        let rows_left = (items.len() as u64) < meta.chunks[pos].pages()[page].row_count;
                        if rows_left && raw.len() as u64 <= self.sh.allowance / 2 {
                            self.make_room(raw.len() as u64, true)?;
                            let raw = if fetched { Bytes::copy_from_slice(&raw) } else { raw };
                            self.cache.insert((frag, fi, pos, page), raw);
                        }
                    }
                    Err(e) if e.is_data_error() => {
                        for &(j, _) in &items {
                            fails.push((j, clone_fault(&e)));
                        }
                    }
                    Err(e) => return Err(FillError::Fatal(e)),
                }
            }
            Need::Cached { pos, col, raw, items } => {
                self.write_rows(&raw, meta, pos, col, &items, plans, set, fails)?;
            }
        }
        Ok(())
    }

    /// One row on its own: positioned read straight into its slot when the layout allows,
    /// else through the scratch buffer (or from fetched bytes).
    #[allow(clippy::too_many_arguments)]
    fn read_row(
        &mut self,
        key: &str,
        col: usize,
        j: usize,
        range: &Range<u64>,
        stored: Option<&[u8]>,
        plan: &ColumnPlan,
        set: &mut BufferSet,
    ) -> Result<()> {
        let sh = self.sh.clone();
        let layout = &sh.catalog.columns[col];
        let len = (range.end - range.start) as usize;
        match (stored, plan.direct_range(layout, j)) {
            (Some(bytes), _) => plan.write_row(layout, column_buf(set, col)?, j, bytes),
            (None, Some(dst)) if dst.len() == len => {
                let buf = column_buf(set, col)?;
                let r = sh.fetcher.read_into(key, range.start, &mut buf[dst.clone()], &sh.stopped);
                plan.pad(buf, j, len);
                r.and_then(|()| ColumnPlan::check_direct(layout, buf, dst))
            }
            (None, _) => {
                self.scratch(len)?;
                let mut tmp = std::mem::take(&mut self.scratch);
                let r = sh.fetcher.read_into(key, range.start, &mut tmp[..len], &sh.stopped);
                let r = r.and_then(|()| plan.write_row(layout, column_buf(set, col)?, j, &tmp[..len]));
                self.scratch = tmp;
                r
            }
        }
    }

    /// A page that is exactly one wanted row: read (uncompressed) or decompressed (through
    /// the scratch buffer) straight into the row's slot, then CRC-checked.
    fn read_single(
        &mut self,
        key: &str,
        col: usize,
        j: usize,
        block: &Block,
        plan: &ColumnPlan,
        set: &mut BufferSet,
    ) -> Result<()> {
        let sh = self.sh.clone();
        let layout = &sh.catalog.columns[col];
        let check = sh.set.verify;
        let what = || format!("{key}: column {:?} page at {}", layout.name, block.offset);
        let crc_ok = |bytes: &[u8]| verify(block, bytes, check, &what);
        let dst = plan
            .direct_range(layout, j)
            .ok_or_else(|| LoaderError::WorkerPanicked("single-row page without a direct slot".into()))?;
        if block.codec == Codec::None {
            let buf = column_buf(set, col)?;
            let r = sh.fetcher.read_into(key, block.offset, &mut buf[dst.clone()], &sh.stopped);
            let r = r.and_then(|()| crc_ok(&buf[dst.clone()]));
            plan.pad(buf, j, dst.len());
            return r.and_then(|()| ColumnPlan::check_direct(layout, buf, dst));
        }
        let n = block.stored_len as usize;
        self.scratch(n)?;
        let mut tmp = std::mem::take(&mut self.scratch);
        let buf = column_buf(set, col)?;
        let r = sh.fetcher.read_into(key, block.offset, &mut tmp[..n], &sh.stopped).and_then(|()| {
            datafile::decode_block_into(block, &tmp[..n], &mut buf[dst.clone()], check, &what)
                .map_err(|e| from_format(&what(), e))
        });
        self.scratch = tmp;
        plan.pad(buf, j, dst.len());
        r.and_then(|()| ColumnPlan::check_direct(layout, buf, dst))
    }

    /// A whole page, verified and decoded (from fetched bytes, or read now).
    fn read_page(&mut self, key: &str, col: usize, page: usize, block: &Block, stored: Option<Bytes>) -> Result<Bytes> {
        let sh = self.sh.clone();
        let check = sh.set.verify;
        let what = || format!("{key}: column {:?} page {page}", sh.catalog.columns[col].name);
        if let Some(bytes) = stored {
            if block.codec == Codec::None {
                // Zero copy: the fetched bytes are the page.
                verify(block, &bytes, check, &what)?;
                return Ok(bytes);
            }
            return decode_page(block, &bytes, check, &what);
        }
        if block.codec == Codec::None {
            // Read straight into the page's own buffer: it becomes the cached raw bytes.
            self.make_room(block.stored_len, true)?;
            let mut v = vec![0u8; block.stored_len as usize];
            sh.fetcher.read_into(key, block.offset, &mut v, &sh.stopped)?;
            verify(block, &v, check, &what)?;
            return Ok(Bytes::from(v));
        }
        let n = block.stored_len as usize;
        self.scratch(n)?;
        let mut tmp = std::mem::take(&mut self.scratch);
        let r = sh
            .fetcher
            .read_into(key, block.offset, &mut tmp[..n], &sh.stopped)
            .and_then(|()| decode_page(block, &tmp[..n], check, &what));
        self.scratch = tmp;
        r
    }

    /// Copies rows out of a decoded page into their slots.
    #[allow(clippy::too_many_arguments)]
    fn write_rows(
        &self,
        raw: &[u8],
        meta: &FileMeta,
        pos: usize,
        col: usize,
        items: &[(usize, u64)],
        plans: &[ColumnPlan],
        set: &mut BufferSet,
        fails: &mut Vec<(usize, LoaderError)>,
    ) -> std::result::Result<(), FillError> {
        let layout = &self.sh.catalog.columns[col];
        let chunk = &meta.chunks[pos];
        let buf = column_buf(set, col)?;
        for &(j, phys) in items {
            let (_, range) = chunk.locate(phys);
            let r = raw
                .get(range)
                .ok_or_else(|| LoaderError::corrupt(&layout.name, "row outside its page"))
                .and_then(|src| plans[col].write_row(layout, buf, j, src));
            if let Err(e) = r {
                slot_error(fails, j, e)?;
            }
        }
        Ok(())
    }

    /// Describes the filled buffers as a [`Batch`].
    fn finish(
        &self,
        index: usize,
        slots: &[SlotRow],
        plans: &[ColumnPlan],
        validity: &[Option<Vec<bool>>],
        skipped: Vec<SkippedSample>,
        set: &BufferSet,
    ) -> Result<Batch> {
        let sh = &self.sh;
        let b = slots.len();
        let mut columns = Vec::with_capacity(plans.len());
        for (c, plan) in plans.iter().enumerate() {
            let layout = &sh.catalog.columns[c];
            let byte_len = plan.buffer_bytes(b);
            let capacity = set.bufs[c]
                .as_ref()
                .ok_or_else(|| LoaderError::WorkerPanicked(format!("column {c} has no buffer")))?
                .0
                .capacity();
            if byte_len > capacity {
                return Err(LoaderError::WorkerPanicked(format!(
                    "column {c}: {byte_len} bytes in a {capacity}-byte buffer"
                )));
            }
            let (lengths, offsets) = plan.side_data(layout, b, sh.set.ragged_offsets);
            columns.push(HostColumn {
                name: layout.name.clone(),
                elem: layout.kind,
                shape: plan.tensor_shape(b),
                byte_len,
                lengths,
                ragged_dims: layout.ragged,
                offsets,
                valid: validity[c].clone(),
                text: layout.is_text(),
            });
        }
        if !skipped.is_empty() {
            sh.skipped.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(skipped.iter().cloned());
        }
        Ok(Batch {
            columns,
            rows: slots.iter().map(|s| s.row).collect(),
            epoch: sh.epoch,
            index,
            position: sh.position(index, 0),
            skipped,
            lease: None,
        })
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
    allowance: u64,
}

impl Shares {
    /// Plan and indexes first, then the block window (its sweep peak), at least two batch
    /// buffers and a minimal fetch allowance per worker; spare bytes go to more batch
    /// buffers (up to `prefetch_batches`) and then to fetch/decode buffers.
    fn size(budget: u64, plan_bytes: u64, shuffle: u64, batch_bytes: u64, set: &PipelineSettings) -> Result<Self> {
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
        let sets = (set.prefetch_batches as u64).min((budget - fixed) / batch_bytes).max(2) as usize;
        let ready = sets as u64 * batch_bytes;
        let fetch = budget - meta - shuffle - ready;
        Ok(Self { meta, meta_cap, ready, fetch, sets, allowance: fetch / set.workers as u64 })
    }
}

/// Block mode: the physical rows of each fragment this rank reads at real positions, the
/// window cache (admission order = first need), and the peak window bytes (estimated).
fn block_schedule(
    catalog: &Catalog,
    plan: &Plan,
    rows_n: u64,
    position: &dyn Fn(usize, usize) -> u64,
) -> Result<(Vec<Vec<u64>>, WindowCache, u64)> {
    let frags = catalog.fragments.len();
    let mut needed: Vec<Vec<u64>> = vec![Vec::new(); frags];
    let mut first = vec![usize::MAX; frags];
    let mut last = vec![0usize; frags];
    let mut uses = vec![0u64; frags];
    for (i, batch) in plan.batches().enumerate() {
        for (j, &row) in batch.iter().enumerate() {
            if position(i, j) >= rows_n {
                continue; // padding: read directly, not through the window
            }
            let (f, phys) = catalog
                .locate(row)
                .ok_or_else(|| LoaderError::WorkerPanicked(format!("row {row} is outside the dataset")))?;
            needed[f].push(phys);
            uses[f] += 1;
            first[f] = first[f].min(i);
            last[f] = last[f].max(i);
        }
    }
    for n in &mut needed {
        n.sort_unstable();
        n.dedup();
    }
    let est: Vec<u64> = (0..frags).map(|f| catalog.estimated_fragment_bytes(f)).collect();
    let peak = sweep_peak(&first, &last, &est, plan.batches_per_rank());
    Ok((needed, WindowCache::new(first, uses), peak))
}

/// One epoch's running pipeline, owned by the consumer.
#[derive(Debug)]
pub(crate) struct EpochPipeline {
    shared: Arc<Shared>,
    rx: Option<Receiver<(usize, Result<Batch>)>>,
    handles: Vec<JoinHandle<()>>,
    pending: BTreeMap<usize, Result<Batch>>,
    next: usize,
    _plan_charge: Charge,
}

impl EpochPipeline {
    /// Sizes the memory shares, builds the block schedule, and starts the workers.
    pub(crate) fn start(
        catalog: Arc<Catalog>,
        fetcher: Arc<Fetcher>,
        acct: Arc<Accountant>,
        plan: Arc<Plan>,
        set: PipelineSettings,
        skipped: Arc<Mutex<Vec<SkippedSample>>>,
    ) -> Result<Self> {
        let pc = plan.config();
        let rows_n = plan.global_order().len() as u64;
        let start = plan.checkpoint(0, 0).map_or(0, |s| s.samples_consumed_global);
        let global_batch = plan.global_batch_size() as u64;
        let total = plan.batches_per_rank();
        let (batch_size, rank) = (pc.batch_size, pc.rank);
        let position = |i: usize, j: usize| start + i as u64 * global_batch + (rank * batch_size + j) as u64;
        let (needed, window, shuffle_share) = if set.block {
            let (needed, window, peak) = block_schedule(&catalog, &plan, rows_n, &position)?;
            (needed, Some(window), peak)
        } else {
            (Vec::new(), None, 0)
        };
        let plan_bytes = 8 * (plan.effective_order().len() as u64 + needed.iter().map(|n| n.len() as u64).sum::<u64>());
        let batch_bytes: u64 =
            (0..catalog.columns.len()).map(|c| catalog.estimated_slot_bytes(c) * batch_size as u64).sum::<u64>().max(1);
        let shares = Shares::size(acct.budget(), plan_bytes, shuffle_share, batch_bytes, &set)?;
        let (sets, meta_cap, allowance) = (shares.sets, shares.meta_cap, shares.allowance);
        acct.set_shares([
            (MemoryUse::Ready, shares.ready),
            (MemoryUse::Fetch, shares.fetch),
            (MemoryUse::Shuffle, shuffle_share),
            (MemoryUse::Metadata, shares.meta),
        ]);
        let plan_charge = acct.charge(MemoryUse::Metadata, plan_bytes);
        let pool = BufferPool::new(acct.clone(), catalog.columns.len(), sets, set.alloc.clone(), set.reuse);
        let workers = set.workers;
        let shared = Arc::new(Shared {
            catalog,
            fetcher,
            acct,
            epoch: plan.epoch(),
            plan,
            set,
            rows_n,
            start,
            global_batch,
            batch_size,
            rank,
            total,
            claims: Mutex::new(Claims::default()),
            stopped: AtomicBool::new(false),
            pool,
            window,
            needed,
            meta_cap,
            allowance,
            skipped,
        });
        let (tx, rx) = sync_channel(sets);
        let mut handles = Vec::with_capacity(workers);
        for w in 0..workers {
            let worker = Worker::new(shared.clone());
            let tx = tx.clone();
            let spawned =
                std::thread::Builder::new().name(format!("tessera-loader-{w}")).spawn(move || worker.run(&tx));
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    shared.stop();
                    return Err(LoaderError::config(format!("cannot start a worker thread: {e}")));
                }
            }
        }
        Ok(Self { shared, rx: Some(rx), handles, pending: BTreeMap::new(), next: 0, _plan_charge: plan_charge })
    }

    /// Batches this pipeline yields in total.
    pub(crate) fn total(&self) -> usize {
        self.shared.total
    }

    /// The next batch in order; `None` after the last.
    pub(crate) fn next_batch(&mut self) -> Option<Result<Batch>> {
        if self.next >= self.shared.total {
            self.shutdown();
            return None;
        }
        loop {
            if let Some(r) = self.pending.remove(&self.next) {
                self.next += 1;
                if let Ok(Some(lease)) = r.as_ref().map(|b| b.lease.as_ref()) {
                    lease.deliver();
                }
                return Some(r);
            }
            let rx = self.rx.as_ref()?;
            let Ok((i, r)) = rx.recv() else {
                self.next = self.shared.total;
                return Some(Err(LoaderError::WorkerPanicked("every worker exited early".into())));
            };
            self.pending.insert(i, r);
        }
    }

    /// Stops the workers and waits for them.
    pub(crate) fn shutdown(&mut self) {
        self.shared.stop();
        self.rx = None;
        self.pending.clear();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
        self.shared.catalog.clear_meta();
    }
}

impl Drop for EpochPipeline {
    fn drop(&mut self) {
        self.shutdown();
    }
}
