//! Validating and decoding a data file. Every check runs before the memory it guards is
//! allocated (SPEC.md §"Reader validation").

use std::ops::Range;

use super::{ALIGN, Block, ColumnChunk, END_MAGIC, Footer, HEADER_LEN, MAGIC, TRAILER_LEN};
use crate::codec;
use crate::column::{ColumnData, full_shape, row_bytes};
use crate::dtype::DType;
use crate::envelope::{self, MAJOR, le8};
use crate::error::{Error, Result};
use crate::limits::{Limits, hard};
use crate::schema::{Codec, Column};

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
    Error::check_limit(|| format!("{what}: footer length"), limits.clamped().max_footer, footer_len)?;
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
    what: String,
    tail: Tail,
    footer: Footer,
    limits: Limits,
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
        let f = Self { what: what.to_string(), tail, footer, limits: limits.clamped() };
        f.validate(expected_rows, columns)?;
        Ok(f)
    }

    fn validate(&self, expected_rows: u64, columns: &[&Column]) -> Result<()> {
        let what = &self.what;
        let rows = self.footer.row_count;
        Error::check_limit(|| format!("{what}: rows"), hard::MAX_FILE_ROWS, rows)?;
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

    fn validate_chunk(&self, chunk: &ColumnChunk, col: &Column, rows: u64) -> Result<()> {
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
        Error::check_limit(|| format!("{}: pages", what()), hard::MAX_PAGES, chunk.pages.len() as u64)?;
        let fixed = col.fixed_row_bytes();
        let mut total = 0u64;
        for (i, p) in chunk.pages.iter().enumerate() {
            self.check_block(&p.block, &|| format!("{} page {i}", what()))?;
            if p.row_count == 0 {
                return Err(Error::invalid(what(), format!("page {i} has no rows [DF-18]")));
            }
            total = total.checked_add(p.row_count).ok_or_else(|| Error::invalid(what(), "page row counts overflow"))?;
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
        codec::check_sizes(b.codec, b.stored_len, b.raw_len, self.limits.max_block_raw, what)
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
        let what = format!("{}: column {}", self.what, column.id);
        let chunk = self.chunk(column.id).ok_or_else(|| Error::usage(format!("{what}: not in this file")))?;
        // A chunk of a column the file was not opened for has not been validated yet
        // (VAL-11); check it against this column before trusting its page counts.
        self.validate_chunk(chunk, column, self.footer.row_count)?;
        let (blocks, first_page) = self.blocks_for(chunk, &rows);
        if blocks.len() != stored.len() || rows.end > self.footer.row_count || rows.start > rows.end {
            return Err(Error::usage(format!("{what}: decode called with the wrong blocks or rows")));
        }
        let n_rows = self.footer.row_count;
        let mut it = blocks.iter().zip(stored);
        let mut next = |label: &str| -> Result<Vec<u8>> {
            let (b, s) = it.next().ok_or_else(|| Error::usage("missing block"))?;
            Self::decode_block(b, s, &|| format!("{what} {label}"))
        };
        let validity = if chunk.validity.is_some() {
            let bits = next("validity")?;
            if !n_rows.is_multiple_of(8) && bits.last().is_some_and(|&last| last >> (n_rows % 8) != 0) {
                return Err(Error::invalid(&what, "validity padding bits are not zero [DF-16]"));
            }
            Some((0..n_rows).map(|i| bits[(i / 8) as usize] >> (i % 8) & 1 == 1).collect::<Vec<bool>>())
        } else {
            None
        };
        let ragged = chunk.ragged_dims as usize;
        let sizes_all: Vec<u64> = if chunk.shapes.is_some() {
            next("shapes")?.chunks_exact(8).map(|c| u64::from_le_bytes(le8(c))).collect()
        } else {
            Vec::new()
        };
        // Per-row byte sizes for every row of the file (needed to check page lengths).
        let row_len = |r: u64| -> Result<u64> {
            let sz = &sizes_all[(r as usize) * ragged..(r as usize + 1) * ragged];
            let n = row_bytes(column.dtype, &column.shape, sz)
                .ok_or_else(|| Error::limit(format!("{what}: row {r} bytes"), hard::MAX_ROW_BYTES, u64::MAX))?;
            Error::check_limit(|| format!("{what}: row {r} bytes"), hard::MAX_ROW_BYTES, n)?;
            if let Some(v) = &validity
                && !v[r as usize]
                && sz.iter().any(|&s| s != 0)
            {
                return Err(Error::invalid(&what, format!("null row {r} has non-zero ragged sizes [MOD-06]")));
            }
            Ok(n)
        };
        let mut values = Vec::new();
        let mut offsets = vec![0u64];
        let mut page_start: u64 = chunk.pages[..first_page].iter().map(|p| p.row_count).sum();
        for page in &chunk.pages[first_page..] {
            if page_start >= rows.end {
                break;
            }
            let page_end = page_start + page.row_count;
            let mut lens = Vec::with_capacity(page.row_count as usize);
            let mut sum = 0u64;
            for r in page_start..page_end {
                let n = row_len(r)?;
                sum = sum.checked_add(n).ok_or_else(|| Error::invalid(&what, "page size overflows"))?;
                lens.push(n);
            }
            if sum != page.block.raw_len {
                return Err(Error::invalid(
                    &what,
                    format!(
                        "page at {} holds {} bytes, its rows need {sum} [DF-19]",
                        page.block.offset, page.block.raw_len
                    ),
                ));
            }
            let raw = next("page")?;
            let mut at = 0usize;
            for (r, n) in (page_start..page_end).zip(lens) {
                let row = &raw[at..at + n as usize];
                at += n as usize;
                if r >= rows.start && r < rows.end {
                    check_elements(column.dtype, row, &what, r)?;
                    values.extend_from_slice(row);
                    offsets.push(values.len() as u64);
                }
            }
            page_start = page_end;
        }
        let (a, b) = (rows.start as usize, rows.end as usize);
        let sizes = if ragged > 0 { sizes_all[a * ragged..b * ragged].to_vec() } else { Vec::new() };
        let validity = validity.map(|v| v[a..b].to_vec());
        Ok(ColumnData::from_parts(column.dtype, column.shape.clone(), values, offsets, sizes, validity))
    }

    fn decode_block(b: &Block, stored: &[u8], what: &dyn Fn() -> String) -> Result<Vec<u8>> {
        if stored.len() as u64 != b.stored_len {
            return Err(Error::malformed(what(), format!("read {} bytes, block has {}", stored.len(), b.stored_len)));
        }
        let computed = crc32fast::hash(stored);
        if computed != b.crc32 {
            return Err(Error::Checksum { what: what(), stored: b.crc32, computed });
        }
        // Sizes were bounded in `check_block`; the allocation is at most `max_block_raw`.
        codec::decompress(b.codec, stored, b.raw_len as usize, what)
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

/// Element-level checks: bool is 0/1, utf8 is UTF-8 `[DT-02]` `[DT-05]`.
fn check_elements(dtype: DType, row: &[u8], what: &str, r: u64) -> Result<()> {
    match dtype {
        DType::Bool if row.iter().any(|&b| b > 1) => {
            Err(Error::invalid(what, format!("row {r}: bool element not 0 or 1 [DT-02]")))
        }
        DType::Utf8 if std::str::from_utf8(row).is_err() => {
            Err(Error::invalid(what, format!("row {r}: not UTF-8 [DT-05]")))
        }
        _ => Ok(()),
    }
}
