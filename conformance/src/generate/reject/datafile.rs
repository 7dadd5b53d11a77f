//! Must-reject cases for data files: structure, footer, pages and blocks, and promoted fuzz
//! findings (SPEC.md §"Data file").

// Each function below is a flat list of case definitions, one `em.reject` call per case;
// splitting them would scatter related cases without making any of them clearer.
#![allow(clippy::too_many_lines)]

use std::path::Path;

use tessera::Dim::Fixed;
use tessera::datafile::{Block, Page};
use tessera::{Codec, Column, ColumnData, Compression, DType, Schema};

use super::base::{
    CAPTION, FEAT, FLAGS, ID, TOKENS, basic, edit_file, edit_file_raw, footer_variant, main_key, page0, raw_of,
    restore_block,
};
use crate::crc32::crc32;
use crate::generate::data::{batch, create};
use crate::generate::emit::{Emitter, Spec};
use crate::generate::mutate::{Ds, FileLoc, RefUpdate, block_bytes, chunk, fix_header_crc, reseal_block, trailer};
use crate::generate::options::Clock;
use crate::generate::prng::Prng;
use crate::generate::{GenError, Result, bail};

/// Two identical u8 [8] columns `a` and `b` (4 rows, uncompressed), so two pages hold the
/// same bytes. `seed` picks the values.
fn twins(input: &Path, seed: u64) -> Result<()> {
    let schema = Schema::new([Column::new("a", DType::U8, &[Fixed(8)]), Column::new("b", DType::U8, &[Fixed(8)])])?;
    let values = Prng::new(seed).bytes(32);
    let col = ColumnData::from_fixed(&[8], &values)?;
    let mut clock = Clock::new();
    let ds = create(input, schema, &mut clock)?;
    ds.append(&batch(vec![("a", col.clone()), ("b", col)])?, "twins", clock.tick())?;
    Ok(())
}

pub(super) fn datafiles(em: &mut Emitter) -> Result<()> {
    em.reject(
        Spec::new(
            "n-datafile-0001-truncated",
            &["DF-06", "VAL-09"],
            "the data file is cut in half; its reference records the short size",
        ),
        "malformed",
        "bad trailer magic",
        |input| {
            basic(input)?;
            edit_file_raw(input, RefUpdate::Locate, |b| b.truncate(b.len() / 2))
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0002-truncated-size-differs-from-ref",
            &["SEG-07"],
            "the data file lacks its last byte; its reference still records the full size",
        ),
        "invalid",
        "manifest says",
        |input| {
            basic(input)?;
            edit_file_raw(input, RefUpdate::Keep, |b| {
                b.pop();
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0003-shorter-than-header",
            &["DF-01", "DF-02", "VAL-09"],
            "the data file is 16 bytes long; its reference records that size",
        ),
        "malformed",
        "bad data file magic",
        |input| {
            basic(input)?;
            edit_file_raw(input, RefUpdate::Locate, |b| b.truncate(16))
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0004-bad-header-magic",
            &["DF-02"],
            "the data file starts \\x89TXD (header CRC re-sealed)",
        ),
        "malformed",
        "bad data file magic",
        |input| {
            basic(input)?;
            edit_file_raw(input, RefUpdate::Locate, |b| {
                b[2] = b'X';
                fix_header_crc(b);
            })
        },
    )?;
    em.reject(
        Spec::new("n-datafile-0005-bad-header-crc", &["DF-04"], "one bit of the data file's header CRC is flipped"),
        "malformed",
        "header: CRC-32 mismatch",
        |input| {
            basic(input)?;
            edit_file_raw(input, RefUpdate::Locate, |b| b[29] ^= 0x02)
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0006-header-reserved-nonzero",
            &["DF-03", "FLG-05", "VAL-09"],
            "a reserved byte of the data file header is 1 (header CRC re-sealed)",
        ),
        "malformed",
        "reserved header bytes",
        |input| {
            basic(input)?;
            edit_file_raw(input, RefUpdate::Locate, |b| {
                b[20] = 1;
                fix_header_crc(b);
            })
        },
    )?;
    em.reject(
        Spec::new("n-datafile-0007-bad-trailer-magic", &["DF-06"], "the data file's last byte is not \\n"),
        "malformed",
        "bad trailer magic",
        |input| {
            basic(input)?;
            edit_file_raw(input, RefUpdate::Locate, |b| {
                if let Some(x) = b.last_mut() {
                    *x = b'!';
                }
            })
        },
    )?;
    em.reject(
        Spec::new("n-datafile-0008-bad-trailer-crc", &["DF-07"], "one bit of the data file's trailer CRC is flipped"),
        "malformed",
        "trailer: CRC-32 mismatch",
        |input| {
            basic(input)?;
            edit_file_raw(input, RefUpdate::Locate, |b| {
                let t = b.len() - 24;
                b[t + 12] ^= 0x80;
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0009-bad-footer-crc",
            &["DF-10"],
            "one byte of the footer is changed; the trailer and the reference keep the original footer CRC",
        ),
        "malformed",
        "footer: CRC-32 mismatch",
        |input| {
            basic(input)?;
            edit_file_raw(input, RefUpdate::Locate, |b| {
                let at = Ds::split_data_file(b).map_or(0, |(prefix, _, _)| prefix.len());
                b[at + 1] ^= 0x01;
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0010-footer-crc-differs-from-ref",
            &["SEG-07"],
            "the data file was swapped for another valid file of the same size and columns; its footer CRC \
             differs from the one the fragment's reference records",
        ),
        "invalid",
        "footer CRC differs from the manifest's reference",
        |input| {
            twins(input, 1)?;
            let other = input.with_extension("swap");
            twins(&other, 2)?;
            let (a, b) = (Ds::new(input), Ds::new(&other));
            let (ma, mb) = (a.main()?, b.main()?);
            let fa = a.file_ref(&ma, FileLoc::default())?;
            let bytes = b.read(&b.file_ref(&mb, FileLoc::default())?.path)?;
            std::fs::remove_dir_all(&other)?;
            if bytes.len() as u64 != fa.size {
                bail!("the swapped files differ in size");
            }
            a.write(&fa.path, &bytes)
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0011-footer-len-does-not-fit",
            &["DF-08"],
            "the trailer's footer_len is the whole file size, so the footer would start before the file \
             (trailer CRC re-sealed)",
        ),
        "malformed",
        "does not fit the file",
        |input| {
            basic(input)?;
            edit_file_raw(input, RefUpdate::Locate, |b| {
                let t = b.len() - 24;
                let crc = u32::from_le_bytes([b[t + 8], b[t + 9], b[t + 10], b[t + 11]]);
                let new = trailer(b.len() as u64, crc);
                b[t..].copy_from_slice(&new);
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0012-footer-trailing-byte",
            &["ENC-03", "DF-09"],
            "the footer has one byte after the encoded struct (footer_len, CRCs and reference agree)",
        ),
        "malformed",
        "trailing bytes",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_footer_bytes(&m, FileLoc::default(), |_, fb| {
                fb.push(0);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0013-footer-unknown-dtype-code",
            &["ENC-02", "DT-01"],
            "a footer column chunk has dtype variant index 15, which no dtype has (footer CRC, trailer and \
             reference re-sealed)",
        ),
        "malformed",
        "does not decode",
        |input| {
            footer_variant(
                input,
                |f| {
                    chunk(f, ID)?.dtype = DType::U8;
                    Ok(())
                },
                15,
            )
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0014-footer-dtype-differs-from-schema",
            &["DF-14"],
            "the footer says column 0 is u64; the schema says i64",
        ),
        "invalid",
        "differs from the schema's",
        |input| {
            basic(input)?;
            edit_file(input, |_, f| {
                chunk(f, ID)?.dtype = DType::U64;
                Ok(())
            })
        },
    )?;
    let crc_cases: [(&str, &str, &str, u32, &str); 3] = [
        ("n-datafile-0015-block-crc-value-page", "a value page", "column 0 page: CRC-32 mismatch", ID, "page"),
        (
            "n-datafile-0016-block-crc-shapes-block",
            "a shapes block",
            "column 2 shapes: CRC-32 mismatch",
            TOKENS,
            "shapes",
        ),
        (
            "n-datafile-0017-block-crc-validity-block",
            "a validity block",
            "column 3 validity: CRC-32 mismatch",
            CAPTION,
            "validity",
        ),
    ];
    for (id, what, hint, column, block) in crc_cases {
        let description = format!("one bit of {what} is flipped; the footer keeps the block's original CRC");
        em.reject(Spec::new(id, &["DF-26"], &description), "malformed", hint, |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            let footer = Ds::split_data_file(&ds.read(&ds.file_ref(&m, FileLoc::default())?.path)?)?.1;
            let c = footer.columns.iter().find(|c| c.column_id == column).cloned();
            let b = match (c, block) {
                (Some(c), "page") => c.pages.first().map(|p| p.block),
                (Some(c), "shapes") => c.shapes,
                (Some(c), _) => c.validity,
                (None, _) => None,
            };
            let Some(b) = b else { bail!("no {block} block in column {column}") };
            edit_file_raw(input, RefUpdate::Locate, |bytes| bytes[b.offset as usize] ^= 0x02)
        })?;
    }
    em.reject(
        Spec::new(
            "n-datafile-0018-block-out-of-bounds",
            &["DF-21"],
            "a page block starts at the footer's offset, so it runs into the footer",
        ),
        "invalid",
        "misaligned or out of bounds",
        |input| {
            basic(input)?;
            edit_file(input, |p, f| {
                page0(f, FEAT)?.offset = p.len() as u64;
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0019-block-end-overflows",
            &["DF-21", "GEN-05"],
            "a page block's offset is the largest multiple of 64 below 2^64, so offset + stored_len overflows",
        ),
        "invalid",
        "misaligned or out of bounds",
        |input| {
            basic(input)?;
            edit_file(input, |_, f| {
                page0(f, FEAT)?.offset = u64::MAX / 64 * 64;
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0020-blocks-overlap",
            &["DF-24"],
            "two columns' pages point at the same bytes (the columns hold equal values, so both CRCs match); the \
             second page's old bytes are zeroed",
        ),
        "invalid",
        "overlap",
        |input| {
            twins(input, 3)?;
            let ds = Ds::new(input);
            ds.edit_data_file(&ds.main()?, FileLoc::default(), |p, f| {
                let a = *page0(f, 0)?;
                let b = page0(f, 1)?;
                block_bytes(p, b).fill(0);
                *b = a;
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0021-block-misaligned",
            &["DF-21"],
            "a page's bytes and offset are moved 8 bytes forward, off the 64-byte grid (its CRC still matches)",
        ),
        "invalid",
        "misaligned or out of bounds",
        |input| {
            basic(input)?;
            edit_file(input, |p, f| {
                let b = page0(f, ID)?;
                let (o, n) = (b.offset as usize, b.stored_len as usize);
                if n + 8 > 64 {
                    bail!("no room to move the page");
                }
                p.copy_within(o..o + n, o + 8);
                p[o..o + 8].fill(0);
                b.offset += 8;
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0022-fixed-page-raw-len-mismatch",
            &["DF-19"],
            "the i64 page of 6 rows declares 40 raw (and stored) bytes instead of 48 (CRC re-sealed over the 40)",
        ),
        "invalid",
        "raw length 40 != 6 rows × 8 bytes",
        |input| {
            basic(input)?;
            edit_file(input, |p, f| {
                let b = page0(f, ID)?;
                b.stored_len = 40;
                b.raw_len = 40;
                reseal_block(p, b);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0023-ragged-shapes-disagree-with-page",
            &["DF-19"],
            "the shapes block gives row 0 of an i32 [?] column one more element than the page holds (shapes CRC \
             re-sealed)",
        ),
        "invalid",
        "its rows need",
        |input| {
            basic(input)?;
            edit_file(input, |p, f| {
                let s = chunk(f, TOKENS)?.shapes.as_mut().ok_or_else(|| GenError("no shapes".into()))?;
                let bytes = block_bytes(p, s);
                let n = u64::from_le_bytes(bytes[..8].try_into().unwrap_or_default()) + 1;
                bytes[..8].copy_from_slice(&n.to_le_bytes());
                reseal_block(p, s);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0024-page-rows-not-summing",
            &["DF-18"],
            "the only page of a ragged column says 5 rows; the file has 6",
        ),
        "invalid",
        "pages hold 5 rows, file has 6",
        |input| {
            basic(input)?;
            edit_file(input, |_, f| {
                chunk(f, TOKENS)?.pages[0].row_count = 5;
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0025-page-with-zero-rows",
            &["DF-18"],
            "a column has an extra page of 0 rows (an empty block at offset 64)",
        ),
        "invalid",
        "has no rows",
        |input| {
            basic(input)?;
            edit_file(input, |_, f| {
                let empty = Block { offset: 64, stored_len: 0, raw_len: 0, codec: Codec::None, crc32: crc32(&[]) };
                chunk(f, TOKENS)?.pages.push(Page { row_count: 0, block: empty });
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0026-utf8-invalid",
            &["DT-05"],
            "the first byte of a utf8 row is 0xFF (page CRC re-sealed)",
        ),
        "invalid",
        "not UTF-8",
        |input| {
            basic(input)?;
            edit_file(input, |p, f| {
                let b = page0(f, CAPTION)?;
                block_bytes(p, b)[0] = 0xFF;
                reseal_block(p, b);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new("n-datafile-0027-bool-element-2", &["DT-02"], "a bool element is the byte 2 (page CRC re-sealed)"),
        "invalid",
        "bool element not 0 or 1",
        |input| {
            basic(input)?;
            edit_file(input, |p, f| {
                let b = page0(f, FLAGS)?;
                block_bytes(p, b)[1] = 2;
                reseal_block(p, b);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0028-validity-wrong-length",
            &["DF-16"],
            "the validity block of a 6-row column is 2 bytes long instead of 1 (CRC re-sealed)",
        ),
        "invalid",
        "ceil(rows/8) bytes",
        |input| {
            basic(input)?;
            edit_file(input, |p, f| {
                let b = chunk(f, CAPTION)?.validity.as_mut().ok_or_else(|| GenError("no validity".into()))?;
                b.stored_len = 2;
                b.raw_len = 2;
                reseal_block(p, b);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0029-validity-padding-bits",
            &["DF-16"],
            "the validity bitmap of a 6-row column sets bit 7, past the last row (CRC re-sealed)",
        ),
        "invalid",
        "padding bits",
        |input| {
            basic(input)?;
            edit_file(input, |p, f| {
                let b = chunk(f, CAPTION)?.validity.as_mut().ok_or_else(|| GenError("no validity".into()))?;
                block_bytes(p, b)[0] |= 0x80;
                reseal_block(p, b);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0030-validity-block-missing",
            &["DF-15"],
            "the footer has no validity block for a nullable column",
        ),
        "invalid",
        "presence does not match",
        |input| {
            basic(input)?;
            edit_file(input, |p, f| {
                let c = chunk(f, CAPTION)?;
                if let Some(b) = c.validity.take() {
                    block_bytes(p, &b).fill(0);
                }
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0031-shapes-block-wrong-length",
            &["DF-17"],
            "the shapes block of a 6-row, one-ragged-dim column is 40 bytes instead of 48 (CRC re-sealed)",
        ),
        "invalid",
        "rows × ragged_dims × 8 bytes",
        |input| {
            basic(input)?;
            edit_file(input, |p, f| {
                let b = chunk(f, TOKENS)?.shapes.as_mut().ok_or_else(|| GenError("no shapes".into()))?;
                b.stored_len = 40;
                b.raw_len = 40;
                reseal_block(p, b);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0032-shapes-block-compressed",
            &["DF-17"],
            "the shapes block is stored LZ4-compressed (a correct LZ4 stream of the right sizes, CRC re-sealed)",
        ),
        "invalid",
        "shapes block must be uncompressed",
        |input| {
            basic(input)?;
            edit_file(input, |p, f| {
                let footer = f.clone();
                let b = chunk(f, TOKENS)?.shapes.as_mut().ok_or_else(|| GenError("no shapes".into()))?;
                let raw = raw_of(p, b)?;
                let stored = tessera::codec::compress(Compression::Lz4, &raw)?;
                restore_block(p, &footer, b, &stored)?;
                b.codec = Codec::Lz4;
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0033-file-lacks-column",
            &["DF-13"],
            "the footer has no chunk for column 4, which the fragment reads from this file (its page is zeroed)",
        ),
        "invalid",
        "file lacks column 4",
        |input| {
            basic(input)?;
            edit_file(input, |p, f| {
                let c = chunk(f, FEAT)?.clone();
                for b in c.blocks() {
                    block_bytes(p, b).fill(0);
                }
                f.columns.retain(|c| c.column_id != FEAT);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0034-footer-columns-not-ascending",
            &["DF-12"],
            "the footer lists the chunk of column 1 before that of column 0",
        ),
        "invalid",
        "footer column ids must ascend",
        |input| {
            basic(input)?;
            edit_file(input, |_, f| {
                f.columns.swap(0, 1);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0035-ragged-dims-differs",
            &["DF-14"],
            "the footer says an i32 [?] column has 2 ragged dims",
        ),
        "invalid",
        "ragged_dims differs",
        |input| {
            basic(input)?;
            edit_file(input, |_, f| {
                chunk(f, TOKENS)?.ragged_dims = 2;
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0036-file-rows-differ-from-fragment",
            &["DF-11"],
            "the footer says 7 rows; the fragment has 6",
        ),
        "invalid",
        "file has 7 rows, fragment has 6",
        |input| {
            basic(input)?;
            edit_file(input, |_, f| {
                f.row_count = 7;
                Ok(())
            })
        },
    )?;
    // Promoted fuzz findings (fuzz/README.md).
    em.reject(
        Spec::new(
            "n-datafile-0038-zero-width-page-declares-2pow32-rows",
            &["DF-18", "SEC-03"],
            "the one page of a u8 [0] column (an empty block) declares 2^32 rows; the file has 3. Rows of zero \
             bytes make every size check pass, so a reader that sizes anything by the page's row count before \
             checking the sum allocates for 2^32 rows",
        )
        .found_by("TFZ-2"),
        "invalid",
        "pages hold 4294967296 rows, file has 3",
        |input| {
            zero_width(input)?;
            let ds = Ds::new(input);
            ds.edit_data_file(&ds.main()?, FileLoc::default(), |_, f| {
                chunk(f, 0)?.pages[0].row_count = 1 << 32;
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0039-second-ref-to-one-file-reads-other-dtype",
            &["DF-14", "SEG-07"],
            "the fragment reads its one data file through two references: the first for every column but \
             column 4 (f32 [4]), the second for column 4 alone, whose chunk the footer says is u32. A reader that \
             validates a file once per path, for the columns of the first reference, would return the u32 \
             bytes as f32 values",
        )
        .found_by("TFZ-5"),
        "invalid",
        "dtype u32 differs from the schema's f32",
        |input| {
            basic(input)?;
            edit_file(input, |_, f| {
                chunk(f, FEAT)?.dtype = DType::U32;
                Ok(())
            })?;
            let (ds, m) = main_key(input)?;
            ds.edit_segment(&m, 0, |s| {
                let files = &mut s.fragments[0].files;
                let mut second = files[0].clone();
                files[0].column_ids.retain(|&c| c != FEAT);
                second.column_ids = vec![FEAT];
                files.push(second);
            })
        },
    )?;
    Ok(())
}

/// Reading a version checks every page and row of a fragment with a live row, deleted rows
/// included `[VAL-16]`; faults whose order §16 leaves open may be reported either way `[VAL-17]`.
pub(super) fn reading(em: &mut Emitter) -> Result<()> {
    em.reject(
        Spec::new(
            "n-datafile-0040-bool-2-in-deleted-row",
            &["VAL-16", "DT-02", "VAL-12"],
            "row 5 of the basic dataset is deleted, and its bool element is the byte 2 (page CRC re-sealed): a \
             deleted row's values are checked too",
        ),
        "invalid",
        "bool element not 0 or 1",
        |input| {
            let (v2, mut clock) = basic(input)?;
            v2.delete_rows(&[5], "delete the last row", &clock.tick())?;
            edit_file(input, |p, f| {
                let b = page0(f, FLAGS)?;
                block_bytes(p, b)[11] = 2;
                reseal_block(p, b);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-datafile-0041-crc-of-page-of-deleted-rows",
            &["VAL-16", "DF-26"],
            "an i64 column in 3 pages of 2 rows; rows 4 and 5, the whole last page, are deleted, and that page's \
             stored bytes no longer match its CRC: a page holding only deleted rows is checked too",
        ),
        "malformed",
        "CRC",
        |input| {
            let schema = Schema::new([Column::new("v", DType::I64, &[])])?;
            let mut clock = Clock::new();
            let ds = create(input, schema, &mut clock)?;
            let opts = tessera::WriteOptions { page_bytes: 16, ..clock.tick() };
            let v2 =
                ds.append(&batch(vec![("v", ColumnData::from_scalars(&[1i64, 2, 3, 4, 5, 6]))])?, "six rows", opts)?;
            v2.delete_rows(&[4, 5], "delete the last page's rows", &clock.tick())?;
            let (d, m) = main_key(input)?;
            d.edit_data_file(&m, FileLoc::default(), |p, f| {
                let pages = &chunk(f, 0)?.pages;
                if pages.len() != 3 {
                    bail!("expected 3 pages, got {}", pages.len());
                }
                let b = pages[2].block;
                block_bytes(p, &b)[0] ^= 0x40;
                Ok(())
            })
        },
    )?;
    em.reject_multi(
        Spec::new(
            "n-datafile-0042-multi-deletion-vector-and-page",
            &["VAL-17", "VAL-16", "VAL-15", "DF-26"],
            "two faults in one fragment, whose order VAL-17 leaves open: row 0 is deleted and the deletion vector \
             object is absent (invalid), and the id column's page no longer matches its CRC (malformed)",
        ),
        &["invalid", "malformed"],
        "does not exist",
        |input| {
            let (v2, mut clock) = basic(input)?;
            v2.delete_rows(&[0], "delete the first row", &clock.tick())?;
            let (d, m) = main_key(input)?;
            let dref = d.deletion_ref(&m, 0)?;
            d.remove(&dref.path)?;
            edit_file(input, |p, f| {
                let b = page0(f, ID)?;
                block_bytes(p, b)[0] ^= 0x01;
                Ok(())
            })
        },
    )?;
    em.reject_multi(
        Spec::new(
            "n-datafile-0043-multi-two-columns",
            &["VAL-17", "DT-02", "DF-26"],
            "two faults in two columns of one data file, whose order VAL-17 leaves open: a bool element of `flags` \
             is the byte 2 (page CRC re-sealed, invalid), and the page of `feat` no longer matches its CRC \
             (malformed)",
        ),
        &["invalid", "malformed"],
        "bool element not 0 or 1",
        |input| {
            basic(input)?;
            edit_file(input, |p, f| {
                let b = page0(f, FLAGS)?;
                block_bytes(p, b)[1] = 2;
                reseal_block(p, b);
                let b = page0(f, FEAT)?;
                block_bytes(p, b)[0] ^= 0x01;
                Ok(())
            })
        },
    )?;
    em.reject_multi(
        Spec::new(
            "n-datafile-0044-multi-two-fragments",
            &["VAL-17", "DF-26", "VAL-15"],
            "two faults in two fragments, whose order VAL-17 leaves open: fragment 0's page no longer matches its \
             CRC (malformed), and fragment 1's data file does not exist (invalid)",
        ),
        &["invalid", "malformed"],
        "CRC",
        |input| {
            let schema = Schema::new([Column::new("v", DType::I64, &[])])?;
            let mut clock = Clock::new();
            let v1 = create(input, schema, &mut clock)?;
            let v2 =
                v1.append(&batch(vec![("v", ColumnData::from_scalars(&[1i64, 2]))])?, "fragment 0", clock.tick())?;
            v2.append(&batch(vec![("v", ColumnData::from_scalars(&[3i64, 4]))])?, "fragment 1", clock.tick())?;
            let (d, m) = main_key(input)?;
            let (seg, frag) = d.find_fragment(&m, 1)?;
            let gone = d.file_ref(&m, FileLoc { seg, frag, file: 0 })?;
            let (seg, frag) = d.find_fragment(&m, 0)?;
            d.edit_data_file(&m, FileLoc { seg, frag, file: 0 }, |p, f| {
                let b = page0(f, 0)?;
                block_bytes(p, b)[0] ^= 0x01;
                Ok(())
            })?;
            d.remove(&gone.path)
        },
    )?;
    Ok(())
}

/// A u8 [0] column (rows of zero bytes, stored as one empty page) and an i64 column, 3 rows.
fn zero_width(input: &Path) -> Result<()> {
    let schema = Schema::new([Column::new("z", DType::U8, &[Fixed(0)]), Column::new("id", DType::I64, &[])])?;
    let mut z = ColumnData::for_column(&schema.columns[0]);
    for _ in 0..3 {
        z.push_row(&[0], &[])?;
    }
    let mut clock = Clock::new();
    let ds = create(input, schema, &mut clock)?;
    ds.append(
        &batch(vec![("z", z), ("id", ColumnData::from_scalars(&[7i64, 8, 9]))])?,
        "zero-width rows",
        clock.tick(),
    )?;
    Ok(())
}
