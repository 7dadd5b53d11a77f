//! Vector indexes: an optional IVF-Flat index over an embedding column of one version, for
//! approximate nearest-neighbour search (SPEC.md §"Vector indexes", ANN-01 to ANN-12, VAL-21).
//!
//! An index is two objects: the record `ann/<name>.tsann` (enveloped: the version it indexes,
//! bound by the manifest's SHA-256 like a view; the column and metric; the centroids; one
//! [`ListRef`] per list) and the lists object `ann/lists/<hash>.tsal`, where list `i` is a run of
//! entries `row id (u64 LE) | vector (the column's stored bytes)` covered by its own CRC-32.
//! A search ranks the centroids, reads the `nprobe` nearest lists with one ranged read each
//! (split in bounded pieces) and ranks their rows with the exact distance of §23, so every row
//! it returns has the distance and place the exact scan gives it; with every list probed the
//! answer *is* the exact scan's. Readers may ignore indexes: nothing else in the format refers
//! to `ann/`.
//!
//! | piece | module |
//! |---|---|
//! | the record, its checks (VAL-21), listing and deleting | this module |
//! | building: k-means on a sample, assignment, the lists object | [`build`] |
//! | search: probing, reading lists, exact ranking | `search` |
//! | near-duplicate detection for curation | `dedup` |

pub mod build;
mod dedup;
mod search;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::distance::Distance;
use crate::dtype::DType;
use crate::envelope::{self, ObjectKind};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::manifest::{Manifest, VersionRef};
use crate::paths;
use crate::schema::Dim;
use crate::store::Store;
use crate::view::load_target_async;

pub use build::IndexSpec;
pub use search::{Hit, SearchStats};

/// Prefix of index records.
pub const ANN_DIR: &str = "ann";
/// Suffix of an index record's key.
pub const ANN_SUFFIX: &str = ".tsann";
/// Prefix of lists objects.
pub const LISTS_DIR: &str = "ann/lists";
/// Extension of a lists object.
pub const LISTS_EXT: &str = "tsal";
/// The one index kind of this revision `[ANN-03]`.
pub const KIND_IVF_FLAT: u8 = 1;
/// Most lists an index may have `[ANN-04]`.
pub const MAX_LISTS: u64 = 1 << 20;
/// Most elements per vector `[ANN-04]`.
pub const MAX_DIM: u64 = 1 << 16;

/// One list of an index: where its entries lie in the lists object and their CRC-32. Field
/// order is the encoding (§6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRef {
    /// Byte offset of the list's first entry.
    pub offset: u64,
    /// Number of entries.
    pub rows: u64,
    /// CRC-32 of the list's bytes (all its entries).
    pub crc32: u32,
}

/// The stored record (§6 encoding, field order is the encoding).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct RawIndex {
    name: String,
    target: VersionRef,
    manifest_sha256: [u8; 32],
    timestamp_ms: u64,
    kind: u8,
    column: String,
    dtype: u8,
    dim: u32,
    metric: u8,
    rows: u64,
    build: String,
    centroids: Vec<f32>,
    lists: Vec<ListRef>,
    data: String,
    data_size: u64,
}

/// A validated vector index record `[ANN-02]`.
#[derive(Clone, Debug, PartialEq)]
pub struct VectorIndex {
    /// The index's name (equals the key's).
    pub name: String,
    /// The indexed version: the key of its manifest object.
    pub target: VersionRef,
    /// SHA-256 of the whole manifest object `target` names.
    pub manifest_sha256: [u8; 32],
    /// Creation time, ms since the Unix epoch.
    pub timestamp_ms: u64,
    /// The indexed column's name.
    pub column: String,
    /// The column's element type (f16, bf16, f32 or f64): the stored vectors' type.
    pub dtype: DType,
    /// Elements per vector.
    pub dim: usize,
    /// The distance the lists were built for (cosine or L2).
    pub metric: Distance,
    /// Entries in all lists: the version's rows whose vector is not null.
    pub rows: u64,
    /// How it was built (free text: lists, sample, iterations).
    pub build: String,
    /// `lists.len() × dim` centroid elements, list by list.
    pub centroids: Vec<f32>,
    /// The lists, contiguous in the lists object.
    pub lists: Vec<ListRef>,
    /// The lists object's relative path.
    pub data: String,
    /// The lists object's size in bytes.
    pub data_size: u64,
    /// Rows of the indexed version (from its manifest, not stored in the record): every entry's
    /// row id is below it.
    pub target_rows: u64,
}

/// The key of index `name`.
#[must_use]
pub fn index_key(name: &str) -> String {
    format!("{ANN_DIR}/{name}{ANN_SUFFIX}")
}

/// Checks an index name a caller supplies: the branch and tag grammar `[ANN-01]`.
fn check_name(name: &str) -> Result<()> {
    paths::validate_ref_name(name).map_err(|_| {
        Error::usage(format!("{name:?} is not a valid index name (1..=64 of [A-Za-z0-9._-], not starting with '.')"))
    })
}

/// The metric's code `[ANN-05]`.
fn metric_code(m: Distance) -> u8 {
    match m {
        Distance::Cosine => 0,
        Distance::L2 => 1,
        Distance::InnerProduct => 2,
    }
}

/// The name of an index metric, as the SQL function that uses it.
#[must_use]
pub fn metric_name(m: Distance) -> &'static str {
    match m {
        Distance::Cosine => "cosine",
        Distance::L2 => "l2",
        Distance::InnerProduct => "inner_product",
    }
}

/// Whether vectors of `dtype` can be indexed (float elements) `[ANN-06]`.
#[must_use]
pub fn indexable(dtype: DType) -> bool {
    matches!(dtype, DType::F16 | DType::Bf16 | DType::F32 | DType::F64)
}

impl VectorIndex {
    /// Bytes of one list entry: the row id and the vector `[ANN-07]`.
    #[must_use]
    pub fn entry_bytes(&self) -> u64 {
        8 + (self.dim * self.dtype.item_size()) as u64
    }

    /// Number of lists.
    #[must_use]
    pub fn nlist(&self) -> usize {
        self.lists.len()
    }

    /// Centroid `i`.
    #[must_use]
    pub fn centroid(&self, i: usize) -> &[f32] {
        &self.centroids[i * self.dim..(i + 1) * self.dim]
    }

    /// The byte range of list `i` in the lists object.
    #[must_use]
    pub fn list_range(&self, i: usize) -> std::ops::Range<u64> {
        let l = self.lists[i];
        l.offset..l.offset + l.rows * self.entry_bytes()
    }

    /// The number of lists a search probes unless told: 1/64 of them, but at least 8 (or all,
    /// when there are fewer) `[ANN-10]`. At 10^6 vectors (1,000 lists) that is 16 lists, which
    /// found 96% to 100% of the exact top-10 at over 20 times the exact scan's speed
    /// (`ann_bench`).
    #[must_use]
    pub fn default_nprobe(&self) -> usize {
        self.nlist().div_ceil(64).max(self.nlist().min(8))
    }

    /// Reads every list and checks it: its CRC-32, its row ids below the version's row count,
    /// and no row in two entries `[ANN-07]`. Memory: one bit per row of the version.
    ///
    /// # Errors
    /// `malformed` for a damaged list, `invalid` for a bad or repeated row id, storage errors.
    pub fn verify(&self, store: &Store) -> Result<SearchStats> {
        let words = usize::try_from(self.target_rows.div_ceil(64))
            .map_err(|_| Error::usage("too many rows for this machine"))?;
        let mut seen = vec![0u64; words];
        let all: Vec<usize> = (0..self.nlist()).collect();
        self.each_entry(store, &all, |row, _| {
            let (w, b) = ((row / 64) as usize, 1u64 << (row % 64));
            if seen[w] & b != 0 {
                return Err(Error::invalid(&self.data, format!("row {row} is listed twice [ANN-07]")));
            }
            seen[w] |= b;
            Ok(())
        })
    }

    /// The record as an object (envelope and body).
    ///
    /// # Errors
    /// Only if encoding fails.
    pub fn to_object(&self) -> Result<Vec<u8>> {
        let raw = RawIndex {
            name: self.name.clone(),
            target: self.target.clone(),
            manifest_sha256: self.manifest_sha256,
            timestamp_ms: self.timestamp_ms,
            kind: KIND_IVF_FLAT,
            column: self.column.clone(),
            dtype: self.dtype.code(),
            dim: u32::try_from(self.dim).map_err(|_| Error::usage("vector index: dimension over 2^32"))?,
            metric: metric_code(self.metric),
            rows: self.rows,
            build: self.build.clone(),
            centroids: self.centroids.clone(),
            lists: self.lists.clone(),
            data: self.data.clone(),
            data_size: self.data_size,
        };
        envelope::seal(ObjectKind::VectorIndex, &raw)
    }

    /// Decodes and checks a record's own fields (VAL-21 steps 3 to 9); `key` names it in errors.
    fn decode(bytes: &[u8], name: &str, key: &str, limits: &Limits) -> Result<Self> {
        let raw: RawIndex = envelope::open(ObjectKind::VectorIndex, bytes, limits.max_segment_body(), key)?;
        let bad = |reason: String| Error::invalid(key, reason);
        if raw.name != name {
            return Err(bad(format!("record names {:?} [ANN-02]", raw.name)));
        }
        if paths::validate_ref_name(&raw.target.branch).is_err() || raw.target.version == 0 {
            return Err(bad("target is not a valid branch and version [ANN-02]".into()));
        }
        if raw.kind != KIND_IVF_FLAT {
            return Err(Error::unsupported(key, format!("index kind {} [ANN-03]", raw.kind)));
        }
        let metric = match raw.metric {
            0 => Distance::Cosine,
            1 => Distance::L2,
            m => return Err(Error::unsupported(key, format!("metric code {m} [ANN-05]"))),
        };
        let dtype = DType::from_code(raw.dtype)
            .filter(|d| indexable(*d))
            .ok_or_else(|| bad(format!("dtype code {} is not a float type [ANN-06]", raw.dtype)))?;
        Error::check_limit(|| format!("{key}: dim [ANN-04]"), MAX_DIM, u64::from(raw.dim))?;
        Error::check_limit(|| format!("{key}: lists [ANN-04]"), MAX_LISTS, raw.lists.len() as u64)?;
        if raw.dim == 0 || raw.lists.is_empty() {
            return Err(bad("an index has at least one list and one element per vector [ANN-04]".into()));
        }
        let dim = raw.dim as usize;
        if raw.centroids.len() as u64 != raw.lists.len() as u64 * u64::from(raw.dim) {
            return Err(bad(format!(
                "{} centroid elements for {} lists of {} [ANN-08]",
                raw.centroids.len(),
                raw.lists.len(),
                raw.dim
            )));
        }
        if raw.centroids.iter().any(|c| !c.is_finite()) {
            return Err(bad("a centroid element is not finite [ANN-08]".into()));
        }
        paths::validate_relative(&raw.data, key)?;
        let entry = 8 + u64::from(raw.dim) * dtype.item_size() as u64;
        let mut end = 0u64;
        let mut rows = 0u64;
        for (i, l) in raw.lists.iter().enumerate() {
            if l.offset != end {
                return Err(bad(format!("list {i} starts at byte {} instead of {end} [ANN-07]", l.offset)));
            }
            end = l
                .rows
                .checked_mul(entry)
                .and_then(|b| b.checked_add(end))
                .ok_or_else(|| bad(format!("list {i} ends past byte 2^64 - 1 [ANN-07]")))?;
            rows += l.rows; // ≤ end / entry, so it cannot overflow
        }
        if end != raw.data_size || rows != raw.rows {
            return Err(bad(format!(
                "the lists hold {rows} entries in {end} bytes; the record says {} in {} [ANN-07]",
                raw.rows, raw.data_size
            )));
        }
        Ok(Self {
            name: raw.name,
            target: raw.target,
            manifest_sha256: raw.manifest_sha256,
            timestamp_ms: raw.timestamp_ms,
            column: raw.column,
            dtype,
            dim,
            metric,
            rows: raw.rows,
            build: raw.build,
            centroids: raw.centroids,
            lists: raw.lists,
            data: raw.data,
            data_size: raw.data_size,
            target_rows: 0,
        })
    }

    /// VAL-21 steps 10 to 12: the record against its target manifest's schema and row count.
    fn check_against(&mut self, key: &str, manifest: &Manifest) -> Result<()> {
        let column = manifest.schema.column(&self.column).ok_or_else(|| {
            Error::invalid(key, format!("the indexed version has no column {:?} [ANN-06]", self.column))
        })?;
        let dims = column.shape.iter().try_fold(1u64, |a, d| match d {
            Dim::Fixed(n) => a.checked_mul(*n),
            Dim::Ragged => None,
        });
        if column.dtype != self.dtype || dims != Some(self.dim as u64) {
            return Err(Error::invalid(
                key,
                format!(
                    "column {:?} is not {} vectors of {} elements [ANN-06]",
                    self.column,
                    self.dtype.name(),
                    self.dim
                ),
            ));
        }
        if self.rows > manifest.row_count {
            return Err(Error::invalid(
                key,
                format!("{} entries for a version of {} rows [ANN-07]", self.rows, manifest.row_count),
            ));
        }
        self.target_rows = manifest.row_count;
        Ok(())
    }
}

/// The index names under `ann/`, sorted; other keys there are ignored `[ANN-01]`.
pub(crate) fn index_names(store: &Store) -> Result<Vec<String>> {
    crate::blocking::block_on(index_names_async(store))
}

/// [`index_names`] as a `Send` future on the caller's runtime.
async fn index_names_async(store: &Store) -> Result<Vec<String>> {
    let mut v: Vec<String> = store
        .list_async(ANN_DIR)
        .await?
        .into_iter()
        .filter_map(|(n, _)| n.strip_suffix(ANN_SUFFIX).map(str::to_string))
        .filter(|n| check_name(n).is_ok())
        .collect();
    v.sort();
    Ok(v)
}

/// Reads record `name` and checks it alone (VAL-21 steps 1 to 9).
fn read_record(store: &Store, name: &str, limits: &Limits) -> Result<VectorIndex> {
    crate::blocking::block_on(read_record_async(store, name, limits))
}

/// [`read_record`] as a `Send` future on the caller's runtime.
async fn read_record_async(store: &Store, name: &str, limits: &Limits) -> Result<VectorIndex> {
    check_name(name)?;
    let key = index_key(name);
    let bytes = store.get_bounded_async(&key, envelope::max_object_len(limits.max_segment_body())).await?;
    VectorIndex::decode(&bytes, name, &key, limits)
}

/// The lists objects every record names, for garbage collection `[ANN-12]`: a record that
/// cannot be read is an error, so nothing is deleted.
pub(crate) fn named_lists(store: &Store, limits: &Limits) -> Result<Vec<String>> {
    index_names(store)?.iter().map(|n| read_record(store, n, limits).map(|i| i.data)).collect()
}

/// Steps 10 and 11 of VAL-21 for a record read alone; returns the target's envelope CRC.
async fn check_target_async(store: &Store, index: &mut VectorIndex, limits: &Limits) -> Result<u32> {
    let key = index_key(&index.name);
    let (manifest, crc) = load_target_async(store, &key, &index.target, &index.manifest_sha256, limits).await?;
    index.check_against(&key, &manifest)?;
    Ok(crc)
}

impl Dataset {
    /// Reads and validates vector index `name` of this dataset (VAL-21); it may index any
    /// version, not only this one. The blocking facade of [`Dataset::vector_index_async`].
    ///
    /// # Errors
    /// `usage` for a bad name, `not_found` for an absent index; `malformed`, `invalid`,
    /// `limit` or `unsupported` for a damaged one or one bound to another dataset.
    pub fn vector_index(&self, name: &str) -> Result<VectorIndex> {
        crate::blocking::block_on(self.vector_index_async(name))
    }

    /// [`Dataset::vector_index`] as a `Send` future on the caller's runtime.
    ///
    /// # Errors
    /// As [`Dataset::vector_index`].
    pub async fn vector_index_async(&self, name: &str) -> Result<VectorIndex> {
        let mut index = read_record_async(self.store(), name, self.limits()).await?;
        check_target_async(self.store(), &mut index, self.limits()).await?;
        Ok(index)
    }

    /// The vector index names of the dataset, sorted; other keys under `ann/` are ignored
    /// `[ANN-01]`.
    ///
    /// # Errors
    /// Storage errors.
    pub fn vector_indexes(&self) -> Result<Vec<String>> {
        index_names(self.store())
    }

    /// The valid indexes of this version's `column` for `metric`, by name: those a search of
    /// this version may use `[ANN-09]`. A record of another version, column or metric is not
    /// checked against its target; a damaged record is an error. The blocking facade of
    /// [`Dataset::vector_indexes_for_async`].
    ///
    /// # Errors
    /// Storage errors; the validation errors of the records.
    pub fn vector_indexes_for(&self, column: &str, metric: Distance) -> Result<Vec<VectorIndex>> {
        crate::blocking::block_on(self.vector_indexes_for_async(column, metric))
    }

    /// [`Dataset::vector_indexes_for`] as a `Send` future on the caller's runtime.
    ///
    /// # Errors
    /// As [`Dataset::vector_indexes_for`].
    pub async fn vector_indexes_for_async(&self, column: &str, metric: Distance) -> Result<Vec<VectorIndex>> {
        let mut out = Vec::new();
        for name in index_names_async(self.store()).await? {
            let mut index = read_record_async(self.store(), &name, self.limits()).await?;
            let ours = index.target.branch == self.branch()
                && index.target.version == self.version()
                && index.column == column
                && index.metric == metric;
            if ours && check_target_async(self.store(), &mut index, self.limits()).await? == self.manifest_crc32() {
                out.push(index);
            }
        }
        Ok(out)
    }

    /// Deletes vector index `name`: its record, then its lists object unless another record
    /// names it `[ANN-11]`. No version changes.
    ///
    /// # Errors
    /// `usage` for a bad name; `not_found` if there is no such index; `io` on failure.
    pub fn delete_vector_index(&self, name: &str) -> Result<()> {
        // The lists object is known only from a decodable record; a damaged one is deleted
        // alone (garbage collection then finds the lists unnamed).
        let data = match read_record(self.store(), name, self.limits()) {
            Ok(index) => Some(index.data),
            Err(e @ (Error::NotFound { .. } | Error::Usage(_) | Error::Io { .. })) => return Err(e),
            Err(_) => None,
        };
        self.store().delete(&index_key(name))?;
        let Some(data) = data else { return Ok(()) };
        let named = index_names(self.store())?
            .iter()
            .any(|other| read_record(self.store(), other, self.limits()).is_ok_and(|i| i.data == data));
        if named {
            return Ok(());
        }
        match self.store().delete(&data) {
            Ok(()) | Err(Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Stores a built index: the lists object (content-addressed), then the record with
    /// create-if-absent `[ANN-11]`.
    fn store_index(&self, index: &VectorIndex, lists: Bytes, max_body: u64) -> Result<()> {
        let key = index_key(&index.name);
        let record = Bytes::from(index.to_object()?);
        Error::check_limit(
            || format!("{key} (vector index): body length [LIM-05]"),
            max_body,
            (record.len() - envelope::HEADER_LEN - envelope::TRAILER_LEN) as u64,
        )?;
        self.store().put_if_absent(&index.data, lists)?;
        match self.store().put_if_absent(&key, record.clone())? {
            crate::store::Created::New => Ok(()),
            crate::store::Created::Existed
                if self.store().get_bounded(&key, envelope::max_object_len(max_body))? == record =>
            {
                Ok(())
            }
            crate::store::Created::Existed => {
                Err(Error::Conflict { what: format!("vector index {:?} exists", index.name) })
            }
        }
    }
}

#[cfg(test)]
mod tests;
