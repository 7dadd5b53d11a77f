//! Video files at ingest: MP4, MKV, `WebM`, MOV and AVI demuxed and decoded by `FFmpeg`'s
//! libraries (through `ffmpeg-next`), converted to RGB, optionally sampled in time (every k-th
//! frame, a target frame rate, at most N frames) and resized/centre-cropped like images, into
//! `u8 [frames, height, width, 3]`.
//!
//! Decoding is strict: a packet the demuxer or decoder rejects, or fewer frames than the
//! container declares, makes the file bad rather than silently shorter. Built only with the
//! cargo feature `video` (on by default); without it every video is a bad input that says so.

// Without FFmpeg the sampling and sizing code has no caller but its tests.
#![cfg_attr(not(feature = "video"), allow(dead_code))]

use std::path::Path;

use image::imageops::FilterType;

use super::media::{MediaError, VideoValue};

/// Extensions (lower case) decoded as video.
pub(crate) const VIDEO_EXTENSIONS: [&str; 6] = ["mp4", "m4v", "mkv", "webm", "mov", "avi"];

/// Which decoded frames are kept.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampling {
    /// Every frame, at the source's frame rate.
    All,
    /// Frames 0, k, 2k, …; the rate is the source's divided by k.
    Every(u32),
    /// The frame showing at each instant 0, 1/f, 2/f, … (frames repeat when the source is
    /// slower, are dropped when it is faster).
    Fps(f64),
}

/// How videos are decoded and shaped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct VideoOptions {
    /// Frame sampling in time.
    pub(crate) sampling: Sampling,
    /// Stop after this many kept frames.
    pub(crate) max_frames: Option<u32>,
    /// Target `(height, width)`: resize the shorter side, then centre-crop (as images).
    pub(crate) size: Option<(u32, u32)>,
    /// Resampling filter for resizing.
    pub(crate) filter: FilterType,
}

/// The largest frame side accepted from a container (`FFmpeg`'s own limit is larger; no video
/// a dataset wants is this big, and a lie about it must not size an allocation).
const MAX_SIDE: u32 = 16_384;

const TOO_LARGE_HINT: &str = "; pass --max-frames, --fps, --every or --size";

/// Decodes a video file.
///
/// # Errors
/// See [`MediaError`].
#[cfg(not(feature = "video"))]
pub(crate) fn decode_file(_path: &Path, _opts: &VideoOptions) -> Result<VideoValue, MediaError> {
    Err(MediaError::NoVideoSupport)
}

/// Decodes a video file.
///
/// # Errors
/// See [`MediaError`].
#[cfg(feature = "video")]
pub(crate) fn decode_file(path: &Path, opts: &VideoOptions) -> Result<VideoValue, MediaError> {
    ffmpeg_decode::decode_file(path, opts)
}

/// Decodes a video held in memory (a WebDataset member) from a temporary copy: `FFmpeg`'s
/// demuxers read files; `ext` names the container, as the member's extension did.
///
/// # Errors
/// See [`MediaError`].
pub(crate) fn decode_bytes(bytes: &[u8], ext: &str, opts: &VideoOptions) -> Result<VideoValue, MediaError> {
    #[cfg(feature = "video")]
    {
        use std::io::Write as _;
        let mut file = tempfile::Builder::new().prefix("tessera-video-").suffix(&format!(".{ext}")).tempfile()?;
        file.write_all(bytes)?;
        file.flush()?;
        decode_file(file.path(), opts)
    }
    #[cfg(not(feature = "video"))]
    {
        let _ = (bytes, ext, opts);
        Err(MediaError::NoVideoSupport)
    }
}

/// Keeps frames by time: which of the decoded frames to keep, and how often.
#[derive(Debug)]
struct Picker {
    sampling: Sampling,
    /// Source frames per second, when known.
    source_fps: Option<f64>,
    /// Decoded frames so far.
    seen: u64,
    /// The next instant (`Fps` sampling), in sample periods.
    next: u64,
}

impl Picker {
    fn new(sampling: Sampling, source_fps: Option<f64>) -> Self {
        Self { sampling, source_fps, seen: 0, next: 0 }
    }

    /// How many copies of a frame showing from `t` seconds to keep (0: drop it).
    fn copies(&mut self, t: Option<f64>) -> u32 {
        let index = self.seen;
        self.seen += 1;
        match self.sampling {
            Sampling::All => 1,
            Sampling::Every(k) => u32::from(index.is_multiple_of(u64::from(k.max(1)))),
            Sampling::Fps(f) => {
                let start = t.or_else(|| self.source_fps.map(|s| index as f64 / s)).unwrap_or(index as f64 / f);
                // The frame shows until the next one; without a known rate, for one period. It
                // is kept once for each instant k/f before its end not taken by earlier frames.
                let end = start + self.source_fps.map_or(1.0 / f, |s| 1.0 / s);
                let upto = (end * f - 1e-9).ceil().max(0.0) as u64;
                let n = upto.saturating_sub(self.next);
                self.next = self.next.max(upto);
                u32::try_from(n).unwrap_or(u32::MAX)
            }
        }
    }

    /// Frames per second × 1000 of the kept frames (0: unknown).
    fn fps_milli(&self) -> u32 {
        let fps = match self.sampling {
            Sampling::All => self.source_fps.unwrap_or(0.0),
            Sampling::Every(k) => self.source_fps.unwrap_or(0.0) / f64::from(k.max(1)),
            Sampling::Fps(f) => f,
        };
        (fps * 1000.0).round().clamp(0.0, f64::from(u32::MAX)) as u32
    }
}

#[cfg(feature = "video")]
mod ffmpeg_decode {
    use std::path::Path;
    use std::sync::OnceLock;

    use ffmpeg::format::Pixel;
    use ffmpeg::software::scaling::{Context as Scaler, Flags};
    use ffmpeg::util::frame::Video as Frame;
    use ffmpeg_next as ffmpeg;
    use image::{DynamicImage, RgbImage};

    use super::{MAX_SIDE, Picker, Sampling, TOO_LARGE_HINT, VideoOptions};
    use crate::input::imagefolder::resize_fill;
    use crate::input::media::{MAX_CLIP_BYTES, MediaError, VideoValue};

    /// Initialises `FFmpeg` once and silences its log (errors reach the user through ours).
    fn init() -> Result<(), MediaError> {
        static INIT: OnceLock<Result<(), String>> = OnceLock::new();
        INIT.get_or_init(|| {
            ffmpeg::init().map_err(|e| e.to_string())?;
            ffmpeg::util::log::set_level(ffmpeg::util::log::Level::Quiet);
            Ok(())
        })
        .clone()
        .map_err(|reason| MediaError::Unsupported { kind: "video", reason })
    }

    fn corrupt(e: ffmpeg::Error) -> MediaError {
        MediaError::Corrupt { kind: "video", reason: e.to_string() }
    }

    /// A rational as f64, `None` when zero or undefined.
    fn rate(r: ffmpeg::Rational) -> Option<f64> {
        (r.numerator() > 0 && r.denominator() > 0).then(|| f64::from(r.numerator()) / f64::from(r.denominator()))
    }

    /// The decode loop's state: the picker, the scaler and the kept frames.
    struct Sink<'a> {
        opts: &'a VideoOptions,
        picker: Picker,
        scaler: Scaler,
        rgb: Frame,
        /// Native size.
        size: (u32, u32),
        /// Kept size (after `--size`).
        out: (u32, u32),
        pixels: Vec<u8>,
        kept: u32,
        time_base: f64,
        start: Option<i64>,
    }

    impl Sink<'_> {
        fn full(&self) -> bool {
            self.opts.max_frames.is_some_and(|m| self.kept >= m)
        }

        /// Converts, samples and keeps one decoded frame.
        fn push(&mut self, frame: &Frame) -> Result<(), MediaError> {
            if (frame.width(), frame.height()) != self.size {
                return Err(MediaError::Corrupt { kind: "video", reason: "frame size changes mid-stream".into() });
            }
            // Seconds since the stream's start; `None` without timestamps (the picker then
            // counts frames at the stream's rate).
            let t = frame
                .timestamp()
                .filter(|_| self.time_base > 0.0)
                .map(|ts| ts.saturating_sub(self.start.unwrap_or(0)) as f64 * self.time_base);
            let copies = self.picker.copies(t);
            if copies == 0 || self.full() {
                return Ok(());
            }
            self.scaler.run(frame, &mut self.rgb).map_err(corrupt)?;
            let (w, h) = self.size;
            let row = w as usize * 3;
            let stride = self.rgb.stride(0);
            let data = self.rgb.data(0);
            let mut packed = Vec::with_capacity(row * h as usize);
            for y in 0..h as usize {
                let line = data.get(y * stride..y * stride + row).ok_or_else(|| MediaError::Corrupt {
                    kind: "video",
                    reason: "converted frame is smaller than its size".into(),
                })?;
                packed.extend_from_slice(line);
            }
            let packed = match self.opts.size {
                Some((th, tw)) => {
                    let img = RgbImage::from_raw(w, h, packed).ok_or(MediaError::Empty("video frame"))?;
                    resize_fill(DynamicImage::ImageRgb8(img), tw, th, self.opts.filter).into_rgb8().into_raw()
                }
                None => packed,
            };
            for _ in 0..copies {
                if self.full() {
                    break;
                }
                if (self.pixels.len() + packed.len()) as u64 > MAX_CLIP_BYTES {
                    return Err(MediaError::TooLarge { hint: TOO_LARGE_HINT });
                }
                self.pixels.extend_from_slice(&packed);
                self.kept += 1;
            }
            Ok(())
        }
    }

    /// Receives every frame the decoder has ready.
    fn drain(decoder: &mut ffmpeg::decoder::Video, sink: &mut Sink<'_>, frame: &mut Frame) -> Result<(), MediaError> {
        loop {
            match decoder.receive_frame(frame) {
                Ok(()) => sink.push(frame)?,
                Err(ffmpeg::Error::Eof) => return Ok(()),
                Err(ffmpeg::Error::Other { errno }) if errno == ffmpeg::util::error::EAGAIN => return Ok(()),
                Err(e) => return Err(corrupt(e)),
            }
        }
    }

    /// The frames a stream should decode to, and how many fewer still count as whole: the
    /// container's frame count exactly (MP4), else its duration times the frame rate (Matroska
    /// and `WebM` declare no count), give or take 2% for rounding and variable frame rates. A
    /// stream cut short (a truncated download) decodes to fewer.
    fn expected_frames(count: i64, seconds: Option<f64>, fps: Option<f64>) -> Option<(u64, u64)> {
        if count > 0 {
            return Some((count as u64, 0));
        }
        let n = (seconds? * fps?).round();
        (1.0..1e12).contains(&n).then(|| (n as u64, (n as u64 / 50).max(1)))
    }

    pub(super) fn decode_file(path: &Path, opts: &VideoOptions) -> Result<VideoValue, MediaError> {
        init()?;
        if !path.is_file() {
            return Err(MediaError::Io(std::io::Error::new(std::io::ErrorKind::NotFound, "no such file")));
        }
        let mut input = ffmpeg::format::input(path)
            .map_err(|e| MediaError::Unsupported { kind: "video", reason: e.to_string() })?;
        let stream = input.streams().best(ffmpeg::media::Type::Video).ok_or(MediaError::NoStream("video"))?;
        let index = stream.index();
        let time_base = rate(stream.time_base()).unwrap_or(0.0);
        let start = Some(stream.start_time()).filter(|&s| s != ffmpeg::ffi::AV_NOPTS_VALUE);
        let source_fps = rate(stream.avg_frame_rate()).or_else(|| rate(stream.rate()));
        let seconds = if stream.duration() > 0 && time_base > 0.0 {
            Some(stream.duration() as f64 * time_base)
        } else {
            (input.duration() > 0).then(|| input.duration() as f64 / f64::from(ffmpeg::ffi::AV_TIME_BASE))
        };
        let declared = expected_frames(stream.frames(), seconds, source_fps);
        if matches!(opts.sampling, Sampling::Fps(_)) && source_fps.is_none() && time_base == 0.0 {
            return Err(MediaError::Unsupported {
                kind: "video",
                reason: "no frame rate or timestamps to sample --fps by".into(),
            });
        }
        let context = ffmpeg::codec::context::Context::from_parameters(stream.parameters())
            .map_err(|e| MediaError::Unsupported { kind: "video", reason: e.to_string() })?;
        let mut decoder =
            context.decoder().video().map_err(|e| MediaError::Unsupported { kind: "video", reason: e.to_string() })?;
        let (w, h) = (decoder.width(), decoder.height());
        if w == 0 || h == 0 || w > MAX_SIDE || h > MAX_SIDE {
            return Err(MediaError::BadDimensions { what: format!("frame size {w}x{h} (at most {MAX_SIDE} a side)") });
        }
        let out = opts.size.map_or((w, h), |(th, tw)| (tw, th));
        let frame_bytes = u64::from(out.0) * u64::from(out.1) * 3;
        if frame_bytes.max(u64::from(w) * u64::from(h) * 3) > MAX_CLIP_BYTES {
            return Err(MediaError::TooLarge { hint: TOO_LARGE_HINT });
        }
        // BITEXACT asks swscale for output that does not depend on the CPU's SIMD paths, so
        // the same clip ingests to the same bytes everywhere (on an AVX2 machine it gave the
        // bytes of the default flags). ACCURATE_RND is left out: it changes the conversion
        // itself (chroma handling), by up to 193 levels against ffmpeg's default.
        let flags = Flags::BILINEAR | Flags::BITEXACT;
        let scaler = Scaler::get(decoder.format(), w, h, Pixel::RGB24, w, h, flags)
            .map_err(|e| MediaError::Unsupported { kind: "video", reason: e.to_string() })?;
        let mut sink = Sink {
            opts,
            picker: Picker::new(opts.sampling, source_fps),
            scaler,
            rgb: Frame::empty(),
            size: (w, h),
            out,
            pixels: Vec::new(),
            kept: 0,
            time_base,
            start,
        };
        let mut frame = Frame::empty();
        let mut packet = ffmpeg::Packet::empty();
        loop {
            match packet.read(&mut input) {
                Ok(()) => {}
                Err(ffmpeg::Error::Eof) => break,
                Err(e) => return Err(corrupt(e)),
            }
            if packet.stream() != index {
                continue;
            }
            decoder.send_packet(&packet).map_err(corrupt)?;
            drain(&mut decoder, &mut sink, &mut frame)?;
            if sink.full() {
                break;
            }
        }
        if !sink.full() {
            decoder.send_eof().map_err(corrupt)?;
            drain(&mut decoder, &mut sink, &mut frame)?;
            if let Some((declared, slack)) = declared
                && sink.picker.seen + slack < declared
            {
                return Err(MediaError::Truncated { kind: "video", decoded: sink.picker.seen, declared });
            }
        }
        if sink.kept == 0 {
            return Err(MediaError::Empty("video frames"));
        }
        let (width, height) = sink.out;
        Ok(VideoValue { fps_milli: sink.picker.fps_milli(), frames: sink.kept, height, width, pixels: sink.pixels })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(sampling: Sampling, source: Option<f64>, frames: u32) -> Vec<u32> {
        let mut p = Picker::new(sampling, source);
        (0..frames).map(|i| p.copies(source.map(|s| f64::from(i) / s))).collect()
    }

    #[test]
    fn frame_sampling() {
        assert_eq!(kept(Sampling::All, Some(25.0), 3), [1, 1, 1]);
        assert_eq!(kept(Sampling::Every(3), Some(25.0), 7), [1, 0, 0, 1, 0, 0, 1]);
        // Halving the rate keeps every other frame; doubling it repeats each.
        assert_eq!(kept(Sampling::Fps(12.5), Some(25.0), 6), [1, 0, 1, 0, 1, 0]);
        assert_eq!(kept(Sampling::Fps(50.0), Some(25.0), 3), [2, 2, 2]);
        assert_eq!(Picker::new(Sampling::Every(2), Some(25.0)).fps_milli(), 12_500);
        assert_eq!(Picker::new(Sampling::All, None).fps_milli(), 0);
    }
}
