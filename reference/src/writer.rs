//! The writer: creating a dataset and appending rows, which are buffered and written as
//! content-addressed data files before the commit (SPEC.md §"Commit protocol", VER-12 and
//! VER-05 step 2; the files themselves are §"Data file").

use std::collections::VecDeque;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::batch::Batch;
use crate::blocking::{block_on, runtime};
use crate::column::ColumnData;
use crate::commit::{Change, Published, commit_change, publish};
use crate::datafile::DataFileWriter;
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::manifest::{ColumnStats, DataFileRef, Manifest};
use crate::paths::{self, MAIN};
use crate::schema::{Column, Schema};
use crate::stats;
use crate::store::{Created, Store};

/// Default target size of one data file: 64 MiB. Large enough that a sequential GET from
/// object storage runs at bandwidth rather than latency (tens of ms to first byte, then
/// 100+ MB/s per stream), small enough that a block shuffle window of a few files fits in a
/// loader's memory budget.
pub const DEFAULT_TARGET_FILE_BYTES: u64 = 64 << 20;

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
    /// How a new dataset indexes its fragments, and whether a commit on a version with a
    /// fragment log converts it to a tree. A version with a tree always keeps it.
    pub index: IndexLayout,
}

/// How a version's fragments are indexed (SPEC.md §"Index segment", §"The fragment tree").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IndexLayout {
    /// A fragment log of index segments, readable by every 1.0 reader; opening a version reads
    /// every fragment record.
    #[default]
    Log,
    /// A fragment tree of index nodes of about `node_bytes` each (reader flag
    /// `FRAGMENT_TREE`): every object stays bounded and a reader finds any row in O(depth)
    /// reads; readers without the flag refuse such versions as `unsupported`.
    Tree {
        /// Node body bytes aimed at ([`crate::tree::DEFAULT_NODE_BYTES`] is a good value).
        node_bytes: u64,
    },
}

impl std::str::FromStr for IndexLayout {
    type Err = Error;

    /// `log`, or `tree` (nodes of [`crate::tree::DEFAULT_NODE_BYTES`]).
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "log" => Ok(Self::Log),
            "tree" => Ok(Self::tree()),
            other => Err(Error::usage(format!("index layout {other:?}: expected log or tree"))),
        }
    }
}

impl IndexLayout {
    /// A tree with nodes of the default size.
    #[must_use]
    pub fn tree() -> Self {
        Self::Tree { node_bytes: crate::tree::DEFAULT_NODE_BYTES }
    }
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
            index: IndexLayout::Log,
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
        block_on(Self::create_in_async(store, schema, options))
    }

    /// Creates a dataset in an opened store (async; see [`Dataset::create`]).
    ///
    /// # Errors
    /// As [`Dataset::create`].
    pub async fn create_in_async(store: &Store, schema: Schema, options: &WriteOptions) -> Result<Self> {
        schema.validate()?;
        let next_column_id = schema.columns.iter().map(|c| c.id + 1).max().unwrap_or(0);
        let tree = match options.index {
            IndexLayout::Tree { .. } => crate::manifest::READER_FLAG_FRAGMENT_TREE,
            IndexLayout::Log => 0,
        };
        let manifest = Manifest {
            reader_flags: crate::manifest::required_reader_flags(&schema) | tree,
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
        match publish(store, &manifest, &options.limits).await? {
            Published::Ours(crc) => Self::from_manifest(store.clone(), manifest, crc, options.limits.clone()).await,
            Published::Theirs => Err(Error::Conflict { what: format!("a dataset exists at {}", store.url()) }),
        }
    }

    /// Starts a writer that appends to this version's branch.
    #[must_use]
    pub fn writer(&self, options: WriteOptions) -> DatasetWriter {
        DatasetWriter {
            base: self.clone(),
            options,
            pending: Vec::new(),
            buffer: None,
            buffered_bytes: 0,
            uploads: VecDeque::new(),
        }
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

    /// As [`Dataset::append`] (async): uploads and the commit are awaited, never blocked on.
    ///
    /// # Errors
    /// As [`Dataset::append`].
    pub async fn append_async(&self, batch: &Batch, message: &str, options: WriteOptions) -> Result<Self> {
        let mut w = self.writer(options);
        w.append_async(batch).await?;
        w.commit_async(message).await
    }
}

/// Buffers rows, writes data files as they fill, and commits them as one new version.
///
/// A filled data file uploads on the I/O runtime while the writer buffers and encodes the
/// next one, so encoding and uploading overlap. At most one target file's bytes
/// (`target_file_bytes`, or one larger file) upload at once: the writer waits for the oldest
/// upload before it starts one that would pass that. An upload's failure is returned by the
/// next flush or by the commit, which waits for every upload first; a writer dropped
/// uncommitted waits for its uploads too (their files are unreferenced, as after any
/// uncommitted append), so nothing is written once it is gone.
#[derive(Debug)]
pub struct DatasetWriter {
    base: Dataset,
    options: WriteOptions,
    pending: Vec<PendingFragment>,
    buffer: Option<Vec<ColumnData>>,
    buffered_bytes: u64,
    /// Data files uploading, oldest first.
    uploads: VecDeque<Upload>,
}

/// One data file's upload running on the I/O runtime.
#[derive(Debug)]
struct Upload {
    key: String,
    bytes: u64,
    task: tokio::task::JoinHandle<Result<Created>>,
}

#[derive(Debug)]
pub(crate) struct PendingFragment {
    pub(crate) row_count: u64,
    pub(crate) files: Vec<DataFileRef>,
    pub(crate) stats: Vec<ColumnStats>,
}

impl DatasetWriter {
    /// Appends rows. The batch must have exactly the schema's columns (any order).
    ///
    /// # Errors
    /// `usage` if columns are missing, extra, or of the wrong type; storage errors when a data
    /// file is flushed.
    pub fn append(&mut self, batch: &Batch) -> Result<()> {
        let cols = self.checked_columns(batch)?;
        let mut start = 0;
        while start < batch.num_rows() {
            let flush;
            (start, flush) = self.buffer_rows(&cols, start)?;
            if flush {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// As [`DatasetWriter::append`] (async): waiting for upload room is awaited. Encoding a
    /// filled data file is CPU work done in the call, as in the blocking one.
    ///
    /// # Errors
    /// As [`DatasetWriter::append`].
    pub async fn append_async(&mut self, batch: &Batch) -> Result<()> {
        let cols = self.checked_columns(batch)?;
        let mut start = 0;
        while start < batch.num_rows() {
            let flush;
            (start, flush) = self.buffer_rows(&cols, start)?;
            if flush {
                self.flush_async().await?;
            }
        }
        Ok(())
    }

    /// The batch's columns in schema order, checked against the schema.
    fn checked_columns(&self, batch: &Batch) -> Result<Vec<ColumnData>> {
        let schema = self.base.schema();
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
        Ok(cols)
    }

    /// Buffers as many rows from `start` on as fit in the current data file; returns where
    /// the next take starts and whether the file is full (to be flushed).
    fn buffer_rows(&mut self, cols: &[ColumnData], start: usize) -> Result<(usize, bool)> {
        let rows = cols.first().map_or(0, ColumnData::len);
        let per_row: Vec<&[u64]> = cols.iter().map(ColumnData::offsets).collect();
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
        let schema = self.base.schema();
        let buf = self.buffer.get_or_insert_with(|| schema.columns.iter().map(ColumnData::for_column).collect());
        for (b, d) in buf.iter_mut().zip(cols) {
            b.extend_from(d, start..end)?;
        }
        self.buffered_bytes = bytes;
        Ok((end, end < rows || self.buffered_bytes >= self.options.target_file_bytes))
    }

    /// Writes the buffered rows as one fragment (one data file per column group).
    fn flush(&mut self) -> Result<()> {
        let Some((encoded, rows, stats)) = self.encode_buffer()? else { return Ok(()) };
        let mut files = Vec::with_capacity(encoded.len());
        for (file, bytes) in encoded {
            while self.must_wait(bytes.len() as u64) {
                self.wait_oldest()?;
            }
            self.start_upload(file.path.clone(), bytes);
            files.push(file);
        }
        self.pending.push(PendingFragment { row_count: rows, files, stats });
        Ok(())
    }

    /// As [`DatasetWriter::flush`] (async).
    async fn flush_async(&mut self) -> Result<()> {
        let Some((encoded, rows, stats)) = self.encode_buffer()? else { return Ok(()) };
        let mut files = Vec::with_capacity(encoded.len());
        for (file, bytes) in encoded {
            while self.must_wait(bytes.len() as u64) {
                self.wait_oldest_async().await?;
            }
            self.start_upload(file.path.clone(), bytes);
            files.push(file);
        }
        self.pending.push(PendingFragment { row_count: rows, files, stats });
        Ok(())
    }

    /// Encodes the buffered rows: the data files of one fragment with their bytes, its row
    /// count and statistics (`None` when nothing is buffered).
    #[allow(clippy::type_complexity)] // used by the two flushes only
    fn encode_buffer(&mut self) -> Result<Option<(Vec<(DataFileRef, Bytes)>, u64, Vec<ColumnStats>)>> {
        let Some(buf) = self.buffer.take() else { return Ok(None) };
        self.buffered_bytes = 0;
        let rows = buf.first().map_or(0, ColumnData::len);
        if rows == 0 {
            return Ok(None);
        }
        let schema = self.base.schema();
        let writer = DataFileWriter::with_page_bytes(self.options.page_bytes);
        let mut encoded = Vec::new();
        for group in column_groups(schema, &self.options.column_groups)? {
            let cols: Vec<&Column> = group.iter().map(|&i| &schema.columns[i]).collect();
            let data: Vec<&ColumnData> = group.iter().map(|&i| &buf[i]).collect();
            encoded.push(encode_data_file(&writer, &cols, &data)?);
        }
        let stats = schema.columns.iter().zip(&buf).map(|(c, d)| stats::compute(c, d)).collect();
        Ok(Some((encoded, rows as u64, stats)))
    }

    /// Whether an upload of `n` bytes must wait for older ones: the bytes in flight would
    /// pass one target file's.
    fn must_wait(&self, n: u64) -> bool {
        !self.uploads.is_empty()
            && self.uploads.iter().map(|u| u.bytes).sum::<u64>() + n > self.options.target_file_bytes
    }

    /// Starts uploading one encoded data file: a task of the caller's runtime when the writer
    /// is driven from one (`append_async`), else of the blocking calls' runtime.
    fn start_upload(&mut self, key: String, bytes: Bytes) {
        let n = bytes.len() as u64;
        let store = self.base.store().clone();
        let task = {
            let key = key.clone();
            let upload = async move { store.put_if_absent_async(&key, bytes).await };
            match tokio::runtime::Handle::try_current() {
                Ok(caller) => caller.spawn(upload),
                Err(_) => runtime().spawn(upload),
            }
        };
        self.uploads.push_back(Upload { key, bytes: n, task });
    }

    /// Waits for the oldest upload and returns its failure.
    fn wait_oldest(&mut self) -> Result<()> {
        block_on(self.wait_oldest_async())
    }

    /// As [`DatasetWriter::wait_oldest`] (async).
    async fn wait_oldest_async(&mut self) -> Result<()> {
        let Some(u) = self.uploads.pop_front() else { return Ok(()) };
        let url = self.base.store().url();
        let landed = u.task.await.map_err(|e| Error::Io {
            path: format!("{url}/{}", u.key),
            source: object_store::Error::Generic { store: "tessera", source: Box::new(e) },
        })?;
        landed.map(drop)
    }

    /// Waits for every upload; the first failure is returned (the others still finish).
    fn wait_uploads(&mut self) -> Result<()> {
        block_on(self.wait_uploads_async())
    }

    /// As [`DatasetWriter::wait_uploads`] (async).
    async fn wait_uploads_async(&mut self) -> Result<()> {
        let mut first = Ok(());
        while !self.uploads.is_empty() {
            let r = self.wait_oldest_async().await;
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// Writes the buffered rows and returns every fragment written, uncommitted: the parallel
    /// writers' path (`fragments.rs`).
    pub(crate) fn finish(mut self) -> Result<Vec<PendingFragment>> {
        self.flush()?;
        self.wait_uploads()?;
        Ok(std::mem::take(&mut self.pending))
    }

    /// Commits everything appended as the next version of the branch and returns it.
    ///
    /// # Errors
    /// `conflict` if the branch moved in a way an append cannot be rebased over (schema
    /// changed, unknown writer flags) or after too many retries; storage errors.
    pub fn commit(mut self, message: &str) -> Result<Dataset> {
        self.flush()?;
        self.wait_uploads()?;
        let pending = std::mem::take(&mut self.pending);
        block_on(commit_change(&self.base, &Change::Append(pending), message, &self.options))
    }

    /// As [`DatasetWriter::commit`] (async): the last data files' uploads and every request of
    /// the commit protocol are awaited, so a commit runs as a task on the caller's runtime.
    ///
    /// # Errors
    /// As [`DatasetWriter::commit`].
    pub async fn commit_async(mut self, message: &str) -> Result<Dataset> {
        self.flush_async().await?;
        self.wait_uploads_async().await?;
        let pending = std::mem::take(&mut self.pending);
        commit_change(&self.base, &Change::Append(pending), message, &self.options).await
    }
}

impl Drop for DatasetWriter {
    fn drop(&mut self) {
        // Nothing is written once the writer is gone (see the type's docs). Inside an async
        // runtime blocking is refused: the uploads then finish on their own.
        if tokio::runtime::Handle::try_current().is_err() {
            let _ = self.wait_uploads();
        }
    }
}

/// Encodes one data file and returns its (content-addressed) reference and bytes.
fn encode_data_file(writer: &DataFileWriter, cols: &[&Column], data: &[&ColumnData]) -> Result<(DataFileRef, Bytes)> {
    let enc = writer.encode(cols, data)?;
    let key = paths::content_key(paths::DATA_DIR, "tsd", &enc.bytes);
    let size = enc.bytes.len() as u64;
    let mut column_ids: Vec<u32> = cols.iter().map(|c| c.id).collect();
    column_ids.sort_unstable();
    Ok((DataFileRef { path: key, size, footer_crc32: enc.footer_crc32, column_ids }, Bytes::from(enc.bytes)))
}

/// Encodes and uploads one data file (content-addressed) and returns its reference.
pub(crate) fn write_data_file(
    store: &Store,
    writer: &DataFileWriter,
    cols: &[&Column],
    data: &[&ColumnData],
) -> Result<DataFileRef> {
    let (file, bytes) = encode_data_file(writer, cols, data)?;
    store.put_if_absent(&file.path, bytes)?;
    Ok(file)
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
