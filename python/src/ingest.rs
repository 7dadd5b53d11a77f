//! `ingest`: inputs decoded once into a dataset, by the `tessera-ingest` crate (the same code
//! as `tessera ingest`). The Python layer (`tessera.ingest`) turns its keyword arguments into
//! these plain ones; the decoding runs with the GIL released.

use std::path::PathBuf;

use pyo3::prelude::*;
use tessera::{Compression, DType};
use tessera_ingest::{ColumnEdits, IngestOptions, RaggedSpec, Sampling, Silent};

use crate::errors::{from_ingest, usage};

/// Ingests `inputs` into the dataset at `location`; returns the report as JSON text (the
/// fields of `tessera ingest --json`).
#[pyfunction]
#[pyo3(signature = (
    location, inputs, *, format, size, filter, channels, keep_encoded, keep_original, image_column,
    label_column, sample_rate, mono, audio_dtype, every, fps, max_frames, compress, ragged, rename,
    kinds, message, branch, skip_bad, jobs, file_bytes, index
))]
#[allow(clippy::too_many_arguments, clippy::fn_params_excessive_bools, clippy::needless_pass_by_value)]
pub(crate) fn ingest(
    py: Python<'_>,
    location: String,
    inputs: Vec<PathBuf>,
    format: &str,
    size: Option<(u32, u32)>,
    filter: &str,
    channels: u8,
    keep_encoded: bool,
    keep_original: bool,
    image_column: String,
    label_column: String,
    sample_rate: Option<u32>,
    mono: bool,
    audio_dtype: &str,
    every: Option<u32>,
    fps: Option<f64>,
    max_frames: Option<u32>,
    compress: Vec<(String, String)>,
    ragged: Vec<String>,
    rename: Vec<(String, String)>,
    kinds: Vec<(String, String)>,
    message: Option<String>,
    branch: Option<String>,
    skip_bad: bool,
    jobs: Option<usize>,
    file_bytes: Option<u64>,
    index: Option<&str>,
) -> PyResult<String> {
    let audio_dtype = match audio_dtype {
        "f32" | "float32" => DType::F32,
        "i16" | "int16" => DType::I16,
        other => return Err(usage(format!("audio_dtype is \"f32\" or \"i16\", not {other:?}"))),
    };
    let sampling = match (fps, every) {
        (Some(_), Some(_)) => return Err(usage("give fps or every, not both")),
        (Some(f), None) => Sampling::Fps(f),
        (None, Some(k)) => Sampling::Every(k),
        (None, None) => Sampling::All,
    };
    let compress = compress
        .into_iter()
        .map(|(col, codec)| Ok((col, codec.parse::<Compression>().map_err(|e| usage(e.to_string()))?)))
        .collect::<PyResult<Vec<_>>>()?;
    let defaults = IngestOptions::default();
    let options = IngestOptions {
        format: format.parse().map_err(|e| from_ingest(&e))?,
        size,
        filter: filter.parse().map_err(|e| from_ingest(&e))?,
        channels,
        keep_encoded,
        keep_original,
        image_column,
        label_column,
        sample_rate,
        mono,
        audio_dtype,
        sampling,
        max_frames,
        compress,
        ragged: RaggedSpec::parse(&ragged).map_err(usage)?,
        columns: ColumnEdits::new(rename, kinds).map_err(usage)?,
        message,
        branch,
        skip_bad,
        jobs,
        file_bytes: file_bytes.unwrap_or(defaults.file_bytes),
        index: index.map(str::parse::<tessera::IndexLayout>).transpose().map_err(|e| usage(e.to_string()))?,
    };
    let report = py.detach(|| tessera_ingest::ingest(&location, &inputs, &options, &mut Silent));
    report.map(|r| r.to_json().to_string()).map_err(|e| from_ingest(&e))
}
