//! Validating and decoding a data file. Every check runs before the memory it guards is
//! allocated (SPEC.md §"Reader validation").

use std::ops::Range;

use super::{ALIGN, Block, ColumnChunk, END_MAGIC, Footer, HEADER_LEN, MAGIC, Page, TRAILER_LEN};
use crate::codec;
use crate::column::{ColumnData, full_shape};
use crate::envelope::{self, MAJOR, le8};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::schema::{Codec, Column, Compression};

/// What the trailer says about the footer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tail {
    /// Offset of the footer.
    pub footer_offset: u64,
    /// Length of the footer.
    pub footer_len: u64,
    /// CRC-32 of the footer bytes.
    pub footer_crc32: u32,
}

/// Parses the 24-byte trailer of a file of `file_size` bytes `[VAL-09]`.
///
/// # Errors
/// `malformed` for a short file, bad end magic, trailer CRC or footer placement; `limit` for
/// a footer above the limit.
pub fn parse_tail(trailer: &[u8], file_size: u64, limits: &Limits, what: &str) -> Result<Tail> {
    if file_size < ALIGN + TRAILER_LEN || trailer.len() != TRAILER_LEN as usize {
        return Err(Error::malformed(what, format!("{file_size} bytes is too short for a data file [DF-01]")));
    }
    if trailer[16..24] != END_MAGIC {
        return Err(Error::malformed(what, "bad trailer magic [DF-06]"));
    }
    let stored = u32::from_le_bytes([trailer[12], trailer[13], trailer[14], trailer[15]]);
    let computed = crc32fast::hash(&trailer[..12]);
    if stored != computed {
        return Err(Error::Checksum { what: format!("{what}: trailer"), stored, computed });
    }
    let footer_len = u64::from_le_bytes(le8(&trailer[..8]));
    Error::check_limit(|| format!("{what}: footer length"), limits.max_footer(), footer_len)?;
    let footer_offset = file_size
        .checked_sub(TRAILER_LEN)
        .and_then(|x| x.checked_sub(footer_len))
        .filter(|&o| o >= ALIGN && o % ALIGN == 0)
        .ok_or_else(|| Error::malformed(what, format!("footer length {footer_len} does not fit the file [DF-08]")))?;
    Ok(Tail {
        footer_offset,
        footer_len,
        footer_crc32: u32::from_le_bytes([trailer[8], trailer[9], trailer[10], trailer[11]]),
    })
}

/// Checks the 32-byte header `[VAL-09]`.
///
/// # Errors
/// `malformed` (magic, reserved bytes, CRC) or `unsupported` (major version).
pub fn check_header(header: &[u8], what: &str) -> Result<()> {
    if header.len() < HEADER_LEN as usize || header[..8] != MAGIC {
        return Err(Error::malformed(what, "bad data file magic [DF-02]"));
    }
    let major = u16::from_le_bytes([header[8], header[9]]);
    if major != MAJOR {
        return Err(Error::unsupported(what, format!("data file major version {major} [FLG-01]")));
    }
    if header[12..28].iter().any(|&b| b != 0) {
        return Err(Error::malformed(what, "reserved header bytes are not zero [DF-03]"));
    }
    let stored = u32::from_le_bytes([header[28], header[29], header[30], header[31]]);
    let computed = crc32fast::hash(&header[..28]);
    if stored != computed {
        return Err(Error::Checksum { what: format!("{what}: header"), stored, computed });
    }
    Ok(())
}

/// A data file whose footer has been validated against the schema: safe to decode from.
#[derive(Clone, Debug)]
pub struct DataFile {
    pub(super) what: String,
    tail: Tail,
    pub(super) footer: Footer,
    pub(super) limits: Limits,
}

impl DataFile {
    /// Validates the footer bytes (`footer_bytes` = exactly the footer) against the trailer,
    /// the manifest's expectations and the schema `[VAL-10]`..`[VAL-11]`.
    ///
    /// `columns[i]` is the schema column expected at position `i` of the footer (ascending id).
    ///
    /// # Errors
    /// The first check that fails, with its spec class.
    pub fn open(
        what: &str,
        tail: Tail,
        footer_bytes: &[u8],
        expected_footer_crc: u32,
        expected_rows: u64,
        columns: &[&Column],
        limits: &Limits,
    ) -> Result<Self> {
        let computed = crc32fast::hash(footer_bytes);
        if computed != tail.footer_crc32 {
            return Err(Error::Checksum { what: format!("{what}: footer"), stored: tail.footer_crc32, computed });
        }
        if computed != expected_footer_crc {
            return Err(Error::invalid(what, "footer CRC differs from the manifest's reference: wrong file [SEG-07]"));
        }
        let footer: Footer = envelope::decode_body(footer_bytes, &format!("{what}: footer"))?;
        let f = Self { what: what.to_string(), tail, footer, limits: limits.clone() };
        f.validate(expected_rows, columns)?;
        Ok(f)
    }

    fn validate(&self, expected_rows: u64, columns: &[&Column]) -> Result<()> {
        let what = &self.what;
        let rows = self.footer.row_count;
        Error::check_limit(|| format!("{what}: rows"), self.limits.max_file_rows(), rows)?;
        if rows != expected_rows {
            return Err(Error::invalid(what, format!("file has {rows} rows, fragment has {expected_rows} [DF-11]")));
        }
        if self.footer.columns.windows(2).any(|w| w[0].column_id >= w[1].column_id) {
            return Err(Error::invalid(what, "footer column ids must ascend [DF-12]"));
        }
        let mut all: Vec<Block> = Vec::new();
        for chunk in &self.footer.columns {
            for b in chunk.blocks() {
                self.check_block(b, &|| format!("{what}: column {}", chunk.column_id))?;
            }
            all.extend(chunk.blocks().copied());
        }
        for col in columns {
            let chunk = self.chunk(col.id).ok_or_else(|| {
                Error::invalid(what, format!("file lacks column {} that the fragment reads from it [DF-13]", col.id))
            })?;
            self.validate_chunk(chunk, col, rows)?;
        }
        all.sort_by_key(|b| b.offset);
        for w in all.windows(2) {
            if w[0].range().end > w[1].offset {
                return Err(Error::invalid(
                    what,
                    format!("blocks at {} and {} overlap [DF-24]", w[0].offset, w[1].offset),
                ));
            }
        }
        Ok(())
    }

    pub(super) fn validate_chunk(&self, chunk: &ColumnChunk, col: &Column, rows: u64) -> Result<()> {
        // Built only when a check fails: this runs for every chunk a decode reads.
        let what = || format!("{}: column {}", self.what, col.id);
        if chunk.dtype != col.dtype {
            return Err(Error::invalid(
                what(),
                format!("dtype {} differs from the schema's {} [DF-14]", chunk.dtype, col.dtype),
            ));
        }
        if chunk.ragged_dims as usize != col.ragged_dims() {
            return Err(Error::invalid(what(), "ragged_dims differs from the schema [DF-14]"));
        }
        if chunk.validity.is_some() != col.nullable || chunk.shapes.is_some() != (col.ragged_dims() > 0) {
            return Err(Error::invalid(what(), "validity/shapes block presence does not match the schema [DF-15]"));
        }
        if let Some(b) = &chunk.validity {
            self.check_block(b, &what)?;
            if b.codec != Codec::None || b.raw_len != rows.div_ceil(8) {
                return Err(Error::invalid(what(), "validity block must be uncompressed, ceil(rows/8) bytes [DF-16]"));
            }
        }
        if let Some(b) = &chunk.shapes {
            self.check_block(b, &what)?;
            let want = rows.checked_mul(8 * u64::from(chunk.ragged_dims));
            if b.codec != Codec::None || Some(b.raw_len) != want {
                return Err(Error::invalid(
                    what(),
                    "shapes block must be uncompressed, rows × ragged_dims × 8 bytes [DF-17]",
                ));
            }
        }
        Error::check_limit(|| format!("{}: pages", what()), self.limits.max_pages(), chunk.pages.len() as u64)?;
        let fixed = col.fixed_row_bytes();
        let mut total = 0u64;
        for (i, p) in chunk.pages.iter().enumerate() {
            self.check_block(&p.block, &|| format!("{} page {i}", what()))?;
            if p.row_count == 0 {
                return Err(Error::invalid(what(), format!("page {i} has no rows [DF-18]")));
            }
            total = total.checked_add(p.row_count).ok_or_else(|| Error::invalid(what(), "page row counts overflow"))?;
            if p.block.codec.is_image() && (col.compression != Compression::Encoded || p.row_count != 1) {
                return Err(Error::invalid(
                    what(),
                    format!(
                        "page {i} is a {} image: only one row of an encoded column can be [CMP-06]",
                        p.block.codec.name()
                    ),
                ));
            }
            if let Some(rb) = fixed
                && p.row_count.checked_mul(rb) != Some(p.block.raw_len)
            {
                return Err(Error::invalid(
                    what(),
                    format!("page {i} raw length {} != {} rows × {rb} bytes [DF-19]", p.block.raw_len, p.row_count),
                ));
            }
        }
        if total != rows {
            return Err(Error::invalid(what(), format!("pages hold {total} rows, file has {rows} [DF-18]")));
        }
        Ok(())
    }

    fn check_block(&self, b: &Block, what: &dyn Fn() -> String) -> Result<()> {
        let in_bounds = b.offset.is_multiple_of(ALIGN)
            && b.offset >= ALIGN
            && b.offset.checked_add(b.stored_len).is_some_and(|end| end <= self.tail.footer_offset);
        if !in_bounds {
            return Err(Error::invalid(
                what(),
                format!("block at {} (+{}) is misaligned or out of bounds [DF-21]", b.offset, b.stored_len),
            ));
        }
        codec::check_sizes(b.codec, b.stored_len, b.raw_len, self.limits.max_block_raw(), what)
    }

    /// The validated footer.
    #[must_use]
    pub fn footer(&self) -> &Footer {
        &self.footer
    }

    /// The trailer's facts.
    #[must_use]
    pub fn tail(&self) -> Tail {
        self.tail
    }

    /// Bytes this opened file holds on the heap (its parsed footer), what a cache of opened
    /// files charges for it.
    #[must_use]
    pub fn heap_bytes(&self) -> u64 {
        let chunks =
            self.footer.columns.iter().map(|c| c.pages.capacity() * std::mem::size_of::<Page>()).sum::<usize>()
                + self.footer.columns.capacity() * std::mem::size_of::<ColumnChunk>();
        (std::mem::size_of::<Self>() + self.what.capacity() + chunks) as u64
    }

    /// The chunk of a column id.
    #[must_use]
    pub fn chunk(&self, column_id: u32) -> Option<&ColumnChunk> {
        self.footer.columns.iter().find(|c| c.column_id == column_id)
    }

    /// The blocks needed to decode rows `rows` of a column: validity, shapes and the
    /// overlapping pages, with the index of the first page.
    #[must_use]
    pub fn blocks_for(&self, chunk: &ColumnChunk, rows: &Range<u64>) -> (Vec<Block>, usize) {
        let mut out: Vec<Block> = chunk.validity.iter().chain(chunk.shapes.iter()).copied().collect();
        let mut start = 0u64;
        let mut first = None;
        for (i, p) in chunk.pages.iter().enumerate() {
            let end = start + p.row_count;
            if end > rows.start && start < rows.end {
                first.get_or_insert(i);
                out.push(p.block);
            }
            start = end;
        }
        (out, first.unwrap_or(0))
    }

    /// Decodes rows `rows` of `column` from the stored bytes of the blocks
    /// [`DataFile::blocks_for`] returned (same order), verifying every CRC `[VAL-12]`.
    ///
    /// # Errors
    /// `malformed` for a CRC or codec failure, `invalid` for sizes that disagree, `limit` for
    /// a row above the maximum.
    pub fn decode(&self, column: &Column, rows: Range<u64>, stored: &[&[u8]]) -> Result<ColumnData> {
        let what = || format!("{}: column {}", self.what, column.id);
        let chunk = self.checked_chunk(column)?;
        let (blocks, first_page) = self.blocks_for(chunk, &rows);
        if blocks.len() != stored.len() || rows.end > self.footer.row_count || rows.start > rows.end {
            return Err(Error::usage(format!("{}: decode called with the wrong blocks or rows", what())));
        }
        let n_index = usize::from(chunk.validity.is_some()) + usize::from(chunk.shapes.is_some());
        let index = self.index_chunk(column, &stored[..n_index])?;
        let mut values = Vec::new();
        let mut offsets = vec![0u64];
        let mut raw = Vec::new();
        let mut kept = Vec::new();
        for (p, (block, bytes)) in (first_page..).zip(blocks[n_index..].iter().zip(&stored[n_index..])) {
            let page_rows = index.page_rows(p);
            raw.clear();
            // Sizes were bounded when the footer was validated: at most `max_block_raw`.
            raw.resize(block.raw_len as usize, 0);
            index.decode_page_into(p, bytes, &mut raw, true, &|| format!("{} page", what()))?;
            if block.codec.is_image() && rows.contains(&page_rows.start) {
                // Kept, so that a writer rewriting these rows stores the same file [CMP-09].
                kept.push(((page_rows.start - rows.start) as usize, block.codec, *bytes));
            }
            for r in page_rows.start.max(rows.start)..page_rows.end.min(rows.end) {
                let (_, range) = index.locate(r);
                let row = &raw[range];
                index.check_row(r, row, &what)?;
                values.extend_from_slice(row);
                offsets.push(values.len() as u64);
            }
        }
        let sizes = rows.clone().flat_map(|r| index.sizes(r).iter().copied()).collect();
        let validity = index.is_nullable().then(|| rows.map(|r| index.is_valid(r)).collect());
        let mut data = ColumnData::from_parts(column.dtype, column.shape.clone(), values, offsets, sizes, validity);
        for (i, codec, file) in kept {
            data.set_encoded(i, codec, file);
        }
        Ok(data)
    }

    /// Checks that every byte between header, blocks and footer is zero padding, given the
    /// whole file `[DF-05]`. Used by `verify`.
    ///
    /// # Errors
    /// `invalid` naming the first non-zero padding byte.
    pub fn check_padding(&self, file: &[u8]) -> Result<()> {
        let mut blocks: Vec<Range<u64>> =
            self.footer.columns.iter().flat_map(ColumnChunk::blocks).map(Block::range).collect();
        blocks.sort_by_key(|r| r.start);
        let mut at = HEADER_LEN;
        for r in blocks.iter().cloned().chain(std::iter::once(self.tail.footer_offset..self.tail.footer_offset)) {
            let gap = file.get(at as usize..r.start as usize).unwrap_or(&[]);
            if let Some(p) = gap.iter().position(|&b| b != 0) {
                return Err(Error::invalid(&self.what, format!("non-zero padding byte at {} [DF-05]", at + p as u64)));
            }
            at = at.max(r.end);
        }
        Ok(())
    }

    /// The row shape of `row` of a decoded buffer (convenience for dumps).
    #[must_use]
    pub fn row_shape(column: &Column, sizes: &[u64]) -> Vec<u64> {
        full_shape(column.dtype, &column.shape, sizes)
    }
}
