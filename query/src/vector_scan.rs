//! The exact vector top-k's page scan: distances straight from an embedding column's pages.
//!
//! Per fragment, the pages of the vector column that hold wanted rows are read once each into
//! one reused, 64-byte-aligned buffer: with positioned reads (`pread`) on a local dataset,
//! else with a ranged GET per run of pages. Each page's CRC-32 is checked by the reference
//! ([`tessera::datafile::verify_block`], or `ChunkIndex::decode_page_into` for a compressed
//! page) and the reference's distance kernel then runs over its vectors in place, while the page (256 KiB
//! by default) is still in the core's cache. No f32 or f64 vector is copied or turned into
//! Arrow (f16 and bf16 rows widen to f32 in a reused buffer), except the few that enter the
//! bounded heap of the k best rows ([`Candidates`]).
//!
//! The distance is the one the SQL function computes (`distance.rs`): the same kernel on the
//! same element values (bf16 and f16 widened to f32 exactly), so the order is the same.

use std::collections::BinaryHeap;
use std::ops::Range;

use half::slice::HalfFloatSliceExt as _;
use tessera::datafile::{ChunkIndex, DataFile, verify_block};
use tessera::manifest::DataFileRef;
use tessera::{Codec, Column, DType, Dataset, FragmentInfo};

use crate::distance::Metric;
use crate::error::{QueryError, QueryResult};
use crate::topk::VectorTopK;
use tessera::distance::query_f32;

/// Bytes per GET on an object store (several pages per request).
const GET_BYTES: u64 = 8 << 20;

/// A row's place in the top-k order; smaller is better. Derived order: the null class (nulls
/// first or last, as the sort says), the distance in IEEE total order (reversed for a
/// descending sort), then `_rowid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Rank(u8, i64, u64);

impl Rank {
    fn new(d: Option<f64>, row: u64, order: datafusion::arrow::compute::SortOptions) -> Self {
        match d {
            None => Self(if order.nulls_first { 0 } else { 2 }, 0, row),
            Some(d) => {
                // IEEE 754 totalOrder as an integer order, as Arrow sorts floats.
                let bits = d.to_bits() as i64;
                let total = bits ^ (((bits >> 63) as u64) >> 1) as i64;
                Self(1, if order.descending { !total } else { total }, row)
            }
        }
    }
}

/// A kept row: its rank and its vector's bytes (empty when null).
#[derive(Debug)]
pub(crate) struct Candidate {
    rank: Rank,
    /// The row's `_rowid`.
    pub(crate) row: u64,
    /// The row's stored bytes, or `None` for a null vector.
    pub(crate) bytes: Option<Vec<u8>>,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.rank == other.rank
    }
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rank.cmp(&other.rank)
    }
}

/// The k best rows seen so far (a max-heap on rank: the worst kept row on top).
#[derive(Debug)]
pub(crate) struct Candidates {
    k: usize,
    order: datafusion::arrow::compute::SortOptions,
    heap: BinaryHeap<Candidate>,
}

impl Candidates {
    pub(crate) fn new(k: usize, order: datafusion::arrow::compute::SortOptions) -> Self {
        Self { k, order, heap: BinaryHeap::with_capacity(k.min(1 << 16) + 1) }
    }

    /// Offers row `row` with distance `d` and bytes `bytes` (copied only when it is kept).
    pub(crate) fn offer(&mut self, d: Option<f64>, row: u64, bytes: Option<&[u8]>) {
        if self.k == 0 {
            return;
        }
        let rank = Rank::new(d, row, self.order);
        let reuse = if self.heap.len() < self.k {
            None
        } else {
            match self.heap.peek() {
                Some(worst) if rank < worst.rank => self.heap.pop().and_then(|c| c.bytes),
                _ => return,
            }
        };
        let bytes = bytes.map(|b| {
            let mut v = reuse.unwrap_or_default();
            v.clear();
            v.extend_from_slice(b);
            v
        });
        self.heap.push(Candidate { rank, row, bytes });
    }

    /// The kept rows in `_rowid` order.
    pub(crate) fn into_rows(self) -> Vec<Candidate> {
        let mut v = self.heap.into_vec();
        v.sort_unstable_by_key(|c| c.row);
        v
    }
}

/// One 64-byte unit of a [`PageBuffer`].
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// A reused, 64-byte-aligned page buffer.
pub(crate) struct PageBuffer {
    lines: Vec<Line>,
    /// Decoded bytes of a compressed page.
    raw: Vec<Line>,
}

impl std::fmt::Debug for PageBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageBuffer")
            .field("bytes", &(self.lines.len() * 64))
            .field("raw_bytes", &(self.raw.len() * 64))
            .finish()
    }
}

impl PageBuffer {
    pub(crate) fn new() -> Self {
        Self { lines: Vec::new(), raw: Vec::new() }
    }
}

/// The first `len` bytes of `lines`, grown (zeroed) as needed.
fn bytes_mut(lines: &mut Vec<Line>, len: usize) -> &mut [u8] {
    let n = len.div_ceil(64);
    if lines.len() < n {
        lines.resize(n, Line([0; 64]));
    }
    let all = lines.as_mut_slice();
    let total = std::mem::size_of_val(all);
    // SAFETY: `Line` is `repr(C, align(64))` around `[u8; 64]`: 64 bytes, no padding, all
    // initialised, and any byte pattern is a valid `Line`; the unique borrow of the lines makes
    // the byte slice unique, and it covers exactly their `64 n` bytes.
    let bytes = unsafe { std::slice::from_raw_parts_mut(all.as_mut_ptr().cast::<u8>(), total) };
    &mut bytes[..len]
}

/// Elements that any bit pattern makes valid, read in place from page bytes.
trait Plain: Copy {
    const SIZE: usize;
    fn from_le(b: &[u8]) -> Self;
}
impl Plain for f32 {
    const SIZE: usize = 4;
    fn from_le(b: &[u8]) -> Self {
        Self::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}
impl Plain for f64 {
    const SIZE: usize = 8;
    fn from_le(b: &[u8]) -> Self {
        Self::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}
impl Plain for half::f16 {
    const SIZE: usize = 2;
    fn from_le(b: &[u8]) -> Self {
        Self::from_le_bytes([b[0], b[1]])
    }
}

/// `bytes` as elements: in place when aligned on a little-endian machine, else copied into
/// `scratch`.
fn elements<'a, T: Plain>(bytes: &'a [u8], scratch: &'a mut Vec<T>) -> &'a [T] {
    #[cfg(target_endian = "little")]
    {
        // SAFETY: `T` is f32, f64 or `half::f16` (`repr(transparent)` over u16): plain
        // data for which every bit pattern is a valid value, stored little-endian like this
        // machine; `align_to` puts only correctly aligned, whole elements in the middle slice.
        let (head, mid, tail) = unsafe { bytes.align_to::<T>() };
        if head.is_empty() && tail.is_empty() {
            return mid;
        }
    }
    scratch.clear();
    scratch.extend(bytes.chunks_exact(T::SIZE).map(T::from_le));
    scratch
}

/// The query vector in the element type the SQL function uses for the column.
#[derive(Debug)]
enum Query {
    F32(Vec<f32>),
    /// f16 vectors: the query rounded to f16, then widened to f32 like the rows.
    F16(Vec<f32>),
    /// bf16 vectors are widened to f32 exactly, as the table's Arrow type is f32.
    Bf16(Vec<f32>),
    F64(Vec<f64>),
}

/// Computes a row's distance to the query, as the SQL function does.
#[derive(Debug)]
pub(crate) struct Kernel {
    metric: Metric,
    query: Query,
    f32s: Vec<f32>,
    f16s: Vec<half::f16>,
    f64s: Vec<f64>,
}

impl Kernel {
    /// The kernel for `column` (a float tensor column).
    pub(crate) fn new(hint: &VectorTopK, column: &Column) -> QueryResult<Self> {
        let q = &hint.query;
        let query = match column.dtype {
            DType::F32 => Query::F32(query_f32(q, false)),
            DType::Bf16 => Query::Bf16(query_f32(q, false)),
            DType::F16 => Query::F16(query_f32(q, true)),
            DType::F64 => Query::F64(q.clone()),
            other => return Err(QueryError::Usage(format!("no vector kernel for {other}"))),
        };
        Ok(Self { metric: hint.metric, query, f32s: Vec::new(), f16s: Vec::new(), f64s: Vec::new() })
    }

    fn distance(&mut self, row: &[u8]) -> Option<f64> {
        match &self.query {
            Query::F32(q) => self.metric.f32(elements(row, &mut self.f32s), q),
            Query::F64(q) => self.metric.f64(elements(row, &mut self.f64s), q),
            Query::F16(q) => {
                let row = elements(row, &mut self.f16s);
                self.f32s.resize(row.len(), 0.0);
                row.convert_to_f32_slice(&mut self.f32s);
                self.metric.f32(&self.f32s, q)
            }
            Query::Bf16(q) => {
                self.f32s.clear();
                self.f32s.extend(
                    row.chunks_exact(2).map(|b| f32::from(half::bf16::from_bits(u16::from_le_bytes([b[0], b[1]])))),
                );
                self.metric.f32(&self.f32s, q)
            }
        }
    }
}

/// What one fragment's scan read.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PagesRead {
    pub(crate) pages: u64,
    pub(crate) bytes: u64,
}

/// Where the vector column's bytes of one data file come from.
enum Reader {
    /// A local file, read with `pread`.
    #[cfg(unix)]
    Local(std::fs::File),
    /// The dataset's object store.
    Store,
}

/// The fragment's data file holding `column`, if any.
pub(crate) fn file_of<'a>(info: &'a FragmentInfo, column: &Column) -> Option<&'a DataFileRef> {
    info.fragment.files.iter().find(|f| f.column_ids.contains(&column.id))
}

/// Scans fragment `info`'s vector column: `wanted` are (physical row, `_rowid`) pairs in
/// ascending order; with `every_page` every page is read and checked (a whole-fragment read,
/// deleted rows' pages included `[VAL-16]`), else only pages holding wanted rows.
///
/// # Errors
/// Storage and validation errors of the file, with their class.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn scan_fragment(
    ds: &Dataset,
    info: &FragmentInfo,
    column: &Column,
    wanted: &[(u64, u64)],
    every_page: bool,
    kernel: &mut Kernel,
    top: &mut Candidates,
    buf: &mut PageBuffer,
) -> QueryResult<PagesRead> {
    let Some(file) = file_of(info, column) else {
        return Err(QueryError::Usage(format!("fragment {} holds no column {:?}", info.fragment.id, column.name)));
    };
    let df = ds.data_file_async(&info.fragment, file).await?;
    let index = chunk_index(ds, &df, file, column).await?;
    let mut reader = open(ds, &file.path);
    let what = || format!("{}: column {}", file.path, column.id);
    let pages: Vec<usize> = if every_page {
        (0..index.pages().len()).collect()
    } else {
        let mut p: Vec<usize> = wanted.iter().map(|&(phys, _)| index.page_of(phys)).collect();
        p.dedup();
        p
    };
    let mut read = PagesRead::default();
    let mut next = 0usize;
    let mut staged = Vec::new();
    let mut staged_from = 0usize;
    for (i, &p) in pages.iter().enumerate() {
        let block = index.pages()[p].block;
        read.pages += 1;
        read.bytes += block.stored_len;
        let stored: &[u8] = match &mut reader {
            #[cfg(unix)]
            Reader::Local(f) => {
                use std::os::unix::fs::FileExt;
                let out = bytes_mut(&mut buf.lines, block.stored_len as usize);
                if f.read_exact_at(out, block.offset).is_err() {
                    // The store reads the same bytes and names the fault as the reference does.
                    let again = ds.store().get_ranges_async(&file.path, &[block.range()]).await?;
                    let body = again.first().map_or(&[][..], AsRef::as_ref);
                    if body.len() != out.len() {
                        return Err(QueryError::Usage(format!("{}: page {p} read short", what())));
                    }
                    out.copy_from_slice(body);
                }
                out
            }
            Reader::Store => {
                if i >= staged_from + staged.len() {
                    let mut ranges = Vec::new();
                    let mut total = 0u64;
                    for &q in &pages[i..] {
                        let b = index.pages()[q].block;
                        if !ranges.is_empty() && total + b.stored_len > GET_BYTES {
                            break;
                        }
                        total += b.stored_len;
                        ranges.push(b.range());
                    }
                    staged = ds.store().get_ranges_async(&file.path, &ranges).await?;
                    staged_from = i;
                }
                staged.get(i - staged_from).map_or(&[][..], AsRef::as_ref)
            }
        };
        let raw: &[u8] = if block.codec == Codec::None {
            // An uncompressed page's stored bytes are its decoded bytes once verified.
            verify_block(&block, stored, true, &|| format!("{} page {p}", what()))?;
            stored
        } else {
            let out = bytes_mut(&mut buf.raw, block.raw_len as usize);
            index.decode_page_into(p, stored, out, true, &|| format!("{} page {p}", what()))?;
            out
        };
        let rows = index.page_rows(p);
        let base = index.locate(rows.start).1.start;
        while let Some(&(phys, rowid)) = wanted.get(next) {
            if phys >= rows.end {
                break;
            }
            next += 1;
            if phys < rows.start {
                continue;
            }
            if !index.is_valid(phys) {
                top.offer(None, rowid, None);
                continue;
            }
            let range = index.locate(phys).1;
            let bytes = &raw[range.start - base..range.end - base];
            let d = kernel.distance(bytes);
            top.offer(d, rowid, Some(bytes));
        }
    }
    Ok(read)
}

/// The chunk index of `column` in a data file (its validity block read when nullable).
async fn chunk_index(ds: &Dataset, df: &DataFile, file: &DataFileRef, column: &Column) -> QueryResult<ChunkIndex> {
    let blocks = df.index_blocks(column)?;
    let ranges: Vec<Range<u64>> = blocks.iter().map(tessera::datafile::Block::range).collect();
    let bytes = ds.store().get_ranges_async(&file.path, &ranges).await?;
    let stored: Vec<&[u8]> = bytes.iter().map(AsRef::as_ref).collect();
    Ok(df.index_chunk(column, &stored)?)
}

/// A local file when the dataset's store is a local directory, else the store.
fn open(ds: &Dataset, key: &str) -> Reader {
    #[cfg(unix)]
    {
        let root = std::path::Path::new(ds.store().url());
        if root.is_dir()
            && let Ok(f) = std::fs::File::open(root.join(key))
        {
            return Reader::Local(f);
        }
    }
    let _ = (ds, key);
    Reader::Store
}
