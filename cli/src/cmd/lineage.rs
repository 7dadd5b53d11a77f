//! `tessera lineage RECORD (--step K | --row SOURCE:ROW)`: which rows a recorded training
//! run's step saw, or which steps saw a row, from the lineage record the loader wrote
//! (`LoaderConfig::with_lineage`; the format is `tessera_loader::lineage`'s). Only metadata
//! is read: the order is recomputed from the pinned sources.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::json;
use tessera_loader::{LineageRecord, LoaderError};

use super::{Ctx, emit, emit_json};
use crate::error::{CliError, CliResult, Exit, exit_for};

/// Arguments of `tessera lineage`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The run's lineage record.
    record: PathBuf,
    /// List the rows (source, row) of this step (the global batch, every rank's samples).
    #[arg(long, conflicts_with = "row", required_unless_present = "row")]
    step: Option<u64>,
    /// List the steps that saw this row: `SOURCE:ROW` (SOURCE is the mixture source's index,
    /// 0 for one dataset), or `ROW`.
    #[arg(long, value_parser = parse_row)]
    row: Option<(u32, u64)>,
    /// Steps searched for `--row` (default: through the end of the last epoch the run
    /// started).
    #[arg(long)]
    steps: Option<u64>,
}

/// Parses `SOURCE:ROW` or `ROW`.
fn parse_row(s: &str) -> Result<(u32, u64), String> {
    let bad = || format!("bad row {s:?} (SOURCE:ROW or ROW, e.g. 1:4021)");
    match s.split_once(':') {
        Some((src, row)) => Ok((src.trim().parse().map_err(|_| bad())?, row.trim().parse().map_err(|_| bad())?)),
        None => Ok((0, s.trim().parse().map_err(|_| bad())?)),
    }
}

fn loader_error(e: &LoaderError) -> CliError {
    CliError::new(e.class().map_or(Exit::Other, exit_for), e.to_string())
}

/// Runs `tessera lineage`.
///
/// # Errors
/// Not found for a missing record; usage for a record that is not one; a source that can no
/// longer be opened as recorded.
pub(crate) fn run(ctx: Ctx, args: &Args) -> CliResult<Exit> {
    if !args.record.exists() {
        return Err(CliError::not_found(format!("{}: no such lineage record", args.record.display())));
    }
    let record = LineageRecord::read(&args.record).map_err(|e| loader_error(&e))?;
    let loader = record.open_loader().map_err(|e| loader_error(&e))?;
    let name = |source: u32| record.sources().get(source as usize).map_or("?", |s| s.location.as_str()).to_string();
    if let Some(step) = args.step {
        let rows = LineageRecord::rows_at_step(&loader, step).map_err(|e| loader_error(&e))?;
        if ctx.json {
            let rows: Vec<_> = rows.iter().map(|&(s, r)| json!({"source": s, "row": r})).collect();
            emit_json(&json!({"step": step, "rows": rows}));
        } else {
            let mut out = format!("step {step}: {} samples\nsource\trow\tlocation\n", rows.len());
            for (s, r) in rows {
                let _ = writeln!(out, "{s}\t{r}\t{}", name(s));
            }
            emit(&out);
        }
        return Ok(Exit::Ok);
    }
    let (source, row) = args.row.ok_or_else(|| CliError::usage("give --step or --row"))?;
    let steps = match args.steps {
        Some(n) => n,
        None => record.steps_through_last_epoch(&loader).map_err(|e| loader_error(&e))?,
    };
    let seen = LineageRecord::steps_of_row(&loader, source, row, steps).map_err(|e| loader_error(&e))?;
    if ctx.json {
        emit_json(&json!({"source": source, "row": row, "steps_searched": steps, "steps": seen}));
    } else {
        let list: Vec<String> = seen.iter().map(u64::to_string).collect();
        emit(&format!(
            "row {row} of source {source} ({}): {} of the first {steps} steps\n{}",
            name(source),
            seen.len(),
            list.join(" ")
        ));
    }
    Ok(Exit::Ok)
}
