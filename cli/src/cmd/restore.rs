//! `tessera restore DATASET VERSION`: commit an earlier version's content (schema and rows) as
//! the newest version of its branch ([`tessera::Dataset::restore`]); history is kept.

use serde_json::json;
use tessera::WriteOptions;

use super::diff::parse_version;
use super::{Ctx, DatasetArg, emit_change, open_store, open_version, required};
use crate::error::{CliResult, Exit};

/// Arguments of `tessera restore`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    ds: DatasetArg,
    /// The version to restore: N (of --branch), BRANCH@N, or a tag.
    #[arg(value_name = "VERSION")]
    version: Option<String>,
    /// Branch of a plain version number.
    #[arg(long, default_value = "main", value_name = "BRANCH")]
    branch: String,
    /// Commit message (default: "restore BRANCH@N").
    #[arg(short, long)]
    message: Option<String>,
}

/// Runs `tessera restore`.
///
/// # Errors
/// Not found for an unknown version; conflict if another commit takes the version first.
pub(crate) fn run(ctx: Ctx, args: &Args) -> CliResult<Exit> {
    let (location, [version]) = args.ds.resolve([args.version.clone()])?;
    let version = required(version, "VERSION")?;
    let store = open_store(&location)?;
    let old = open_version(&store, &parse_version(&version, &args.branch)?)?;
    let label = format!("{}@{}", old.branch(), old.version());
    let message = args.message.clone().unwrap_or_else(|| format!("restore {label}"));
    let new = old.restore(&message, &WriteOptions::default())?;
    let summary = format!("restored {label} as {}@{} ({} rows)", new.branch(), new.version(), new.row_count());
    emit_change(ctx, &new, &summary, json!({"restored": label, "committed": true}));
    Ok(Exit::Ok)
}
