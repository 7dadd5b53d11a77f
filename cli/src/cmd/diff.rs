//! `tessera diff DATASET A B`: what changed from version A to version B — fragments and rows added
//! and removed (by comparing the versions' fragment id sets) and schema changes (by column id).
//!
//! A and B are version numbers (of `--branch`, default main), `BRANCH@N`, or tag names.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::json;
use tessera::{At, Column, Dataset, FragmentInfo, Store};

use super::{Ctx, DatasetArg, emit, emit_json, fmt_kind, fmt_shape, open_store, open_version, required};
use crate::error::{CliError, CliResult, Exit};

/// Arguments of `tessera diff`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    ds: DatasetArg,
    /// The older version: N, BRANCH@N, or a tag.
    #[arg(value_name = "A")]
    a: Option<String>,
    /// The newer version: N, BRANCH@N, or a tag.
    #[arg(value_name = "B")]
    b: Option<String>,
    /// Branch of plain version numbers.
    #[arg(long, default_value = "main")]
    branch: String,
}

/// Parses `N`, `BRANCH@N` or a tag name.
pub(crate) fn parse_version(s: &str, branch: &str) -> CliResult<At> {
    if let Ok(v) = s.parse::<u64>() {
        return Ok(At::BranchVersion(branch.to_string(), v));
    }
    if let Some((b, v)) = s.rsplit_once('@') {
        let v = v.parse::<u64>().map_err(|_| CliError::usage(format!("bad version {s:?} (N, BRANCH@N or a tag)")))?;
        return Ok(At::BranchVersion(b.to_string(), v));
    }
    Ok(At::Tag(s.to_string()))
}

fn open_spec(store: &Store, s: &str, branch: &str) -> CliResult<Dataset> {
    open_version(store, &parse_version(s, branch)?)
}

/// A column's description for schema changes.
fn describe(c: &Column) -> String {
    format!(
        "{} {} {} {}{}",
        fmt_kind(&c.kind),
        c.dtype,
        fmt_shape(&c.shape),
        c.compression,
        if c.nullable { " nullable" } else { "" }
    )
}

/// Runs `tessera diff`.
///
/// # Errors
/// Not found for unknown versions; validation errors.
pub(crate) fn run(ctx: Ctx, args: &Args) -> CliResult<Exit> {
    let (location, [a, b]) = args.ds.resolve([args.a.clone(), args.b.clone()])?;
    let (a, b) = (required(a, "A")?, required(b, "B")?);
    let store = open_store(&location)?;
    let a = open_spec(&store, &a, &args.branch)?;
    let b = open_spec(&store, &b, &args.branch)?;
    let fa: BTreeMap<u64, &FragmentInfo> = a.fragments().iter().map(|f| (f.fragment.id, f)).collect();
    let fb: BTreeMap<u64, &FragmentInfo> = b.fragments().iter().map(|f| (f.fragment.id, f)).collect();
    let added: Vec<u64> = fb.keys().filter(|id| !fa.contains_key(id)).copied().collect();
    let removed: Vec<u64> = fa.keys().filter(|id| !fb.contains_key(id)).copied().collect();
    let changed: Vec<u64> =
        fb.iter().filter(|(id, f)| fa.get(id).is_some_and(|o| o.fragment != f.fragment)).map(|(id, _)| *id).collect();
    let rows_added: u64 = added.iter().map(|id| fb[id].fragment.live_rows()).sum();
    let rows_removed: u64 = removed.iter().map(|id| fa[id].fragment.live_rows()).sum();
    // Fragments in both whose live rows shrank (deletions) or grew (restores).
    let (mut rows_deleted, mut rows_restored) = (0u64, 0u64);
    for id in &changed {
        let (o, n) = (fa[id].fragment.live_rows(), fb[id].fragment.live_rows());
        rows_deleted += o.saturating_sub(n);
        rows_restored += n.saturating_sub(o);
    }
    let (sa, sb) = (a.schema(), b.schema());
    let cols_added: Vec<&Column> = sb.columns.iter().filter(|c| sa.column_by_id(c.id).is_none()).collect();
    let cols_removed: Vec<&Column> = sa.columns.iter().filter(|c| sb.column_by_id(c.id).is_none()).collect();
    let cols_changed: Vec<(&Column, &Column)> =
        sb.columns.iter().filter_map(|c| sa.column_by_id(c.id).filter(|o| *o != c).map(|o| (o, c))).collect();
    let label = |d: &Dataset| format!("{}@{}", d.branch(), d.version());
    if ctx.json {
        let col = |c: &Column| tessera::dump::column_json(c);
        emit_json(&json!({
            "from": label(&a), "to": label(&b),
            "rows_from": a.row_count(), "rows_to": b.row_count(),
            "fragments_added": added, "fragments_removed": removed, "fragments_changed": changed,
            "rows_added": rows_added, "rows_removed": rows_removed,
            "rows_deleted": rows_deleted, "rows_restored": rows_restored,
            "schema": {
                "columns_added": cols_added.iter().map(|c| col(c)).collect::<Vec<_>>(),
                "columns_removed": cols_removed.iter().map(|c| col(c)).collect::<Vec<_>>(),
                "columns_changed": cols_changed.iter().map(|(o, n)| json!({"from": col(o), "to": col(n)})).collect::<Vec<_>>(),
            },
        }));
        return Ok(Exit::Ok);
    }
    let mut s = format!("{} -> {}: {} -> {} rows\n", label(&a), label(&b), a.row_count(), b.row_count());
    let _ = writeln!(s, "  fragments: +{} -{} ~{}", added.len(), removed.len(), changed.len());
    let _ = write!(s, "  rows: +{rows_added} added, -{rows_removed} removed");
    if rows_deleted > 0 || rows_restored > 0 {
        let _ = write!(s, ", -{rows_deleted} deleted, +{rows_restored} restored in kept fragments");
    }
    s += "\n";
    if cols_added.is_empty() && cols_removed.is_empty() && cols_changed.is_empty() {
        s += "  schema: unchanged\n";
    } else {
        s += "  schema:\n";
        for c in &cols_added {
            let _ = writeln!(s, "    + {}: {}", c.name, describe(c));
        }
        for c in &cols_removed {
            let _ = writeln!(s, "    - {}: {}", c.name, describe(c));
        }
        for (o, n) in &cols_changed {
            let name = if o.name == n.name { n.name.clone() } else { format!("{} -> {}", o.name, n.name) };
            let _ = writeln!(s, "    ~ {name}: {} -> {}", describe(o), describe(n));
        }
    }
    emit(&s);
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_specs() {
        assert_eq!(parse_version("3", "main").unwrap(), At::BranchVersion("main".into(), 3));
        assert_eq!(parse_version("dev@2", "main").unwrap(), At::BranchVersion("dev".into(), 2));
        assert_eq!(parse_version("v1.0", "main").unwrap(), At::Tag("v1.0".into()));
        assert!(parse_version("dev@x", "main").is_err());
    }
}
