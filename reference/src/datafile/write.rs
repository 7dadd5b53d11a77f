//! Encoding a data file from column buffers.

use super::{ALIGN, Block, ColumnChunk, DEFAULT_PAGE_BYTES, END_MAGIC, Footer, HEADER_LEN, MAGIC, Page};
use crate::codec;
use crate::column::ColumnData;
use crate::envelope::{self, MAJOR, MINOR};
use crate::error::{Error, Result};
use crate::schema::{Codec, Column, Compression};

/// A finished data file.
#[derive(Clone, Debug)]
pub struct EncodedFile {
    /// The file's bytes.
    pub bytes: Vec<u8>,
    /// Its footer.
    pub footer: Footer,
    /// CRC-32 of the footer bytes, recorded in the manifest's data file reference.
    pub footer_crc32: u32,
}

/// Encodes one data file. Deterministic: the same input gives the same bytes `[DF-29]`.
#[derive(Clone, Debug)]
pub struct DataFileWriter {
    page_bytes: u64,
}

impl Default for DataFileWriter {
    fn default() -> Self {
        Self { page_bytes: DEFAULT_PAGE_BYTES }
    }
}

impl DataFileWriter {
    /// A writer aiming at `page_bytes` raw bytes per page (at least one row per page).
    #[must_use]
    pub fn with_page_bytes(page_bytes: u64) -> Self {
        Self { page_bytes: page_bytes.max(1) }
    }

    /// Encodes `data[i]` as the rows of `columns[i]`; columns are written in id order.
    ///
    /// # Errors
    /// `usage` if the buffers disagree with the columns or with each other in row count.
    pub fn encode(&self, columns: &[&Column], data: &[&ColumnData]) -> Result<EncodedFile> {
        if columns.len() != data.len() {
            return Err(Error::usage("one buffer per column is required"));
        }
        let rows = data.first().map_or(0, |d| d.len());
        let mut order: Vec<usize> = (0..columns.len()).collect();
        order.sort_by_key(|&i| columns[i].id);
        let mut out = Vec::with_capacity(data.iter().map(|d| d.values().len()).sum::<usize>() + 4096);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&MAJOR.to_le_bytes());
        out.extend_from_slice(&MINOR.to_le_bytes());
        out.extend_from_slice(&[0u8; 16]);
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(out.len() as u64, HEADER_LEN);
        let mut chunks = Vec::with_capacity(columns.len());
        for i in order {
            let (col, d) = (columns[i], data[i]);
            if d.len() != rows {
                return Err(Error::usage(format!("column {:?} has {} rows, expected {rows}", col.name, d.len())));
            }
            d.check_against(col)?;
            chunks.push(self.encode_column(&mut out, col, d)?);
        }
        pad(&mut out);
        let footer = Footer { row_count: rows as u64, columns: chunks };
        let body = envelope::encode_body(&footer)?;
        let footer_crc32 = crc32fast::hash(&body);
        out.extend_from_slice(&body);
        let mut trailer = Vec::with_capacity(24);
        trailer.extend_from_slice(&(body.len() as u64).to_le_bytes());
        trailer.extend_from_slice(&footer_crc32.to_le_bytes());
        let tcrc = crc32fast::hash(&trailer);
        trailer.extend_from_slice(&tcrc.to_le_bytes());
        trailer.extend_from_slice(&END_MAGIC);
        out.extend_from_slice(&trailer);
        Ok(EncodedFile { bytes: out, footer, footer_crc32 })
    }

    fn encode_column(&self, out: &mut Vec<u8>, col: &Column, d: &ColumnData) -> Result<ColumnChunk> {
        let rows = d.len();
        let validity = if col.nullable {
            let mut bits = vec![0u8; rows.div_ceil(8)];
            for i in (0..rows).filter(|&i| d.is_valid(i)) {
                bits[i / 8] |= 1 << (i % 8);
            }
            Some(put_block(out, Compression::None, &bits)?)
        } else {
            None
        };
        let shapes = if col.ragged_dims() > 0 {
            let raw: Vec<u8> = d.ragged_sizes().iter().flat_map(|s| s.to_le_bytes()).collect();
            Some(put_block(out, Compression::None, &raw)?)
        } else {
            None
        };
        let mut pages = Vec::new();
        let offsets = d.offsets();
        let encoded = |i: usize| if col.compression == Compression::Encoded { d.encoded(i) } else { None };
        let mut start = 0usize;
        while start < rows {
            if let Some((codec, file)) = encoded(start) {
                // An image page: the file as given, one row [CMP-06]; `push_encoded` checked it.
                pad(out);
                let raw_len = offsets[start + 1] - offsets[start];
                codec::check_sizes(codec, file.len() as u64, raw_len, crate::limits::hard::MAX_BLOCK_RAW, &|| {
                    format!("column {:?} row {start}", col.name)
                })?;
                let block = Block {
                    offset: out.len() as u64,
                    stored_len: file.len() as u64,
                    raw_len,
                    codec,
                    crc32: crc32fast::hash(file),
                };
                out.extend_from_slice(file);
                pages.push(Page { row_count: 1, block });
                start += 1;
                continue;
            }
            let mut end = start + 1;
            while end < rows && offsets[end + 1] - offsets[start] <= self.page_bytes && encoded(end).is_none() {
                end += 1;
            }
            let raw = &d.values()[offsets[start] as usize..offsets[end] as usize];
            let block = put_block(out, col.compression, raw)?;
            pages.push(Page { row_count: (end - start) as u64, block });
            start = end;
        }
        Ok(ColumnChunk {
            column_id: col.id,
            dtype: col.dtype,
            ragged_dims: col.ragged_dims() as u32,
            validity,
            shapes,
            pages,
        })
    }
}

/// Pads to the next 64-byte boundary with zeros `[DF-25]`.
fn pad(out: &mut Vec<u8>) {
    let n = (out.len() as u64).next_multiple_of(ALIGN) as usize;
    out.resize(n, 0);
}

fn put_block(out: &mut Vec<u8>, compression: Compression, raw: &[u8]) -> Result<Block> {
    pad(out);
    let mut stored = codec::compress(compression, raw)?;
    let mut codec = compression.codec();
    // A compressed block that does not shrink is stored raw: readers pay nothing to decode it.
    if codec != Codec::None && stored.len() >= raw.len() {
        stored = raw.to_vec();
        codec = Codec::None;
    }
    let block = Block {
        offset: out.len() as u64,
        stored_len: stored.len() as u64,
        raw_len: raw.len() as u64,
        codec,
        crc32: crc32fast::hash(&stored),
    };
    out.extend_from_slice(&stored);
    Ok(block)
}
