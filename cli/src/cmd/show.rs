//! `tessera show DATASET ROW`: print one row. Scalars and text are printed; class labels with their
//! name; small tensors in full; images and big tensors as shape, dtype, min, max and mean.

use serde_json::{Value as J, json};
use std::fmt::Write as _;
use tessera::{ColumnData, DType, Kind};

use super::{AtArgs, Ctx, DatasetArg, emit, emit_json, fmt_kind, open_store, open_version, required};
use crate::error::{CliError, CliResult, Exit};

/// Arguments of `tessera show`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    ds: DatasetArg,
    /// Row index (0-based, in the version's row order).
    #[arg(value_name = "ROW")]
    row: Option<String>,
    #[command(flatten)]
    at: AtArgs,
    /// Only these columns (comma-separated).
    #[arg(short, long, value_delimiter = ',', value_name = "COL")]
    columns: Vec<String>,
    /// Print tensors of up to N elements in full (default 16).
    #[arg(long, default_value_t = 16, value_name = "N")]
    max_elements: usize,
    /// Print text up to N characters (default 500).
    #[arg(long, default_value_t = 500, value_name = "N")]
    max_chars: usize,
}

/// Every element of little-endian `bytes` as f64 (numeric dtypes).
pub(crate) fn elements_f64(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    let n = dtype.item_size();
    bytes
        .chunks_exact(n)
        .map(|e| match dtype {
            DType::Bool | DType::U8 | DType::Utf8 | DType::Bytes => f64::from(e[0]),
            DType::I8 => f64::from(e[0].cast_signed()),
            DType::U16 => f64::from(u16::from_le_bytes([e[0], e[1]])),
            DType::I16 => f64::from(i16::from_le_bytes([e[0], e[1]])),
            DType::U32 => f64::from(u32::from_le_bytes([e[0], e[1], e[2], e[3]])),
            DType::I32 => f64::from(i32::from_le_bytes([e[0], e[1], e[2], e[3]])),
            DType::F32 => f64::from(f32::from_le_bytes([e[0], e[1], e[2], e[3]])),
            DType::F16 => half::f16::from_le_bytes([e[0], e[1]]).to_f64(),
            DType::Bf16 => half::bf16::from_le_bytes([e[0], e[1]]).to_f64(),
            DType::U64 => u64::from_le_bytes(le8(e)) as f64,
            DType::I64 => i64::from_le_bytes(le8(e)) as f64,
            DType::F64 => f64::from_le_bytes(le8(e)),
        })
        .collect()
}

/// Lower-case hex of bytes.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes.iter().flat_map(|b| [DIGITS[usize::from(b >> 4)] as char, DIGITS[usize::from(b & 15)] as char]).collect()
}

fn le8(e: &[u8]) -> [u8; 8] {
    let mut b = [0u8; 8];
    b.copy_from_slice(&e[..8]);
    b
}

/// Elements as JSON numbers, integers exactly.
fn elements_json(dtype: DType, bytes: &[u8]) -> Vec<J> {
    let n = dtype.item_size();
    match dtype {
        DType::U64 => bytes.chunks_exact(n).map(|e| json!(u64::from_le_bytes(le8(e)))).collect(),
        DType::I64 => bytes.chunks_exact(n).map(|e| json!(i64::from_le_bytes(le8(e)))).collect(),
        DType::Bool => bytes.iter().map(|&b| json!(b != 0)).collect(),
        d if d.is_integer() => elements_f64(d, bytes).into_iter().map(|x| json!(x as i64)).collect(),
        d => elements_f64(d, bytes).into_iter().map(|x| json!(x)).collect(),
    }
}

fn text_of(j: &J) -> String {
    match j {
        J::Number(n) => n.to_string(),
        J::Bool(b) => b.to_string(),
        J::Null => "nan".to_string(),
        other => other.to_string(),
    }
}

/// Truncates to `max` characters with an ellipsis and a count.
fn clip(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max { s.to_string() } else { format!("{}… ({n} chars)", s.chars().take(max).collect::<String>()) }
}

/// The description of one value: (JSON, text).
fn describe(col: &tessera::Column, data: &ColumnData, max_elements: usize, max_chars: usize) -> (J, String) {
    if !data.is_valid(0) {
        return (J::Null, "null".into());
    }
    let bytes = data.row(0);
    let shape = data.row_shape(0);
    match col.dtype {
        DType::Utf8 => {
            let s = String::from_utf8_lossy(bytes);
            let text = if col.kind == Kind::Json { clip(&s, max_chars) } else { format!("{:?}", clip(&s, max_chars)) };
            return (json!({"value": s}), text);
        }
        DType::Bytes => {
            let head = hex(&bytes[..bytes.len().min(16)]);
            let more = if bytes.len() > 16 { "…" } else { "" };
            return (json!({"bytes": bytes.len(), "head_hex": head}), format!("{} bytes: {head}{more}", bytes.len()));
        }
        _ => {}
    }
    if shape.is_empty() {
        let v = elements_json(col.dtype, bytes).pop().unwrap_or(J::Null);
        if let Kind::ClassLabel { names } = &col.kind {
            let name = v.as_u64().and_then(|i| names.get(i as usize)).cloned();
            let text = format!("{} ({})", text_of(&v), name.as_deref().unwrap_or("?"));
            return (json!({"value": v, "class": name}), text);
        }
        return (json!({"value": v}), text_of(&v));
    }
    let count = bytes.len() / col.dtype.item_size();
    let is_image = matches!(col.kind, Kind::Image { .. });
    if count <= max_elements && !is_image {
        let vals = elements_json(col.dtype, bytes);
        let mut text = format!("{} {:?} [", col.dtype, shape);
        text += &vals.iter().map(text_of).collect::<Vec<_>>().join(", ");
        text += "]";
        if let Kind::ClassLabel { names } = &col.kind {
            let named: Vec<&str> = vals
                .iter()
                .filter_map(|v| v.as_u64().and_then(|i| names.get(i as usize)))
                .map(String::as_str)
                .collect();
            let _ = write!(text, " ({})", named.join(", "));
        }
        return (json!({"dtype": col.dtype.name(), "shape": shape, "values": vals}), text);
    }
    let xs = elements_f64(col.dtype, bytes);
    let finite = xs.iter().copied().filter(|x| !x.is_nan());
    let (mut min, mut max, mut sum, mut n) = (f64::INFINITY, f64::NEG_INFINITY, 0.0, 0usize);
    for x in finite {
        min = min.min(x);
        max = max.max(x);
        sum += x;
        n += 1;
    }
    let mean = if n > 0 { sum / n as f64 } else { f64::NAN };
    let (min, max) = if n > 0 { (min, max) } else { (f64::NAN, f64::NAN) };
    let kind = if is_image { format!("{} ", fmt_kind(&col.kind)) } else { String::new() };
    let text = format!("{kind}{} {shape:?}  min {min} max {max} mean {mean:.4}", col.dtype);
    (json!({"dtype": col.dtype.name(), "shape": shape, "min": min, "max": max, "mean": mean, "elements": count}), text)
}

/// Runs `tessera show`.
///
/// # Errors
/// Not found for a row past the end; usage for unknown columns; validation errors.
pub(crate) fn run(ctx: Ctx, args: &Args) -> CliResult<Exit> {
    let (location, [row]) = args.ds.resolve([args.row.clone()])?;
    let row = required(row, "ROW")?;
    let row: u64 = row.parse().map_err(|_| CliError::usage(format!("bad row {row:?} (a row index: 0, 1, ...)")))?;
    let ds = open_version(&open_store(&location)?, &args.at.at())?;
    if row >= ds.row_count() {
        return Err(CliError::not_found(format!(
            "row {} does not exist ({}@{} has {} rows)",
            row,
            ds.branch(),
            ds.version(),
            ds.row_count()
        )));
    }
    let names: Vec<&str> = args.columns.iter().map(String::as_str).collect();
    let projection = (!names.is_empty()).then_some(names.as_slice());
    let cols = ds.project(projection)?;
    let batch = ds.read_row(row, projection)?;
    let mut out = serde_json::Map::new();
    let mut rows = Vec::new();
    for c in cols {
        let Some(data) = batch.get(&c.name) else { continue };
        let (j, text) = describe(c, data, args.max_elements, args.max_chars);
        out.insert(c.name.clone(), j);
        rows.push((c.name.clone(), text));
    }
    if ctx.json {
        emit_json(&json!({"branch": ds.branch(), "version": ds.version(), "row": row, "columns": out}));
        return Ok(Exit::Ok);
    }
    let w = rows.iter().map(|(n, _)| n.chars().count()).max().unwrap_or(0);
    let mut s = format!("row {} of {} ({}@{})\n", row, ds.row_count(), ds.branch(), ds.version());
    for (n, t) in rows {
        let _ = writeln!(s, "  {n:<w$}  {t}");
    }
    emit(&s);
    Ok(Exit::Ok)
}
