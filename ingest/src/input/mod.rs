//! Ingest sources: what they decode into ([`Value`], [`Sample`]), how a column is inferred
//! from a value, and the schema sidecar that `tessera export` writes and ingest reads back.

pub(crate) mod audio;
pub(crate) mod columns;
pub(crate) mod imagefolder;
pub(crate) mod jsonl;
pub(crate) mod media;
pub(crate) mod npy;
#[cfg(feature = "tables")]
pub(crate) mod parquet;
/// Without the `tables` feature: Parquet and Arrow inputs are an `unsupported` error.
#[cfg(not(feature = "tables"))]
#[path = "parquet_off.rs"]
pub(crate) mod parquet;
pub(crate) mod video;
pub(crate) mod wds;

use std::path::Path;
use std::sync::Arc;

use tessera::{Column, Compression, DType, Dim, ImageLayout, Kind};

use crate::error::{IngestError, IngestResult};

/// File extensions of Parquet files.
pub(crate) const PARQUET_EXTENSIONS: [&str; 2] = ["parquet", "pq"];
/// File extensions of Arrow IPC files (file or stream format).
pub(crate) const ARROW_EXTENSIONS: [&str; 4] = ["arrow", "arrows", "feather", "ipc"];

/// A decoded image: `height × width × channels` bytes, row-major (HWC).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ImageValue {
    /// Rows.
    pub(crate) height: u32,
    /// Columns.
    pub(crate) width: u32,
    /// Channels (1, 3 or 4).
    pub(crate) channels: u8,
    /// The pixels, HWC.
    pub(crate) pixels: Vec<u8>,
    /// The file the pixels are the exact decode of (no resize, no channel conversion), kept
    /// when the image may be stored encoded (`--keep-encoded`).
    pub(crate) file: Option<Arc<[u8]>>,
}

/// One decoded field of a sample.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    /// A decoded image.
    Image(ImageValue),
    /// A decoded audio clip.
    Audio(media::AudioValue),
    /// A decoded video clip.
    Video(media::VideoValue),
    /// An n-d array (little-endian bytes, C order).
    Tensor {
        /// Element type.
        dtype: DType,
        /// Full shape of this sample's array.
        shape: Vec<u64>,
        /// Little-endian element bytes.
        bytes: Vec<u8>,
    },
    /// A class by index into a list of names (image folders). Stored as the index of the
    /// name in the target column's class names, so appends with a different folder set map
    /// by name.
    Class {
        /// Index into `names`.
        index: usize,
        /// The source's class names.
        names: Arc<[String]>,
    },
    /// An integer scalar.
    Int(i64),
    /// A float scalar.
    Float(f64),
    /// A boolean scalar.
    Bool(bool),
    /// Text.
    Text(String),
    /// A JSON document (already validated).
    Json(String),
    /// Opaque bytes.
    Bytes(Vec<u8>),
    /// No value (nullable columns only).
    Null,
}

/// A decoded sample: named values, plus where it came from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sample {
    /// Input location for messages (file path, `shard.tar:key`, `file.jsonl:17`).
    pub(crate) origin: String,
    /// Field name and value, one per column.
    pub(crate) fields: Vec<(String, Value)>,
    /// Input bytes this sample was decoded from (for MB/s).
    pub(crate) input_bytes: u64,
}

/// An input that could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Bad {
    /// Input location (path, `shard.tar:key`, …).
    pub(crate) origin: String,
    /// What is wrong.
    pub(crate) reason: String,
}

impl Bad {
    /// A bad input.
    pub(crate) fn new(origin: impl Into<String>, reason: impl Into<String>) -> Self {
        Self { origin: origin.into(), reason: reason.into() }
    }
}

/// A decoded sample or the reason its input is bad.
pub(crate) type Decoded = Result<Sample, Bad>;

/// Options that shape inferred columns.
#[derive(Clone, Debug, Default)]
pub(crate) struct InferOptions {
    /// Images are resized to a fixed size (fixed image shape) rather than kept native (ragged).
    pub(crate) fixed_images: bool,
    /// `--ragged`: the dims of tensor (and image) columns that vary between samples.
    pub(crate) ragged: columns::RaggedSpec,
}

/// The column a value implies; `None` for a null (type unknown).
///
/// # Errors
/// The value's shape does not fit its `--ragged` entry (a schema question).
pub(crate) fn infer_column(name: &str, value: &Value, opts: &InferOptions) -> Result<Option<Column>, String> {
    let c = match value {
        Value::Image(img) if opts.ragged.names(name) => {
            let shape = [u64::from(img.height), u64::from(img.width), u64::from(img.channels)];
            Column::new(name, DType::U8, &opts.ragged.dims(name, &shape)?)
                .with_kind(Kind::Image { layout: ImageLayout::Hwc })
        }
        Value::Image(img) => {
            let shape = if opts.fixed_images {
                [
                    Dim::Fixed(u64::from(img.height)),
                    Dim::Fixed(u64::from(img.width)),
                    Dim::Fixed(u64::from(img.channels)),
                ]
            } else {
                [Dim::Ragged, Dim::Ragged, Dim::Fixed(u64::from(img.channels))]
            };
            Column::new(name, DType::U8, &shape).with_kind(Kind::Image { layout: ImageLayout::Hwc })
        }
        Value::Audio(a) => media::audio_column(name, a),
        Value::Video(v) => media::video_column(name, v, opts.fixed_images),
        Value::Tensor { dtype, shape, .. } => Column::new(name, *dtype, &opts.ragged.dims(name, shape)?),
        Value::Class { names, .. } => {
            Column::new(name, DType::I64, &[]).with_kind(Kind::ClassLabel { names: names.to_vec() })
        }
        Value::Int(_) => Column::new(name, DType::I64, &[]),
        Value::Float(_) => Column::new(name, DType::F64, &[]),
        Value::Bool(_) => Column::new(name, DType::Bool, &[]),
        Value::Text(_) => Column::new(name, DType::Utf8, &[]).with_kind(Kind::Text),
        Value::Json(_) => Column::new(name, DType::Utf8, &[]).with_kind(Kind::Json),
        Value::Bytes(_) => Column::new(name, DType::Bytes, &[]),
        Value::Null => return Ok(None),
    };
    let z = default_compression(&c);
    Ok(Some(c.with_compression(z)))
}

/// The default compression of a column: zstd level 3 for text and JSON (compresses well,
/// tiny next to tensors), none otherwise. Decoded pixels of photographs barely compress
/// losslessly: on crops of real photos (`benches` `codecs`, 2026-11-27) lz4 stored 89% of
/// the bytes and cut the loader to 0.37-0.39x of uncompressed pages on local files; over a
/// modelled bucket at +20 ms it tied with none on a 10 Gbit/s link (1.01x) and lost on 25
/// Gbit/s (0.69x) and through an HTTP server (0.81-0.87x). Where bytes matter, the encoded
/// image codec (`--keep-encoded`) stores the JPEG/PNG files at a fraction of the size.
pub(crate) fn default_compression(c: &Column) -> Compression {
    match c.kind {
        Kind::Text | Kind::Json => Compression::Zstd { level: tessera::DEFAULT_ZSTD_LEVEL },
        _ => Compression::None,
    }
}

/// Name of the schema sidecar `tessera export` writes next to its output.
pub const SIDECAR: &str = "tessera.schema.json";

/// Writes the schema sidecar (the columns as the reference crate serializes them), so an
/// ingest of the exported files restores kinds, class names, dtypes and shapes.
///
/// # Errors
/// I/O errors.
pub fn write_sidecar(dir: &Path, columns: &[Column]) -> IngestResult<()> {
    let v = serde_json::json!({
        "format": "tessera-schema/1",
        "columns": serde_json::to_value(columns).map_err(|e| IngestError::other(e.to_string()))?,
    });
    let path = dir.join(SIDECAR);
    let text = serde_json::to_string_pretty(&v).map_err(|e| IngestError::other(e.to_string()))?;
    std::fs::write(&path, text).map_err(|e| IngestError::io(&path, &e))
}

/// Reads the schema sidecar in `dir`, if there is one.
///
/// # Errors
/// A sidecar that exists but does not parse (a data fault).
pub(crate) fn read_sidecar(dir: &Path) -> IngestResult<Option<Vec<Column>>> {
    let path = dir.join(SIDECAR);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(IngestError::io(&path, &e)),
    };
    let bad =
        |e: &dyn std::fmt::Display| IngestError::data(format!("{}: not a tessera schema sidecar: {e}", path.display()));
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(&e))?;
    if v.get("format").and_then(serde_json::Value::as_str) != Some("tessera-schema/1") {
        return Err(bad(&"missing \"format\": \"tessera-schema/1\""));
    }
    let cols: Vec<Column> =
        serde_json::from_value(v.get("columns").cloned().unwrap_or_default()).map_err(|e| bad(&e))?;
    Ok(Some(cols))
}

/// Whether data inferred as `seen` can be stored in the sidecar's column `want`: the same
/// dtype (or bf16 exported as f32, or as u16 bits by earlier exports and by npy, or utf8/bytes
/// exported as ragged u8) and the same rank
/// (utf8/bytes: rank 0 against ragged rank 1), fixed dims agreeing where both are fixed.
pub(crate) fn sidecar_fits(seen: &Column, want: &Column) -> bool {
    if want.dtype.is_variable() {
        return seen.dtype == want.dtype || (seen.dtype == DType::U8 && seen.shape.len() == 1);
    }
    let dtype_ok = seen.dtype == want.dtype
        || (want.dtype == DType::Bf16 && matches!(seen.dtype, DType::F32 | DType::U16))
        || (want.dtype.is_integer() && seen.dtype == DType::I64 && want.shape.is_empty());
    dtype_ok
        && seen.shape.len() == want.shape.len()
        && seen.shape.iter().zip(&want.shape).all(|(a, b)| match (a, b) {
            (Dim::Fixed(x), Dim::Fixed(y)) => x == y,
            _ => true,
        })
}

/// Replaces inferred columns by the sidecar's columns of the same name where they fit, in
/// the sidecar's order (then any others), so a round trip restores the exported schema.
/// Sidecar columns the inputs did not show (a WebDataset's first sample lacks its null
/// fields) are added.
pub(crate) fn apply_sidecar(inferred: Vec<Column>, sidecar: &[Column]) -> Vec<Column> {
    let missing: Vec<(usize, Column)> = sidecar
        .iter()
        .enumerate()
        .filter(|(_, s)| !inferred.iter().any(|c| c.name == s.name))
        .map(|(i, s)| (i, s.clone()))
        .collect();
    let mut out: Vec<(usize, Column)> = inferred
        .into_iter()
        .map(|c| match sidecar.iter().position(|s| s.name == c.name) {
            Some(i) if sidecar_fits(&c, &sidecar[i]) => (i, sidecar[i].clone()),
            _ => (usize::MAX, c),
        })
        .chain(missing)
        .collect();
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, c)| c).collect()
}

/// The input files of `inputs`: a file stands for itself, a directory for its files with one
/// of `extensions` (lowercase, no dot), in name order.
///
/// # Errors
/// A directory that cannot be listed.
pub(crate) fn expand_inputs(
    inputs: &[std::path::PathBuf],
    extensions: &[&str],
) -> IngestResult<Vec<std::path::PathBuf>> {
    let mut files = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut found: Vec<std::path::PathBuf> = std::fs::read_dir(p)
                .map_err(|e| IngestError::io(p, &e))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|f| extensions.contains(&extension(f).as_str()))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

/// Lower-case extension of a path's file name.
pub(crate) fn extension(path: &Path) -> String {
    path.extension().and_then(|e| e.to_str()).unwrap_or_default().to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecar_fitting() {
        let seen = Column::new("t", DType::U8, &[Dim::Ragged]);
        assert!(sidecar_fits(&seen, &Column::new("t", DType::Utf8, &[])));
        let seen = Column::new("x", DType::U16, &[Dim::Fixed(3)]);
        assert!(sidecar_fits(&seen, &Column::new("x", DType::Bf16, &[Dim::Fixed(3)])));
        let widened = Column::new("x", DType::F32, &[Dim::Fixed(3)]);
        assert!(sidecar_fits(&widened, &Column::new("x", DType::Bf16, &[Dim::Fixed(3)])));
        assert!(!sidecar_fits(&seen, &Column::new("x", DType::F32, &[Dim::Fixed(3)])));
        assert!(sidecar_fits(&seen, &Column::new("x", DType::U16, &[Dim::Ragged])));
        assert!(!sidecar_fits(&seen, &Column::new("x", DType::U16, &[Dim::Fixed(4)])));
    }
}
