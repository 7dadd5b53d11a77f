//! What is where: the opened version's fragments, the data files holding the projected
//! columns, and per-file indexes (page table, per-row byte offsets, ragged sizes, validity)
//! that let a worker find any row's bytes without decoding anything else.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use lru::LruCache;
use tessera::datafile::{Block, ChunkIndex, DataFile};
use tessera::manifest::DataFileRef;
use tessera::tree::FragmentTree;
use tessera::{Dataset, FragmentInfo, View, ViewRows};

use crate::assemble::{ColumnLayout, Unsigned};
use crate::error::{LoaderError, Result, from_format};
use crate::memory::{Accountant, Charge, MemoryUse};
use crate::mixture::{Fill, MixSource};
use crate::source::{Fetcher, WaitTimer, classify, with_retry_async};
use crate::window::Fault;

/// A data file of a fragment that holds projected columns.
#[derive(Clone, Debug)]
pub(crate) struct FileEntry {
    pub(crate) file: DataFileRef,
    /// Projection indices of the columns read from this file.
    pub(crate) columns: Vec<usize>,
}

/// What a part gives the sampler to plan over: its live rows and its fragments.
type PlanUnits = (u64, u64);

/// A fragment with its live-row mapping.
#[derive(Debug)]
pub(crate) struct FragmentEntry {
    /// The fragment's position among the version's fragments (its id order): the key of its
    /// files' indexes and pages in the loader's caches, the same whether the catalog holds
    /// every fragment or finds them through the fragment tree.
    pub(crate) index: usize,
    /// The catalog part (mixture source) the fragment belongs to; 0 for a lone version.
    pub(crate) part: usize,
    pub(crate) info: FragmentInfo,
    /// Physical row of each live row, for a fragment with deletions and a live row: read from
    /// its deletion vector when a row of the fragment is first located, not when the loader
    /// opens (a rank reads only the vectors of the fragments it reads, SPEC VAL-19).
    physical: OnceLock<Arc<Vec<u64>>>,
    pub(crate) files: Vec<FileEntry>,
    /// For each projected column: the index in `files` of the file holding it and the
    /// column's position in that file's `columns`.
    pub(crate) column_file: Vec<(usize, usize)>,
}

impl FragmentEntry {
    /// An entry of an empty fragment without files, for the window's unit tests.
    #[cfg(test)]
    pub(crate) fn empty(index: usize) -> Self {
        let fragment = tessera::manifest::Fragment {
            id: index as u64,
            row_count: 0,
            files: Vec::new(),
            deletion: None,
            stats: Vec::new(),
        };
        let info = FragmentInfo { fragment: Arc::new(fragment), first_row: 0 };
        Self { index, part: 0, info, physical: OnceLock::new(), files: Vec::new(), column_file: Vec::new() }
    }

    /// The fragment's files that hold projected columns, and where each column is.
    ///
    /// # Errors
    /// A live fragment whose files do not hold every projected column exactly once.
    fn new(index: usize, part: usize, info: FragmentInfo, columns: &[Option<tessera::Column>]) -> Result<Self> {
        let mut files = Vec::new();
        for file in &info.fragment.files {
            let idx: Vec<usize> = (0..columns.len())
                .filter(|&i| columns[i].as_ref().is_some_and(|c| file.column_ids.contains(&c.id)))
                .collect();
            if !idx.is_empty() {
                files.push(FileEntry { file: file.clone(), columns: idx });
            }
        }
        let covered: usize = files.iter().map(|f| f.columns.len()).sum();
        if covered != columns.iter().flatten().count() && info.fragment.live_rows() > 0 {
            return Err(LoaderError::dataset(
                "resolving the projection",
                tessera::Error::Invalid {
                    what: format!("fragment {}", info.fragment.id),
                    reason: "the fragment's files do not hold every projected column exactly once".into(),
                },
            ));
        }
        let mut column_file = vec![(usize::MAX, 0); columns.len()];
        for (fi, f) in files.iter().enumerate() {
            for (pos, &c) in f.columns.iter().enumerate() {
                column_file[c] = (fi, pos);
            }
        }
        Ok(Self { index, part, info, physical: OnceLock::new(), files, column_file })
    }

    /// Heap and inline bytes of the entry, estimated (what a lazy catalog's cache counts).
    fn footprint(&self) -> u64 {
        let f = &self.info.fragment;
        let files: usize = f.files.iter().map(|d| 96 + d.path.len() + 8 * d.column_ids.len()).sum();
        let stats = 64 * f.stats.len();
        (size_of::<Self>() + size_of::<tessera::manifest::Fragment>() + files + stats + 48 * self.files.len()) as u64
    }

    pub(crate) fn live_rows(&self) -> u64 {
        self.info.fragment.live_rows()
    }

    /// Whether live rows are not physical rows: the fragment has deleted rows and a live one.
    fn has_deletions(&self) -> bool {
        self.info.fragment.deletion.is_some() && self.live_rows() > 0
    }
}

/// The index of one data file for the projected columns it holds.
#[derive(Debug)]
pub(crate) struct FileMeta {
    pub(crate) data_file: Arc<DataFile>,
    /// Parallel to [`FileEntry::columns`]: the reference's index of each chunk.
    pub(crate) chunks: Vec<ChunkIndex>,
    /// Bytes the index and the opened file's footer occupy (what the metadata share is
    /// charged).
    pub(crate) bytes: u64,
    /// The charge, released when the last user drops the index.
    _charge: Charge,
}

#[derive(Debug)]
struct MetaCache {
    /// Opened files' indexes in use order, and the bytes they are charged.
    entries: LruCache<(usize, usize), Arc<FileMeta>>,
    bytes: u64,
    /// Files one thread is opening: the others wait for its outcome instead of opening them
    /// again (at a cold start every filling thread wants the same files at once).
    opening: HashMap<(usize, usize), Arc<Opening>>,
}

impl Default for MetaCache {
    fn default() -> Self {
        Self { entries: LruCache::unbounded(), bytes: 0, opening: HashMap::new() }
    }
}

/// How a file one thread opened for all turned out.
#[derive(Clone, Debug)]
enum Outcome {
    Opened(Arc<FileMeta>),
    /// A data error: every thread that wanted the file reports it.
    Fault(Fault),
    /// Anything else (storage retries spent, a stop, a panic): each waiter tries itself.
    Failed,
}

/// A file being opened, and its outcome once known.
#[derive(Debug, Default)]
struct Opening {
    outcome: Mutex<Option<Outcome>>,
    done: Condvar,
}

impl Opening {
    /// Waits for the outcome, in steps that notice a stop.
    fn wait(&self, stopped: &AtomicBool) -> Result<Outcome> {
        let mut o = self.outcome.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            if let Some(outcome) = o.as_ref() {
                return Ok(outcome.clone());
            }
            if stopped.load(Ordering::Acquire) {
                return Err(LoaderError::Stopped);
            }
            o = self.done.wait_timeout(o, Duration::from_millis(20)).map_or_else(|e| e.into_inner().0, |r| r.0);
        }
    }
}

/// A data file's key (fragment index, file within it) and its opened index.
pub(crate) type Opened = ((usize, usize), Result<Arc<FileMeta>>);

/// Who opens a data file's index ([`Catalog::claim`]).
enum Claim<'a> {
    /// Opened and cached.
    Cached(Arc<FileMeta>),
    /// Another thread is opening it.
    Opening(Arc<Opening>),
    /// The caller opens it, and must publish the outcome ([`Catalog::publish`]).
    Mine(Opener<'a>),
}

/// The opening thread's duty: publish an outcome and clear the file's entry, also when the
/// opening panics (as `Failed`), so no waiter waits for nothing.
struct Opener<'a> {
    cache: &'a Mutex<MetaCache>,
    key: (usize, usize),
    opening: Arc<Opening>,
    outcome: Outcome,
}

impl Drop for Opener<'_> {
    fn drop(&mut self) {
        self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).opening.remove(&self.key);
        let mut o = self.opening.outcome.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *o = Some(self.outcome.clone());
        drop(o);
        self.opening.done.notify_all();
    }
}

/// The opened version (or the sources of a mixture) as the loader sees it.
#[derive(Debug)]
pub(crate) struct Catalog {
    /// The projected columns' output layout (the first part's; every part has the same).
    pub(crate) columns: Vec<ColumnLayout>,
    /// One part per source: a lone version or view is one part.
    parts: Vec<Part>,
    /// What the sampler plans over: the live rows, and the fragments (a view's runs of
    /// consecutive positions in one fragment) whose mean size is block shuffle's block. A
    /// mixture plans without them.
    pub(crate) plan_rows: u64,
    pub(crate) plan_fragments: u64,
    pub(crate) dataset_id: u64,
    /// Batches report each sample's part (a mixture, even of one source).
    pub(crate) mixture: bool,
    meta: Mutex<MetaCache>,
}

/// One source of the catalog: a version (or a view of one) and the store it is read from.
#[derive(Debug)]
pub(crate) struct Part {
    pub(crate) dataset: Dataset,
    /// The projected columns as this part's schema declares them (ids differ between
    /// datasets), in output order; `None` where the part lacks the column and fills it.
    columns: Vec<Option<tessera::Column>>,
    /// Per projected column, what the part's samples hold where it lacks the column.
    fills: Vec<Option<Fill>>,
    fragments: Fragments,
    /// When the part is a view: its position `p` is dataset row `view.rows.get(p)`.
    pub(crate) view: Option<Arc<View>>,
    pub(crate) fetcher: Arc<Fetcher>,
    /// First plan position of the part (the parts' positions are laid end to end).
    first: u64,
    /// Added to the part's fragment indexes, so they are unique across parts.
    index_base: usize,
    /// The identity every order over the part derives from.
    pub(crate) id: u64,
}

/// Where the catalog finds a row's fragment.
#[derive(Debug)]
enum Fragments {
    /// Every fragment of the version (or of a view's partial dataset), loaded when the loader
    /// opened: a version indexed by a fragment log, block shuffle, a view.
    Eager {
        entries: Vec<Arc<FragmentEntry>>,
        /// First live global row of each entry.
        first_rows: Vec<u64>,
    },
    /// Found through the version's fragment tree when a row is first located, and kept in a
    /// bounded cache: what a rank reads and holds does not grow with the dataset.
    Lazy(Box<Lazy>),
}

/// Bytes of fragment entries a lazy catalog keeps (charged to the metadata share).
const LAZY_ENTRY_BYTES: u64 = 16 << 20;
/// Bytes of decoded index nodes a lazy catalog's tree keeps (besides the root).
const LAZY_NODE_BYTES: u64 = 16 << 20;
/// Rows a lazy catalog looks up to estimate ragged columns' bytes per row at open.
const LAZY_SAMPLE_ROWS: u64 = 16;

/// A lazily read fragment tree and the fragments found so far.
#[derive(Debug)]
struct Lazy {
    tree: FragmentTree,
    found: Mutex<Found>,
    acct: Arc<Accountant>,
}

/// The fragments a lazy catalog found, least recently used first out, within
/// [`LAZY_ENTRY_BYTES`].
#[derive(Debug)]
struct Found {
    by_index: LruCache<usize, (Arc<FragmentEntry>, Charge)>,
    /// First live row → index, of the entries in `by_index`.
    by_row: BTreeMap<u64, usize>,
    bytes: u64,
}

impl Found {
    /// The cached fragment holding global live row `row`.
    fn holding(&mut self, row: u64) -> Option<Arc<FragmentEntry>> {
        let (_, &index) = self.by_row.range(..=row).next_back()?;
        let (entry, _) = self.by_index.get(&index)?;
        (row - entry.info.first_row < entry.live_rows()).then(|| entry.clone())
    }

    fn insert(&mut self, entry: Arc<FragmentEntry>, acct: &Arc<Accountant>) {
        if self.by_index.contains(&entry.index) {
            return;
        }
        let bytes = entry.footprint();
        while self.bytes + bytes > LAZY_ENTRY_BYTES {
            let Some((_, (old, _))) = self.by_index.pop_lru() else { break };
            self.by_row.remove(&old.info.first_row);
            self.bytes -= old.footprint();
        }
        self.bytes += bytes;
        self.by_row.insert(entry.info.first_row, entry.index);
        let charge = acct.charge(MemoryUse::Metadata, bytes);
        self.by_index.put(entry.index, (entry, charge));
    }
}

/// The identity of a view that every order over it derives from: FNV-1a 64 of its name, the
/// SHA-256 of its rows and the SHA-256 of its version's manifest (SPEC VIEW-09: a view is
/// told apart by its bytes, not its name), in a domain of its own so that no view shares an
/// id with a bare version.
#[must_use]
pub fn view_id(view: &View) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
        }
    };
    eat(b"tessera.view.v1");
    eat(&(view.name.len() as u64).to_le_bytes());
    eat(view.name.as_bytes());
    eat(&view.rows_sha256);
    eat(&view.manifest_sha256);
    h
}

/// The identity of a dataset version that every order derives from: FNV-1a 64 of the
/// branch, version and manifest CRC (the CRC binds it to the manifest's exact bytes, so a
/// re-created dataset with the same version number gets another id).
#[must_use]
pub fn version_id(branch: &str, version: u64, manifest_crc32: u32) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
        }
    };
    eat(b"tessera.version.v1");
    eat(&(branch.len() as u64).to_le_bytes());
    eat(branch.as_bytes());
    eat(&version.to_le_bytes());
    eat(&manifest_crc32.to_le_bytes());
    h
}

impl Part {
    /// A part over `dataset`: every fragment when `tree` is `None`, found through `tree`
    /// otherwise ([`Dataset::open_lazy`]).
    #[allow(clippy::too_many_arguments)] // a part's dataset, storage, columns and place
    fn new(
        dataset: Dataset,
        tree: Option<FragmentTree>,
        fetcher: Arc<Fetcher>,
        names: &[&str],
        spec: &MixSource,
        part: usize,
        index_base: usize,
        acct: &Arc<Accountant>,
    ) -> Result<(Self, Vec<Option<ColumnLayout>>, PlanUnits)> {
        let dataset = dataset.with_cache_bytes(0);
        let (mut cols, mut fills) = (Vec::with_capacity(names.len()), Vec::with_capacity(names.len()));
        // (`LoaderConfig::validate` refused a column projected twice.)
        for &name in names {
            let stored = spec.renames.iter().find(|(b, _)| b == name).map_or(name, |(_, s)| s.as_str());
            match (dataset.schema().column(stored), spec.fills.iter().find(|(b, _)| b == name)) {
                (Some(c), _) => {
                    cols.push(Some(c.clone()));
                    fills.push(None);
                }
                (None, Some((_, fill))) => {
                    cols.push(None);
                    fills.push(Some(fill.clone()));
                }
                (None, None) => {
                    return Err(LoaderError::config(format!(
                        "column projection: no column {stored:?}{}",
                        if part > 0 { " (a mixture source may fill a column it lacks: MixSource::fill)" } else { "" }
                    )));
                }
            }
        }
        let layouts = (cols.iter())
            .map(|c| c.as_ref().map(|c| ColumnLayout::new(c, Unsigned::Stored)).transpose())
            .collect::<Result<Vec<_>>>()?;
        let id = version_id(dataset.branch(), dataset.version(), dataset.manifest_crc32());
        let (fragments, plan_units) = match tree {
            None => {
                let entries = (dataset.fragments().iter().enumerate())
                    .map(|(i, info)| FragmentEntry::new(index_base + i, part, info.clone(), &cols).map(Arc::new))
                    .collect::<Result<Vec<_>>>()?;
                let rows = entries.iter().map(|e| e.live_rows()).sum::<u64>();
                let first_rows = entries.iter().map(|f| f.info.first_row).collect();
                let count = entries.len() as u64;
                (Fragments::Eager { entries, first_rows }, (rows, count))
            }
            Some(tree) => {
                let rows = tree.row_count();
                let found = Found { by_index: LruCache::unbounded(), by_row: BTreeMap::new(), bytes: 0 };
                let lazy =
                    Lazy { tree: tree.with_cache_bytes(LAZY_NODE_BYTES), found: Mutex::new(found), acct: acct.clone() };
                let count = lazy.tree.fragment_count();
                (Fragments::Lazy(Box::new(lazy)), (rows, count))
            }
        };
        let part = Self { dataset, columns: cols, fills, fragments, view: None, fetcher, first: 0, index_base, id };
        Ok((part, layouts, plan_units))
    }

    /// Fragments of the part, for the next part's index base.
    fn fragment_count(&self) -> usize {
        match &self.fragments {
            Fragments::Eager { entries, .. } => entries.len(),
            Fragments::Lazy(lazy) => usize::try_from(lazy.tree.fragment_count()).unwrap_or(usize::MAX / 2),
        }
    }

    /// Reads `view` (of this part's version) instead of the whole version; returns the
    /// view's runs of consecutive positions whose rows lie in one fragment (block shuffle's
    /// units). The part's identity becomes the view's ([`view_id`]).
    fn with_view(&mut self, view: Arc<View>) -> Result<Vec<u64>> {
        let outside = |row: u64| LoaderError::config(format!("view {:?}: row {row} is outside the version", view.name));
        let Fragments::Eager { entries, first_rows } = &self.fragments else {
            return Err(LoaderError::config("a view is read through a catalog of its fragments"));
        };
        let fragment_of = |row: u64| first_rows.partition_point(|&first| first <= row).checked_sub(1);
        let mut runs: Vec<u64> = Vec::new();
        let mut last = usize::MAX;
        let mut add = |f: usize, n: u64| {
            match runs.last_mut() {
                Some(k) if f == last => *k += n,
                _ => runs.push(n),
            }
            last = f;
        };
        match &view.rows {
            ViewRows::List(rows) => {
                for &row in rows {
                    add(fragment_of(row).ok_or_else(|| outside(row))?, 1);
                }
            }
            // A run splits at fragment ends: O(runs + fragments), whatever the row count.
            ViewRows::Runs(r) => {
                for run in r.runs() {
                    let (mut row, end) = (run.start, run.start + run.len);
                    while row < end {
                        let f = fragment_of(row).ok_or_else(|| outside(row))?;
                        let frag_end = first_rows[f] + entries[f].live_rows();
                        let n = end.min(frag_end).saturating_sub(row);
                        if n == 0 {
                            return Err(outside(row));
                        }
                        add(f, n);
                        row += n;
                    }
                }
            }
        }
        self.id = view_id(&view);
        self.view = Some(view);
        Ok(runs)
    }

    /// The dataset row at the part's position `pos` (the position itself without a view).
    fn row_id(&self, pos: u64) -> u64 {
        match &self.view {
            Some(v) => v.rows.get(pos).unwrap_or(u64::MAX),
            None => pos,
        }
    }

    /// Positions of the part: the version's rows, or the view's.
    fn rows(&self) -> u64 {
        self.view.as_ref().map_or(self.dataset.row_count(), |v| v.rows.len())
    }

    /// Finds, through the tree, the fragments holding dataset rows `rows` that `lazy` does not
    /// hold yet, checks each (SEG-06) and keeps them.
    fn find_rows(&self, part: usize, lazy: &Lazy, rows: &[u64]) -> Result<()> {
        let total = self.dataset.row_count();
        let missing: Vec<u64> = {
            let mut found = lazy.found.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut rows: Vec<u64> =
                rows.iter().copied().filter(|&r| r < total && found.holding(r).is_none()).collect();
            rows.sort_unstable();
            rows.dedup();
            rows
        };
        if missing.is_empty() {
            return Ok(());
        }
        let located = crate::io::drive(lazy.tree.locate_many_indexed_async(&missing))
            .map_err(|e| LoaderError::dataset("finding fragments in the fragment tree", e))?;
        let mut entries = Vec::with_capacity(located.len());
        for (index, info) in located {
            if entries.iter().any(|e: &Arc<FragmentEntry>| e.info.first_row == info.first_row) {
                continue;
            }
            self.dataset.check_fragment(&info).map_err(|e| LoaderError::dataset("checking a found fragment", e))?;
            let index = usize::try_from(index).map_err(|_| LoaderError::config("fragment index overflows usize"))?;
            entries.push(Arc::new(FragmentEntry::new(self.index_base + index, part, info, &self.columns)?));
        }
        let mut found = lazy.found.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for e in entries {
            found.insert(e, &lazy.acct);
        }
        Ok(())
    }

    /// The fragment holding global live row `row`, if any: an eager part's by binary
    /// search, a lazy one's from its cache or else through the tree.
    fn fragment_holding(&self, part: usize, row: u64) -> Result<Option<Arc<FragmentEntry>>> {
        match &self.fragments {
            Fragments::Eager { entries, first_rows } => {
                let Some(f) = first_rows.partition_point(|&first| first <= row).checked_sub(1) else {
                    return Ok(None);
                };
                let e = &entries[f];
                Ok((row - e.info.first_row < e.live_rows()).then(|| e.clone()))
            }
            Fragments::Lazy(lazy) => {
                if row >= self.dataset.row_count() {
                    return Ok(None);
                }
                let found =
                    |lazy: &Lazy| lazy.found.lock().unwrap_or_else(std::sync::PoisonError::into_inner).holding(row);
                if let Some(e) = found(lazy) {
                    return Ok(Some(e));
                }
                self.find_rows(part, lazy, &[row])?;
                // Just inserted; a cache too small to keep even it would be a bug.
                found(lazy)
                    .map(Some)
                    .ok_or_else(|| LoaderError::WorkerPanicked(format!("no fragment kept for row {row}")))
            }
        }
    }
}

/// Whether two sources' layouts of a column can share one batch buffer.
fn same_layout(a: &ColumnLayout, b: &ColumnLayout) -> bool {
    a.column.dtype == b.column.dtype && a.column.shape == b.column.shape && a.nullable == b.nullable
}

/// Whether `fill` can stand for a row of `layout`.
fn check_fill(layout: &ColumnLayout, fill: &Fill) -> std::result::Result<(), String> {
    match fill {
        Fill::Zeros => Ok(()),
        Fill::Null if layout.nullable => Ok(()),
        Fill::Null => Err("a null fill needs a nullable column".into()),
        Fill::Row(bytes) => match layout.fixed_row_bytes {
            Some(n) if n == bytes.len() as u64 => Ok(()),
            Some(n) => Err(format!("the fill row has {} bytes, a row of the column {n}", bytes.len())),
            None => Err("a row fill needs a fixed-shape column (use Fill::Zeros for an empty row)".into()),
        },
    }
}

impl Catalog {
    /// Resolves the projection and the fragments of an opened version: every fragment of
    /// `dataset` when `tree` is `None`; through `tree` (the version's fragment tree, `dataset`
    /// then holding none, [`Dataset::open_lazy`]) when a row is first located otherwise. The
    /// catalog keeps the files it opens in its own cache, inside the memory budget, so its
    /// handle of the dataset keeps none (the caller's handle keeps its cache). Data files
    /// are read through `fetcher`.
    pub(crate) fn new(
        dataset: Dataset,
        tree: Option<FragmentTree>,
        fetcher: Arc<Fetcher>,
        projection: Option<&[String]>,
        spec: &MixSource,
        unsigned: Unsigned,
        acct: &Arc<Accountant>,
    ) -> Result<Self> {
        let names: Vec<String> = match projection {
            Some(cols) => cols.to_vec(),
            None => dataset.schema().columns.iter().map(|c| c.name.clone()).collect(),
        };
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let first = MixSource { fills: Vec::new(), ..spec.clone() }; // the first source defines the columns
        let (part, _, (plan_rows, plan_fragments)) = Part::new(dataset, tree, fetcher, &names, &first, 0, 0, acct)?;
        let columns = (part.columns.iter().flatten().zip(&names))
            .map(|(c, name)| ColumnLayout::new(c, unsigned).map(|l| ColumnLayout { name: (*name).to_string(), ..l }))
            .collect::<Result<Vec<_>>>()?;
        let catalog = Self {
            columns,
            dataset_id: part.id,
            parts: vec![part],
            plan_rows,
            plan_fragments,
            mixture: false,
            meta: Mutex::default(),
        };
        if catalog.columns.iter().any(|c| c.fixed_row_bytes.is_none()) {
            catalog.sample_lazy_parts(0)?;
        }
        Ok(catalog)
    }

    /// Ragged columns' slot estimates come from the fragments found: a lazy part from `first`
    /// on looks up a few rows spread over it (one round trip per level for all of them).
    fn sample_lazy_parts(&self, first: usize) -> Result<()> {
        for (k, part) in self.parts.iter().enumerate().skip(first) {
            if let Fragments::Lazy(lazy) = &part.fragments {
                let n = part.dataset.row_count();
                let m = LAZY_SAMPLE_ROWS.min(n);
                let sample: Vec<u64> = (0..m).map(|i| i * n / m).collect();
                part.find_rows(k, lazy, &sample)?;
            }
        }
        Ok(())
    }

    /// Adds a mixture source: `dataset` (read through `tree` when lazy, as a view when
    /// `view` is given) on `fetcher`, with the same projected columns as the first part,
    /// laid out in the same way (dtype, shape, nullability).
    ///
    /// # Errors
    /// A projected column the source lacks or lays out differently; the view's rows outside
    /// its version.
    pub(crate) fn add_part(
        &mut self,
        dataset: Dataset,
        tree: Option<FragmentTree>,
        spec: &MixSource,
        view: Option<Arc<View>>,
        fetcher: Arc<Fetcher>,
        acct: &Arc<Accountant>,
    ) -> Result<()> {
        let k = self.parts.len();
        let label = view.as_ref().map_or_else(|| format!("source {k}"), |v| format!("source {k} (view {:?})", v.name));
        let names: Vec<&str> = self.columns.iter().map(|c| c.name.as_str()).collect();
        let base = self.parts.iter().map(|p| p.index_base + p.fragment_count()).max().unwrap_or(0);
        let (mut part, layouts, _) = Part::new(dataset, tree, fetcher, &names, spec, k, base, acct)
            .map_err(|e| LoaderError::config(format!("{label}: {e}")))?;
        for ((want, got), fill) in self.columns.iter().zip(&layouts).zip(&part.fills) {
            if let Some(fill) = fill {
                check_fill(want, fill)
                    .map_err(|m| LoaderError::config(format!("{label}: column {:?}: {m}", want.name)))?;
                continue;
            }
            let Some(got) = got else { continue };
            if !same_layout(want, got) {
                return Err(LoaderError::config(format!(
                    "{label}: column {:?} is {} {:?}{}, but the first source's is {} {:?}{}: a mixture's sources \
                     share one batch layout",
                    got.name,
                    got.column.dtype.name(),
                    got.column.shape,
                    if got.nullable { " nullable" } else { "" },
                    want.column.dtype.name(),
                    want.column.shape,
                    if want.nullable { " nullable" } else { "" },
                )));
            }
        }
        if let Some(v) = view {
            part.with_view(v)?;
        }
        part.first = self.parts.last().map_or(0, |p| p.first + p.rows());
        self.parts.push(part);
        if self.columns.iter().any(|c| c.fixed_row_bytes.is_none()) {
            self.sample_lazy_parts(k)?;
        }
        Ok(())
    }

    /// The first plan position of every part, and each part's identity and positions (what a
    /// mixture's order is resolved over).
    pub(crate) fn part_layout(&self) -> (Vec<u64>, Vec<(u64, u64)>) {
        (self.parts.iter().map(|p| p.first).collect(), self.parts.iter().map(|p| (p.id, p.rows())).collect())
    }

    /// What part `part`'s samples hold in column `c`, where the part lacks it.
    pub(crate) fn fill(&self, part: usize, c: usize) -> Option<&Fill> {
        self.parts.get(part).and_then(|p| p.fills.get(c)).and_then(Option::as_ref)
    }

    /// The part and dataset row of plan position `pos`.
    pub(crate) fn source_row(&self, pos: u64) -> (usize, u64) {
        let (k, local) = self.part_of(pos);
        (k, self.parts[k].row_id(local))
    }

    /// Per part: the branch and version it reads, and its view's name.
    pub(crate) fn pins(&self) -> Vec<(String, u64, Option<String>)> {
        let pin =
            |p: &Part| (p.dataset.branch().to_string(), p.dataset.version(), p.view.as_ref().map(|v| v.name.clone()));
        self.parts.iter().map(pin).collect()
    }

    /// The first part's dataset (a lone loader's version).
    pub(crate) fn dataset(&self) -> &Dataset {
        &self.parts[0].dataset
    }

    /// The view a lone loader reads, if any.
    pub(crate) fn view(&self) -> Option<&Arc<View>> {
        self.parts[0].view.as_ref()
    }

    /// Part `k`'s fetcher.
    pub(crate) fn fetcher(&self, k: usize) -> &Arc<Fetcher> {
        &self.parts[k.min(self.parts.len() - 1)].fetcher
    }

    /// Every part's fetcher.
    pub(crate) fn fetchers(&self) -> impl Iterator<Item = &Arc<Fetcher>> {
        self.parts.iter().map(|p| &p.fetcher)
    }

    /// Reads `view` (of this catalog's version, whose fragments it holds) instead of the whole
    /// version. The sampler's "fragments" become the view's runs of consecutive positions
    /// whose rows lie in one fragment, so block shuffle keeps rows of a fragment together as
    /// far as the view's order allows; the order's identity becomes the view's ([`view_id`]).
    pub(crate) fn with_view(mut self, view: Arc<View>) -> Result<Self> {
        let runs = self.parts[0].with_view(view)?;
        (self.plan_rows, self.plan_fragments) = (runs.iter().sum(), runs.len() as u64);
        self.dataset_id = self.parts[0].id;
        Ok(self)
    }

    /// The part holding plan position `pos`, and the position within it.
    fn part_of(&self, pos: u64) -> (usize, u64) {
        let k = self.parts.partition_point(|p| p.first <= pos).max(1) - 1;
        (k, pos - self.parts[k].first)
    }

    /// The dataset row at plan position `pos` (the position itself for a lone version) within
    /// its part.
    pub(crate) fn row_id(&self, pos: u64) -> u64 {
        let (k, local) = self.part_of(pos);
        self.parts[k].row_id(local)
    }

    /// Rows one epoch reads (before padding): the version's, or the view's (a mixture: every
    /// source's positions).
    pub(crate) fn rows(&self) -> u64 {
        self.parts.iter().map(Part::rows).sum()
    }

    /// Estimated output bytes per row of projected column `c`: exact for fixed shapes; for
    /// ragged columns twice the average stored bytes per row of the files holding it (an
    /// allowance for padding to the batch's longest row), over every fragment of an eager
    /// catalog and over the fragments found so far (a sample at open) of a lazy one.
    pub(crate) fn estimated_slot_bytes(&self, c: usize) -> u64 {
        let layout = &self.columns[c];
        let scale = |b: u64| b * layout.out_item as u64 / layout.in_item.max(1) as u64;
        if let Some(b) = layout.fixed_row_bytes {
            return scale(b);
        }
        let (mut bytes, mut rows) = (0u64, 0u64);
        self.for_each_known(&mut |f| {
            if let Some(fe) = f.files.get(f.column_file[c].0) {
                bytes += self.variable_share(fe, f.part, f.info.fragment.row_count);
                rows += f.info.fragment.row_count;
            }
        });
        scale(2 * bytes.checked_div(rows).unwrap_or(0)).max(64)
    }

    /// The most data files a fragment holds among those known (the projected columns' count
    /// when none is known yet: at most one file each).
    pub(crate) fn files_per_fragment(&self) -> usize {
        let mut most = 0;
        self.for_each_known(&mut |f| most = most.max(f.files.len()));
        if most == 0 { self.columns.len().max(1) } else { most }
    }

    /// Calls `visit` on every fragment the catalog holds now.
    fn for_each_known(&self, visit: &mut dyn FnMut(&FragmentEntry)) {
        for part in &self.parts {
            match &part.fragments {
                Fragments::Eager { entries, .. } => entries.iter().for_each(|e| visit(e)),
                Fragments::Lazy(lazy) => {
                    let found = lazy.found.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    found.by_index.iter().for_each(|(_, (e, _))| visit(e));
                }
            }
        }
    }

    /// What one variable-size column of data file `fe` (of `rows` rows, in part `part`)
    /// stores, estimated before its footer is read: the file's size less what its fixed-size
    /// columns take, shared equally among its variable-size columns (a file of images and
    /// token ids gives the token ids the bytes that are not images, not the whole file).
    fn variable_share(&self, fe: &FileEntry, part: usize, rows: u64) -> u64 {
        let schema = self.parts[part].dataset.schema();
        let (mut fixed, mut variable) = (0u64, 0u64);
        for &id in &fe.file.column_ids {
            match schema.column_by_id(id).map(tessera::Column::fixed_row_bytes) {
                Some(Some(b)) => fixed = fixed.saturating_add(b.saturating_mul(rows)),
                Some(None) => variable += 1,
                None => {} // dropped: its bytes stay in the file, counted as variable below
            }
        }
        fe.file.size.saturating_sub(fixed) / variable.max(1)
    }

    /// Finds the fragments holding plan positions `positions` that lazy parts do not hold
    /// yet, all together: one round trip per level of each tree for a whole batch, not one
    /// per row. Nothing to do for eager parts.
    ///
    /// # Errors
    /// The tree's read and validation errors; a fragment that breaks SEG-06.
    pub(crate) fn find(&self, positions: &[u64]) -> Result<()> {
        if self.parts.iter().all(|p| matches!(p.fragments, Fragments::Eager { .. })) {
            return Ok(());
        }
        let mut rows: Vec<Vec<u64>> = vec![Vec::new(); self.parts.len()];
        for &p in positions {
            let (k, local) = self.part_of(p);
            rows[k].push(self.parts[k].row_id(local));
        }
        for (k, (part, rows)) in self.parts.iter().zip(rows).enumerate() {
            if let Fragments::Lazy(lazy) = &part.fragments
                && !rows.is_empty()
            {
                part.find_rows(k, lazy, &rows)?;
            }
        }
        Ok(())
    }

    /// The fragment and physical row of plan position `pos`: global (live) row `pos`, or the
    /// view's row at `pos`, in the part holding it; `None` outside the dataset. The first row
    /// located in a fragment with deletions reads its deletion vector (a fragment with no live
    /// row is never located, so its vector is never read: SPEC VAL-16, VAL-19).
    ///
    /// # Errors
    /// The deletion vector's read and validation errors; a lazy catalog's tree errors.
    pub(crate) fn locate(&self, pos: u64) -> Result<Option<(Arc<FragmentEntry>, u64)>> {
        let (k, local) = self.part_of(pos);
        let part = &self.parts[k];
        let row = part.row_id(local);
        let Some(frag) = part.fragment_holding(k, row)? else { return Ok(None) };
        let live = row - frag.info.first_row;
        if !frag.has_deletions() {
            return Ok(Some((frag, live)));
        }
        let map = if let Some(map) = frag.physical.get() {
            map
        } else {
            let rows = crate::io::drive(part.dataset.physical_rows_async(&frag.info, 0..frag.live_rows()))
                .map_err(|e| LoaderError::dataset("reading a deletion vector", e))?;
            // Two threads may read it at once; both get the same rows, one is kept.
            let _ = frag.physical.set(Arc::new(rows));
            frag.physical.get().ok_or_else(|| LoaderError::WorkerPanicked("deletion map not kept".into()))?
        };
        let phys = map.get(live as usize).copied();
        Ok(phys.map(|p| (frag.clone(), p)))
    }

    /// Whether the index of file `file` of fragment `frag` (its index) is cached.
    pub(crate) fn has_meta(&self, frag: usize, file: usize) -> bool {
        self.meta.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entries.contains(&(frag, file))
    }

    /// The index of file `file` of fragment `entry`, from the cache or built (one footer read
    /// and one ranged read of the shape and validity blocks).
    pub(crate) fn file_meta(
        &self,
        entry: &FragmentEntry,
        file: usize,
        acct: &Arc<Accountant>,
        cap: u64,
        stopped: &AtomicBool,
    ) -> Result<Arc<FileMeta>> {
        let fetcher: &Fetcher = self.fetcher(entry.part);
        let opener = loop {
            let waiting = match self.claim((entry.index, file)) {
                Claim::Cached(meta) => return Ok(meta),
                Claim::Mine(opener) => break opener,
                Claim::Opening(waiting) => waiting,
            };
            let _waiting = (!fetcher.is_local()).then(WaitTimer::start);
            match waiting.wait(stopped)? {
                Outcome::Opened(meta) => return Ok(meta),
                Outcome::Fault(fault) => return Err(fault.to_error()),
                Outcome::Failed => {} // try it ourselves
            }
        };
        // Also for local files: the reference opens them through `object_store`, on the loader's runtime.
        let built = crate::io::drive(self.build_meta(entry, file, fetcher, acct, stopped));
        self.publish(opener, built, cap)
    }

    /// Opens the not yet cached indexes of `files` (fragment, file within it) together, as
    /// futures driven by the calling thread on the loader's runtime ([`crate::io`]), at most `concurrency` at
    /// once: about one footer and one index round trip for all of them, and no thread per
    /// file. Files another thread is opening already are left out (the caller's
    /// [`Catalog::file_meta`] waits for them), as are those found cached.
    pub(crate) fn open_many(
        &self,
        files: &[(&FragmentEntry, usize)],
        acct: &Arc<Accountant>,
        cap: u64,
        concurrency: usize,
        stopped: &AtomicBool,
    ) -> Vec<Opened> {
        use futures::StreamExt;
        let claimed: Vec<_> = files
            .iter()
            .filter_map(|&(entry, file)| match self.claim((entry.index, file)) {
                Claim::Mine(opener) => Some((entry, file, opener)),
                Claim::Cached(_) | Claim::Opening(_) => None,
            })
            .collect();
        let opens = claimed.into_iter().map(|(entry, file, opener)| async move {
            let built = self.build_meta(entry, file, self.fetcher(entry.part), acct, stopped).await;
            ((entry.index, file), self.publish(opener, built, cap))
        });
        let _waiting = WaitTimer::start();
        crate::io::drive(futures::stream::iter(opens).buffer_unordered(concurrency.max(1)).collect())
    }

    /// Whether the index of `key` is cached, being opened, or now the caller's to open.
    fn claim(&self, key: (usize, usize)) -> Claim<'_> {
        let mut cache = self.meta.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(meta) = cache.entries.get(&key) {
            return Claim::Cached(meta.clone());
        }
        if let Some(o) = cache.opening.get(&key) {
            return Claim::Opening(o.clone());
        }
        let opening = Arc::new(Opening::default());
        cache.opening.insert(key, opening.clone());
        Claim::Mine(Opener { cache: &self.meta, key, opening, outcome: Outcome::Failed })
    }

    /// Publishes what the claim's owner built to its waiters and caches it within `cap`
    /// bytes (least recently used entries make room).
    fn publish(&self, mut opener: Opener<'_>, built: Result<FileMeta>, cap: u64) -> Result<Arc<FileMeta>> {
        let meta = match built {
            Ok(meta) => Arc::new(meta),
            Err(e) => {
                if let Some(fault) = Fault::of(&e) {
                    opener.outcome = Outcome::Fault(fault);
                }
                return Err(e);
            }
        };
        opener.outcome = Outcome::Opened(meta.clone());
        let key = opener.key;
        let mut cache = self.meta.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Evict least recently used entries until the new one fits (or the cache is empty).
        while cache.bytes + meta.bytes > cap {
            let Some((_, evicted)) = cache.entries.pop_lru() else { break };
            cache.bytes -= evicted.bytes;
        }
        cache.bytes += meta.bytes;
        if let Some(replaced) = cache.entries.put(key, meta.clone()) {
            cache.bytes -= replaced.bytes;
        }
        drop(cache); // the opener's drop takes the lock
        drop(opener);
        Ok(meta)
    }

    /// Reads and indexes one data file's footer and index blocks. Waiting is timed per await
    /// ([`WaitTimer`] counts only the outermost timer of a thread).
    async fn build_meta(
        &self,
        entry: &FragmentEntry,
        file: usize,
        fetcher: &Fetcher,
        acct: &Arc<Accountant>,
        stopped: &AtomicBool,
    ) -> Result<FileMeta> {
        let part = &self.parts[entry.part];
        let fe = &entry.files[file];
        let key = fe.file.path.as_str();
        let waiting = (!fetcher.is_local()).then(WaitTimer::start);
        let data_file = with_retry_async(&fetcher.retry, stopped, &fetcher.counters, &|| key.to_string(), || async {
            let opened = part.dataset.data_file_async(&entry.info.fragment, &fe.file).await;
            opened.map_err(|e| classify(&format!("opening {key}"), e))
        })
        .await?;
        drop(waiting);
        // One ranged read for every projected column's validity and shape blocks; the
        // reference checks and indexes them (`ChunkIndex`: DF-16, DF-19, LIM-09, MOD-06).
        let mut blocks: Vec<Block> = Vec::new();
        let mut counts = Vec::with_capacity(fe.columns.len());
        for &ci in &fe.columns {
            let column = part.columns[ci]
                .as_ref()
                .ok_or_else(|| LoaderError::WorkerPanicked(format!("a filled column {ci} in a data file")))?;
            let b = data_file.index_blocks(column).map_err(|e| from_format(key, e))?;
            counts.push(b.len());
            blocks.extend(b);
        }
        let ranges: Vec<_> = blocks.iter().map(Block::range).collect();
        let waiting = (!fetcher.is_local()).then(WaitTimer::start);
        let fetched = fetcher.fetch_async(key, &ranges, stopped).await?;
        drop(waiting);
        let mut chunks = Vec::with_capacity(fe.columns.len());
        let mut at = 0;
        for (&ci, n) in fe.columns.iter().zip(counts) {
            let stored: Vec<&[u8]> = fetched[at..at + n].iter().map(AsRef::as_ref).collect();
            at += n;
            let column = part.columns[ci]
                .as_ref()
                .ok_or_else(|| LoaderError::WorkerPanicked(format!("a filled column {ci} in a data file")))?;
            let index = data_file.index_chunk(column, &stored).map_err(|e| from_format(key, e))?;
            chunks.push(index);
        }
        let bytes = chunks.iter().map(ChunkIndex::heap_bytes).sum::<u64>() + data_file.heap_bytes();
        Ok(FileMeta { data_file, chunks, bytes, _charge: acct.charge(MemoryUse::Metadata, bytes) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ids_differ_by_every_input() {
        let a = version_id("main", 3, 7);
        assert_ne!(a, version_id("main", 4, 7));
        assert_ne!(a, version_id("main", 3, 8));
        assert_ne!(a, version_id("dev", 3, 7));
        assert_eq!(a, version_id("main", 3, 7));
    }
}
