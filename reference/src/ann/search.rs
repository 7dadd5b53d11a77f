//! Search with a vector index `[ANN-10]`: rank the centroids by the query's distance, read the
//! `nprobe` nearest lists, rank their entries by the exact distance of §23 and keep the k best
//! by (distance in IEEE total order, row id).
//!
//! Lists are read in pieces of at most [`PIECE_BYTES`] (whole entries), a few pieces per
//! request, so memory stays bounded whatever a list's size; each list's CRC-32 is checked over
//! its pieces before the search returns anything.

use std::collections::BinaryHeap;
use std::ops::Range;
use std::sync::Arc;

use crate::blocking::block_on;
use crate::distance::{Distance, distance_f32, distance_f64, query_f32};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::store::Store;

use super::VectorIndex;

/// Most bytes of one ranged read of a list.
pub(crate) const PIECE_BYTES: u64 = 8 << 20;
/// Most bytes fetched by one request (several pieces).
const GROUP_BYTES: u64 = 32 << 20;

/// One row a search found: its id, its exact distance to the query and its stored vector.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// The row id (global live row of the indexed version).
    pub row: u64,
    /// The distance (§23) of the row's vector to the query.
    pub distance: f64,
    /// The row's vector as stored (the column's element type, little-endian).
    pub vector: Vec<u8>,
}

/// What a search read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Lists probed.
    pub lists: u64,
    /// Entries ranked.
    pub entries: u64,
    /// Bytes read from the lists object.
    pub bytes: u64,
}

/// A vector widened for the distance kernel, as DIST-02 widens a column's elements.
#[derive(Clone, Debug)]
pub(crate) enum Wide {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl Wide {
    /// The query `q` rounded to `dtype` and widened (DIST-02).
    pub(crate) fn query(dtype: DType, q: &[f64]) -> Self {
        match dtype {
            DType::F64 => Self::F64(q.to_vec()),
            DType::F16 => Self::F32(query_f32(q, true)),
            _ => Self::F32(query_f32(q, false)),
        }
    }

    /// An empty vector of `dtype`'s width.
    pub(crate) fn new(dtype: DType) -> Self {
        if dtype == DType::F64 { Self::F64(Vec::new()) } else { Self::F32(Vec::new()) }
    }

    /// Stored bytes of a row of `dtype`, widened exactly (f16 and bf16 to f32).
    pub(crate) fn set(&mut self, dtype: DType, bytes: &[u8]) {
        match self {
            Self::F64(v) => {
                v.clear();
                v.extend(
                    bytes.chunks_exact(8).map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])),
                );
            }
            Self::F32(v) => {
                v.clear();
                match dtype {
                    DType::F16 => v.extend(
                        bytes.chunks_exact(2).map(|b| half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()),
                    ),
                    DType::Bf16 => v.extend(
                        bytes.chunks_exact(2).map(|b| half::bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()),
                    ),
                    _ => v.extend(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
                }
            }
        }
    }

    /// The distance to `other` (same width), or NaN when the lengths differ.
    pub(crate) fn distance(&self, metric: Distance, other: &Self) -> f64 {
        let d = match (self, other) {
            (Self::F32(a), Self::F32(b)) => distance_f32(metric, a, b),
            (Self::F64(a), Self::F64(b)) => distance_f64(metric, a, b),
            _ => None,
        };
        d.unwrap_or(f64::NAN)
    }

    /// The distance to centroid `c` (f32 elements, widened to f64 for an f64 query).
    pub(crate) fn to_centroid(&self, metric: Distance, c: &[f32], scratch: &mut Vec<f64>) -> f64 {
        match self {
            Self::F32(a) => distance_f32(metric, a, c),
            Self::F64(a) => {
                scratch.clear();
                scratch.extend(c.iter().map(|&x| f64::from(x)));
                distance_f64(metric, a, scratch)
            }
        }
        .unwrap_or(f64::NAN)
    }
}

/// A distance as an integer in IEEE 754 total order (NaN after +∞), as rankings compare them
/// (DIST-07).
pub(crate) fn total_key(d: f64) -> i64 {
    let bits = d.to_bits() as i64;
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

/// One part's best entries and what ranking them read.
type Ranked = (Vec<Kept>, SearchStats);

/// A kept entry: ordered by (distance, row), the worst on top of the heap.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Kept {
    key: (i64, u64),
    vector: Vec<u8>,
}

impl VectorIndex {
    /// The lists in the order a search probes them: by the distance (§23) of `query`, rounded
    /// to the column's element type, to each centroid, ties by list number `[ANN-10]`.
    #[must_use]
    pub fn probe_order(&self, query: &[f64]) -> Vec<usize> {
        let q = Wide::query(self.dtype, query);
        let mut scratch = Vec::new();
        let mut ranked: Vec<(i64, usize)> = (0..self.nlist())
            .map(|i| (total_key(q.to_centroid(self.metric, self.centroid(i), &mut scratch)), i))
            .collect();
        ranked.sort_unstable();
        ranked.into_iter().map(|(_, i)| i).collect()
    }

    /// The `k` rows nearest `query` among the entries of the `nprobe` lists nearest it, by
    /// (distance, row id), nearest first `[ANN-10]`. With `nprobe` ≥ the number of lists the
    /// answer is the exact top-k of the version's non-null vectors.
    ///
    /// The blocking facade of [`VectorIndex::search_async`]: the probed lists split over the
    /// cores, each part ranked on a thread of its own.
    ///
    /// # Errors
    /// `usage` when `query` has the wrong length, or when called inside an async runtime;
    /// `malformed` when a list's CRC-32 differs; `invalid` for an entry whose row id is not a
    /// row of the version or repeats; storage errors, the lists object's absence included.
    pub fn search(&self, store: &Store, query: &[f64], k: usize, nprobe: usize) -> Result<(Vec<Hit>, SearchStats)> {
        let Some((q, parts)) = self.plan_search(query, k, nprobe)? else {
            return Ok((Vec::new(), SearchStats::default()));
        };
        // Checked here, not only by `block_on`: the parts' scoped threads start outside the
        // caller's runtime context, so their own `block_on` would not see it.
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(Error::usage("VectorIndex::search called inside an async runtime; use search_async"));
        }
        let ranked: Vec<Result<Ranked>> = if parts.len() == 1 {
            parts.iter().map(|lists| block_on(self.rank(store, &q, lists, k))).collect()
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> =
                    parts.iter().map(|lists| s.spawn(|| block_on(self.rank(store, &q, lists, k)))).collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err(Error::usage("a search thread panicked"))))
                    .collect()
            })
        };
        self.merge(ranked, k)
    }

    /// [`VectorIndex::search`] as a `Send` future on the caller's runtime: each part of the
    /// probed lists is ranked by a task of its own, so the parts use the runtime's threads.
    ///
    /// # Errors
    /// As [`VectorIndex::search`], less the runtime's `usage`.
    pub async fn search_async(
        self: &Arc<Self>,
        store: &Store,
        query: &[f64],
        k: usize,
        nprobe: usize,
    ) -> Result<(Vec<Hit>, SearchStats)> {
        let Some((q, parts)) = self.plan_search(query, k, nprobe)? else {
            return Ok((Vec::new(), SearchStats::default()));
        };
        let q = Arc::new(q);
        let mut ranked = Vec::with_capacity(parts.len());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if parts.len() > 1 => {
                let mut tasks = Vec::with_capacity(parts.len());
                for lists in parts {
                    let (index, store, q) = (self.clone(), store.clone(), q.clone());
                    tasks.push(runtime.spawn(async move { index.rank(&store, &q, &lists, k).await }));
                }
                for t in tasks {
                    ranked.push(t.await.unwrap_or_else(|_| Err(Error::usage("a search task panicked"))));
                }
            }
            _ => {
                for lists in &parts {
                    ranked.push(self.rank(store, &q, lists, k).await);
                }
            }
        }
        self.merge(ranked, k)
    }

    /// Checks `query`, and splits its `nprobe` nearest lists into parts of about equal rows,
    /// one per core (the order of the answer does not depend on the split); `None` for k = 0.
    fn plan_search(&self, query: &[f64], k: usize, nprobe: usize) -> Result<Option<(Wide, Vec<Vec<usize>>)>> {
        if query.len() != self.dim {
            return Err(Error::usage(format!(
                "index {:?}: a query of {} elements for vectors of {}",
                self.name,
                query.len(),
                self.dim
            )));
        }
        let q = Wide::query(self.dtype, query);
        let probe: Vec<usize> = self.probe_order(query).into_iter().take(nprobe.max(1)).collect();
        if k == 0 {
            return Ok(None);
        }
        let threads = std::thread::available_parallelism().map_or(1, usize::from).clamp(1, probe.len());
        let mut parts: Vec<(u64, Vec<usize>)> = vec![(0, Vec::new()); threads];
        for &l in &probe {
            if let Some(p) = parts.iter_mut().min_by_key(|p| p.0) {
                p.0 += self.lists[l].rows;
                p.1.push(l);
            }
        }
        Ok(Some((q, parts.into_iter().map(|p| p.1).filter(|l| !l.is_empty()).collect())))
    }

    /// The parts' best `k` merged into the answer: by (distance, row), no row twice.
    fn merge(&self, ranked: Vec<Result<Ranked>>, k: usize) -> Result<(Vec<Hit>, SearchStats)> {
        let mut kept = Vec::new();
        let mut stats = SearchStats::default();
        for r in ranked {
            let (part, st) = r?;
            kept.extend(part);
            stats.lists += st.lists;
            stats.entries += st.entries;
            stats.bytes += st.bytes;
        }
        kept.sort_unstable();
        kept.truncate(k);
        let mut rows: Vec<u64> = kept.iter().map(|k| k.key.1).collect();
        rows.sort_unstable();
        if let Some(&[r, _]) = rows.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::invalid(&self.data, format!("row {r} is listed twice [ANN-07]")));
        }
        let hits = kept
            .into_iter()
            .map(|k| {
                let mut rank = k.key.0;
                // Back from the total-order key to the distance.
                rank ^= (((rank >> 63) as u64) >> 1) as i64;
                Hit { row: k.key.1, distance: f64::from_bits(rank as u64), vector: k.vector }
            })
            .collect();
        Ok((hits, stats))
    }

    /// The best `k` entries of `lists` for query `q`, by (distance, row).
    async fn rank(&self, store: &Store, q: &Wide, lists: &[usize], k: usize) -> Result<Ranked> {
        let mut heap: BinaryHeap<Kept> = BinaryHeap::with_capacity(k.min(1 << 16) + 1);
        let mut row = Wide::new(self.dtype);
        let stats = self
            .each_entry_async(store, lists, |id, bytes| {
                row.set(self.dtype, bytes);
                let key = (total_key(row.distance(self.metric, q)), id);
                if heap.len() < k {
                    heap.push(Kept { key, vector: bytes.to_vec() });
                } else if heap.peek().is_some_and(|worst| key < worst.key) {
                    let mut worst = heap.pop().map(|w| w.vector).unwrap_or_default();
                    worst.clear();
                    worst.extend_from_slice(bytes);
                    heap.push(Kept { key, vector: worst });
                }
                Ok(())
            })
            .await?;
        Ok((heap.into_vec(), stats))
    }

    /// Calls `f(row, vector bytes)` for every entry of `lists`, in order, reading each list in
    /// pieces and checking its CRC-32 and row ids `[ANN-07]`: the blocking facade of
    /// [`VectorIndex::each_entry_async`], for the index's builders.
    pub(crate) fn each_entry(
        &self,
        store: &Store,
        lists: &[usize],
        f: impl FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<SearchStats> {
        block_on(self.each_entry_async(store, lists, f))
    }

    /// Calls `f(row, vector bytes)` for every entry of `lists`, in order, reading each list in
    /// pieces and checking its CRC-32 and row ids `[ANN-07]`. A local dataset's lists object is
    /// read with positioned reads into one reused buffer; another store's with ranged GETs of
    /// a few pieces each.
    pub(crate) async fn each_entry_async(
        &self,
        store: &Store,
        lists: &[usize],
        mut f: impl FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<SearchStats> {
        let entry = self.entry_bytes();
        let per_piece = (PIECE_BYTES / entry).max(1) * entry;
        // (list, piece range, last piece of the list)
        let mut pieces: Vec<(usize, Range<u64>, bool)> = Vec::new();
        for &i in lists {
            let r = self.list_range(i);
            let mut at = r.start;
            while at < r.end {
                let end = (at + per_piece).min(r.end);
                pieces.push((i, at..end, end == r.end));
                at = end;
            }
            if r.is_empty() {
                pieces.push((i, r.clone(), true));
            }
        }
        let mut check = ListCheck {
            index: self,
            stats: SearchStats { lists: lists.len() as u64, ..SearchStats::default() },
            crc: crc32fast::Hasher::new(),
            bad_row: None,
            pending: None,
        };
        #[cfg(unix)]
        if let Some(file) = local_file(store, &self.data) {
            use std::os::unix::fs::FileExt as _;
            let mut buf = Vec::new();
            for (list, range, last) in &pieces {
                buf.resize((range.end - range.start) as usize, 0);
                if file.read_exact_at(&mut buf, range.start).is_err() {
                    // The store reads the same range and names the fault as for any store.
                    let again = store.get_ranges_async(&self.data, std::slice::from_ref(range)).await?;
                    buf.clear();
                    buf.extend_from_slice(again.first().map_or(&[][..], AsRef::as_ref));
                }
                check.piece(*list, range, *last, &buf, &mut f)?;
            }
            return Ok(check.stats);
        }
        let mut next = 0;
        while next < pieces.len() {
            let mut total = 0u64;
            let mut end = next;
            while end < pieces.len()
                && (end == next || total + (pieces[end].1.end - pieces[end].1.start) <= GROUP_BYTES)
            {
                total += pieces[end].1.end - pieces[end].1.start;
                end += 1;
            }
            let ranges: Vec<Range<u64>> =
                pieces[next..end].iter().map(|p| p.1.clone()).filter(|r| !r.is_empty()).collect();
            let bodies =
                if ranges.is_empty() { Vec::new() } else { store.get_ranges_async(&self.data, &ranges).await? };
            let mut bodies = bodies.into_iter();
            for (list, range, last) in &pieces[next..end] {
                let body = if range.is_empty() { bytes::Bytes::new() } else { bodies.next().unwrap_or_default() };
                check.piece(*list, range, *last, &body, &mut f)?;
            }
            next = end;
        }
        Ok(check.stats)
    }
}

/// The checks of ANN-07 over a list's pieces, in order: its CRC-32 first, then its row ids,
/// then what the caller's function found.
struct ListCheck<'a> {
    index: &'a VectorIndex,
    stats: SearchStats,
    crc: crc32fast::Hasher,
    bad_row: Option<u64>,
    pending: Option<Error>,
}

impl ListCheck<'_> {
    fn piece(
        &mut self,
        list: usize,
        range: &Range<u64>,
        last: bool,
        body: &[u8],
        f: &mut impl FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let ix = self.index;
        if body.len() as u64 != range.end - range.start {
            return Err(Error::malformed(
                &ix.data,
                format!(
                    "list {list} read {} bytes of {} (object shorter than the record says) [ANN-07]",
                    body.len(),
                    range.end - range.start
                ),
            ));
        }
        self.stats.bytes += body.len() as u64;
        self.crc.update(body);
        for e in body.chunks_exact(ix.entry_bytes() as usize) {
            let id = u64::from_le_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]);
            if id >= ix.target_rows {
                // Reported after the list's CRC-32, which names a damaged list first.
                self.bad_row.get_or_insert(id);
                continue;
            }
            self.stats.entries += 1;
            if self.pending.is_none()
                && let Err(e) = f(id, &e[8..])
            {
                self.pending = Some(e);
            }
        }
        if !last {
            return Ok(());
        }
        let computed = std::mem::replace(&mut self.crc, crc32fast::Hasher::new()).finalize();
        let stored = ix.lists[list].crc32;
        if computed != stored {
            return Err(Error::Checksum { what: format!("{}: list {list}", ix.data), stored, computed });
        }
        if let Some(id) = self.bad_row.take() {
            return Err(Error::invalid(
                &ix.data,
                format!("list {list} holds row {id}, not one of the version's {} rows [ANN-07]", ix.target_rows),
            ));
        }
        self.pending.take().map_or(Ok(()), Err)
    }
}

/// The lists object as a local file, when the store is a local directory and no component of
/// the key is a link (a link is no object, LAY-11: the store then answers).
#[cfg(unix)]
fn local_file(store: &Store, key: &str) -> Option<std::fs::File> {
    let root = std::path::Path::new(store.url());
    if !root.is_dir() {
        return None;
    }
    let mut path = root.to_path_buf();
    for part in key.split('/') {
        path.push(part);
        if std::fs::symlink_metadata(&path).ok()?.file_type().is_symlink() {
            return None;
        }
    }
    std::fs::File::open(path).ok().filter(|f| f.metadata().is_ok_and(|m| m.is_file()))
}
