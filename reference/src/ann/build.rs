//! Building a vector index: k-means on an evenly spaced sample, then every row assigned to
//! its nearest centroid and written, list by list, into one content-addressed lists object.
//!
//! The build is deterministic: the sample is every `s`-th row, the first centroids are evenly
//! spaced sample points, and assignment compares squared L2 distances computed in f32 in a
//! fixed order of 16 lanes (no fused multiply-add, whatever the CPU), ties to the lower list;
//! means are summed in row order in f64. So one version, column and set of options give the
//! same lists, and the same bytes, on every machine and thread count. For a cosine index the
//! vectors and centroids are scaled to unit length first (spherical k-means). The search does
//! not depend on how the lists were made: any partition of the rows is a valid index.

use bytes::Bytes;

use crate::column::ColumnData;
use crate::dataset::Dataset;
use crate::distance::Distance;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::manifest::VersionRef;
use crate::paths;
use crate::schema::Dim;
use crate::writer::WriteOptions;

use super::search::Wide;
use super::{LISTS_DIR, LISTS_EXT, ListRef, MAX_DIM, MAX_LISTS, VectorIndex, check_name, indexable};

/// Bytes of vectors read per chunk of rows.
const CHUNK_BYTES: u64 = 32 << 20;

/// What to build: a name, the column, the metric and the k-means settings.
#[derive(Clone, Debug)]
pub struct IndexSpec {
    /// The index's name (the branch and tag grammar).
    pub name: String,
    /// The embedding column: f16, bf16, f32 or f64 elements of a fixed shape.
    pub column: String,
    /// Cosine or L2 (an inner-product search uses the exact scan).
    pub metric: Distance,
    /// Number of lists; `None` for √rows, at least 1.
    pub lists: Option<usize>,
    /// Rows k-means trains on; `None` for max(32 × lists, 16,384), at most every row.
    pub sample: Option<usize>,
    /// k-means iterations.
    pub iterations: u32,
}

impl IndexSpec {
    /// An index named `name` over `column` with default settings (√rows lists, 10 iterations).
    #[must_use]
    pub fn new(name: &str, column: &str, metric: Distance) -> Self {
        Self { name: name.into(), column: column.into(), metric, lists: None, sample: None, iterations: 10 }
    }
}

/// Squared L2 distance in f32, summed in 16 lanes in a fixed order (the same bits on every CPU:
/// Rust never fuses or reorders float operations).
fn l2_sq(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 16];
    // Whole 16-element arrays, so the lanes compile to vector registers without bounds checks.
    let ((ac, ar), (bc, br)) = (a.as_chunks::<16>(), b.as_chunks::<16>());
    for (x, y) in ac.iter().zip(bc) {
        for j in 0..16 {
            let d = x[j] - y[j];
            lanes[j] += d * d;
        }
    }
    for (j, (x, y)) in ar.iter().zip(br).enumerate() {
        let d = x - y;
        lanes[j] += d * d;
    }
    for w in [8, 4, 2, 1] {
        for j in 0..w {
            lanes[j] += lanes[j + w];
        }
    }
    lanes[0]
}

/// Points compared with each centroid while it is in cache: the centroids stream through
/// the cache once per block of points instead of once per point.
const BLOCK: usize = 32;

/// The nearest centroid of each of `points` (at most [`BLOCK`] of them), ties and NaN to the
/// lower list.
fn nearest_block(points: &[f32], centroids: &[f32], dim: usize, out: &mut [u32]) {
    let mut best = [f32::INFINITY; BLOCK];
    out.fill(0);
    for (i, c) in centroids.chunks_exact(dim).enumerate() {
        for ((v, b), o) in points.chunks_exact(dim).zip(best.iter_mut()).zip(out.iter_mut()) {
            let d = l2_sq(v, c);
            if d < *b {
                *b = d;
                *o = i as u32;
            }
        }
    }
}

/// Nearest centroids of the `dim`-element vectors in `points`, on every core.
fn assign(points: &[f32], centroids: &[f32], dim: usize, out: &mut [u32]) {
    let threads = std::thread::available_parallelism().map_or(1, usize::from).max(1);
    let n = out.len();
    let per = n.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (t, part) in out.chunks_mut(per).enumerate() {
            let pts = &points[t * per * dim..(t * per + part.len()) * dim];
            s.spawn(move || {
                for (o, v) in part.chunks_mut(BLOCK).zip(pts.chunks(BLOCK * dim)) {
                    nearest_block(v, centroids, dim, o);
                }
            });
        }
    });
}

/// `v` scaled to unit length (f64 norm, summed in order); zero vectors stay zero.
fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        for x in v.iter_mut() {
            *x = (f64::from(*x) / norm) as f32;
        }
    }
}

/// Reads `column` of `ds` in chunks: `f(first row, data)`.
fn each_chunk(
    ds: &Dataset,
    column: &str,
    row_bytes: u64,
    mut f: impl FnMut(u64, &ColumnData) -> Result<()>,
) -> Result<()> {
    let per = (CHUNK_BYTES / row_bytes.max(1)).max(1);
    let n = ds.row_count();
    let mut start = 0;
    while start < n {
        let end = (start + per).min(n);
        let batch = ds.read_rows(start..end, Some(&[column]))?;
        let data = batch.get(column).ok_or_else(|| Error::usage(format!("no column {column:?}")))?;
        f(start, data)?;
        start = end;
    }
    Ok(())
}

/// One build's fixed facts: the version, the column and how its rows become f32 points.
struct Build<'a> {
    ds: &'a Dataset,
    column: &'a str,
    dtype: DType,
    dim: usize,
    cosine: bool,
}

impl Build<'_> {
    /// Bytes of one stored vector.
    fn row_bytes(&self) -> u64 {
        (self.dim * self.dtype.item_size()) as u64
    }

    /// Appends a stored vector as an f32 point (f64 rounded; unit length for cosine).
    fn push_point(&self, bytes: &[u8], wide: &mut Wide, out: &mut Vec<f32>) {
        if self.dtype == DType::F64 {
            out.extend(
                bytes
                    .chunks_exact(8)
                    .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32),
            );
        } else {
            wide.set(self.dtype, bytes);
            if let Wide::F32(v) = wide {
                out.extend_from_slice(v);
            }
        }
        if self.cosine {
            let at = out.len() - self.dim;
            normalise(&mut out[at..]);
        }
    }

    /// Every `stride`-th row with a finite vector, at most `want` of them.
    fn sample(&self, stride: u64, want: usize) -> Result<Vec<f32>> {
        let (dim, mut wide, mut sample) = (self.dim, Wide::new(DType::F32), Vec::new());
        each_chunk(self.ds, self.column, self.row_bytes(), |start, data| {
            for i in 0..data.len() {
                let r = start + i as u64;
                if !r.is_multiple_of(stride) || !data.is_valid(i) || sample.len() / dim >= want {
                    continue;
                }
                self.push_point(data.row(i), &mut wide, &mut sample);
                if sample[sample.len() - dim..].iter().any(|x| !x.is_finite()) {
                    sample.truncate(sample.len() - dim);
                }
            }
            Ok(())
        })?;
        Ok(sample)
    }

    /// `nlist` centroids by `iterations` rounds of k-means on `sample`, starting from evenly
    /// spaced sample points; a list left empty keeps its centroid.
    fn kmeans(&self, sample: &[f32], nlist: usize, iterations: u32) -> Vec<f32> {
        let dim = self.dim;
        let points = sample.len() / dim;
        let mut centroids: Vec<f32> = (0..nlist)
            .flat_map(|i| sample[(i * points / nlist) * dim..(i * points / nlist + 1) * dim].iter().copied())
            .collect();
        let mut labels = vec![0u32; points];
        for _ in 0..iterations {
            assign(sample, &centroids, dim, &mut labels);
            let mut sums = vec![0f64; nlist * dim];
            let mut counts = vec![0u64; nlist];
            for (p, &l) in labels.iter().enumerate() {
                let l = l as usize;
                counts[l] += 1;
                for (s, &x) in sums[l * dim..(l + 1) * dim].iter_mut().zip(&sample[p * dim..(p + 1) * dim]) {
                    *s += f64::from(x);
                }
            }
            for (l, &count) in counts.iter().enumerate().filter(|(_, c)| **c > 0) {
                let c = &mut centroids[l * dim..(l + 1) * dim];
                for (x, s) in c.iter_mut().zip(&sums[l * dim..(l + 1) * dim]) {
                    *x = (s / count as f64) as f32;
                }
                if self.cosine {
                    normalise(c);
                }
            }
        }
        centroids
    }

    /// Every row's list (`u32::MAX` for a null vector).
    fn labels(&self, centroids: &[f32]) -> Result<Vec<u32>> {
        let rows = usize::try_from(self.ds.row_count()).map_err(|_| Error::usage("too many rows for this machine"))?;
        let mut label = vec![u32::MAX; rows];
        let (mut wide, mut chunk, mut valid, mut out) = (Wide::new(DType::F32), Vec::new(), Vec::new(), Vec::new());
        each_chunk(self.ds, self.column, self.row_bytes(), |start, data| {
            chunk.clear();
            valid.clear();
            for i in (0..data.len()).filter(|&i| data.is_valid(i)) {
                self.push_point(data.row(i), &mut wide, &mut chunk);
                valid.push(i);
            }
            out.clear();
            out.resize(valid.len(), 0);
            assign(&chunk, centroids, self.dim, &mut out);
            for (&i, &l) in valid.iter().zip(&out) {
                label[start as usize + i] = l;
            }
            Ok(())
        })?;
        Ok(label)
    }

    /// The lists object (list by list, rows ascending within a list) and its list records.
    fn lists(&self, label: &[u32], nlist: usize) -> Result<(Vec<u8>, Vec<ListRef>)> {
        let entry = 8 + self.row_bytes();
        let mut counts = vec![0u64; nlist];
        for &l in label.iter().filter(|&&l| l != u32::MAX) {
            counts[l as usize] += 1;
        }
        let (mut cursor, mut refs, mut end) = (Vec::with_capacity(nlist), Vec::with_capacity(nlist), 0u64);
        for &c in &counts {
            cursor.push(end as usize);
            refs.push(ListRef { offset: end, rows: c, crc32: 0 });
            end += c * entry;
        }
        let mut bytes = vec![0u8; usize::try_from(end).map_err(|_| Error::usage("index too large for this machine"))?];
        each_chunk(self.ds, self.column, self.row_bytes(), |start, data| {
            for i in 0..data.len() {
                let r = start + i as u64;
                let Some(at) = label.get(r as usize).filter(|l| **l != u32::MAX).map(|&l| &mut cursor[l as usize])
                else {
                    continue;
                };
                bytes[*at..*at + 8].copy_from_slice(&r.to_le_bytes());
                bytes[*at + 8..*at + entry as usize].copy_from_slice(data.row(i));
                *at += entry as usize;
            }
            Ok(())
        })?;
        for l in &mut refs {
            let at = l.offset as usize;
            l.crc32 = crc32fast::hash(&bytes[at..at + (l.rows * entry) as usize]);
        }
        Ok((bytes, refs))
    }
}

impl Dataset {
    /// Builds vector index `spec.name` over `spec.column` of this version and stores it
    /// (`ann/<name>.tsann` and its lists object) `[ANN-11]`. Rows whose vector is null are not
    /// indexed.
    ///
    /// # Errors
    /// `usage` for a bad name or settings, a column that is not a fixed-shape float vector, an
    /// inner-product metric or a version without a non-null vector; `conflict` if the name is
    /// taken; `limit` when the record would pass the segment body limit; storage errors.
    pub fn create_vector_index(&self, spec: &IndexSpec, options: &WriteOptions) -> Result<VectorIndex> {
        let build = self.check_spec(spec)?;
        let rows = self.row_count();
        let lists =
            spec.lists.unwrap_or_else(|| (rows as f64).sqrt().round().max(1.0) as usize).min(MAX_LISTS as usize);
        let want = spec.sample.unwrap_or_else(|| (32 * lists).max(16_384));
        let sample = build.sample((rows / want.max(1) as u64).max(1), want)?;
        let points = sample.len() / build.dim;
        if points == 0 {
            return Err(Error::usage(format!("column {:?} has no finite vector to index", spec.column)));
        }
        let nlist = lists.min(points);
        let centroids = build.kmeans(&sample, nlist, spec.iterations);
        drop(sample);
        let label = build.labels(&centroids)?;
        let (bytes, list_refs) = build.lists(&label, nlist)?;
        drop(label);

        let index = VectorIndex {
            name: spec.name.clone(),
            target: VersionRef { branch: self.branch().to_string(), version: self.version() },
            manifest_sha256: self.manifest_sha256()?,
            timestamp_ms: options.timestamp(),
            column: spec.column.clone(),
            dtype: build.dtype,
            dim: build.dim,
            metric: spec.metric,
            rows: list_refs.iter().map(|l| l.rows).sum(),
            build: format!(
                "ivf-flat: {nlist} lists, k-means ({}) on {points} sampled rows, {} iterations",
                if build.cosine { "unit vectors" } else { "l2" },
                spec.iterations
            ),
            centroids,
            data: paths::content_key(LISTS_DIR, LISTS_EXT, &bytes),
            data_size: bytes.len() as u64,
            lists: list_refs,
            target_rows: rows,
        };
        self.store_index(&index, Bytes::from(bytes), self.limits().tightest(&options.limits).max_segment_body())?;
        Ok(index)
    }

    /// Checks a build's name, column, metric and settings before any data is read.
    fn check_spec<'a>(&'a self, spec: &'a IndexSpec) -> Result<Build<'a>> {
        check_name(&spec.name)?;
        let column =
            self.schema().column(&spec.column).ok_or_else(|| Error::usage(format!("no column {:?}", spec.column)))?;
        let dim = column.shape.iter().try_fold(1u64, |a, d| match d {
            Dim::Fixed(n) => a.checked_mul(*n),
            Dim::Ragged => None,
        });
        let dim = match dim {
            Some(d) if (1..=MAX_DIM).contains(&d) && indexable(column.dtype) => d as usize,
            _ => {
                return Err(Error::usage(format!(
                    "column {:?} is not a fixed-shape vector of f16, bf16, f32 or f64 elements (at most {MAX_DIM} of them)",
                    spec.column
                )));
            }
        };
        if spec.metric == Distance::InnerProduct {
            return Err(Error::usage("vector indexes are built for cosine or l2; inner_product uses the exact scan"));
        }
        if spec.iterations == 0 || spec.lists == Some(0) || spec.sample == Some(0) {
            return Err(Error::usage("lists, sample and iterations must be at least 1"));
        }
        if super::index_names(self.store())?.contains(&spec.name) {
            return Err(Error::Conflict { what: format!("vector index {:?} exists", spec.name) });
        }
        Ok(Build { ds: self, column: &spec.column, dtype: column.dtype, dim, cosine: spec.metric == Distance::Cosine })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l2_sq_is_the_lane_sum() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..37).map(|i| (i * i) as f32 * 0.01).collect();
        let plain: f64 = a.iter().zip(&b).map(|(x, y)| f64::from(x - y) * f64::from(x - y)).sum();
        assert!((f64::from(l2_sq(&a, &b)) - plain).abs() < 1e-3 * plain);
        let mut out = [9u32; 2];
        nearest_block(&[a.clone(), b.clone()].concat(), &[b.clone(), a.clone(), a.clone()].concat(), 37, &mut out);
        assert_eq!(out, [1, 0], "the nearest, ties to the lower list");
    }
}
