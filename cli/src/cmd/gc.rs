//! `tessera gc DATASET [--dry-run]`: delete objects no version references (data files, deletion
//! vectors and segments left by failed or superseded writes) that are older than the retention
//! period ([`tessera::gc::collect_garbage`]); manifests and tags are never deleted.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::json;

use super::{Ctx, DatasetArg, emit, emit_json, fmt_bytes, open_store, open_version};
use crate::error::{CliError, CliResult, Exit};

/// Arguments of `tessera gc`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    ds: DatasetArg,
    /// Keep unreferenced objects younger than this (e.g. 7d, 12h, 30m, 0s). It must exceed the
    /// longest time a writer takes between uploading an object and committing it [GC-03].
    #[arg(long, default_value = "7d", value_name = "AGE", value_parser = parse_age)]
    retention: Duration,
    /// Only list what would be deleted.
    #[arg(long)]
    dry_run: bool,
}

/// Parses `7d`, `12h`, `30m`, `45s`.
fn parse_age(s: &str) -> Result<Duration, String> {
    let bad = || format!("bad age {s:?} (e.g. 7d, 12h, 30m, 0s)");
    let t = s.trim();
    let unit = t.chars().last().ok_or_else(bad)?;
    let secs: u64 = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return Err(bad()),
    };
    let n: u64 = t[..t.len() - 1].parse().map_err(|_| bad())?;
    n.checked_mul(secs).map(Duration::from_secs).ok_or_else(bad)
}

/// Runs `tessera gc`.
///
/// # Errors
/// Not found for a missing dataset; any version that cannot be read stops the collection
/// before anything is deleted (a data fault).
pub(crate) fn run(ctx: Ctx, args: &Args) -> CliResult<Exit> {
    let store = open_store(&args.ds.location()?)?;
    open_version(&store, &tessera::At::Latest)?; // a dataset, not just any folder
    let r = tessera::gc::collect_garbage(&store, args.retention, args.dry_run).map_err(|e| {
        CliError::from(e).note("nothing was deleted: every version must be readable to know what is garbage")
    })?;
    let bytes: u64 = r.garbage.iter().map(|(_, n)| n).sum();
    if ctx.json {
        emit_json(&json!({
            "dry_run": r.dry_run, "garbage": r.garbage.iter().map(|(p, n)| json!({"path": p, "bytes": n})).collect::<Vec<_>>(),
            "bytes": bytes, "too_young": r.too_young, "referenced": r.referenced,
        }));
    } else {
        let mut s = String::new();
        for (p, n) in &r.garbage {
            let _ = writeln!(s, "{} {p} ({})", if r.dry_run { "would delete" } else { "deleted" }, fmt_bytes(*n));
        }
        let _ = writeln!(
            s,
            "{} {} unreferenced objects ({}); kept {} younger than the retention period and {} referenced",
            if r.dry_run { "would delete" } else { "deleted" },
            r.garbage.len(),
            fmt_bytes(bytes),
            r.too_young,
            r.referenced
        );
        emit(&s);
    }
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ages() {
        assert_eq!(super::parse_age("7d"), Ok(std::time::Duration::from_secs(7 * 86_400)));
        assert_eq!(super::parse_age("0s"), Ok(std::time::Duration::ZERO));
        for bad in ["", "7", "d", "-1h", "7w"] {
            assert!(super::parse_age(bad).is_err(), "{bad:?}");
        }
    }
}
