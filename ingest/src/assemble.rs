//! Row assembly: decoded samples into column buffers for a schema. Each sample is checked
//! whole before any of its values is added: the shape against the column, each number
//! against the column's dtype (`tessera::cast`, the one rule every front end applies), and
//! the column's value rules (`Column::check_value`, the reference's).

use std::collections::HashMap;
use std::sync::Arc;

use tessera::cast::{Number, push_number};
use tessera::{Batch, Column, ColumnData, Compression, DType, Dim, Kind, Schema, ShapeDisplay};

use crate::error::IngestResult;
use crate::input::{Sample, Value, media};

/// A row's encoding: `None` for null, else full shape and little-endian bytes.
pub(crate) type Row = Option<(Vec<u64>, Vec<u8>)>;

/// Why a sample cannot be added to the column buffers.
#[derive(Debug)]
pub(crate) enum Reject {
    /// A value breaks a rule of its column (range, dtype, JSON, UTF-8): the input is bad.
    Bad(String),
    /// The sample does not fit the schema: a schema question, not a data fault.
    Schema(SchemaMismatch),
}

/// A sample that does not fit the schema.
#[derive(Debug)]
pub(crate) struct SchemaMismatch {
    /// The column (index into the schema), when the field is one.
    pub(crate) column: Option<usize>,
    /// What does not fit.
    pub(crate) reason: String,
    /// The value's shape, when it is the shape that does not fit.
    pub(crate) shape: Option<Vec<u64>>,
    /// The sample lacks a non-nullable column.
    pub(crate) missing: bool,
}

/// Turns samples into column buffers for the schema, validating each sample completely
/// before any of its values is added (a bad sample leaves the buffers untouched).
pub(crate) struct Assembler {
    columns: Vec<Column>,
    builders: Vec<ColumnData>,
    index: HashMap<String, usize>,
    class_ids: Vec<Option<HashMap<String, i64>>>,
    pub(crate) rows: usize,
    pub(crate) bytes: u64,
}

impl Assembler {
    pub(crate) fn new(schema: &Schema) -> Self {
        let columns = schema.columns.clone();
        let builders = columns.iter().map(ColumnData::for_column).collect();
        let index = columns.iter().enumerate().map(|(i, c)| (c.name.clone(), i)).collect();
        let class_ids = columns
            .iter()
            .map(|c| match &c.kind {
                Kind::ClassLabel { names } => {
                    Some(names.iter().enumerate().map(|(i, n)| (n.clone(), i as i64)).collect())
                }
                _ => None,
            })
            .collect();
        Self { columns, builders, index, class_ids, rows: 0, bytes: 0 }
    }

    /// Adds a sample; returns how many image values it held.
    pub(crate) fn push(&mut self, sample: Sample) -> Result<u64, Reject> {
        let mut rows: Vec<Option<Row>> = vec![None; self.columns.len()];
        let mut files: Vec<Option<Arc<[u8]>>> = vec![None; self.columns.len()];
        let mut images = 0;
        for (name, v) in sample.fields {
            let Some(&i) = self.index.get(&name) else {
                let names: Vec<&str> = self.columns.iter().map(|c| c.name.as_str()).collect();
                return Err(Reject::Schema(SchemaMismatch {
                    column: None,
                    reason: format!("field {name:?} is not a column of the dataset (columns: {names:?})"),
                    shape: None,
                    missing: false,
                }));
            };
            if rows[i].is_some() {
                return Err(Reject::Bad(format!("field {name:?} appears twice")));
            }
            if let Some(reason) = media::kind_mismatch(&self.columns[i], &v) {
                return Err(Reject::Schema(SchemaMismatch { column: Some(i), reason, shape: None, missing: false }));
            }
            images += u64::from(matches!(v, Value::Image(_)));
            // An image file kept as the row's stored form (an encoded column) [CMP-06].
            files[i] = match &v {
                Value::Image(img) if self.columns[i].compression == Compression::Encoded => img.file.clone(),
                _ => None,
            };
            let row = encode(&self.columns[i], v, self.class_ids[i].as_ref())
                .map_err(|e| Reject::Bad(format!("column {name:?}: {e}")))?;
            if let Some((shape, bytes)) = &row {
                check_shape(&self.columns[i], shape).map_err(|reason| {
                    Reject::Schema(SchemaMismatch {
                        column: Some(i),
                        reason,
                        shape: Some(shape.clone()),
                        missing: false,
                    })
                })?;
                // The value rules of the column's dtype and kind are the reference's.
                self.columns[i].check_value(bytes).map_err(|e| match e {
                    tessera::Error::Usage(reason) => Reject::Bad(format!("column {name:?}: {reason}")),
                    other => Reject::Bad(format!("column {name:?}: {other}")),
                })?;
            }
            rows[i] = Some(row);
        }
        if let Some(i) = self.columns.iter().zip(&rows).position(|(c, r)| r.is_none() && !c.nullable) {
            return Err(Reject::Schema(SchemaMismatch {
                column: Some(i),
                reason: "the sample has no value for this column, which is not nullable".into(),
                shape: None,
                missing: true,
            }));
        }
        for (i, r) in rows.into_iter().enumerate() {
            match r.flatten() {
                Some((shape, bytes)) => {
                    self.bytes += bytes.len() as u64;
                    let pushed = match &files[i] {
                        Some(file) => self.builders[i].push_encoded(file),
                        None => self.builders[i].push_row(&shape, &bytes),
                    };
                    pushed.map_err(|e| Reject::Bad(e.to_string()))?;
                }
                None => self.builders[i].push_null().map_err(|e| Reject::Bad(e.to_string()))?,
            }
        }
        self.rows += 1;
        Ok(images)
    }

    /// The buffered rows as a batch, and their raw bytes.
    pub(crate) fn take_batch(&mut self) -> IngestResult<(Batch, u64)> {
        let mut batch = Batch::new();
        let mut raw = 0;
        for (c, b) in self.columns.iter().zip(self.builders.iter_mut()) {
            let data = std::mem::replace(b, ColumnData::for_column(c));
            raw += data.values().len() as u64;
            batch.push(c.name.clone(), data)?;
        }
        self.rows = 0;
        self.bytes = 0;
        Ok((batch, raw))
    }
}

/// Checks a row shape against a column: rank, fixed dims.
fn check_shape(c: &Column, shape: &[u64]) -> Result<(), String> {
    if c.dtype.is_variable() {
        return if shape.len() == 1 { Ok(()) } else { Err("expected a string".into()) };
    }
    if shape.len() != c.shape.len() {
        return Err(format!("value has shape {shape:?}, column has {}", ShapeDisplay(&c.shape)));
    }
    for (d, &s) in c.shape.iter().zip(shape) {
        if let Dim::Fixed(f) = d
            && *f != s
        {
            return Err(format!("value has shape {shape:?}, column has {}", ShapeDisplay(&c.shape)));
        }
    }
    Ok(())
}

/// Encodes a value for a column (dtype conversions, class names); the value rules of the
/// column are checked on the result ([`Column::check_value`]).
fn encode(c: &Column, v: Value, class_ids: Option<&HashMap<String, i64>>) -> Result<Row, String> {
    let scalar = |bytes: Vec<u8>| Ok(Some((Vec::new(), bytes)));
    match v {
        Value::Null => {
            if c.nullable {
                Ok(None)
            } else {
                Err("null in a non-nullable column".into())
            }
        }
        Value::Image(img) => {
            if c.dtype != DType::U8 {
                return Err(format!("an 8-bit image cannot go in a {} column", c.dtype));
            }
            let (h, w, ch) = (u64::from(img.height), u64::from(img.width), u64::from(img.channels));
            let shape = if c.shape.len() == 2 && ch == 1 { vec![h, w] } else { vec![h, w, ch] };
            Ok(Some((shape, img.pixels)))
        }
        Value::Audio(a) => media::audio_row(c, a).map(Some),
        Value::Video(v) => media::video_row(c, v).map(Some),
        Value::Tensor { dtype, shape, bytes } => {
            if c.dtype.is_variable() {
                if dtype != DType::U8 || shape.len() != 1 {
                    return Err(format!("a {dtype} array of rank {} cannot be a {} value", shape.len(), c.dtype));
                }
                return Ok(Some((shape, bytes)));
            }
            if dtype == c.dtype || (c.dtype == DType::Bf16 && dtype == DType::U16) {
                Ok(Some((shape, bytes)))
            } else if c.dtype == DType::Bf16 && dtype == DType::F32 {
                // bf16 exported to Arrow as f32 (exact) narrows back bit for bit.
                let mut out = Vec::with_capacity(bytes.len() / 2);
                for x in bytes.chunks_exact(4).map(<f32 as tessera::Element>::from_le) {
                    tessera::cast::push_bf16_of_f32(x, &mut out).map_err(|e| e.to_string())?;
                }
                Ok(Some((shape, out)))
            } else if shape.is_empty() && c.shape.is_empty() && dtype.is_integer() && c.dtype.is_integer() {
                let x = int_of(dtype, &bytes).ok_or("bad integer")?;
                scalar(number_bytes(c, x)?)
            } else {
                Err(format!("array dtype {dtype} differs from the column's {}", c.dtype))
            }
        }
        Value::Class { index, names } => {
            let name = names.get(index).ok_or("class index out of range")?;
            let id = match class_ids {
                Some(ids) => {
                    *ids.get(name).ok_or_else(|| format!("class {name:?} is not in the column's class names"))?
                }
                None => index as i64,
            };
            scalar(number_bytes(c, Number::I64(id))?)
        }
        Value::Int(x) => scalar(number_bytes(c, Number::I64(x))?),
        Value::Float(x) => scalar(number_bytes(c, Number::F64(x))?),
        Value::Bool(b) => {
            if c.dtype == DType::Bool {
                scalar(vec![u8::from(b)])
            } else {
                Err(format!("a bool cannot go in a {} column", c.dtype))
            }
        }
        Value::Text(s) | Value::Json(s) => {
            if !c.dtype.is_variable() {
                return Err(format!("text cannot go in a {} column", c.dtype));
            }
            let bytes = s.into_bytes();
            Ok(Some((vec![bytes.len() as u64], bytes)))
        }
        Value::Bytes(b) => {
            if !c.dtype.is_variable() {
                return Err(format!("bytes cannot go in a {} column", c.dtype));
            }
            Ok(Some((vec![b.len() as u64], b)))
        }
    }
}

/// The value of one little-endian integer element.
fn int_of(dtype: DType, e: &[u8]) -> Option<Number> {
    let mut b = [0u8; 8];
    let n = dtype.item_size();
    b[..n].copy_from_slice(e.get(..n)?);
    Some(match dtype {
        DType::I8 => Number::I64(i64::from(i8::from_le_bytes([b[0]]))),
        DType::I16 => Number::I64(i64::from(i16::from_le_bytes([b[0], b[1]]))),
        DType::I32 => Number::I64(i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        DType::I64 => Number::I64(i64::from_le_bytes(b)),
        _ => Number::U64(u64::from_le_bytes(b)),
    })
}

/// A number in the column's dtype, if the dtype can hold it (`tessera::cast`: the one rule
/// every front end applies; class ids are checked with the column's other value rules, after
/// encoding).
fn number_bytes(c: &Column, x: Number) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(8);
    push_number(c.dtype, x, &mut out).map_err(|e| format!("{} does not fit {}: {}", e.value, e.dtype, e.reason))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembler_validates_whole_samples() {
        let schema =
            Schema::new([Column::new("x", DType::F32, &[Dim::Fixed(2)]), Column::new("n", DType::I32, &[]).nullable()])
                .unwrap();
        let mut a = Assembler::new(&schema);
        let t = |v: [f32; 2]| Value::Tensor {
            dtype: DType::F32,
            shape: vec![2],
            bytes: v.iter().flat_map(|f| f.to_le_bytes()).collect(),
        };
        let s = |fields| Sample { origin: "s".into(), fields, input_bytes: 0 };
        a.push(s(vec![("x".into(), t([1.0, 2.0])), ("n".into(), Value::Int(3))])).unwrap();
        a.push(s(vec![("x".into(), t([1.0, 2.0]))])).unwrap();
        // Wrong shape, out of range, unknown field: rejected without touching the buffers.
        let bad = Value::Tensor { dtype: DType::F32, shape: vec![1], bytes: vec![0; 4] };
        assert!(a.push(s(vec![("n".into(), Value::Int(1)), ("x".into(), bad)])).is_err());
        assert!(a.push(s(vec![("x".into(), t([0.0, 0.0])), ("n".into(), Value::Int(1 << 40))])).is_err());
        assert!(a.push(s(vec![("y".into(), Value::Int(1))])).is_err());
        let (batch, _) = a.take_batch().unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert!(!batch.get("n").unwrap().is_valid(1));
    }

    #[test]
    fn numbers_go_in_only_where_they_fit() {
        let int = Column::new("n", DType::I32, &[]);
        let half = Column::new("h", DType::F16, &[]);
        let enc = |c: &Column, v| encode(c, v, None).map(|r| r.map(|(_, bytes)| bytes));
        assert_eq!(enc(&int, Value::Float(2.0)), Ok(Some(2i32.to_le_bytes().to_vec())));
        assert_eq!(enc(&int, Value::Float(2.5)), Err("2.5 does not fit i32: not an integer".into()));
        assert_eq!(enc(&int, Value::Int(1 << 40)), Err("1099511627776 does not fit i32: out of range".into()));
        assert_eq!(enc(&half, Value::Float(1e6)), Err("1000000.0 does not fit f16: would become infinite".into()));
        assert_eq!(enc(&half, Value::Int(2)), Ok(Some(half::f16::from_f32(2.0).to_le_bytes().to_vec())));
        let wide = Value::Tensor { dtype: DType::U64, shape: vec![], bytes: u64::MAX.to_le_bytes().to_vec() };
        let i64_column = Column::new("i", DType::I64, &[]);
        assert_eq!(enc(&i64_column, wide), Err("18446744073709551615 does not fit i64: out of range".into()));
    }
}
