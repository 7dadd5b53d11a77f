//! `tessera info`: schema, rows, version, history length, sizes and per-column compression.
//!
//! Per-column sizes come from the data file footers: the stored and raw lengths of every
//! block (validity, shapes, pages) of the column, summed over the version's files. That is
//! one footer read per data file (`--no-sizes` skips it).

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

use serde_json::json;

use super::{AtArgs, Ctx, DatasetArg, emit, emit_json, fmt_bytes, fmt_kind, fmt_shape, fmt_time, open};
use crate::error::{CliResult, Exit};

/// Arguments of `tessera info`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    ds: DatasetArg,
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

/// Sizes and counts over a version's fragments.
struct Gathered {
    per_column: BTreeMap<u32, Sizes>,
    files: HashSet<String>,
    file_bytes: u64,
    deleted: u64,
}

/// Counts files, bytes and deleted rows; with `sizes`, sums each column's block sizes from
/// the data file footers.
fn gather(ds: &tessera::Dataset, sizes: bool) -> CliResult<Gathered> {
    let mut g = Gathered { per_column: BTreeMap::new(), files: HashSet::new(), file_bytes: 0, deleted: 0 };
    for info in ds.fragments() {
        g.deleted += info.fragment.row_count - info.fragment.live_rows();
        for f in &info.fragment.files {
            if g.files.insert(f.path.clone()) {
                g.file_bytes += f.size;
            }
            if !sizes {
                continue;
            }
            let df = ds.data_file(&info.fragment, f)?;
            for chunk in &df.footer().columns {
                if !f.column_ids.contains(&chunk.column_id) {
                    continue; // superseded by an update, or dropped
                }
                let s = g.per_column.entry(chunk.column_id).or_default();
                for b in chunk.blocks() {
                    s.stored += b.stored_len;
                    s.raw += b.raw_len;
                }
            }
        }
    }
    Ok(g)
}

/// Runs `tessera info`.
///
/// # Errors
/// Not found, or validation errors reading the manifest, segments or footers.
pub(crate) fn run(ctx: Ctx, args: &Args) -> CliResult<Exit> {
    let ds = open(&args.ds, &args.at)?;
    let location = ds.store().url().to_string();
    let m = ds.manifest();
    let Gathered { per_column, files, file_bytes, deleted } = gather(&ds, !args.no_sizes)?;
    let total =
        per_column.values().fold(Sizes::default(), |a, s| Sizes { stored: a.stored + s.stored, raw: a.raw + s.raw });
    let versions = ds.log()?.len();
    let branches = ds.branches()?;
    let tags = ds.tags()?;
    let views = ds.views()?;
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
            "deleted_rows": deleted, "fragments": ds.fragments().len(), "index": index_json(&ds)?,
            "data_files": files.len(),
            "bytes_files": file_bytes,
            "bytes_stored": (!args.no_sizes).then_some(total.stored),
            "bytes_raw": (!args.no_sizes).then_some(total.raw),
            "ratio": (!args.no_sizes).then(|| ratio(total)),
            "branches": branches, "tags": tags, "views": views, "columns": columns,
            "metadata": ds.schema().metadata.iter().cloned().collect::<BTreeMap<String, String>>(),
        }));
        return Ok(Exit::Ok);
    }
    let mut s = String::new();
    let _ = writeln!(s, "dataset   {location}");
    let _ = writeln!(s, "version   {}@{} ({versions} versions in its history)", ds.branch(), ds.version());
    let _ = writeln!(s, "committed {}  {:?}", fmt_time(m.timestamp_ms), m.message);
    let _ = write!(s, "rows      {}", ds.row_count());
    if deleted > 0 {
        let _ = write!(s, " (+{deleted} deleted)");
    }
    let _ =
        writeln!(s, " in {} fragments, {} data files ({})", ds.fragments().len(), files.len(), fmt_bytes(file_bytes));
    let index = index_json(&ds)?;
    let _ = match index["layout"].as_str() {
        Some("tree") => writeln!(s, "index     fragment tree, {} levels", index["depth"]),
        _ => writeln!(s, "index     fragment log, {} segments", index["segments"]),
    };
    if !args.no_sizes {
        let _ = writeln!(
            s,
            "size      {} stored, {} raw (compression ratio {:.2})",
            fmt_bytes(total.stored),
            fmt_bytes(total.raw),
            ratio(total)
        );
    }
    let _ = writeln!(s, "branches  {}", branches.join(", "));
    let _ = writeln!(s, "tags      {}", if tags.is_empty() { "-".to_string() } else { tags.join(", ") });
    let _ = writeln!(s, "views     {}", if views.is_empty() { "-".to_string() } else { views.join(", ") });
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
            c.compression.to_string(),
            sz.map_or("-".into(), |s| fmt_bytes(s.stored)),
            sz.map_or("-".into(), |s| fmt_bytes(s.raw)),
            sz.map_or("-".into(), |s| format!("{:.2}", ratio(s))),
        ]);
    }
    s += &render_table(&table, "  ");
    if ds.schema().columns.iter().any(|c| c.compression == tessera::Compression::Encoded) {
        s += "  (encoded: stored = the image files, raw = their decoded pixels)\n";
    }
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

/// How the version indexes its fragments: a log of segments, or a tree and its depth.
fn index_json(ds: &tessera::Dataset) -> Result<serde_json::Value, crate::error::CliError> {
    let m = ds.manifest();
    if m.reader_flags & tessera::manifest::READER_FLAG_FRAGMENT_TREE == 0 {
        return Ok(json!({"layout": "log", "segments": m.segments.len()}));
    }
    let tree = tessera::tree::FragmentTree::open(ds.store(), m, ds.limits().clone())?;
    Ok(json!({"layout": "tree", "depth": tree.depth(), "fragments": tree.fragment_count()}))
}
