//! Image pages of encoded columns: one JPEG, PNG or WebP file per row, decoded straight into
//! the caller's buffer (SPEC.md §"Encoded image columns", `[CMP-05]`..`[CMP-09]`, `[DF-30]`,
//! `[LIM-16]`).
//!
//! The one rule that keeps hostile files harmless: a file's own width and height are read
//! first, from its header, and must equal the row's shape, which the footer and the shapes
//! block have already bounded (`[LIM-09]`). Only then is anything decoded, into the caller's
//! buffer of exactly that size; the decoders never allocate an image of their own.
//!
//! ```text
//! sniff(file) ─► codec        (writers: which image codec a file is)
//! read_header(codec, file) ─► ImageHeader { height, width, channels }   no pixels
//! decode_into(codec, file, row_shape, out)  header == row shape, then pixels into `out`
//! ```
//! Decoders: zune-jpeg (strict mode), png, image-webp.

use std::io::Cursor;

use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

use crate::error::{Error, Result};
use crate::schema::Codec;

/// What an image file's header says about its decoded pixels `[CMP-07]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageHeader {
    /// Rows of pixels.
    pub height: u64,
    /// Pixels per row.
    pub width: u64,
    /// Interleaved channels per pixel (1 grey, 2 grey + alpha, 3 RGB, 4 RGBA).
    pub channels: u64,
}

impl ImageHeader {
    /// The decoded shape for a column of rank `rank`: `[h, w, c]`, or `[h, w]` for rank 2
    /// (layout `Hw`, where `c` must be 1).
    #[must_use]
    pub fn shape(&self, rank: usize) -> Vec<u64> {
        if rank == 2 { vec![self.height, self.width] } else { vec![self.height, self.width, self.channels] }
    }

    /// Decoded bytes, `h × w × c` (saturating: a header cannot overflow this, dims are `u32`).
    #[must_use]
    pub fn decoded_bytes(&self) -> u64 {
        self.height.saturating_mul(self.width).saturating_mul(self.channels)
    }
}

/// The image codec of an encoded file, from its magic bytes; `None` for anything else.
#[must_use]
pub fn sniff(file: &[u8]) -> Option<Codec> {
    if file.starts_with(&[0xff, 0xd8, 0xff]) {
        Some(Codec::Jpeg)
    } else if file.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(Codec::Png)
    } else if file.len() >= 12 && &file[..4] == b"RIFF" && &file[8..12] == b"WEBP" {
        Some(Codec::WebP)
    } else {
        None
    }
}

/// Reads an image file's header without decoding any pixel `[CMP-07]`.
///
/// # Errors
/// `malformed` if the header cannot be read; `invalid` for a file outside the profile of
/// `[CMP-07]` (a JPEG with other than 1 or 3 components, a PNG that is not 8-bit grey, grey +
/// alpha, RGB or RGBA without `tRNS`, an animated WebP); `usage` for a codec that is not an
/// image codec.
pub fn read_header(codec: Codec, file: &[u8], what: &dyn Fn() -> String) -> Result<ImageHeader> {
    match codec {
        Codec::Jpeg => {
            jpeg_profile(&jpeg_frame(file, what)?, what)?;
            jpeg_header(&mut jpeg_decoder(file), what)
        }
        Codec::Png => png_header(file, what).map(|(h, _)| h),
        Codec::WebP => webp_header(&webp_decoder(file, what)?, what),
        Codec::None | Codec::Lz4 | Codec::Zstd => {
            Err(Error::usage(format!("{}: {} is not an image codec", what(), codec.name())))
        }
    }
}

/// Decodes one image page into `out` `[CMP-07]` `[DF-30]`: checks the file's header against
/// `row_shape` (`[h, w, c]`, or `[h, w]` for a single channel) before decoding anything, then
/// decodes exactly `out.len()` bytes into `out`.
///
/// # Errors
/// `invalid` if the header's shape differs from `row_shape` or is outside the profile;
/// `malformed` for a corrupt or truncated file; `usage` if `out` is not the row's size.
pub fn decode_into(
    codec: Codec,
    file: &[u8],
    row_shape: &[u64],
    out: &mut [u8],
    what: &dyn Fn() -> String,
) -> Result<()> {
    let check = |h: &ImageHeader| -> Result<()> {
        if h.shape(row_shape.len()) != row_shape || (row_shape.len() == 2 && h.channels != 1) {
            return Err(Error::invalid(
                what(),
                format!(
                    "{} file is {}x{}x{}, the row's shape is {row_shape:?} [CMP-07]",
                    codec.name(),
                    h.height,
                    h.width,
                    h.channels
                ),
            ));
        }
        if h.decoded_bytes() != out.len() as u64 {
            return Err(Error::usage(format!("{}: output of {} bytes for a {row_shape:?} image", what(), out.len())));
        }
        Ok(())
    };
    let corrupt =
        |e: &dyn std::fmt::Display| Error::malformed(what(), format!("{} file does not decode: {e}", codec.name()));
    match codec {
        Codec::Jpeg => {
            jpeg_profile(&jpeg_frame(file, what)?, what)?;
            let mut d = jpeg_decoder(file);
            let h = jpeg_header(&mut d, what)?;
            check(&h)?;
            let space = if h.channels == 1 { ColorSpace::Luma } else { ColorSpace::RGB };
            d.set_options(jpeg_options(&h).jpeg_set_out_colorspace(space));
            d.decode_into(out).map_err(|e| corrupt(&e))?;
            jpeg_ends_at_eoi(file, what)
        }
        Codec::Png => {
            let (h, decoder) = png_header(file, what)?;
            check(&h)?;
            let mut reader = decoder.read_info().map_err(|e| corrupt(&e))?;
            png_profile(reader.info(), what)?;
            let info = reader.next_frame(out).map_err(|e| corrupt(&e))?;
            if info.buffer_size() != out.len() {
                return Err(corrupt(&"the frame does not fill the image"));
            }
            reader.finish().map_err(|e| corrupt(&e))?;
            png_chunks(file, true, what).map(|_| ())
        }
        Codec::WebP => {
            let mut d = webp_decoder(file, what)?;
            check(&webp_header(&d, what)?)?;
            d.read_image(out).map_err(|e| corrupt(&e))?;
            webp_riff_size(file, what)
        }
        Codec::None | Codec::Lz4 | Codec::Zstd => {
            Err(Error::usage(format!("{}: {} is not an image codec", what(), codec.name())))
        }
    }
}

/// Checks an encoded file for a row of shape `row_shape` the way a writer must `[CMP-09]`:
/// decodes it fully (into a buffer the size of the row, which the caller has bounded) and
/// returns the pixels.
///
/// # Errors
/// As [`decode_into`]; `usage` if `row_shape`'s size does not fit in memory.
pub fn decode(codec: Codec, file: &[u8], row_shape: &[u64], what: &dyn Fn() -> String) -> Result<Vec<u8>> {
    let n = row_shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).and_then(|n| usize::try_from(n).ok());
    let n = n.ok_or_else(|| Error::usage(format!("{}: row shape {row_shape:?} is too large", what())))?;
    let header = read_header(codec, file, what)?;
    if header.shape(row_shape.len()) != row_shape {
        // Refuse before allocating `n` bytes for a file that cannot fill them.
        return decode_into(codec, file, row_shape, &mut [], what).map(|()| Vec::new());
    }
    let mut out = vec![0u8; n];
    decode_into(codec, file, row_shape, &mut out, what)?;
    Ok(out)
}

fn jpeg_options(h: &ImageHeader) -> DecoderOptions {
    // Strict: a truncated or corrupt scan is an error, never grey filler. The size bounds make
    // zune-jpeg itself refuse anything larger than the header it already read.
    let w = usize::try_from(h.width).unwrap_or(usize::MAX);
    let ht = usize::try_from(h.height).unwrap_or(usize::MAX);
    DecoderOptions::default().set_strict_mode(true).set_max_width(w).set_max_height(ht)
}

fn jpeg_decoder(file: &[u8]) -> JpegDecoder<ZCursor<&[u8]>> {
    let opts = DecoderOptions::default().set_strict_mode(true).set_max_width(1 << 16).set_max_height(1 << 16);
    JpegDecoder::new_with_options(ZCursor::new(file), opts)
}

fn jpeg_header(d: &mut JpegDecoder<ZCursor<&[u8]>>, what: &dyn Fn() -> String) -> Result<ImageHeader> {
    d.decode_headers().map_err(|e| Error::malformed(what(), format!("jpeg header does not decode: {e}")))?;
    let info = d.info().ok_or_else(|| Error::malformed(what(), "jpeg header does not decode"))?;
    let channels = match info.components {
        1 => 1,
        3 => 3,
        n => return Err(Error::invalid(what(), format!("jpeg with {n} components; 1 or 3 are allowed [CMP-07]"))),
    };
    Ok(ImageHeader { height: u64::from(info.height), width: u64::from(info.width), channels })
}

fn png_header<'a>(file: &'a [u8], what: &dyn Fn() -> String) -> Result<(ImageHeader, png::Decoder<Cursor<&'a [u8]>>)> {
    if png_chunks(file, false, what)? {
        return Err(Error::invalid(
            what(),
            "png with a tRNS chunk; allowed: 8-bit grey, grey+alpha, RGB, RGBA [CMP-07]",
        ));
    }
    let mut d = png::Decoder::new(Cursor::new(file));
    d.set_transformations(png::Transformations::IDENTITY);
    let info =
        d.read_header_info().map_err(|e| Error::malformed(what(), format!("png header does not decode: {e}")))?;
    png_profile(info, what)?;
    let channels = match info.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        _ => 4,
    };
    let h = ImageHeader { height: u64::from(info.height), width: u64::from(info.width), channels };
    Ok((h, d))
}

/// 8-bit grey, grey + alpha, RGB or RGBA, no `tRNS`, not animated `[CMP-07]`.
fn png_profile(info: &png::Info<'_>, what: &dyn Fn() -> String) -> Result<()> {
    let fail = |why: &str| {
        Err(Error::invalid(what(), format!("png {why}; allowed: 8-bit grey, grey+alpha, RGB, RGBA [CMP-07]")))
    };
    if info.bit_depth != png::BitDepth::Eight {
        return fail(&format!("of bit depth {}", info.bit_depth as u8));
    }
    if info.color_type == png::ColorType::Indexed {
        return fail("with a palette");
    }
    if info.trns.is_some() {
        return fail("with a tRNS chunk");
    }
    if info.animation_control.is_some() {
        return fail("that is animated");
    }
    Ok(())
}

/// What a JPEG's markers up to its first SOS say `[CMP-07]` step 1.
#[derive(Debug, Default)]
struct JpegFrame {
    /// The `SOFn` marker's second byte (`0xC0` baseline, `0xC2` progressive, …).
    sof: u8,
    precision: u8,
    component_ids: Vec<u8>,
    jfif: bool,
    /// The transform byte of an Adobe APP14 marker.
    adobe_transform: Option<u8>,
}

/// Walks a JPEG's markers from SOI to the first SOS `[CMP-07]` step 1: `malformed` if they do
/// not parse, or if no frame header precedes the scan.
fn jpeg_frame(file: &[u8], what: &dyn Fn() -> String) -> Result<JpegFrame> {
    let bad = |why: &str| Error::malformed(what(), format!("jpeg header does not decode: {why} [CMP-07]"));
    if !file.starts_with(&[0xff, 0xd8]) {
        return Err(bad("no SOI marker"));
    }
    let mut frame = JpegFrame::default();
    let mut seen_sof = false;
    let mut at = 2usize;
    loop {
        // A marker: 0xFF, optional 0xFF fill bytes, then the code.
        if file.get(at) != Some(&0xff) {
            return Err(bad("a marker was expected"));
        }
        while file.get(at) == Some(&0xff) {
            at += 1;
        }
        let code = *file.get(at).ok_or_else(|| bad("truncated marker"))?;
        at += 1;
        if matches!(code, 0x01 | 0xd0..=0xd7) {
            continue; // no length
        }
        if code == 0xd8 || code == 0xd9 {
            return Err(bad("SOI or EOI before the first scan"));
        }
        let len = file.get(at..at + 2).map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])));
        let len = len.filter(|&l| l >= 2).ok_or_else(|| bad("truncated or short segment length"))?;
        let body = file.get(at + 2..at + len).ok_or_else(|| bad("a segment runs past the end of the file"))?;
        at += len;
        match code {
            0xe0 if body.starts_with(b"JFIF\0") => frame.jfif = true,
            0xee if body.starts_with(b"Adobe") => {
                frame.adobe_transform = Some(*body.get(11).ok_or_else(|| bad("short Adobe APP14 segment"))?);
            }
            0xc0..=0xcf if !matches!(code, 0xc4 | 0xc8 | 0xcc) => {
                if seen_sof {
                    return Err(bad("a second frame header"));
                }
                seen_sof = true;
                let n = usize::from(*body.get(5).ok_or_else(|| bad("short frame header"))?);
                if body.len() != 6 + 3 * n {
                    return Err(bad("frame header length does not match its components"));
                }
                frame.sof = code;
                frame.precision = body[0];
                frame.component_ids = (0..n).map(|i| body[6 + 3 * i]).collect();
            }
            0xda => {
                return if seen_sof { Ok(frame) } else { Err(bad("a scan before the frame header")) };
            }
            _ => {}
        }
    }
}

/// The JPEG profile of `[CMP-07]` step 2: SOF0 or SOF2, 8-bit samples, and three components
/// only as `YCbCr` (an Adobe transform other than 1, or R/G/B component ids without a JFIF or
/// Adobe marker, is `invalid`: decoders disagree on whether such a file is RGB).
fn jpeg_profile(f: &JpegFrame, what: &dyn Fn() -> String) -> Result<()> {
    let fail = |why: String| Err(Error::invalid(what(), format!("jpeg {why} [CMP-07]")));
    if f.sof != 0xc0 && f.sof != 0xc2 {
        return fail(format!(
            "frame type SOF{}; only SOF0 (baseline) and SOF2 (progressive) are allowed",
            f.sof - 0xc0
        ));
    }
    if f.precision != 8 {
        return fail(format!("of {}-bit samples; 8 are required", f.precision));
    }
    if f.component_ids.len() == 3 {
        if f.adobe_transform.is_some_and(|t| t != 1) {
            return fail("of 3 components with an Adobe transform other than YCbCr".into());
        }
        if !f.jfif && f.adobe_transform.is_none() && f.component_ids == b"RGB" {
            return fail("of 3 components with ids R, G, B and no JFIF or Adobe marker".into());
        }
    }
    Ok(())
}

/// `[CMP-07]` step 4: the file ends with the EOI marker that ends its last scan, nothing after.
/// Entropy-coded data hides no marker (`0xFF` is followed by 0x00 or a restart marker there), so
/// the first EOI found by walking markers and scans ends the image.
fn jpeg_ends_at_eoi(file: &[u8], what: &dyn Fn() -> String) -> Result<()> {
    let bad = |why: &str| Error::malformed(what(), format!("jpeg file does not decode: {why} [CMP-07]"));
    let mut at = 2usize;
    let mut in_scan = false;
    while at < file.len() {
        if in_scan {
            // Skip entropy-coded bytes up to the next marker that is not a stuffed 0xFF or RSTn.
            match file[at..].windows(2).position(|w| w[0] == 0xff && !matches!(w[1], 0x00 | 0xd0..=0xd7 | 0xff)) {
                Some(p) => at += p,
                None => return Err(bad("the last scan has no EOI")),
            }
            in_scan = false;
        }
        while file.get(at) == Some(&0xff) && file.get(at + 1) == Some(&0xff) {
            at += 1;
        }
        if file.get(at) != Some(&0xff) {
            return Err(bad("a marker was expected"));
        }
        let code = *file.get(at + 1).ok_or_else(|| bad("truncated marker"))?;
        at += 2;
        match code {
            0xd9 if at == file.len() => return Ok(()),
            0xd9 => return Err(bad("bytes follow the EOI marker")),
            0x01 | 0xd0..=0xd7 => {}
            _ => {
                let len = file.get(at..at + 2).map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])));
                at += len.filter(|&l| l >= 2).ok_or_else(|| bad("truncated segment"))?;
                in_scan = code == 0xda;
            }
        }
    }
    Err(bad("the file does not end with EOI"))
}

/// Walks a PNG's chunks, verifying every CRC `[CMP-07]`: up to the first `IDAT` (step 1), or,
/// with `whole`, to an `IEND` that ends the file (step 4). Returns whether a `tRNS` chunk came
/// before the first `IDAT`.
fn png_chunks(file: &[u8], whole: bool, what: &dyn Fn() -> String) -> Result<bool> {
    let stage = if whole { "file" } else { "header" };
    let bad = |why: String| Error::malformed(what(), format!("png {stage} does not decode: {why} [CMP-07]"));
    if !file.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Err(bad("no PNG signature".into()));
    }
    let (mut at, mut trns) = (8usize, false);
    loop {
        let head = file.get(at..at + 8).ok_or_else(|| bad("truncated chunk header".into()))?;
        let len = usize::try_from(u32::from_be_bytes([head[0], head[1], head[2], head[3]])).unwrap_or(usize::MAX);
        let kind: [u8; 4] = [head[4], head[5], head[6], head[7]];
        let end = at.checked_add(12).and_then(|x| x.checked_add(len)).filter(|&e| e <= file.len());
        let end =
            end.ok_or_else(|| bad(format!("chunk {} runs past the end of the file", String::from_utf8_lossy(&kind))))?;
        if &kind == b"IDAT" && !whole {
            return Ok(trns); // image data: step 4 checks it
        }
        let stored = u32::from_be_bytes([file[end - 4], file[end - 3], file[end - 2], file[end - 1]]);
        if crc32fast::hash(&file[at + 4..end - 4]) != stored {
            return Err(bad(format!("chunk {} has a wrong CRC", String::from_utf8_lossy(&kind))));
        }
        at = end;
        match &kind {
            b"IEND" if at == file.len() => return Ok(trns),
            b"IEND" => return Err(bad("bytes follow the IEND chunk".into())),
            b"tRNS" => trns = true,
            _ => {}
        }
    }
}

/// `[CMP-07]` step 4: the RIFF size of a WebP file covers exactly the rest of the file.
fn webp_riff_size(file: &[u8], what: &dyn Fn() -> String) -> Result<()> {
    let size = file.get(4..8).map(|b| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])));
    if size.and_then(|s| s.checked_add(8)) == Some(file.len() as u64) {
        Ok(())
    } else {
        Err(Error::malformed(what(), "webp file does not decode: the RIFF size is not the file size - 8 [CMP-07]"))
    }
}

fn webp_decoder<'a>(file: &'a [u8], what: &dyn Fn() -> String) -> Result<image_webp::WebPDecoder<Cursor<&'a [u8]>>> {
    image_webp::WebPDecoder::new(Cursor::new(file))
        .map_err(|e| Error::malformed(what(), format!("webp header does not decode: {e}")))
}

fn webp_header(d: &image_webp::WebPDecoder<Cursor<&[u8]>>, what: &dyn Fn() -> String) -> Result<ImageHeader> {
    if d.is_animated() {
        return Err(Error::invalid(what(), "animated webp [CMP-07]"));
    }
    let (w, h) = d.dimensions();
    Ok(ImageHeader { height: u64::from(h), width: u64::from(w), channels: if d.has_alpha() { 4 } else { 3 } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    fn w() -> String {
        "t".into()
    }

    fn png(width: u32, height: u32, color: png::ColorType, pixels: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut enc = png::Encoder::new(&mut out, width, height);
        enc.set_color(color);
        enc.set_depth(png::BitDepth::Eight);
        let mut writer = enc.write_header().unwrap();
        writer.write_image_data(pixels).unwrap();
        writer.finish().unwrap();
        out
    }

    #[test]
    fn png_round_trips_and_checks_the_shape_first() {
        let pixels: Vec<u8> = (0..4 * 3 * 3).map(|i| (i * 7) as u8).collect();
        let file = png(3, 4, png::ColorType::Rgb, &pixels);
        assert_eq!(sniff(&file), Some(Codec::Png));
        assert_eq!(read_header(Codec::Png, &file, &w).unwrap(), ImageHeader { height: 4, width: 3, channels: 3 });
        assert_eq!(decode(Codec::Png, &file, &[4, 3, 3], &w).unwrap(), pixels);
        // Same byte count, other shape: invalid before decoding.
        assert_eq!(decode(Codec::Png, &file, &[3, 4, 3], &w).unwrap_err().class(), ErrorClass::Invalid);
        assert_eq!(decode(Codec::Png, &file, &[4, 3], &w).unwrap_err().class(), ErrorClass::Invalid);
        let mut cut = file.clone();
        cut.truncate(file.len() - 20);
        assert_eq!(decode(Codec::Png, &cut, &[4, 3, 3], &w).unwrap_err().class(), ErrorClass::Malformed);
    }

    #[test]
    fn grey_png_fits_an_hw_column() {
        let file = png(2, 2, png::ColorType::Grayscale, &[1, 2, 3, 4]);
        assert_eq!(decode(Codec::Png, &file, &[2, 2], &w).unwrap(), [1, 2, 3, 4]);
        assert_eq!(decode(Codec::Png, &file, &[2, 2, 1], &w).unwrap(), [1, 2, 3, 4]);
    }

    #[test]
    fn a_huge_header_is_refused_without_allocating() {
        // A PNG header claiming 60000 x 60000 RGB (10 GB) for a row of 8 x 8 x 3.
        let mut file = png(1, 1, png::ColorType::Rgb, &[0, 0, 0]);
        file[16..20].copy_from_slice(&60000u32.to_be_bytes());
        file[20..24].copy_from_slice(&60000u32.to_be_bytes());
        let crc = crc32fast::hash(&file[12..29]);
        file[29..33].copy_from_slice(&crc.to_be_bytes());
        let h = read_header(Codec::Png, &file, &w).unwrap();
        assert_eq!(h.decoded_bytes(), 60000 * 60000 * 3);
        assert_eq!(decode(Codec::Png, &file, &[8, 8, 3], &w).unwrap_err().class(), ErrorClass::Invalid);
    }

    #[test]
    fn garbage_is_malformed_and_not_an_image_codec_is_usage() {
        assert_eq!(sniff(b"hello"), None);
        for c in [Codec::Jpeg, Codec::Png, Codec::WebP] {
            assert_eq!(read_header(c, b"\xff\xd8\xff\x00garbage", &w).unwrap_err().class(), ErrorClass::Malformed);
        }
        assert_eq!(read_header(Codec::Zstd, b"", &w).unwrap_err().class(), ErrorClass::Usage);
    }
}
