//! `tessera delete DATASET --rows LIST | --where EXPR`: delete rows with deletion vectors (no
//! data file is rewritten) as a new version ([`tessera::Dataset::delete_rows`]).

use serde_json::json;
use tessera::WriteOptions;

use super::select::{SELECTION_HELP, Selection};
use super::{CommitArgs, Ctx, DatasetArg, emit_change, open_store};
use crate::error::{CliResult, Exit};

/// Arguments of `tessera delete`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = SELECTION_HELP)]
pub(crate) struct Args {
    #[command(flatten)]
    ds: DatasetArg,
    #[command(flatten)]
    select: Selection,
    #[command(flatten)]
    commit: CommitArgs,
    /// Only report the rows that would be deleted.
    #[arg(long)]
    dry_run: bool,
}

/// Runs `tessera delete`.
///
/// # Errors
/// Usage for a bad selection; not found for a row past the end; conflict if a concurrent
/// commit changed the same fragments.
pub(crate) fn run(ctx: Ctx, args: &Args) -> CliResult<Exit> {
    let store = open_store(&args.ds.location()?)?;
    let head = args.commit.head(&store)?;
    let rows = args.select.rows(&head)?;
    if args.dry_run || rows.is_empty() {
        let what = if rows.is_empty() { "no rows selected; nothing committed" } else { "dry run; nothing committed" };
        let summary = format!(
            "{} of {} rows of {}@{} selected: {what}",
            rows.len(),
            head.row_count(),
            head.branch(),
            head.version()
        );
        emit_change(ctx, &head, &summary, json!({"rows_deleted": 0, "selected": rows, "committed": false}));
        return Ok(Exit::Ok);
    }
    let message = args.commit.message(|| format!("delete {} rows", rows.len()));
    let new = head.delete_rows(&rows, &message, &WriteOptions::default())?;
    let summary = format!(
        "deleted {} rows: {}@{} has {} rows (was {} at version {})",
        rows.len(),
        new.branch(),
        new.version(),
        new.row_count(),
        head.row_count(),
        head.version()
    );
    emit_change(ctx, &new, &summary, json!({"rows_deleted": rows.len(), "committed": true}));
    Ok(Exit::Ok)
}
