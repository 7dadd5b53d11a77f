//! Sans-IO access to a validated data file: an index of one column chunk (which page holds a
//! row, where its bytes lie, its ragged sizes and validity), page decoding into a caller's
//! buffer, and the per-row element checks.
//!
//! This is the one implementation of the data-file body rules (`[DF-16]`, `[DF-17]`,
//! `[DF-19]`, `[LIM-09]`, `[MOD-06]`, `[DT-02]`, `[DT-05]`, `[VAL-12]`). The reference's own
//! [`DataFile::decode`] is built on it, and so are loaders that fill their batch buffers in
//! place: they do the I/O, these functions decide what the bytes mean.
//!
//! ```text
//! DataFile (footer validated) ──index_blocks()──► fetch validity + shapes blocks (caller)
//!          ──index_chunk(stored)──► ChunkIndex ──locate(row)──► (page, byte range in page)
//! fetch page (caller) ──decode_block_into(out)──► raw page bytes ──check_row──► values
//! ```

use std::ops::Range;

use super::{Block, DataFile, Page};
use crate::codec;
use crate::column::{full_shape, row_bytes};
use crate::dtype::DType;
use crate::envelope::le8;
use crate::error::{Error, Result};
use crate::schema::{Codec, Column, Dim};

/// One column chunk of a data file, indexed for random access to rows.
///
/// Built by [`DataFile::index_chunk`] from the chunk's validity and shapes blocks; building
/// it checks every rule those blocks and the page table must satisfy, so afterwards any row's
/// byte range lies inside its page's decoded bytes.
#[derive(Clone, Debug)]
pub struct ChunkIndex {
    dtype: DType,
    /// The column's shape: the row shape of an image page `[CMP-07]`.
    shape: Vec<Dim>,
    pages: Vec<Page>,
    /// First row of each page, then the row count (`pages.len() + 1` entries).
    page_first_row: Vec<u64>,
    /// Ragged columns: byte offset of each row within the chunk's decoded bytes (`rows + 1`).
    row_start: Option<Vec<u64>>,
    /// Fixed-shape columns: bytes per row.
    fixed_row_bytes: u64,
    /// Ragged sizes, `rows × ragged`.
    sizes: Vec<u64>,
    ragged: usize,
    /// The validity bitmap (bit `r % 8` of byte `r / 8`), when the column is nullable.
    validity: Option<Vec<u8>>,
}

impl ChunkIndex {
    /// Rows in the chunk.
    #[must_use]
    pub fn rows(&self) -> u64 {
        self.page_first_row.last().copied().unwrap_or(0)
    }

    /// The element type of the column.
    #[must_use]
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The chunk's pages, in row order.
    #[must_use]
    pub fn pages(&self) -> &[Page] {
        &self.pages
    }

    /// The rows of page `page`.
    ///
    /// # Panics
    /// If `page` is not a page of the chunk.
    #[must_use]
    pub fn page_rows(&self, page: usize) -> Range<u64> {
        self.page_first_row[page]..self.page_first_row[page + 1]
    }

    /// The page holding `row` (the last page for rows past the end).
    #[must_use]
    pub fn page_of(&self, row: u64) -> usize {
        self.page_first_row
            .partition_point(|&first| first <= row)
            .saturating_sub(1)
            .min(self.pages.len().saturating_sub(1))
    }

    fn raw_start(&self, row: u64) -> u64 {
        match &self.row_start {
            Some(starts) => starts.get(row as usize).copied().unwrap_or(u64::MAX),
            None => row * self.fixed_row_bytes,
        }
    }

    /// Row `row`'s page and its byte range within that page's decoded bytes.
    ///
    /// # Panics
    /// If `row` is not a row of the chunk.
    #[must_use]
    pub fn locate(&self, row: u64) -> (usize, Range<usize>) {
        assert!(row < self.rows(), "row {row} of a chunk of {} rows", self.rows());
        let page = self.page_of(row);
        let base = self.raw_start(self.page_first_row[page]);
        let (a, b) = (self.raw_start(row) - base, self.raw_start(row + 1) - base);
        (page, a as usize..b as usize)
    }

    /// Decoded bytes of row `row` (zero for rows outside the chunk).
    #[must_use]
    pub fn row_len(&self, row: u64) -> u64 {
        if row >= self.rows() {
            return 0;
        }
        self.raw_start(row + 1) - self.raw_start(row)
    }

    /// Row `row`'s ragged sizes (empty for fixed shapes or rows outside the chunk).
    #[must_use]
    pub fn sizes(&self, row: u64) -> &[u64] {
        let r = row as usize;
        self.sizes.get(r * self.ragged..(r + 1) * self.ragged).unwrap_or(&[])
    }

    /// Ragged sizes per row.
    #[must_use]
    pub fn ragged_dims(&self) -> usize {
        self.ragged
    }

    /// Whether `row` holds a value (always true for non-nullable columns).
    #[must_use]
    pub fn is_valid(&self, row: u64) -> bool {
        self.validity.as_ref().is_none_or(|bits| bits.get((row / 8) as usize).is_some_and(|b| b >> (row % 8) & 1 == 1))
    }

    /// Whether the column is nullable (the chunk has a validity block).
    #[must_use]
    pub fn is_nullable(&self) -> bool {
        self.validity.is_some()
    }

    /// Bytes this index occupies on the heap (what a cache of indexes should account).
    #[must_use]
    pub fn heap_bytes(&self) -> u64 {
        let words = self.page_first_row.len() + self.sizes.len() + self.row_start.as_ref().map_or(0, Vec::len);
        (8 * words + self.validity.as_ref().map_or(0, Vec::len) + self.pages.len() * size_of::<Page>()) as u64
    }

    /// Row `row`'s full shape (SHP-02): the column's shape with its ragged sizes filled in.
    #[must_use]
    pub fn row_shape(&self, row: u64) -> Vec<u64> {
        full_shape(self.dtype, &self.shape, self.sizes(row))
    }

    /// Verifies page `page`'s stored bytes (length; CRC-32 when `verify_crc`) and decodes them
    /// into `out`, exactly the page's `raw_len` bytes `[VAL-12]`. An image page `[CMP-06]` is
    /// checked against its row's shape before any pixel is decoded `[CMP-07]`; other pages go
    /// through [`decode_block_into`].
    ///
    /// # Errors
    /// As [`decode_block_into`]; for an image page, `invalid` for a file whose header differs
    /// from the row's shape and `malformed` for one that does not decode; `unsupported` when the
    /// crate was built without the `images` feature.
    ///
    /// # Panics
    /// If `page` is not a page of the chunk.
    pub fn decode_page_into(
        &self,
        page: usize,
        stored: &[u8],
        out: &mut [u8],
        verify_crc: bool,
        what: &dyn Fn() -> String,
    ) -> Result<()> {
        let block = &self.pages[page].block;
        if !block.codec.is_image() {
            return decode_block_into(block, stored, out, verify_crc, what);
        }
        verify_block(block, stored, verify_crc, what)?;
        if out.len() as u64 != block.raw_len {
            return Err(Error::usage(format!(
                "{}: output of {} bytes for a {}-byte page",
                what(),
                out.len(),
                block.raw_len
            )));
        }
        let row = self.page_first_row[page];
        decode_image(block.codec, stored, &self.row_shape(row), out, what)
    }

    /// Checks the decoded bytes of row `row` element by element: bool is 0 or 1 `[DT-02]`,
    /// utf8 is UTF-8 `[DT-05]`.
    ///
    /// # Errors
    /// `invalid` naming the row.
    pub fn check_row(&self, row: u64, bytes: &[u8], what: &dyn Fn() -> String) -> Result<()> {
        check_row_elements(self.dtype, bytes, &|| format!("{} row {row}", what()))
    }
}

/// Checks the decoded bytes of one row of a column of `dtype`: bool is 0 or 1 `[DT-02]`,
/// utf8 is UTF-8 `[DT-05]`; other types accept any bytes.
///
/// # Errors
/// `invalid`.
pub fn check_row_elements(dtype: DType, row: &[u8], what: &dyn Fn() -> String) -> Result<()> {
    match dtype {
        DType::Bool if row.iter().any(|&b| b > 1) => Err(Error::invalid(what(), "bool element not 0 or 1 [DT-02]")),
        DType::Utf8 if std::str::from_utf8(row).is_err() => Err(Error::invalid(what(), "not UTF-8 [DT-05]")),
        _ => Ok(()),
    }
}

/// Verifies a block's stored bytes (length always, CRC-32 when `verify_crc`) and decodes them
/// into `out`, which must be exactly the block's decoded length `[VAL-12]`.
///
/// Uncompressed blocks are copied; compressed ones are decompressed straight into `out`, so a
/// caller can decode a page into its final place (a batch slot) without another copy.
///
/// # Errors
/// `malformed` for a length, CRC or codec failure; `usage` for an `out` of the wrong length.
pub fn decode_block_into(
    block: &Block,
    stored: &[u8],
    out: &mut [u8],
    verify_crc: bool,
    what: &dyn Fn() -> String,
) -> Result<()> {
    verify_block(block, stored, verify_crc, what)?;
    if out.len() as u64 != block.raw_len {
        return Err(Error::usage(format!(
            "{}: output of {} bytes for a {}-byte block",
            what(),
            out.len(),
            block.raw_len
        )));
    }
    codec::decompress_into(block.codec, stored, out, what)
}

#[cfg(feature = "images")]
fn decode_image(codec: Codec, stored: &[u8], shape: &[u64], out: &mut [u8], what: &dyn Fn() -> String) -> Result<()> {
    crate::image_codec::decode_into(codec, stored, shape, out, what)
}

#[cfg(not(feature = "images"))]
fn decode_image(codec: Codec, _: &[u8], _: &[u64], _: &mut [u8], what: &dyn Fn() -> String) -> Result<()> {
    Err(Error::unsupported(what(), format!("{} pages need the `images` feature [FLG-08]", codec.name())))
}

/// Checks a block's stored bytes: their length always, their CRC-32 when `verify_crc`
/// `[VAL-12]`. An uncompressed block's stored bytes are then its decoded bytes.
///
/// # Errors
/// `malformed` for a length or CRC mismatch.
pub fn verify_block(block: &Block, stored: &[u8], verify_crc: bool, what: &dyn Fn() -> String) -> Result<()> {
    if stored.len() as u64 != block.stored_len {
        return Err(Error::malformed(what(), format!("read {} bytes, block has {}", stored.len(), block.stored_len)));
    }
    if verify_crc {
        let computed = crc32fast::hash(stored);
        if computed != block.crc32 {
            return Err(Error::Checksum { what: what(), stored: block.crc32, computed });
        }
    }
    Ok(())
}

impl DataFile {
    /// The blocks [`DataFile::index_chunk`] needs for `column`: its validity block, then its
    /// shapes block, each when present (none for a non-nullable fixed-shape column).
    ///
    /// # Errors
    /// `usage` if the file does not hold the column; any `[DF-14]`..`[DF-19]` fault of the
    /// chunk.
    pub fn index_blocks(&self, column: &Column) -> Result<Vec<Block>> {
        let chunk = self.checked_chunk(column)?;
        Ok(chunk.validity.iter().chain(chunk.shapes.iter()).copied().collect())
    }

    /// Indexes `column`'s chunk from the stored bytes of the blocks [`DataFile::index_blocks`]
    /// returned (same order), verifying their CRCs and every rule of the chunk's body that
    /// does not need its pages: zero validity padding `[DF-16]`, row sizes within the limits
    /// `[LIM-09]`, null rows without extent `[MOD-06]`, page lengths equal to their rows'
    /// bytes `[DF-19]`.
    ///
    /// # Errors
    /// The first failed check, with its class.
    pub fn index_chunk(&self, column: &Column, stored: &[&[u8]]) -> Result<ChunkIndex> {
        let chunk = self.checked_chunk(column)?;
        let what = || format!("{}: column {}", self.what, column.id);
        let rows = self.footer.row_count;
        let blocks: Vec<Block> = chunk.validity.iter().chain(chunk.shapes.iter()).copied().collect();
        if blocks.len() != stored.len() {
            return Err(Error::usage(format!("{}: index_chunk needs {} blocks", what(), blocks.len())));
        }
        let mut it = blocks.iter().zip(stored);
        let mut next = |label: &str| -> Result<Vec<u8>> {
            let (b, s) = it.next().ok_or_else(|| Error::usage("missing block"))?;
            let label = || format!("{} {label}", what());
            verify_block(b, s, true, &label)?;
            codec::decompress(b.codec, s, b.raw_len as usize, &label)
        };
        let validity = if chunk.validity.is_some() {
            let bits = next("validity")?;
            if !rows.is_multiple_of(8) && bits.last().is_some_and(|&last| last >> (rows % 8) != 0) {
                return Err(Error::invalid(what(), "validity padding bits are not zero [DF-16]"));
            }
            Some(bits)
        } else {
            None
        };
        let ragged = chunk.ragged_dims as usize;
        let sizes: Vec<u64> = if chunk.shapes.is_some() {
            next("shapes")?.chunks_exact(8).map(|c| u64::from_le_bytes(le8(c))).collect()
        } else {
            Vec::new()
        };
        let mut page_first_row = Vec::with_capacity(chunk.pages.len() + 1);
        let mut at = 0u64;
        for p in &chunk.pages {
            page_first_row.push(at);
            at += p.row_count; // cannot overflow: validated to sum to `rows` [DF-18]
        }
        page_first_row.push(at);
        let mut index = ChunkIndex {
            dtype: column.dtype,
            shape: column.shape.clone(),
            pages: chunk.pages.clone(),
            page_first_row,
            row_start: None,
            fixed_row_bytes: column.fixed_row_bytes().unwrap_or(0),
            sizes,
            ragged,
            validity,
        };
        if ragged > 0 {
            let mut starts = Vec::with_capacity(rows as usize + 1);
            let mut acc = 0u64;
            for r in 0..rows {
                starts.push(acc);
                let sz = index.sizes(r);
                let n = row_bytes(column.dtype, &column.shape, sz).ok_or_else(|| {
                    Error::limit(format!("{}: row {r} bytes", what()), self.limits.max_row_bytes(), u64::MAX)
                })?;
                Error::check_limit(|| format!("{}: row {r} bytes", what()), self.limits.max_row_bytes(), n)?;
                if !index.is_valid(r) && sz.iter().any(|&s| s != 0) {
                    return Err(Error::invalid(what(), format!("null row {r} has non-zero ragged sizes [MOD-06]")));
                }
                acc = acc.checked_add(n).ok_or_else(|| Error::invalid(what(), "row sizes overflow"))?;
            }
            starts.push(acc);
            index.row_start = Some(starts);
        }
        for (i, p) in index.pages.iter().enumerate() {
            let rows = index.page_rows(i);
            let need = index.raw_start(rows.end) - index.raw_start(rows.start);
            if need != p.block.raw_len {
                return Err(Error::invalid(
                    what(),
                    format!("page at {} holds {} bytes, its rows need {need} [DF-19]", p.block.offset, p.block.raw_len),
                ));
            }
        }
        Ok(index)
    }

    /// The chunk of `column`, checked against the column (a chunk the file was not opened for
    /// has not been validated yet, `[VAL-11]`).
    pub(super) fn checked_chunk(&self, column: &Column) -> Result<&super::ColumnChunk> {
        let chunk = self
            .chunk(column.id)
            .ok_or_else(|| Error::usage(format!("{}: column {} is not in this file", self.what, column.id)))?;
        self.validate_chunk(chunk, column, self.footer.row_count)?;
        Ok(chunk)
    }
}
