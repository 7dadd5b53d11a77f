//! `tessera compact DATASET`: rewrite small fragments and fragments with deletions into
//! fragments of up to `--target-rows` live rows, keeping row order
//! ([`tessera::Dataset::compact`]).

use serde_json::json;
use tessera::WriteOptions;

use super::{CommitArgs, Ctx, DatasetArg, emit_change, open_store};
use crate::error::{CliResult, Exit};

/// Arguments of `tessera compact`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    ds: DatasetArg,
    /// Live rows per compacted fragment (fragments below half of it, or with deletions, are
    /// merged).
    #[arg(long, default_value_t = 1 << 20, value_name = "N")]
    target_rows: u64,
    #[command(flatten)]
    commit: CommitArgs,
}

/// Runs `tessera compact`.
///
/// # Errors
/// Storage and validation errors; conflict if a concurrent commit changed the fragments.
pub(crate) fn run(ctx: Ctx, args: &Args) -> CliResult<Exit> {
    let store = open_store(&args.ds.location()?)?;
    let head = args.commit.head(&store)?;
    let message = args.commit.message(|| format!("compact to {} rows per fragment", args.target_rows));
    let new = head.compact(args.target_rows, &message, &WriteOptions::default())?;
    let (before, after) = (head.fragments().len(), new.fragments().len());
    let committed = new.version() != head.version();
    let summary = if committed {
        format!("compacted {before} fragments into {after}: {}@{}", new.branch(), new.version())
    } else {
        format!("nothing to compact in {}@{} ({before} fragments)", head.branch(), head.version())
    };
    emit_change(
        ctx,
        &new,
        &summary,
        json!({"fragments_before": before, "fragments_after": after, "committed": committed}),
    );
    Ok(Exit::Ok)
}
