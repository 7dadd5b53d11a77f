//! `tessera merge DATASET SOURCE`: merge a branch (or version) into another branch
//! ([`tessera::Dataset::merge_into`]): a fast-forward when the target has not moved, else a
//! three-way merge of fragments and schema; conflicting changes exit 4.

use serde_json::json;
use tessera::WriteOptions;

use super::diff::parse_version;
use super::{Ctx, DatasetArg, emit_change, open_store, open_version, required};
use crate::error::{CliError, CliResult, Exit};

/// Arguments of `tessera merge`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    ds: DatasetArg,
    /// What to merge: a branch (its latest version), BRANCH@N, or a tag.
    #[arg(value_name = "SOURCE")]
    source: Option<String>,
    /// The branch to merge into.
    #[arg(long, default_value = "main", value_name = "BRANCH")]
    into: String,
    /// Commit message (default: "merge SOURCE into BRANCH").
    #[arg(short, long)]
    message: Option<String>,
}

/// Runs `tessera merge`.
///
/// # Errors
/// Not found for an unknown source or target; conflict when both sides changed the same
/// fragments or the schema.
pub(crate) fn run(ctx: Ctx, args: &Args) -> CliResult<Exit> {
    let (location, [source]) = args.ds.resolve([args.source.clone()])?;
    let source = required(source, "SOURCE")?;
    let store = open_store(&location)?;
    // A bare name is a branch (its latest version); N alone would be ambiguous.
    let at = if source.parse::<u64>().is_ok() {
        return Err(CliError::usage(format!("merge source {source:?}: name a branch, BRANCH@N or a tag")));
    } else if source.contains('@') {
        parse_version(&source, &args.into)?
    } else if tessera::dataset::latest_version(&store, &source).is_ok() {
        tessera::At::Branch(source.clone())
    } else {
        tessera::At::Tag(source.clone())
    };
    let src = open_version(&store, &at)?;
    let before = tessera::dataset::latest_version(&store, &args.into)?;
    let message = args.message.clone().unwrap_or_else(|| format!("merge {source} into {}", args.into));
    let out = src.merge_into(&args.into, &message, &WriteOptions::default())?;
    let new = &out.dataset;
    let committed = new.version() != before;
    let how = if !committed {
        "already up to date"
    } else if out.fast_forward {
        "fast-forward"
    } else {
        "three-way merge"
    };
    let summary = format!("merged {source} into {}: {how}, {}@{}", args.into, new.branch(), new.version());
    emit_change(ctx, new, &summary, json!({"fast_forward": out.fast_forward, "committed": committed}));
    Ok(Exit::Ok)
}
