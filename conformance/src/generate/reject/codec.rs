//! Must-reject cases for compressed blocks (SPEC.md §"Codecs").

// Each function below is a flat list of case definitions, one `em.reject` call per case;
// splitting them would scatter related cases without making any of them clearer.
#![allow(clippy::too_many_lines)]

use std::path::Path;

use tessera::{Codec, Compression};

use super::base::{FEAT, ID, TOKENS, basic, edit_file, footer_variant, page0, raw_of, restore_block};
use crate::generate::emit::{Emitter, Spec};
use crate::generate::{GenError, Result, bail};

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

/// An LZ4 stream of the basic dataset's `feat` page (96 bytes, a 16-byte period): 16 literals,
/// then a match of `first` bytes at offset 16, then, if `second` is not 0, a match of `second`
/// bytes at offset 16, then the rest as literals. Lengths are chosen so that every nibble of a
/// match length is below 15 or extended by one byte, and every literal run is below 15 bytes
/// except the first.
fn feat_stream(raw: &[u8], first: usize, second: usize) -> Result<Vec<u8>> {
    if raw.len() != 96 || raw[..80] != raw[16..] || first < 19 || !(second == 0 || (4..19).contains(&second)) {
        bail!("the feat page is not the expected 96-byte periodic page");
    }
    let mut s = vec![0xFF, 0x01];
    s.extend_from_slice(&raw[..16]);
    s.extend_from_slice(&[0x10, 0x00, u8::try_from(first - 19).map_err(|_| GenError("match too long".into()))?]);
    let mut at = 16 + first;
    if second > 0 {
        s.extend_from_slice(&[u8::try_from(second - 4).unwrap_or(0), 0x10, 0x00]);
        at += second;
    }
    let rest = raw.len() - at;
    if rest >= 15 {
        bail!("final literal run too long");
    }
    s.push(u8::try_from(rest << 4).unwrap_or(0));
    s.extend_from_slice(&raw[at..]);
    Ok(s)
}

/// One zstd frame of `raw` at level 3, with a content checksum or not, declaring its content
/// size or not (libzstd frame parameters).
fn zstd_frame(raw: &[u8], checksum: bool, content_size: bool) -> Result<Vec<u8>> {
    use zstd::zstd_safe::CParameter;
    let fail = |e: std::io::Error| GenError(format!("zstd: {e}"));
    let mut c = zstd::bulk::Compressor::new(3).map_err(fail)?;
    c.set_parameter(CParameter::ChecksumFlag(checksum)).map_err(fail)?;
    c.set_parameter(CParameter::ContentSizeFlag(content_size)).map_err(fail)?;
    let frame = c.compress(raw).map_err(fail)?;
    // Frame_Header_Descriptor: bit 2 the checksum flag; bits 7-6 and 5 give a content size.
    let fhd = frame[4];
    let has_size = fhd >> 6 != 0 || fhd & 0x20 != 0;
    if (fhd & 0x04 != 0) != checksum || has_size != content_size {
        bail!("zstd did not write the frame header asked for (descriptor {fhd:#04x})");
    }
    Ok(frame)
}

pub(super) fn codecs(em: &mut Emitter) -> Result<()> {
    em.valid(
        Spec::new(
            "v-codec-0007-lz4-end-of-block-boundary",
            &["DF-27"],
            "the basic dataset with its LZ4 `feat` page (96 bytes) re-encoded so that the last match starts \
             exactly 12 bytes and ends exactly 5 bytes before the end of the block, as LZ4's end-of-block rules \
             (and liblz4) allow (CRC re-sealed)",
        ),
        |input| {
            basic(input)?;
            restream(input, FEAT, |raw| feat_stream(raw, 68, 7))
        },
    )?;
    em.reject(
        Spec::new(
            "n-codec-0009-lz4-match-ends-in-last-5-bytes",
            &["DF-27"],
            "the LZ4 `feat` page (96 bytes) re-encoded so that its last match ends 4 bytes before the end of the \
             block: the last 5 bytes must be literals (CRC re-sealed)",
        ),
        "malformed",
        "last 5 bytes",
        |input| {
            basic(input)?;
            restream(input, FEAT, |raw| feat_stream(raw, 76, 0))
        },
    )?;
    em.reject(
        Spec::new(
            "n-codec-0010-lz4-match-starts-in-last-12-bytes",
            &["DF-27"],
            "the LZ4 `feat` page (96 bytes) re-encoded so that its last match starts 11 bytes before the end of \
             the block, less than 12 (CRC re-sealed)",
        ),
        "malformed",
        "less than 12",
        |input| {
            basic(input)?;
            restream(input, FEAT, |raw| feat_stream(raw, 69, 4))
        },
    )?;
    em.reject(
        Spec::new(
            "n-codec-0001-unknown-codec-index",
            &["ENC-02", "CMP-03"],
            "a page block's codec has variant index 6, which no codec has (footer CRC, trailer and reference \
             re-sealed)",
        ),
        "malformed",
        "does not decode",
        |input| {
            footer_variant(
                input,
                |f| {
                    page0(f, TOKENS)?.codec = Codec::Lz4;
                    Ok(())
                },
                6,
            )
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
    em.valid(
        Spec::new(
            "v-codec-0008-zstd-content-checksum",
            &["DF-28"],
            "the basic dataset with its zstd `tokens` page re-encoded as a frame with a content checksum (and its \
             content size): a reader verifies the checksum, which matches (CRC re-sealed)",
        ),
        |input| {
            basic(input)?;
            restream(input, TOKENS, |raw| zstd_frame(raw, true, true))
        },
    )?;
    em.valid(
        Spec::new(
            "v-codec-0009-zstd-no-content-size",
            &["DF-28"],
            "the basic dataset with its zstd `tokens` page re-encoded as a frame that does not declare its content \
             size (Frame_Content_Size absent, a window descriptor instead), so the decoder learns the size by \
             decoding (CRC re-sealed)",
        ),
        |input| {
            basic(input)?;
            restream(input, TOKENS, |raw| zstd_frame(raw, false, false))
        },
    )?;
    em.reject(
        Spec::new(
            "n-codec-0011-zstd-content-checksum-mismatch",
            &["DF-28"],
            "a zstd page whose frame carries a content checksum that does not match the decoded bytes (the last \
             checksum byte flipped; the block CRC re-sealed)",
        ),
        "malformed",
        "zstd frame does not decode",
        |input| {
            basic(input)?;
            restream(input, TOKENS, |raw| {
                let mut s = zstd_frame(raw, true, false)?;
                let last = s.len() - 1;
                s[last] ^= 0x01;
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
