//! Data files (`.tsd`): all columns of a contiguous row range, columnar inside
//! (SPEC.md §"Data file").
//!
//! ```text
//! 0        32       64                                 footer_offset      size-24   size
//! | header | zeros  | block | pad | block | … | pad |  footer (bincode) |  trailer  |
//! ```
//! Every block starts on a 64-byte boundary, so uncompressed pages can be handed to tensor
//! libraries without copying. A reader fetches the trailer and footer with one suffix read,
//! then the blocks of the columns it projects, one contiguous range per column.

mod index;
mod read;
mod write;

pub use index::{ChunkIndex, check_row_elements, decode_block_into, verify_block};
pub use read::{DataFile, Tail, check_header, parse_tail};
pub use write::{DataFileWriter, EncodedFile};

use serde::{Deserialize, Serialize};

use crate::dtype::DType;
use crate::schema::Codec;

/// Magic at offset 0.
pub const MAGIC: [u8; 8] = [0x89, b'T', b'S', b'D', b'\r', b'\n', 0x1a, b'\n'];
/// Magic at the very end of the file.
pub const END_MAGIC: [u8; 8] = [0x89, b'T', b'S', b'D', b'E', b'N', b'D', b'\n'];
/// Bytes of the header.
pub const HEADER_LEN: u64 = 32;
/// Bytes of the trailer.
pub const TRAILER_LEN: u64 = 24;
/// Alignment of every block and of the footer.
pub const ALIGN: u64 = 64;
/// Default raw size a writer aims at for one page `[DF-20]`: the unit of verification and of
/// random access, so small enough that a verified random read of a large sample reads little
/// more than the sample.
pub const DEFAULT_PAGE_BYTES: u64 = 256 << 10;

/// The footer: what the file holds and where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Footer {
    /// Rows in this file (equal to the fragment's).
    pub row_count: u64,
    /// One chunk per column, ascending by column id.
    pub columns: Vec<ColumnChunk>,
}

/// The blocks of one column in a data file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnChunk {
    /// The column's id in the schema.
    pub column_id: u32,
    /// Must equal the schema's dtype.
    pub dtype: DType,
    /// Ragged sizes per row in the shapes block.
    pub ragged_dims: u32,
    /// Validity bitmap, present iff the column is nullable.
    pub validity: Option<Block>,
    /// Per-row ragged sizes (`u64` LE, row-major), present iff `ragged_dims > 0`.
    pub shapes: Option<Block>,
    /// Value pages in row order.
    pub pages: Vec<Page>,
}

/// A run of rows of one column, compressed as one block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    /// Rows in the page (> 0).
    pub row_count: u64,
    /// Where the page's bytes are.
    pub block: Block,
}

/// A byte range of the file with its codec and checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// Absolute offset, a multiple of 64.
    pub offset: u64,
    /// Bytes stored.
    pub stored_len: u64,
    /// Bytes after decoding.
    pub raw_len: u64,
    /// How the bytes are encoded.
    pub codec: Codec,
    /// CRC-32 of the stored bytes.
    pub crc32: u32,
}

impl Block {
    /// The stored byte range.
    #[must_use]
    pub fn range(&self) -> std::ops::Range<u64> {
        self.offset..self.offset.saturating_add(self.stored_len)
    }
}

impl ColumnChunk {
    /// The byte range covering all of this column's blocks (they are contiguous by
    /// construction; a reader only trusts this after validation).
    #[must_use]
    pub fn byte_range(&self) -> std::ops::Range<u64> {
        let mut blocks = self.blocks();
        let Some(first) = blocks.next() else { return 0..0 };
        let (mut lo, mut hi) = (first.offset, first.range().end);
        for b in blocks {
            lo = lo.min(b.offset);
            hi = hi.max(b.range().end);
        }
        lo..hi
    }

    /// Every block of the chunk: validity, shapes, then pages.
    pub fn blocks(&self) -> impl Iterator<Item = &Block> {
        self.validity.iter().chain(self.shapes.iter()).chain(self.pages.iter().map(|p| &p.block))
    }
}
