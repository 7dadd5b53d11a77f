//! The must-reject and unsupported cases. Each starts from a small valid dataset and changes
//! exactly one thing; the checksums and references around the change are re-sealed so the
//! reader meets the intended fault and no other.

// Each function below is a flat list of case definitions, one `em.reject` call per case;
// splitting them would scatter related cases without making any of them clearer.
#![allow(clippy::too_many_lines)]

use std::path::Path;

use tessera::Dim::{Fixed, Ragged};
use tessera::datafile::{Block, Footer, Page};
use tessera::envelope::{self, ObjectKind};
use tessera::manifest::Tag;
use tessera::{Codec, Column, ColumnData, Compression, DType, Dataset, Kind, Schema, WriteOptions};

use super::data::{Row, batch, column, create};
use super::emit::{Emitter, Spec};
use super::mutate::{
    Ds, FileLoc, RefUpdate, block_bytes, chunk, field_offset, fix_envelope_crc, fix_header_crc, reseal_block, trailer,
};
use super::options::Clock;
use super::prng::Prng;
use super::{Result, bail};
use crate::case::Args;
use crate::crc32::crc32;

/// Writes every reject and unsupported case.
pub(crate) fn all(em: &mut Emitter) -> Result<()> {
    envelopes(em)?;
    unsupported(em)?;
    manifests(em)?;
    segments(em)?;
    path_cases(em)?;
    limits(em)?;
    datafiles(em)?;
    codecs(em)?;
    refs(em)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Base datasets

/// Column ids of the basic dataset.
const ID: u32 = 0;
const FLAGS: u32 = 1;
const TOKENS: u32 = 2;
const CAPTION: u32 = 3;
const FEAT: u32 = 4;

/// The basic dataset every case without special needs starts from: main@1 (create) and
/// main@2 with 6 rows in one fragment, one data file holding
///
/// | id | column | dtype, shape | compression | blocks |
/// |---|---|---|---|---|
/// | 0 | `id` | i64 | none | page |
/// | 1 | `flags` | bool [2] | none | page |
/// | 2 | `tokens` | i32 [?] | zstd 3 | shapes, page (zstd) |
/// | 3 | `caption` | utf8, nullable | none | validity, shapes, page |
/// | 4 | `feat` | f32 [4] | lz4 | page (lz4) |
fn basic(input: &Path) -> Result<(Dataset, Clock)> {
    let schema = Schema::new([
        Column::new("id", DType::I64, &[]),
        Column::new("flags", DType::Bool, &[Fixed(2)]),
        Column::new("tokens", DType::I32, &[Ragged]).with_compression(Compression::Zstd { level: 3 }),
        Column::new("caption", DType::Utf8, &[]).nullable(),
        Column::new("feat", DType::F32, &[Fixed(4)]).with_compression(Compression::Lz4),
    ])?;
    let mut rng = Prng::new(1001);
    let toks: Vec<Vec<i32>> =
        (0..6).map(|i| (0..10 + i).map(|j| [3, 3, 3, 9][j % 4] + i32::from(rng.below(2) == 0)).collect()).collect();
    let toks: Vec<&[i32]> = toks.iter().map(Vec::as_slice).collect();
    let caps = ["first row", "second", "", "fourth row", "fifth", "sixth row"];
    let caption =
        column(DType::Utf8, &[], true, caps.iter().enumerate().map(|(i, c)| (i != 2).then(|| Row::text(c))).collect())?;
    let feat: Vec<f32> = (0..24).map(|i| [0.5, 0.5, 0.25, 0.25][i % 4]).collect();
    let b = batch(vec![
        ("id", ColumnData::from_scalars(&[0i64, 1000, 2000, 3000, 4000, 5000])),
        (
            "flags",
            ColumnData::from_fixed(
                &[2],
                &[true, false, false, true, true, true, false, false, true, false, false, true],
            )?,
        ),
        ("tokens", ColumnData::from_sequences(&toks)),
        ("caption", caption),
        ("feat", ColumnData::from_fixed(&[4], &feat)?),
    ])?;
    let mut clock = Clock::new();
    let ds = create(input, schema, &mut clock)?;
    let v2 = ds.append(&b, "six rows", clock.tick())?;
    let footers = Ds::new(input).footers()?;
    let codec = |id: u32| footers[0].columns.iter().find(|c| c.column_id == id).map(|c| c.pages[0].block.codec);
    if footers.len() != 1 || codec(TOKENS) != Some(Codec::Zstd) || codec(FEAT) != Some(Codec::Lz4) {
        bail!("the basic dataset does not have the expected layout");
    }
    Ok((v2, clock))
}

/// The basic dataset, tagged `t1` at main@2.
fn tagged(input: &Path) -> Result<()> {
    let (v2, mut clock) = basic(input)?;
    Ok(v2.create_tag("t1", "tagged for a fixture", &clock.tick())?)
}

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

/// 8 rows of one i64 column in two fragments of one segment.
fn two_fragments(input: &Path) -> Result<()> {
    let schema = Schema::new([Column::new("id", DType::I64, &[])])?;
    let mut clock = Clock::new();
    let ds = create(input, schema, &mut clock)?;
    let b = batch(vec![("id", ColumnData::from_scalars(&[1i64, 2, 3, 4, 5, 6, 7, 8]))])?;
    let v2 =
        ds.append(&b, "two fragments", clock.next(WriteOptions { target_file_bytes: 32, ..WriteOptions::default() }))?;
    if v2.fragments().len() != 2 || v2.manifest().segments.len() != 1 {
        bail!("expected two fragments in one segment");
    }
    Ok(())
}

/// The arguments that open tag `t1`.
fn tag_t1() -> Args {
    Args { tag: Some("t1".into()), ..Args::default() }
}

/// The key of tag `t1`.
const T1: &str = "tags/t1.tst";

/// Reads the basic dataset's main@2 manifest key and the data file of its one fragment.
fn main_key(input: &Path) -> Result<(Ds, String)> {
    let ds = Ds::new(input);
    let m = ds.main()?;
    Ok((ds, m))
}

/// Edits the basic dataset's data file: blocks region and footer.
fn edit_file(input: &Path, f: impl FnOnce(&mut Vec<u8>, &mut Footer) -> Result<()>) -> Result<()> {
    let (ds, m) = main_key(input)?;
    ds.edit_data_file(&m, FileLoc::default(), f)
}

/// Edits the basic dataset's data file bytes as they are.
fn edit_file_raw(input: &Path, update: RefUpdate, f: impl FnOnce(&mut Vec<u8>)) -> Result<()> {
    let (ds, m) = main_key(input)?;
    ds.edit_data_file_raw(&m, FileLoc::default(), update, f)
}

/// The first page block of a column.
fn page0(footer: &mut Footer, id: u32) -> Result<&mut Block> {
    match chunk(footer, id)?.pages.first_mut() {
        Some(p) => Ok(&mut p.block),
        None => bail!("column {id} has no page"),
    }
}

/// Bytes available to a block at its offset: up to the next block or the footer.
fn room(prefix: &[u8], footer: &Footer, b: &Block) -> u64 {
    footer
        .columns
        .iter()
        .flat_map(tessera::datafile::ColumnChunk::blocks)
        .map(|x| x.offset)
        .filter(|&o| o > b.offset)
        .min()
        .unwrap_or(prefix.len() as u64)
        - b.offset
}

/// Replaces a block's stored bytes (zero-filling what the old ones leave), fixing its length
/// and CRC.
fn restore_block(prefix: &mut [u8], footer: &Footer, b: &mut Block, stored: &[u8]) -> Result<()> {
    if stored.len() as u64 > room(prefix, footer, b) {
        bail!("new block bytes do not fit");
    }
    block_bytes(prefix, b).fill(0);
    b.stored_len = stored.len() as u64;
    block_bytes(prefix, b).copy_from_slice(stored);
    reseal_block(prefix, b);
    Ok(())
}

/// The decoded bytes of a block.
fn raw_of(prefix: &mut [u8], b: &Block) -> Result<Vec<u8>> {
    let stored = block_bytes(prefix, b).to_vec();
    Ok(tessera::codec::decompress(b.codec, &stored, b.raw_len as usize, &|| "fixture block".to_string())?)
}

/// Sets the 4-byte little-endian field at `at`.
fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Replaces a column's first page with `make(raw)`, keeping `raw_len`.
fn restream(input: &Path, column: u32, make: impl FnOnce(&[u8]) -> Result<Vec<u8>>) -> Result<()> {
    edit_file(input, |p, f| {
        let footer = f.clone();
        let b = page0(f, column)?;
        let raw = raw_of(p, b)?;
        let stored = make(&raw)?;
        restore_block(p, &footer, b, &stored)
    })
}

/// Changes the tag record `t1` and re-seals it.
fn edit_tag(input: &Path, f: impl FnOnce(&mut Tag)) -> Result<()> {
    tagged(input)?;
    let ds = Ds::new(input);
    let mut tag: Tag = envelope::open(ObjectKind::Tag, &ds.read(T1)?, u64::MAX, T1)?;
    f(&mut tag);
    ds.write(T1, &envelope::seal(ObjectKind::Tag, &tag)?)
}

// ---------------------------------------------------------------------------------------------
// Envelope faults: manifests, segments, tag records

fn envelopes(em: &mut Emitter) -> Result<()> {
    const TRUNC: &[&str] = &["ENV-05", "VAL-04"];
    em.reject(
        Spec::new("n-envelope-0001-manifest-truncated-in-header", TRUNC, "the latest manifest is cut to 20 bytes"),
        "malformed",
        "shorter than the envelope",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_raw(&m, |b| b.truncate(20))
        },
    )?;
    em.reject(
        Spec::new("n-envelope-0002-manifest-empty", TRUNC, "the latest manifest is an empty object"),
        "malformed",
        "0 bytes is shorter than the envelope",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_raw(&m, Vec::clear)
        },
    )?;
    em.reject(
        Spec::new(
            "n-envelope-0003-manifest-truncated-in-body",
            &["ENV-05"],
            "the latest manifest lacks its last 10 bytes, so its size disagrees with body_len",
        ),
        "malformed",
        "envelope says",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_raw(&m, |b| b.truncate(b.len() - 10))
        },
    )?;
    em.reject(
        Spec::new(
            "n-envelope-0004-manifest-bad-magic",
            &["ENV-02"],
            "the latest manifest carries the index segment magic \\x89TSI (CRC re-sealed)",
        ),
        "malformed",
        "bad magic",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_envelope_header(&m, |h| h[3] = b'I').map(drop)
        },
    )?;
    em.reject(
        Spec::new("n-envelope-0005-manifest-bad-crc", &["ENV-06"], "one bit of the latest manifest's CRC is flipped"),
        "malformed",
        "CRC-32 mismatch",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_raw(&m, |b| {
                let n = b.len();
                b[n - 1] ^= 0x10;
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-envelope-0006-manifest-reserved-nonzero",
            &["ENV-03", "FLG-05"],
            "the latest manifest's reserved u32 is 1 (CRC re-sealed)",
        ),
        "malformed",
        "reserved field is not zero",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_envelope_header(&m, |h| h[12] = 1).map(drop)
        },
    )?;
    em.reject(
        Spec::new(
            "n-envelope-0007-manifest-trailing-body-byte",
            &["ENC-03", "ENV-07"],
            "the latest manifest's body has one byte after the encoded struct (body_len and CRC agree)",
        ),
        "malformed",
        "trailing bytes",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_body(&m, |b| b.push(0)).map(drop)
        },
    )?;
    em.reject(
        Spec::new(
            "n-envelope-0008-manifest-bad-option-tag",
            &["ENC-02"],
            "the Option tag of the latest manifest's `parent` is 2 (CRC re-sealed)",
        ),
        "malformed",
        "does not decode",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            // reader_flags u64, writer_flags u64, branch "main" (u64 length + 4 bytes), version u64,
            // then the tag of `parent`.
            let at = 8 + 8 + 8 + 4 + 8;
            let body = ds.read(&m)?[envelope::HEADER_LEN..].to_vec();
            if body[at] != 1 {
                bail!("parent tag not where expected");
            }
            ds.edit_body(&m, |b| b[at] = 2).map(drop)
        },
    )?;
    em.reject(
        Spec::new(
            "n-envelope-0009-manifest-string-not-utf8",
            &["ENC-02", "GEN-07"],
            "the branch name inside the latest manifest's body is not UTF-8 (CRC re-sealed)",
        ),
        "malformed",
        "does not decode",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_body(&m, |b| b[24] = 0xFF).map(drop)
        },
    )?;
    em.reject(
        Spec::new(
            "n-envelope-0010-segment-bad-magic",
            &["ENV-02"],
            "the index segment carries the manifest magic \\x89TSM (CRC and the manifest's reference re-sealed)",
        ),
        "malformed",
        "bad magic",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            let mut b = ds.read(&ds.segment_key(&m, 0)?)?;
            b[3] = b'M';
            fix_envelope_crc(&mut b);
            ds.replace_segment(&m, 0, &b)
        },
    )?;
    em.reject(
        Spec::new(
            "n-envelope-0011-segment-bad-crc",
            &["ENV-06"],
            "one body byte of the index segment is flipped; its stored CRC still matches the manifest's reference",
        ),
        "malformed",
        "CRC-32 mismatch",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_raw(&ds.segment_key(&m, 0)?, |b| b[30] ^= 0x01)
        },
    )?;
    em.reject(
        Spec::new(
            "n-envelope-0012-segment-truncated",
            &["ENV-05"],
            "the index segment lacks 8 bytes of its body; the manifest's reference records the short object",
        ),
        "malformed",
        "envelope says",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            let mut b = ds.read(&ds.segment_key(&m, 0)?)?;
            let n = b.len();
            b.drain(n - 12..n - 4);
            ds.replace_segment(&m, 0, &b)
        },
    )?;
    em.reject(
        Spec::new(
            "n-envelope-0013-segment-trailing-body-byte",
            &["ENC-03", "ENV-07"],
            "the index segment's body has a byte after the encoded struct (body_len, CRC and reference agree)",
        ),
        "malformed",
        "trailing bytes",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            let b = ds.edit_body(&ds.segment_key(&m, 0)?, |b| b.push(7))?;
            ds.replace_segment(&m, 0, &b)
        },
    )?;
    em.reject(
        Spec::new(
            "n-envelope-0014-tag-bad-magic",
            &["ENV-02"],
            "the tag record has a data file's magic (CRC re-sealed)",
        )
        .with_args(tag_t1()),
        "malformed",
        "bad magic",
        |input| {
            tagged(input)?;
            Ds::new(input).edit_envelope_header(T1, |h| h[3] = b'D').map(drop)
        },
    )?;
    em.reject(
        Spec::new("n-envelope-0015-tag-bad-crc", &["ENV-06"], "one body byte of the tag record is flipped")
            .with_args(tag_t1()),
        "malformed",
        "CRC-32 mismatch",
        |input| {
            tagged(input)?;
            Ds::new(input).edit_raw(T1, |b| b[40] ^= 0x04)
        },
    )?;
    em.reject(
        Spec::new("n-envelope-0016-tag-truncated", &["ENV-05"], "the tag record is cut to 27 bytes")
            .with_args(tag_t1()),
        "malformed",
        "shorter than the envelope",
        |input| {
            tagged(input)?;
            Ds::new(input).edit_raw(T1, |b| b.truncate(27))
        },
    )?;
    em.reject(
        Spec::new(
            "n-envelope-0017-manifest-string-length-huge",
            &["ENC-03", "SEC-03", "ENC-04"],
            "the branch name inside the latest manifest's body declares a length of 2^62 bytes in a body of a \
             few hundred (CRC re-sealed); a reader must not allocate for it",
        ),
        "malformed",
        "does not decode",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            // reader_flags u64, writer_flags u64, then the branch name's u64 length.
            ds.edit_body(&m, |b| b[16..24].copy_from_slice(&(1u64 << 62).to_le_bytes())).map(drop)
        },
    )?;
    em.reject(
        Spec::new(
            "n-envelope-0018-segment-vec-length-huge",
            &["ENC-03", "SEC-03", "ENC-04"],
            "the index segment's fragment list declares 2^60 entries in a body of a few hundred bytes (CRC and \
             the manifest's reference re-sealed)",
        ),
        "malformed",
        "does not decode",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            let b = ds.edit_body(&ds.segment_key(&m, 0)?, |b| b[..8].copy_from_slice(&(1u64 << 60).to_le_bytes()))?;
            ds.replace_segment(&m, 0, &b)
        },
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Unsupported: from a future format

fn unsupported(em: &mut Emitter) -> Result<()> {
    for (id, major) in [("u-envelope-0001-manifest-major-2", 2u8), ("u-envelope-0002-manifest-major-0", 0)] {
        let description = format!("the latest manifest says format major version {major} (CRC re-sealed)");
        em.reject(
            Spec::new(id, &["FLG-01"], &description),
            "unsupported",
            &format!("format major version {major}"),
            |input| {
                basic(input)?;
                let (ds, m) = main_key(input)?;
                ds.edit_envelope_header(&m, |h| h[8] = major).map(drop)
            },
        )?;
    }
    em.reject(
        Spec::new(
            "u-envelope-0003-segment-major-2",
            &["FLG-01"],
            "the index segment says format major version 2 (CRC and the manifest's reference re-sealed)",
        ),
        "unsupported",
        "format major version 2",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            let mut b = ds.read(&ds.segment_key(&m, 0)?)?;
            b[8] = 2;
            fix_envelope_crc(&mut b);
            ds.replace_segment(&m, 0, &b)
        },
    )?;
    em.reject(
        Spec::new(
            "u-envelope-0004-tag-major-2",
            &["FLG-01"],
            "the tag record says format major version 2 (CRC re-sealed)",
        )
        .with_args(tag_t1()),
        "unsupported",
        "format major version 2",
        |input| {
            tagged(input)?;
            Ds::new(input).edit_envelope_header(T1, |h| h[8] = 2).map(drop)
        },
    )?;
    em.reject(
        Spec::new(
            "u-datafile-0001-major-2",
            &["FLG-01"],
            "the data file header says major version 2 (header CRC re-sealed)",
        ),
        "unsupported",
        "data file major version 2",
        |input| {
            basic(input)?;
            edit_file_raw(input, RefUpdate::Full, |b| {
                b[8] = 2;
                fix_header_crc(b);
            })
        },
    )?;
    for (id, bit) in [("u-flags-0001-reader-flag-bit-0", 0u32), ("u-flags-0002-reader-flag-bit-63", 63)] {
        let description = format!("the latest manifest sets reader-required flag bit {bit}, unknown to 1.0 readers");
        em.reject(
            Spec::new(id, &["FLG-03", "VAL-05"], &description),
            "unsupported",
            "unknown reader-required flags",
            |input| {
                basic(input)?;
                let (ds, m) = main_key(input)?;
                ds.edit_manifest(&m, |m| m.reader_flags = 1 << bit)
            },
        )?;
    }
    em.reject(
        Spec::new(
            "u-flags-0003-reader-flag-with-future-body",
            &["FLG-03", "VAL-05"],
            "the latest manifest sets a reader flag bit and its body after the flags is in an encoding 1.0 \
             cannot decode: the flags are checked before the body is decoded",
        ),
        "unsupported",
        "unknown reader-required flags",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_body(&m, |b| {
                b.clear();
                b.extend_from_slice(&(1u64 << 7).to_le_bytes());
                b.extend_from_slice(b"future encoding");
            })
            .map(drop)
        },
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Manifest semantics

/// A manifest case: the basic dataset with one change to its latest manifest.
fn manifest_case(
    em: &mut Emitter,
    spec: Spec<'_>,
    class: &str,
    hint: &str,
    f: impl FnOnce(&mut tessera::manifest::Manifest),
) -> Result<()> {
    em.reject(spec, class, hint, |input| {
        basic(input)?;
        let (ds, m) = main_key(input)?;
        ds.edit_manifest(&m, f)
    })
}

/// A manifest case whose change the manifest type cannot express: `value` is written at the
/// offset where encoding `a` and `b` (the manifest with one field changed to another known
/// variant) first differ.
fn manifest_variant_case(
    em: &mut Emitter,
    spec: Spec<'_>,
    change: impl FnOnce(&mut tessera::manifest::Manifest),
    value: u32,
) -> Result<()> {
    em.reject(spec, "malformed", "does not decode", |input| {
        basic(input)?;
        let (ds, m) = main_key(input)?;
        let a = ds.manifest(&m)?;
        let mut b = a.clone();
        change(&mut b);
        let at = field_offset(&envelope::encode_body(&a)?, &envelope::encode_body(&b)?)?;
        ds.edit_body(&m, |body| put_u32(body, at, value)).map(drop)
    })
}

fn manifests(em: &mut Emitter) -> Result<()> {
    manifest_case(
        em,
        Spec::new("n-manifest-0001-version-differs-from-key", &["MAN-01"], "main@2's manifest says version 3"),
        "invalid",
        "its key says main@2",
        |m| m.version = 3,
    )?;
    manifest_case(
        em,
        Spec::new("n-manifest-0002-branch-differs-from-key", &["MAN-01"], "main@2's manifest says branch dev"),
        "invalid",
        "its key says main@2",
        |m| m.branch = "dev".into(),
    )?;
    manifest_case(
        em,
        Spec::new("n-manifest-0003-row-count-not-sum", &["MAN-06"], "the manifest says 7 rows; its fragments hold 6"),
        "invalid",
        "manifest says 7",
        |m| m.row_count = 7,
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0004-duplicate-column-name",
            &["MOD-03", "MAN-04"],
            "two columns of the schema are named `id`",
        ),
        "invalid",
        "duplicate column name",
        |m| m.schema.columns[FEAT as usize].name = "id".into(),
    )?;
    manifest_case(
        em,
        Spec::new("n-manifest-0005-duplicate-column-id", &["MOD-02"], "two columns of the schema have id 0"),
        "invalid",
        "duplicate column id",
        |m| m.schema.columns[FEAT as usize].id = ID,
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0006-text-kind-on-i32",
            &["KND-05"],
            "the i32 [?] column `tokens` has kind Text, which requires utf8",
        ),
        "invalid",
        "dtype must be utf8",
        |m| m.schema.columns[TOKENS as usize].kind = Kind::Text,
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0007-next-column-id-not-above",
            &["MAN-05"],
            "next_column_id is 4 while the schema has a column with id 4",
        ),
        "invalid",
        "next_column_id",
        |m| m.next_column_id = FEAT,
    )?;
    manifest_case(
        em,
        Spec::new("n-manifest-0008-zstd-level-23", &["CMP-01"], "a column's zstd level is 23 (allowed: 1..=22)"),
        "invalid",
        "zstd level 23",
        |m| m.schema.columns[TOKENS as usize].compression = Compression::Zstd { level: 23 },
    )?;
    manifest_case(
        em,
        Spec::new("n-manifest-0009-zstd-level-0", &["CMP-01"], "a column's zstd level is 0 (allowed: 1..=22)"),
        "invalid",
        "zstd level 0",
        |m| m.schema.columns[TOKENS as usize].compression = Compression::Zstd { level: 0 },
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0010-utf8-column-rank-1",
            &["DT-04", "MAN-04"],
            "the utf8 column `caption` has shape [1]",
        ),
        "invalid",
        "must have rank 0",
        |m| m.schema.columns[CAPTION as usize].shape = vec![Fixed(1)],
    )?;
    manifest_case(
        em,
        Spec::new("n-manifest-0011-column-name-control-char", &["MOD-03"], "a column name ends in a newline"),
        "invalid",
        "control characters",
        |m| m.schema.columns[ID as usize].name = "id\n".into(),
    )?;
    manifest_case(
        em,
        Spec::new("n-manifest-0012-empty-column-name", &["MOD-03"], "a column name is empty"),
        "invalid",
        "non-empty",
        |m| m.schema.columns[ID as usize].name = String::new(),
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0013-segment-fragment-count-differs",
            &["SEG-02"],
            "the manifest's segment reference says 2 fragments; the segment has 1",
        ),
        "invalid",
        "fragment count differs",
        |m| m.segments[0].fragment_count = 2,
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0014-segment-row-count-differs",
            &["SEG-02"],
            "the manifest's segment reference says 7 rows; the segment's fragments hold 6",
        ),
        "invalid",
        "row count differs",
        |m| m.segments[0].row_count = 7,
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0015-metadata-not-sorted",
            &["MOD-04"],
            "the schema metadata lists key `b` before key `a`",
        ),
        "invalid",
        "unique and sorted",
        |m| m.schema.metadata = vec![("b".into(), "1".into()), ("a".into(), "2".into())],
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0016-class-names-duplicate",
            &["KND-08"],
            "the class_label kind of column `id` names the class `cat` twice",
        ),
        "invalid",
        "class names must be unique",
        |m| m.schema.columns[ID as usize].kind = Kind::ClassLabel { names: vec!["cat".into(), "cat".into()] },
    )?;
    manifest_case(
        em,
        Spec::new("n-manifest-0017-image-rank-1", &["KND-02"], "the f32 [4] column `feat` has kind image (hwc)"),
        "invalid",
        "rank must be 3",
        |m| m.schema.columns[FEAT as usize].kind = Kind::Image { layout: tessera::ImageLayout::Hwc },
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0018-embedding-not-float",
            &["KND-07"],
            "the i32 [?] column `tokens` has kind embedding, which needs a float dtype and one fixed dim",
        ),
        "invalid",
        "float dtype with one fixed dim",
        |m| m.schema.columns[TOKENS as usize].kind = Kind::Embedding { metric: tessera::Metric::Cosine },
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0019-audio-sample-rate-0",
            &["KND-04"],
            "the f32 [4] column `feat` has kind audio with sample_rate 0",
        ),
        "invalid",
        "sample_rate must be > 0",
        |m| m.schema.columns[FEAT as usize].kind = Kind::Audio { sample_rate: 0 },
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-manifest-0020-bbox-wrong-shape",
            &["KND-09"],
            "the i32 [?] column `tokens` has kind bbox, which needs shape [4] or [N, 4]",
        ),
        "invalid",
        "shape [4] or [N, 4]",
        |m| {
            m.schema.columns[TOKENS as usize].kind = Kind::BBox { format: tessera::BBoxFormat::Xyxy, normalized: false }
        },
    )?;
    manifest_variant_case(
        em,
        Spec::new(
            "n-manifest-0021-unknown-dtype-code",
            &["ENC-02", "DT-01", "FLG-06"],
            "a schema column's dtype has variant index 15, which no dtype has (CRC re-sealed)",
        ),
        |m| m.schema.columns[ID as usize].dtype = DType::U8,
        15,
    )?;
    manifest_variant_case(
        em,
        Spec::new(
            "n-manifest-0022-unknown-compression-variant",
            &["ENC-02", "CMP-02", "FLG-06"],
            "a schema column's compression has variant index 3 (CRC re-sealed)",
        ),
        |m| m.schema.columns[ID as usize].compression = Compression::Lz4,
        3,
    )?;
    manifest_variant_case(
        em,
        Spec::new(
            "n-manifest-0023-unknown-kind-variant",
            &["ENC-02", "KND-01", "FLG-06"],
            "a schema column's kind has variant index 11, one past Json (CRC re-sealed)",
        ),
        |m| m.schema.columns[ID as usize].kind = Kind::Mask,
        11,
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Index segments

fn segments(em: &mut Emitter) -> Result<()> {
    em.reject(
        Spec::new(
            "n-segment-0001-crc-differs-from-ref",
            &["SEG-01", "VAL-07"],
            "the index segment was re-sealed with other content under the same name; the manifest's reference \
             records the old CRC",
        ),
        "invalid",
        "size or CRC differs",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            let key = ds.segment_key(&m, 0)?;
            let mut seg = ds.segment(&key)?;
            seg.fragments[0].stats[0].null_count += 1;
            ds.write(&key, &envelope::seal(ObjectKind::Segment, &seg)?)
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0002-size-differs-from-ref",
            &["SEG-01"],
            "the manifest's reference gives the index segment a size one byte larger than the object",
        ),
        "invalid",
        "size or CRC differs",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_manifest(&m, |m| m.segments[0].size += 1)
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0003-missing",
            &["VAL-15", "VAL-07"],
            "the index segment the manifest references does not exist",
        ),
        "invalid",
        "does not exist",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.remove(&ds.segment_key(&m, 0)?)
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0004-fragment-id-not-below-next",
            &["SEG-03"],
            "the only fragment has id 1 while the manifest's next_fragment_id is 1",
        ),
        "invalid",
        "below next_fragment_id",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_segment(&m, 0, |s| s.fragments[0].id = 1)
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0005-fragment-ids-descending",
            &["SEG-03"],
            "the segment lists fragment 1 before fragment 0",
        ),
        "invalid",
        "fragment ids must ascend",
        |input| {
            two_fragments(input)?;
            let ds = Ds::new(input);
            ds.edit_segment(&ds.main()?, 0, |s| s.fragments.swap(0, 1))
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0006-column-in-no-file",
            &["SEG-06"],
            "the fragment's data file reference omits column 4, so no file holds it",
        ),
        "invalid",
        "column 4 is in 0 of the fragment's files",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_file_ref(&m, FileLoc::default(), |r| r.column_ids.retain(|&c| c != FEAT))
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0007-column-in-two-files",
            &["SEG-06"],
            "the fragment references its data file a second time for column 4, so two files claim it",
        ),
        "invalid",
        "column 4 is in 2 of the fragment's files",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_segment(&m, 0, |s| {
                let mut again = s.fragments[0].files[0].clone();
                again.column_ids = vec![FEAT];
                s.fragments[0].files.push(again);
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0008-file-column-ids-descending",
            &["SEG-05"],
            "the data file reference lists its column ids in descending order",
        ),
        "invalid",
        "column ids must ascend",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_file_ref(&m, FileLoc::default(), |r| r.column_ids.reverse())
        },
    )?;
    em.reject(
        Spec::new(
            "n-segment-0009-fragment-rows-differ-from-file",
            &["DF-11"],
            "the fragment (and the segment reference and manifest) say 7 rows; its data file holds 6",
        ),
        "invalid",
        "file has 6 rows, fragment has 7",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_segment(&m, 0, |s| s.fragments[0].row_count = 7)?;
            ds.edit_manifest(&m, |m| {
                m.segments[0].row_count = 7;
                m.row_count = 7;
            })
        },
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Paths

/// Rewrites a data file path.
type PathEdit = fn(&str) -> String;

fn path_cases(em: &mut Emitter) -> Result<()> {
    let seg_paths: [(&str, &str, &str); 4] = [
        ("n-path-0001-segment-path-traversal", "../x.tsi", "a segment path climbs out of the root with `..`"),
        ("n-path-0002-segment-absolute-path", "/etc/passwd", "a segment path is absolute"),
        ("n-path-0003-segment-url-scheme", "s3://b/k", "a segment path is a URL"),
        ("n-path-0004-segment-drive-letter", "C:/index/x.tsi", "a segment path starts with a drive letter"),
    ];
    for (id, path, description) in seg_paths {
        let description = format!("{description} ({path:?})");
        em.reject(Spec::new(id, &["LAY-09", "SEC-02", "MAN-07"], &description), "invalid", "[LAY-09]", |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_manifest(&m, |m| m.segments[0].path = path.to_string())
        })?;
    }
    let file_paths: [(&str, PathEdit, &str); 6] = [
        ("n-path-0005-datafile-path-dotdot", |p| format!("data/../{p}"), "a data file path contains `..`"),
        ("n-path-0006-datafile-backslash", |p| p.replace('/', "\\"), "a data file path uses a backslash"),
        ("n-path-0007-datafile-empty-segment", |p| p.replace('/', "//"), "a data file path has an empty segment"),
        ("n-path-0008-datafile-absolute-path", |p| format!("/{p}"), "a data file path is absolute"),
        ("n-path-0009-datafile-dot-segment", |p| format!("./{p}"), "a data file path has a `.` segment"),
        ("n-path-0010-datafile-non-ascii", |p| p.replace("data", "dätä"), "a data file path has non-ASCII letters"),
    ];
    for (id, f, description) in file_paths {
        em.reject(Spec::new(id, &["LAY-09", "SEC-02", "SEG-05"], description), "invalid", "[LAY-09]", |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_file_ref(&m, FileLoc::default(), |r| r.path = f(&r.path))
        })?;
    }
    em.reject(
        Spec::new("n-path-0011-missing-data-file", &["VAL-15"], "the data file the fragment references does not exist"),
        "invalid",
        "does not exist",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.remove(&ds.file_ref(&m, FileLoc::default())?.path)
        },
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Limits

fn limits(em: &mut Emitter) -> Result<()> {
    em.reject(
        Spec::new(
            "n-limits-0001-manifest-body-len-huge",
            &["LIM-05", "ENV-04", "LIM-15", "VAL-02"],
            "the latest manifest declares a body of 2^40 bytes (CRC re-sealed)",
        ),
        "limit",
        "body length",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_envelope_header(&m, |h| h[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes())).map(drop)
        },
    )?;
    em.reject(
        Spec::new(
            "n-limits-0002-segment-body-len-huge",
            &["LIM-05", "LIM-15"],
            "the index segment declares a body of 2^40 bytes (CRC and reference re-sealed)",
        ),
        "limit",
        "body length",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            let mut b = ds.read(&ds.segment_key(&m, 0)?)?;
            b[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
            fix_envelope_crc(&mut b);
            ds.replace_segment(&m, 0, &b)
        },
    )?;
    em.reject(
        Spec::new(
            "n-limits-0003-tag-body-len-over-64k",
            &["LIM-05", "LIM-15"],
            "the tag record declares a body of 65537 bytes, above the 64 KiB limit for tags (CRC re-sealed)",
        )
        .with_args(tag_t1()),
        "limit",
        "body length",
        |input| {
            tagged(input)?;
            Ds::new(input).edit_envelope_header(T1, |h| h[16..24].copy_from_slice(&65537u64.to_le_bytes())).map(drop)
        },
    )?;
    em.reject(
        Spec::new(
            "n-limits-0004-footer-len-absurd",
            &["LIM-06", "LIM-15", "DF-08"],
            "the data file trailer declares a footer of 2^64-1 bytes (trailer CRC re-sealed)",
        ),
        "limit",
        "footer length",
        |input| {
            basic(input)?;
            edit_file_raw(input, RefUpdate::Locate, |b| {
                let t = b.len() - 24;
                let crc = u32::from_le_bytes([b[t + 8], b[t + 9], b[t + 10], b[t + 11]]);
                let new = trailer(u64::MAX, crc);
                b[t..].copy_from_slice(&new);
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-limits-0005-decompression-bomb",
            &["LIM-07", "SEC-03", "DF-22", "LIM-15", "VAL-02"],
            "a zstd page of a few dozen stored bytes declares raw_len 2^40",
        ),
        "limit",
        "raw length",
        |input| {
            basic(input)?;
            edit_file(input, |_, f| {
                page0(f, TOKENS)?.raw_len = 1 << 40;
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-limits-0006-compression-ratio",
            &["LIM-08", "SEC-03", "DF-22", "LIM-15"],
            "a zstd page declares a raw_len of 65536 × its stored length + 1, under the block limit but over the \
             ratio limit",
        ),
        "limit",
        "stored bytes",
        |input| {
            basic(input)?;
            edit_file(input, |_, f| {
                let b = page0(f, TOKENS)?;
                b.raw_len = b.stored_len * 65536 + 1;
                Ok(())
            })
        },
    )?;
    manifest_case(
        em,
        Spec::new("n-limits-0007-rank-9", &["LIM-02", "LIM-15", "MAN-04"], "a column has 9 dims"),
        "limit",
        "rank",
        |m| {
            m.schema.columns[ID as usize].shape = vec![Fixed(1); 9];
        },
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-limits-0008-column-name-257-bytes",
            &["LIM-03", "LIM-15", "MAN-04"],
            "a column name is 257 bytes long",
        ),
        "limit",
        "name bytes",
        |m| m.schema.columns[ID as usize].name = "n".repeat(257),
    )?;
    manifest_case(
        em,
        Spec::new("n-limits-0009-path-9-segments", &["LIM-12", "LIM-15", "MAN-07"], "a segment path has 9 segments"),
        "limit",
        "path segments",
        |m| m.segments[0].path = "index/a/b/c/d/e/f/g/x.tsi".into(),
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-limits-0010-path-1025-bytes",
            &["LIM-12", "LIM-15", "MAN-07"],
            "a segment path is 1025 bytes long",
        ),
        "limit",
        "path bytes",
        |m| m.segments[0].path = format!("index/{}.tsi", "a".repeat(1025 - 10)),
    )?;
    manifest_case(
        em,
        Spec::new(
            "n-limits-0011-fixed-row-over-1gib",
            &["LIM-09", "LIM-15", "SHP-06"],
            "a column's fixed shape makes each row 2 GiB (i64 [2^28])",
        ),
        "limit",
        "row bytes",
        |m| m.schema.columns[ID as usize].shape = vec![Fixed(1 << 28)],
    )?;
    em.reject(
        Spec::new(
            "n-limits-0012-ragged-row-over-1gib",
            &["LIM-09", "LIM-15", "DF-19"],
            "the shapes block gives an i32 [?] row 2^28 + 1 elements, just over 1 GiB (block CRC re-sealed)",
        ),
        "limit",
        "row 0 bytes",
        |input| {
            basic(input)?;
            edit_file(input, |p, f| {
                let s = chunk(f, TOKENS)?.shapes.as_mut().ok_or_else(|| super::GenError("no shapes".into()))?;
                block_bytes(p, s)[..8].copy_from_slice(&((1u64 << 28) + 1).to_le_bytes());
                reseal_block(p, s);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-limits-0013-ragged-size-overflows",
            &["LIM-09", "GEN-05", "LIM-15"],
            "the shapes block gives an i32 [?] row 2^62 elements, whose byte size overflows 64 bits (block CRC \
             re-sealed)",
        ),
        "limit",
        "row 0 bytes",
        |input| {
            basic(input)?;
            edit_file(input, |p, f| {
                let s = chunk(f, TOKENS)?.shapes.as_mut().ok_or_else(|| super::GenError("no shapes".into()))?;
                block_bytes(p, s)[..8].copy_from_slice(&(1u64 << 62).to_le_bytes());
                reseal_block(p, s);
                Ok(())
            })
        },
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Data files

fn datafiles(em: &mut Emitter) -> Result<()> {
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
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_footer_bytes(&m, FileLoc::default(), |_, fb| {
                let a: Footer = envelope::decode_body(fb, "footer")?;
                let mut b = a.clone();
                chunk(&mut b, ID)?.dtype = DType::U8;
                let at = field_offset(&envelope::encode_body(&a)?, &envelope::encode_body(&b)?)?;
                put_u32(fb, at, 15);
                Ok(())
            })
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
                let s = chunk(f, TOKENS)?.shapes.as_mut().ok_or_else(|| super::GenError("no shapes".into()))?;
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
                let b = chunk(f, CAPTION)?.validity.as_mut().ok_or_else(|| super::GenError("no validity".into()))?;
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
                let b = chunk(f, CAPTION)?.validity.as_mut().ok_or_else(|| super::GenError("no validity".into()))?;
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
                let b = chunk(f, TOKENS)?.shapes.as_mut().ok_or_else(|| super::GenError("no shapes".into()))?;
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
                let b = chunk(f, TOKENS)?.shapes.as_mut().ok_or_else(|| super::GenError("no shapes".into()))?;
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

// ---------------------------------------------------------------------------------------------
// Codecs

fn codecs(em: &mut Emitter) -> Result<()> {
    em.reject(
        Spec::new(
            "n-codec-0001-unknown-codec-index",
            &["ENC-02", "CMP-03"],
            "a page block's codec has variant index 3, which no codec has (footer CRC, trailer and reference \
             re-sealed)",
        ),
        "malformed",
        "does not decode",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_footer_bytes(&m, FileLoc::default(), |_, fb| {
                let a: Footer = envelope::decode_body(fb, "footer")?;
                let mut b = a.clone();
                page0(&mut b, TOKENS)?.codec = Codec::Lz4;
                let at = field_offset(&envelope::encode_body(&a)?, &envelope::encode_body(&b)?)?;
                put_u32(fb, at, 3);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-codec-0002-lz4-output-short",
            &["DF-27"],
            "an LZ4 page decodes to 4 bytes fewer than its raw_len (a correct LZ4 stream of the shorter data, \
             CRC re-sealed)",
        ),
        "malformed",
        "decoded",
        |input| {
            basic(input)?;
            restream(input, FEAT, |raw| Ok(tessera::codec::compress(Compression::Lz4, &raw[..raw.len() - 4])?))
        },
    )?;
    em.reject(
        Spec::new(
            "n-codec-0003-lz4-output-long",
            &["DF-27"],
            "an LZ4 page decodes to 4 bytes more than its raw_len (CRC re-sealed)",
        ),
        "malformed",
        "lz4 block does not decode",
        |input| {
            basic(input)?;
            restream(input, FEAT, |raw| {
                let mut longer = raw.to_vec();
                longer.extend_from_slice(&raw[..4]);
                Ok(tessera::codec::compress(Compression::Lz4, &longer)?)
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-codec-0004-lz4-bad-match-offset",
            &["DF-27"],
            "an LZ4 page's stream refers back 65535 bytes before any output exists (CRC re-sealed)",
        ),
        "malformed",
        "lz4 block does not decode",
        |input| {
            basic(input)?;
            restream(input, FEAT, |_| Ok(vec![0x10, b'a', 0xFF, 0xFF, 0x50, b'x', b'y', b'z', b'w', b'v']))
        },
    )?;
    em.reject(
        Spec::new(
            "n-codec-0005-zstd-bad-frame-magic",
            &["DF-28"],
            "a zstd page does not start with the zstd frame magic (CRC re-sealed)",
        ),
        "malformed",
        "zstd frame does not decode",
        |input| {
            basic(input)?;
            restream(input, TOKENS, |raw| {
                let mut s = tessera::codec::compress(Compression::Zstd { level: 3 }, raw)?;
                s[0] ^= 0xFF;
                Ok(s)
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-codec-0006-zstd-output-short",
            &["DF-28"],
            "a zstd page decodes to 4 bytes fewer than its raw_len (a correct frame of the shorter data, CRC \
             re-sealed)",
        ),
        "malformed",
        "decoded",
        |input| {
            basic(input)?;
            restream(input, TOKENS, |raw| {
                Ok(tessera::codec::compress(Compression::Zstd { level: 3 }, &raw[..raw.len() - 4])?)
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-codec-0007-zstd-second-frame",
            &["DF-28"],
            "a zstd page holds its frame followed by a second, empty frame (CRC re-sealed)",
        ),
        "malformed",
        "not exactly one zstd frame",
        |input| {
            basic(input)?;
            restream(input, TOKENS, |raw| {
                let mut s = tessera::codec::compress(Compression::Zstd { level: 3 }, raw)?;
                s.extend_from_slice(&tessera::codec::compress(Compression::Zstd { level: 3 }, &[])?);
                Ok(s)
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-codec-0008-uncompressed-stored-differs-from-raw",
            &["DF-23"],
            "an uncompressed page declares raw_len 56 while 48 bytes are stored",
        ),
        "invalid",
        "stored_len 48 != raw_len 56",
        |input| {
            basic(input)?;
            edit_file(input, |_, f| {
                page0(f, ID)?.raw_len = 56;
                Ok(())
            })
        },
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Tags

fn refs(em: &mut Emitter) -> Result<()> {
    em.reject(
        Spec::new(
            "n-ref-0001-tag-target-manifest-rewritten",
            &["REF-02", "VAL-13"],
            "main@2's manifest was re-sealed with another commit message after tag t1 recorded its CRC",
        )
        .with_args(tag_t1()),
        "invalid",
        "CRC differs from the tag record",
        |input| {
            tagged(input)?;
            let ds = Ds::new(input);
            ds.edit_manifest(&tessera::paths::manifest_key("main", 2), |m| m.message = "rewritten".into())
        },
    )?;
    em.reject(
        Spec::new(
            "n-ref-0002-tag-records-wrong-manifest-crc",
            &["REF-02"],
            "tag t1 records a manifest CRC one more than the tagged manifest's",
        )
        .with_args(tag_t1()),
        "invalid",
        "CRC differs from the tag record",
        |input| edit_tag(input, |t| t.manifest_crc32 = t.manifest_crc32.wrapping_add(1)),
    )?;
    em.reject(
        Spec::new(
            "n-ref-0003-tag-name-differs-from-key",
            &["REF-01", "VAL-13"],
            "the record at tags/t1.tst names tag t2",
        )
        .with_args(tag_t1()),
        "invalid",
        "tag record names",
        |input| edit_tag(input, |t| t.name = "t2".into()),
    )?;
    em.reject(
        Spec::new(
            "n-ref-0004-tag-target-branch-invalid",
            &["LAY-07", "REF-01"],
            "tag t1's target branch is `../main`, not a valid branch name",
        )
        .with_args(tag_t1()),
        "invalid",
        "bad branch name in tag",
        |input| edit_tag(input, |t| t.target.branch = "../main".into()),
    )?;
    Ok(())
}
