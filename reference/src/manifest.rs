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

/// Reader-required feature bits this implementation understands (none are defined in 1.0).
pub const KNOWN_READER_FLAGS: u64 = 0;
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
    /// Features a reader must understand; an unknown bit means "do not read" `[FLG-02]`.
    pub reader_flags: u64,
    /// Features a writer must understand; an unknown bit means "do not modify" `[FLG-03]`.
    pub writer_flags: u64,
    /// The branch this manifest belongs to.
    pub branch: String,
    /// The version number; equals the number in the object key.
    pub version: u64,
    /// The version this one was committed on top of.
    pub parent: Option<VersionRef>,
    /// For the first manifest of a branch: the version it was forked from.
    pub base: Option<VersionRef>,
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
    /// CRC-32 of the whole object (envelope included).
    pub crc32: u32,
    /// Fragments in the segment.
    pub fragment_count: u64,
    /// Rows in the segment.
    pub row_count: u64,
}

/// The body of an index segment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// Fragments in row order.
    pub fragments: Vec<Fragment>,
}

/// A contiguous run of rows, stored in one data file per column group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fragment {
    /// Unique id, ascending in row order.
    pub id: u64,
    /// Rows in the fragment (every file holds exactly this many).
    pub row_count: u64,
    /// The data files; column sets are disjoint and cover the schema.
    pub files: Vec<DataFileRef>,
    /// Per-column statistics within the fragment.
    pub stats: Vec<ColumnStats>,
}

/// A reference from a fragment to a data file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataFileRef {
    /// Relative path of the data file.
    pub path: String,
    /// Exact size in bytes.
    pub size: u64,
    /// CRC-32 of the file's footer (binds the reference to the content).
    pub footer_crc32: u32,
    /// The column ids the file holds, ascending.
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
    /// CRC-32 of the tagged manifest object (detects a rewritten manifest).
    pub manifest_crc32: u32,
    /// Creation time, ms since the Unix epoch.
    pub timestamp_ms: u64,
    /// Free text.
    pub message: String,
}

impl Manifest {
    /// Semantic checks of a decoded manifest read from `key_branch`/`key_version`
    /// `[VAL-04]`..`[VAL-07]`. Flags are checked first: an unknown feature may change what the
    /// other fields mean.
    ///
    /// # Errors
    /// `unsupported` for unknown reader flags; `invalid` or `limit` for the first broken rule.
    pub fn validate(&self, key_branch: &str, key_version: u64, what: &str) -> Result<()> {
        let unknown = self.reader_flags & !KNOWN_READER_FLAGS;
        if unknown != 0 {
            return Err(Error::unsupported(what, format!("unknown reader-required flags {unknown:#x} [FLG-02]")));
        }
        if self.branch != key_branch || self.version != key_version {
            return Err(Error::invalid(
                what,
                format!(
                    "manifest says {}@{}, its key says {key_branch}@{key_version} [MAN-02]",
                    self.branch, self.version
                ),
            ));
        }
        if self.version == 0 {
            return Err(Error::invalid(what, "version 0 does not exist [LAY-05]"));
        }
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
        if let Some(max) = self.schema.columns.iter().map(|c| c.id).max()
            && max >= self.next_column_id
        {
            return Err(Error::invalid(what, "next_column_id is not above every column id [MAN-04]"));
        }
        let mut rows = 0u64;
        for s in &self.segments {
            paths::validate_relative(&s.path, what)?;
            rows = rows.checked_add(s.row_count).ok_or_else(|| Error::invalid(what, "row counts overflow"))?;
        }
        if rows != self.row_count {
            return Err(Error::invalid(
                what,
                format!("segments hold {rows} rows, manifest says {} [MAN-05]", self.row_count),
            ));
        }
        Ok(())
    }

    /// The manifest's own (branch, version).
    #[must_use]
    pub fn version_ref(&self) -> VersionRef {
        VersionRef { branch: self.branch.clone(), version: self.version }
    }
}

impl Segment {
    /// Checks a decoded segment against its reference and the schema `[VAL-08]`; `min_id` is
    /// the smallest fragment id allowed (ids ascend across segments).
    ///
    /// # Errors
    /// `invalid` for the first broken rule.
    pub fn validate(
        &self,
        sref: &SegmentRef,
        schema: &Schema,
        next_fragment_id: u64,
        min_id: u64,
        what: &str,
    ) -> Result<u64> {
        if self.fragments.len() as u64 != sref.fragment_count {
            return Err(Error::invalid(what, "fragment count differs from the manifest's reference [SEG-02]"));
        }
        let mut rows = 0u64;
        let mut next_min = min_id;
        let mut want_ids: Vec<u32> = schema.columns.iter().map(|c| c.id).collect();
        want_ids.sort_unstable();
        for f in &self.fragments {
            let fw = format!("{what}: fragment {}", f.id);
            if f.id < next_min || f.id >= next_fragment_id {
                return Err(Error::invalid(&fw, "fragment ids must ascend and stay below next_fragment_id [SEG-03]"));
            }
            next_min = f.id + 1;
            rows = rows.checked_add(f.row_count).ok_or_else(|| Error::invalid(&fw, "row counts overflow"))?;
            let mut ids: Vec<u32> = Vec::new();
            for file in &f.files {
                paths::validate_relative(&file.path, &fw)?;
                if file.column_ids.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(Error::invalid(&fw, "a file's column ids must ascend [SEG-04]"));
                }
                ids.extend_from_slice(&file.column_ids);
            }
            ids.sort_unstable();
            if ids != want_ids {
                return Err(Error::invalid(
                    &fw,
                    format!("files hold columns {ids:?}, schema has {want_ids:?} [SEG-04]"),
                ));
            }
        }
        if rows != sref.row_count {
            return Err(Error::invalid(what, "row count differs from the manifest's reference [SEG-02]"));
        }
        Ok(next_min)
    }
}
