//! Must-reject cases for compressed blocks (SPEC.md §"Codecs").

// Each function below is a flat list of case definitions, one `em.reject` call per case;
// splitting them would scatter related cases without making any of them clearer.
#![allow(clippy::too_many_lines)]

use std::path::Path;

use tessera::datafile::Footer;
use tessera::envelope;
use tessera::{Codec, Compression};

use super::base::{FEAT, ID, TOKENS, basic, edit_file, main_key, page0, put_u32, raw_of, restore_block};
use crate::generate::Result;
use crate::generate::emit::{Emitter, Spec};
use crate::generate::mutate::{FileLoc, field_offset};

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

pub(super) fn codecs(em: &mut Emitter) -> Result<()> {
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
