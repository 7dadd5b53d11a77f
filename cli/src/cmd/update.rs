//! `tessera update DATASET --rows LIST | --where EXPR --set COL=VALUE...`: set scalar columns
//! of the selected rows as a new version ([`tessera::Dataset::update_rows`]; only the updated
//! columns of the touched fragments are rewritten).

use serde_json::json;
use tessera::{Batch, WriteOptions};

use super::select::{SELECTION_HELP, Selection, scalar_value};
use super::{CommitArgs, Ctx, DatasetArg, emit_change, open_store};
use crate::error::{CliError, CliResult, Exit};

/// Arguments of `tessera update`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = SELECTION_HELP)]
pub(crate) struct Args {
    #[command(flatten)]
    ds: DatasetArg,
    #[command(flatten)]
    select: Selection,
    /// The new value of a scalar column, COL=VALUE (a number, true/false, text, a class name
    /// of a class-label column, or null); repeatable.
    #[arg(long = "set", value_name = "COL=VALUE", required = true)]
    set: Vec<String>,
    #[command(flatten)]
    commit: CommitArgs,
}

/// Runs `tessera update`.
///
/// # Errors
/// Usage for a bad selection, column or value; not found for a row past the end; conflict if
/// a concurrent commit changed the same fragments.
pub(crate) fn run(ctx: Ctx, args: &Args) -> CliResult<Exit> {
    let store = open_store(&args.ds.location()?)?;
    let head = args.commit.head(&store)?;
    let mut values = Vec::new();
    for s in &args.set {
        let (name, text) = s.split_once('=').ok_or_else(|| CliError::usage(format!("--set {s:?}: use COL=VALUE")))?;
        let c = head
            .schema()
            .column(name.trim())
            .ok_or_else(|| CliError::usage(format!("--set: no column named {:?}", name.trim())))?;
        values.push((c.name.clone(), scalar_value(c, text)?));
    }
    let rows = args.select.rows(&head)?;
    if rows.is_empty() {
        emit_change(ctx, &head, "no rows selected; nothing committed", json!({"rows_updated": 0, "committed": false}));
        return Ok(Exit::Ok);
    }
    let mut batch = Batch::new();
    for (name, one) in &values {
        let mut data = one.clone();
        for _ in 1..rows.len() {
            data.extend_from(one, 0..1)?;
        }
        batch = batch.with(name.clone(), data)?;
    }
    let names: Vec<&str> = values.iter().map(|(n, _)| n.as_str()).collect();
    let message = args.commit.message(|| format!("update {} of {} rows", names.join(", "), rows.len()));
    let new = head.update_rows(&rows, &batch, &message, &WriteOptions::default())?;
    let summary = format!("updated {} in {} rows: {}@{}", names.join(", "), rows.len(), new.branch(), new.version());
    emit_change(ctx, &new, &summary, json!({"rows_updated": rows.len(), "columns": names, "committed": true}));
    Ok(Exit::Ok)
}
