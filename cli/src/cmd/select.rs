//! Row selection for commands that change rows (`delete`, `update`): `--rows 1,5,9-12` or
//! `--where EXPR`, a small predicate language over scalar columns.
//!
//! ```text
//! expr  := and ("or" and)*
//! and   := atom ("and" atom)*
//! atom  := "(" expr ")" | "not" atom | COLUMN OP LITERAL
//! OP    := == != < <= > >=
//! LITERAL := integer | float | "string" | true | false | null
//! ```
//!
//! Columns must be scalar (shape `[]`): numbers, bools or `utf8` text; a class-label column
//! also compares with a class name (`label == "cat"`). Integers compare exactly, floats as
//! f64; a null value satisfies only `== null` (and `!= LITERAL`). Rows are global row indices of
//! the version, in its row order.

use std::cmp::Ordering;

use tessera::cast::{Number, push_number};
use tessera::{ColumnData, DType, Dataset, Kind};

use crate::error::{CliError, CliResult};

/// Rows read per step while evaluating `--where` (bounds memory on large datasets).
const CHUNK_ROWS: u64 = 65_536;

/// The `--rows`/`--where` flags.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct Selection {
    /// Rows by index: comma-separated indices and inclusive ranges, e.g. 1,5,9-12.
    #[arg(long, value_name = "LIST", conflicts_with = "predicate", required_unless_present = "predicate")]
    rows: Option<String>,
    /// Rows by a predicate over scalar columns, e.g. 'label == 3 and score < 0.5' or
    /// 'name == "x" or id >= 100' (see `tessera delete --help`).
    #[arg(long = "where", value_name = "EXPR")]
    predicate: Option<String>,
}

/// Help text describing the selection flags.
pub(crate) const SELECTION_HELP: &str = "\
Selecting rows:
  --rows 1,5,9-12          row indices of the version (0-based; ranges inclusive)
  --where EXPR             rows where EXPR holds; EXPR compares scalar columns with literals:
                             label == 3        score < 0.5       name == \"x\"
                             label == \"cat\" (a class name)      caption != null
                           combined with and, or, not and parentheses; and binds tighter than or.
                           Operators: == != < <= > >=. Literals: integers, floats, \"strings\",
                           true, false, null. Columns: numbers and bools of shape [], utf8 text.";

impl Selection {
    /// The selected rows of `ds`, sorted and without duplicates.
    ///
    /// # Errors
    /// Usage error for a bad list or expression, an unknown or non-scalar column, or a row
    /// past the end; read errors of the dataset.
    pub(crate) fn rows(&self, ds: &Dataset) -> CliResult<Vec<u64>> {
        let mut rows = match (&self.rows, &self.predicate) {
            (Some(list), _) => parse_rows(list)?,
            (None, Some(expr)) => matching_rows(ds, &parse(expr)?)?,
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

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn holds(self, o: Ordering) -> bool {
        match self {
            Self::Eq => o == Ordering::Equal,
            Self::Ne => o != Ordering::Equal,
            Self::Lt => o == Ordering::Less,
            Self::Le => o != Ordering::Greater,
            Self::Gt => o == Ordering::Greater,
            Self::Ge => o != Ordering::Less,
        }
    }
}

/// A literal of the expression.
#[derive(Clone, Debug, PartialEq)]
enum Lit {
    Int(i128),
    Float(f64),
    Str(String),
    Bool(bool),
    Null,
}

/// A parsed predicate.
#[derive(Clone, Debug, PartialEq)]
enum Expr {
    Cmp(String, Op, Lit),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

impl Expr {
    fn columns<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Self::Cmp(c, ..) => {
                if !out.contains(&c.as_str()) {
                    out.push(c);
                }
            }
            Self::Not(e) => e.columns(out),
            Self::And(a, b) | Self::Or(a, b) => {
                a.columns(out);
                b.columns(out);
            }
        }
    }
}

/// A token of the expression.
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Lit(Lit),
    Op(Op),
    Open,
    Close,
}

fn tokenize(s: &str) -> CliResult<Vec<Tok>> {
    let err = |m: String| CliError::usage(format!("bad --where expression {s:?}: {m}"));
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '(' || c == ')' {
            out.push(if c == '(' { Tok::Open } else { Tok::Close });
            i += 1;
        } else if c == '"' {
            let mut text = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err(err("unterminated string".into())),
                    Some('"') => break,
                    Some('\\') if matches!(chars.get(i + 1), Some('"' | '\\')) => {
                        text.push(chars[i + 1]);
                        i += 2;
                        continue;
                    }
                    Some(&ch) => text.push(ch),
                }
                i += 1;
            }
            i += 1;
            out.push(Tok::Lit(Lit::Str(text)));
        } else if "=!<>".contains(c) {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            let (op, n) = match two.as_str() {
                "==" => (Op::Eq, 2),
                "!=" => (Op::Ne, 2),
                "<=" => (Op::Le, 2),
                ">=" => (Op::Ge, 2),
                _ if c == '<' => (Op::Lt, 1),
                _ if c == '>' => (Op::Gt, 1),
                _ => return Err(err(format!("unknown operator at {two:?} (use == != < <= > >=)"))),
            };
            out.push(Tok::Op(op));
            i += n;
        } else if c.is_ascii_digit() || c == '-' || c == '+' || c == '.' {
            let start = i;
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || ".+-".contains(chars[i])) {
                if (chars[i] == '-' || chars[i] == '+') && !matches!(chars[i - 1], 'e' | 'E') {
                    break;
                }
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            let lit = match text.parse::<i128>() {
                Ok(v) => Lit::Int(v),
                Err(_) => Lit::Float(text.parse::<f64>().map_err(|_| err(format!("bad number {text:?}")))?),
            };
            out.push(Tok::Lit(lit));
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || "_.-".contains(chars[i])) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            out.push(match word.as_str() {
                "true" => Tok::Lit(Lit::Bool(true)),
                "false" => Tok::Lit(Lit::Bool(false)),
                "null" => Tok::Lit(Lit::Null),
                _ => Tok::Ident(word),
            });
        } else {
            return Err(err(format!("unexpected {c:?}")));
        }
    }
    Ok(out)
}

/// Parses a `--where` expression.
fn parse(s: &str) -> CliResult<Expr> {
    let toks = tokenize(s)?;
    let mut p = Parser { toks: &toks, at: 0, src: s, depth: 0 };
    let e = p.or()?;
    if p.at != toks.len() {
        return Err(p.err("unexpected text after the expression"));
    }
    Ok(e)
}

/// Recursive descent over the tokens.
struct Parser<'a> {
    toks: &'a [Tok],
    at: usize,
    src: &'a str,
    depth: usize,
}

impl Parser<'_> {
    fn err(&self, m: &str) -> CliError {
        CliError::usage(format!("bad --where expression {:?}: {m}", self.src))
    }

    fn keyword(&mut self, k: &str) -> bool {
        if matches!(self.toks.get(self.at), Some(Tok::Ident(w)) if w == k) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> CliResult<Expr> {
        let mut e = self.and()?;
        while self.keyword("or") {
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> CliResult<Expr> {
        let mut e = self.atom()?;
        while self.keyword("and") {
            e = Expr::And(Box::new(e), Box::new(self.atom()?));
        }
        Ok(e)
    }

    fn atom(&mut self) -> CliResult<Expr> {
        self.depth += 1;
        if self.depth > 64 {
            return Err(self.err("nested too deeply"));
        }
        let e = self.atom_inner();
        self.depth -= 1;
        e
    }

    fn atom_inner(&mut self) -> CliResult<Expr> {
        if self.keyword("not") {
            return Ok(Expr::Not(Box::new(self.atom()?)));
        }
        match self.toks.get(self.at) {
            Some(Tok::Open) => {
                self.at += 1;
                let e = self.or()?;
                if self.toks.get(self.at) != Some(&Tok::Close) {
                    return Err(self.err("missing )"));
                }
                self.at += 1;
                Ok(e)
            }
            Some(Tok::Ident(name)) if !matches!(name.as_str(), "and" | "or") => {
                let (Some(Tok::Op(op)), Some(Tok::Lit(lit))) = (self.toks.get(self.at + 1), self.toks.get(self.at + 2))
                else {
                    return Err(self.err(&format!("expected `{name} OP LITERAL`")));
                };
                if *lit == Lit::Null && !matches!(op, Op::Eq | Op::Ne) {
                    return Err(self.err("null compares only with == and !="));
                }
                self.at += 3;
                Ok(Expr::Cmp(name.clone(), *op, lit.clone()))
            }
            _ => Err(self.err("expected a comparison, `not` or `(`")),
        }
    }
}

/// One value of a row, for comparison.
#[derive(Debug, PartialEq)]
enum Val<'a> {
    Int(i128),
    Float(f64),
    Bool(bool),
    Str(&'a str),
    Null,
}

fn value(data: &ColumnData, i: usize) -> Val<'_> {
    if !data.is_valid(i) {
        return Val::Null;
    }
    let e = data.row(i);
    let le8 = |e: &[u8]| {
        let mut b = [0u8; 8];
        b[..e.len().min(8)].copy_from_slice(&e[..e.len().min(8)]);
        b
    };
    match data.dtype() {
        DType::Bool => Val::Bool(e.first().is_some_and(|&b| b != 0)),
        DType::Utf8 => data.str_row(i).map_or(Val::Null, Val::Str),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => Val::Int(i128::from(u64::from_le_bytes(le8(e)))),
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => {
            // Sign-extend from the element's width.
            let bits = 64 - 8 * e.len() as u32;
            Val::Int(i128::from((i64::from_le_bytes(le8(e)) << bits) >> bits))
        }
        d => Val::Float(super::show::elements_f64(d, e).first().copied().unwrap_or(f64::NAN)),
    }
}

/// Whether `v OP lit` holds; `None` when the types cannot be compared.
fn compare(v: &Val<'_>, op: Op, lit: &Lit) -> Option<bool> {
    let ord = match (v, lit) {
        (Val::Null, Lit::Null) => return Some(op == Op::Eq),
        (Val::Null, _) | (_, Lit::Null) => return Some(op == Op::Ne),
        (Val::Int(a), Lit::Int(b)) => a.cmp(b),
        (Val::Int(a), Lit::Float(b)) => (*a as f64).partial_cmp(b)?,
        (Val::Float(a), Lit::Int(b)) => a.partial_cmp(&(*b as f64))?,
        (Val::Float(a), Lit::Float(b)) => a.partial_cmp(b)?,
        (Val::Bool(a), Lit::Bool(b)) => a.cmp(b),
        (Val::Str(a), Lit::Str(b)) => (*a).cmp(b.as_str()),
        _ => return None,
    };
    Some(op.holds(ord))
}

/// Checks the expression against the schema; class names become class ids.
fn bind(ds: &Dataset, e: &Expr) -> CliResult<Expr> {
    Ok(match e {
        Expr::Cmp(name, op, lit) => {
            let c = ds.schema().column(name).ok_or_else(|| {
                CliError::usage(format!("--where: no column named {name:?} in {}@{}", ds.branch(), ds.version()))
            })?;
            if !c.shape.is_empty() || c.dtype == DType::Bytes {
                return Err(CliError::usage(format!(
                    "--where: column {name:?} is {} {} (only scalar numbers, bools and text compare)",
                    c.dtype,
                    super::fmt_shape(&c.shape)
                )));
            }
            let lit = match (&c.kind, lit) {
                (Kind::ClassLabel { names }, Lit::Str(s)) => {
                    let id = names.iter().position(|n| n == s).ok_or_else(|| {
                        CliError::usage(format!("--where: {s:?} is not a class of {name:?} ({})", names.join(", ")))
                    })?;
                    Lit::Int(id as i128)
                }
                (_, l) => l.clone(),
            };
            let sample = match c.dtype {
                DType::Bool => Val::Bool(false),
                DType::Utf8 => Val::Str(""),
                d if d.is_integer() => Val::Int(0),
                _ => Val::Float(0.0),
            };
            if compare(&sample, *op, &lit).is_none() {
                return Err(CliError::usage(format!(
                    "--where: column {name:?} ({}) cannot compare with {lit:?}",
                    c.dtype
                )));
            }
            Expr::Cmp(name.clone(), *op, lit)
        }
        Expr::Not(a) => Expr::Not(Box::new(bind(ds, a)?)),
        Expr::And(a, b) => Expr::And(Box::new(bind(ds, a)?), Box::new(bind(ds, b)?)),
        Expr::Or(a, b) => Expr::Or(Box::new(bind(ds, a)?), Box::new(bind(ds, b)?)),
    })
}

fn eval(e: &Expr, batch: &tessera::Batch, i: usize) -> bool {
    match e {
        Expr::Cmp(name, op, lit) => {
            batch.get(name).is_some_and(|data| compare(&value(data, i), *op, lit).unwrap_or(false))
        }
        Expr::Not(a) => !eval(a, batch, i),
        Expr::And(a, b) => eval(a, batch, i) && eval(b, batch, i),
        Expr::Or(a, b) => eval(a, batch, i) || eval(b, batch, i),
    }
}

/// The rows of `ds` where `e` holds, reading only the columns it names, a chunk at a time.
fn matching_rows(ds: &Dataset, e: &Expr) -> CliResult<Vec<u64>> {
    let e = bind(ds, e)?;
    let mut names = Vec::new();
    e.columns(&mut names);
    let mut out = Vec::new();
    let mut start = 0;
    while start < ds.row_count() {
        let end = (start + CHUNK_ROWS).min(ds.row_count());
        let batch = ds.read_rows(start..end, Some(&names))?;
        out.extend((0..(end - start) as usize).filter(|&i| eval(&e, &batch, i)).map(|i| start + i as u64));
        start = end;
    }
    Ok(out)
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
    let lit = match tokenize(text.trim()).ok().as_deref() {
        Some([Tok::Lit(l)]) => l.clone(),
        _ if c.dtype == DType::Utf8 => Lit::Str(text.to_string()),
        Some([Tok::Ident(w)]) if matches!(c.kind, Kind::ClassLabel { .. }) => Lit::Str(w.clone()),
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
    }

    #[test]
    fn row_lists() {
        assert_eq!(parse_rows("1, 5,9-12").unwrap(), vec![1, 5, 9, 10, 11, 12]);
        for bad in ["", "x", "3-1", "1-", "-2", "0-99999999"] {
            assert!(parse_rows(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn expressions_parse_with_precedence() {
        let e = parse(r#"a == 1 or b < -2.5 and not (c != "x\"y")"#).unwrap();
        let cmp = |c: &str, op, l| Box::new(Expr::Cmp(c.into(), op, l));
        assert_eq!(
            e,
            Expr::Or(
                cmp("a", Op::Eq, Lit::Int(1)),
                Box::new(Expr::And(
                    cmp("b", Op::Lt, Lit::Float(-2.5)),
                    Box::new(Expr::Not(cmp("c", Op::Ne, Lit::Str("x\"y".into()))))
                ))
            )
        );
        assert_eq!(parse("x>=1e3").unwrap(), Expr::Cmp("x".into(), Op::Ge, Lit::Float(1000.0)));
        for bad in ["", "a", "a ==", "a = 1", "a == 1 and", "(a == 1", "a == 1)", "a < null", "\"s\" == a", "a == \"x"]
        {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let deep = format!("{}a == 1{}", "(".repeat(100), ")".repeat(100));
        assert!(parse(&deep).is_err(), "nesting is bounded");
    }

    #[test]
    fn comparisons_by_type() {
        assert_eq!(compare(&Val::Int(3), Op::Eq, &Lit::Int(3)), Some(true));
        assert_eq!(compare(&Val::Int(i128::from(u64::MAX)), Op::Gt, &Lit::Int(i128::from(i64::MAX))), Some(true));
        assert_eq!(compare(&Val::Float(0.5), Op::Lt, &Lit::Int(1)), Some(true));
        assert_eq!(compare(&Val::Null, Op::Eq, &Lit::Int(1)), Some(false));
        assert_eq!(compare(&Val::Null, Op::Ne, &Lit::Int(1)), Some(true));
        assert_eq!(compare(&Val::Null, Op::Eq, &Lit::Null), Some(true));
        assert_eq!(compare(&Val::Str("b"), Op::Ge, &Lit::Str("a".into())), Some(true));
        assert_eq!(compare(&Val::Str("b"), Op::Eq, &Lit::Int(1)), None);
        assert_eq!(compare(&Val::Float(f64::NAN), Op::Eq, &Lit::Float(1.0)), None);
    }
}
