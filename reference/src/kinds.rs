//! Value rules of column kinds that writers MUST enforce `[KND-11]` (class ids in range,
//! token ids below the vocabulary, JSON text that parses, bools of 0 or 1).

use crate::column::ColumnData;
use crate::dtype::DType;
use crate::error::Error;
use crate::schema::{Column, Kind};

/// Checks every row of `data` against the rules of its dtype, and every valid row against the
/// value rules of `column.kind`.
pub(crate) fn check_values(column: &Column, data: &ColumnData) -> Result<(), String> {
    for i in 0..data.len() {
        let row = data.row(i);
        dtype_rules(data.dtype(), row).map_err(|e| format!("row {i}: {e}"))?;
        if data.is_valid(i) {
            kind_rules(column, data.dtype(), row).map_err(|e| format!("row {i}: {e}"))?;
        }
    }
    Ok(())
}

/// The kind value rules `[KND-11]` that verifiers check (VAL-14) on the rows of `data` that are
/// valid and live: `deleted` lists the deleted rows (ascending).
pub(crate) fn check_live_kind_values(column: &Column, data: &ColumnData, deleted: &[u64]) -> Result<(), String> {
    for i in 0..data.len() {
        if data.is_valid(i) && deleted.binary_search(&(i as u64)).is_err() {
            kind_rules(column, data.dtype(), data.row(i)).map_err(|e| format!("row {i}: {e}"))?;
        }
    }
    Ok(())
}

impl Column {
    /// Checks one value (the little-endian elements of one row) against the rules of this
    /// column's dtype and kind `[DT-02]` `[DT-05]` `[KND-11]`: the rules
    /// [`ColumnData::check_against`] applies to a whole buffer, for writers that check each
    /// value as it arrives. Shape and nullability are the caller's.
    ///
    /// # Errors
    /// `usage` naming the rule the value breaks.
    pub fn check_value(&self, value: &[u8]) -> Result<(), Error> {
        dtype_rules(self.dtype, value).and_then(|()| kind_rules(self, self.dtype, value)).map_err(Error::usage)
    }
}

/// Rules of the dtype, for every row: bools are 0 or 1, `utf8` is UTF-8.
fn dtype_rules(dtype: DType, row: &[u8]) -> Result<(), String> {
    match dtype {
        DType::Bool if row.iter().any(|&b| b > 1) => Err("bool elements must be 0 or 1 [DT-02]".into()),
        DType::Utf8 if std::str::from_utf8(row).is_err() => Err("not UTF-8 [DT-05]".into()),
        _ => Ok(()),
    }
}

/// Value rules of the kind, for a valid row.
fn kind_rules(column: &Column, dtype: DType, row: &[u8]) -> Result<(), String> {
    match &column.kind {
        Kind::Json if serde_json::from_slice::<serde::de::IgnoredAny>(row).is_err() => {
            Err("not valid JSON [KND-11]".into())
        }
        Kind::ClassLabel { names } => check_ids(dtype, row, names.len() as u64, "class id", "[KND-11]"),
        Kind::Tokens { vocab_size: Some(v) } => check_ids(dtype, row, *v, "token id", "[KND-11]"),
        _ => Ok(()),
    }
}

fn check_ids(dtype: DType, row: &[u8], bound: u64, what: &str, req: &str) -> Result<(), String> {
    let n = dtype.item_size();
    let signed = matches!(dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64);
    for e in row.chunks_exact(n) {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(e);
        if signed && e[n - 1] & 0x80 != 0 {
            return Err(format!("negative {what} {req}"));
        }
        let v = u64::from_le_bytes(b);
        if v >= bound {
            return Err(format!("{what} {v} is not below {bound} {req}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::{Column, DType, Dim, Kind};

    #[test]
    fn one_value_by_the_rules_of_its_column() {
        let label =
            Column::new("y", DType::I64, &[]).with_kind(Kind::ClassLabel { names: vec!["a".into(), "b".into()] });
        assert!(label.check_value(&1i64.to_le_bytes()).is_ok());
        assert!(label.check_value(&2i64.to_le_bytes()).is_err(), "class id past the names");
        assert!(label.check_value(&(-1i64).to_le_bytes()).is_err(), "negative class id");
        let json = Column::new("j", DType::Utf8, &[Dim::Ragged]).with_kind(Kind::Json);
        assert!(json.check_value(b"{\"a\": 1}").is_ok());
        assert!(json.check_value(b"{").is_err());
        let text = Column::new("t", DType::Utf8, &[Dim::Ragged]);
        assert!(text.check_value(&[0xff]).is_err(), "not UTF-8");
        let flag = Column::new("b", DType::Bool, &[]);
        assert!(flag.check_value(&[2]).is_err());
        let tokens = Column::new("ids", DType::U16, &[Dim::Ragged]).with_kind(Kind::Tokens { vocab_size: Some(10) });
        assert!(tokens.check_value(&[9, 0, 10, 0]).is_err(), "token id at the vocabulary size");
    }
}
