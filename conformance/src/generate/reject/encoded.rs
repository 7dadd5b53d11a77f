//! Encoded image columns (SPEC.md §"Encoded image columns"): the valid cases, and the
//! must-reject and unsupported cases built from them.
//!
//! Every image here decodes exactly with any conforming decoder `[CMP-08]`: JPEGs are grey
//! (R = G = B, so chroma is 128 everywhere) made of flat 8 × 8 blocks at quality 100, whose
//! DC-only IDCT and colour conversion have no rounding choices; PNGs are lossless.

// Each function below is a flat list of case definitions, one `em.*` call per case.
#![allow(clippy::too_many_lines)]

use std::path::Path;

use image::ExtendedColorType;
use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::PngEncoder;
use tessera::Dim::{Fixed, Ragged};
use tessera::datafile::{Block, Footer};
use tessera::{Codec, Column, ColumnData, Compression, DType, Dataset, ImageLayout, Kind, Schema};

use super::base::{ID, basic, main_key, restore_block};
use crate::generate::data::{batch, create};
use crate::generate::emit::{Emitter, Spec};
use crate::generate::mutate::{FileLoc, block_bytes, chunk, reseal_block};
use crate::generate::options::Clock;
use crate::generate::{GenError, Result, bail};

/// Column ids of the encoded dataset.
const IMG: u32 = 1;
const GREY: u32 = 2;

fn gen_err(e: &dyn std::fmt::Display) -> GenError {
    GenError(format!("image encoding: {e}"))
}

/// Grey pixels of flat 8 × 8 blocks, `channels` interleaved equal samples per pixel.
fn blocks(w: u32, h: u32, channels: u32, seed: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity((w * h * channels) as usize);
    for y in 0..h {
        for x in 0..w {
            let v = ((x / 8) * 67 + (y / 8) * 101 + seed * 29) % 256;
            for _ in 0..channels {
                out.push(u8::try_from(v).unwrap_or(0));
            }
        }
    }
    out
}

/// A quality-100 JPEG of [`blocks`]: RGB for 3 channels, grey for 1.
fn jpeg(w: u32, h: u32, channels: u32, seed: u32) -> Result<Vec<u8>> {
    let color = if channels == 1 { ExtendedColorType::L8 } else { ExtendedColorType::Rgb8 };
    let mut out = Vec::new();
    JpegEncoder::new_with_quality(&mut out, 100)
        .encode(&blocks(w, h, channels, seed), w, h, color)
        .map_err(|e| gen_err(&e))?;
    Ok(out)
}

/// An 8-bit PNG of a gradient, grey or RGB.
fn png(w: u32, h: u32, channels: u32, seed: u32) -> Result<Vec<u8>> {
    use image::ImageEncoder;
    let color = if channels == 1 { ExtendedColorType::L8 } else { ExtendedColorType::Rgb8 };
    let px: Vec<u8> = (0..w * h * channels).map(|i| u8::try_from((i * 37 + seed * 11) % 251).unwrap_or(0)).collect();
    let mut out = Vec::new();
    PngEncoder::new(&mut out).write_image(&px, w, h, color).map_err(|e| gen_err(&e))?;
    Ok(out)
}

/// A PNG chunk: length, type, data, CRC of type and data.
fn png_chunk(kind: [u8; 4], data: &[u8]) -> Vec<u8> {
    let mut c = Vec::with_capacity(12 + data.len());
    c.extend_from_slice(&u32::try_from(data.len()).unwrap_or(u32::MAX).to_be_bytes());
    c.extend_from_slice(&kind);
    c.extend_from_slice(data);
    let crc = crc32(&c[4..]);
    c.extend_from_slice(&crc.to_be_bytes());
    c
}

/// A zlib stream of `data` in stored (uncompressed) deflate blocks.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let mut parts = data.chunks(65535).peekable();
    if parts.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(part) = parts.next() {
        out.push(u8::from(parts.peek().is_none()));
        let n = u16::try_from(part.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&(!n).to_le_bytes());
        out.extend_from_slice(part);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
    out
}

/// An 8-bit Adam7-interlaced PNG, grey or RGB, of the same pixels as [`png`]: each of the seven
/// passes' scanlines with filter 0, passes with no pixel left out (PNG §8.2).
fn png_adam7(w: u32, h: u32, channels: u32, seed: u32) -> Vec<u8> {
    let px: Vec<u8> = (0..w * h * channels).map(|i| u8::try_from((i * 37 + seed * 11) % 251).unwrap_or(0)).collect();
    let passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)];
    let mut raw = Vec::new();
    for (x0, y0, dx, dy) in passes {
        if x0 >= w || y0 >= h {
            continue;
        }
        for y in (y0..h).step_by(dy) {
            raw.push(0);
            for x in (x0..w).step_by(dx) {
                let at = ((y * w + x) * channels) as usize;
                raw.extend_from_slice(&px[at..at + channels as usize]);
            }
        }
    }
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, if channels == 1 { 0 } else { 2 }, 0, 0, 1]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    out.extend(png_chunk(*b"IHDR", &ihdr));
    out.extend(png_chunk(*b"IDAT", &zlib_stored(&raw)));
    out.extend(png_chunk(*b"IEND", &[]));
    out
}

/// A lossless (`VP8L`) WebP of RGB pixels: gradients that decode exactly everywhere.
fn webp_lossless(w: u32, h: u32, seed: u32) -> Result<Vec<u8>> {
    let px: Vec<u8> = (0..w * h * 3).map(|i| u8::try_from((i * 13 + seed * 7) % 256).unwrap_or(0)).collect();
    let mut out = Vec::new();
    image::codecs::webp::WebPEncoder::new_lossless(&mut out)
        .encode(&px, w, h, ExtendedColorType::Rgb8)
        .map_err(|e| gen_err(&e))?;
    Ok(out)
}

/// `file` (a PNG) with `chunk` inserted after its `IHDR` chunk.
fn after_ihdr(file: &[u8], chunk: &[u8]) -> Vec<u8> {
    let mut out = file[..33].to_vec();
    out.extend_from_slice(chunk);
    out.extend_from_slice(&file[33..]);
    out
}

fn image_col(name: &str, shape: &[tessera::Dim], layout: ImageLayout) -> Column {
    Column::new(name, DType::U8, shape).with_kind(Kind::Image { layout }).with_compression(Compression::Encoded)
}

/// The encoded dataset: main@1 (create) and main@2 with 3 rows in one data file.
///
/// | id | column | dtype, shape | rows |
/// |---|---|---|---|
/// | 0 | `id` | i64 | 0, 1, 2 |
/// | 1 | `img` | u8 [16, 16, 3], hwc, encoded | JPEG, JPEG, PNG (RGB): one image page each |
/// | 2 | `grey` | u8 [?, ?], hw, encoded, nullable | PNG 5 × 7, null (a zstd page), JPEG 8 × 16 |
fn encoded_base(input: &Path) -> Result<(Dataset, Clock)> {
    let schema = Schema::new([
        Column::new("id", DType::I64, &[]),
        image_col("img", &[Fixed(16), Fixed(16), Fixed(3)], ImageLayout::Hwc),
        image_col("grey", &[Ragged, Ragged], ImageLayout::Hw).nullable(),
    ])?;
    let mut img = ColumnData::empty(DType::U8, &[Fixed(16), Fixed(16), Fixed(3)], false);
    img.push_encoded(&jpeg(16, 16, 3, 1)?)?;
    img.push_encoded(&jpeg(16, 16, 3, 2)?)?;
    img.push_encoded(&png(16, 16, 3, 3)?)?;
    let mut grey = ColumnData::empty(DType::U8, &[Ragged, Ragged], true);
    grey.push_encoded(&png(7, 5, 1, 4)?)?;
    grey.push_null()?;
    grey.push_encoded(&jpeg(16, 8, 1, 5)?)?;
    let b = batch(vec![("id", ColumnData::from_scalars(&[0i64, 1, 2])), ("img", img), ("grey", grey)])?;
    let mut clock = Clock::new();
    let ds = create(input, schema, &mut clock)?;
    let v2 = ds.append(&b, "three images", clock.tick())?;
    Ok((v2, clock))
}

/// Edits the encoded dataset's one data file: blocks region and footer.
fn edit(input: &Path, f: impl FnOnce(&mut Vec<u8>, &mut Footer) -> Result<()>) -> Result<()> {
    encoded_base(input)?;
    let (ds, m) = main_key(input)?;
    ds.edit_data_file(&m, FileLoc::default(), f)
}

/// Page `k` of column `id`.
fn page(footer: &mut Footer, id: u32, k: usize) -> Result<&mut Block> {
    match chunk(footer, id)?.pages.get_mut(k) {
        Some(p) => Ok(&mut p.block),
        None => bail!("column {id} has no page {k}"),
    }
}

/// Replaces page `k` of column `id` with `file`, keeping `raw_len` and the codec.
fn replace_file(input: &Path, id: u32, k: usize, file: &[u8]) -> Result<()> {
    edit(input, |prefix, f| {
        let footer = f.clone();
        let b = page(f, id, k)?;
        restore_block(prefix, &footer, b, file)
    })
}

/// Replaces page `k` of column `id` with `file` stored after the last block (the old bytes
/// zeroed, CRC re-sealed): for files longer than the page's room. Readers do not check the
/// canonical block order (DF-25), only bounds and overlaps.
fn replace_file_moved(input: &Path, id: u32, k: usize, file: &[u8]) -> Result<()> {
    edit(input, |prefix, f| {
        let b = page(f, id, k)?;
        block_bytes(prefix, b).fill(0);
        let at = prefix.len().next_multiple_of(64);
        prefix.resize(at, 0);
        prefix.extend_from_slice(file);
        prefix.resize(prefix.len().next_multiple_of(64), 0);
        b.offset = at as u64;
        b.stored_len = file.len() as u64;
        reseal_block(prefix, b);
        Ok(())
    })
}

/// Edits page `k` of column `id` in place (same length; CRC re-sealed).
fn patch_file(input: &Path, id: u32, k: usize, change: impl FnOnce(&mut [u8]) -> Result<()>) -> Result<()> {
    edit(input, |prefix, f| {
        let b = page(f, id, k)?;
        change(block_bytes(prefix, b))?;
        reseal_block(prefix, b);
        Ok(())
    })
}

/// Sets width and height in a PNG's `IHDR` and re-seals its chunk CRC.
fn png_dims(file: &mut [u8], w: u32, h: u32) {
    file[16..20].copy_from_slice(&w.to_be_bytes());
    file[20..24].copy_from_slice(&h.to_be_bytes());
    let crc = crc32(&file[12..29]);
    file[29..33].copy_from_slice(&crc.to_be_bytes());
}

fn crc32(b: &[u8]) -> u32 {
    crate::crc32::crc32(b)
}

/// Sets the ragged sizes of row `row` of the `grey` column's shapes block (re-sealed).
fn grey_sizes(prefix: &mut [u8], f: &mut Footer, row: usize, h: u64, w: u64) -> Result<()> {
    let Some(b) = chunk(f, GREY)?.shapes.as_mut() else { bail!("grey has no shapes block") };
    let bytes = block_bytes(prefix, b);
    bytes[row * 16..row * 16 + 8].copy_from_slice(&h.to_le_bytes());
    bytes[row * 16 + 8..row * 16 + 16].copy_from_slice(&w.to_le_bytes());
    reseal_block(prefix, b);
    Ok(())
}

/// The offset of a JPEG's SOF0 frame header's height field.
fn sof_dims(file: &[u8]) -> Result<usize> {
    match file.windows(2).position(|w| w == [0xff, 0xc0]) {
        Some(at) => Ok(at + 5),
        None => bail!("no SOF0 marker"),
    }
}

pub(super) fn encoded(em: &mut Emitter) -> Result<()> {
    em.valid(
        Spec::new(
            "v-encoded-0001-jpeg-png-columns",
            &["CMP-05", "CMP-06", "CMP-07", "DF-30", "FLG-08", "DUMP-04"],
            "two encoded image columns: `img` u8 [16, 16, 3] with two RGB JPEGs and an RGB PNG, one image \
             page each; `grey` u8 [?, ?] (layout hw, nullable) with a grey PNG, a null row in a zstd page and \
             a grey JPEG; the manifest sets reader flag ENCODED_IMAGES. Every JPEG is made of flat grey 8x8 \
             blocks at quality 100, which every conforming decoder decodes exactly",
        ),
        |input| encoded_base(input).map(drop),
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0001-truncated-jpeg",
            &["CMP-07", "VAL-12"],
            "the first image page of `img` holds only the first half of its JPEG (CRC re-sealed)",
        ),
        "malformed",
        "does not decode",
        |input| {
            let file = jpeg(16, 16, 3, 1)?;
            replace_file(input, IMG, 0, &file[..file.len() / 2])
        },
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0002-corrupt-png",
            &["CMP-07", "VAL-12"],
            "the PNG of `img` row 2 has one byte of its image data flipped, so its IDAT chunk CRC fails (block \
             CRC re-sealed)",
        ),
        "malformed",
        "does not decode",
        |input| {
            patch_file(input, IMG, 2, |file| {
                let Some(at) = file.windows(4).position(|w| w == b"IDAT") else { bail!("no IDAT") };
                file[at + 8] ^= 0x40;
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0003-jpeg-header-shape-differs",
            &["CMP-07", "VAL-12"],
            "the JPEG of `img` row 0 says 8 x 32 pixels in its frame header, the same byte count as the column's \
             16 x 16 but another shape (CRC re-sealed)",
        ),
        "invalid",
        "the row's shape",
        |input| {
            patch_file(input, IMG, 0, |file| {
                let at = sof_dims(file)?;
                file[at..at + 4].copy_from_slice(&[0, 8, 0, 32]);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0004-grey-jpeg-in-rgb-column",
            &["CMP-07", "VAL-12"],
            "the first image page of `img` [16, 16, 3] holds a grey (one-component) 16 x 16 JPEG (CRC re-sealed)",
        ),
        "invalid",
        "the row's shape",
        |input| replace_file(input, IMG, 0, &jpeg(16, 16, 1, 1)?),
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0005-header-declares-huge-image",
            &["CMP-07", "LIM-16", "DF-30"],
            "the PNG of `grey` row 0 declares 60000 x 60000 pixels in its IHDR (chunk CRC fixed) while the row's \
             shape is [5, 7]: refused from the header, before anything is allocated (CRC re-sealed)",
        ),
        "invalid",
        "the row's shape",
        |input| {
            patch_file(input, GREY, 0, |file| {
                png_dims(file, 60000, 60000);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0006-row-shape-over-limit",
            &["LIM-09", "LIM-16"],
            "`grey` row 0's shapes say [60000, 60000] (3.6e9 bytes, over the 256 MiB row limit) and its PNG's \
             IHDR says the same (both CRCs re-sealed)",
        ),
        "limit",
        "row 0 bytes",
        |input| {
            edit(input, |prefix, f| {
                grey_sizes(prefix, f, 0, 60000, 60000)?;
                let b = page(f, GREY, 0)?;
                png_dims(block_bytes(prefix, b), 60000, 60000);
                reseal_block(prefix, b);
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0007-image-codec-in-plain-column",
            &["CMP-06", "VAL-11"],
            "the basic dataset's `id` page (an i64 column with compression none) has codec Png (footer and \
             references re-sealed)",
        ),
        "invalid",
        "[CMP-06]",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_data_file(&m, FileLoc::default(), |_, f| {
                page(f, ID, 0)?.codec = Codec::Png;
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0008-image-page-with-two-rows",
            &["CMP-06", "VAL-11"],
            "`img` pages 0 and 1 merged into one JPEG page of 2 rows and raw_len 2 x 768 (its stored bytes are \
             the first JPEG; the second page's bytes are left as unreferenced padding)",
        ),
        "invalid",
        "[CMP-06]",
        |input| {
            edit(input, |_, f| {
                let c = chunk(f, IMG)?;
                c.pages.remove(1);
                c.pages[0].row_count = 2;
                c.pages[0].block.raw_len *= 2;
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0009-reader-flag-missing",
            &["FLG-08", "VAL-06"],
            "the encoded dataset's latest manifest has reader_flags 0: an encoded column without ENCODED_IMAGES",
        ),
        "invalid",
        "ENCODED_IMAGES",
        |input| {
            encoded_base(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_manifest(&m, |m| m.reader_flags = 0)
        },
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0010-encoded-i64-column",
            &["CMP-05", "VAL-06"],
            "the basic dataset's `id` column (i64, rank 0) says compression Encoded; the manifest sets \
             ENCODED_IMAGES",
        ),
        "invalid",
        "[CMP-05]",
        |input| {
            basic(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_manifest(&m, |m| {
                m.reader_flags = tessera::manifest::READER_FLAG_ENCODED_IMAGES;
                m.schema.columns[ID as usize].compression = Compression::Encoded;
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0011-image-page-over-ratio",
            &["DF-30", "LIM-08", "LIM-16"],
            "`grey` row 0's shapes say [4096, 4096] and its page's raw_len 16777216 while the page stores a \
             PNG of 80 bytes: more than 65536 raw bytes per stored byte, refused with the footer (shapes block \
             and footer re-sealed)",
        ),
        "limit",
        "raw length for",
        |input| {
            edit(input, |prefix, f| {
                grey_sizes(prefix, f, 0, 4096, 4096)?;
                let footer = f.clone();
                let b = page(f, GREY, 0)?;
                let mut file = png(7, 5, 1, 4)?;
                png_dims(&mut file, 4096, 4096);
                file.truncate(80);
                restore_block(prefix, &footer, b, &file)?;
                b.raw_len = 4096 * 4096;
                Ok(())
            })
        },
    )?;
    profile_cases(em)?;
    em.reject(
        Spec::new(
            "u-encoded-0001-future-reader-flag",
            &["FLG-03", "FLG-08"],
            "the encoded dataset's latest manifest sets reader flags 0x5: ENCODED_IMAGES and bit 2, which no \
             reader knows (a future image codec, say)",
        ),
        "unsupported",
        "unknown reader-required flags",
        |input| {
            encoded_base(input)?;
            let (ds, m) = main_key(input)?;
            ds.edit_manifest(&m, |m| m.reader_flags = 0b101)
        },
    )?;
    Ok(())
}

/// CMP-07's profile and file-end rules: interlaced PNG and WebP pages that every reader decodes;
/// JPEG frame types and colour transforms, chunk CRCs and bytes after the image that every reader
/// refuses.
fn profile_cases(em: &mut Emitter) -> Result<()> {
    em.valid(
        Spec::new(
            "v-encoded-0002-adam7-png-and-webp",
            &["CMP-06", "CMP-07", "DUMP-04"],
            "`img` u8 [16, 16, 3] with an Adam7-interlaced RGB PNG and a lossless (VP8L) RGB WebP, one image page \
             each; `grey` u8 [?, ?] (layout hw) with an Adam7-interlaced grey PNG of 5 x 7 pixels, whose first \
             passes hold no pixel of some rows and columns. Readers decode both interlace methods and WebP",
        ),
        |input| {
            let schema = Schema::new([
                Column::new("id", DType::I64, &[]),
                image_col("img", &[Fixed(16), Fixed(16), Fixed(3)], ImageLayout::Hwc),
                image_col("grey", &[Ragged, Ragged], ImageLayout::Hw),
            ])?;
            let mut img = ColumnData::empty(DType::U8, &[Fixed(16), Fixed(16), Fixed(3)], false);
            img.push_encoded(&png_adam7(16, 16, 3, 6))?;
            img.push_encoded(&webp_lossless(16, 16, 7)?)?;
            let mut grey = ColumnData::empty(DType::U8, &[Ragged, Ragged], false);
            grey.push_encoded(&png_adam7(7, 5, 1, 8))?;
            grey.push_encoded(&png_adam7(1, 1, 1, 9))?;
            let b = batch(vec![("id", ColumnData::from_scalars(&[0i64, 1])), ("img", img), ("grey", grey)])?;
            let mut clock = Clock::new();
            let ds = create(input, schema, &mut clock)?;
            ds.append(&b, "interlaced and webp", clock.tick())?;
            Ok(())
        },
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0012-jpeg-adobe-rgb",
            &["CMP-07"],
            "the JPEG of `img` row 0 (three components) carries an Adobe APP14 marker with transform 0 (RGB, not \
             YCbCr), which decoders disagree on (CRC re-sealed)",
        ),
        "invalid",
        "Adobe transform",
        |input| {
            let file = jpeg(16, 16, 3, 1)?;
            let mut out = file[..2].to_vec();
            out.extend_from_slice(&[0xff, 0xee, 0x00, 0x0e]);
            out.extend_from_slice(b"Adobe\x00\x64\x00\x00\x00\x00\x00");
            out.extend_from_slice(&file[2..]);
            replace_file_moved(input, IMG, 0, &out)
        },
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0013-jpeg-extended-sequential",
            &["CMP-07"],
            "the JPEG of `img` row 1 has its frame marker changed from SOF0 to SOF1 (extended sequential), a frame \
             type outside the profile (CRC re-sealed)",
        ),
        "invalid",
        "SOF1",
        |input| {
            patch_file(input, IMG, 1, |file| {
                let at = sof_dims(file)? - 4;
                file[at] = 0xc1;
                Ok(())
            })
        },
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0014-png-bytes-after-iend",
            &["CMP-07"],
            "the PNG of `img` row 2 is followed by 4 zero bytes after its IEND chunk (CRC re-sealed)",
        ),
        "malformed",
        "bytes follow the IEND chunk",
        |input| {
            let mut file = png(16, 16, 3, 3)?;
            file.extend_from_slice(&[0; 4]);
            replace_file_moved(input, IMG, 2, &file)
        },
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0015-jpeg-bytes-after-eoi",
            &["CMP-07"],
            "the JPEG of `img` row 0 is followed by 2 zero bytes after its EOI marker (CRC re-sealed)",
        ),
        "malformed",
        "bytes follow the EOI marker",
        |input| {
            let mut file = jpeg(16, 16, 3, 1)?;
            file.extend_from_slice(&[0; 2]);
            replace_file_moved(input, IMG, 0, &file)
        },
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0016-png-ancillary-chunk-crc",
            &["CMP-07"],
            "the PNG of `img` row 2 has a tEXt chunk after IHDR whose chunk CRC is wrong; decoders that skip \
             ancillary chunks unchecked must still check it (CRC re-sealed)",
        ),
        "malformed",
        "wrong CRC",
        |input| {
            let mut text = png_chunk(*b"tEXt", b"Comment\x00tessera");
            let last = text.len() - 1;
            text[last] ^= 0x01;
            replace_file_moved(input, IMG, 2, &after_ihdr(&png(16, 16, 3, 3)?, &text))
        },
    )?;
    em.reject(
        Spec::new(
            "n-encoded-0017-png-trns",
            &["CMP-07"],
            "the RGB PNG of `img` row 2 has a tRNS chunk (a transparent colour) before its IDAT (CRC re-sealed)",
        ),
        "invalid",
        "tRNS",
        |input| {
            let trns = png_chunk(*b"tRNS", &[0, 1, 0, 2, 0, 3]);
            replace_file_moved(input, IMG, 2, &after_ihdr(&png(16, 16, 3, 3)?, &trns))
        },
    )
}
