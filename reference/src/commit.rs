//! Writing: creating datasets, appending rows, and the commit protocol
//! (SPEC.md §"Commit protocol").
//!
//! A commit uploads its data files and one index segment (content-addressed, so re-uploads
//! are harmless), then creates the next version's manifest with create-if-absent. If another
//! writer took that version first, an append is rebased onto the new latest version and tried
//! again; anything else is a [`Error::Conflict`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::batch::Batch;
use crate::column::ColumnData;
use crate::datafile::DataFileWriter;
use crate::dataset::{At, Dataset, latest_version, load_manifest};
use crate::envelope::{self, ObjectKind};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::manifest::{
    ColumnStats, DataFileRef, DeletionRef, DeletionVector, Fragment, KNOWN_WRITER_FLAGS, Manifest, Segment, SegmentRef,
    VersionRef,
};
use crate::paths::{self, MAIN};
use crate::schema::{Column, Schema};
use crate::stats;
use crate::store::{Created, Store};

/// Default target size of one data file: 64 MiB. Large enough that a sequential GET from
/// object storage runs at bandwidth rather than latency (tens of ms to first byte, then
/// 100+ MB/s per stream), small enough that a block shuffle window of a few files fits in a
/// loader's memory budget.
pub const DEFAULT_TARGET_FILE_BYTES: u64 = 64 << 20;

/// How many times an append is rebased onto a newer version before giving up.
const MAX_REBASES: usize = 16;

/// Options for writers.
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// Raw bytes per data file the writer aims at (a file holds at least one row).
    pub target_file_bytes: u64,
    /// Raw bytes per page.
    pub page_bytes: u64,
    /// Column groups: each inner list of column names is stored in its own data files;
    /// columns not named form one last group.
    pub column_groups: Vec<Vec<String>>,
    /// Fixed commit time (for byte-stable output); the clock when `None`.
    pub timestamp_ms: Option<u64>,
    /// Fixed writer nonce (for byte-stable output); random when `None`.
    pub writer_id: Option<[u8; 16]>,
    /// Reader limits for the datasets the writer reopens.
    pub limits: Limits,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            target_file_bytes: DEFAULT_TARGET_FILE_BYTES,
            page_bytes: crate::datafile::DEFAULT_PAGE_BYTES,
            column_groups: Vec::new(),
            timestamp_ms: None,
            writer_id: None,
            limits: Limits::default(),
        }
    }
}

impl WriteOptions {
    pub(crate) fn timestamp(&self) -> u64 {
        self.timestamp_ms
            .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64))
    }

    pub(crate) fn writer_id(&self) -> [u8; 16] {
        self.writer_id.unwrap_or_else(random_id)
    }
}

/// A random 16-byte nonce from the clock, the process id, a counter and the std hasher's keys.
fn random_id() -> [u8; 16] {
    use sha2::Digest;
    use std::hash::{BuildHasher, RandomState};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = sha2::Sha256::new();
    h.update(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()).to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    h.update(RandomState::new().hash_one(0u8).to_le_bytes());
    let d = h.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

impl Dataset {
    /// Creates a dataset: version 1 of `main`, with the schema and no rows.
    ///
    /// # Errors
    /// `conflict` if a dataset exists at the location; `unsupported` if the store cannot
    /// commit; `invalid`/`limit` for a bad schema.
    ///
    /// # Example
    /// ```
    /// use tessera::{Column, Dataset, DType, Dim, Schema, WriteOptions};
    /// let dir = tempfile::tempdir()?;
    /// let schema = Schema::new([Column::new("label", DType::I64, &[])])?;
    /// let ds = Dataset::create(dir.path().to_str().unwrap(), schema, &WriteOptions::default())?;
    /// assert_eq!((ds.version(), ds.row_count()), (1, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create(location: &str, schema: Schema, options: &WriteOptions) -> Result<Self> {
        let store = Store::open(location)?;
        Self::create_in(&store, schema, options)
    }

    /// Creates a dataset in an opened store (see [`Dataset::create`]).
    ///
    /// # Errors
    /// As [`Dataset::create`].
    pub fn create_in(store: &Store, schema: Schema, options: &WriteOptions) -> Result<Self> {
        schema.validate()?;
        let next_column_id = schema.columns.iter().map(|c| c.id + 1).max().unwrap_or(0);
        let manifest = Manifest {
            reader_flags: 0,
            writer_flags: 0,
            branch: MAIN.to_string(),
            version: 1,
            parent: None,
            base: None,
            merged: None,
            timestamp_ms: options.timestamp(),
            message: "create".to_string(),
            writer_id: options.writer_id(),
            schema,
            next_column_id,
            next_fragment_id: 0,
            row_count: 0,
            segments: Vec::new(),
            stats: Vec::new(),
            metadata: Vec::new(),
        };
        match publish(store, &manifest)? {
            Published::Ours(crc) => Self::from_manifest(store.clone(), manifest, crc, options.limits.clone()),
            Published::Theirs => Err(Error::Conflict { what: format!("a dataset exists at {}", store.url()) }),
        }
    }

    /// Starts a writer that appends to this version's branch.
    #[must_use]
    pub fn writer(&self, options: WriteOptions) -> DatasetWriter {
        DatasetWriter { base: self.clone(), options, pending: Vec::new(), buffer: None, buffered_bytes: 0 }
    }

    /// Appends one batch and commits it: a shorthand for [`Dataset::writer`], `append`, `commit`.
    ///
    /// # Errors
    /// As [`DatasetWriter::append`] and [`DatasetWriter::commit`].
    pub fn append(&self, batch: &Batch, message: &str, options: WriteOptions) -> Result<Self> {
        let mut w = self.writer(options);
        w.append(batch)?;
        w.commit(message)
    }
}

/// Buffers rows, writes data files as they fill, and commits them as one new version.
#[derive(Debug)]
pub struct DatasetWriter {
    base: Dataset,
    options: WriteOptions,
    pending: Vec<PendingFragment>,
    buffer: Option<Vec<ColumnData>>,
    buffered_bytes: u64,
}

#[derive(Debug)]
pub(crate) struct PendingFragment {
    row_count: u64,
    files: Vec<DataFileRef>,
    stats: Vec<ColumnStats>,
}

impl DatasetWriter {
    /// Appends rows. The batch must have exactly the schema's columns (any order).
    ///
    /// # Errors
    /// `usage` if columns are missing, extra, or of the wrong type; storage errors when a data
    /// file is flushed.
    pub fn append(&mut self, batch: &Batch) -> Result<()> {
        let schema = self.base.schema().clone();
        if batch.columns().len() != schema.columns.len() {
            return Err(Error::usage(format!(
                "batch has {} columns, schema has {}",
                batch.columns().len(),
                schema.columns.len()
            )));
        }
        let mut cols = Vec::with_capacity(schema.columns.len());
        for c in &schema.columns {
            let d = batch.get(&c.name).ok_or_else(|| Error::usage(format!("batch lacks column {:?}", c.name)))?;
            let d = if c.nullable && d.validity().is_none() { d.clone().into_nullable() } else { d.clone() };
            d.check_against(c)?;
            cols.push(d);
        }
        let rows = batch.num_rows();
        let per_row: Vec<&[u64]> = cols.iter().map(ColumnData::offsets).collect();
        let mut start = 0;
        while start < rows {
            // Take as many rows as fit in the current file.
            let mut end = start;
            let mut bytes = self.buffered_bytes;
            while end < rows {
                let row: u64 = per_row.iter().map(|o| o[end + 1] - o[end]).sum();
                let buffered_rows = self.buffer.as_ref().map_or(0, |b| b.first().map_or(0, ColumnData::len));
                if (bytes > 0 && bytes + row > self.options.target_file_bytes)
                    || (buffered_rows + end - start) as u64 >= crate::limits::hard::MAX_FILE_ROWS
                {
                    break;
                }
                bytes += row;
                end += 1;
            }
            let buf = self.buffer.get_or_insert_with(|| schema.columns.iter().map(ColumnData::for_column).collect());
            for (b, d) in buf.iter_mut().zip(&cols) {
                b.extend_from(d, start..end)?;
            }
            self.buffered_bytes = bytes;
            start = end;
            if end < rows || self.buffered_bytes >= self.options.target_file_bytes {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Writes the buffered rows as one fragment (one data file per column group).
    fn flush(&mut self) -> Result<()> {
        let Some(buf) = self.buffer.take() else { return Ok(()) };
        self.buffered_bytes = 0;
        let rows = buf.first().map_or(0, ColumnData::len);
        if rows == 0 {
            return Ok(());
        }
        let schema = self.base.schema();
        let writer = DataFileWriter::with_page_bytes(self.options.page_bytes);
        let mut files = Vec::new();
        for group in column_groups(schema, &self.options.column_groups)? {
            let cols: Vec<&Column> = group.iter().map(|&i| &schema.columns[i]).collect();
            let data: Vec<&ColumnData> = group.iter().map(|&i| &buf[i]).collect();
            files.push(write_data_file(self.base.store(), &writer, &cols, &data)?);
        }
        let stats = schema.columns.iter().zip(&buf).map(|(c, d)| stats::compute(c, d)).collect();
        self.pending.push(PendingFragment { row_count: rows as u64, files, stats });
        Ok(())
    }

    /// Commits everything appended as the next version of the branch and returns it.
    ///
    /// # Errors
    /// `conflict` if the branch moved in a way an append cannot be rebased over (schema
    /// changed, unknown writer flags) or after too many retries; storage errors.
    pub fn commit(mut self, message: &str) -> Result<Dataset> {
        self.flush()?;
        let pending = std::mem::take(&mut self.pending);
        commit_change(&self.base, &Change::Append(pending), message, &self.options)
    }
}

/// What a commit changes, in a form that can be re-applied to a newer base (rebase).
#[derive(Debug)]
pub(crate) enum Change {
    /// New fragments (ids are assigned when the manifest is built).
    Append(Vec<PendingFragment>),
    /// Newly deleted physical rows per fragment id.
    Delete(BTreeMap<u64, Vec<u64>>),
    /// Replaced or removed fragments and/or a new schema (updates, schema evolution, compaction).
    Rewrite(Rewrite),
}

/// A change that replaces existing fragments (same ids) or the schema.
#[derive(Debug, Default)]
pub(crate) struct Rewrite {
    /// The new schema, when it changes.
    pub(crate) schema: Option<Schema>,
    /// The new `next_column_id`, when columns are added.
    pub(crate) next_column_id: Option<u32>,
    /// New versions of existing fragments (same ids).
    pub(crate) replace: Vec<Fragment>,
    /// Fragment ids removed.
    pub(crate) remove: Vec<u64>,
    /// Whole fragments added at the end (their ids are reassigned).
    pub(crate) add: Vec<Fragment>,
    /// The second parent, for a merge commit.
    pub(crate) merged: Option<VersionRef>,
    /// Conflicts with any concurrent commit (not only with ones touching the same fragments).
    pub(crate) exclusive: bool,
}

/// Runs the optimistic commit loop `[VER-05]`: build the next manifest on `base`, try to create
/// it, and on losing the race rebase onto the newer version when the change commutes with what
/// landed (appends always; deletes when the fragments they touch are unchanged).
pub(crate) fn commit_change(base: &Dataset, change: &Change, message: &str, options: &WriteOptions) -> Result<Dataset> {
    let store = base.store().clone();
    let mut base = base.clone();
    for _ in 0..MAX_REBASES {
        let unknown = base.manifest().writer_flags & !KNOWN_WRITER_FLAGS;
        if unknown != 0 {
            return Err(Error::unsupported(
                base.branch(),
                format!("unknown writer-required flags {unknown:#x} [FLG-04]"),
            ));
        }
        let (manifest, delta) = build(&store, &base, change, message, options)?;
        match publish(&store, &manifest)? {
            // The new version is the base plus the delta: no segment is read back, so a commit
            // costs O(change) requests whatever the size of the dataset [SEG-08].
            Published::Ours(crc) => {
                let log = apply_delta(&base, delta);
                return Dataset::from_log(store, manifest, crc, log, options.limits.clone());
            }
            Published::Theirs => {
                let latest = latest_version(&store, base.branch())?;
                let newer = base.checkout(&At::BranchVersion(base.branch().to_string(), latest))?;
                check_rebase(&base, &newer, change)?;
                base = newer;
            }
        }
    }
    Err(Error::Conflict { what: format!("gave up after {MAX_REBASES} lost commit races on {}", base.branch()) })
}

/// The conflict matrix `[VER-08]`: a change can move onto `newer` if the schema is the same and,
/// for deletes, every fragment it touches is unchanged in `newer`.
fn check_rebase(base: &Dataset, newer: &Dataset, change: &Change) -> Result<()> {
    if newer.schema() != base.schema() {
        return Err(Error::Conflict {
            what: format!("{}@{} changed the schema since {}", newer.branch(), newer.version(), base.version()),
        });
    }
    let touched: Vec<u64> = match change {
        Change::Append(_) => Vec::new(),
        Change::Delete(rows) => rows.keys().copied().collect(),
        Change::Rewrite(r) if r.exclusive => {
            return Err(Error::Conflict {
                what: format!(
                    "{}@{} landed while an exclusive change was prepared on {}",
                    newer.branch(),
                    newer.version(),
                    base.version()
                ),
            });
        }
        Change::Rewrite(r) => r.replace.iter().map(|f| f.id).chain(r.remove.iter().copied()).collect(),
    };
    {
        for id in &touched {
            let before = base.fragments().iter().find(|f| f.fragment.id == *id).map(|f| &f.fragment);
            let after = newer.fragments().iter().find(|f| f.fragment.id == *id).map(|f| &f.fragment);
            if before != after {
                return Err(Error::Conflict {
                    what: format!("fragment {id} was changed by {}@{} concurrently", newer.branch(), newer.version()),
                });
            }
        }
    }
    Ok(())
}

/// The fragments of `base` with a segment applied. Appends (ids above every existing one) only
/// extend the shared list.
fn apply_delta(base: &Dataset, delta: Option<Segment>) -> Vec<Arc<Fragment>> {
    let existing = base.fragments().iter().map(|f| f.fragment.clone());
    let Some(seg) = delta else { return existing.collect() };
    let max = base.fragments().last().map(|f| f.fragment.id);
    if seg.removed.is_empty() && seg.fragments.first().is_none_or(|f| max.is_none_or(|m| f.id > m)) {
        return existing.chain(seg.fragments.into_iter().map(Arc::new)).collect();
    }
    let mut log: BTreeMap<u64, Arc<Fragment>> = existing.map(|f| (f.id, f)).collect();
    crate::dataset::apply_segment(&mut log, seg);
    log.into_values().collect()
}

/// The manifest of the next version on top of `base` for `change`, writing the new index
/// segment (and deletion vectors) and merging segments in geometric tiers. Returns the manifest
/// and the segment of this change (before tier merging), to apply to `base` in memory.
#[allow(clippy::too_many_lines)] // one pass over the change kinds; each arm is short
fn build(
    store: &Store,
    base: &Dataset,
    change: &Change,
    message: &str,
    options: &WriteOptions,
) -> Result<(Manifest, Option<Segment>)> {
    let bm = base.manifest();
    let mut next_fragment_id = bm.next_fragment_id;
    let mut fragments = Vec::new();
    let mut removed = Vec::new();
    let mut row_count = bm.row_count;
    // Appends extend the aggregate; other changes recompute it from the resulting fragments.
    let mut stats_lists: Vec<Vec<ColumnStats>> =
        if base.fragments().is_empty() { Vec::new() } else { vec![bm.stats.clone()] };
    match change {
        Change::Append(pending) => {
            for p in pending {
                fragments.push(Fragment {
                    id: next_fragment_id,
                    row_count: p.row_count,
                    files: p.files.clone(),
                    deletion: None,
                    stats: p.stats.clone(),
                });
                stats_lists.push(p.stats.clone());
                next_fragment_id += 1;
                row_count += p.row_count;
            }
        }
        Change::Rewrite(r) => {
            let live = |id: u64| base.fragments().iter().find(|f| f.fragment.id == id).map(|f| f.fragment.live_rows());
            for f in &r.replace {
                let old =
                    live(f.id).ok_or_else(|| Error::usage(format!("fragment {} is not in the base version", f.id)))?;
                row_count = row_count - old + f.live_rows();
                fragments.push(f.clone());
            }
            for id in &r.remove {
                row_count -=
                    live(*id).ok_or_else(|| Error::usage(format!("fragment {id} is not in the base version")))?;
                removed.push(*id);
            }
            for f in &r.add {
                row_count += f.live_rows();
                let deletion = match &f.deletion {
                    Some(d) => Some(renumber_deletion(store, d, f, next_fragment_id, base.limits())?),
                    None => None,
                };
                fragments.push(Fragment { id: next_fragment_id, deletion, ..f.clone() });
                next_fragment_id += 1;
            }
            fragments.sort_by_key(|f| f.id);
            removed.sort_unstable();
            // Statistics are recomputed from the resulting fragments.
            let gone: Vec<u64> = r.replace.iter().map(|f| f.id).chain(r.remove.iter().copied()).collect();
            stats_lists = base
                .fragments()
                .iter()
                .filter(|f| !gone.contains(&f.fragment.id))
                .map(|f| f.fragment.stats.clone())
                .chain(r.replace.iter().chain(&r.add).map(|f| f.stats.clone()))
                .collect();
        }
        Change::Delete(new_rows) => {
            for (id, rows) in new_rows {
                let info = base
                    .fragments()
                    .iter()
                    .find(|f| f.fragment.id == *id)
                    .ok_or_else(|| Error::usage(format!("fragment {id} is not in the base version")))?;
                let mut all: Vec<u64> = base.deleted_rows(info)?.to_vec();
                all.extend_from_slice(rows);
                all.sort_unstable();
                all.dedup();
                row_count -=
                    all.len() as u64 - info.fragment.row_count.min(info.fragment.row_count - info.fragment.live_rows());
                if all.len() as u64 == info.fragment.row_count {
                    removed.push(*id);
                    continue;
                }
                let dv = DeletionVector { fragment_id: *id, rows: all };
                let bytes = envelope::seal(ObjectKind::Deletion, &dv)?;
                let key = paths::content_key(paths::DELETIONS_DIR, "tsx", &bytes);
                let dref = DeletionRef {
                    path: key.clone(),
                    size: bytes.len() as u64,
                    crc32: envelope::stored_crc(&bytes),
                    deleted_count: dv.rows.len() as u64,
                };
                store.put_if_absent(&key, Bytes::from(bytes))?;
                fragments.push(Fragment { deletion: Some(dref), ..(*info.fragment).clone() });
            }
        }
    }
    let mut segments = bm.segments.clone();
    let final_schema = match change {
        Change::Rewrite(Rewrite { schema: Some(s), .. }) => s.clone(),
        _ => bm.schema.clone(),
    };
    if let Change::Delete(_) = change {
        stats_lists = base
            .fragments()
            .iter()
            .filter(|f| !removed.contains(&f.fragment.id) && !fragments.iter().any(|n| n.id == f.fragment.id))
            .map(|f| f.fragment.stats.clone())
            .chain(fragments.iter().map(|f| f.stats.clone()))
            .collect();
    }
    let delta = if fragments.is_empty() && removed.is_empty() {
        None
    } else {
        let seg = Segment { fragments, removed };
        segments.push(write_segment(store, &seg)?);
        merge_tiers(store, &mut segments, base.limits())?;
        Some(seg)
    };
    let manifest = Manifest {
        reader_flags: bm.reader_flags,
        writer_flags: bm.writer_flags,
        branch: bm.branch.clone(),
        version: bm.version + 1,
        parent: Some(bm.version_ref()),
        base: None,
        merged: match change {
            Change::Rewrite(r) => r.merged.clone(),
            _ => None,
        },
        timestamp_ms: options.timestamp(),
        message: message.to_string(),
        writer_id: options.writer_id(),
        schema: match change {
            Change::Rewrite(Rewrite { schema: Some(s), .. }) => s.clone(),
            _ => bm.schema.clone(),
        },
        next_column_id: match change {
            Change::Rewrite(Rewrite { next_column_id: Some(n), .. }) => *n,
            _ => bm.next_column_id,
        },
        next_fragment_id,
        row_count,
        segments,
        stats: aggregate_stats(&stats_lists, &final_schema),
        metadata: bm.metadata.clone(),
    };
    Ok((manifest, delta))
}

/// Copies a fragment's deletion vector under a new fragment id (a deletion vector names its
/// fragment `[DEL-04]`), for fragments that a merge brings over with a new id.
fn renumber_deletion(
    store: &Store,
    d: &DeletionRef,
    f: &Fragment,
    new_id: u64,
    limits: &Limits,
) -> Result<DeletionRef> {
    let mut dv = crate::dataset::read_deletion_vector(store, d, f, limits)?;
    dv.fragment_id = new_id;
    let bytes = envelope::seal(ObjectKind::Deletion, &dv)?;
    let key = paths::content_key(paths::DELETIONS_DIR, "tsx", &bytes);
    let out = DeletionRef {
        path: key.clone(),
        size: bytes.len() as u64,
        crc32: envelope::stored_crc(&bytes),
        deleted_count: d.deleted_count,
    };
    store.put_if_absent(&key, Bytes::from(bytes))?;
    Ok(out)
}

/// The version-wide statistics `[STAT-06]`: a schema column is included only when every list
/// (fragment, or the previous aggregate) has it.
fn aggregate_stats(lists: &[Vec<ColumnStats>], schema: &Schema) -> Vec<ColumnStats> {
    let mut merged = stats::merge_all(lists.iter().map(Vec::as_slice));
    merged.retain(|s| {
        schema.column_by_id(s.column_id).is_some() && lists.iter().all(|l| l.iter().any(|x| x.column_id == s.column_id))
    });
    merged
}

/// Writes an index segment (content-addressed) and returns its reference.
fn write_segment(store: &Store, seg: &Segment) -> Result<SegmentRef> {
    let bytes = envelope::seal(ObjectKind::Segment, seg)?;
    let key = paths::content_key(paths::INDEX_DIR, "tsi", &bytes);
    let sref = SegmentRef {
        path: key.clone(),
        size: bytes.len() as u64,
        crc32: envelope::stored_crc(&bytes),
        fragment_count: seg.fragments.len() as u64,
        row_count: seg.fragments.iter().map(|f| f.row_count).sum(),
    };
    store.put_if_absent(&key, Bytes::from(bytes))?;
    Ok(sref)
}

/// Keeps the segment list logarithmic: while the newest segment is at least half the size of
/// the one before it, the two are merged into one (a binary counter over segment sizes). A
/// commit therefore rewrites O(change) index entries amortised, and a reader opens
/// O(log fragments) segments `[SEG-10]`.
fn merge_tiers(store: &Store, segments: &mut Vec<SegmentRef>, limits: &Limits) -> Result<()> {
    let weight = |s: &SegmentRef| s.fragment_count.max(1);
    while segments.len() >= 2 && weight(&segments[segments.len() - 1]) * 2 >= weight(&segments[segments.len() - 2]) {
        let newer = segments.pop().ok_or_else(|| Error::usage("segment list empty"))?;
        let older = segments.pop().ok_or_else(|| Error::usage("segment list empty"))?;
        let read = |r: &SegmentRef| -> Result<Segment> {
            let bytes = store.get_bounded(&r.path, envelope::max_object_len(limits.max_segment_body()))?;
            envelope::open(ObjectKind::Segment, &bytes, limits.max_segment_body(), &r.path)
        };
        let (a, b) = (read(&older)?, read(&newer)?);
        let mut map: BTreeMap<u64, Fragment> = a.fragments.into_iter().map(|f| (f.id, f)).collect();
        let mut removed = a.removed;
        for id in b.removed {
            // The id may also be listed by a segment older than `older`: keep the removal.
            map.remove(&id);
            removed.push(id);
        }
        map.extend(b.fragments.into_iter().map(|f| (f.id, f)));
        // Applying removals before listings makes a removal of a listed id redundant [SEG-03].
        removed.retain(|id| !map.contains_key(id));
        removed.sort_unstable();
        removed.dedup();
        segments.push(write_segment(store, &Segment { fragments: map.into_values().collect(), removed })?);
    }
    Ok(())
}

impl Dataset {
    /// Deletes rows by global row index (of this version) with deletion vectors: data files are
    /// not rewritten `[DEL-06]`. A fragment whose rows are all deleted is removed.
    ///
    /// # Errors
    /// `usage` for an index out of range; `conflict` if a concurrent commit changed the same
    /// fragments; storage errors.
    pub fn delete_rows(&self, rows: &[u64], message: &str, options: &WriteOptions) -> Result<Dataset> {
        let mut per: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        let mut sorted = rows.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        for r in sorted {
            if r >= self.row_count() {
                return Err(Error::usage(format!("row {r} outside 0..{}", self.row_count())));
            }
            let i = self.fragments().partition_point(|f| f.rows().end <= r);
            let info = &self.fragments()[i];
            let p = self.physical_rows(info, r - info.first_row..r - info.first_row + 1)?;
            per.entry(info.fragment.id).or_default().extend(p);
        }
        commit_change(self, &Change::Delete(per), message, options)
    }

    /// Commits, on top of the latest version of this version's branch, a version equal to this
    /// one (same schema and rows) `[VER-13]`.
    ///
    /// # Errors
    /// `conflict` if another commit takes the version first; storage errors.
    pub fn restore(&self, message: &str, options: &WriteOptions) -> Result<Dataset> {
        let store = self.store().clone();
        let latest = latest_version(&store, self.branch())?;
        let (head, _) = load_manifest(&store, self.branch(), latest, self.limits())?;
        check_writer_flags(&head)?;
        check_writer_flags(self.manifest())?;
        let m = Manifest {
            version: head.version + 1,
            parent: Some(head.version_ref()),
            base: None,
            merged: None,
            timestamp_ms: options.timestamp(),
            message: message.to_string(),
            writer_id: options.writer_id(),
            next_column_id: head.next_column_id.max(self.manifest().next_column_id),
            next_fragment_id: head.next_fragment_id.max(self.manifest().next_fragment_id),
            ..self.manifest().clone()
        };
        match publish(&store, &m)? {
            Published::Ours(crc) => Dataset::from_manifest(store, m, crc, options.limits.clone()),
            Published::Theirs => Err(Error::Conflict { what: format!("{}@{} was taken", m.branch, m.version) }),
        }
    }
}

/// Encodes and uploads one data file (content-addressed) and returns its reference.
pub(crate) fn write_data_file(
    store: &Store,
    writer: &DataFileWriter,
    cols: &[&Column],
    data: &[&ColumnData],
) -> Result<DataFileRef> {
    let enc = writer.encode(cols, data)?;
    let key = paths::content_key(paths::DATA_DIR, "tsd", &enc.bytes);
    let size = enc.bytes.len() as u64;
    store.put_if_absent(&key, Bytes::from(enc.bytes))?;
    let mut column_ids: Vec<u32> = cols.iter().map(|c| c.id).collect();
    column_ids.sort_unstable();
    Ok(DataFileRef { path: key, size, footer_crc32: enc.footer_crc32, column_ids })
}

/// Indices of schema columns per data file group.
fn column_groups(schema: &Schema, groups: &[Vec<String>]) -> Result<Vec<Vec<usize>>> {
    let mut out = Vec::new();
    let mut used = vec![false; schema.columns.len()];
    for g in groups {
        let mut idx = Vec::new();
        for name in g {
            let i = schema
                .columns
                .iter()
                .position(|c| &c.name == name)
                .ok_or_else(|| Error::usage(format!("column group names unknown column {name:?}")))?;
            if std::mem::replace(&mut used[i], true) {
                return Err(Error::usage(format!("column {name:?} is in two column groups")));
            }
            idx.push(i);
        }
        if !idx.is_empty() {
            out.push(idx);
        }
    }
    let rest: Vec<usize> = (0..schema.columns.len()).filter(|&i| !used[i]).collect();
    if !rest.is_empty() {
        out.push(rest);
    }
    Ok(out)
}

/// Refuses to write on top of a version with writer-required flags this implementation does not
/// know `[FLG-04]`.
pub(crate) fn check_writer_flags(m: &Manifest) -> Result<()> {
    let unknown = m.writer_flags & !KNOWN_WRITER_FLAGS;
    if unknown == 0 {
        Ok(())
    } else {
        Err(Error::unsupported(
            paths::manifest_key(&m.branch, m.version),
            format!("unknown writer-required flags {unknown:#x} [FLG-04]"),
        ))
    }
}

/// Whose manifest sits at the key after a create-if-absent.
pub(crate) enum Published {
    /// Ours, with the CRC of the object.
    Ours(u32),
    /// Another writer's.
    Theirs,
}

/// Creates a manifest object with create-if-absent `[VER-05]`; on `AlreadyExists` reads the
/// object back and compares writer ids, so a retried request that had landed counts as ours
/// `[VER-07]`.
pub(crate) fn publish(store: &Store, manifest: &Manifest) -> Result<Published> {
    let bytes = envelope::seal(ObjectKind::Manifest, manifest)?;
    let crc = envelope::stored_crc(&bytes);
    let key = paths::manifest_key(&manifest.branch, manifest.version);
    let max_manifest = envelope::max_object_len(crate::limits::hard::MAX_MANIFEST_BODY);
    let created = match store.put_if_absent(&key, Bytes::from(bytes)) {
        Ok(c) => c,
        // The request may have landed even though its response was lost: look before failing,
        // so a caller never sees an error for a commit that happened [VER-07].
        Err(e @ Error::Io { .. }) => match store.get_bounded(&key, max_manifest) {
            Ok(_) => Created::Existed,
            Err(_) => return Err(e),
        },
        Err(e) => return Err(e),
    };
    match created {
        Created::New => Ok(Published::Ours(crc)),
        Created::Existed => {
            let other = store.get_bounded(&key, max_manifest)?;
            let theirs: Manifest =
                envelope::open(ObjectKind::Manifest, &other, crate::limits::hard::MAX_MANIFEST_BODY, &key)?;
            if theirs.writer_id == manifest.writer_id && envelope::stored_crc(&other) == crc {
                Ok(Published::Ours(crc))
            } else {
                Ok(Published::Theirs)
            }
        }
    }
}

impl Dataset {
    /// Creates a branch at this version `[REF-04]`: its first manifest is this version's, with
    /// the new branch name and `base` pointing here. Commits on the branch continue from here.
    ///
    /// # Errors
    /// `usage` for a bad name; `conflict` if the branch exists.
    pub fn create_branch(&self, name: &str, options: &WriteOptions) -> Result<Dataset> {
        paths::validate_ref_name(name)?;
        check_writer_flags(self.manifest())?;
        let existing = self.store().list(&format!("{}/{name}", paths::BRANCHES_DIR))?;
        if existing.iter().any(|(n, _)| paths::parse_manifest_name(n).is_some()) {
            return Err(Error::Conflict { what: format!("branch {name:?} exists") });
        }
        let mut m = self.manifest().clone();
        m.base = Some(m.version_ref());
        m.branch = name.to_string();
        m.writer_id = options.writer_id();
        m.timestamp_ms = options.timestamp();
        m.message = format!("branch {name} from {}@{}", self.branch(), self.version());
        match publish(self.store(), &m)? {
            Published::Ours(crc) => Dataset::from_manifest(self.store().clone(), m, crc, self.limits().clone()),
            Published::Theirs => Err(Error::Conflict { what: format!("branch {name:?} exists") }),
        }
    }

    /// Tags this version `[REF-05]`. Tags are immutable: an existing name is a conflict.
    ///
    /// # Errors
    /// `usage` for a bad name; `conflict` if the tag exists.
    pub fn create_tag(&self, name: &str, message: &str, options: &WriteOptions) -> Result<()> {
        paths::validate_ref_name(name)?;
        let tag = crate::manifest::Tag {
            name: name.to_string(),
            target: VersionRef { branch: self.branch().to_string(), version: self.version() },
            manifest_crc32: self.manifest_crc32(),
            timestamp_ms: options.timestamp(),
            message: message.to_string(),
        };
        let bytes = Bytes::from(envelope::seal(ObjectKind::Tag, &tag)?);
        let key = paths::tag_key(name);
        match self.store().put_if_absent(&key, bytes.clone())? {
            Created::New => Ok(()),
            // Our own earlier attempt may have landed before a retry: identical bytes are ours.
            Created::Existed
                if self.store().get_bounded(&key, envelope::max_object_len(crate::limits::hard::MAX_TAG_BODY))?
                    == bytes =>
            {
                Ok(())
            }
            Created::Existed => Err(Error::Conflict { what: format!("tag {name:?} exists") }),
        }
    }

    /// The tag names of the dataset, sorted.
    ///
    /// # Errors
    /// Storage errors.
    pub fn tags(&self) -> Result<Vec<String>> {
        let mut v: Vec<String> = self
            .store()
            .list(paths::TAGS_DIR)?
            .into_iter()
            .filter_map(|(n, _)| n.strip_suffix(".tst").map(str::to_string))
            .collect();
        v.sort();
        Ok(v)
    }

    /// The branch names of the dataset, sorted.
    ///
    /// # Errors
    /// Storage errors.
    pub fn branches(&self) -> Result<Vec<String>> {
        let mut v = self.store().list_dirs(paths::BRANCHES_DIR)?;
        v.sort();
        Ok(v)
    }

    /// The manifests of this version's history, newest first, following `parent` links
    /// (across branch bases).
    ///
    /// # Errors
    /// Any error reading a manifest.
    pub fn log(&self) -> Result<Vec<Manifest>> {
        let mut out = vec![self.manifest().clone()];
        let mut seen = std::collections::HashSet::from([self.manifest().version_ref()]);
        while let Some(p) = out.last().and_then(|m| m.parent.clone()) {
            // A hostile or damaged store can make parent links loop; never follow one twice.
            if !seen.insert(p.clone()) {
                return Err(Error::invalid(
                    paths::manifest_key(&p.branch, p.version),
                    "parent links form a cycle [MAN-02]",
                ));
            }
            let (m, _) = load_manifest(self.store(), &p.branch, p.version, self.limits())?;
            out.push(m);
        }
        Ok(out)
    }

    /// Opens the version a tag names, checking the manifest CRC the tag recorded `[REF-02]`.
    ///
    /// # Errors
    /// `not_found` for an unknown tag, `invalid` if the manifest differs from the tagged one.
    pub fn open_tag(store: &Store, name: &str, limits: Limits) -> Result<Dataset> {
        let tag = crate::dataset::read_tag(store, name, &limits)?;
        let key = paths::tag_key(name);
        if tag.target.version == 0 {
            return Err(Error::invalid(&key, "tag targets version 0 [REF-02]"));
        }
        // A tag names a stored manifest exactly (no base resolution); a missing one means the
        // dataset is damaged, not that the caller asked for something absent.
        let (m, crc) = crate::dataset::load_manifest_exact(store, &tag.target.branch, tag.target.version, &limits)
            .map_err(|e| match e {
                Error::NotFound { .. } => Error::invalid(&key, "tagged version does not exist [REF-02]"),
                other => other,
            })?;
        if crc != tag.manifest_crc32 {
            return Err(Error::invalid(&key, "tagged manifest's CRC differs from the tag record [REF-02]"));
        }
        Dataset::from_manifest(store.clone(), m, crc, limits)
    }
}
