//! The chunk codec: compresses and decompresses one block (SPEC.md §"Codecs").
//!
//! Decompression never allocates or writes more than the block's declared raw length, which
//! the caller has already checked against [`Limits`](crate::Limits) and the ratio bound.

use crate::error::{Error, Result};
use crate::limits::hard;
use crate::schema::{Codec, Compression};

/// Compresses `raw` for a block. `Compression::None` returns the bytes unchanged.
///
/// # Errors
/// `usage` if the zstd encoder fails (an out-of-range level; the schema check rejects those).
pub fn compress(compression: Compression, raw: &[u8]) -> Result<Vec<u8>> {
    match compression {
        Compression::None => Ok(raw.to_vec()),
        Compression::Lz4 => Ok(lz4_flex::block::compress(raw)),
        // An encoded column's pages that are not image pages (nulls, images kept as pixels).
        Compression::Encoded => compress(Compression::Zstd { level: 3 }, raw),
        Compression::Zstd { level } => ZSTD_ENCODER.with_borrow_mut(|enc| {
            let enc = match enc {
                Some(enc) => enc,
                None => enc.insert(zstd::bulk::Compressor::new(level).map_err(zstd_usage)?),
            };
            enc.set_compression_level(level).map_err(zstd_usage)?;
            enc.compress(raw).map_err(zstd_usage)
        }),
    }
}

#[allow(clippy::needless_pass_by_value)] // by value to fit `map_err`
fn zstd_usage(e: std::io::Error) -> Error {
    Error::usage(format!("zstd compression failed: {e}"))
}

thread_local! {
    /// One zstd context per thread for each direction: creating a context allocates and clears
    /// its tables, which costs more than compressing or decoding a small page. Each call starts
    /// a new frame, so nothing carries over between blocks.
    static ZSTD_ENCODER: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
    static ZSTD_DECODER: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Checks a block's declared sizes before anything is allocated `[DF-22]` `[LIM-07]` `[LIM-08]`.
///
/// # Errors
/// `invalid` if an uncompressed block's lengths differ; `limit` for a raw length above
/// `max_raw` or a ratio above 65536.
pub fn check_sizes(codec: Codec, stored_len: u64, raw_len: u64, max_raw: u64, what: &dyn Fn() -> String) -> Result<()> {
    Error::check_limit(|| format!("{}: raw length", what()), max_raw, raw_len)?;
    if raw_len == 0 && codec != Codec::None {
        return Err(Error::invalid(what(), "an empty block must be stored uncompressed [CMP-04]"));
    }
    match codec {
        Codec::None if stored_len != raw_len => Err(Error::invalid(
            what(),
            format!("uncompressed block has stored_len {stored_len} != raw_len {raw_len} [DF-23]"),
        )),
        Codec::None => Ok(()),
        // Image pages count as compressed blocks for the ratio bound [DF-30] [LIM-16].
        Codec::Lz4 | Codec::Zstd | Codec::Jpeg | Codec::Png | Codec::WebP => {
            let bound = stored_len.saturating_mul(hard::MAX_COMPRESSION_RATIO);
            Error::check_limit(|| format!("{}: raw length for {stored_len} stored bytes", what()), bound, raw_len)
        }
    }
}

/// Decompresses `stored` into `out`, which must be exactly the declared raw length.
/// The codec must produce exactly `out.len()` bytes `[DF-27]`.
///
/// # Errors
/// `malformed` if the stream is corrupt or its decoded size differs from `out.len()`; `usage`
/// for an image codec, whose decoding needs the row's shape
/// ([`ChunkIndex::decode_page_into`](crate::datafile::ChunkIndex::decode_page_into)).
pub fn decompress_into(codec: Codec, stored: &[u8], out: &mut [u8], what: &dyn Fn() -> String) -> Result<()> {
    let n = match codec {
        Codec::None => {
            if stored.len() != out.len() {
                return Err(Error::malformed(what(), "stored and raw lengths differ"));
            }
            out.copy_from_slice(stored);
            return Ok(());
        }
        Codec::Lz4 => {
            let n = lz4_flex::block::decompress_into(stored, out)
                .map_err(|e| Error::malformed(what(), format!("lz4 block does not decode: {e}")))?;
            lz4_end_of_block(stored, n).map_err(|e| Error::malformed(what(), e))?;
            n
        }
        Codec::Zstd => zstd_into(stored, out, what)?,
        Codec::Jpeg | Codec::Png | Codec::WebP => {
            return Err(Error::usage(format!(
                "{}: an image page decodes with its row's shape (ChunkIndex::decode_page_into)",
                what()
            )));
        }
    };
    if n != out.len() {
        return Err(Error::malformed(what(), format!("decoded {n} bytes, block declares {}", out.len())));
    }
    Ok(())
}

/// The LZ4 end-of-block rules `[DF-27]`, on a block that decoded to `raw_len` bytes: every match
/// starts at least 12 bytes before the end of the block and ends at least 5 bytes before it (the
/// last 5 bytes are literals). liblz4's decoder rejects blocks that break them.
fn lz4_end_of_block(stored: &[u8], raw_len: usize) -> std::result::Result<(), String> {
    let truncated = || "lz4 block does not decode: truncated".to_string();
    let byte = |i: usize| stored.get(i).copied().map(usize::from).ok_or_else(truncated);
    let ext = |i: &mut usize, mut len: usize| -> std::result::Result<usize, String> {
        loop {
            let b = byte(*i)?;
            *i += 1;
            len += b;
            if b != 255 {
                return Ok(len);
            }
        }
    };
    let (mut i, mut out) = (0usize, 0usize);
    while i < stored.len() {
        let token = byte(i)?;
        i += 1;
        let mut lit = token >> 4;
        if lit == 15 {
            lit = ext(&mut i, lit)?;
        }
        i += lit;
        out += lit;
        if i >= stored.len() {
            break;
        }
        i += 2;
        let mut len = token & 15;
        if len == 15 {
            len = ext(&mut i, len)?;
        }
        len += 4;
        if out + 12 > raw_len {
            return Err(format!(
                "lz4 end-of-block rule: a match starts {} bytes before the end of the block, less than 12",
                raw_len.saturating_sub(out)
            ));
        }
        if out + len + 5 > raw_len {
            return Err("lz4 end-of-block rule: a match ends within the last 5 bytes of the block".to_string());
        }
        out += len;
    }
    Ok(())
}

/// Decodes one zstd frame into `out`, refusing any output beyond `out.len()`.
fn zstd_into(stored: &[u8], out: &mut [u8], what: &dyn Fn() -> String) -> Result<usize> {
    let n = ZSTD_DECODER.with_borrow_mut(|d| {
        let d = match d {
            Some(d) => d,
            None => {
                d.insert(zstd::bulk::Decompressor::new().map_err(|e| Error::malformed(what(), format!("zstd: {e}")))?)
            }
        };
        d.decompress_to_buffer(stored, out)
            .map_err(|e| Error::malformed(what(), format!("zstd frame does not decode: {e}")))
    })?;
    // One frame exactly: a second frame or trailing garbage would be silently ignored otherwise.
    match zstd::zstd_safe::find_frame_compressed_size(stored) {
        Ok(len) if len == stored.len() => Ok(n),
        _ => Err(Error::malformed(what(), "block is not exactly one zstd frame [DF-28]")),
    }
}

/// Decompresses into a new buffer of the declared raw length (checked by the caller).
///
/// # Errors
/// As [`decompress_into`].
pub fn decompress(codec: Codec, stored: &[u8], raw_len: usize, what: &dyn Fn() -> String) -> Result<Vec<u8>> {
    let mut out = vec![0u8; raw_len];
    decompress_into(codec, stored, &mut out, what)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    fn w() -> String {
        "t".into()
    }

    #[test]
    fn round_trips_every_codec() {
        let raw: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        for c in [Compression::None, Compression::Lz4, Compression::Zstd { level: 3 }] {
            let stored = compress(c, &raw).unwrap();
            assert_eq!(decompress(c.codec(), &stored, raw.len(), &w).unwrap(), raw);
            // A wrong declared length is always caught.
            let e = decompress(c.codec(), &stored, raw.len() - 1, &w).unwrap_err();
            assert_eq!(e.class(), ErrorClass::Malformed);
            let e = decompress(c.codec(), &stored, raw.len() + 1, &w).unwrap_err();
            assert_eq!(e.class(), ErrorClass::Malformed);
        }
    }

    #[test]
    fn bombs_are_refused_before_allocation() {
        assert_eq!(check_sizes(Codec::Zstd, 10, 1 << 40, 1 << 28, &w).unwrap_err().class(), ErrorClass::Limit);
        assert_eq!(check_sizes(Codec::Lz4, 1, 65537, 1 << 28, &w).unwrap_err().class(), ErrorClass::Limit);
        assert!(check_sizes(Codec::Lz4, 1, 65536, 1 << 28, &w).is_ok());
        assert_eq!(check_sizes(Codec::None, 3, 4, 1 << 28, &w).unwrap_err().class(), ErrorClass::Invalid);
    }

    #[test]
    fn the_reused_zstd_contexts_carry_nothing_between_blocks() {
        let a: Vec<u8> = (0..5000u32).map(|i| (i % 7) as u8).collect();
        let b: Vec<u8> = (0..3000u32).map(|i| (i % 13) as u8).collect();
        // Levels change between calls on this thread's one encoder; each output is what a
        // fresh encoder at that level produces.
        for (raw, level) in [(&a, 19), (&b, 1), (&a, 3)] {
            let stored = compress(Compression::Zstd { level }, raw).unwrap();
            assert_eq!(stored, zstd::bulk::compress(raw, level).unwrap());
        }
        // A frame that fails half-way leaves the decoder usable for the next block.
        let good = compress(Compression::Zstd { level: 3 }, &a).unwrap();
        let mut bad = good.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0xff;
        bad.truncate(bad.len() - 3);
        assert!(decompress(Codec::Zstd, &bad, a.len(), &w).is_err());
        assert_eq!(decompress(Codec::Zstd, &good, a.len(), &w).unwrap(), a);
        let other = compress(Compression::Zstd { level: 1 }, &b).unwrap();
        assert_eq!(decompress(Codec::Zstd, &other, b.len(), &w).unwrap(), b);
    }

    #[test]
    fn lz4_end_of_block_rules_are_checked() {
        // [DF-27]: literal `a`, a match of 7 at offset 1, then 5 literals: the match starts 12
        // and ends 5 bytes before the end of the 13-byte block.
        let ok = [0x13, b'a', 1, 0, 0x50, b'b', b'b', b'b', b'b', b'b'];
        assert_eq!(decompress(Codec::Lz4, &ok, 13, &w).unwrap(), b"aaaaaaaabbbbb");
        // A match of 8: it ends 4 bytes before the end.
        let late_end = [0x14, b'a', 1, 0, 0x40, b'b', b'b', b'b', b'b'];
        let e = decompress(Codec::Lz4, &late_end, 13, &w).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Malformed);
        // Two literals, then a match that starts 11 bytes before the end.
        let late_start = [0x20, b'a', b'a', 1, 0, 0x70, b'b', b'b', b'b', b'b', b'b', b'b', b'b'];
        assert_eq!(decompress(Codec::Lz4, &late_start, 13, &w).unwrap_err().class(), ErrorClass::Malformed);
    }

    #[test]
    fn trailing_zstd_frames_are_malformed() {
        let mut stored = compress(Compression::Zstd { level: 1 }, b"abc").unwrap();
        let again = stored.clone();
        stored.extend_from_slice(&again);
        assert!(decompress(Codec::Zstd, &stored, 3, &w).is_err());
    }
}
