//! What audio and video ingest share: the decoded values, their typed errors, the per-clip
//! size budget, and how a decoded clip fits a column of kind audio or video (SPEC §3.5).

use std::path::Path;
use std::sync::Arc;

use tessera::{Column, DType, Dim, Kind};

use super::audio::AudioOptions;
use super::video::VideoOptions;
use super::{Bad, Decoded, Sample, Value};

/// The most bytes one decoded clip may take: the largest row a column can hold (LIM-09), so a
/// hostile header (huge dimensions, endless frames) stops the decode before memory does.
pub(crate) const MAX_CLIP_BYTES: u64 = tessera::limits::hard::MAX_ROW_BYTES;

/// Decoded audio: samples interleaved as `[samples, channels]` (SPEC KND-04), or `[samples]`
/// when downmixed to mono.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AudioValue {
    /// Samples per second.
    pub(crate) sample_rate: u32,
    /// `[samples]` or `[samples, channels]`.
    pub(crate) shape: Vec<u64>,
    /// `i16` or `f32`.
    pub(crate) dtype: DType,
    /// Little-endian samples, frame by frame.
    pub(crate) bytes: Vec<u8>,
}

/// Decoded video: `[frames, height, width, 3]` RGB bytes (SPEC KND-03).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct VideoValue {
    /// Frames per second × 1000 of the kept frames; 0 when the source does not say.
    pub(crate) fps_milli: u32,
    /// Kept frames.
    pub(crate) frames: u32,
    /// Rows.
    pub(crate) height: u32,
    /// Columns.
    pub(crate) width: u32,
    /// The pixels, frame after frame, each HWC.
    pub(crate) pixels: Vec<u8>,
}

/// Why a media file could not be decoded. Shown after the input's path; the ingest reports it
/// as a data fault (or skips the input with `--skip-bad`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum MediaError {
    /// The file could not be read.
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    /// No demuxer or decoder recognises the data.
    #[error("not a supported {kind} file: {reason}")]
    Unsupported {
        /// `audio` or `video`.
        kind: &'static str,
        /// The decoder's words.
        reason: String,
    },
    /// The container has no stream of the kind asked for.
    #[error("no {0} stream")]
    NoStream(&'static str),
    /// The stream stops decoding part-way.
    #[error("corrupt {kind} stream: {reason}")]
    Corrupt {
        /// `audio` or `video`.
        kind: &'static str,
        /// The decoder's words.
        reason: String,
    },
    /// Fewer frames decoded than the container declares.
    #[error("truncated {kind} stream: decoded {decoded} of {declared} declared frames")]
    Truncated {
        /// `audio` or `video`.
        kind: &'static str,
        /// Frames decoded.
        decoded: u64,
        /// Frames the container declares.
        declared: u64,
    },
    /// The declared dimensions are out of range.
    #[error("declared {what} is out of range")]
    BadDimensions {
        /// What (e.g. `size 100000x100000`).
        what: String,
    },
    /// The decoded clip would exceed [`MAX_CLIP_BYTES`].
    #[error(
        "decodes to more than {limit} bytes, the largest row a column holds [LIM-09]{hint}",
        limit = MAX_CLIP_BYTES
    )]
    TooLarge {
        /// How to stay below the limit (a flag), with a leading separator.
        hint: &'static str,
    },
    /// Nothing decoded.
    #[error("no {0} decoded")]
    Empty(&'static str),
    /// The resampler refused the rates or failed.
    #[error("cannot resample from {from} Hz to {to} Hz: {reason}")]
    Resample {
        /// Source rate.
        from: u32,
        /// Target rate.
        to: u32,
        /// The resampler's words.
        reason: String,
    },
    /// This build has no video decoding.
    #[cfg(not(feature = "video"))]
    #[error("this tessera was built without video support (cargo feature `video`, needs FFmpeg)")]
    NoVideoSupport,
}

/// The class of a clip in a class folder: the label column, the class index and the names.
pub(crate) type ClipClass<'a> = (&'a str, usize, &'a Arc<[String]>);

/// A folder-of-files sample: the decoded clip in column `audio` or `video`, its class in the
/// label column when it comes from a class folder, and the file's path in column `path`
/// (text), so rows can be joined with labels kept elsewhere.
fn file_sample(path: &Path, column: &str, decoded: Result<Value, MediaError>, class: Option<ClipClass>) -> Decoded {
    let origin = path.display().to_string();
    let value = decoded.map_err(|e| Bad::new(&origin, e.to_string()))?;
    let input_bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    let mut fields = vec![(column.to_string(), value)];
    if let Some((label, index, names)) = class {
        fields.push((label.to_string(), Value::Class { index, names: names.clone() }));
    }
    fields.push(("path".to_string(), Value::Text(origin.clone())));
    Ok(Sample { origin, fields, input_bytes })
}

/// Decodes an audio file into a sample (see [`file_sample`]).
pub(crate) fn audio_sample(path: &Path, opts: &AudioOptions, class: Option<ClipClass>) -> Decoded {
    file_sample(path, "audio", super::audio::decode_file(path, opts).map(Value::Audio), class)
}

/// Decodes a video file into a sample (see [`file_sample`]).
pub(crate) fn video_sample(path: &Path, opts: &VideoOptions, class: Option<ClipClass>) -> Decoded {
    file_sample(path, "video", super::video::decode_file(path, opts).map(Value::Video), class)
}

/// The column a decoded clip implies: ragged samples or frames (clips differ in length),
/// fixed channels; video frames fixed in size when `fixed_frames` (`--size`), else ragged.
pub(crate) fn audio_column(name: &str, a: &AudioValue) -> Column {
    let dims: Vec<Dim> = match a.shape.as_slice() {
        [_, c] => vec![Dim::Ragged, Dim::Fixed(*c)],
        _ => vec![Dim::Ragged],
    };
    Column::new(name, a.dtype, &dims).with_kind(Kind::Audio { sample_rate: a.sample_rate })
}

/// See [`audio_column`].
pub(crate) fn video_column(name: &str, v: &VideoValue, fixed_frames: bool) -> Column {
    let hw = |n: u32| if fixed_frames { Dim::Fixed(u64::from(n)) } else { Dim::Ragged };
    Column::new(name, DType::U8, &[Dim::Ragged, hw(v.height), hw(v.width), Dim::Fixed(3)])
        .with_kind(Kind::Video { fps_milli: v.fps_milli })
}

/// Why a clip does not fit the kind of column `c`: a column has one sample rate (audio) or
/// frame rate (video), and a clip at another rate is a schema question whose answer is a flag
/// (`--sample-rate`, `--fps`), not a bad input to skip. `None` when it fits or is no clip.
pub(crate) fn kind_mismatch(c: &Column, v: &Value) -> Option<String> {
    match (&c.kind, v) {
        (Kind::Audio { sample_rate }, Value::Audio(a)) if *sample_rate != a.sample_rate => Some(format!(
            "sample rate {} Hz differs from the column's {sample_rate} Hz (pass --sample-rate {sample_rate} to resample)",
            a.sample_rate
        )),
        (Kind::Video { fps_milli }, Value::Video(v)) if *fps_milli != v.fps_milli => Some(format!(
            "frame rate {} fps differs from the column's {} fps (pass --fps to sample every video at one rate)",
            f64::from(v.fps_milli) / 1000.0,
            f64::from(*fps_milli) / 1000.0
        )),
        _ => None,
    }
}

/// The row of an audio clip in column `c` (rates are [`kind_mismatch`]'s, shapes the caller's).
///
/// # Errors
/// A dtype that differs from the column's.
pub(crate) fn audio_row(c: &Column, a: AudioValue) -> Result<(Vec<u64>, Vec<u8>), String> {
    if c.dtype != a.dtype {
        return Err(format!("{} samples cannot go in a {} column (see --audio-dtype)", a.dtype, c.dtype));
    }
    Ok((a.shape, a.bytes))
}

/// The row of a video clip in column `c` (see [`audio_row`]).
///
/// # Errors
/// A column that is not u8.
pub(crate) fn video_row(c: &Column, v: VideoValue) -> Result<(Vec<u64>, Vec<u8>), String> {
    if c.dtype != DType::U8 {
        return Err(format!("8-bit video cannot go in a {} column", c.dtype));
    }
    let shape = vec![u64::from(v.frames), u64::from(v.height), u64::from(v.width), 3];
    Ok((shape, v.pixels))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clips_must_match_the_column_kind() {
        let a = AudioValue { sample_rate: 16_000, shape: vec![2, 1], dtype: DType::I16, bytes: vec![0; 4] };
        let col = audio_column("audio", &a);
        assert_eq!(col.shape, vec![Dim::Ragged, Dim::Fixed(1)]);
        assert!(kind_mismatch(&col, &Value::Audio(a.clone())).is_none());
        assert!(audio_row(&col, a.clone()).is_ok());
        let other = AudioValue { sample_rate: 8_000, ..a.clone() };
        assert!(kind_mismatch(&col, &Value::Audio(other)).unwrap().contains("--sample-rate 16000"));
        let f32s = AudioValue { dtype: DType::F32, bytes: vec![0; 8], ..a };
        assert!(audio_row(&col, f32s).is_err());

        let v = VideoValue { fps_milli: 25_000, frames: 1, height: 2, width: 2, pixels: vec![0; 12] };
        let col = video_column("video", &v, true);
        assert_eq!(video_row(&col, v.clone()).unwrap().0, vec![1, 2, 2, 3]);
        assert!(kind_mismatch(&col, &Value::Video(VideoValue { fps_milli: 30_000, ..v })).unwrap().contains("--fps"));
    }
}
