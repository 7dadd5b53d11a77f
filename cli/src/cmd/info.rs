//! `tessera info`: schema, rows, version, history length, sizes and per-column compression.
//!
//! Per-column sizes come from the data file footers: the stored and raw lengths of every
//! block (validity, shapes, pages) of the column, summed over the version's files. That is
//! one footer read per data file (`--no-sizes` skips it).

use std::collections::{BTreeMap, HashSet};

use serde_json::json;

use super::{AtArgs, Ctx, DatasetFlag, emit, emit_json, fmt_bytes, fmt_compression, fmt_kind, fmt_shape, fmt_time, open};
use crate::error::{CliResult, Exit};

/// Arguments of `tessera info`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Dataset path or URL (or --dataset).
    #[arg(value_name = "DATASET")]
    dataset: Option<String>,
    #[command(flatten)]
    ds: DatasetFlag,
    #[command(flatten)]
    at: AtArgs,
    /// Skip reading data file footers (no per-column sizes).
    #[arg(long)]
    no_sizes: bool,
}

/// Stored and raw bytes of a column.
#[derive(Clone, Copy, Debug, Default)]
struct Sizes {
    stored: u64,
    raw: u64,
}

fn ratio(s: Sizes) -> f64 {
    if s.stored == 0 { 1.0 } else { s.raw as f64 / s.stored as f64 }
}

/// Runs `tessera info`.
///
/// # Errors
/// Not found, or validation errors reading the manifest, segments or footers.
pub(crate) fn run(ctx: &Ctx, args: &Args) -> CliResult<Exit> {
    let ds = open(&args.ds, args.dataset.as_deref(), &args.at)?;
    let location = ds.store().url().to_string();
    let m = ds.manifest();
    let mut per_column: BTreeMap<u32, Sizes> = BTreeMap::new();
    let mut files = HashSet::new();
    let mut file_bytes = 0u64;
    let mut deleted = 0u64;
    for info in ds.fragments() {
        deleted += info.fragment.row_count - info.fragment.live_rows();
        for f in &info.fragment.files {
            if files.insert(f.path.clone()) {
                file_bytes += f.size;
            }
            if args.no_sizes {
                continue;
            }
            let df = ds.data_file(&info.fragment, f)?;
            for chunk in &df.footer().columns {
                if !f.column_ids.contains(&chunk.column_id) {
                    continue; // superseded by an update, or dropped
                }
                let s = per_column.entry(chunk.column_id).or_default();
                for b in chunk.blocks() {
                    s.stored += b.stored_len;
                    s.raw += b.raw_len;
                }
            }
        }
    }
    let total = per_column.values().fold(Sizes::default(), |a, s| Sizes { stored: a.stored + s.stored, raw: a.raw + s.raw });
    let versions = ds.log()?.len();
    let branches = ds.branches()?;
    let tags = ds.tags()?;
    if ctx.json {
        let columns: Vec<serde_json::Value> = ds
            .schema()
            .columns
            .iter()
            .map(|c| {
                let mut v = tessera::dump::column_json(c);
                if let (Some(o), Some(s)) = (v.as_object_mut(), per_column.get(&c.id)) {
                    o.insert("bytes_stored".into(), json!(s.stored));
                    o.insert("bytes_raw".into(), json!(s.raw));
                    o.insert("ratio".into(), json!(ratio(*s)));
                }
                v
            })
            .collect();
        emit_json(&json!({
            "dataset": location, "branch": ds.branch(), "version": ds.version(), "versions": versions,
            "timestamp_ms": m.timestamp_ms, "message": m.message, "rows": ds.row_count(),
            "deleted_rows": deleted, "fragments": ds.fragments().len(), "data_files": files.len(),
            "bytes_files": file_bytes,
            "bytes_stored": (!args.no_sizes).then_some(total.stored),
            "bytes_raw": (!args.no_sizes).then_some(total.raw),
            "ratio": (!args.no_sizes).then(|| ratio(total)),
            "branches": branches, "tags": tags, "columns": columns,
            "metadata": ds.schema().metadata.iter().cloned().collect::<BTreeMap<String, String>>(),
        }));
        return Ok(Exit::Ok);
    }
    let mut s = String::new();
    s += &format!("dataset   {location}\n");
    s += &format!("version   {}@{} ({versions} versions in its history)\n", ds.branch(), ds.version());
    s += &format!("committed {}  {:?}\n", fmt_time(m.timestamp_ms), m.message);
    s += &format!("rows      {}", ds.row_count());
    if deleted > 0 {
        s += &format!(" (+{deleted} deleted)");
    }
    s += &format!(" in {} fragments, {} data files ({})\n", ds.fragments().len(), files.len(), fmt_bytes(file_bytes));
    if !args.no_sizes {
        s += &format!(
            "size      {} stored, {} raw (compression ratio {:.2})\n",
            fmt_bytes(total.stored),
            fmt_bytes(total.raw),
            ratio(total)
        );
    }
    s += &format!("branches  {}\n", branches.join(", "));
    s += &format!("tags      {}\n", if tags.is_empty() { "-".to_string() } else { tags.join(", ") });
    s += "columns:\n";
    let mut table = vec![vec![
        "name".to_string(),
        "kind".into(),
        "dtype".into(),
        "shape".into(),
        "null".into(),
        "codec".into(),
        "stored".into(),
        "raw".into(),
        "ratio".into(),
    ]];
    for c in &ds.schema().columns {
        let sz = per_column.get(&c.id).copied();
        table.push(vec![
            c.name.clone(),
            fmt_kind(&c.kind),
            c.dtype.name().to_string(),
            fmt_shape(&c.shape),
            if c.nullable { "yes".into() } else { "no".into() },
            fmt_compression(c.compression),
            sz.map_or("-".into(), |s| fmt_bytes(s.stored)),
            sz.map_or("-".into(), |s| fmt_bytes(s.raw)),
            sz.map_or("-".into(), |s| format!("{:.2}", ratio(s))),
        ]);
    }
    s += &render_table(&table, "  ");
    emit(&s);
    Ok(Exit::Ok)
}

/// Left-aligned columns separated by two spaces.
pub(crate) fn render_table(rows: &[Vec<String>], indent: &str) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> =
        (0..n).map(|i| rows.iter().filter_map(|r| r.get(i)).map(|c| c.chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in rows {
        out += indent;
        for (i, cell) in r.iter().enumerate() {
            out += cell;
            if i + 1 < r.len() {
                out += &" ".repeat(widths[i] - cell.chars().count() + 2);
            }
        }
        out += "\n";
    }
    out
}
