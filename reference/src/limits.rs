//! Hard maxima from SPEC.md §"Limits" and the configurable, lower limits a reader applies.

/// Hard maxima of format version 1. A value above one of these is an error of class `limit`
/// whatever the reader's configuration.
pub mod hard {
    /// Columns in a schema `[LIM-01]`.
    pub const MAX_COLUMNS: u64 = 4096;
    /// Dimensions of a column's shape `[LIM-02]`.
    pub const MAX_RANK: u64 = 8;
    /// Bytes in a column, branch or tag name `[LIM-03]`.
    pub const MAX_NAME_BYTES: u64 = 256;
    /// Key/value entries in one metadata list `[LIM-04]`.
    pub const MAX_METADATA_ENTRIES: u64 = 1024;
    /// Bytes in one metadata key or value, and in a commit message `[LIM-04]`.
    pub const MAX_METADATA_VALUE_BYTES: u64 = 64 * 1024;
    /// Body of a manifest `[LIM-05]`.
    pub const MAX_MANIFEST_BODY: u64 = 64 << 20;
    /// Body of an index segment `[LIM-05]`.
    pub const MAX_SEGMENT_BODY: u64 = 256 << 20;
    /// Body of a tag record `[LIM-05]`.
    pub const MAX_TAG_BODY: u64 = 64 << 10;
    /// A data file's footer `[LIM-06]`.
    pub const MAX_FOOTER: u64 = 64 << 20;
    /// Decompressed bytes of one block `[LIM-07]`.
    pub const MAX_BLOCK_RAW: u64 = 256 << 20;
    /// Ratio of decompressed to stored bytes of a compressed block `[LIM-08]`.
    pub const MAX_COMPRESSION_RATIO: u64 = 65536;
    /// Bytes of one row of one column `[LIM-09]`.
    pub const MAX_ROW_BYTES: u64 = 1 << 30;
    /// Rows in one data file `[LIM-10]`.
    /// (2^24: rows can be zero bytes wide, so the row count, not the file size, bounds the
    /// per-row bookkeeping a reader allocates.)
    pub const MAX_FILE_ROWS: u64 = 1 << 24;
    /// Pages in one column chunk `[LIM-11]`.
    pub const MAX_PAGES: u64 = 1 << 24;
    /// Bytes of a relative path `[LIM-12]`.
    pub const MAX_PATH_BYTES: u64 = 1024;
    /// Segments of a relative path `[LIM-12]`.
    pub const MAX_PATH_SEGMENTS: u64 = 8;
    /// Number of kinds' class names `[LIM-13]`.
    pub const MAX_CLASS_NAMES: u64 = 1 << 20;
}

/// Limits a reader enforces; each defaults to the hard maximum and may only be lowered
/// (a value above the hard maximum is clamped to it).
///
/// Lower limits suit untrusted input, e.g. a fuzzer or a service opening user uploads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest decompressed block, in bytes.
    pub max_block_raw: u64,
    /// Largest manifest body, in bytes.
    pub max_manifest_body: u64,
    /// Largest index segment body, in bytes.
    pub max_segment_body: u64,
    /// Largest data file footer, in bytes.
    pub max_footer: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_block_raw: hard::MAX_BLOCK_RAW,
            max_manifest_body: hard::MAX_MANIFEST_BODY,
            max_segment_body: hard::MAX_SEGMENT_BODY,
            max_footer: hard::MAX_FOOTER,
        }
    }
}

impl Limits {
    /// Returns the limits with every value clamped to its hard maximum.
    #[must_use]
    pub fn clamped(&self) -> Self {
        Self {
            max_block_raw: self.max_block_raw.min(hard::MAX_BLOCK_RAW),
            max_manifest_body: self.max_manifest_body.min(hard::MAX_MANIFEST_BODY),
            max_segment_body: self.max_segment_body.min(hard::MAX_SEGMENT_BODY),
            max_footer: self.max_footer.min(hard::MAX_FOOTER),
        }
    }
}
