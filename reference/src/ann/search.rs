//! Search with a vector index `[ANN-10]`: rank the centroids by the query's distance, read the
//! `nprobe` nearest lists, rank their entries by the exact distance of §23 and keep the k best
//! by (distance in IEEE total order, row id).
//!
//! Lists are read in pieces of at most [`PIECE_BYTES`] (whole entries), a few pieces per
//! request, so memory stays bounded whatever a list's size; each list's CRC-32 is checked over
//! its pieces before the search returns anything.

use std::collections::BinaryHeap;
use std::ops::Range;

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
    /// # Errors
    /// `usage` when `query` has the wrong length; `malformed` when a list's CRC-32 differs;
    /// `invalid` for an entry whose row id is not a row of the version or repeats; storage
    /// errors, the lists object's absence included.
    pub fn search(&self, store: &Store, query: &[f64], k: usize, nprobe: usize) -> Result<(Vec<Hit>, SearchStats)> {
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
        let mut heap: BinaryHeap<Kept> = BinaryHeap::with_capacity(k.min(1 << 16) + 1);
        let mut row = Wide::new(self.dtype);
        let mut stats = SearchStats::default();
        if k > 0 {
            stats = self.each_entry(store, &probe, |id, bytes| {
                row.set(self.dtype, bytes);
                let key = (total_key(row.distance(self.metric, &q)), id);
                if heap.len() < k {
                    heap.push(Kept { key, vector: bytes.to_vec() });
                } else if heap.peek().is_some_and(|worst| key < worst.key) {
                    let mut worst = heap.pop().map(|w| w.vector).unwrap_or_default();
                    worst.clear();
                    worst.extend_from_slice(bytes);
                    heap.push(Kept { key, vector: worst });
                }
                Ok(())
            })?;
        }
        let kept = heap.into_sorted_vec();
        if let Some(w) = kept.windows(2).find(|w| w[0].key.1 == w[1].key.1) {
            return Err(Error::invalid(&self.data, format!("row {} is listed twice [ANN-07]", w[0].key.1)));
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

    /// Calls `f(row, vector bytes)` for every entry of `lists`, in order, reading each list in
    /// pieces and checking its CRC-32 and row ids `[ANN-07]`.
    pub(crate) fn each_entry(
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
        let mut stats = SearchStats { lists: lists.len() as u64, ..SearchStats::default() };
        let mut crc = crc32fast::Hasher::new();
        let mut bad_row: Option<u64> = None;
        let mut pending: Option<Error> = None;
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
            let bodies = if ranges.is_empty() { Vec::new() } else { store.get_ranges(&self.data, &ranges)? };
            let mut bodies = bodies.into_iter();
            for (list, range, last) in &pieces[next..end] {
                let body = if range.is_empty() { bytes::Bytes::new() } else { bodies.next().unwrap_or_default() };
                if body.len() as u64 != range.end - range.start {
                    return Err(Error::malformed(
                        &self.data,
                        format!(
                            "list {list} read {} bytes of {} (object shorter than the record says) [ANN-07]",
                            body.len(),
                            range.end - range.start
                        ),
                    ));
                }
                stats.bytes += body.len() as u64;
                crc.update(&body);
                for e in body.chunks_exact(entry as usize) {
                    let id = u64::from_le_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]);
                    if id >= self.target_rows {
                        // Reported after the list's CRC-32, which names a damaged list first.
                        bad_row.get_or_insert(id);
                        continue;
                    }
                    stats.entries += 1;
                    if pending.is_none()
                        && let Err(e) = f(id, &e[8..])
                    {
                        // Reported after the list's CRC-32 too.
                        pending = Some(e);
                    }
                }
                if *last {
                    let computed = std::mem::replace(&mut crc, crc32fast::Hasher::new()).finalize();
                    let stored = self.lists[*list].crc32;
                    if computed != stored {
                        return Err(Error::Checksum { what: format!("{}: list {list}", self.data), stored, computed });
                    }
                    if let Some(id) = bad_row.take() {
                        return Err(Error::invalid(
                            &self.data,
                            format!(
                                "list {list} holds row {id}, not one of the version's {} rows [ANN-07]",
                                self.target_rows
                            ),
                        ));
                    }
                    if let Some(e) = pending.take() {
                        return Err(e);
                    }
                }
            }
            next = end;
        }
        Ok(stats)
    }
}
