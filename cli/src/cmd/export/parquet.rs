//! `tessera export --format parquet`: one `data.parquet` (snappy, one row group per 1024
//! rows at most) in the Hugging Face datasets layout, which `tessera ingest` reads back.
//!
//! | column | Parquet (Arrow) type | Hugging Face feature |
//! |---|---|---|
//! | rank-0 numbers, bool | the same primitive; bf16 as `Float32`, widened exactly (`tessera_arrow`) | `Value` |
//! | class label (rank 0) | its integer type | `ClassLabel` with the names |
//! | image, u8 `[H, W, 3]` HWC | struct `{bytes: PNG, path: null}` | `Image` |
//! | utf8 / bytes | string / binary | `Value` |
//! | other tensors | one list level per dim: fixed-size for a fixed dim, list for a ragged one | `Sequence` |
//!
//! Nullable columns keep their nulls. The `tessera.schema.json` sidecar `export` writes
//! beside the file restores what Parquet does not say (kinds, ragged dims, bf16).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, FixedSizeListArray, ListArray, RecordBatch, StringArray, StructArray, make_array,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{DataType, Field, Fields, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde_json::json;
use tessera::{Column, ColumnData, DType, Dataset, Dim, ImageLayout, Kind};
use tessera_arrow as arrow_bridge;

use crate::error::{CliError, CliResult};
use crate::progress::Progress;

/// Rows per record batch (and row group, at most).
const BATCH_ROWS: u64 = 1024;

/// Whether a column is written as a Hugging Face image (PNG in a struct): u8 HWC with three
/// channels, the shape `tessera ingest` decodes images to by default.
fn hf_image(c: &Column) -> bool {
    matches!(c.kind, Kind::Image { layout: ImageLayout::Hwc })
        && c.dtype == DType::U8
        && matches!(c.shape.as_slice(), [_, _, Dim::Fixed(3)])
}

/// The Arrow type of a fixed-size dtype: the one bridge's (bf16 as `Float32`).
fn prim(d: DType) -> CliResult<DataType> {
    if d.is_variable() {
        return Err(CliError::other(format!("dtype {d} has no Arrow primitive")));
    }
    Ok(arrow_bridge::arrow_type(d))
}

fn image_fields() -> Fields {
    Fields::from(vec![Field::new("bytes", DataType::Binary, true), Field::new("path", DataType::Utf8, true)])
}

/// The Arrow type of a column.
fn arrow_type(c: &Column) -> CliResult<DataType> {
    if hf_image(c) {
        return Ok(DataType::Struct(image_fields()));
    }
    match c.dtype {
        DType::Utf8 => return Ok(DataType::Utf8),
        DType::Bytes => return Ok(DataType::Binary),
        _ => {}
    }
    let mut t = prim(c.dtype)?;
    for d in c.shape.iter().rev() {
        let item = Arc::new(Field::new("item", t, false));
        t = match d {
            Dim::Fixed(n) => DataType::FixedSizeList(
                item,
                i32::try_from(*n).map_err(|_| CliError::other(format!("column {:?}: dim {n} too large", c.name)))?,
            ),
            Dim::Ragged => DataType::List(item),
        };
    }
    Ok(t)
}

/// The Hugging Face feature of a column.
fn feature(c: &Column) -> serde_json::Value {
    if hf_image(c) {
        return json!({"_type": "Image"});
    }
    if let Kind::ClassLabel { names } = &c.kind
        && c.shape.is_empty()
    {
        return json!({"_type": "ClassLabel", "names": names});
    }
    let dtype = hf_value(&arrow_bridge::arrow_type(c.dtype));
    let mut f = json!({"dtype": dtype, "_type": "Value"});
    if !c.dtype.is_variable() {
        for d in c.shape.iter().rev() {
            let length = match d {
                Dim::Fixed(n) => *n as i64,
                Dim::Ragged => -1,
            };
            f = json!({"feature": f, "length": length, "_type": "Sequence"});
        }
    }
    f
}

/// The Hugging Face `Value` dtype of an Arrow element type.
fn hf_value(t: &DataType) -> &'static str {
    match t {
        DataType::Utf8 => "string",
        DataType::Binary => "binary",
        DataType::Boolean => "bool",
        DataType::Int8 => "int8",
        DataType::Int16 => "int16",
        DataType::Int32 => "int32",
        DataType::Int64 => "int64",
        DataType::UInt8 => "uint8",
        DataType::UInt16 => "uint16",
        DataType::UInt32 => "uint32",
        DataType::UInt64 => "uint64",
        DataType::Float16 => "float16",
        DataType::Float32 => "float32",
        // Float64, the one other type the bridge gives.
        _ => "float64",
    }
}

/// Writes the version's rows to `out/data.parquet`.
///
/// # Errors
/// I/O, read and encoding errors.
pub(super) fn export_parquet(
    ds: &Dataset,
    cols: &[Column],
    out: &Path,
    progress: &mut Progress,
) -> CliResult<Vec<PathBuf>> {
    let fields: Vec<Field> =
        cols.iter().map(|c| Ok(Field::new(&c.name, arrow_type(c)?, c.nullable))).collect::<CliResult<_>>()?;
    let features: serde_json::Map<String, serde_json::Value> =
        cols.iter().map(|c| (c.name.clone(), feature(c))).collect();
    let hf = json!({"info": {"features": features}}).to_string();
    let schema = Arc::new(Schema::new(fields).with_metadata([("huggingface".to_string(), hf)].into()));
    let path = out.join("data.parquet");
    let file = File::create(&path).map_err(|e| CliError::io(&path, &e))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(BATCH_ROWS as usize))
        .build();
    let fail = |e: &dyn std::fmt::Display| CliError::other(format!("writing {}: {e}", path.display()));
    let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(|e| fail(&e))?;
    let names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
    for info in ds.fragments() {
        let rows = info.rows();
        let mut start = rows.start;
        while start < rows.end {
            let end = (start + BATCH_ROWS).min(rows.end);
            let batch = ds.read_rows(start..end, Some(&names))?;
            let mut arrays = Vec::with_capacity(cols.len());
            let mut bytes = 0;
            for c in cols {
                let data = batch.get(&c.name).ok_or_else(|| CliError::other("column missing from a read"))?;
                bytes += data.values().len() as u64;
                arrays.push(array(c, data)?);
            }
            let rb = RecordBatch::try_new(schema.clone(), arrays).map_err(|e| fail(&e))?;
            writer.write(&rb).map_err(|e| fail(&e))?;
            progress.advance(end - start, end - start, bytes);
            start = end;
        }
    }
    writer.close().map_err(|e| fail(&e))?;
    Ok(vec![path])
}

/// A column's rows as an Arrow array.
fn array(c: &Column, data: &ColumnData) -> CliResult<ArrayRef> {
    let n = data.len();
    let nulls = c.nullable.then(|| NullBuffer::from((0..n).map(|i| data.is_valid(i)).collect::<Vec<bool>>()));
    let rows = || (0..n).map(|i| data.is_valid(i).then(|| data.row(i)));
    if hf_image(c) {
        let pngs: Vec<Option<Vec<u8>>> = (0..n)
            .map(|i| data.is_valid(i).then(|| super::png(c, data.row(i), &data.row_shape(i))).transpose())
            .collect::<CliResult<_>>()?;
        let bytes: ArrayRef = Arc::new(BinaryArray::from_iter(pngs));
        let path: ArrayRef = Arc::new(StringArray::new_null(n));
        return Ok(Arc::new(StructArray::new(image_fields(), vec![bytes, path], nulls)));
    }
    match c.dtype {
        DType::Utf8 => {
            let strings: Vec<Option<&str>> = rows()
                .map(|r| r.map(std::str::from_utf8).transpose())
                .collect::<Result<_, _>>()
                .map_err(|e| CliError::data(format!("column {:?}: not UTF-8: {e}", c.name)))?;
            return Ok(Arc::new(StringArray::from(strings)));
        }
        DType::Bytes => return Ok(Arc::new(rows().collect::<BinaryArray>())),
        _ => {}
    }
    // Every row's shape and elements; a null row gets zeros (0 for ragged dims).
    let item = c.dtype.item_size();
    let mut shapes = Vec::with_capacity(n);
    let mut values = Vec::with_capacity(data.values().len());
    for i in 0..n {
        if data.is_valid(i) {
            shapes.push(data.row_shape(i));
            values.extend_from_slice(data.row(i));
        } else {
            let s: Vec<u64> = c.shape.iter().map(|d| if let Dim::Fixed(x) = d { *x } else { 0 }).collect();
            values.resize(values.len() + s.iter().product::<u64>() as usize * item, 0);
            shapes.push(s);
        }
    }
    let leaf =
        arrow_bridge::elements(c.dtype, &values).map_err(|e| CliError::other(format!("column {:?}: {e}", c.name)))?;
    if c.shape.is_empty() {
        return Ok(match nulls {
            Some(nb) => make_array(
                leaf.to_data()
                    .into_builder()
                    .nulls(Some(nb))
                    .build()
                    .map_err(|e| CliError::other(format!("column {:?}: {e}", c.name)))?,
            ),
            None => leaf,
        });
    }
    nest(c, leaf, &shapes, nulls.as_ref())
}

/// Wraps the leaf elements in one list level per dim, innermost first.
fn nest(c: &Column, leaf: ArrayRef, shapes: &[Vec<u64>], nulls: Option<&NullBuffer>) -> CliResult<ArrayRef> {
    let err = |e: &dyn std::fmt::Display| CliError::other(format!("column {:?}: {e}", c.name));
    let mut child = leaf;
    let mut t = prim(c.dtype)?;
    for (level, d) in c.shape.iter().enumerate().rev() {
        let field = Arc::new(Field::new("item", t.clone(), false));
        let level_nulls = if level == 0 { nulls.cloned() } else { None };
        child = match d {
            Dim::Fixed(size) => {
                let size = i32::try_from(*size).map_err(|e| err(&e))?;
                t = DataType::FixedSizeList(field.clone(), size);
                Arc::new(FixedSizeListArray::try_new(field, size, child, level_nulls).map_err(|e| err(&e))?)
            }
            Dim::Ragged => {
                // One list per item of the level above: a row has prod(shape[..level]) of them.
                let mut offsets = vec![0i32];
                let mut at = 0i64;
                for s in shapes {
                    let count: u64 = s[..level].iter().product();
                    for _ in 0..count {
                        at += s[level] as i64;
                        offsets.push(i32::try_from(at).map_err(|_| err(&"over 2^31 list elements in a batch"))?);
                    }
                }
                t = DataType::List(field.clone());
                let offsets = OffsetBuffer::new(offsets.into());
                Arc::new(ListArray::try_new(field, offsets, child, level_nulls).map_err(|e| err(&e))?)
            }
        };
    }
    Ok(child)
}
