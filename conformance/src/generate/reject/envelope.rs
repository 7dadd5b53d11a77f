//! Must-reject cases for the metadata envelope of manifests, segments and tag records
//! (SPEC.md §"Metadata envelope").

// Each function below is a flat list of case definitions, one `em.reject` call per case;
// splitting them would scatter related cases without making any of them clearer.
#![allow(clippy::too_many_lines)]

use tessera::envelope;

use super::base::{T1, basic, main_key, tag_t1, tagged};
use crate::generate::emit::{Emitter, Spec};
use crate::generate::mutate::{Ds, fix_envelope_crc};
use crate::generate::{Result, bail};

pub(super) fn envelopes(em: &mut Emitter) -> Result<()> {
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
