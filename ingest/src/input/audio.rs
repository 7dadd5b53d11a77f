//! Audio files at ingest: WAV, FLAC, MP3, Ogg/Vorbis and MP4/M4A (AAC) decoded by symphonia
//! (pure Rust) into interleaved samples, optionally downmixed to mono and resampled to one
//! rate (rubato's FFT resampler), stored as `i16` or `f32`.
//!
//! Decoding is strict: a packet that does not decode, or fewer frames than the container
//! declares, makes the file bad rather than silently shorter.

use std::io::Cursor;
use std::path::Path;

use audioadapter_buffers::direct::InterleavedSlice;
use rubato::{Fft, FixedSync, Resampler};
use symphonia::core::codecs::audio::AudioDecoderOptions;
use symphonia::core::errors::Error as SymphoniaError;
use symphonia::core::formats::probe::Hint;
use symphonia::core::formats::{FormatOptions, TrackType};
use symphonia::core::io::{MediaSource, MediaSourceStream, MediaSourceStreamOptions};
use symphonia::core::meta::MetadataOptions;
use tessera::DType;

use super::media::{AudioValue, MAX_CLIP_BYTES, MediaError};

/// Extensions (lower case) decoded as audio.
pub(crate) const AUDIO_EXTENSIONS: [&str; 7] = ["wav", "flac", "mp3", "ogg", "oga", "m4a", "aac"];

/// How audio is decoded and shaped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AudioOptions {
    /// Resample every clip to this rate (Hz); `None` keeps each clip's own rate.
    pub(crate) sample_rate: Option<u32>,
    /// Average the channels into one (shape `[samples]`).
    pub(crate) mono: bool,
    /// `i16` (full scale ±32768) or `f32` (full scale ±1.0).
    pub(crate) dtype: DType,
}

impl Default for AudioOptions {
    fn default() -> Self {
        Self { sample_rate: None, mono: false, dtype: DType::F32 }
    }
}

/// Decodes an audio file.
///
/// # Errors
/// See [`MediaError`].
pub(crate) fn decode_file(path: &Path, opts: &AudioOptions) -> Result<AudioValue, MediaError> {
    let file = std::fs::File::open(path)?;
    decode(Box::new(file), &super::extension(path), opts)
}

/// Decodes audio held in memory (a WebDataset member); `ext` is a hint for the container.
///
/// # Errors
/// See [`MediaError`].
pub(crate) fn decode_bytes(bytes: Vec<u8>, ext: &str, opts: &AudioOptions) -> Result<AudioValue, MediaError> {
    decode(Box::new(Cursor::new(bytes)), ext, opts)
}

fn decode(source: Box<dyn MediaSource>, ext: &str, opts: &AudioOptions) -> Result<AudioValue, MediaError> {
    let (rate, channels, samples) = decode_f32(source, ext)?;
    let (channels, samples) =
        if opts.mono && channels > 1 { (1, downmix(&samples, channels)) } else { (channels, samples) };
    let (rate, samples) = match opts.sample_rate {
        Some(to) if to != rate => (to, resample(&samples, channels, rate, to)?),
        _ => (rate, samples),
    };
    let frames = (samples.len() / channels) as u64;
    let bytes = match opts.dtype {
        DType::I16 => samples.iter().flat_map(|&x| to_i16(x).to_le_bytes()).collect(),
        _ => samples.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
    };
    if bytes.len() as u64 > MAX_CLIP_BYTES {
        return Err(MediaError::TooLarge { hint: "; split the clip or pass a lower --sample-rate" });
    }
    let shape = if opts.mono { vec![frames] } else { vec![frames, channels as u64] };
    Ok(AudioValue { sample_rate: rate, shape, dtype: opts.dtype, bytes })
}

/// Demuxes and decodes the default audio track into interleaved `f32` samples (exact for
/// integer sources up to 24 bits); returns the rate, the channel count and the samples. At
/// most [`MAX_CLIP_BYTES`] of `f32` samples are decoded (the memory bound of one clip).
fn decode_f32(source: Box<dyn MediaSource>, ext: &str) -> Result<(u32, usize, Vec<f32>), MediaError> {
    let unsupported = |e: SymphoniaError| MediaError::Unsupported { kind: "audio", reason: e.to_string() };
    let corrupt = |e: SymphoniaError| MediaError::Corrupt { kind: "audio", reason: e.to_string() };
    let mut hint = Hint::new();
    hint.with_extension(ext);
    let mss = MediaSourceStream::new(source, MediaSourceStreamOptions::default());
    let mut format = symphonia::default::get_probe()
        .probe(&hint, mss, FormatOptions::default(), MetadataOptions::default())
        .map_err(unsupported)?;
    let track = format.default_track(TrackType::Audio).ok_or(MediaError::NoStream("audio"))?;
    let params = track.codec_params.as_ref().and_then(|p| p.audio()).ok_or(MediaError::NoStream("audio"))?;
    let mut decoder = symphonia::default::get_codecs()
        .make_audio_decoder(params, &AudioDecoderOptions::default())
        .map_err(unsupported)?;
    let (track_id, declared) = (track.id, track.num_frames);
    let max_samples = (MAX_CLIP_BYTES / 4) as usize;
    let mut spec: Option<(u32, usize)> = None;
    let mut samples: Vec<f32> = Vec::new();
    loop {
        let packet = match format.next_packet() {
            Ok(Some(p)) => p,
            Ok(None) => break,
            // Demuxers report a stream cut short as an unexpected end of file.
            Err(SymphoniaError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(corrupt(e)),
        };
        if packet.track_id != track_id {
            continue;
        }
        let buf = decoder.decode(&packet).map_err(corrupt)?;
        let this = (buf.spec().rate(), buf.spec().channels().count());
        match spec {
            None if this.0 == 0 || this.1 == 0 => {
                return Err(MediaError::BadDimensions { what: format!("rate {} Hz with {} channels", this.0, this.1) });
            }
            None => spec = Some(this),
            Some(s) if s != this => {
                return Err(MediaError::Corrupt { kind: "audio", reason: "rate or channels change mid-stream".into() });
            }
            Some(_) => {}
        }
        let start = samples.len();
        let end = start + buf.samples_interleaved();
        if end > max_samples {
            return Err(MediaError::TooLarge { hint: "; split the clip or pass a lower --sample-rate" });
        }
        samples.resize(end, 0.0);
        buf.copy_to_slice_interleaved(&mut samples[start..]);
    }
    let Some((rate, channels)) = spec else { return Err(MediaError::Empty("audio samples")) };
    let decoded = (samples.len() / channels) as u64;
    if let Some(declared) = declared
        && decoded < declared
    {
        return Err(MediaError::Truncated { kind: "audio", decoded, declared });
    }
    Ok((rate, channels, samples))
}

/// The mean of the channels of each frame.
fn downmix(samples: &[f32], channels: usize) -> Vec<f32> {
    let scale = 1.0 / channels as f32;
    samples.chunks_exact(channels).map(|f| f.iter().sum::<f32>() * scale).collect()
}

/// Resamples interleaved samples from `from` to `to` Hz with rubato's FFT resampler (a fixed
/// ratio, band-limited), trimming its delay so the output starts where the input does.
fn resample(samples: &[f32], channels: usize, from: u32, to: u32) -> Result<Vec<f32>, MediaError> {
    let failed = |reason: String| MediaError::Resample { from, to, reason };
    let frames = samples.len() / channels;
    let out_frames = (frames as u64).saturating_mul(u64::from(to)) / u64::from(from).max(1);
    if out_frames.saturating_mul(channels as u64 * 4) > MAX_CLIP_BYTES {
        return Err(MediaError::TooLarge { hint: "; split the clip or pass a lower --sample-rate" });
    }
    let mut resampler = Fft::<f32>::new(from as usize, to as usize, 1024, channels, FixedSync::Input)
        .map_err(|e| failed(e.to_string()))?;
    let input = InterleavedSlice::new(samples, channels, frames).map_err(|e| failed(e.to_string()))?;
    let out = resampler.process_all(&input, frames, None).map_err(|e| failed(e.to_string()))?;
    Ok(out.take_data())
}

/// A sample in ±1.0 full scale as `i16` (±32768), rounded and clipped; exact for samples that
/// came from 16-bit integers.
fn to_i16(x: f32) -> i16 {
    (x * 32768.0).round().clamp(-32768.0, 32767.0) as i16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 16-bit PCM WAV file of the given interleaved samples.
    fn wav(rate: u32, channels: u16, samples: &[i16]) -> Vec<u8> {
        let data = (samples.len() * 2) as u32;
        let mut w = Vec::new();
        w.extend_from_slice(b"RIFF");
        w.extend_from_slice(&(36 + data).to_le_bytes());
        w.extend_from_slice(b"WAVEfmt ");
        w.extend_from_slice(&16u32.to_le_bytes());
        w.extend_from_slice(&1u16.to_le_bytes());
        w.extend_from_slice(&channels.to_le_bytes());
        w.extend_from_slice(&rate.to_le_bytes());
        w.extend_from_slice(&(rate * u32::from(channels) * 2).to_le_bytes());
        w.extend_from_slice(&(channels * 2).to_le_bytes());
        w.extend_from_slice(&16u16.to_le_bytes());
        w.extend_from_slice(b"data");
        w.extend_from_slice(&data.to_le_bytes());
        w.extend(samples.iter().flat_map(|s| s.to_le_bytes()));
        w
    }

    #[test]
    fn wav_decodes_exactly_and_shapes() {
        let pcm: Vec<i16> = (0..400).map(|i| ((i * 331) % 65_536 - 32_768) as i16).collect();
        let file = wav(8_000, 2, &pcm);
        let opts = AudioOptions { dtype: DType::I16, ..AudioOptions::default() };
        let a = decode_bytes(file.clone(), "wav", &opts).unwrap();
        assert_eq!((a.sample_rate, a.shape.clone()), (8_000, vec![200, 2]));
        let back: Vec<i16> = a.bytes.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect();
        assert_eq!(back, pcm);

        let mono = AudioOptions { mono: true, ..AudioOptions::default() };
        let a = decode_bytes(file.clone(), "wav", &mono).unwrap();
        assert_eq!((a.shape.clone(), a.dtype), (vec![200], DType::F32));
        let first = f32::from_le_bytes([a.bytes[0], a.bytes[1], a.bytes[2], a.bytes[3]]);
        assert!((first - (f32::from(pcm[0]) + f32::from(pcm[1])) / 65_536.0).abs() < 1e-6);

        let up = AudioOptions { sample_rate: Some(16_000), ..AudioOptions::default() };
        let a = decode_bytes(file, "wav", &up).unwrap();
        assert_eq!(a.sample_rate, 16_000);
        assert!((a.shape[0] as i64 - 400).abs() <= 1, "{:?}", a.shape);
    }

    #[test]
    fn bad_audio_is_an_error() {
        let opts = AudioOptions::default();
        assert!(matches!(decode_bytes(b"not audio".to_vec(), "wav", &opts), Err(MediaError::Unsupported { .. })));
        // A data chunk that declares more samples than the file holds.
        let mut file = wav(8_000, 1, &[1, 2, 3, 4, 5, 6, 7, 8]);
        file.truncate(file.len() - 6);
        let e = decode_bytes(file, "wav", &opts).unwrap_err();
        assert!(matches!(e, MediaError::Truncated { declared: 8, .. }), "{e}");
    }

    #[test]
    fn i16_conversion_rounds_and_clips() {
        assert_eq!(to_i16(-1.0), -32_768);
        assert_eq!(to_i16(1.0), 32_767);
        assert_eq!(to_i16(123.0 / 32_768.0), 123);
    }
}
