//! The canonical dump of a dataset version (SPEC.md §"Canonical dump"): the exact,
//! language-neutral JSON form conformance tests compare.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::column::ColumnData;
use crate::dataset::Dataset;
use crate::dtype::DType;
use crate::error::Result;
use crate::schema::{Column, Dim, Kind};

/// Columns with at most this many elements list their values; larger ones only a digest `[DUMP-07]`.
pub const MAX_LISTED_ELEMENTS: u64 = 4096;

/// Dumps every row of a version `[DUMP-01]`.
///
/// # Errors
/// Any read or validation error.
pub fn dump(ds: &Dataset) -> Result<Value> {
    let batch = ds.read_rows(0..ds.row_count(), None)?;
    let mut columns = Map::new();
    for c in &ds.schema().columns {
        let data = batch.get(&c.name).ok_or_else(|| crate::Error::usage("column missing from batch"))?;
        columns.insert(c.name.clone(), dump_column(data));
    }
    Ok(json!({
        "dump": "tessera-dump/1",
        "branch": ds.branch(),
        "version": ds.version(),
        "row_count": ds.row_count(),
        "schema": schema_json(ds),
        "columns": columns,
    }))
}

/// Dumps the rows of a view of `ds` (the version the view pins), in the view's order: the
/// dump of a version holding exactly those rows (SPEC.md §"Views", VAL-18). Only the view's
/// rows are read.
///
/// # Errors
/// Any read or validation error.
pub fn dump_view(ds: &Dataset, view: &crate::view::View) -> Result<Value> {
    let schema = &ds.schema().columns;
    let mut data: Vec<ColumnData> = schema.iter().map(ColumnData::for_column).collect();
    for row in &view.rows {
        let one = ds.read_row(row, None)?;
        for (c, out) in schema.iter().zip(&mut data) {
            let got = one.get(&c.name).ok_or_else(|| crate::Error::usage("column missing from batch"))?;
            out.extend_from(got, 0..1)?;
        }
    }
    let columns: Map<String, Value> = schema.iter().zip(&data).map(|(c, d)| (c.name.clone(), dump_column(d))).collect();
    Ok(json!({
        "dump": "tessera-dump/1",
        "branch": ds.branch(),
        "version": ds.version(),
        "row_count": view.rows.len(),
        "schema": schema_json(ds),
        "columns": columns,
    }))
}

fn schema_json(ds: &Dataset) -> Value {
    let cols: Vec<Value> = ds.schema().columns.iter().map(column_json).collect();
    json!({ "columns": cols, "metadata": pairs(&ds.schema().metadata) })
}

fn pairs(m: &[(String, String)]) -> Value {
    Value::Object(m.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect())
}

/// The schema entry of one column `[DUMP-02]`.
#[must_use]
pub fn column_json(c: &Column) -> Value {
    let shape: Vec<Value> = c
        .shape
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => json!(n),
            Dim::Ragged => Value::Null,
        })
        .collect();
    let codec = c.compression.name();
    let compression = match c.compression.level() {
        Some(level) => json!({"codec": codec, "level": level}),
        None => json!({"codec": codec}),
    };
    json!({
        "id": c.id, "name": c.name, "dtype": c.dtype.name(), "shape": shape,
        "kind": kind_json(&c.kind), "compression": compression, "nullable": c.nullable,
        "metadata": pairs(&c.metadata),
    })
}

fn kind_json(k: &Kind) -> Value {
    let mut v = json!({"type": k.name()});
    let o = v.as_object_mut().expect("object literal");
    match k {
        Kind::Image { layout } => {
            o.insert("layout".into(), json!(layout.name()));
        }
        Kind::Video { fps_milli } => {
            o.insert("fps_milli".into(), json!(fps_milli));
        }
        Kind::Audio { sample_rate } => {
            o.insert("sample_rate".into(), json!(sample_rate));
        }
        Kind::Tokens { vocab_size } => {
            o.insert("vocab_size".into(), json!(vocab_size));
        }
        Kind::Embedding { metric } => {
            o.insert("metric".into(), json!(metric.name()));
        }
        Kind::ClassLabel { names } => {
            o.insert("names".into(), json!(names));
        }
        Kind::BBox { format, normalized } => {
            o.insert("format".into(), json!(format.name()));
            o.insert("normalized".into(), json!(normalized));
        }
        Kind::Generic | Kind::Text | Kind::Mask | Kind::Json => {}
    }
    v
}

/// The dump of one column's rows: always a digest, and the rows when small `[DUMP-05]`.
#[must_use]
pub fn dump_column(data: &ColumnData) -> Value {
    let mut h = Sha256::new();
    let mut elements = 0u64;
    for i in 0..data.len() {
        if !data.is_valid(i) {
            h.update([0u8]);
            continue;
        }
        h.update([1u8]);
        for d in data.row_shape(i) {
            h.update(d.to_le_bytes());
        }
        h.update(data.row(i));
        elements += (data.row(i).len() / data.dtype().item_size()) as u64;
    }
    let mut out = Map::new();
    out.insert("sha256".into(), json!(hex::encode(h.finalize())));
    if elements <= MAX_LISTED_ELEMENTS {
        let rows: Vec<Value> = (0..data.len())
            .map(|i| {
                if data.is_valid(i) {
                    json!({"shape": data.row_shape(i), "values": values(data.dtype(), data.row(i))})
                } else {
                    Value::Null
                }
            })
            .collect();
        out.insert("rows".into(), Value::Array(rows));
    }
    Value::Object(out)
}

/// A row's elements in the dump's notation `[DUMP-09]`.
fn values(dtype: DType, b: &[u8]) -> Value {
    match dtype {
        DType::Utf8 => return json!(String::from_utf8_lossy(b)),
        DType::Bytes => return json!(hex::encode(b)),
        _ => {}
    }
    let n = dtype.item_size();
    let list = b.chunks_exact(n).map(|e| {
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(e);
        let u = u64::from_le_bytes(a);
        match dtype {
            DType::Bool => json!(e[0] != 0),
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => json!(u.to_string()),
            DType::I8 => json!(i64::from(e[0].cast_signed()).to_string()),
            DType::I16 => json!(i16::from_le_bytes([e[0], e[1]]).to_string()),
            DType::I32 => json!(i32::from_le_bytes([e[0], e[1], e[2], e[3]]).to_string()),
            DType::I64 => json!(u.cast_signed().to_string()),
            DType::F16 | DType::Bf16 => json!(format!("0x{u:04x}")),
            DType::F32 => json!(format!("0x{u:08x}")),
            _ => json!(format!("0x{u:016x}")),
        }
    });
    Value::Array(list.collect())
}
