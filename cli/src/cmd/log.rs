//! `tessera log`: the versions in a version's history (following parent links across
//! branch bases), newest first.

use serde_json::json;
use std::fmt::Write as _;
use tessera::manifest::{Manifest, VersionRef};

use super::{AtArgs, Ctx, DatasetArg, emit, emit_json, fmt_time, open};
use crate::error::{CliResult, Exit};

/// Arguments of `tessera log`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    ds: DatasetArg,
    #[command(flatten)]
    at: AtArgs,
    /// Show at most N versions.
    #[arg(short = 'n', long, value_name = "N")]
    limit: Option<usize>,
}

fn vref(v: Option<&VersionRef>) -> serde_json::Value {
    v.map_or(serde_json::Value::Null, |r| json!(format!("{}@{}", r.branch, r.version)))
}

fn entry_json(m: &Manifest, views: &[String]) -> serde_json::Value {
    json!({
        "views": views,
        "branch": m.branch, "version": m.version, "timestamp_ms": m.timestamp_ms, "time": fmt_time(m.timestamp_ms),
        "rows": m.row_count, "columns": m.schema.columns.len(), "message": m.message,
        "parent": vref(m.parent.as_ref()), "base": vref(m.base.as_ref()), "merged": vref(m.merged.as_ref()),
    })
}

/// Runs `tessera log`.
///
/// # Errors
/// Not found, or validation errors of a manifest in the history.
pub(crate) fn run(ctx: Ctx, args: &Args) -> CliResult<Exit> {
    let ds = open(&args.ds, &args.at)?;
    let mut history = ds.log()?;
    if let Some(n) = args.limit {
        history.truncate(n);
    }
    let pinned = super::view::by_version(ctx, &ds)?;
    let views_of = |m: &Manifest| pinned.get(&(m.branch.clone(), m.version)).map_or(&[][..], Vec::as_slice);
    if ctx.json {
        emit_json(&json!(history.iter().map(|m| entry_json(m, views_of(m))).collect::<Vec<_>>()));
        return Ok(Exit::Ok);
    }
    let mut s = String::new();
    for m in &history {
        let _ = writeln!(
            s,
            "{}@{}  {}  {} rows  {}",
            m.branch,
            m.version,
            fmt_time(m.timestamp_ms),
            m.row_count,
            m.message
        );
        if !views_of(m).is_empty() {
            let _ = s.pop();
            let _ = writeln!(s, "  [views: {}]", views_of(m).join(", "));
        }
    }
    emit(&s);
    Ok(Exit::Ok)
}
