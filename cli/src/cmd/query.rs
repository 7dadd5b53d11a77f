//! `tessera query DATASET "SQL"`: SQL over one version (crate `tessera-query`), printed as a
//! table or JSON, or saved as a view.

use std::fmt::Write as _;

use serde_json::{Value as J, json};
use tessera::At;
use tessera_query::convert::{META_DTYPE, META_SHAPE};
use tessera_query::datafusion::arrow::array::{Array, RecordBatch};
use tessera_query::datafusion::arrow::datatypes::{DataType, Field, SchemaRef};
use tessera_query::datafusion::common::ScalarValue;
use tessera_query::{QueryEngine, QueryError, ScanOptions, TABLE};

use super::{Ctx, DatasetArg, emit, emit_json, open_store, open_version, required};
use crate::error::{CliError, CliResult, Exit};

/// Help after the options.
const AFTER_HELP: &str = "\
The dataset is the table `ds`. Its columns are the dataset's, plus:
  _rowid          the row's position in the version (0-based; what views and `show` use)
  <label>_name    the class name of each class-label column <label>
Tensor columns are Arrow lists (printed as their dtype and shape, e.g. u8[224,224,3]).

Vector functions (f32/f16/bf16 vectors; a query vector is written [0.1, 0.2, ...]):
  cosine_distance(a, b)   1 - cos(a, b); nearest first: ORDER BY d
  l2_distance(a, b)       Euclidean distance
  inner_product(a, b)     dot product; nearest first: ORDER BY ... DESC
ORDER BY ... LIMIT k is an exact top-k; rows that tie come out in _rowid order. With a vector
index of the version on that column and metric (`tessera index create`), an unfiltered
nearest-first top-k probes the index instead: the rows it returns are ranked exactly, but rows
in unprobed lists can be missed (--nprobe N probes more; --exact never uses an index).
Filters on scalar columns skip fragments whose statistics cannot match.

Examples:
  tessera query data/pets \"SELECT label_name, count(*) FROM ds GROUP BY label_name\"
  tessera query data/pets \"SELECT _rowid, cosine_distance(emb, [0.1, 0.9]) AS d
                           FROM ds WHERE label_name = 'dog' ORDER BY d LIMIT 5\" --save-view dogs";

/// Arguments of `tessera query`.
#[derive(clap::Args, Debug)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct Args {
    #[command(flatten)]
    ds: DatasetArg,
    /// The SQL query; the dataset is the table `ds`.
    #[arg(value_name = "SQL")]
    sql: Option<String>,
    /// The version to query: a version number of main, or a tag (default: latest of main).
    #[arg(long, value_name = "VERSION|TAG")]
    at: Option<String>,
    /// Save the answer's rows, in order, as view NAME of the queried version.
    #[arg(long, value_name = "NAME")]
    save_view: Option<String>,
    /// Print at most N rows (default 100).
    #[arg(long, default_value_t = 100, value_name = "N")]
    limit: usize,
    /// Never use a vector index: every ORDER BY <distance> LIMIT k is the exact top-k.
    #[arg(long)]
    exact: bool,
    /// Lists a vector index search probes (default: 1/64 of the index's lists, at least 8). More is
    /// slower and finds more of the exact top-k; all of them is the exact answer.
    #[arg(long, value_name = "N", conflicts_with = "exact")]
    nprobe: Option<usize>,
}

/// Runs `tessera query`.
///
/// # Errors
/// Usage errors for bad SQL (with its position) or unknown columns (with the real ones);
/// the dataset's errors.
pub(crate) fn run(ctx: Ctx, args: &Args) -> CliResult<Exit> {
    let (location, [sql]) = args.ds.resolve([args.sql.clone()])?;
    let sql = required(sql, "SQL")?;
    let at = match args.at.as_deref() {
        None => At::Latest,
        Some(v) => v.parse::<u64>().map_or_else(|_| At::Tag(v.to_owned()), At::Version),
    };
    let ds = open_version(&open_store(&location)?, &at)?;
    let options = ScanOptions { vector_index: !args.exact, nprobe: args.nprobe, ..ScanOptions::default() };
    let engine = QueryEngine::with_options(ds, options).map_err(cli_error)?;
    if let Some(name) = &args.save_view {
        let rows = engine.view_rows(&sql).map_err(cli_error)?;
        let ds = engine.table().dataset();
        let view = ds.save_view_rows_with(name, rows, &sql, &tessera::WriteOptions::default())?;
        let rows = &view.rows;
        let at = format!("{}@{}", view.target.branch, view.target.version);
        if ctx.json {
            emit_json(&json!({"view": view.name, "rows": rows.len(), "branch": ds.branch(), "version": ds.version()}));
        } else {
            emit(&format!("saved view {}: {} rows of {at}", view.name, rows.len()));
        }
        return Ok(Exit::Ok);
    }
    let mut rows: Vec<Vec<Cell>> = Vec::new();
    let mut more = false;
    let schema = engine
        .each_batch(&sql, |batch| {
            more |= collect(&batch, args.limit, &mut rows);
            !more
        })
        .map_err(cli_error)?;
    if ctx.json {
        let names: Vec<&String> = schema.fields().iter().map(|f| f.name()).collect();
        let list: Vec<J> = rows
            .iter()
            .map(|r| J::Object(names.iter().zip(r).map(|(n, c)| ((*n).clone(), c.json.clone())).collect()))
            .collect();
        emit_json(&json!({"rows": list, "truncated": more}));
    } else {
        emit(&table(&schema, &rows));
        if more {
            ctx.info(&format!("(more rows not shown; --limit {} prints at most {0})", args.limit));
        }
    }
    Ok(Exit::Ok)
}

fn cli_error(e: QueryError) -> CliError {
    match e {
        QueryError::Usage(m) => {
            CliError::usage(m).note(format!("the dataset is the table `{TABLE}`; see tessera query --help"))
        }
        QueryError::Dataset(e) => e.into(),
        QueryError::Engine(e) => CliError::other(format!("query engine: {e}")),
    }
}

/// One printed value: its text and its JSON.
struct Cell {
    text: String,
    json: J,
}

/// Appends the batch's rows (up to `limit` in all); `true` when rows were left out.
fn collect(batch: &RecordBatch, limit: usize, rows: &mut Vec<Vec<Cell>>) -> bool {
    let schema = batch.schema();
    for i in 0..batch.num_rows() {
        if rows.len() >= limit {
            return true;
        }
        rows.push(schema.fields().iter().zip(batch.columns()).map(|(f, a)| cell(f, a.as_ref(), i)).collect());
    }
    false
}

/// Row `i` of `array` (a field of the answer) as a cell: tensors summarized as dtype and shape.
fn cell(field: &Field, array: &dyn Array, i: usize) -> Cell {
    if array.is_null(i) {
        return Cell { text: "null".into(), json: J::Null };
    }
    if let DataType::FixedSizeList(..) | DataType::List(_) | DataType::LargeList(_) = field.data_type() {
        let (dtype, shape) = tensor_summary(field, array, i);
        return Cell { text: format!("{dtype}{shape}"), json: json!({"dtype": dtype, "shape": shape}) };
    }
    let Ok(v) = ScalarValue::try_from_array(array, i) else {
        return Cell { text: "?".into(), json: J::Null };
    };
    match v {
        ScalarValue::Float16(Some(x)) => float(f64::from(x.to_f32())),
        ScalarValue::Float32(Some(x)) => float(f64::from(x)),
        ScalarValue::Float64(Some(x)) => float(x),
        ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)) | ScalarValue::LargeUtf8(Some(s)) => {
            let text = if s.chars().count() > 40 {
                format!("{}…", s.chars().take(39).collect::<String>())
            } else {
                s.clone()
            };
            Cell { text, json: J::String(s) }
        }
        ScalarValue::Binary(Some(b)) | ScalarValue::BinaryView(Some(b)) | ScalarValue::LargeBinary(Some(b)) => {
            Cell { text: format!("<{} bytes>", b.len()), json: json!({"bytes": b.len()}) }
        }
        other => {
            let text = other.to_string();
            let json = serde_json::from_str::<J>(&text).unwrap_or(J::String(text.clone()));
            Cell { text, json }
        }
    }
}

/// Floats with four decimals in text; JSON numbers (NaN and infinities as null).
fn float(x: f64) -> Cell {
    Cell { text: format!("{x:.4}"), json: serde_json::Number::from_f64(x).map_or(J::Null, J::Number) }
}

/// The dtype name and the row's shape of a tensor cell: from the field's `tessera.*` metadata
/// when the column comes from the dataset (a ragged dim gets this row's size when it is the
/// only one), else the list's element type and length.
fn tensor_summary(field: &Field, array: &dyn Array, i: usize) -> (String, String) {
    let len = list_len(array, i);
    let meta = field.metadata();
    let (Some(dtype), Some(shape)) = (meta.get(META_DTYPE), meta.get(META_SHAPE)) else {
        let item = match field.data_type() {
            DataType::FixedSizeList(f, _) | DataType::List(f) | DataType::LargeList(f) => f.data_type().to_string(),
            other => other.to_string(),
        };
        return (item.to_lowercase(), format!("[{len}]"));
    };
    let dims: Vec<&str> = shape.trim_matches(['[', ']']).split(',').collect();
    let fixed: usize = dims.iter().filter_map(|d| d.parse::<usize>().ok()).product();
    let ragged = dims.iter().filter(|d| **d == "?").count();
    if ragged == 1 && fixed > 0 {
        let filled = dims.iter().map(|d| if *d == "?" { (len / fixed).to_string() } else { (*d).to_owned() });
        return (dtype.clone(), format!("[{}]", filled.collect::<Vec<_>>().join(",")));
    }
    (dtype.clone(), shape.clone())
}

fn list_len(array: &dyn Array, i: usize) -> usize {
    use tessera_query::datafusion::arrow::array::AsArray;
    match array.data_type() {
        DataType::FixedSizeList(_, n) => *n as usize,
        DataType::List(_) => array.as_list::<i32>().value_length(i) as usize,
        DataType::LargeList(_) => array.as_list::<i64>().value_length(i) as usize,
        _ => 0,
    }
}

/// The rows as aligned columns under a header; numbers right-aligned.
fn table(schema: &SchemaRef, rows: &[Vec<Cell>]) -> String {
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let right: Vec<bool> = schema.fields().iter().map(|f| f.data_type().is_numeric()).collect();
    let mut widths: Vec<usize> = names.iter().map(|n| n.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.text.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (k, text) in cells.iter().enumerate() {
            let pad = widths[k].saturating_sub(text.chars().count());
            if k > 0 {
                l.push_str("  ");
            }
            if right[k] {
                l.push_str(&" ".repeat(pad));
                l.push_str(text);
            } else {
                l.push_str(text);
                l.push_str(&" ".repeat(pad));
            }
        }
        let _ = writeln!(out, "{}", l.trim_end());
    };
    line(names.clone());
    for r in rows {
        line(r.iter().map(|c| c.text.as_str()).collect());
    }
    let _ = write!(out, "({} row{})", rows.len(), if rows.len() == 1 { "" } else { "s" });
    out
}
