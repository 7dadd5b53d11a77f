//! Tessera columns as Arrow: the table's schema and the arrays of each read.
//!
//! | tessera column | Arrow field |
//! |---|---|
//! | rank 0 numbers and bool | the [`tessera_arrow`] type (bf16: `Float32`, widened exactly), except f16: `Float32` (exact; DataFusion's f16 support is partial) |
//! | rank 0 utf8, bytes | `Utf8View`, `BinaryView` |
//! | all dims fixed | `FixedSizeList` of the element type, flattened in C order |
//! | a ragged dim | `LargeList` of the element type, flattened |
//! | tensor element | the [`tessera_arrow`] type (f16: `Float16`, bf16: `Float32`) |
//! | class label of rank 0 / 1 | the ids as above, plus `<name>_name`: the class names (`Utf8View` / list of them) |
//! | — | `_rowid`: `UInt64`, the row's position in the version |
//!
//! Tensor fields carry metadata `tessera.dtype` and `tessera.shape` (e.g. `u8`, `[224,224,3]`,
//! `?` for a ragged dim) so that a printer can summarize them.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BinaryViewArray, FixedSizeListArray, Float32Array, Int64Array, LargeListArray, StringViewArray,
    UInt64Array,
};
use datafusion::arrow::buffer::{NullBuffer, OffsetBuffer};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use tessera::{Column, ColumnData, DType, Dim, Kind};

use crate::error::{QueryError, QueryResult};
use tessera_arrow as arrow_bridge;

/// The name of the row-position column every table has.
pub const ROWID: &str = "_rowid";
/// Suffix of the class-name companion of a class-label column.
pub const NAME_SUFFIX: &str = "_name";
/// Field metadata key: the column's tessera dtype name.
pub const META_DTYPE: &str = "tessera.dtype";
/// Field metadata key: the column's shape, e.g. `[224,224,3]`, `?` for a ragged dim.
pub const META_SHAPE: &str = "tessera.shape";

/// Where a table field's values come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The dataset column of this name.
    Column(String),
    /// The class names of the class-label column of this name.
    ClassNames(String),
    /// The row's position in the version.
    RowId,
}

/// The table's Arrow schema and, per field, where its values come from.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    pub(crate) schema: SchemaRef,
    pub(crate) sources: Vec<Source>,
}

/// Maps a version's schema to the table's fields.
///
/// # Errors
/// `usage` when a column is named `_rowid`, which the table reserves.
pub(crate) fn layout(schema: &tessera::Schema) -> QueryResult<Layout> {
    let mut fields: Vec<FieldRef> = Vec::new();
    let mut sources = Vec::new();
    for c in &schema.columns {
        if c.name == ROWID {
            return Err(QueryError::Usage(format!("column {ROWID:?} collides with the row-position column")));
        }
        fields.push(Arc::new(field(c)));
        sources.push(Source::Column(c.name.clone()));
    }
    for c in &schema.columns {
        let name = format!("{}{NAME_SUFFIX}", c.name);
        if matches!(c.kind, Kind::ClassLabel { .. }) && schema.column(&name).is_none() && name != ROWID {
            let utf8 = DataType::Utf8View;
            let ty =
                if c.shape.is_empty() { utf8 } else { DataType::LargeList(Arc::new(Field::new("item", utf8, true))) };
            fields.push(Arc::new(Field::new(name, ty, true)));
            sources.push(Source::ClassNames(c.name.clone()));
        }
    }
    fields.push(Arc::new(Field::new(ROWID, DataType::UInt64, false)));
    sources.push(Source::RowId);
    Ok(Layout { schema: Arc::new(Schema::new(fields)), sources })
}

/// The Arrow type of one element of a tensor column, or of a rank-0 column: the
/// [`tessera_arrow`] type, in the engine's forms.
fn element_type(dtype: DType, scalar: bool) -> DataType {
    match dtype {
        // DataFusion's Float16 support is partial: rank-0 f16 is widened (exactly) for SQL.
        DType::F16 if scalar => DataType::Float32,
        DType::Utf8 => DataType::Utf8View,
        DType::Bytes => DataType::BinaryView,
        d => arrow_bridge::arrow_type(d),
    }
}

/// Elements per row when every dim is fixed.
fn fixed_len(shape: &[Dim]) -> Option<u64> {
    shape.iter().try_fold(1u64, |a, d| match d {
        Dim::Fixed(n) => a.checked_mul(*n),
        Dim::Ragged => None,
    })
}

/// The Arrow field of a dataset column.
fn field(c: &Column) -> Field {
    if c.shape.is_empty() {
        return Field::new(&c.name, element_type(c.dtype, true), c.nullable);
    }
    let item = Arc::new(Field::new("item", element_type(c.dtype, false), false));
    let ty = match fixed_len(&c.shape).and_then(|n| i32::try_from(n).ok()) {
        Some(n) => DataType::FixedSizeList(item, n),
        None => DataType::LargeList(item),
    };
    let dims: Vec<String> = c
        .shape
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => n.to_string(),
            Dim::Ragged => "?".to_owned(),
        })
        .collect();
    Field::new(&c.name, ty, c.nullable).with_metadata(
        [(META_DTYPE.to_owned(), c.dtype.name().to_owned()), (META_SHAPE.to_owned(), format!("[{}]", dims.join(",")))]
            .into(),
    )
}

/// All elements of `data` as one flat, non-null Arrow array of the field's element type.
fn flat_values(dtype: DType, scalar: bool, data: &ColumnData) -> QueryResult<ArrayRef> {
    Ok(match dtype {
        DType::F16 if scalar => {
            Arc::new(Float32Array::from_iter_values(data.to_vec::<half::f16>()?.into_iter().map(f32::from)))
        }
        DType::Utf8 => {
            let rows = (0..data.len()).map(|i| data.is_valid(i).then(|| data.str_row(i)).flatten());
            Arc::new(rows.collect::<StringViewArray>())
        }
        DType::Bytes => {
            let rows = (0..data.len()).map(|i| data.is_valid(i).then(|| data.row(i)));
            Arc::new(rows.collect::<BinaryViewArray>())
        }
        d => arrow_bridge::elements(d, data.values()).map_err(|e| QueryError::Usage(format!("column values: {e}")))?,
    })
}

/// The validity of `data` as an Arrow null buffer (`None` when every row is valid).
fn nulls(data: &ColumnData) -> Option<NullBuffer> {
    data.validity().filter(|v| v.iter().any(|ok| !ok)).map(|v| NullBuffer::from(v.to_vec()))
}

/// One dataset column's rows as the Arrow array of [`layout`]'s field `field`.
///
/// # Errors
/// `invalid` when the rows do not fit the field (a reader bug or a corrupt file the reader
/// let through); Arrow's own size limits.
pub(crate) fn column_array(c: &Column, data: &ColumnData, field: &Field) -> QueryResult<ArrayRef> {
    let engine = |e: datafusion::arrow::error::ArrowError| QueryError::Engine(e.into());
    if c.shape.is_empty() {
        let values = flat_values(c.dtype, true, data)?;
        return match nulls(data) {
            // Rank-0 variable-size arrays already carry their nulls.
            Some(n) if !c.dtype.is_variable() => {
                let d = values.to_data().into_builder().nulls(Some(n)).build().map_err(engine)?;
                Ok(datafusion::arrow::array::make_array(d))
            }
            _ => Ok(values),
        };
    }
    let values = flat_values(c.dtype, false, data)?;
    match field.data_type() {
        DataType::FixedSizeList(item, n) => {
            let list = FixedSizeListArray::try_new(item.clone(), *n, values, nulls(data)).map_err(engine)?;
            Ok(Arc::new(list))
        }
        DataType::LargeList(item) => {
            let size = c.dtype.item_size() as u64;
            let offsets: Vec<i64> = data.offsets().iter().map(|&o| (o / size) as i64).collect();
            let offsets = OffsetBuffer::new(offsets.into());
            let list = LargeListArray::try_new(item.clone(), offsets, values, nulls(data)).map_err(engine)?;
            Ok(Arc::new(list))
        }
        other => Err(QueryError::Usage(format!("column {:?}: no Arrow mapping for {other}", c.name))),
    }
}

/// The class names of a class-label column's rows (`null` for an id outside the names).
///
/// # Errors
/// As [`column_array`].
pub(crate) fn class_names(c: &Column, data: &ColumnData) -> QueryResult<ArrayRef> {
    let Kind::ClassLabel { names } = &c.kind else {
        return Err(QueryError::Usage(format!("column {:?} is not a class label", c.name)));
    };
    let ids = flat_values(c.dtype, false, data)?;
    let ids = datafusion::arrow::compute::cast(&ids, &DataType::Int64).map_err(|e| QueryError::Engine(e.into()))?;
    let ids = ids.as_any().downcast_ref::<Int64Array>().ok_or_else(|| QueryError::Usage("class ids".into()))?;
    let name = |id: i64| usize::try_from(id).ok().and_then(|i| names.get(i)).map(String::as_str);
    if c.shape.is_empty() {
        // Rows that are null, or whose id has no name, are null.
        let rows = ids.iter().enumerate().map(|(i, id)| if data.is_valid(i) { id.and_then(name) } else { None });
        return Ok(Arc::new(rows.collect::<StringViewArray>()));
    }
    let names_flat: StringViewArray = ids.iter().map(|id| id.and_then(name)).collect();
    let size = c.dtype.item_size() as u64;
    let offsets: Vec<i64> = data.offsets().iter().map(|&o| (o / size) as i64).collect();
    let item = Arc::new(Field::new("item", DataType::Utf8View, true));
    let list = LargeListArray::try_new(item, OffsetBuffer::new(offsets.into()), Arc::new(names_flat), nulls(data))
        .map_err(|e| QueryError::Engine(e.into()))?;
    Ok(Arc::new(list))
}

/// `_rowid` of rows `first..first + n` … as listed.
pub(crate) fn row_ids(rows: impl IntoIterator<Item = u64>) -> ArrayRef {
    Arc::new(UInt64Array::from_iter_values(rows))
}
