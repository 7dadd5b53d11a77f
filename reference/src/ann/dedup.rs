//! Near-duplicate detection with a vector index, for curation: which rows lie within a
//! distance threshold of a row with a smaller id.
//!
//! Row `r` of list `L` is a near-duplicate when some row `s < r` of `L` or of one of the
//! `probe − 1` lists whose centroids are nearest `L`'s centroid has `distance(r, s) <
//! threshold` (§23, the index's metric). Keeping the first of every group ("keep the lowest
//! row id") makes the answer independent of list order and thread count. With `probe` equal to
//! the number of lists every pair is compared, and the answer is the brute-force one; with
//! fewer, a pair split across distant lists is missed (near-duplicates rarely are: their
//! vectors sit in one cell of the partition, or in neighbouring ones).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};
use crate::store::Store;

use super::VectorIndex;
use super::search::{Wide, total_key};

/// One list in memory: row ids and widened vectors.
struct Loaded {
    rows: Vec<u64>,
    vectors: Vec<Wide>,
}

impl VectorIndex {
    /// The lists nearest list `l` by centroid distance, `l` first, `probe` in all.
    fn neighbours(&self, l: usize, probe: usize) -> Vec<usize> {
        let c = Wide::F32(self.centroid(l).to_vec());
        let mut scratch = Vec::new();
        let mut ranked: Vec<(i64, usize)> = (0..self.nlist())
            .filter(|&i| i != l)
            .map(|i| (total_key(c.to_centroid(self.metric, self.centroid(i), &mut scratch)), i))
            .collect();
        ranked.sort_unstable();
        std::iter::once(l).chain(ranked.into_iter().map(|(_, i)| i)).take(probe.max(1)).collect()
    }

    fn load(&self, store: &Store, l: usize) -> Result<Loaded> {
        let mut out = Loaded { rows: Vec::new(), vectors: Vec::new() };
        self.each_entry(store, &[l], |row, bytes| {
            let mut w = Wide::new(self.dtype);
            w.set(self.dtype, bytes);
            out.rows.push(row);
            out.vectors.push(w);
            Ok(())
        })?;
        Ok(out)
    }

    /// The near-duplicate rows (see the module docs), ascending. Runs on every core; memory is
    /// `probe` lists per core.
    ///
    /// # Errors
    /// `usage` for a NaN threshold; the errors of reading a list (a damaged list is
    /// `malformed`).
    pub fn near_duplicates(&self, store: &Store, threshold: f64, probe: usize) -> Result<Vec<u64>> {
        if threshold.is_nan() {
            return Err(Error::usage("the near-duplicate threshold is NaN"));
        }
        let next = AtomicUsize::new(0);
        let found: Mutex<Vec<u64>> = Mutex::new(Vec::new());
        let failed: Mutex<Option<Error>> = Mutex::new(None);
        let threads = std::thread::available_parallelism().map_or(1, usize::from).max(1);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let l = next.fetch_add(1, Ordering::Relaxed);
                        if l >= self.nlist() || failed.lock().map_or(true, |f| f.is_some()) {
                            break;
                        }
                        if let Err(e) = self.duplicates_in(store, l, threshold, probe, &mut mine) {
                            if let Ok(mut f) = failed.lock() {
                                f.get_or_insert(e);
                            }
                            break;
                        }
                    }
                    if let Ok(mut f) = found.lock() {
                        f.extend(mine);
                    }
                });
            }
        });
        if let Some(e) = failed.into_inner().ok().flatten() {
            return Err(e);
        }
        let mut rows = found.into_inner().unwrap_or_default();
        rows.sort_unstable();
        rows.dedup();
        Ok(rows)
    }

    /// The near-duplicates among list `l`'s rows, appended to `out`.
    fn duplicates_in(&self, store: &Store, l: usize, threshold: f64, probe: usize, out: &mut Vec<u64>) -> Result<()> {
        let own = self.load(store, l)?;
        let others: Vec<Loaded> =
            self.neighbours(l, probe).into_iter().skip(1).map(|m| self.load(store, m)).collect::<Result<_>>()?;
        for (r, v) in own.rows.iter().zip(&own.vectors) {
            let close = std::iter::once(&own).chain(&others).any(|list| {
                list.rows.iter().zip(&list.vectors).any(|(s, w)| s < r && v.distance(self.metric, w) < threshold)
            });
            if close {
                out.push(*r);
            }
        }
        Ok(())
    }
}
