//! Fragment pruning: the manifest's per-fragment column statistics (SPEC.md §12) as
//! DataFusion [`PruningStatistics`], so that its `PruningPredicate` decides which fragments
//! cannot hold a matching row.
//!
//! Statistics cover a fragment's physical rows, deleted ones included: a superset of its live
//! rows, which keeps every answer conservative. Float columns give a minimum only (widened
//! below `-0.0`): the statistics skip NaN, and Arrow orders NaN above every number, so a
//! maximum could prune a fragment whose NaN rows match `x > c`. `_rowid` has exact bounds.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column as DfColumn, ScalarValue};
use tessera::manifest::{ColumnStats, Scalar};
use tessera::{FragmentInfo, Schema};

use crate::convert::ROWID;

/// The statistics of a list of fragments, one pruning "container" each.
pub(crate) struct FragmentStats<'a> {
    pub(crate) fragments: &'a [FragmentInfo],
    pub(crate) schema: &'a Schema,
    pub(crate) table: SchemaRef,
}

impl FragmentStats<'_> {
    /// The Arrow type of a table column that has statistics.
    fn stat_type(&self, name: &str) -> Option<DataType> {
        let c = self.schema.column(name)?;
        if !c.shape.is_empty() {
            return None;
        }
        let ty = self.table.field_with_name(name).ok()?.data_type().clone();
        (ty.is_primitive() || ty == DataType::Boolean).then_some(ty)
    }

    /// The statistics of column `name` in each fragment.
    fn per_fragment(&self, name: &str) -> impl Iterator<Item = Option<&ColumnStats>> {
        let id = self.schema.column(name).map(|c| c.id);
        self.fragments.iter().map(move |f| id.and_then(|id| f.fragment.stats.iter().find(|s| s.column_id == id)))
    }

    /// One bound per fragment as an array of the column's type; `None` when no fragment has one.
    fn bound(&self, column: &DfColumn, max: bool) -> Option<ArrayRef> {
        if column.name == ROWID {
            let rows = self.fragments.iter().map(|f| {
                let r = f.rows();
                if max { r.end.saturating_sub(1) } else { r.start }
            });
            return Some(Arc::new(UInt64Array::from_iter_values(rows)));
        }
        let ty = self.stat_type(&column.name)?;
        let is_float = matches!(ty, DataType::Float16 | DataType::Float32 | DataType::Float64);
        if max && is_float {
            return None;
        }
        let values: Vec<ScalarValue> = self
            .per_fragment(&column.name)
            .map(|s| {
                let v = s.and_then(|s| if max { s.max } else { s.min });
                v.and_then(|v| to_scalar(v, &ty))
                    .unwrap_or_else(|| ScalarValue::try_from(&ty).unwrap_or(ScalarValue::Null))
            })
            .collect();
        if values.iter().all(ScalarValue::is_null) {
            return None;
        }
        ScalarValue::iter_to_array(values).ok()
    }
}

/// A statistics value as a scalar of the column's Arrow type; `None` when it does not fit
/// (then the fragment's bound is unknown and it is kept).
fn to_scalar(v: Scalar, ty: &DataType) -> Option<ScalarValue> {
    let int = |i: i128| -> Option<ScalarValue> {
        Some(match ty {
            DataType::Int8 => ScalarValue::Int8(Some(i8::try_from(i).ok()?)),
            DataType::Int16 => ScalarValue::Int16(Some(i16::try_from(i).ok()?)),
            DataType::Int32 => ScalarValue::Int32(Some(i32::try_from(i).ok()?)),
            DataType::Int64 => ScalarValue::Int64(Some(i64::try_from(i).ok()?)),
            DataType::UInt8 => ScalarValue::UInt8(Some(u8::try_from(i).ok()?)),
            DataType::UInt16 => ScalarValue::UInt16(Some(u16::try_from(i).ok()?)),
            DataType::UInt32 => ScalarValue::UInt32(Some(u32::try_from(i).ok()?)),
            DataType::UInt64 => ScalarValue::UInt64(Some(u64::try_from(i).ok()?)),
            _ => return None,
        })
    };
    match (v, ty) {
        (Scalar::Bool(b), DataType::Boolean) => Some(ScalarValue::Boolean(Some(b))),
        (Scalar::Int(i), _) => int(i128::from(i)),
        (Scalar::UInt(u), _) => int(i128::from(u)),
        // -0.0 sorts below 0.0 in Arrow's total order, which the statistics do not know.
        (Scalar::Float(f), DataType::Float32) => {
            Some(ScalarValue::Float32(Some(if f == 0.0 { -0.0 } else { (f as f32).next_down() })))
        }
        (Scalar::Float(f), DataType::Float64) => Some(ScalarValue::Float64(Some(if f == 0.0 { -0.0 } else { f }))),
        _ => None,
    }
}

impl PruningStatistics for FragmentStats<'_> {
    fn min_values(&self, column: &DfColumn) -> Option<ArrayRef> {
        self.bound(column, false)
    }

    fn max_values(&self, column: &DfColumn) -> Option<ArrayRef> {
        self.bound(column, true)
    }

    fn num_containers(&self) -> usize {
        self.fragments.len()
    }

    fn null_counts(&self, column: &DfColumn) -> Option<ArrayRef> {
        if column.name == ROWID {
            return Some(Arc::new(UInt64Array::from(vec![0u64; self.fragments.len()])));
        }
        self.stat_type(&column.name)?;
        let counts = self.per_fragment(&column.name).map(|s| s.map(|s| s.null_count));
        Some(Arc::new(counts.collect::<UInt64Array>()))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        // Physical rows, as the null counts count them.
        Some(Arc::new(UInt64Array::from_iter_values(self.fragments.iter().map(|f| f.fragment.row_count))))
    }

    fn contained(&self, _column: &DfColumn, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}
