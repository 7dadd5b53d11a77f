//! Opening a dataset version and reading from it (SPEC.md §"Versioning", §"Reader validation").

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use object_store::{GetOptions, GetRange, ObjectStoreExt};

use crate::batch::Batch;
use crate::blocking::block_on;
use crate::cache::{Cache, CacheStats, DEFAULT_CACHE_BYTES, Key, Value};
use crate::column::ColumnData;
use crate::datafile::{self, DataFile};
use crate::envelope::{self, ObjectKind};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::manifest::{
    DataFileRef, DeletionRef, DeletionVector, Fragment, Manifest, READER_FLAG_FRAGMENT_TREE, Segment, SegmentRef, Tag,
    VersionRef,
};
use crate::paths::{self, MAIN};
use crate::schema::{Column, Schema};
use crate::store::Store;
use crate::tree::FragmentTree;

/// Which version to open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum At {
    /// The latest version of `main`.
    Latest,
    /// A version of `main`.
    Version(u64),
    /// The latest version of a branch.
    Branch(String),
    /// A version of a branch.
    BranchVersion(String, u64),
    /// The version a tag names.
    Tag(String),
}

/// A fragment of the open version with its first global row.
#[derive(Clone, Debug, PartialEq)]
pub struct FragmentInfo {
    /// The fragment as the index segment lists it (shared between versions that hold it).
    pub fragment: Arc<Fragment>,
    /// Global index of its first live row (deleted rows have no global index).
    pub first_row: u64,
}

impl FragmentInfo {
    /// The fragment's global (live) row range.
    #[must_use]
    pub fn rows(&self) -> Range<u64> {
        self.first_row..self.first_row + self.fragment.live_rows()
    }
}

/// One version of a dataset, opened and validated: its manifest and index segments are
/// loaded; data files are opened on first use.
#[derive(Clone, Debug)]
pub struct Dataset {
    store: Store,
    manifest: Arc<Manifest>,
    manifest_crc32: u32,
    fragments: Arc<Vec<FragmentInfo>>,
    /// Only the fragments holding a view's rows were loaded (a fragment tree read for a view,
    /// VAL-19): reads of other rows are refused instead of answered wrongly.
    partial: bool,
    limits: Limits,
    /// Opened data files and loaded deletion vectors, within a byte bound (shared by clones).
    cache: Arc<Mutex<Cache>>,
}

/// What [`Dataset::verify`] checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Data files read in full.
    pub files: u64,
    /// Bytes of data files read.
    pub bytes: u64,
    /// Blocks whose CRC was checked.
    pub blocks: u64,
    /// Rows decoded.
    pub rows: u64,
}

impl VerifyReport {
    /// Adds what `other` checked.
    pub fn add(&mut self, other: &VerifyReport) {
        self.files += other.files;
        self.bytes += other.bytes;
        self.blocks += other.blocks;
        self.rows += other.rows;
    }
}

/// Maps "object not found" for an object a manifest references to the `invalid` class `[VAL-15]`.
pub(crate) fn referenced(e: Error, key: &str) -> Error {
    match e {
        Error::NotFound { .. } => Error::invalid(key, "referenced object does not exist [VAL-15]"),
        other => other,
    }
}

impl Dataset {
    /// Opens the latest version of `main` at a path or URL.
    ///
    /// # Errors
    /// `not_found` if there is no dataset; any validation error of the manifest or segments.
    pub fn open(location: &str) -> Result<Self> {
        Self::open_at(&Store::open(location)?, &At::Latest, Limits::default())
    }

    /// Opens a chosen version.
    ///
    /// # Errors
    /// As [`Dataset::open`]; `not_found` if the version, branch or tag does not exist.
    pub fn open_at(store: &Store, at: &At, limits: Limits) -> Result<Self> {
        block_on(Self::open_at_async(store, at, limits))
    }

    /// Opens a chosen version (async): every read of [`Dataset::open_at`] is awaited, so the
    /// future runs as a task on the caller's runtime.
    ///
    /// # Errors
    /// As [`Dataset::open_at`].
    pub async fn open_at_async(store: &Store, at: &At, limits: Limits) -> Result<Self> {
        let (manifest, crc) = load_manifest_at(store, at, &limits).await?;
        Self::from_manifest(store.clone(), manifest, crc, limits).await
    }

    /// Opens a version for a reader that finds its rows' fragments itself, so that what it
    /// reads before its first lookup does not grow with the dataset: a version indexed by a
    /// fragment tree reads its manifest and root only and comes back partial, with no fragment
    /// loaded, together with its tree (the caller locates rows through it and admits each
    /// fragment it reads with [`Dataset::check_fragment`], SPEC VAL-19); a version indexed by a
    /// fragment log opens whole, with no tree.
    ///
    /// # Errors
    /// As [`Dataset::open_at`], less the checks of the nodes a tree's reader never reads.
    pub fn open_lazy(store: &Store, at: &At, limits: Limits) -> Result<(Self, Option<FragmentTree>)> {
        block_on(Self::open_lazy_async(store, at, limits))
    }

    /// As [`Dataset::open_lazy`] (async).
    ///
    /// # Errors
    /// As [`Dataset::open_lazy`].
    pub async fn open_lazy_async(store: &Store, at: &At, limits: Limits) -> Result<(Self, Option<FragmentTree>)> {
        let (manifest, crc) = load_manifest_at(store, at, &limits).await?;
        if manifest.reader_flags & READER_FLAG_FRAGMENT_TREE == 0 {
            return Ok((Self::from_manifest(store.clone(), manifest, crc, limits).await?, None));
        }
        let tree = FragmentTree::open_async(store, &manifest, limits.clone()).await?;
        let ds = Self::from_located(store.clone(), manifest, crc, Vec::new(), limits)?;
        Ok((ds, Some(tree)))
    }

    /// Checks a fragment found through this version's fragment tree against the schema before
    /// its rows are read `[SEG-06]`, `[VAL-19]` (what [`Dataset::open_at`] checks on every
    /// fragment at open).
    ///
    /// # Errors
    /// `invalid` when the fragment's files do not hold the schema's columns as SEG-06 says.
    pub fn check_fragment(&self, info: &FragmentInfo) -> Result<()> {
        info.fragment.check_columns(&self.manifest.schema)
    }

    /// Opens another version of the same dataset.
    ///
    /// # Errors
    /// As [`Dataset::open_at`].
    pub fn checkout(&self, at: &At) -> Result<Self> {
        Self::open_at(&self.store, at, self.limits.clone())
    }

    /// Opens another version of the same dataset (async).
    ///
    /// # Errors
    /// As [`Dataset::open_at`].
    pub async fn checkout_async(&self, at: &At) -> Result<Self> {
        Self::open_at_async(&self.store, at, self.limits.clone()).await
    }

    /// A whole version from its manifest: every segment, or every node of its tree, read and
    /// checked.
    pub(crate) async fn from_manifest(
        store: Store,
        manifest: Manifest,
        manifest_crc32: u32,
        limits: Limits,
    ) -> Result<Self> {
        if manifest.reader_flags & READER_FLAG_FRAGMENT_TREE != 0 {
            // Every node is read and checked; each fragment's columns once it is placed [VAL-07].
            let tree = FragmentTree::open_async(&store, &manifest, limits.clone()).await?;
            let mut fragments = Vec::with_capacity(usize::try_from(tree.fragment_count()).unwrap_or(0).min(1 << 20));
            tree.for_each_async(|info| {
                fragments.push(info.fragment);
                Ok(())
            })
            .await?;
            return Self::from_log(store, manifest, manifest_crc32, fragments, limits);
        }
        // Segments are read several at a time (at most `SEGMENT_BYTES_IN_FLIGHT` of them, or
        // one larger segment) and applied in order: opening costs about one round trip per
        // wave, not one per segment.
        let mut log: BTreeMap<u64, Arc<Fragment>> = BTreeMap::new();
        let segments = &manifest.segments;
        let mut next = 0;
        while next < segments.len() {
            let (mut end, mut bytes) = (next, 0u64);
            while end < segments.len() && (end == next || bytes + segments[end].size <= SEGMENT_BYTES_IN_FLIGHT) {
                bytes += segments[end].size;
                end += 1;
            }
            let mut wave = Vec::with_capacity(end - next);
            for sref in &segments[next..end] {
                wave.push(read_segment(&store, sref, manifest.next_fragment_id, &limits));
            }
            for seg in futures::future::try_join_all(wave).await? {
                apply_segment(&mut log, seg);
            }
            next = end;
        }
        Self::from_log(store, manifest, manifest_crc32, log.into_values(), limits)
    }

    /// A dataset from its manifest and its fragments in id order (already validated).
    pub(crate) fn from_log(
        store: Store,
        manifest: Manifest,
        manifest_crc32: u32,
        log: impl IntoIterator<Item = Arc<Fragment>>,
        limits: Limits,
    ) -> Result<Self> {
        Self::from_log_marked(store, manifest, manifest_crc32, log.into_iter().map(|f| (f, true)), limits)
    }

    /// As [`Dataset::from_log`], checking the schema's columns `[SEG-06]` only on fragments
    /// marked `true`: a commit's new version keeps its base's fragments, checked when the base
    /// was opened, so a commit costs no schema check per existing fragment.
    pub(crate) fn from_log_marked(
        store: Store,
        manifest: Manifest,
        manifest_crc32: u32,
        log: impl IntoIterator<Item = (Arc<Fragment>, bool)>,
        limits: Limits,
    ) -> Result<Self> {
        let log = log.into_iter();
        let mut fragments = Vec::with_capacity(log.size_hint().0);
        let mut first_row = 0u64;
        for (fragment, check) in log {
            if check {
                fragment.check_columns(&manifest.schema)?;
            }
            let live = fragment.live_rows();
            fragments.push(FragmentInfo { fragment, first_row });
            first_row = first_row.checked_add(live).ok_or_else(|| Error::invalid("manifest", "row counts overflow"))?;
        }
        if first_row != manifest.row_count {
            return Err(Error::invalid(
                paths::manifest_key(&manifest.branch, manifest.version),
                format!("fragments hold {first_row} live rows, manifest says {} [MAN-06]", manifest.row_count),
            ));
        }
        Ok(Self {
            store,
            manifest: Arc::new(manifest),
            manifest_crc32,
            fragments: Arc::new(fragments),
            partial: false,
            limits,
            cache: Arc::new(Mutex::new(Cache::new(DEFAULT_CACHE_BYTES))),
        })
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The manifest of this version.
    #[must_use]
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// CRC-32 of the manifest object (what tags record).
    #[must_use]
    pub fn manifest_crc32(&self) -> u32 {
        self.manifest_crc32
    }

    /// The schema.
    #[must_use]
    pub fn schema(&self) -> &Schema {
        &self.manifest.schema
    }

    /// Number of rows.
    #[must_use]
    pub fn row_count(&self) -> u64 {
        self.manifest.row_count
    }

    /// The version number.
    #[must_use]
    pub fn version(&self) -> u64 {
        self.manifest.version
    }

    /// The branch.
    #[must_use]
    pub fn branch(&self) -> &str {
        &self.manifest.branch
    }

    /// The fragments in row order. For a dataset opened for a view of a version indexed by a
    /// fragment tree ([`Dataset::open_view`], [`Dataset::is_partial`]), only the fragments that
    /// hold the view's rows.
    #[must_use]
    pub fn fragments(&self) -> &[FragmentInfo] {
        &self.fragments
    }

    /// Whether only some fragments were loaded: a view of a version indexed by a fragment tree
    /// reads only the nodes on the paths to its rows (SPEC VAL-19, TREE-07). Reads of rows
    /// outside those fragments are `usage` errors; [`Dataset::checkout`] opens the whole version.
    #[must_use]
    pub fn is_partial(&self) -> bool {
        self.partial
    }

    /// `usage` when this handle is partial: `what` needs every fragment of the version.
    pub(crate) fn require_whole(&self, what: &str) -> Result<()> {
        if self.partial {
            return Err(Error::usage(format!(
                "{what} needs every fragment of {}@{}, and this handle was opened partially (lazily, or for a \
                 view); open the whole version with Dataset::checkout",
                self.branch(),
                self.version()
            )));
        }
        Ok(())
    }

    /// A dataset of some fragments of a version indexed by a fragment tree, found through it
    /// (`fragments` ascending by first row, each holding a row the caller will read). Checks
    /// SEG-06 on each `[VAL-19]`; the tree checked every node it read.
    pub(crate) fn from_located(
        store: Store,
        manifest: Manifest,
        manifest_crc32: u32,
        fragments: Vec<FragmentInfo>,
        limits: Limits,
    ) -> Result<Self> {
        for info in &fragments {
            info.fragment.check_columns(&manifest.schema)?;
        }
        Ok(Self {
            store,
            manifest: Arc::new(manifest),
            manifest_crc32,
            fragments: Arc::new(fragments),
            partial: true,
            limits,
            cache: Arc::new(Mutex::new(Cache::new(DEFAULT_CACHE_BYTES))),
        })
    }

    /// The reader's limits.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// This handle with its own, empty cache of opened data files and deletion vectors,
    /// bounded at `bytes` (default [`DEFAULT_CACHE_BYTES`]; 0 keeps nothing, for a caller that
    /// keeps what it opens itself). Other handles keep the cache they share.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let schema = tessera::Schema::new([tessera::Column::new("id", tessera::DType::I64, &[])])?;
    /// # let ds = tessera::Dataset::create(dir.path().to_str().unwrap(), schema, &Default::default())?;
    /// let small = ds.with_cache_bytes(1 << 20);
    /// assert_eq!(small.cache_stats().cap, 1 << 20);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_cache_bytes(mut self, bytes: u64) -> Self {
        self.cache = Arc::new(Mutex::new(Cache::new(bytes)));
        self
    }

    /// How full the cache of opened data files and deletion vectors is.
    #[must_use]
    pub fn cache_stats(&self) -> CacheStats {
        self.cache().stats()
    }

    /// The cache, locked. Its updates cannot panic halfway, so a poisoned lock is taken over.
    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Resolves a projection (all columns when `None`) to schema columns, in the order asked.
    ///
    /// # Errors
    /// `usage` for an unknown column name.
    pub fn project(&self, columns: Option<&[&str]>) -> Result<Vec<&Column>> {
        match columns {
            None => Ok(self.schema().columns.iter().collect()),
            Some(names) => names
                .iter()
                .map(|n| self.schema().column(n).ok_or_else(|| Error::usage(format!("no column named {n:?}"))))
                .collect(),
        }
    }

    /// Opens (or returns the cached) data file of a fragment, validating header, trailer and
    /// footer `[VAL-09]`..`[VAL-11]`.
    ///
    /// # Errors
    /// The first failed check.
    pub fn data_file(&self, fragment: &Fragment, file: &DataFileRef) -> Result<Arc<DataFile>> {
        block_on(self.data_file_async(fragment, file))
    }

    /// [`Dataset::data_file`] for async callers: one round trip for the header and the tail
    /// (two when the footer is larger than the tail read), no thread of its own.
    ///
    /// # Errors
    /// As [`Dataset::data_file`].
    pub async fn data_file_async(&self, fragment: &Fragment, file: &DataFileRef) -> Result<Arc<DataFile>> {
        let key = Key::File(file.clone(), fragment.row_count);
        if let Some(Value::File(f)) = self.cache().get(&key) {
            return Ok(f);
        }
        paths::validate_relative(&file.path, &file.path)?;
        let columns = self.file_columns(file)?;
        let (header, suffix, suffix_start) = fetch_tail(&self.store, file).await?;
        let tail = check_tail(file, &self.limits, &header, &suffix)?;
        let footer = match footer_outside(&tail, suffix_start) {
            Some(r) => Some(self.store.get_ranges_async(&file.path, &[r]).await?.pop().unwrap_or_default()),
            None => None,
        };
        let f = open_file(
            file,
            fragment.row_count,
            &columns,
            &self.limits,
            tail,
            &suffix,
            suffix_start,
            footer.as_deref(),
        )?;
        let f = Arc::new(f);
        self.cache().insert(key, Value::File(f.clone()));
        Ok(f)
    }

    /// The schema columns a data file holds, ascending by id.
    ///
    /// # Errors
    /// Never fails today; kept fallible for format extensions.
    pub fn file_columns(&self, file: &DataFileRef) -> Result<Vec<&Column>> {
        // Ids no longer in the schema belong to dropped columns and are skipped [SEG-06].
        Ok(file.column_ids.iter().filter_map(|id| self.schema().column_by_id(*id)).collect())
    }

    /// Reads rows `rows` of the projected columns into one batch, verifying every checksum.
    ///
    /// # Errors
    /// `usage` for rows out of range or unknown columns; any validation error of the files.
    pub fn read_rows(&self, rows: Range<u64>, columns: Option<&[&str]>) -> Result<Batch> {
        block_on(self.read_rows_async(rows, columns))
    }

    /// [`Dataset::read_rows`] for async callers (the query engine's scan): the same checks,
    /// with the storage reads awaited on the caller's runtime.
    ///
    /// # Errors
    /// As [`Dataset::read_rows`].
    pub async fn read_rows_async(&self, rows: Range<u64>, columns: Option<&[&str]>) -> Result<Batch> {
        if rows.start > rows.end || rows.end > self.row_count() {
            return Err(Error::usage(format!("rows {rows:?} outside 0..{}", self.row_count())));
        }
        if self.partial {
            self.check_loaded(&rows)?;
        }
        let cols = self.project(columns)?;
        let mut out: Vec<ColumnData> = cols.iter().map(|c| ColumnData::for_column(c)).collect();
        let first = self.fragments.partition_point(|f| f.rows().end <= rows.start);
        for info in self.fragments[first..].iter().take_while(|f| f.first_row < rows.end) {
            let live = rows.start.max(info.first_row) - info.first_row..rows.end.min(info.rows().end) - info.first_row;
            if live.is_empty() {
                continue;
            }
            // Reading all of a fragment's live rows checks every page of it, deleted rows
            // included, so that what a version read checks does not depend on where the deleted
            // rows lie `[VAL-16]`; a partial read checks the span it returns.
            let whole = live.start == 0 && live.end == info.fragment.live_rows();
            let physical = self.physical_rows_async(info, live).await?;
            let local = if whole {
                0..info.fragment.row_count
            } else {
                physical.first().copied().unwrap_or(0)..physical.last().map_or(0, |l| l + 1)
            };
            let dense = physical.len() as u64 == local.end - local.start;
            for file in &info.fragment.files {
                let wanted: Vec<usize> = (0..cols.len()).filter(|&i| file.column_ids.contains(&cols[i].id)).collect();
                if wanted.is_empty() {
                    continue;
                }
                let df = self.data_file_async(&info.fragment, file).await?;
                let mut ranges = Vec::new();
                let mut spans = Vec::new();
                for &i in &wanted {
                    let chunk =
                        df.chunk(cols[i].id).ok_or_else(|| Error::invalid(&file.path, "column missing from footer"))?;
                    let (blocks, _) = df.blocks_for(chunk, &local);
                    spans.push((i, ranges.len(), blocks.len()));
                    ranges.extend(blocks.iter().map(datafile::Block::range));
                }
                let bytes =
                    self.store.get_ranges_async(&file.path, &ranges).await.map_err(|e| referenced(e, &file.path))?;
                for (i, at, n) in spans {
                    let stored: Vec<&[u8]> = bytes[at..at + n].iter().map(Bytes::as_ref).collect();
                    let data = df.decode(cols[i], local.clone(), &stored)?;
                    if dense {
                        out[i].extend_from(&data, 0..data.len())?;
                    } else {
                        for &p in &physical {
                            let r = (p - local.start) as usize;
                            out[i].extend_from(&data, r..r + 1)?;
                        }
                    }
                }
            }
        }
        let mut batch = Batch::new();
        for (c, d) in cols.iter().zip(out) {
            batch.push(c.name.clone(), d)?;
        }
        Ok(batch)
    }

    /// The deleted row offsets of a fragment (empty when none), loaded once and checked `[DEL-04]`.
    ///
    /// # Errors
    /// Validation or storage errors of the deletion vector.
    pub fn deleted_rows(&self, info: &FragmentInfo) -> Result<Arc<Vec<u64>>> {
        if let Some(rows) = self.cached_deletions(info) {
            return Ok(rows);
        }
        block_on(self.deleted_rows_async(info))
    }

    /// [`Dataset::deleted_rows`] for async callers.
    ///
    /// # Errors
    /// As [`Dataset::deleted_rows`].
    pub async fn deleted_rows_async(&self, info: &FragmentInfo) -> Result<Arc<Vec<u64>>> {
        if let Some(rows) = self.cached_deletions(info) {
            return Ok(rows);
        }
        let Some(dref) = &info.fragment.deletion else { return Ok(Arc::new(Vec::new())) };
        let dv = read_deletion_vector_async(&self.store, dref, &info.fragment, &self.limits).await?;
        let rows = Arc::new(dv.rows);
        self.cache().insert(Key::Deleted(info.fragment.id), Value::Deleted(rows.clone()));
        Ok(rows)
    }

    /// A fragment's deleted rows without I/O: none, or those read before.
    fn cached_deletions(&self, info: &FragmentInfo) -> Option<Arc<Vec<u64>>> {
        if info.fragment.deletion.is_none() {
            return Some(Arc::new(Vec::new()));
        }
        match self.cache().get(&Key::Deleted(info.fragment.id)) {
            Some(Value::Deleted(rows)) => Some(rows),
            _ => None,
        }
    }

    /// Physical offsets (within the fragment's files) of the fragment's live rows `live`.
    ///
    /// # Errors
    /// As [`Dataset::deleted_rows`].
    pub fn physical_rows(&self, info: &FragmentInfo, live: Range<u64>) -> Result<Vec<u64>> {
        Ok(physical_of(info, &self.deleted_rows(info)?, live))
    }

    /// [`Dataset::physical_rows`] for async callers.
    ///
    /// # Errors
    /// As [`Dataset::deleted_rows`].
    pub async fn physical_rows_async(&self, info: &FragmentInfo, live: Range<u64>) -> Result<Vec<u64>> {
        Ok(physical_of(info, &self.deleted_rows_async(info).await?, live))
    }

    /// Checks that the loaded fragments of a partial dataset hold every row of `rows`.
    fn check_loaded(&self, rows: &Range<u64>) -> Result<()> {
        let mut next = rows.start;
        let first = self.fragments.partition_point(|f| f.rows().end <= rows.start);
        for info in &self.fragments[first..] {
            if next >= rows.end || info.first_row > next {
                break;
            }
            next = next.max(info.rows().end);
        }
        if next < rows.end {
            return Err(Error::usage(format!(
                "row {next} is not among the rows this dataset was opened for (a view's); open the whole version"
            )));
        }
        Ok(())
    }

    /// Reads one row of the projected columns.
    ///
    /// # Errors
    /// As [`Dataset::read_rows`].
    pub fn read_row(&self, row: u64, columns: Option<&[&str]>) -> Result<Batch> {
        self.read_rows(row..row.saturating_add(1), columns)
    }

    /// Reads every byte of every data file of this version and checks all checksums, sizes,
    /// padding and decoded values `[VAL-14]`, stopping at the first fault; see
    /// [`Dataset::verify_each`] (module [`crate::verify`]) for every fault.
    ///
    /// # Errors
    /// The first fault found.
    pub fn verify(&self) -> Result<VerifyReport> {
        let mut first = None;
        let report = self.verify_each(|fault| {
            first = Some(fault.error);
            std::ops::ControlFlow::Break(())
        });
        first.map_or(Ok(report), Err)
    }
}

/// Physical offsets of a fragment's live rows `live`, given its sorted deleted rows.
fn physical_of(info: &FragmentInfo, deleted: &[u64], live: Range<u64>) -> Vec<u64> {
    if deleted.is_empty() {
        return live.collect();
    }
    let mut out = Vec::with_capacity((live.end - live.start) as usize);
    let mut d = deleted.iter().peekable();
    let mut live_index = 0u64;
    for p in 0..info.fragment.row_count {
        if d.peek() == Some(&&p) {
            d.next();
            continue;
        }
        if live_index >= live.end {
            break;
        }
        if live_index >= live.start {
            out.push(p);
        }
        live_index += 1;
    }
    out
}

/// Reads a fragment's deletion vector and checks it against its reference and the fragment
/// `[DEL-03]` `[DEL-04]`: the one implementation every path that reads one calls.
pub(crate) async fn read_deletion_vector_async(
    store: &Store,
    dref: &DeletionRef,
    fragment: &Fragment,
    limits: &Limits,
) -> Result<DeletionVector> {
    let max = limits.max_segment_body();
    let bytes = store
        .get_bounded_async(&dref.path, envelope::max_object_len(max))
        .await
        .map_err(|e| referenced(e, &dref.path))?;
    if bytes.len() as u64 != dref.size || envelope::stored_crc(&bytes) != dref.crc32 {
        return Err(Error::invalid(&dref.path, "deletion vector size or CRC differs from its reference [DEL-03]"));
    }
    let dv: DeletionVector = envelope::open(ObjectKind::Deletion, &bytes, max, &dref.path)?;
    dv.validate(fragment, dref, &dref.path)?;
    Ok(dv)
}

/// Segment bytes an open reads at once (a larger segment is read alone).
const SEGMENT_BYTES_IN_FLIGHT: u64 = 64 << 20;

/// Reads one segment of the fragment log and checks it against its reference `[SEG-01]`.
async fn read_segment(store: &Store, sref: &SegmentRef, next_fragment_id: u64, limits: &Limits) -> Result<Segment> {
    let max = envelope::max_object_len(limits.max_segment_body());
    let bytes = store.get_bounded_async(&sref.path, max).await.map_err(|e| referenced(e, &sref.path))?;
    if bytes.len() as u64 != sref.size || envelope::stored_crc(&bytes) != sref.crc32 {
        return Err(Error::invalid(&sref.path, "segment size or CRC differs from the manifest's reference [SEG-01]"));
    }
    let seg: Segment = envelope::open(ObjectKind::Segment, &bytes, limits.max_segment_body(), &sref.path)?;
    seg.validate(sref, next_fragment_id, &sref.path)?;
    Ok(seg)
}

/// Applies one segment of the fragment log `[SEG-08]`: removals first (removing an id that is
/// not present is a no-op: merged segments carry removals forward without knowing which older
/// segment lists the fragment), then inserts or replaces by id.
pub(crate) fn apply_segment(log: &mut BTreeMap<u64, Arc<Fragment>>, seg: Segment) {
    for id in &seg.removed {
        log.remove(id);
    }
    log.extend(seg.fragments.into_iter().map(|f| (f.id, Arc::new(f))));
}

/// Fetches the header (first 32 bytes) and a suffix of a data file in one request where the
/// file is small, checking the object's size against the reference `[VAL-09]`.
async fn fetch_tail(store: &Store, file: &DataFileRef) -> Result<(Bytes, Bytes, u64)> {
    const SUFFIX: u64 = 64 << 10;
    let path = store.path(&file.path);
    let want = SUFFIX.min(file.size);
    let start = file.size - want;
    // Bounded ranges (not a suffix range, which Azure does not serve): the size is known. The
    // header and the tail go out together, so opening a file costs one round trip (two when
    // the footer is larger than the tail read).
    let get = |range: Range<u64>| {
        let path = path.clone();
        async move {
            let opts = GetOptions { range: Some(GetRange::Bounded(range)), ..GetOptions::default() };
            store.object_store().get_opts(&path, opts).await
        }
    };
    let (got, header) = if start <= datafile::HEADER_LEN {
        (get(0..file.size).await, None)
    } else {
        let (t, h) = futures::join!(get(start..file.size), get(0..datafile::HEADER_LEN));
        (t, Some(h))
    };
    if let Err(e) = &got
        && !matches!(e, object_store::Error::NotFound { .. })
    {
        // The range may be past the end of a shorter file: report a size mismatch as such.
        if let Ok(meta) = store.object_store().head(&path).await
            && meta.size != file.size
        {
            return Err(Error::invalid(
                &file.path,
                format!("file is {} bytes, manifest says {} [SEG-07]", meta.size, file.size),
            ));
        }
    }
    let r = got.map_err(|e| match e {
        object_store::Error::NotFound { .. } => {
            Error::invalid(&file.path, "referenced data file does not exist [VAL-15]")
        }
        e => Error::Io { path: file.path.clone(), source: e },
    })?;
    let actual = r.meta.size;
    if actual != file.size {
        return Err(Error::invalid(
            &file.path,
            format!("file is {actual} bytes, manifest says {} [SEG-07]", file.size),
        ));
    }
    let start = r.range.start;
    let suffix = store.bounded_body(&file.path, r).await?;
    let header = match header {
        None => suffix.slice(..suffix.len().min(datafile::HEADER_LEN as usize)),
        Some(h) => {
            let h = h.map_err(|e| Error::Io { path: file.path.clone(), source: e })?;
            store.bounded_body(&file.path, h).await?
        }
    };
    Ok((header, suffix, start))
}

/// Checks a data file's header and trailer from its first bytes and a suffix that ends at
/// the file's end `[VAL-09]`: what the trailer says about the footer. Sans-IO, so blocking and
/// async callers share it (with [`footer_outside`] and [`open_file`]).
///
/// # Errors
/// The first failed check of the header or trailer.
pub(crate) fn check_tail(file: &DataFileRef, limits: &Limits, header: &[u8], suffix: &[u8]) -> Result<datafile::Tail> {
    let what = file.path.as_str();
    datafile::check_header(header, what)?;
    let t = datafile::TRAILER_LEN as usize;
    if suffix.len() < t {
        return Err(Error::malformed(what, "file shorter than its trailer [DF-01]"));
    }
    datafile::parse_tail(&suffix[suffix.len() - t..], file.size, limits, what)
}

/// The footer's byte range when the suffix read (from `suffix_start` to the end) does not
/// hold all of it: the caller reads it and hands it to [`open_file`].
pub(crate) fn footer_outside(tail: &datafile::Tail, suffix_start: u64) -> Option<Range<u64>> {
    (tail.footer_offset < suffix_start).then(|| tail.footer_offset..tail.footer_offset + tail.footer_len)
}

/// Validates a data file's footer `[VAL-10]`, `[VAL-11]`, taken from `suffix` or, when
/// [`footer_outside`] named a range, from `footer`.
///
/// # Errors
/// The first failed check; `usage` when the footer lies outside the suffix and `footer` is
/// missing or of the wrong length.
#[allow(clippy::too_many_arguments)]
pub(crate) fn open_file(
    file: &DataFileRef,
    rows: u64,
    columns: &[&Column],
    limits: &Limits,
    tail: datafile::Tail,
    suffix: &[u8],
    suffix_start: u64,
    footer: Option<&[u8]>,
) -> Result<DataFile> {
    let what = file.path.as_str();
    let footer_bytes: &[u8] = match (footer, footer_outside(&tail, suffix_start)) {
        (None, None) => {
            let a = (tail.footer_offset - suffix_start) as usize;
            &suffix[a..a + tail.footer_len as usize]
        }
        (Some(f), Some(r)) if f.len() as u64 == r.end - r.start => f,
        _ => return Err(Error::usage(format!("{what}: the footer was not read with the file's tail"))),
    };
    DataFile::open(what, tail, footer_bytes, file.footer_crc32, rows, columns, limits)
}

/// The manifest of version `at` (a tag's exactly, checked against the tag record) and its CRC,
/// with every check of VAL-05 and VAL-06 (what [`Dataset::open_lazy`] and
/// [`FragmentTree::open_at`] start from).
pub(crate) async fn load_manifest_at(store: &Store, at: &At, limits: &Limits) -> Result<(Manifest, u32)> {
    if let At::Tag(name) = at {
        return crate::refs::load_tagged_manifest(store, name, limits).await;
    }
    let (branch, version) = resolve(store, at, limits).await?;
    load_manifest(store, &branch, version, limits).await
}

/// Finds (branch, version) for a request: one LIST for "latest" `[VER-02]`; a tag is read and
/// checked `[REF-02]`.
pub(crate) async fn resolve(store: &Store, at: &At, limits: &Limits) -> Result<(String, u64)> {
    if let At::Version(0) | At::BranchVersion(_, 0) = at {
        return Err(Error::usage("version 0 does not exist: versions start at 1 [VER-03] [LAY-08]"));
    }
    match at {
        At::Latest => Ok((MAIN.to_string(), latest_version_async(store, MAIN).await?)),
        At::Version(v) => Ok((MAIN.to_string(), *v)),
        At::Branch(b) => {
            paths::validate_ref_name(b)?;
            Ok((b.clone(), latest_version_async(store, b).await?))
        }
        At::BranchVersion(b, v) => {
            paths::validate_ref_name(b)?;
            Ok((b.clone(), *v))
        }
        At::Tag(t) => {
            let tag = read_tag(store, t, limits).await?;
            Ok((tag.target.branch, tag.target.version))
        }
    }
}

/// Reads and validates a tag record.
pub(crate) async fn read_tag(store: &Store, name: &str, limits: &Limits) -> Result<Tag> {
    paths::validate_ref_name(name)?;
    let key = paths::tag_key(name);
    let bytes = store.get_bounded_async(&key, envelope::max_object_len(limits.max_tag_body())).await?;
    let tag: Tag = envelope::open(ObjectKind::Tag, &bytes, limits.max_tag_body(), &key)?;
    if tag.name != name {
        return Err(Error::invalid(&key, format!("tag record names {:?} [REF-01]", tag.name)));
    }
    paths::validate_ref_name(&tag.target.branch).map_err(|_| Error::invalid(&key, "bad branch name in tag"))?;
    Ok(tag)
}

/// The newest version of a branch by one LIST `[VER-02]`.
///
/// # Errors
/// `not_found` if the branch has no manifests.
pub fn latest_version(store: &Store, branch: &str) -> Result<u64> {
    block_on(latest_version_async(store, branch))
}

/// The newest version of a branch by one LIST (async).
///
/// # Errors
/// As [`latest_version`].
pub async fn latest_version_async(store: &Store, branch: &str) -> Result<u64> {
    let dir = format!("{}/{branch}", paths::BRANCHES_DIR);
    store
        .list_async(&dir)
        .await?
        .iter()
        .filter_map(|(n, _)| paths::parse_manifest_name(n))
        .max()
        .ok_or_else(|| Error::NotFound { what: format!("branch {branch:?} in {}", store.url()) })
}

/// Reads, checks and decodes a manifest, following a branch's base for versions from before
/// the branch existed `[VER-03]`. Returns the manifest and the CRC of its object.
pub(crate) async fn load_manifest(
    store: &Store,
    branch: &str,
    version: u64,
    limits: &Limits,
) -> Result<(Manifest, u32)> {
    let mut branch = branch.to_string();
    let mut visited: Vec<String> = Vec::new();
    loop {
        match load_manifest_exact(store, &branch, version, limits).await {
            Err(Error::NotFound { .. }) => {
                visited.push(branch.clone());
                match branch_base(store, &branch, limits).await? {
                    Some(base) if visited.contains(&base.branch) => {
                        return Err(Error::invalid(&base.branch, "branch bases form a cycle [VER-03]"));
                    }
                    Some(base) if version <= base.version => branch = base.branch,
                    _ if visited.len() > 1 => {
                        // A base promised this version and it is missing.
                        return Err(Error::invalid(&branch, format!("base version {version} is missing [VER-03]")));
                    }
                    _ => return Err(Error::NotFound { what: format!("version {version} of branch {branch:?}") }),
                }
            }
            other => return other,
        }
    }
}

/// Reads, checks and decodes the manifest stored under exactly `branch`/`version`.
pub(crate) async fn load_manifest_exact(
    store: &Store,
    branch: &str,
    version: u64,
    limits: &Limits,
) -> Result<(Manifest, u32)> {
    let key = paths::manifest_key(branch, version);
    let bytes = store.get_bounded_async(&key, envelope::max_object_len(limits.max_manifest_body())).await?;
    let m = decode_manifest(&bytes, branch, version, limits)?;
    Ok((m, envelope::stored_crc(&bytes)))
}

/// Checks and decodes the bytes of the manifest stored under `branch`/`version`
/// (VAL-05 after the GET, and VAL-06).
pub(crate) fn decode_manifest(bytes: &[u8], branch: &str, version: u64, limits: &Limits) -> Result<Manifest> {
    let key = paths::manifest_key(branch, version);
    let m: Manifest = envelope::open_checked(ObjectKind::Manifest, bytes, limits.max_manifest_body(), &key, |body| {
        check_reader_flags(body, &key)
    })?;
    m.validate(branch, version, &key)?;
    Ok(m)
}

/// Checks the reader-required flags, the first eight bytes of a manifest body, before the body
/// is decoded `[FLG-03]`.
fn check_reader_flags(body: &[u8], what: &str) -> Result<()> {
    let flags = body.get(..8).map_or(0, |b| u64::from_le_bytes(envelope::le8(b)));
    let unknown = flags & !crate::manifest::KNOWN_READER_FLAGS;
    if unknown != 0 {
        return Err(Error::unsupported(what, format!("unknown reader-required flags {unknown:#x} [FLG-03]")));
    }
    Ok(())
}

/// The base of a branch: the `base` of its earliest manifest.
async fn branch_base(store: &Store, branch: &str, limits: &Limits) -> Result<Option<VersionRef>> {
    let dir = format!("{}/{branch}", paths::BRANCHES_DIR);
    let Some(first) = store.list_async(&dir).await?.iter().filter_map(|(n, _)| paths::parse_manifest_name(n)).min()
    else {
        return Ok(None);
    };
    // The LIST returned this key, so an absent object means the store changed under the reader
    // (manifests are never deleted): `io`, not `not_found` `[VER-03]`.
    let (m, _) = load_manifest_exact(store, branch, first, limits).await.map_err(|e| match e {
        Error::NotFound { what } => Error::Io {
            path: paths::manifest_key(branch, first),
            source: object_store::Error::NotFound { path: what, source: "listed, then absent".into() },
        },
        other => other,
    })?;
    Ok(m.base)
}
