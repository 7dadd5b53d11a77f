//! Filling one batch's buffers from pages, on a worker thread.
//!
//! ```text
//!  plan's batch i ─► slots (row → fragment, physical row) ─► file indexes ─► column plans,
//!  buffers sized ─► per data file the batch touches:
//!    block window holds its pages ─► copy the rows out of the decoded pages
//!    otherwise (storage): local positioned reads, or object-store range reads in waves
//!  ─► CRC, decompress, copy into the slots ─► bad rows substituted (skip mode), retried
//! ```
//!
//! Every step of one fill attempt shares a `BatchFill` (the slots, the column plans, the
//! buffer set, the data errors so far) and takes it plus what is its own: a data file
//! (`FileRef`), its slots, one need. A `Worker` keeps its scratch buffer within its allowance
//! of the `Fetch` share; object-store waves stage bytes in buffers every worker of the epoch
//! shares (`staging`), and decoded pages are cached for every worker (`page_cache`), each in
//! its own part of the `Fetch` share.
//! `storage` reads what the window does not hold; `window_load` fills the block-shuffle
//! window.

pub(crate) mod page_cache;
pub(crate) mod staging;
mod storage;
mod window_load;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use tessera::Codec;
use tessera::datafile::{self, Block, ChunkIndex};

use crate::assemble::ColumnPlan;
use crate::batch::{HostBatch as Batch, SkippedSample};
use crate::buffer::HostBuffer;
use crate::catalog::{FileEntry, FileMeta, FragmentEntry};
use crate::error::{LoaderError, Result, from_format};
use crate::memory::{Charge, MemoryUse};
use crate::mixture::Fill;
use crate::pipeline::Shared;
use crate::pool::{BufferPool, BufferSet, FillTarget, Filling, Grown, Lease};
use crate::source::Fetcher;
use crate::transform;
use crate::window::{Fault, FragmentData};

/// One row slot of a batch being assembled.
#[derive(Clone, Debug)]
struct SlotRow {
    row: u64,
    /// The fragment's index ([`FragmentEntry::index`]).
    frag: usize,
    /// The fragment, held for the batch (a lazy catalog may drop it from its cache meanwhile).
    entry: Arc<FragmentEntry>,
    phys: u64,
    /// Position in the padded global order this slot's row comes from (advances on
    /// substitution).
    pos: u64,
    /// A real (not padding, not substituted) row.
    real: bool,
    /// Block mode on an object store: the window unit serving this real row.
    unit: Option<usize>,
}

/// Why a fill attempt failed.
#[derive(Debug)]
enum FillError {
    /// Data errors of these slots (skip mode substitutes them and retries).
    Rows(Vec<(usize, LoaderError)>),
    /// Anything else.
    Fatal(LoaderError),
}

type FillResult<T> = std::result::Result<T, FillError>;

impl From<LoaderError> for FillError {
    fn from(e: LoaderError) -> Self {
        Self::Fatal(e)
    }
}

/// Records a slot's data error, or fails the batch for any other error.
fn slot_error(fails: &mut Vec<(usize, LoaderError)>, j: usize, e: LoaderError) -> FillResult<()> {
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

/// A filled attempt: column plans and validity per column.
type Filled = (Vec<ColumnPlan>, Vec<Option<Vec<bool>>>);

/// A filled batch: its (possibly substituted) slots, column plans, validity per column, and
/// what was skipped.
struct Assembled {
    slots: Vec<SlotRow>,
    plans: Vec<ColumnPlan>,
    validity: Vec<Option<Vec<bool>>>,
    skipped: Vec<SkippedSample>,
}

/// One fill attempt of one batch: what every step of filling shares.
struct BatchFill<'a> {
    /// The batch's slots.
    slots: &'a [SlotRow],
    /// Layout of each column's rows in its buffer.
    plans: &'a [ColumnPlan],
    /// The buffers being filled, one per column.
    set: &'a mut dyn FillTarget,
    /// Data errors so far, per slot (skip mode substitutes these slots and retries).
    fails: Vec<(usize, LoaderError)>,
}

/// One data file of a fragment, as a batch reads it.
#[derive(Clone, Copy)]
struct FileRef<'a> {
    frag: usize,
    /// The file's position in its fragment.
    fi: usize,
    entry: &'a FileEntry,
    meta: &'a FileMeta,
    /// The storage of the file's source.
    fetcher: &'a Fetcher,
}

impl<'a> FileRef<'a> {
    /// The storage key (path) of the file.
    fn key(&self) -> &'a str {
        &self.entry.file.path
    }
}

/// The bytes column `c`'s stored rows are filled into ([`BufferSet::fill_bytes`]).
fn column_buf(set: &mut dyn FillTarget, c: usize) -> Result<&mut [u8]> {
    set.fill_bytes(c).ok_or_else(|| LoaderError::WorkerPanicked(format!("column {c}'s buffer is missing or shared")))
}

/// Checks a block's stored bytes through the reference (length; CRC-32 when `verify`).
fn verify(block: &Block, stored: &[u8], verify: bool, what: &dyn Fn() -> String) -> Result<()> {
    datafile::verify_block(block, stored, verify, what).map_err(|e| from_format(&what(), e))
}

/// Verifies (optionally) and decodes page `page` of `chunk` from its stored bytes into owned
/// raw bytes, through the reference's decoder (image pages against their row's shape).
fn decode_page(
    chunk: &ChunkIndex,
    page: usize,
    stored: &[u8],
    check: bool,
    what: &dyn Fn() -> String,
) -> Result<Bytes> {
    let block = &chunk.pages()[page].block;
    if block.codec == Codec::None {
        verify(block, stored, check, what)?;
        return Ok(Bytes::copy_from_slice(stored));
    }
    // Sizes were bounded by the footer's validation: at most the block limit.
    let mut raw = vec![0u8; block.raw_len as usize];
    chunk.decode_page_into(page, stored, &mut raw, check, what).map_err(|e| from_format(&what(), e))?;
    Ok(Bytes::from(raw))
}

/// Per-thread worker state, reused from batch to batch.
pub(crate) struct Worker {
    sh: Arc<Shared>,
    /// Stored bytes read to be decoded or verified (local files, window runs), reused.
    scratch: Vec<u8>,
    /// The scratch buffer, counted against the `Fetch` share.
    mem: Charge,
    /// The rows of the batch being assembled, reused from batch to batch.
    rows: Vec<u64>,
    /// Transform buffers (counted with the scratch buffer).
    transform: transform::Scratch,
}

/// The worker's memory: its scratch buffer, within its allowance.
impl Worker {
    pub(crate) fn new(sh: Arc<Shared>) -> Self {
        let mem = sh.acct.charge(MemoryUse::Fetch, 0);
        Self { sh, scratch: Vec::new(), mem, rows: Vec::new(), transform: transform::Scratch::default() }
    }

    fn account(&mut self) {
        self.mem.resize((self.scratch.capacity() + self.transform.capacity_bytes()) as u64);
    }

    /// Fails when one read of `n` bytes exceeds the worker's allowance.
    fn within_allowance(&self, n: u64) -> Result<()> {
        let allowance = self.sh.allowance;
        if n > allowance {
            return Err(LoaderError::Budget {
                budget: self.sh.acct.budget(),
                what: format!("a read of {n} bytes (per-worker fetch allowance {allowance})"),
                needed: n,
            });
        }
        Ok(())
    }

    /// Makes the scratch buffer at least `n` bytes long, within the allowance.
    fn scratch(&mut self, n: usize) -> Result<&mut [u8]> {
        self.within_allowance(n as u64)?;
        if self.scratch.len() < n {
            self.scratch = Vec::new();
            self.scratch.resize(n, 0);
            self.account();
        }
        Ok(&mut self.scratch[..n])
    }
}

/// The slots of batch `index`, its rows computed into `rows` (a buffer reused across batches).
fn slots(sh: &Shared, index: usize, rows: &mut Vec<u64>) -> Result<Vec<SlotRow>> {
    if !sh.plan.batch_into(index, rows) {
        return Err(LoaderError::WorkerPanicked(format!("no batch {index}")));
    }
    // A lazy catalog finds the batch's new fragments together (one round trip per level).
    sh.catalog.find(rows)?;
    let mut slots = Vec::with_capacity(rows.len());
    for (j, &row) in rows.iter().enumerate() {
        let pos = sh.position(index, j);
        let (entry, phys) = sh
            .catalog
            .locate(row)?
            .ok_or_else(|| LoaderError::WorkerPanicked(format!("row {row} is outside the dataset")))?;
        let real = pos < sh.at.rows;
        slots.push(SlotRow { row: sh.catalog.row_id(row), frag: entry.index, entry, phys, pos, real, unit: None });
    }
    Ok(slots)
}

/// A batch: slots, substitution of bad samples, and the finished [`Batch`].
impl Worker {
    /// Assembles batch `index` into `set` (a set of `pool`'s), substituting bad samples in
    /// skip mode.
    pub(crate) fn assemble<B: HostBuffer>(
        &mut self,
        index: usize,
        mut set: BufferSet<B>,
        pool: &Arc<BufferPool<B>>,
    ) -> Result<Batch<B>> {
        let mut target = Filling { pool, set: &mut set };
        let described = self
            .assemble_into(index, &mut target)
            .and_then(|filled| self.transform(index, &filled, &mut target).map(|()| filled))
            .and_then(|filled| self.finish(index, filled, &target));
        match described {
            Ok(mut batch) => {
                batch.lease = Some(Lease::new(pool.clone(), set));
                Ok(batch)
            }
            Err(e) => {
                pool.give_back(set);
                Err(e)
            }
        }
    }

    fn assemble_into(&mut self, index: usize, set: &mut dyn FillTarget) -> Result<Assembled> {
        let sh = self.sh.clone();
        let mut rows = std::mem::take(&mut self.rows);
        let slots = slots(&sh, index, &mut rows);
        self.rows = rows;
        let mut slots = slots?;
        // Block mode: the window units of this batch's real rows, admitted in order.
        let mut held: HashMap<usize, Arc<FragmentData>> = HashMap::new();
        let mut releases: BTreeMap<usize, u64> = BTreeMap::new();
        if let Some((window, schedule)) = &sh.window {
            let units = schedule.take(index, &sh.plan, &sh.catalog, window)?;
            for (s, u) in slots.iter_mut().zip(units) {
                s.unit = u.filter(|_| s.real);
            }
            for u in slots.iter().filter_map(|s| s.unit) {
                *releases.entry(u).or_default() += 1;
            }
            // Ascending ids: admission order.
            let units: Vec<usize> = releases.keys().copied().collect();
            let data = self.admit_all(window, &units)?;
            held.extend(units.into_iter().zip(data));
        }
        let mut skipped = Vec::new();
        let max_attempts = 16 + 4 * slots.len();
        for _ in 0..max_attempts {
            match self.try_fill(index, &slots, &held, set) {
                Ok((plans, validity)) => {
                    if let Some((window, _)) = &sh.window {
                        for (u, n) in releases {
                            window.release(u, n);
                        }
                    }
                    for s in &mut skipped {
                        let s: &mut SkippedSample = s;
                        s.replacement = slots[s.slot].row;
                    }
                    return Ok(Assembled { slots, plans, validity, skipped });
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
                        slots[j] = self.substitute(&slots[j])?;
                    }
                }
            }
        }
        Err(LoaderError::corrupt(format!("batch {index}"), "too many unreadable samples to substitute"))
    }

    /// The next row of the epoch's order after `slot`'s position (wrapping), as a substitute.
    fn substitute(&self, slot: &SlotRow) -> Result<SlotRow> {
        let sh = &self.sh;
        let pos = slot.pos + 1;
        let row = sh.plan.row_at(pos).ok_or_else(|| LoaderError::corrupt("dataset", "no readable rows"))?;
        let (entry, phys) =
            sh.catalog.locate(row)?.ok_or_else(|| LoaderError::WorkerPanicked(format!("row {row} is outside")))?;
        Ok(SlotRow { row: sh.catalog.row_id(row), frag: entry.index, entry, phys, pos, real: false, unit: None })
    }

    /// Runs each transformed column's pipeline from its staged rows into its output buffer,
    /// row by row on this thread (a null row's slot is zeros).
    fn transform(&mut self, index: usize, filled: &Assembled, set: &mut dyn FillTarget) -> Result<()> {
        let sh = self.sh.clone();
        let b = filled.slots.len();
        for (c, pipeline) in sh.set.transforms.iter().enumerate() {
            let Some(p) = pipeline else { continue };
            let bytes =
                p.row_bytes.checked_mul(b).ok_or_else(|| LoaderError::config("transformed batch size overflows"))?;
            set.ensure(Grown::Output, c, bytes, &sh.stopped, &|| sh.oldest() >= index)?;
            let layout = &sh.catalog.columns[c];
            let (plan, valid) = (&filled.plans[c], filled.validity[c].as_deref());
            let missing =
                || LoaderError::WorkerPanicked(format!("column {c}: a transform buffer is missing or shared"));
            let (src, dst) = set.staged_and_output(c).ok_or_else(missing)?;
            let dst = dst.get_mut(..bytes).ok_or_else(missing)?;
            for ((j, slot), row_out) in filled.slots.iter().enumerate().zip(dst.chunks_exact_mut(p.row_bytes.max(1))) {
                if valid.is_some_and(|v| !v.get(j).copied().unwrap_or(true)) {
                    row_out.fill(0);
                    continue;
                }
                let row_in = plan.row_place(j).and_then(|r| src.get(r)).ok_or_else(missing)?;
                let dims = layout.row_dims(plan.row_sizes(layout, j));
                let key = transform::RowKey { seed: sh.set.seed, epoch: sh.epoch, row: slot.row };
                p.apply(key, row_in, &dims, row_out, &mut self.transform)?;
            }
        }
        self.account();
        Ok(())
    }

    /// Describes the filled buffers as a [`Batch`].
    fn finish<B: HostBuffer>(&self, index: usize, filled: Assembled, set: &dyn FillTarget) -> Result<Batch<B>> {
        let sh = &self.sh;
        let Assembled { slots, plans, validity, skipped } = filled;
        let b = slots.len();
        let mut columns = Vec::with_capacity(plans.len());
        for (c, (plan, valid)) in plans.iter().zip(validity).enumerate() {
            let layout = &sh.catalog.columns[c];
            let transformed = sh.set.transforms.get(c).and_then(Option::as_ref);
            let byte_len = transformed.map_or_else(|| plan.buffer_bytes(b), |p| p.row_bytes * b);
            let capacity = set
                .output_capacity(c)
                .ok_or_else(|| LoaderError::WorkerPanicked(format!("column {c} has no buffer")))?;
            if byte_len > capacity {
                return Err(LoaderError::WorkerPanicked(format!(
                    "column {c}: {byte_len} bytes in a {capacity}-byte buffer"
                )));
            }
            columns.push(match transformed {
                Some(p) => p.host_column(&layout.name, b, valid),
                None => plan.host_column(layout, b, sh.set.ragged_offsets, valid),
            });
        }
        if !skipped.is_empty() {
            sh.skipped.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(skipped.iter().cloned());
        }
        Ok(Batch {
            columns,
            rows: slots.iter().map(|s| s.row).collect(),
            sources: if sh.catalog.mixture {
                slots.iter().map(|s| u32::try_from(s.entry.part).unwrap_or(u32::MAX)).collect()
            } else {
                Vec::new()
            },
            epoch: sh.epoch,
            index,
            position: sh.position(index, 0),
            skipped,
            lease: None,
        })
    }
}

/// One fill attempt: file indexes, column plans and buffers, then each data file's rows
/// from the window, a local file or an object store.
impl Worker {
    /// One fill attempt: every slot's bytes into the column buffers.
    fn try_fill(
        &mut self,
        index: usize,
        slots: &[SlotRow],
        held: &HashMap<usize, Arc<FragmentData>>,
        set: &mut dyn FillTarget,
    ) -> FillResult<Filled> {
        let sh = self.sh.clone();
        let cat = &sh.catalog;
        let b = slots.len();
        // Indexes of every file the batch touches (on object stores, the files not yet
        // opened are opened together: a batch of a cold epoch waits for about one footer and
        // one index round trip, not for two per file).
        let mut opened = self.open_together(slots);
        let mut metas: HashMap<(usize, usize), Arc<FileMeta>> = HashMap::new();
        let mut bad_frags: BTreeMap<usize, LoaderError> = BTreeMap::new();
        for s in slots {
            for fi in 0..s.entry.files.len() {
                if metas.contains_key(&(s.frag, fi)) || bad_frags.contains_key(&s.frag) {
                    continue;
                }
                let meta = opened
                    .remove(&(s.frag, fi))
                    .unwrap_or_else(|| cat.file_meta(&s.entry, fi, &sh.acct, sh.meta_cap, &sh.stopped));
                match meta {
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
            let mut fails = Vec::new();
            for (j, s) in slots.iter().enumerate() {
                if let Some(e) = bad_frags.get(&s.frag) {
                    fails.push((j, clone_fault(e)));
                }
            }
            return Err(FillError::Rows(fails));
        }
        // Layout of every column, then buffers large enough.
        let (plans, validity) = Self::column_plans(cat, slots, &metas)?;
        for (c, plan) in plans.iter().enumerate() {
            set.ensure(Grown::Fill, c, plan.buffer_bytes(b), &sh.stopped, &|| sh.oldest() >= index)?;
        }
        let mut fill = BatchFill { slots, plans: &plans, set, fails: Vec::new() };
        if cat.mixture {
            Self::write_fills(&mut fill, cat)?;
        }
        // Group slots by data file; serve window rows from memory, the rest from storage.
        // (fragment, file, window unit) → slots: rows of one file served by one unit, or read.
        let mut groups: BTreeMap<(usize, usize, Option<usize>), Vec<usize>> = BTreeMap::new();
        for (j, s) in slots.iter().enumerate() {
            for fi in 0..s.entry.files.len() {
                groups.entry((s.frag, fi, s.unit)).or_default().push(j);
            }
        }
        let mut remote = Vec::new();
        for ((frag, fi, unit), js) in groups {
            let meta: &FileMeta = metas
                .get(&(frag, fi))
                .ok_or_else(|| FillError::Fatal(LoaderError::WorkerPanicked("file index missing".into())))?;
            // Every slot of the group holds the fragment: the first one's entry serves.
            let first = &slots[js[0]].entry;
            let file = FileRef { frag, fi, entry: &first.files[fi], meta, fetcher: cat.fetcher(first.part) };
            let direct = match unit.and_then(|u| held.get(&u)) {
                Some(data) => self.fill_from_window(&mut fill, data, file, &js)?,
                None => js,
            };
            if direct.is_empty() {
                continue;
            }
            if file.fetcher.is_local() {
                self.fill_local(&mut fill, file, &direct)?;
            } else {
                remote.push(self.remote_file(&fill, file, &direct));
            }
        }
        if !remote.is_empty() {
            self.fill_remote(&mut fill, remote)?;
        }
        self.account();
        let fails = fill.fails;
        if fails.is_empty() { Ok((plans, validity)) } else { Err(FillError::Rows(fails)) }
    }

    /// The layout of every column's rows in its buffer, and validity per row of nullable
    /// columns, from the batch's file indexes (`metas`) and the fills of mixture sources.
    fn column_plans(
        cat: &crate::catalog::Catalog,
        slots: &[SlotRow],
        metas: &HashMap<(usize, usize), Arc<FileMeta>>,
    ) -> FillResult<Filled> {
        let b = slots.len();
        let mut plans = Vec::with_capacity(cat.columns.len());
        let mut validity = Vec::with_capacity(cat.columns.len());
        for (c, layout) in cat.columns.iter().enumerate() {
            let mut sizes = Vec::with_capacity(b * layout.ragged);
            let mut valid = Vec::with_capacity(if layout.nullable { b } else { 0 });
            for s in slots {
                let (fi, pos) = s.entry.column_file[c];
                if let Some(f) = cat.fill(s.entry.part, c) {
                    // A mixture source that lacks the column: an empty row where ragged.
                    sizes.extend(std::iter::repeat_n(0, layout.ragged));
                    if layout.nullable {
                        valid.push(!matches!(f, Fill::Null));
                    }
                    continue;
                }
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
        Ok((plans, validity))
    }

    /// Writes the fill of every slot whose mixture source lacks a column
    /// ([`MixSource::fill`](crate::MixSource::fill)).
    fn write_fills(fill: &mut BatchFill<'_>, cat: &crate::catalog::Catalog) -> FillResult<()> {
        let mut zeros: Vec<u8> = Vec::new();
        for (j, s) in fill.slots.iter().enumerate() {
            for (c, layout) in cat.columns.iter().enumerate() {
                let Some(f) = cat.fill(s.entry.part, c) else { continue };
                let row: &[u8] = match f {
                    Fill::Row(bytes) => bytes,
                    Fill::Zeros | Fill::Null => {
                        let n = usize::try_from(layout.fixed_row_bytes.unwrap_or(0)).unwrap_or(0);
                        if zeros.len() < n {
                            zeros.resize(n, 0);
                        }
                        &zeros[..n]
                    }
                };
                fill.plans[c].write_row(layout, column_buf(fill.set, c)?, j, row)?;
            }
        }
        Ok(())
    }

    /// Opens the object-store data files of `slots` whose indexes are not cached, together
    /// ([`Worker::open_files`]).
    fn open_together(&self, slots: &[SlotRow]) -> HashMap<(usize, usize), Result<Arc<FileMeta>>> {
        self.open_files(slots.iter().map(|s| &s.entry))
    }

    /// Opens the object-store data files of `frags` whose indexes are not cached, together
    /// ([`Catalog::open_many`](crate::catalog::Catalog::open_many), at most
    /// `max_requests_in_flight` at once): about one footer and one index round trip for all
    /// of them, driven by this thread. Local files and a single missing file are left to the
    /// caller.
    pub(super) fn open_files<'e>(
        &self,
        frags: impl IntoIterator<Item = &'e Arc<FragmentEntry>>,
    ) -> HashMap<(usize, usize), Result<Arc<FileMeta>>> {
        let sh = &self.sh;
        let cat = &sh.catalog;
        if cat.fetchers().all(|f| f.is_local()) {
            return HashMap::new();
        }
        let mut missing: Vec<(&FragmentEntry, usize)> = Vec::new();
        for f in frags.into_iter().filter(|f| !cat.fetcher(f.part).is_local()) {
            for fi in 0..f.files.len() {
                if !missing.iter().any(|(m, mfi)| m.index == f.index && *mfi == fi) && !cat.has_meta(f.index, fi) {
                    missing.push((f, fi));
                }
            }
        }
        if missing.len() < 2 {
            return HashMap::new();
        }
        cat.open_many(&missing, &sh.acct, sh.meta_cap, sh.set.max_requests, &sh.stopped).into_iter().collect()
    }

    /// Copies slots `js` of `file` out of window pages; returns the slots whose pages are
    /// not resident.
    fn fill_from_window(
        &self,
        fill: &mut BatchFill<'_>,
        data: &FragmentData,
        file: FileRef<'_>,
        js: &[usize],
    ) -> FillResult<Vec<usize>> {
        let cat = &self.sh.catalog;
        let pages = match data.files.get(file.fi) {
            Some(Ok(p)) => p,
            Some(Err(fault)) => {
                for &j in js {
                    fill.fails.push((j, fault.to_error()));
                }
                return Ok(Vec::new());
            }
            None => return Ok(js.to_vec()),
        };
        // A slot is served from the window only if every column's page is resident.
        let mut direct = Vec::new();
        let mut served = Vec::new();
        for &j in js {
            let all = file.entry.columns.iter().enumerate().all(|(pos, _)| {
                let page = file.meta.chunks[pos].page_of(fill.slots[j].phys);
                pages.get(pos).is_some_and(|m| m.contains_key(&page))
            });
            if all { served.push(j) } else { direct.push(j) }
        }
        for (pos, &c) in file.entry.columns.iter().enumerate() {
            let layout = &cat.columns[c];
            let chunk = &file.meta.chunks[pos];
            let plan = &fill.plans[c];
            let buf = column_buf(fill.set, c)?;
            for &j in &served {
                let (page, range) = chunk.locate(fill.slots[j].phys);
                match pages.get(pos).and_then(|m| m.get(&page)) {
                    Some(Ok(loc)) => {
                        let r = data
                            .bytes(loc)
                            .get(range)
                            .ok_or_else(|| LoaderError::corrupt(file.key(), "row outside its page"))
                            .and_then(|src| plan.write_row(layout, buf, j, src));
                        if let Err(e) = r {
                            slot_error(&mut fill.fails, j, e)?;
                        }
                    }
                    Some(Err(fault)) => fill.fails.push((j, fault.to_error())),
                    None => return Err(FillError::Fatal(LoaderError::WorkerPanicked("window page vanished".into()))),
                }
            }
        }
        Ok(direct)
    }
}
