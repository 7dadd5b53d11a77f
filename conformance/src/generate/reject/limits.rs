//! Must-reject cases for sizes and counts beyond the reader limits (SPEC.md §"Limits").

// Each function below is a flat list of case definitions, one `em.reject` call per case;
// splitting them would scatter related cases without making any of them clearer.
#![allow(clippy::too_many_lines)]

use tessera::Dim::Fixed;

use super::base::{ID, T1, TOKENS, basic, edit_file, edit_file_raw, main_key, page0, tag_t1, tagged};
use super::manifest::manifest_case;
use crate::generate::emit::{Emitter, Spec};
use crate::generate::mutate::{Ds, RefUpdate, block_bytes, chunk, fix_envelope_crc, reseal_block, trailer};
use crate::generate::{GenError, Result};

pub(super) fn limits(em: &mut Emitter) -> Result<()> {
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
                let s = chunk(f, TOKENS)?.shapes.as_mut().ok_or_else(|| GenError("no shapes".into()))?;
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
                let s = chunk(f, TOKENS)?.shapes.as_mut().ok_or_else(|| GenError("no shapes".into()))?;
                block_bytes(p, s)[..8].copy_from_slice(&(1u64 << 62).to_le_bytes());
                reseal_block(p, s);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-limits-0015-ragged-row-over-256mib",
            &["LIM-09", "LIM-15", "DF-19"],
            "the shapes block gives an i32 [?] row 2^26 + 1 elements, 4 bytes over LIM-09's 256 MiB (block CRC \
             re-sealed)",
        ),
        "limit",
        "row 0 bytes",
        |input| {
            basic(input)?;
            edit_file(input, |p, f| {
                let s = chunk(f, TOKENS)?.shapes.as_mut().ok_or_else(|| GenError("no shapes".into()))?;
                block_bytes(p, s)[..8].copy_from_slice(&((1u64 << 26) + 1).to_le_bytes());
                reseal_block(p, s);
                Ok(())
            })
        },
    )?;
    Ok(())
}
