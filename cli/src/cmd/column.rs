//! `tessera column add|drop|rename DATASET ...`: schema evolution as new versions
//! ([`tessera::Dataset::add_column`], `drop_column`, `rename_column`). Adding writes only the
//! new column; dropping and renaming rewrite no data.

use serde_json::json;
use tessera::{Column, DType, Kind, WriteOptions};

use super::select::scalar_value;
use super::{CommitArgs, Ctx, DatasetArg, emit_change, open_store, required};
use crate::error::{CliError, CliResult, Exit};

/// `tessera column` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Add a scalar column, filled with one value (--fill) or with nulls.
    Add(AddArgs),
    /// Drop a column from the schema (its bytes stay until compaction; old versions read it).
    Drop(NameArgs),
    /// Rename a column (its id and data stay).
    Rename(RenameArgs),
}

/// Arguments of `tessera column add`.
#[derive(clap::Args, Debug)]
pub(crate) struct AddArgs {
    #[command(flatten)]
    ds: DatasetArg,
    /// The new column's name.
    #[arg(value_name = "NAME")]
    name: Option<String>,
    /// Element type: bool, i8..i64, u8..u64, f16, bf16, f32, f64, or utf8 (text).
    #[arg(long, value_name = "DTYPE")]
    dtype: String,
    /// The value of every existing row; without it the column is nullable and every row null.
    #[arg(long, value_name = "VALUE")]
    fill: Option<String>,
    /// Make the column nullable even with --fill.
    #[arg(long)]
    nullable: bool,
    /// Class names: the column is a class label (an integer dtype), values index the names.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    classes: Vec<String>,
    #[command(flatten)]
    commit: CommitArgs,
}

/// Arguments of `tessera column drop`.
#[derive(clap::Args, Debug)]
pub(crate) struct NameArgs {
    #[command(flatten)]
    ds: DatasetArg,
    /// The column.
    #[arg(value_name = "NAME")]
    name: Option<String>,
    #[command(flatten)]
    commit: CommitArgs,
}

/// Arguments of `tessera column rename`.
#[derive(clap::Args, Debug)]
pub(crate) struct RenameArgs {
    #[command(flatten)]
    ds: DatasetArg,
    /// The column's name.
    #[arg(value_name = "FROM")]
    from: Option<String>,
    /// Its new name.
    #[arg(value_name = "TO")]
    to: Option<String>,
    #[command(flatten)]
    commit: CommitArgs,
}

/// Runs `tessera column ...`.
///
/// # Errors
/// Usage for a bad name, dtype or value; conflict if a commit lands meanwhile.
pub(crate) fn run(ctx: Ctx, cmd: &Command) -> CliResult<Exit> {
    let (summary, new, fields) = match cmd {
        Command::Add(a) => {
            let (location, [name]) = a.ds.resolve([a.name.clone()])?;
            let name = required(name, "NAME")?;
            let head = a.commit.head(&open_store(&location)?)?;
            let dtype =
                DType::from_name(&a.dtype).ok_or_else(|| CliError::usage(format!("unknown dtype {:?}", a.dtype)))?;
            let mut column = Column::new(name.clone(), dtype, &[]);
            if !a.classes.is_empty() {
                column = column.with_kind(Kind::ClassLabel { names: a.classes.clone() });
            } else if dtype == DType::Utf8 {
                column = column.with_kind(Kind::Text);
            }
            if a.nullable || a.fill.is_none() {
                column = column.nullable();
            }
            let values = match &a.fill {
                Some(text) => {
                    let one = scalar_value(&column, text)?;
                    let mut all = one.clone();
                    for _ in 1..head.row_count() {
                        all.extend_from(&one, 0..1)?;
                    }
                    Some(all)
                }
                None => None,
            };
            let message = a.commit.message(|| format!("add column {name}"));
            let new = head.add_column(column, values.as_ref(), &message, &WriteOptions::default())?;
            (format!("added column {name} ({dtype})"), new, json!({"added": name, "dtype": dtype.name()}))
        }
        Command::Drop(a) => {
            let (location, [name]) = a.ds.resolve([a.name.clone()])?;
            let name = required(name, "NAME")?;
            let head = a.commit.head(&open_store(&location)?)?;
            let message = a.commit.message(|| format!("drop column {name}"));
            let new = head.drop_column(&name, &message, &WriteOptions::default())?;
            (format!("dropped column {name}"), new, json!({"dropped": name}))
        }
        Command::Rename(a) => {
            let (location, [from, to]) = a.ds.resolve([a.from.clone(), a.to.clone()])?;
            let (from, to) = (required(from, "FROM")?, required(to, "TO")?);
            let head = a.commit.head(&open_store(&location)?)?;
            let message = a.commit.message(|| format!("rename column {from} to {to}"));
            let new = head.rename_column(&from, &to, &message, &WriteOptions::default())?;
            (format!("renamed column {from} to {to}"), new, json!({"renamed": from, "to": to}))
        }
    };
    emit_change(ctx, &new, &format!("{summary}: {}@{}", new.branch(), new.version()), fields);
    Ok(Exit::Ok)
}
