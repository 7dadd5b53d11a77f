//! WebDataset tar shards: files are grouped into samples by key (the path up to the first dot
//! of the file name) and decoded by their last extension.
//!
//! | extension | value | column (bare extension) |
//! |---|---|---|
//! | `jpg` `jpeg` `png` `webp` | image tensor (HWC u8) | `image` |
//! | `wav` `flac` `mp3` `ogg` `oga` `m4a` `aac` | audio clip (see [`super::audio`]) | `audio` |
//! | `mp4` `m4v` `mkv` `webm` `mov` `avi` | video clip (see [`super::video`]) | `video` |
//! | `npy` | tensor | `npy` |
//! | `cls` | i64 label (decimal text) | `label` |
//! | `txt` | utf8 text | `text` |
//! | `json` | utf8, kind json | `json` |
//! | anything else | bytes | the extension |
//!
//! A field with more than one dot, like `0001.seg.png`, names its column (`seg`). Samples must
//! be contiguous: a key that reappears after another key (mis-ordered shards, or a duplicate in
//! any shard) and a field that appears twice in one sample are errors, never merged. Fields
//! starting with `__` (WebDataset metadata such as `__key__`) are ignored.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use super::audio::{AUDIO_EXTENSIONS, AudioOptions};
use super::imagefolder::{IMAGE_EXTENSIONS, ImageOptions, decode_image};
use super::video::{VIDEO_EXTENSIONS, VideoOptions};
use super::{Bad, Decoded, Sample, Value, npy};

/// The files of one sample, undecoded.
#[derive(Debug)]
pub(crate) struct RawSample {
    /// `shard.tar:key`, for messages.
    pub(crate) origin: String,
    /// Field (file name after the key's dot) and bytes.
    pub(crate) files: Vec<(String, Vec<u8>)>,
    /// Bytes read for this sample.
    pub(crate) bytes: u64,
    /// Why the sample is bad (found while grouping), if it is.
    bad: Option<String>,
}

/// The column name a bare extension maps to.
#[must_use]
pub fn canonical_name(ext: &str) -> &str {
    match ext {
        e if IMAGE_EXTENSIONS.contains(&e) => "image",
        e if AUDIO_EXTENSIONS.contains(&e) => "audio",
        e if VIDEO_EXTENSIONS.contains(&e) => "video",
        "cls" => "label",
        "txt" => "text",
        other => other,
    }
}

/// Splits a field (`jpg`, `seg.png`) into its column name and lower-case extension.
pub(crate) fn split_field(field: &str) -> (String, String) {
    if let Some((name, ext)) = field.rsplit_once('.') {
        (name.to_string(), ext.to_ascii_lowercase())
    } else {
        let ext = field.to_ascii_lowercase();
        (canonical_name(&ext).to_string(), ext)
    }
}

/// Reads the shards in order and hands each sample (or a grouping error) to `emit`; stops
/// early when `emit` returns false. A shard that cannot be read is reported as one bad input
/// and the remaining shards are still read.
pub(crate) fn read_shards(shards: &[PathBuf], emit: &mut dyn FnMut(Result<RawSample, Bad>) -> bool) {
    let mut seen: HashSet<String> = HashSet::new();
    for shard in shards {
        if !read_shard(shard, &mut seen, emit) {
            return;
        }
    }
}

/// Reads one shard; false when the consumer stopped.
fn read_shard(shard: &Path, seen: &mut HashSet<String>, emit: &mut dyn FnMut(Result<RawSample, Bad>) -> bool) -> bool {
    let name = shard.display().to_string();
    let file = match File::open(shard) {
        Ok(f) => f,
        Err(e) => return emit(Err(Bad::new(&name, e.to_string()))),
    };
    let mut archive = tar::Archive::new(BufReader::with_capacity(1 << 20, file));
    let entries = match archive.entries() {
        Ok(e) => e,
        Err(e) => return emit(Err(Bad::new(&name, format!("not a tar file: {e}")))),
    };
    let mut current: Option<(String, RawSample)> = None;
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => {
                if let Some((_, s)) = current.take()
                    && !emit(Ok(s))
                {
                    return false;
                }
                return emit(Err(Bad::new(&name, format!("corrupt tar: {e}"))));
            }
        };
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = match entry.path() {
            Ok(p) => p.to_string_lossy().into_owned(),
            Err(e) => return emit(Err(Bad::new(&name, format!("bad entry path: {e}")))),
        };
        let (dir, base) = path.rsplit_once('/').map_or(("", path.as_str()), |(d, b)| (d, b));
        if base.starts_with('.') || base.is_empty() {
            continue; // hidden files (e.g. macOS "._" resource forks)
        }
        let Some((stem, field)) = base.split_once('.') else {
            return emit(Err(Bad::new(format!("{name}:{path}"), "file without an extension in a WebDataset shard")));
        };
        let key = if dir.is_empty() { stem.to_string() } else { format!("{dir}/{stem}") };
        // The header's size is not trusted for the allocation; read_to_end grows as needed.
        let mut data = Vec::with_capacity(entry.size().min(64 << 20) as usize);
        if let Err(e) = entry.read_to_end(&mut data) {
            return emit(Err(Bad::new(format!("{name}:{path}"), format!("corrupt tar: {e}"))));
        }
        let size = data.len() as u64;
        match &mut current {
            Some((k, s)) if *k == key => {
                if s.files.iter().any(|(f, _)| f == field) {
                    s.bad.get_or_insert_with(|| format!("field {field:?} appears twice in sample {key:?}"));
                }
                s.files.push((field.to_string(), data));
                s.bytes += size;
            }
            _ => {
                if let Some((_, s)) = current.take()
                    && !emit(Ok(s))
                {
                    return false;
                }
                let bad = (!seen.insert(key.clone())).then(|| {
                    format!("key {key:?} appears again after other samples (duplicate or mis-ordered key; samples must be contiguous)")
                });
                let sample = RawSample {
                    origin: format!("{name}:{key}"),
                    files: vec![(field.to_string(), data)],
                    bytes: size,
                    bad,
                };
                current = Some((key, sample));
            }
        }
    }
    match current {
        Some((_, s)) => emit(Ok(s)),
        None => true,
    }
}

/// Options for decoding sample fields.
#[derive(Clone, Debug)]
pub(crate) struct WdsOptions {
    /// Image decoding.
    pub(crate) image: ImageOptions,
    /// Also keep each image's original file bytes in a `<name>_original` column.
    pub(crate) keep_original: bool,
    /// Audio decoding (members here, files and table cells elsewhere).
    pub(crate) audio: AudioOptions,
    /// Video decoding (files and members).
    pub(crate) video: VideoOptions,
}

/// Decodes the files of a sample by extension.
pub(crate) fn decode_sample(raw: RawSample, opts: &WdsOptions) -> Decoded {
    if let Some(reason) = raw.bad {
        return Err(Bad::new(raw.origin, reason));
    }
    let mut fields: Vec<(String, Value)> = Vec::with_capacity(raw.files.len());
    for (field, data) in raw.files {
        if field.starts_with("__") {
            continue; // WebDataset metadata such as `__key__`
        }
        let (name, ext) = split_field(&field);
        let at = |e: String| Bad::new(format!("{}.{field}", raw.origin), e);
        let mut push = |name: String, v: Value| -> Result<(), Bad> {
            if fields.iter().any(|(n, _)| *n == name) {
                return Err(Bad::new(&raw.origin, format!("two fields map to column {name:?}")));
            }
            fields.push((name, v));
            Ok(())
        };
        match ext.as_str() {
            e if IMAGE_EXTENSIONS.contains(&e) => {
                let img = decode_image(&data, &opts.image).map_err(at)?;
                push(name.clone(), Value::Image(img))?;
                if opts.keep_original {
                    push(format!("{name}_original"), Value::Bytes(data))?;
                }
            }
            e if AUDIO_EXTENSIONS.contains(&e) => {
                let clip = super::audio::decode_bytes(data, e, &opts.audio).map_err(|e| at(e.to_string()))?;
                push(name, Value::Audio(clip))?;
            }
            e if VIDEO_EXTENSIONS.contains(&e) => {
                let clip = super::video::decode_bytes(&data, e, &opts.video).map_err(|e| at(e.to_string()))?;
                push(name, Value::Video(clip))?;
            }
            "npy" => {
                let (dtype, shape, bytes) = npy::parse_array(&data).map_err(at)?;
                push(name, Value::Tensor { dtype, shape, bytes })?;
            }
            "cls" => {
                let text = std::str::from_utf8(&data).map_err(|_| at("label is not text".into()))?;
                let v: i64 =
                    text.trim().parse().map_err(|_| at(format!("label {:?} is not an integer", text.trim())))?;
                push(name, Value::Int(v))?;
            }
            "txt" => {
                let s = String::from_utf8(data).map_err(|_| at("text is not UTF-8".into()))?;
                push(name, Value::Text(s))?;
            }
            "json" => {
                let s = String::from_utf8(data).map_err(|_| at("JSON is not UTF-8".into()))?;
                serde_json::from_str::<serde_json::Value>(&s).map_err(|e| at(format!("invalid JSON: {e}")))?;
                push(name, Value::Json(s))?;
            }
            _ => push(name, Value::Bytes(data))?,
        }
    }
    Ok(Sample { origin: raw.origin, fields, input_bytes: raw.bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names() {
        assert_eq!(split_field("jpg"), ("image".into(), "jpg".into()));
        assert_eq!(split_field("seg.PNG"), ("seg".into(), "png".into()));
        assert_eq!(split_field("cls"), ("label".into(), "cls".into()));
        assert_eq!(split_field("image.encoded.bin"), ("image.encoded".into(), "bin".into()));
        assert_eq!(split_field("json"), ("json".into(), "json".into()));
    }
}
