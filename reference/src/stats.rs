//! Column statistics for pruning (SPEC.md §"Statistics").

use crate::column::ColumnData;
use crate::dtype::DType;
use crate::manifest::{ColumnStats, Scalar};
use crate::schema::Column;

/// Computes the statistics of one column's rows `[STAT-04]`: null count always; min and max for
/// rank-0 numeric and bool columns, ignoring nulls and NaNs.
pub(crate) fn compute(column: &Column, data: &ColumnData) -> ColumnStats {
    let null_count = (0..data.len()).filter(|&i| !data.is_valid(i)).count() as u64;
    let mut stats = ColumnStats { column_id: column.id, null_count, min: None, max: None };
    if !column.shape.is_empty() || !column.dtype.is_numeric() {
        return stats;
    }
    for i in (0..data.len()).filter(|&i| data.is_valid(i)) {
        let Some(v) = scalar(column.dtype, data.row(i)) else { continue };
        if stats.min.is_none_or(|m| less(v, m)) {
            stats.min = Some(v);
        }
        if stats.max.is_none_or(|m| less(m, v)) {
            stats.max = Some(v);
        }
    }
    stats
}

/// Merges statistics of the same column.
pub(crate) fn merge(a: &ColumnStats, b: &ColumnStats) -> ColumnStats {
    let pick = |x: Option<Scalar>, y: Option<Scalar>, take_less: bool| match (x, y) {
        (Some(x), Some(y)) => Some(if less(x, y) == take_less { x } else { y }),
        (x, None) => x,
        (None, y) => y,
    };
    ColumnStats {
        column_id: a.column_id,
        null_count: a.null_count.saturating_add(b.null_count),
        min: pick(a.min, b.min, true),
        max: pick(a.max, b.max, false),
    }
}

/// Merges per-fragment statistics lists into dataset-wide ones, by column id.
pub(crate) fn merge_all<'a>(lists: impl IntoIterator<Item = &'a [ColumnStats]>) -> Vec<ColumnStats> {
    let mut out: Vec<ColumnStats> = Vec::new();
    for list in lists {
        for s in list {
            match out.iter_mut().find(|o| o.column_id == s.column_id) {
                Some(o) => *o = merge(o, s),
                None => out.push(s.clone()),
            }
        }
    }
    out.sort_by_key(|s| s.column_id);
    out
}

fn less(a: Scalar, b: Scalar) -> bool {
    match (a, b) {
        (Scalar::Bool(x), Scalar::Bool(y)) => !x & y,
        (Scalar::Int(x), Scalar::Int(y)) => x < y,
        (Scalar::UInt(x), Scalar::UInt(y)) => x < y,
        (Scalar::Float(x), Scalar::Float(y)) => x < y,
        _ => false,
    }
}

/// The scalar of one element; `None` for NaN.
fn scalar(dtype: DType, b: &[u8]) -> Option<Scalar> {
    let mut word = [0u8; 8];
    word[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
    let u = u64::from_le_bytes(word);
    let v = match dtype {
        DType::Bool => Scalar::Bool(b[0] != 0),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => Scalar::UInt(u),
        DType::I8 => Scalar::Int(i64::from(b[0].cast_signed())),
        DType::I16 => Scalar::Int(i64::from(i16::from_le_bytes([b[0], b[1]]))),
        DType::I32 => Scalar::Int(i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        DType::I64 => Scalar::Int(u.cast_signed()),
        DType::F16 => Scalar::Float(half::f16::from_le_bytes([b[0], b[1]]).to_f64()),
        DType::Bf16 => Scalar::Float(half::bf16::from_le_bytes([b[0], b[1]]).to_f64()),
        DType::F32 => Scalar::Float(f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        DType::F64 => Scalar::Float(f64::from_bits(u)),
        DType::Utf8 | DType::Bytes => return None,
    };
    match v {
        Scalar::Float(f) if f.is_nan() => None,
        v => Some(v),
    }
}
