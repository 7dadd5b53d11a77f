//! Parquet and Arrow IPC tables at ingest (arrow-rs and its `parquet` crate): one row per
//! table row, one column per top-level field.
//!
//! | Arrow type | value |
//! |---|---|
//! | bool, (u)int8–64, float16/32/64 | scalar of that dtype (`tessera_arrow`; float32 into a bf16 column narrows exactly what export widened) |
//! | date, time, timestamp, duration | their integer storage (i32 or i64, in the field's unit) |
//! | utf8 (also large, view) | text |
//! | binary (also large, view, fixed-size) | bytes |
//! | list / large list / fixed-size list, nested | tensor (a row's nested lists must be rectangular) |
//! | struct of `bytes` + `path` (Hugging Face `Image`) | the image, decoded like image files |
//! | the same struct marked `Audio` in the metadata | the clip, decoded like audio files |
//! | dictionary | its values |
//!
//! Hugging Face datasets keep their features in the schema metadata (`huggingface`): a
//! `ClassLabel` integer column becomes a class label with its names, an `Image` struct an
//! image, an `Audio` struct an audio clip (its `path` extension, else `wav`, names the
//! container); without the metadata a `{bytes, path}` struct is taken for an image. Whether a list dim varies is inferred from the rows like any other input
//! (`--ragged` overrides). A `tessera.schema.json` beside the files (written by `tessera
//! export --format parquet`) restores the exported schema.
//!
//! The producer reads record batches in file order and hands slices of them to the decoder
//! threads, which turn rows into samples (and decode images) in parallel.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{self as adt, DataType, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tessera::DType;
use tessera_arrow::{dtype_of, element_bytes};

use super::imagefolder::decode_image;
use super::wds::WdsOptions;
pub(crate) use super::{ARROW_EXTENSIONS, PARQUET_EXTENSIONS};
use super::{Bad, Decoded, Sample, Value};
use crate::error::{IngestError, IngestResult};

/// Rows read per record batch.
const BATCH_ROWS: usize = 1024;
/// Arrow bytes per work item handed to a decoder thread (rows with images are split finer).
const CHUNK_BYTES: usize = 2 << 20;

/// What a Hugging Face feature says about a column.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Feature {
    /// Encoded image bytes in a `{bytes, path}` struct.
    Image,
    /// Encoded audio bytes in a `{bytes, path}` struct.
    Audio,
    /// Integer class ids with these names.
    ClassLabel(Arc<[String]>),
}

/// Opened tables: the files, their shared schema, and what the schema metadata says.
#[derive(Debug)]
pub(crate) struct TableSource {
    /// The files, in order.
    pub(crate) files: Vec<PathBuf>,
    /// Parquet (true) or Arrow IPC.
    parquet: bool,
    /// Rows in all files (Parquet; Arrow IPC: unknown until read).
    pub(crate) rows: Option<u64>,
    /// Bytes of all files.
    pub(crate) bytes: u64,
    /// Per file: its bytes per row (Parquet), for the input MB/s; Arrow IPC rows count
    /// their in-memory size, which is about their size in the file.
    row_bytes: Vec<Option<u64>>,
    /// Per top-level field: its Hugging Face feature, when the metadata gives one.
    features: Arc<[Option<Feature>]>,
}

/// A slice of a record batch, for one decoder thread.
#[derive(Debug)]
pub(crate) struct TableChunk {
    /// File the rows come from.
    file: Arc<str>,
    /// Index in the file of the chunk's first row.
    first_row: u64,
    /// The rows.
    batch: RecordBatch,
    /// The Hugging Face features, per column.
    features: Arc<[Option<Feature>]>,
    /// Input bytes per row.
    row_bytes: u64,
}

/// The type a column is read as: temporal types as their integer storage, dictionaries as
/// their values; `None` when the type is kept.
fn read_as(dt: &DataType) -> Option<DataType> {
    match dt {
        DataType::Date32 | DataType::Time32(_) => Some(DataType::Int32),
        DataType::Date64 | DataType::Time64(_) | DataType::Timestamp(..) | DataType::Duration(_) => {
            Some(DataType::Int64)
        }
        DataType::Dictionary(_, values) => Some(read_as(values).unwrap_or_else(|| values.as_ref().clone())),
        _ => None,
    }
}

/// Whether ingest maps this Arrow type (after [`read_as`]).
fn supported(dt: &DataType) -> bool {
    match dt {
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => true,
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            let inner = read_as(f.data_type()).unwrap_or_else(|| f.data_type().clone());
            dtype_of(&inner).is_some()
                || matches!(inner, DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..))
                    && supported(&inner)
        }
        DataType::Struct(fields) => fields.iter().any(|f| f.name() == "bytes"),
        other => dtype_of(other).is_some() || read_as(other).is_some_and(|t| supported(&t)),
    }
}

/// The Hugging Face features of the schema metadata (`{"info": {"features": {...}}}`).
fn hf_features(schema: &SchemaRef) -> HashMap<String, Feature> {
    let Some(text) = schema.metadata().get("huggingface") else { return HashMap::new() };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else { return HashMap::new() };
    let Some(features) = v.pointer("/info/features").and_then(serde_json::Value::as_object) else {
        return HashMap::new();
    };
    features
        .iter()
        .filter_map(|(name, f)| {
            let feature = match f.get("_type").and_then(serde_json::Value::as_str)? {
                "Image" => Feature::Image,
                "Audio" => Feature::Audio,
                "ClassLabel" => {
                    let names = f.get("names")?.as_array()?.iter().map(|n| n.as_str().map(str::to_string));
                    Feature::ClassLabel(names.collect::<Option<Vec<_>>>()?.into())
                }
                _ => return None,
            };
            Some((name.clone(), feature))
        })
        .collect()
}

/// Opens the input files (all Parquet or all Arrow IPC, one schema) and reads their
/// metadata.
///
/// # Errors
/// Missing files (not found), unreadable or corrupt metadata (data fault), files whose
/// schemas differ or a column type ingest does not map (usage).
pub(crate) fn open(files: Vec<PathBuf>, parquet: bool) -> IngestResult<TableSource> {
    let mut schema: Option<SchemaRef> = None;
    let mut rows = Some(0u64);
    let mut bytes = 0;
    let mut row_bytes = Vec::with_capacity(files.len());
    for f in &files {
        let file = File::open(f).map_err(|e| IngestError::io(f, &e))?;
        let size = file.metadata().map_err(|e| IngestError::io(f, &e))?.len();
        bytes += size;
        let bad = |e: &dyn std::fmt::Display| IngestError::data(format!("{}: {e}", f.display()));
        let s = if parquet {
            let b = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| bad(&e))?;
            let n = b.metadata().file_metadata().num_rows().max(0) as u64;
            rows = rows.map(|r| r + n);
            row_bytes.push(Some(size / n.max(1)));
            b.schema().clone()
        } else {
            rows = None;
            row_bytes.push(None);
            ipc_batches(file).map_err(|e| bad(&e))?.schema()
        };
        match &schema {
            None => schema = Some(s),
            Some(first) if first.fields() != s.fields() => {
                return Err(IngestError::usage(format!(
                    "{} has other columns or types than {} (one table schema per ingest)",
                    f.display(),
                    files[0].display()
                )));
            }
            Some(_) => {}
        }
    }
    let Some(schema) = schema else { return Err(IngestError::not_found("no table files in the inputs")) };
    for field in schema.fields() {
        let dt = read_as(field.data_type()).unwrap_or_else(|| field.data_type().clone());
        if !supported(&dt) {
            return Err(IngestError::usage(format!(
                "column {:?} has Arrow type {}, which ingest does not map to a tensor, text or bytes column",
                field.name(),
                field.data_type()
            )));
        }
    }
    let hf = hf_features(&schema);
    let features = schema.fields().iter().map(|f| hf.get(f.name()).cloned()).collect();
    Ok(TableSource { files, parquet, rows, bytes, row_bytes, features })
}

/// A reader of Arrow IPC record batches: the file format, else the stream format (what the
/// Hugging Face cache holds).
fn ipc_batches(mut file: File) -> Result<Box<dyn arrow::array::RecordBatchReader + Send>, String> {
    let mut magic = [0u8; 6];
    let n = file.read(&mut magic).map_err(|e| e.to_string())?;
    file.rewind().map_err(|e| e.to_string())?;
    if n == 6 && &magic == b"ARROW1" {
        let r = arrow::ipc::reader::FileReader::try_new(BufReader::new(file), None).map_err(|e| e.to_string())?;
        Ok(Box::new(r))
    } else {
        let r = arrow::ipc::reader::StreamReader::try_new(BufReader::new(file), None).map_err(|e| e.to_string())?;
        Ok(Box::new(r))
    }
}

impl TableSource {
    /// Reads the files in order and hands chunks of rows (or a file's fault) to `emit`;
    /// stops when `emit` returns false. A file that cannot be read is one bad input.
    pub(crate) fn read(&self, emit: &mut dyn FnMut(Result<TableChunk, Bad>) -> bool) {
        for (path, row_bytes) in self.files.iter().zip(&self.row_bytes) {
            let name: Arc<str> = path.display().to_string().into();
            let batches: Box<dyn Iterator<Item = Result<RecordBatch, String>>> = match self.batches(path) {
                Ok(b) => b,
                Err(e) => {
                    if emit(Err(Bad::new(&*name, e))) {
                        continue;
                    }
                    return;
                }
            };
            let mut row = 0u64;
            for batch in batches {
                let batch = match batch.and_then(|b| cast_columns(&b)) {
                    Ok(b) => b,
                    Err(e) => {
                        // The rest of a corrupt file is not read.
                        if emit(Err(Bad::new(format!("{name}:{row}"), e))) {
                            break;
                        }
                        return;
                    }
                };
                let n = batch.num_rows();
                let per_row = batch.get_array_memory_size() / n.max(1);
                let step = (CHUNK_BYTES / per_row.max(1)).clamp(1, n.max(1));
                let row_bytes = row_bytes.unwrap_or(per_row as u64);
                let mut at = 0;
                while at < n {
                    let len = step.min(n - at);
                    let chunk = TableChunk {
                        file: name.clone(),
                        first_row: row + at as u64,
                        batch: batch.slice(at, len),
                        features: self.features.clone(),
                        row_bytes,
                    };
                    if !emit(Ok(chunk)) {
                        return;
                    }
                    at += len;
                }
                row += n as u64;
            }
        }
    }

    /// The record batches of one file.
    fn batches(&self, path: &Path) -> Result<Box<dyn Iterator<Item = Result<RecordBatch, String>>>, String> {
        let file = File::open(path).map_err(|e| e.to_string())?;
        if self.parquet {
            let r = ParquetRecordBatchReaderBuilder::try_new(file)
                .and_then(|b| b.with_batch_size(BATCH_ROWS).build())
                .map_err(|e| e.to_string())?;
            Ok(Box::new(r.map(|b| b.map_err(|e| e.to_string()))))
        } else {
            Ok(Box::new(ipc_batches(file)?.map(|b| b.map_err(|e| e.to_string()))))
        }
    }
}

/// Casts the columns [`read_as`] names to their storage type.
fn cast_columns(batch: &RecordBatch) -> Result<RecordBatch, String> {
    if !batch.schema().fields().iter().any(|f| read_as(f.data_type()).is_some()) {
        return Ok(batch.clone());
    }
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        if let Some(t) = read_as(f.data_type()) {
            columns.push(arrow::compute::cast(c, &t).map_err(|e| format!("column {:?}: {e}", f.name()))?);
            fields.push(f.as_ref().clone().with_data_type(t));
        } else {
            columns.push(c.clone());
            fields.push(f.as_ref().clone());
        }
    }
    RecordBatch::try_new(Arc::new(adt::Schema::new(fields)), columns).map_err(|e| e.to_string())
}

/// Turns a chunk's rows into samples, decoding images and audio.
pub(crate) fn decode_chunk(chunk: &TableChunk, opts: &WdsOptions) -> Vec<Decoded> {
    let schema = chunk.batch.schema();
    (0..chunk.batch.num_rows())
        .map(|i| {
            let origin = format!("{}:{}", chunk.file, chunk.first_row + i as u64);
            let mut fields = Vec::with_capacity(schema.fields().len());
            for ((f, col), feature) in schema.fields().iter().zip(chunk.batch.columns()).zip(chunk.features.iter()) {
                let v = value(col, i, feature.as_ref(), opts)
                    .map_err(|e| Bad::new(&origin, format!("column {:?}: {e}", f.name())))?;
                fields.push((f.name().clone(), v));
            }
            Ok(Sample { origin, fields, input_bytes: chunk.row_bytes })
        })
        .collect()
}

/// The elements of list entry `i` of a list-typed array.
fn list_value(a: &dyn Array, i: usize) -> Option<ArrayRef> {
    match a.data_type() {
        DataType::List(_) => a.as_list_opt::<i32>().map(|l| l.value(i)),
        DataType::LargeList(_) => a.as_list_opt::<i64>().map(|l| l.value(i)),
        DataType::FixedSizeList(..) => a.as_fixed_size_list_opt().map(|l| l.value(i)),
        _ => None,
    }
}

/// A nested list (its entries) as a tensor: dtype, shape, little-endian bytes. Every entry
/// of a level must have the same length.
fn tensor(items: &dyn Array) -> Result<(DType, Vec<u64>, Vec<u8>), String> {
    let n = items.len();
    if !matches!(items.data_type(), DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..)) {
        let (dtype, bytes) = element_bytes(items)?;
        return Ok((dtype, vec![n as u64], bytes));
    }
    if items.null_count() > 0 {
        return Err("a nested list holds a null".into());
    }
    let mut inner: Option<(DType, Vec<u64>)> = None;
    let mut bytes = Vec::new();
    for j in 0..n {
        let entry = list_value(items, j).ok_or("not a list")?;
        let (dtype, shape, b) = tensor(entry.as_ref())?;
        match &inner {
            Some((_, s)) if *s != shape => {
                return Err(format!("nested lists of lengths {s:?} and {shape:?} in one row: not a tensor"));
            }
            Some(_) => {}
            None => inner = Some((dtype, shape)),
        }
        bytes.extend_from_slice(&b);
    }
    let (dtype, inner_shape) = match inner {
        Some(x) => x,
        // An empty outer list: the element type from the type, inner dims 0.
        None => empty_shape(items.data_type())?,
    };
    let mut shape = vec![n as u64];
    shape.extend(inner_shape);
    Ok((dtype, shape, bytes))
}

/// The element dtype and all-zero inner shape of an empty list of this (list) type.
fn empty_shape(dt: &DataType) -> Result<(DType, Vec<u64>), String> {
    match dt {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => match dtype_of(f.data_type()) {
            Some(d) => Ok((d, vec![0])),
            None => empty_shape(f.data_type()).map(|(d, mut s)| {
                s.insert(0, 0);
                (d, s)
            }),
        },
        other => Err(format!("list elements of type {other} are not numbers")),
    }
}

/// Row `i` of a column as a value.
fn value(col: &ArrayRef, i: usize, feature: Option<&Feature>, opts: &WdsOptions) -> Result<Value, String> {
    if col.is_null(i) {
        return Ok(Value::Null);
    }
    let dt = col.data_type();
    if let Some(Feature::ClassLabel(names)) = feature
        && dt.is_integer()
    {
        let (_, b) = element_bytes(col.slice(i, 1).as_ref())?;
        let id = int_le(dtype_of(dt).ok_or("not an integer")?, &b).ok_or("bad class id")?;
        let index = usize::try_from(id)
            .ok()
            .filter(|&x| x < names.len())
            .ok_or_else(|| format!("class id {id} is not below the {} class names", names.len()))?;
        return Ok(Value::Class { index, names: names.clone() });
    }
    if let Some(d) = dtype_of(dt) {
        let (_, bytes) = element_bytes(col.slice(i, 1).as_ref())?;
        return Ok(Value::Tensor { dtype: d, shape: Vec::new(), bytes });
    }
    Ok(match dt {
        DataType::Utf8 => Value::Text(col.as_string_opt::<i32>().ok_or("not utf8")?.value(i).to_string()),
        DataType::LargeUtf8 => Value::Text(col.as_string_opt::<i64>().ok_or("not utf8")?.value(i).to_string()),
        DataType::Utf8View => Value::Text(col.as_string_view_opt().ok_or("not utf8")?.value(i).to_string()),
        DataType::Binary => Value::Bytes(col.as_binary_opt::<i32>().ok_or("not binary")?.value(i).to_vec()),
        DataType::LargeBinary => Value::Bytes(col.as_binary_opt::<i64>().ok_or("not binary")?.value(i).to_vec()),
        DataType::BinaryView => Value::Bytes(col.as_binary_view_opt().ok_or("not binary")?.value(i).to_vec()),
        DataType::FixedSizeBinary(_) => {
            Value::Bytes(col.as_fixed_size_binary_opt().ok_or("not binary")?.value(i).to_vec())
        }
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) => {
            let items = list_value(col.as_ref(), i).ok_or("not a list")?;
            let (dtype, shape, bytes) = tensor(items.as_ref())?;
            Value::Tensor { dtype, shape, bytes }
        }
        DataType::Struct(_) => {
            let s = col.as_struct_opt().ok_or("not a struct")?;
            let bytes = s.column_by_name("bytes").ok_or("a struct without `bytes`")?;
            let path = s
                .column_by_name("path")
                .and_then(|p| p.as_string_opt::<i32>().filter(|p| !p.is_null(i)).map(|p| p.value(i).to_string()))
                .unwrap_or_default();
            if bytes.is_null(i) {
                return Err(format!("the media is not embedded (no bytes; path {path:?})"));
            }
            let Value::Bytes(data) = value(bytes, i, None, opts)? else {
                return Err("`bytes` is not binary".into());
            };
            if feature == Some(&Feature::Audio) {
                let ext = Path::new(&path).extension().and_then(|e| e.to_str()).unwrap_or("wav").to_ascii_lowercase();
                Value::Audio(super::audio::decode_bytes(data, &ext, &opts.audio).map_err(|e| e.to_string())?)
            } else {
                Value::Image(decode_image(&data, &opts.image)?)
            }
        }
        other => return Err(format!("Arrow type {other} is not mapped")),
    })
}

/// A little-endian integer element as i64 (`None` beyond it).
fn int_le(dtype: DType, b: &[u8]) -> Option<i64> {
    let mut x = [0u8; 8];
    let n = dtype.item_size();
    x[..n].copy_from_slice(b.get(..n)?);
    Some(match dtype {
        DType::I8 => i64::from(x[0] as i8),
        DType::I16 => i64::from(i16::from_le_bytes([x[0], x[1]])),
        DType::I32 => i64::from(i32::from_le_bytes([x[0], x[1], x[2], x[3]])),
        DType::U64 | DType::I64 => i64::from_le_bytes(x),
        _ => u64::from_le_bytes(x) as i64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{FixedSizeListArray, Int32Array, ListArray};
    use arrow::datatypes::Int32Type;

    #[test]
    fn nested_lists_are_tensors_when_rectangular() {
        let list = ListArray::from_iter_primitive::<Int32Type, _, _>([Some(vec![Some(1), Some(2)]), Some(vec![])]);
        let (dtype, shape, bytes) = tensor(list.value(0).as_ref()).unwrap();
        assert_eq!((dtype, shape, bytes.len()), (DType::I32, vec![2], 8));
        assert_eq!(tensor(list.value(1).as_ref()).unwrap().1, vec![0]);
        let inner = Arc::new(Int32Array::from(vec![1, 2, 3, 4, 5, 6]));
        let field = Arc::new(adt::Field::new("item", DataType::Int32, false));
        let outer: ArrayRef = Arc::new(FixedSizeListArray::new(field, 3, inner, None));
        let (_, shape, bytes) = tensor(outer.as_ref()).unwrap();
        assert_eq!(shape, vec![2, 3]);
        assert_eq!(&bytes[..8], &[1, 0, 0, 0, 2, 0, 0, 0]);
        let nulls = Int32Array::from(vec![Some(1), None]);
        assert!(tensor(&nulls).is_err(), "null elements are refused");
    }
}
