//! JSON Lines: one object per line, one row per object.
//!
//! Column types come from the first record that has a non-null value for the field:
//! integers → i64, floats → f64 (an integer column that later meets a float becomes f64),
//! booleans → bool, strings → utf8 (kind text), objects and arrays → utf8 (kind json,
//! re-serialized). A field that is null or missing in any record makes its column nullable.
//! Columns are ordered by first appearance (the keys of one record in sorted order). A later
//! value of another type is a bad line.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde_json::Value as J;
use tessera::{Column, DType, Kind};

use super::{Bad, Decoded, Sample, Value, default_compression};
use crate::error::{IngestError, IngestResult};

/// The inferred type of a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JType {
    /// i64.
    Int,
    /// f64.
    Float,
    /// bool.
    Bool,
    /// utf8 text.
    Str,
    /// utf8 JSON.
    Json,
}

/// The columns of a set of JSON Lines files.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// Field name, type (None while only nulls were seen) and nullability.
    pub(crate) fields: Vec<(String, Option<JType>, bool)>,
    /// Total bytes of the files.
    pub(crate) total_bytes: u64,
    /// Non-empty lines.
    pub(crate) lines: u64,
    /// The files, in order.
    pub(crate) files: Vec<PathBuf>,
}

fn jtype(v: &J) -> Option<JType> {
    match v {
        J::Null => None,
        J::Bool(_) => Some(JType::Bool),
        J::Number(n) if n.is_i64() => Some(JType::Int),
        J::Number(_) => Some(JType::Float),
        J::String(_) => Some(JType::Str),
        J::Array(_) | J::Object(_) => Some(JType::Json),
    }
}

/// Expands directories to their `.jsonl`/`.ndjson` files and scans every line to infer the
/// columns. Lines that do not parse are left for the decode pass to report.
///
/// # Errors
/// Missing or unreadable files.
pub(crate) fn scan(inputs: &[PathBuf]) -> IngestResult<Plan> {
    let files = super::expand_inputs(inputs, &["jsonl", "ndjson"])?;
    let mut plan = Plan { fields: Vec::new(), total_bytes: 0, lines: 0, files: files.clone() };
    for f in &files {
        plan.total_bytes += std::fs::metadata(f).map_err(|e| IngestError::io(f, &e))?.len();
        let reader = BufReader::new(File::open(f).map_err(|e| IngestError::io(f, &e))?);
        for line in reader.lines() {
            let line = line.map_err(|e| IngestError::io(f, &e))?;
            if line.trim().is_empty() {
                continue;
            }
            let Ok(J::Object(obj)) = serde_json::from_str::<J>(&line) else { continue };
            plan.lines += 1;
            for (k, v) in &obj {
                let t = jtype(v);
                match plan.fields.iter_mut().find(|(n, _, _)| n == k) {
                    None => plan.fields.push((k.clone(), t, t.is_none() || plan.lines > 1)),
                    Some((_, have, nullable)) => {
                        *nullable |= t.is_none();
                        match (*have, t) {
                            (None, t) => *have = t,
                            (Some(JType::Int), Some(JType::Float)) => *have = Some(JType::Float),
                            _ => {}
                        }
                    }
                }
            }
            for (n, _, nullable) in &mut plan.fields {
                if !obj.contains_key(n.as_str()) {
                    *nullable = true;
                }
            }
        }
    }
    Ok(plan)
}

impl Plan {
    /// The columns. Fields that were null everywhere are utf8 text (nullable).
    pub(crate) fn columns(&self) -> Vec<Column> {
        self.fields
            .iter()
            .map(|(name, t, nullable)| {
                let c = match t.unwrap_or(JType::Str) {
                    JType::Int => Column::new(name, DType::I64, &[]),
                    JType::Float => Column::new(name, DType::F64, &[]),
                    JType::Bool => Column::new(name, DType::Bool, &[]),
                    JType::Str => Column::new(name, DType::Utf8, &[]).with_kind(Kind::Text),
                    JType::Json => Column::new(name, DType::Utf8, &[]).with_kind(Kind::Json),
                };
                let c = c.clone().with_compression(default_compression(&c));
                if *nullable || t.is_none() { c.nullable() } else { c }
            })
            .collect()
    }
}

/// Receives chunks of `(origin, line)`; returns false to stop the reader.
pub(crate) type LineSink<'a> = dyn FnMut(Result<Vec<(String, String)>, Bad>) -> bool + 'a;

/// Reads the files' non-empty lines in chunks of `chunk` as `(origin, line)`; stops when
/// `emit` returns false. Read failures are reported as bad inputs.
pub(crate) fn read_lines(files: &[PathBuf], chunk: usize, emit: &mut LineSink<'_>) {
    let mut buf = Vec::with_capacity(chunk);
    for f in files {
        let name = f.display().to_string();
        let reader = match File::open(f) {
            Ok(r) => BufReader::new(r),
            Err(e) => {
                if !emit(Err(Bad::new(&name, e.to_string()))) {
                    return;
                }
                continue;
            }
        };
        for (i, line) in reader.lines().enumerate() {
            match line {
                Ok(l) if l.trim().is_empty() => {}
                Ok(l) => {
                    buf.push((format!("{name}:{}", i + 1), l));
                    if buf.len() >= chunk && !emit(Ok(std::mem::take(&mut buf))) {
                        return;
                    }
                }
                Err(e) => {
                    if !emit(Err(Bad::new(format!("{name}:{}", i + 1), e.to_string()))) {
                        return;
                    }
                    break;
                }
            }
        }
    }
    if !buf.is_empty() {
        emit(Ok(buf));
    }
}

/// Decodes one line against the plan.
pub(crate) fn decode_line(origin: String, line: &str, plan: &Plan) -> Decoded {
    let bad = |r: String| Bad::new(&origin, r);
    let obj = match serde_json::from_str::<J>(line) {
        Ok(J::Object(o)) => o,
        Ok(_) => return Err(bad("line is not a JSON object".into())),
        Err(e) => return Err(bad(format!("invalid JSON: {e}"))),
    };
    let mut fields = Vec::with_capacity(plan.fields.len());
    for (name, t, _) in &plan.fields {
        let v = obj.get(name.as_str()).unwrap_or(&J::Null);
        let value = match (t.unwrap_or(JType::Str), v) {
            (_, J::Null) => Value::Null,
            (JType::Int, J::Number(n)) if n.is_i64() => Value::Int(n.as_i64().unwrap_or_default()),
            (JType::Float, J::Number(n)) => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            (JType::Bool, J::Bool(b)) => Value::Bool(*b),
            (JType::Str, J::String(s)) => Value::Text(s.clone()),
            (JType::Json, J::Array(_) | J::Object(_)) => Value::Json(v.to_string()),
            (t, v) => return Err(bad(format!("field {name:?}: expected {t:?}, got {}", short(v)))),
        };
        fields.push((name.clone(), value));
    }
    for k in obj.keys() {
        if !plan.fields.iter().any(|(n, _, _)| n == k) {
            return Err(bad(format!("field {k:?} is not a column")));
        }
    }
    Ok(Sample { origin, fields, input_bytes: line.len() as u64 + 1 })
}

fn short(v: &J) -> String {
    let s = v.to_string();
    if s.chars().count() > 40 { format!("{}…", s.chars().take(40).collect::<String>()) } else { s }
}

/// The directory a schema sidecar would be in.
pub(crate) fn sidecar_dir(inputs: &[PathBuf]) -> PathBuf {
    inputs
        .first()
        .map(|p| if p.is_dir() { p.clone() } else { p.parent().map(Path::to_path_buf).unwrap_or_default() })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infers_and_decodes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.jsonl");
        std::fs::write(
            &p,
            "{\"a\": 1, \"b\": \"x\", \"c\": null}\n\n{\"a\": 2.5, \"b\": \"y\", \"c\": [1], \"d\": true}\n",
        )
        .unwrap();
        let plan = scan(&[p]).unwrap();
        let want = vec![
            ("a".to_string(), Some(JType::Float), false),
            ("b".to_string(), Some(JType::Str), false),
            ("c".to_string(), Some(JType::Json), true),
            ("d".to_string(), Some(JType::Bool), true),
        ];
        assert_eq!(plan.fields, want);
        let s = decode_line("x:1".into(), "{\"a\": 1, \"b\": \"x\"}", &plan).unwrap();
        assert_eq!(s.fields[0].1, Value::Float(1.0));
        assert_eq!(s.fields[3].1, Value::Null);
        assert!(decode_line("x:2".into(), "{\"a\": \"no\"}", &plan).is_err());
        assert!(decode_line("x:3".into(), "[1]", &plan).is_err());
    }
}
