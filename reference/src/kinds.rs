//! Value rules of column kinds that writers MUST enforce `[KND-11]` (class ids in range,
//! token ids below the vocabulary, JSON text that parses, bools of 0 or 1).

use crate::column::ColumnData;
use crate::dtype::DType;
use crate::schema::{Column, Kind};

/// Checks every valid row of `data` against the value rules of `column.kind`.
pub(crate) fn check_values(column: &Column, data: &ColumnData) -> Result<(), String> {
    if data.dtype() == DType::Bool && data.values().iter().any(|&b| b > 1) {
        return Err("bool elements must be 0 or 1 [DT-02]".into());
    }
    if data.dtype() == DType::Utf8 {
        for i in 0..data.len() {
            if std::str::from_utf8(data.row(i)).is_err() {
                return Err(format!("row {i} is not UTF-8 [DT-05]"));
            }
        }
    }
    match &column.kind {
        Kind::Json => {
            for i in (0..data.len()).filter(|&i| data.is_valid(i)) {
                if serde_json::from_slice::<serde::de::IgnoredAny>(data.row(i)).is_err() {
                    return Err(format!("row {i} is not valid JSON [KND-11]"));
                }
            }
            Ok(())
        }
        Kind::ClassLabel { names } => check_ids(data, names.len() as u64, "class id", "[KND-11]"),
        Kind::Tokens { vocab_size: Some(v) } => check_ids(data, *v, "token id", "[KND-11]"),
        _ => Ok(()),
    }
}

fn check_ids(data: &ColumnData, bound: u64, what: &str, req: &str) -> Result<(), String> {
    let n = data.dtype().item_size();
    let signed = matches!(data.dtype(), DType::I8 | DType::I16 | DType::I32 | DType::I64);
    for i in (0..data.len()).filter(|&i| data.is_valid(i)) {
        for e in data.row(i).chunks_exact(n) {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(e);
            if signed && e[n - 1] & 0x80 != 0 {
                return Err(format!("row {i}: negative {what} {req}"));
            }
            let v = u64::from_le_bytes(b);
            if v >= bound {
                return Err(format!("row {i}: {what} {v} is not below {bound} {req}"));
            }
        }
    }
    Ok(())
}
