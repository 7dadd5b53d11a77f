//! `tessera tag` and `tessera branch`: name a version, fork a branch, list them.

use std::fmt::Write as _;

use serde_json::json;
use tessera::{At, Dataset, Limits, WriteOptions};

use super::{Ctx, DatasetArg, emit, emit_json, open_store, open_version, required};
use crate::error::{CliError, CliResult, Exit};

/// Arguments of `tessera tag`.
#[derive(clap::Args, Debug)]
pub(crate) struct TagArgs {
    #[command(flatten)]
    ds: DatasetArg,
    /// The new tag's name (1..=64 of [A-Za-z0-9._-]).
    #[arg(value_name = "NAME")]
    name: Option<String>,
    /// Version to tag (default: the latest of --branch).
    #[arg(long, value_name = "N")]
    version: Option<u64>,
    /// Branch of --version (default main).
    #[arg(long, value_name = "BRANCH")]
    branch: Option<String>,
    /// Tag message.
    #[arg(short, long, default_value = "")]
    message: String,
    /// List the tags and the versions they name instead.
    #[arg(long, conflicts_with_all = ["version", "branch", "message"])]
    list: bool,
}

/// Arguments of `tessera branch`.
#[derive(clap::Args, Debug)]
pub(crate) struct BranchArgs {
    #[command(flatten)]
    ds: DatasetArg,
    /// The new branch's name (1..=64 of [A-Za-z0-9._-]).
    #[arg(value_name = "NAME")]
    name: Option<String>,
    /// Version to branch from (default: the latest of --from-branch).
    #[arg(long, value_name = "N")]
    from_version: Option<u64>,
    /// Branch to branch from (default main).
    #[arg(long, value_name = "BRANCH")]
    from_branch: Option<String>,
    /// Tag to branch from.
    #[arg(long, value_name = "TAG", conflicts_with_all = ["from_version", "from_branch"])]
    from_tag: Option<String>,
    /// List the branches and their latest versions instead.
    #[arg(long, conflicts_with_all = ["from_version", "from_branch", "from_tag"])]
    list: bool,
}

/// The dataset and the name (required unless `--list`, refused with it).
fn dataset_and_name(ds: &DatasetArg, name: Option<&String>, list: bool) -> CliResult<(String, String)> {
    let (location, [name]) = ds.resolve([name.cloned()])?;
    match (name, list) {
        (Some(_), true) => Err(CliError::usage("--list takes no name")),
        (None, true) => Ok((location, String::new())),
        (name, false) => Ok((location, required(name, "NAME")?)),
    }
}

fn at(branch: Option<&String>, version: Option<u64>) -> At {
    match (branch, version) {
        (Some(b), Some(v)) => At::BranchVersion(b.clone(), v),
        (Some(b), None) => At::Branch(b.clone()),
        (None, Some(v)) => At::Version(v),
        (None, None) => At::Latest,
    }
}

/// Runs `tessera tag`.
///
/// # Errors
/// Not found for the version; conflict if the tag exists; usage for a bad name.
pub(crate) fn run_tag(ctx: Ctx, args: &TagArgs) -> CliResult<Exit> {
    let (location, name) = dataset_and_name(&args.ds, args.name.as_ref(), args.list)?;
    if args.list {
        let store = open_store(&location)?;
        let ds = open_version(&store, &At::Latest)?;
        let mut out = Vec::new();
        for t in ds.tags()? {
            let target = Dataset::open_tag(&store, &t, Limits::default())?;
            out.push((t, target.branch().to_string(), target.version()));
        }
        if ctx.json {
            let v: Vec<_> = out.iter().map(|(t, b, v)| json!({"tag": t, "branch": b, "version": v})).collect();
            emit_json(&json!(v));
        } else {
            emit(&out.iter().fold(String::new(), |mut s, (t, b, v)| {
                let _ = writeln!(s, "{t}  {b}@{v}");
                s
            }));
        }
        return Ok(Exit::Ok);
    }
    let store = open_store(&location)?;
    let ds = open_version(&store, &at(args.branch.as_ref(), args.version))?;
    ds.create_tag(&name, &args.message, &WriteOptions::default())?;
    if ctx.json {
        emit_json(&json!({"tag": name, "branch": ds.branch(), "version": ds.version()}));
    } else {
        emit(&format!("tagged {}@{} as {name}", ds.branch(), ds.version()));
    }
    Ok(Exit::Ok)
}

/// Runs `tessera branch`.
///
/// # Errors
/// Not found for the source version; conflict if the branch exists; usage for a bad name.
pub(crate) fn run_branch(ctx: Ctx, args: &BranchArgs) -> CliResult<Exit> {
    let (location, name) = dataset_and_name(&args.ds, args.name.as_ref(), args.list)?;
    if args.list {
        let store = open_store(&location)?;
        let ds = open_version(&store, &At::Latest)?;
        let mut out = Vec::new();
        for b in ds.branches()? {
            let v = tessera::dataset::latest_version(&store, &b)?;
            out.push((b, v));
        }
        if ctx.json {
            let v: Vec<_> = out.iter().map(|(b, v)| json!({"branch": b, "version": v})).collect();
            emit_json(&json!(v));
        } else {
            emit(&out.iter().fold(String::new(), |mut s, (b, v)| {
                let _ = writeln!(s, "{b}  latest version {v}");
                s
            }));
        }
        return Ok(Exit::Ok);
    }
    let store = open_store(&location)?;
    let source = match &args.from_tag {
        Some(t) => At::Tag(t.clone()),
        None => at(args.from_branch.as_ref(), args.from_version),
    };
    let ds = open_version(&store, &source)?;
    let new = ds.create_branch(&name, &WriteOptions::default())?;
    if ctx.json {
        emit_json(&json!({
            "branch": new.branch(), "version": new.version(), "from": format!("{}@{}", ds.branch(), ds.version()),
        }));
    } else {
        emit(&format!("created branch {name} at {}@{} (as {name}@{})", ds.branch(), ds.version(), new.version()));
    }
    Ok(Exit::Ok)
}
