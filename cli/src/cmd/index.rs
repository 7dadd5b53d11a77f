//! `tessera index create|ls|verify|rm|dedup DATASET ...`: vector indexes of a version
//! ([`tessera::ann`], SPEC.md §"Vector indexes"). `tessera query` uses them for
//! `ORDER BY <distance> LIMIT k`; `dedup` saves a view without near-duplicates.

use std::fmt::Write as _;
use std::time::Instant;

use serde_json::json;
use tessera::ann::{IndexSpec, VectorIndex, metric_name};
use tessera::distance::Distance;
use tessera::{At, ViewRowsBuilder, WriteOptions};

use super::{AtArgs, Ctx, DatasetArg, emit, emit_json, fmt_bytes, fmt_time, open, open_latest, open_version, required};
use crate::error::{CliError, CliResult, Exit};

/// `tessera index` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Build an IVF-Flat index over a vector column of a version (default: latest of main).
    Create(CreateArgs),
    /// List the indexes: name, version, column, metric, lists, rows, size.
    Ls(LsArgs),
    /// Read every list of an index and check its checksums and row ids.
    Verify(NameArgs),
    /// Delete an index (no version changes).
    Rm(NameArgs),
    /// Save a view of the indexed version without its near-duplicate rows.
    Dedup(DedupArgs),
}

/// Arguments of `tessera index create`.
#[derive(clap::Args, Debug)]
pub(crate) struct CreateArgs {
    #[command(flatten)]
    ds: DatasetArg,
    /// The index's name.
    #[arg(value_name = "NAME")]
    name: Option<String>,
    /// The vector column (f16, bf16, f32 or f64 elements, fixed shape).
    #[arg(long, value_name = "COLUMN")]
    column: String,
    /// The distance the index serves: cosine or l2.
    #[arg(long, default_value = "cosine", value_name = "METRIC")]
    metric: String,
    /// Number of lists (default: the square root of the row count).
    #[arg(long, value_name = "N")]
    lists: Option<usize>,
    /// Rows k-means trains on (default: max(32 x lists, 16384)).
    #[arg(long, value_name = "N")]
    sample: Option<usize>,
    /// k-means iterations.
    #[arg(long, default_value_t = 10, value_name = "N")]
    iterations: u32,
    #[command(flatten)]
    at: AtArgs,
}

/// Arguments of `tessera index ls`.
#[derive(clap::Args, Debug)]
pub(crate) struct LsArgs {
    #[command(flatten)]
    ds: DatasetArg,
}

/// Arguments of `tessera index verify` and `rm`.
#[derive(clap::Args, Debug)]
pub(crate) struct NameArgs {
    #[command(flatten)]
    ds: DatasetArg,
    /// The index.
    #[arg(value_name = "NAME")]
    name: Option<String>,
}

/// Arguments of `tessera index dedup`.
#[derive(clap::Args, Debug)]
pub(crate) struct DedupArgs {
    #[command(flatten)]
    ds: DatasetArg,
    /// The index.
    #[arg(value_name = "NAME")]
    name: Option<String>,
    /// A row is a near-duplicate when its distance to a row with a smaller id is below this
    /// (in the index's metric; for cosine, 0.05 is very close).
    #[arg(long, value_name = "T")]
    threshold: f64,
    /// Lists each list is compared with, itself included (all lists: the exact answer).
    #[arg(long, default_value_t = 1, value_name = "N")]
    probe: usize,
    /// Save the rows that are not near-duplicates as view NAME of the indexed version.
    #[arg(long, value_name = "VIEW")]
    save_view: String,
}

/// Runs a `tessera index` subcommand.
///
/// # Errors
/// Usage errors for bad names and settings; not found for a missing dataset or index; the
/// index's validation errors (a damaged index is a data fault).
pub(crate) fn run(ctx: Ctx, cmd: &Command) -> CliResult<Exit> {
    match cmd {
        Command::Create(a) => create(ctx, a),
        Command::Ls(a) => ls(ctx, a),
        Command::Verify(a) => verify(ctx, a),
        Command::Rm(a) => rm(ctx, a),
        Command::Dedup(a) => dedup(ctx, a),
    }
}

fn summary_json(i: &VectorIndex) -> serde_json::Value {
    json!({
        "index": i.name, "branch": i.target.branch, "version": i.target.version, "column": i.column,
        "metric": metric_name(i.metric), "dtype": i.dtype.name(), "dim": i.dim, "lists": i.nlist(),
        "rows": i.rows, "bytes": i.data_size, "default_nprobe": i.default_nprobe(), "build": i.build,
        "timestamp_ms": i.timestamp_ms, "time": fmt_time(i.timestamp_ms),
    })
}

fn summary_line(i: &VectorIndex) -> String {
    format!(
        "{}  {}@{}  {} ({})  {} lists  {} rows  {}",
        i.name,
        i.target.branch,
        i.target.version,
        i.column,
        metric_name(i.metric),
        i.nlist(),
        i.rows,
        fmt_bytes(i.data_size)
    )
}

fn create(ctx: Ctx, args: &CreateArgs) -> CliResult<Exit> {
    let (location, [name]) = args.ds.resolve([args.name.clone()])?;
    let name = required(name, "NAME")?;
    let metric = match args.metric.as_str() {
        "cosine" => Distance::Cosine,
        "l2" => Distance::L2,
        other => return Err(CliError::usage(format!("--metric {other:?}: use cosine or l2"))),
    };
    let ds = open(&DatasetArg { location: Some(location), dataset: None }, &args.at)?;
    let spec = IndexSpec {
        lists: args.lists,
        sample: args.sample,
        iterations: args.iterations,
        ..IndexSpec::new(&name, &args.column, metric)
    };
    let start = Instant::now();
    let index = ds.create_vector_index(&spec, &WriteOptions::default())?;
    let secs = start.elapsed().as_secs_f64();
    if ctx.json {
        let mut out = summary_json(&index);
        if let Some(o) = out.as_object_mut() {
            o.insert("seconds".into(), json!(secs));
        }
        emit_json(&out);
    } else {
        emit(&format!("built index {} in {secs:.1} s", summary_line(&index)));
    }
    Ok(Exit::Ok)
}

fn ls(ctx: Ctx, args: &LsArgs) -> CliResult<Exit> {
    let (ds, _) = open_latest(&args.ds, None)?;
    let indexes = ds.vector_indexes()?.iter().map(|n| ds.vector_index(n)).collect::<tessera::Result<Vec<_>>>()?;
    if ctx.json {
        emit_json(&json!(indexes.iter().map(summary_json).collect::<Vec<_>>()));
        return Ok(Exit::Ok);
    }
    let mut s = String::new();
    for i in &indexes {
        let _ = writeln!(s, "{}", summary_line(i));
    }
    emit(&s);
    Ok(Exit::Ok)
}

fn verify(ctx: Ctx, args: &NameArgs) -> CliResult<Exit> {
    let (ds, name) = open_latest(&args.ds, args.name.as_ref())?;
    let index = ds.vector_index(&required(name, "NAME")?)?;
    let stats = index.verify(ds.store())?;
    if ctx.json {
        emit_json(
            &json!({"index": index.name, "ok": true, "lists": stats.lists, "rows": stats.entries, "bytes": stats.bytes}),
        );
    } else {
        emit(&format!(
            "ok: index {}: {} lists, {} rows, {} checked",
            index.name,
            stats.lists,
            stats.entries,
            fmt_bytes(stats.bytes)
        ));
    }
    Ok(Exit::Ok)
}

fn rm(ctx: Ctx, args: &NameArgs) -> CliResult<Exit> {
    let (ds, name) = open_latest(&args.ds, args.name.as_ref())?;
    let name = required(name, "NAME")?;
    ds.delete_vector_index(&name)?;
    if ctx.json {
        emit_json(&json!({"deleted": name}));
    } else {
        emit(&format!("deleted index {name}"));
    }
    Ok(Exit::Ok)
}

fn dedup(ctx: Ctx, args: &DedupArgs) -> CliResult<Exit> {
    let (ds, name) = open_latest(&args.ds, args.name.as_ref())?;
    let index = ds.vector_index(&required(name, "NAME")?)?;
    let start = Instant::now();
    let dropped = index.near_duplicates(ds.store(), args.threshold, args.probe)?;
    // The view belongs to the indexed version, whatever the latest is.
    let at = At::BranchVersion(index.target.branch.clone(), index.target.version);
    let version = open_version(ds.store(), &at)?;
    let mut rows = ViewRowsBuilder::default();
    let mut doomed = dropped.iter().peekable();
    for r in 0..version.row_count() {
        if doomed.next_if_eq(&&r).is_none() {
            rows.push(r)?;
        }
    }
    let query = format!(
        "near-duplicates dropped: index {}, {} < {}, {} list(s) compared",
        index.name,
        metric_name(index.metric),
        args.threshold,
        args.probe
    );
    let view = version.save_view_rows_with(&args.save_view, rows.finish()?, &query, &WriteOptions::default())?;
    let secs = start.elapsed().as_secs_f64();
    if ctx.json {
        emit_json(&json!({
            "view": view.name, "rows": view.rows.len(), "dropped": dropped.len(), "branch": view.target.branch,
            "version": view.target.version, "seconds": secs,
        }));
    } else {
        emit(&format!(
            "{} near-duplicates of {} rows; saved view {} with {} rows of {}@{} ({secs:.1} s)",
            dropped.len(),
            version.row_count(),
            view.name,
            view.rows.len(),
            view.target.branch,
            view.target.version
        ));
    }
    Ok(Exit::Ok)
}
