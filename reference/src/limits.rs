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
    pub const MAX_ROW_BYTES: u64 = 1 << 28;
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
    /// Row ids in one view stored as a list `[VIEW-03]` (8 bytes each: 128 MiB, within the
    /// view body limit).
    pub const MAX_VIEW_ROWS: u64 = 1 << 24;
    /// Rows in one view stored as runs `[VIEW-03]`: far past any dataset trained on today,
    /// and small enough that row counts and positions never near `u64` overflow.
    pub const MAX_VIEW_RUN_ROWS: u64 = 1 << 40;
    /// Level of a fragment tree's node `[LIM-17]`: 16 levels of nodes that each hold at least
    /// two entries would index 2^16 fragments at the very least, and every real tree is
    /// shallower than 5; the bound keeps a hostile chain of one-child nodes short.
    pub const MAX_TREE_LEVEL: u64 = 15;
}

/// Limits a reader enforces: each defaults to the hard maximum of its kind and may only be
/// lowered. This is the one place limits are clamped: the setters cap a value at the hard
/// maximum, so every `Limits` value holds limits within the format's.
///
/// Lower limits suit untrusted input, e.g. a fuzzer or a service opening user uploads.
///
/// ```
/// use tessera::Limits;
/// let l = Limits::default().with_max_footer(1 << 20).with_max_block_raw(u64::MAX);
/// assert_eq!(l.max_footer(), 1 << 20);
/// assert_eq!(l.max_block_raw(), tessera::limits::hard::MAX_BLOCK_RAW); // clamped
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    block_raw: u64,
    manifest_body: u64,
    segment_body: u64,
    tag_body: u64,
    footer: u64,
    row_bytes: u64,
    file_rows: u64,
    pages: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            block_raw: hard::MAX_BLOCK_RAW,
            manifest_body: hard::MAX_MANIFEST_BODY,
            segment_body: hard::MAX_SEGMENT_BODY,
            tag_body: hard::MAX_TAG_BODY,
            footer: hard::MAX_FOOTER,
            row_bytes: hard::MAX_ROW_BYTES,
            file_rows: hard::MAX_FILE_ROWS,
            pages: hard::MAX_PAGES,
        }
    }
}

macro_rules! limit {
    ($field:ident, $get:ident, $set:ident, $hard:path, $doc:literal) => {
        #[doc = concat!("Largest ", $doc, ".")]
        #[must_use]
        pub fn $get(&self) -> u64 {
            self.$field
        }

        #[doc = concat!("Sets the largest ", $doc, " (at most the hard maximum, `", stringify!($hard), "`).")]
        #[must_use]
        pub fn $set(mut self, value: u64) -> Self {
            self.$field = value.min($hard);
            self
        }
    };
}

impl Limits {
    limit!(
        block_raw,
        max_block_raw,
        with_max_block_raw,
        hard::MAX_BLOCK_RAW,
        "decompressed block, in bytes `[LIM-07]`"
    );
    limit!(
        manifest_body,
        max_manifest_body,
        with_max_manifest_body,
        hard::MAX_MANIFEST_BODY,
        "manifest body, in bytes `[LIM-05]`"
    );
    limit!(
        segment_body,
        max_segment_body,
        with_max_segment_body,
        hard::MAX_SEGMENT_BODY,
        "index segment or deletion vector body, in bytes `[LIM-05]`"
    );
    limit!(tag_body, max_tag_body, with_max_tag_body, hard::MAX_TAG_BODY, "tag record body, in bytes `[LIM-05]`");
    limit!(footer, max_footer, with_max_footer, hard::MAX_FOOTER, "data file footer, in bytes `[LIM-06]`");
    limit!(row_bytes, max_row_bytes, with_max_row_bytes, hard::MAX_ROW_BYTES, "row of one column, in bytes `[LIM-09]`");
    limit!(
        file_rows,
        max_file_rows,
        with_max_file_rows,
        hard::MAX_FILE_ROWS,
        "number of rows in one data file `[LIM-10]`"
    );
    limit!(pages, max_pages, with_max_pages, hard::MAX_PAGES, "number of pages in one column chunk `[LIM-11]`");

    /// Each limit the lower of `self`'s and `other`'s: what a writer holds its objects to, so
    /// that neither the dataset it writes through nor the one it returns refuses them `[LIM-15]`.
    #[must_use]
    pub fn tightest(&self, other: &Limits) -> Limits {
        Limits {
            block_raw: self.block_raw.min(other.block_raw),
            manifest_body: self.manifest_body.min(other.manifest_body),
            segment_body: self.segment_body.min(other.segment_body),
            tag_body: self.tag_body.min(other.tag_body),
            footer: self.footer.min(other.footer),
            row_bytes: self.row_bytes.min(other.row_bytes),
            file_rows: self.file_rows.min(other.file_rows),
            pages: self.pages.min(other.pages),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setters_clamp_to_the_hard_maxima_and_lower_freely() {
        let l = Limits::default()
            .with_max_block_raw(u64::MAX)
            .with_max_manifest_body(u64::MAX)
            .with_max_segment_body(u64::MAX)
            .with_max_tag_body(u64::MAX)
            .with_max_footer(u64::MAX)
            .with_max_row_bytes(u64::MAX)
            .with_max_file_rows(u64::MAX)
            .with_max_pages(u64::MAX);
        assert_eq!(l, Limits::default());
        let low = Limits::default().with_max_file_rows(3).with_max_pages(2).with_max_row_bytes(1);
        assert_eq!((low.max_file_rows(), low.max_pages(), low.max_row_bytes()), (3, 2, 1));
    }
}
