//! Version manifests (`.tsm`), index segments (`.tsi`) and tag records (`.tst`)
//! (SPEC.md §"Manifest", §"Index segment", §"Tags").
//!
//! A manifest lists immutable index segments rather than fragments, so a commit writes one
//! new segment with its new fragments and a manifest that references the old segments by path:
//! the cost of a commit grows with the change, not with the dataset.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::limits::hard;
use crate::paths;
use crate::schema::{Schema, validate_metadata};

/// Reader flag `ENCODED_IMAGES` `[FLG-08]`: the version may hold image pages `[CMP-06]`.
pub const READER_FLAG_ENCODED_IMAGES: u64 = 1;
/// Reader flag `FRAGMENT_TREE` `[FLG-09]`: the manifest's `segments` reference the root of a
/// fragment tree (`crate::tree`), not a fragment log.
pub const READER_FLAG_FRAGMENT_TREE: u64 = 2;
/// Reader-required feature bits this implementation understands: `FRAGMENT_TREE`, and
/// `ENCODED_IMAGES` when built with the `images` feature (versions with an unknown bit are
/// `unsupported`).
pub const KNOWN_READER_FLAGS: u64 =
    READER_FLAG_FRAGMENT_TREE | if cfg!(feature = "images") { READER_FLAG_ENCODED_IMAGES } else { 0 };

/// The reader flags a manifest with `schema` must set `[FLG-08]`.
#[must_use]
pub fn required_reader_flags(schema: &Schema) -> u64 {
    let encoded = schema.columns.iter().any(|c| c.compression == crate::schema::Compression::Encoded);
    if encoded { READER_FLAG_ENCODED_IMAGES } else { 0 }
}
/// Writer-required feature bits this implementation understands (none are defined in 1.0).
pub const KNOWN_WRITER_FLAGS: u64 = 0;

/// A (branch, version) pair.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VersionRef {
    /// Branch name.
    pub branch: String,
    /// Version number on that branch.
    pub version: u64,
}

/// One version of a dataset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Features a reader must understand; an unknown bit means "do not read" `[FLG-03]`.
    pub reader_flags: u64,
    /// Features a writer must understand; an unknown bit means "do not modify" `[FLG-04]`.
    pub writer_flags: u64,
    /// The branch this manifest belongs to.
    pub branch: String,
    /// The version number; equals the number in the object key.
    pub version: u64,
    /// The version this one was committed on top of.
    pub parent: Option<VersionRef>,
    /// For the first manifest of a branch: the version it was forked from.
    pub base: Option<VersionRef>,
    /// For a merge commit: the merged version (the second parent).
    pub merged: Option<VersionRef>,
    /// Commit time, milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// Commit message.
    pub message: String,
    /// Random nonce of the committer; identifies a retried write as one's own.
    pub writer_id: [u8; 16],
    /// The schema of this version.
    pub schema: Schema,
    /// Above every column id ever used in this dataset's history.
    pub next_column_id: u32,
    /// Above every fragment id ever used.
    pub next_fragment_id: u64,
    /// Total rows; equals the sum over the segments.
    pub row_count: u64,
    /// The index segments holding the fragments, in row order.
    pub segments: Vec<SegmentRef>,
    /// Dataset-wide statistics per column.
    pub stats: Vec<ColumnStats>,
    /// Free-form key/value pairs, sorted by key.
    pub metadata: Vec<(String, String)>,
}

/// A reference from a manifest to an index segment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentRef {
    /// Relative path of the segment object.
    pub path: String,
    /// Exact size in bytes.
    pub size: u64,
    /// The object's stored envelope CRC (its last four bytes).
    pub crc32: u32,
    /// Fragments in the segment.
    pub fragment_count: u64,
    /// Rows in the segment.
    pub row_count: u64,
}

/// The body of an index segment: one step of the fragment log `[SEG-08]`.
///
/// Applying the segments of a manifest in order yields the version's fragments: each
/// segment first removes the fragment ids in `removed`, then inserts or replaces the
/// fragments it lists (by id). The version's rows are the fragments in ascending id order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// Fragments added or replaced, ascending by id.
    pub fragments: Vec<Fragment>,
    /// Fragment ids removed, ascending.
    pub removed: Vec<u64>,
}

/// A contiguous run of rows, stored in one data file per column group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fragment {
    /// Unique id, ascending in row order.
    pub id: u64,
    /// Rows in the fragment (every file holds exactly this many).
    pub row_count: u64,
    /// The data files; every schema column is in exactly one file's `column_ids`.
    pub files: Vec<DataFileRef>,
    /// Rows of the fragment that are deleted, when any.
    pub deletion: Option<DeletionRef>,
    /// Per-column statistics within the fragment.
    pub stats: Vec<ColumnStats>,
}

/// A reference from a fragment to its deletion vector.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletionRef {
    /// Relative path of the deletion vector object.
    pub path: String,
    /// Exact size in bytes.
    pub size: u64,
    /// The object's stored envelope CRC (its last four bytes).
    pub crc32: u32,
    /// Number of deleted rows (> 0, at most the fragment's rows).
    pub deleted_count: u64,
}

/// The body of a deletion vector (`.tsx`): the deleted rows of one fragment, by offset
/// within the fragment, ascending and unique `[DEL-04]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletionVector {
    /// The fragment the rows belong to.
    pub fragment_id: u64,
    /// Deleted row offsets.
    pub rows: Vec<u64>,
}

impl DeletionVector {
    /// Checks the vector against its fragment and reference `[DEL-04]`.
    ///
    /// # Errors
    /// `invalid` for rows out of order, out of range or a count mismatch.
    pub fn validate(&self, fragment: &Fragment, dref: &DeletionRef, what: &str) -> Result<()> {
        if self.fragment_id != fragment.id {
            return Err(Error::invalid(what, "deletion vector belongs to another fragment [DEL-04]"));
        }
        if self.rows.len() as u64 != dref.deleted_count
            || self.rows.windows(2).any(|w| w[0] >= w[1])
            || self.rows.last().is_some_and(|&r| r >= fragment.row_count)
        {
            return Err(Error::invalid(
                what,
                "deleted rows must ascend, stay below the fragment's rows and match the count [DEL-04]",
            ));
        }
        Ok(())
    }
}

/// A reference from a fragment to a data file.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DataFileRef {
    /// Relative path of the data file.
    pub path: String,
    /// Exact size in bytes.
    pub size: u64,
    /// CRC-32 of the file's footer (binds the reference to the content).
    pub footer_crc32: u32,
    /// The column ids read from this file, ascending. The file may hold more columns
    /// (superseded by an update); ids no longer in the schema are ignored (dropped columns).
    pub column_ids: Vec<u32>,
}

/// Statistics of one column for pruning `[STAT-01]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColumnStats {
    /// The column.
    pub column_id: u32,
    /// Null rows.
    pub null_count: u64,
    /// Smallest non-null, non-NaN value (rank-0 numeric columns only).
    pub min: Option<Scalar>,
    /// Largest non-null, non-NaN value.
    pub max: Option<Scalar>,
}

/// A statistics value.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Scalar {
    /// For bool columns.
    Bool(bool),
    /// For signed integer columns.
    Int(i64),
    /// For unsigned integer columns.
    UInt(u64),
    /// For float columns (f16/bf16 widened).
    Float(f64),
}

/// A tag: an immutable name for a version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tag {
    /// The tag's name (equals the key's).
    pub name: String,
    /// The tagged version.
    pub target: VersionRef,
    /// The tagged manifest's stored envelope CRC (detects a rewritten manifest).
    pub manifest_crc32: u32,
    /// Creation time, ms since the Unix epoch.
    pub timestamp_ms: u64,
    /// Free text.
    pub message: String,
}

impl Manifest {
    /// Semantic checks of a decoded manifest read from `key_branch`/`key_version`
    /// `[VAL-05]`..`[VAL-06]`. Flags are checked first: an unknown feature may change what the
    /// other fields mean.
    ///
    /// # Errors
    /// `unsupported` for unknown reader flags; `invalid` or `limit` for the first broken rule.
    pub fn validate(&self, key_branch: &str, key_version: u64, what: &str) -> Result<()> {
        let unknown = self.reader_flags & !KNOWN_READER_FLAGS;
        if unknown != 0 {
            return Err(Error::unsupported(what, format!("unknown reader-required flags {unknown:#x} [FLG-03]")));
        }
        if self.branch != key_branch || self.version != key_version {
            return Err(Error::invalid(
                what,
                format!(
                    "manifest says {}@{}, its key says {key_branch}@{key_version} [MAN-01]",
                    self.branch, self.version
                ),
            ));
        }
        if self.version == 0 {
            return Err(Error::invalid(what, "version 0 does not exist [LAY-08]"));
        }
        self.validate_lineage(what)?;
        Error::check_limit(
            || format!("{what}: message bytes"),
            hard::MAX_METADATA_VALUE_BYTES,
            self.message.len() as u64,
        )?;
        validate_metadata(&self.metadata, what)?;
        self.schema.validate().map_err(|e| match e {
            Error::Usage(r) => Error::invalid(what, r),
            other => other,
        })?;
        if required_reader_flags(&self.schema) & !self.reader_flags != 0 {
            return Err(Error::invalid(what, "an encoded column without the ENCODED_IMAGES reader flag [FLG-08]"));
        }
        if let Some(max) = self.schema.columns.iter().map(|c| c.id).max()
            && max >= self.next_column_id
        {
            return Err(Error::invalid(what, "next_column_id is not above every column id [MAN-05]"));
        }
        for s in &self.segments {
            paths::validate_relative(&s.path, what)?;
        }
        Ok(())
    }

    /// The lineage rules `[MAN-02]`: well-formed refs; a branch's first manifest names its base
    /// with the same version; otherwise the parent is the previous version of the same branch.
    fn validate_lineage(&self, what: &str) -> Result<()> {
        for r in [&self.parent, &self.base, &self.merged].into_iter().flatten() {
            if paths::validate_ref_name(&r.branch).is_err() || r.version == 0 {
                return Err(Error::invalid(what, format!("bad version reference {}@{} [MAN-02]", r.branch, r.version)));
            }
        }
        let ok = match (&self.base, self.version) {
            (Some(b), v) => b.version == v && b.branch != self.branch,
            (None, 1) => self.parent.is_none(),
            (None, v) => self.parent.as_ref().is_some_and(|p| p.branch == self.branch && p.version == v - 1),
        };
        if ok {
            Ok(())
        } else {
            Err(Error::invalid(what, "parent/base do not fit the version's place in its branch [MAN-02]"))
        }
    }

    /// The manifest's own (branch, version).
    #[must_use]
    pub fn version_ref(&self) -> VersionRef {
        VersionRef { branch: self.branch.clone(), version: self.version }
    }
}

impl Segment {
    /// Checks a decoded segment against its reference `[VAL-07]`. The schema's columns are
    /// checked on the final fragment map instead ([`Fragment::check_columns`], `[SEG-06]`).
    ///
    /// # Errors
    /// `invalid` for the first broken rule.
    pub fn validate(&self, sref: &SegmentRef, next_fragment_id: u64, what: &str) -> Result<()> {
        if self.fragments.len() as u64 != sref.fragment_count {
            return Err(Error::invalid(what, "fragment count differs from the manifest's reference [SEG-02]"));
        }
        let ascending = |ids: &mut dyn Iterator<Item = u64>| {
            let v: Vec<u64> = ids.collect();
            v.windows(2).all(|w| w[0] < w[1]) && v.last().is_none_or(|&l| l < next_fragment_id)
        };
        if !ascending(&mut self.fragments.iter().map(|f| f.id)) || !ascending(&mut self.removed.iter().copied()) {
            return Err(Error::invalid(what, "fragment ids must ascend and stay below next_fragment_id [SEG-03]"));
        }
        if self.removed.iter().any(|id| self.fragments.binary_search_by_key(id, |f| f.id).is_ok()) {
            return Err(Error::invalid(what, "a fragment id is both removed and listed [SEG-03]"));
        }
        let mut rows = 0u64;
        for f in &self.fragments {
            let fw = format!("{what}: fragment {}", f.id);
            f.validate_entry(&fw)?;
            rows = rows.checked_add(f.row_count).ok_or_else(|| Error::invalid(&fw, "row counts overflow"))?;
        }
        if rows != sref.row_count {
            return Err(Error::invalid(what, "row count differs from the manifest's reference [SEG-02]"));
        }
        Ok(())
    }
}

impl Fragment {
    /// Checks one fragment entry of a segment or a leaf on its own: its row count, its paths,
    /// its files' column ids and its deletion reference (VAL-07 step 7, `[TREE-04]`).
    ///
    /// # Errors
    /// `limit` for a row count over LIM-10 or a path over LIM-12; `invalid` otherwise.
    pub fn validate_entry(&self, what: &str) -> Result<()> {
        Error::check_limit(|| format!("{what}: rows"), hard::MAX_FILE_ROWS, self.row_count)?;
        for file in &self.files {
            paths::validate_relative(&file.path, what)?;
            if file.column_ids.windows(2).any(|w| w[0] >= w[1]) {
                return Err(Error::invalid(what, "a file's column ids must ascend [SEG-05]"));
            }
        }
        if let Some(d) = &self.deletion {
            paths::validate_relative(&d.path, what)?;
            if d.deleted_count == 0 || d.deleted_count > self.row_count {
                return Err(Error::invalid(what, "deleted_count must be in 1..=row_count [DEL-02]"));
            }
        }
        Ok(())
    }

    /// Checks that every schema column is read from exactly one of the fragment's files
    /// `[SEG-06]`. Run on the fragments of the version (the map after the last segment), not
    /// on entries that a later segment replaced or removed.
    ///
    /// # Errors
    /// `invalid` naming the first column read from zero or several files.
    pub fn check_columns(&self, schema: &Schema) -> Result<()> {
        for c in &schema.columns {
            let n = self.files.iter().filter(|f| f.column_ids.contains(&c.id)).count();
            if n != 1 {
                return Err(Error::invalid(
                    format!("fragment {}", self.id),
                    format!("column {} is in {n} of the fragment's files, must be in one [SEG-06]", c.id),
                ));
            }
        }
        Ok(())
    }

    /// Rows not deleted.
    #[must_use]
    pub fn live_rows(&self) -> u64 {
        self.row_count - self.deletion.as_ref().map_or(0, |d| d.deleted_count.min(self.row_count))
    }
}
