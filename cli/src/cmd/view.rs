//! `tessera view ls|show|rm DATASET ...`: the saved query answers of a dataset
//! ([`tessera::View`], SPEC.md §"Views"). `tessera query --save-view` creates them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::json;
use tessera::{Dataset, View, ViewRows};

use super::{Ctx, DatasetArg, emit, emit_json, fmt_time, open_latest, required};
use crate::error::{CliResult, Exit};

/// `tessera view` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// List the views: name, pinned version, rows, query.
    Ls(LsArgs),
    /// Print one view: its version, query, checksum and row ids.
    Show(ShowArgs),
    /// Delete a view (no version changes).
    Rm(NameArgs),
}

/// Arguments of `tessera view ls`.
#[derive(clap::Args, Debug)]
pub(crate) struct LsArgs {
    #[command(flatten)]
    ds: DatasetArg,
}

/// Arguments of `tessera view show`.
#[derive(clap::Args, Debug)]
pub(crate) struct ShowArgs {
    #[command(flatten)]
    ds: DatasetArg,
    /// The view.
    #[arg(value_name = "NAME")]
    name: Option<String>,
    /// Print at most N row ids in text output (JSON lists them all).
    #[arg(long, value_name = "N", default_value_t = 20)]
    rows: usize,
}

/// Arguments of `tessera view rm`.
#[derive(clap::Args, Debug)]
pub(crate) struct NameArgs {
    #[command(flatten)]
    ds: DatasetArg,
    /// The view.
    #[arg(value_name = "NAME")]
    name: Option<String>,
}

/// Runs a `tessera view` subcommand.
///
/// # Errors
/// Not found for a missing dataset or view; the view's validation errors (a damaged view, or
/// one copied from another dataset, is a data fault).
pub(crate) fn run(ctx: Ctx, cmd: &Command) -> CliResult<Exit> {
    match cmd {
        Command::Ls(a) => ls(ctx, a),
        Command::Show(a) => show(ctx, a),
        Command::Rm(a) => rm(ctx, a),
    }
}

/// Lowercase hex of a digest.
fn hex(bytes: [u8; 32]) -> String {
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn summary_json(v: &View) -> serde_json::Value {
    json!({
        "view": v.name, "branch": v.target.branch, "version": v.target.version, "rows": v.rows.len(),
        "query": v.query, "timestamp_ms": v.timestamp_ms, "time": fmt_time(v.timestamp_ms),
        "rows_sha256": hex(v.rows_sha256), "manifest_sha256": hex(v.manifest_sha256),
    })
}

fn ls(ctx: Ctx, args: &LsArgs) -> CliResult<Exit> {
    let (ds, _) = open_latest(&args.ds, None)?;
    let views = ds.views()?.iter().map(|n| ds.view(n)).collect::<tessera::Result<Vec<_>>>()?;
    if ctx.json {
        emit_json(&json!(views.iter().map(summary_json).collect::<Vec<_>>()));
        return Ok(Exit::Ok);
    }
    let mut s = String::new();
    for v in &views {
        let _ = writeln!(s, "{}  {}@{}  {} rows  {}", v.name, v.target.branch, v.target.version, v.rows.len(), v.query);
    }
    emit(&s);
    Ok(Exit::Ok)
}

fn show(ctx: Ctx, args: &ShowArgs) -> CliResult<Exit> {
    let (ds, name) = open_latest(&args.ds, args.name.as_ref())?;
    let v = ds.view(&required(name, "NAME")?)?;
    if ctx.json {
        let mut out = summary_json(&v);
        if let Some(o) = out.as_object_mut() {
            // A runs view lists its runs, not its rows: it may hold 2^40 of them (VIEW-11).
            match &v.rows {
                ViewRows::List(rows) => o.insert("row_ids".into(), json!(rows)),
                ViewRows::Runs(r) => {
                    o.insert("runs".into(), json!(r.runs().iter().map(|r| [r.start, r.len]).collect::<Vec<_>>()))
                }
            };
        }
        emit_json(&out);
        return Ok(Exit::Ok);
    }
    let mut s = String::new();
    let _ = writeln!(s, "view      {}", v.name);
    let _ = writeln!(s, "version   {}@{}", v.target.branch, v.target.version);
    let _ = writeln!(s, "created   {}", fmt_time(v.timestamp_ms));
    let _ = writeln!(s, "query     {}", v.query);
    let _ = writeln!(s, "rows      {} (sha256 {})", v.rows.len(), hex(v.rows_sha256));
    let shown: Vec<String> = v.rows.iter().take(args.rows).map(|r| r.to_string()).collect();
    let more = v.rows.len().saturating_sub(shown.len() as u64);
    let _ = write!(s, "row ids   {}", shown.join(" "));
    if more > 0 {
        let _ = write!(s, " … ({more} more)");
    }
    emit(&s);
    Ok(Exit::Ok)
}

fn rm(ctx: Ctx, args: &NameArgs) -> CliResult<Exit> {
    let (ds, name) = open_latest(&args.ds, args.name.as_ref())?;
    let name = required(name, "NAME")?;
    ds.delete_view(&name)?;
    if ctx.json {
        emit_json(&json!({"deleted": name}));
    } else {
        emit(&format!("deleted view {name}"));
    }
    Ok(Exit::Ok)
}

/// The views of a dataset by the version they pin (for `tessera log`). A view that fails
/// validation is reported on stderr and left out: `tessera view ls` shows its error.
pub(crate) fn by_version(ctx: Ctx, ds: &Dataset) -> CliResult<BTreeMap<(String, u64), Vec<String>>> {
    let mut out: BTreeMap<(String, u64), Vec<String>> = BTreeMap::new();
    for name in ds.views()? {
        match ds.view(&name) {
            Ok(v) => out.entry((v.target.branch, v.target.version)).or_default().push(name),
            Err(e) => ctx.info(&format!("warning: view {name:?} is unreadable: {e}")),
        }
    }
    Ok(out)
}
