//! Row selection for commands that change rows (`delete`, `update`): `--rows 1,5,9-12` or
//! `--where EXPR`, where EXPR is one SQL boolean expression over the dataset's columns — the
//! `WHERE` clause of `tessera query`, answered by the same engine (`tessera-query`), so there
//! is one predicate language. Rows are global row indices of the version, in its row order.
//!
//! `--set COL=VALUE` and `column add --fill` take one literal per column ([`scalar_value`]).

use tessera::cast::{Number, push_number};
use tessera::{ColumnData, DType, Dataset, Kind};
use tessera_query::{QueryEngine, QueryError};

use crate::error::{CliError, CliResult};

/// The `--rows`/`--where` flags.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct Selection {
    /// Rows by index: comma-separated indices and inclusive ranges, e.g. 1,5,9-12.
    #[arg(long, value_name = "LIST", conflicts_with = "predicate", required_unless_present = "predicate")]
    rows: Option<String>,
    /// Rows where a SQL boolean expression holds, as in `tessera query ... WHERE EXPR`, e.g.
    /// "label = 3 and score < 0.5" or "name = 'x' or id >= 100" (see `tessera delete --help`).
    #[arg(long = "where", value_name = "EXPR")]
    predicate: Option<String>,
}

/// Help text describing the selection flags.
pub(crate) const SELECTION_HELP: &str = "\
Selecting rows:
  --rows 1,5,9-12          row indices of the version (0-based; ranges inclusive)
  --where EXPR             rows where EXPR holds: one SQL boolean expression over the columns,
                           the WHERE clause of `tessera query` (same engine, same functions):
                             label = 3      score < 0.5      name = 'x'      caption IS NULL
                             label_name IN ('cat', 'dog')  (a class label's names)
                             id BETWEEN 10 AND 20 AND NOT flag      _rowid % 10 = 0
                           Text is 'single-quoted'; \"double quotes\" name a column.";

impl Selection {
    /// The selected rows of `ds`, sorted and without duplicates.
    ///
    /// # Errors
    /// Usage error for a bad list or expression, an unknown column or a type error (the
    /// query engine's message), or a row past the end; read errors of the dataset.
    pub(crate) fn rows(&self, ds: &Dataset) -> CliResult<Vec<u64>> {
        let mut rows = match (&self.rows, &self.predicate) {
            (Some(list), _) => parse_rows(list)?,
            (None, Some(expr)) => matching_rows(ds, expr)?,
            (None, None) => return Err(CliError::usage("select rows with --rows or --where")),
        };
        rows.sort_unstable();
        rows.dedup();
        if let Some(&last) = rows.last()
            && last >= ds.row_count()
        {
            return Err(CliError::not_found(format!(
                "row {last} does not exist ({}@{} has {} rows)",
                ds.branch(),
                ds.version(),
                ds.row_count()
            )));
        }
        Ok(rows)
    }
}

/// The rows of `ds` where `predicate` holds, from the query engine (which reads only the
/// columns it names, prunes fragments by their statistics, and streams the rest).
fn matching_rows(ds: &Dataset, predicate: &str) -> CliResult<Vec<u64>> {
    let engine = QueryEngine::new(ds.clone()).map_err(where_error)?;
    engine.rows_where(predicate).map_err(where_error)
}

fn where_error(e: QueryError) -> CliError {
    match e {
        QueryError::Usage(m) => CliError::usage(format!("--where: {m}"))
            .note("EXPR is a SQL boolean expression, as after WHERE in `tessera query` (the table `ds`)"),
        QueryError::Dataset(e) => e.into(),
        QueryError::Engine(e) => CliError::other(format!("query engine: {e}")),
    }
}

/// Parses `1,5,9-12` (ranges inclusive).
fn parse_rows(list: &str) -> CliResult<Vec<u64>> {
    let bad = || CliError::usage(format!("bad row list {list:?} (e.g. 1,5,9-12)"));
    let mut out = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u64, u64) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
                if a > b || b - a >= 1 << 24 {
                    return Err(bad().note("a range is first-last with first <= last, at most 2^24 rows"));
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

/// A literal value of `--set` and `--fill`.
#[derive(Clone, Debug, PartialEq)]
enum Lit {
    Int(i128),
    Float(f64),
    Str(String),
    Bool(bool),
    Null,
    /// A bare word: text for a `utf8` column, a class name for a class label.
    Word(String),
}

/// Reads one literal: an integer, a float, `true`, `false`, `null`, a `"quoted string"`
/// (`\"` and `\\` escaped) or a bare word. `None` for anything else.
fn literal(text: &str) -> Option<Lit> {
    let t = text.trim();
    Some(match t {
        "" => return None,
        "true" => Lit::Bool(true),
        "false" => Lit::Bool(false),
        "null" => Lit::Null,
        _ if t.starts_with('"') => {
            let inner = t.strip_prefix('"')?.strip_suffix('"')?;
            let mut out = String::new();
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some(e @ ('"' | '\\')) => out.push(e),
                        _ => return None,
                    },
                    '"' => return None,
                    c => out.push(c),
                }
            }
            Lit::Str(out)
        }
        _ if t.starts_with(|c: char| c.is_ascii_digit() || "+-.".contains(c)) => match t.parse::<i128>() {
            Ok(v) => Lit::Int(v),
            Err(_) => Lit::Float(t.parse().ok()?),
        },
        _ if t.chars().all(|c| c.is_alphanumeric() || "_.-".contains(c)) => Lit::Word(t.to_string()),
        _ => return None,
    })
}

/// One value for a scalar column from its text (`3`, `-0.5`, `true`, `"text"` or bare text for
/// `utf8`, a class name for a class label, `null`), as a one-row buffer of the column.
///
/// # Errors
/// Usage error when the text is not a value of the column's dtype (range included) or breaks
/// its kind's rules.
pub(crate) fn scalar_value(c: &tessera::Column, text: &str) -> CliResult<ColumnData> {
    let bad = |why: String| CliError::usage(format!("value {text:?} for column {:?}: {why}", c.name));
    if !c.shape.is_empty() || c.dtype == DType::Bytes {
        return Err(bad(format!(
            "only scalar columns take values here, not {} {}",
            c.dtype,
            super::fmt_shape(&c.shape)
        )));
    }
    let lit = match literal(text) {
        Some(Lit::Word(w)) if matches!(c.kind, Kind::ClassLabel { .. }) => Lit::Str(w),
        Some(l @ (Lit::Str(_) | Lit::Null)) => l,
        _ if c.dtype == DType::Utf8 => Lit::Str(text.to_string()),
        Some(l) if !matches!(l, Lit::Word(_)) => l,
        _ => return Err(bad("not a literal (a number, true, false, \"text\" or null)".into())),
    };
    let mut data = ColumnData::for_column(c);
    let lit = match (&c.kind, lit) {
        (Kind::ClassLabel { names }, Lit::Str(s)) => Lit::Int(
            names.iter().position(|n| *n == s).ok_or_else(|| bad(format!("not a class ({})", names.join(", "))))?
                as i128,
        ),
        (_, l) => l,
    };
    let bytes: Vec<u8> = match (c.dtype, lit) {
        (_, Lit::Null) => {
            if !c.nullable {
                return Err(bad("the column is not nullable".into()));
            }
            data.push_null()?;
            return Ok(data);
        }
        (DType::Bool, Lit::Bool(b)) => vec![u8::from(b)],
        (DType::Utf8, Lit::Str(s)) => s.into_bytes(),
        (d, Lit::Int(x)) if d.is_numeric() => {
            let x = i64::try_from(x)
                .map(Number::I64)
                .or_else(|_| u64::try_from(x).map(Number::U64))
                .map_err(|_| bad(format!("does not fit {d}")))?;
            cast_le(d, x).map_err(bad)?
        }
        (d, Lit::Float(x)) if d.is_float() => cast_le(d, Number::F64(x)).map_err(bad)?,
        (d, l) => return Err(bad(format!("{l:?} is not a {d} value"))),
    };
    c.check_value(&bytes).map_err(|e| bad(e.to_string()))?;
    // A utf8 element is one string: its byte length is the row's one (implicit) dimension.
    let shape: Vec<u64> = if c.dtype == DType::Utf8 { vec![bytes.len() as u64] } else { Vec::new() };
    data.push_row(&shape, &bytes)?;
    Ok(data)
}

/// A number as `dtype`'s little-endian bytes, if the dtype holds it (`tessera::cast`, the
/// rule `ingest` and the Python package apply too).
fn cast_le(dtype: DType, x: Number) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(8);
    push_number(dtype, x, &mut out).map_err(|e| format!("{} does not fit {}: {}", e.value, e.dtype, e.reason))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_values_follow_the_cast_rule() {
        use tessera::Column;
        let half = Column::new("h", DType::F16, &[]);
        let err = |c: &Column, text: &str| scalar_value(c, text).unwrap_err().to_string();
        assert!(
            err(&half, "70000").contains("70000 does not fit f16: would become infinite"),
            "{}",
            err(&half, "70000")
        );
        assert!(err(&half, "1e6").contains("does not fit f16: would become infinite"));
        assert!(scalar_value(&half, "0.5").is_ok());
        let byte = Column::new("b", DType::U8, &[]);
        assert!(err(&byte, "256").contains("256 does not fit u8: out of range"));
        assert!(err(&byte, "18446744073709551616").contains("does not fit u8"));
        assert!(scalar_value(&byte, "255").is_ok());
        assert!(err(&byte, "cat").contains("not a literal"));
    }

    #[test]
    fn literals() {
        assert_eq!(literal(" 3 "), Some(Lit::Int(3)));
        assert_eq!(literal("-2.5"), Some(Lit::Float(-2.5)));
        assert_eq!(literal("1e3"), Some(Lit::Float(1000.0)));
        assert_eq!(literal("true"), Some(Lit::Bool(true)));
        assert_eq!(literal("null"), Some(Lit::Null));
        assert_eq!(literal(r#""x\"y""#), Some(Lit::Str("x\"y".into())));
        assert_eq!(literal("cat"), Some(Lit::Word("cat".into())));
        for bad in ["", "\"open", r#""a"b""#, r#""\n""#, "1.2.3", "a b", "x=y"] {
            assert_eq!(literal(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn row_lists() {
        assert_eq!(parse_rows("1, 5,9-12").unwrap(), vec![1, 5, 9, 10, 11, 12]);
        for bad in ["", "x", "3-1", "1-", "-2", "0-99999999"] {
            assert!(parse_rows(bad).is_err(), "{bad:?}");
        }
    }
}
