//! The subcommands, and what they share: dataset selection, version selection, output and
//! formatting helpers.

#[cfg(feature = "bench")]
pub(crate) mod bench;
#[cfg(not(feature = "bench"))]
#[path = "bench_off.rs"]
pub(crate) mod bench;
pub(crate) mod column;
pub(crate) mod compact;
pub(crate) mod delete;
pub(crate) mod diff;
pub(crate) mod export;
pub(crate) mod gc;
pub(crate) mod index;
pub(crate) mod info;
pub(crate) mod ingest;
pub(crate) mod lineage;
pub(crate) mod log;
pub(crate) mod merge;
pub(crate) mod query;
pub(crate) mod refs;
pub(crate) mod restore;
pub(crate) mod select;
pub(crate) mod show;
pub(crate) mod update;
pub(crate) mod verify;
pub(crate) mod view;

use std::io::Write;
use std::path::Path;

use tessera::{At, Dataset, Dim, Kind, Limits, Store};

use crate::error::{CliError, CliResult};

/// Options every command sees.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx {
    /// Print JSON instead of text.
    pub(crate) json: bool,
    /// No progress bars or informational messages.
    pub(crate) quiet: bool,
}

impl Ctx {
    /// Prints an informational line on stderr unless quiet.
    pub(crate) fn info(self, line: &str) {
        if !self.quiet {
            eprintln!("{line}");
        }
    }
}

/// The `--dataset/-d` flag. Every command takes the dataset as its first positional argument
/// (`tessera show DATASET ROW`); with the flag, the command's own positionals move one place left
/// (`tessera show -d DATASET ROW`).
#[derive(clap::Args, Debug, Default)]
pub(crate) struct DatasetArg {
    /// Dataset path or URL (or --dataset).
    #[arg(value_name = "DATASET")]
    pub(crate) location: Option<String>,
    /// Dataset location: a local path or a store URL (file://, s3://, gs://, az://, https://);
    /// the first positional argument when not given here.
    #[arg(short = 'd', long = "dataset", value_name = "DATASET")]
    pub(crate) dataset: Option<String>,
}

impl DatasetArg {
    /// The dataset location from the flag or the only positional argument.
    ///
    /// # Errors
    /// Usage error when neither or both are given.
    pub(crate) fn location(&self) -> CliResult<String> {
        let (location, []) = self.resolve([])?;
        Ok(location)
    }

    /// Splits the positionals `[DATASET, REST...]` into the dataset and the command's own `N`
    /// positionals: the first is the dataset unless `--dataset` gives it, when each positional
    /// is the command's own, one place to the left.
    ///
    /// # Errors
    /// Usage error when no dataset is given, or when `--dataset` is given and every positional
    /// place is filled as well (one argument too many).
    pub(crate) fn resolve<const N: usize>(
        &self,
        rest: [Option<String>; N],
    ) -> CliResult<(String, [Option<String>; N])> {
        match (&self.dataset, self.location.clone()) {
            (Some(d), None) => Ok((d.clone(), rest)),
            (Some(d), Some(first)) => {
                if N == 0 || rest[N - 1].is_some() {
                    return Err(CliError::usage(format!(
                        "the dataset is given with --dataset {d:?}: unexpected argument {:?}",
                        rest.last().and_then(Option::as_deref).unwrap_or(&first)
                    )));
                }
                let mut own = rest;
                own.rotate_right(1);
                own[0] = Some(first);
                Ok((d.clone(), own))
            }
            (None, Some(first)) => Ok((first, rest)),
            (None, None) => Err(CliError::usage("no dataset given (pass it first, or with --dataset/-d)")),
        }
    }
}

/// A required positional argument after [`DatasetArg::resolve`].
///
/// # Errors
/// Usage error naming the missing argument.
pub(crate) fn required(value: Option<String>, name: &str) -> CliResult<String> {
    value.ok_or_else(|| CliError::usage(format!("missing argument {name}")))
}

/// Which version to open: `--version`, `--branch`, `--tag`.
#[derive(clap::Args, Debug, Default, Clone)]
pub(crate) struct AtArgs {
    /// Version number (of main, or of --branch).
    #[arg(long, value_name = "N")]
    pub(crate) version: Option<u64>,
    /// Branch: its latest version, or version --version of it.
    #[arg(long, value_name = "BRANCH")]
    pub(crate) branch: Option<String>,
    /// Tag naming the version.
    #[arg(long, value_name = "TAG", conflicts_with_all = ["version", "branch"])]
    pub(crate) tag: Option<String>,
}

impl AtArgs {
    /// The reference crate's selector (tags are handled by [`open_version`]).
    pub(crate) fn at(&self) -> At {
        match (&self.tag, &self.branch, self.version) {
            (Some(t), _, _) => At::Tag(t.clone()),
            (None, Some(b), Some(v)) => At::BranchVersion(b.clone(), v),
            (None, Some(b), None) => At::Branch(b.clone()),
            (None, None, Some(v)) => At::Version(v),
            (None, None, None) => At::Latest,
        }
    }
}

/// Opens a store for reading. Local paths must exist: `Store::open` would create a missing
/// directory, which a typo in a read-only command should not do.
///
/// # Errors
/// Not found for a missing local path; the store's own errors.
pub(crate) fn open_store(location: &str) -> CliResult<Store> {
    if !location.contains("://") && !Path::new(location).exists() {
        return Err(CliError::not_found(format!("no dataset at {location} (path does not exist)")));
    }
    Ok(Store::open(location)?)
}

/// Opens the selected version, checking a tag's recorded manifest CRC.
///
/// # Errors
/// Not found for a missing dataset/version/branch/tag; validation errors (data faults).
pub(crate) fn open_version(store: &Store, at: &At) -> CliResult<Dataset> {
    let r = match at {
        At::Tag(t) => Dataset::open_tag(store, t, Limits::default()),
        other => Dataset::open_at(store, other, Limits::default()),
    };
    r.map_err(|e| {
        let is_missing = e.class() == tessera::ErrorClass::NotFound;
        let err = CliError::from(e);
        if is_missing && matches!(at, At::Latest) {
            CliError::not_found(format!("no dataset at {} ({})", store.url(), err.message))
        } else {
            err
        }
    })
}

/// Opens the latest version of `main` and resolves one name positional: for objects read
/// through any version (views, vector indexes).
///
/// # Errors
/// As [`open_store`] and [`open_version`]; usage errors of the positionals.
pub(crate) fn open_latest(ds: &DatasetArg, name: Option<&String>) -> CliResult<(Dataset, Option<String>)> {
    let (location, [name]) = ds.resolve([name.cloned()])?;
    let store = open_store(&location)?;
    Ok((open_version(&store, &At::Latest)?, name))
}

/// Opens the dataset a command names at the version it selects.
///
/// # Errors
/// As [`open_store`] and [`open_version`].
pub(crate) fn open(ds: &DatasetArg, at: &AtArgs) -> CliResult<Dataset> {
    let location = ds.location()?;
    let store = open_store(&location)?;
    open_version(&store, &at.at())
}

/// `--branch` and `--message` of commands that commit a new version.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct CommitArgs {
    /// Branch to change: the command starts from its latest version (default main).
    #[arg(long, value_name = "BRANCH")]
    pub(crate) branch: Option<String>,
    /// Commit message (default: a description of the change).
    #[arg(short, long)]
    pub(crate) message: Option<String>,
}

impl CommitArgs {
    /// The latest version of the branch, which the change applies to.
    ///
    /// # Errors
    /// As [`open_version`].
    pub(crate) fn head(&self, store: &Store) -> CliResult<Dataset> {
        open_version(store, &self.branch.as_ref().map_or(At::Latest, |b| At::Branch(b.clone())))
    }

    /// The message, or `default` when none was given.
    pub(crate) fn message(&self, default: impl FnOnce() -> String) -> String {
        self.message.clone().unwrap_or_else(default)
    }
}

/// Prints the outcome of a command that may have committed: `summary` as text, or `fields`
/// plus the branch, version and rows of `ds` as JSON.
pub(crate) fn emit_change(ctx: Ctx, ds: &Dataset, summary: &str, fields: serde_json::Value) {
    if ctx.json {
        let mut v = serde_json::json!({"branch": ds.branch(), "version": ds.version(), "rows": ds.row_count()});
        if let (Some(o), serde_json::Value::Object(extra)) = (v.as_object_mut(), fields) {
            o.extend(extra);
        }
        emit_json(&v);
    } else {
        emit(summary);
    }
}

/// Writes text to stdout, ignoring a closed pipe (`tessera log | head`).
pub(crate) fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

/// Writes a JSON value to stdout (pretty-printed).
pub(crate) fn emit_json(v: &serde_json::Value) {
    emit(&serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()));
}

/// "12.3 MiB" style sizes.
pub(crate) fn fmt_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{n} B") } else { format!("{v:.1} {}", UNITS[u]) }
}

/// A shape as `[224, 224, 3]`, ragged dims as `?`; `utf8`/`bytes` columns show `[]`.
pub(crate) fn fmt_shape(shape: &[Dim]) -> String {
    tessera::ShapeDisplay(shape).to_string()
}

/// A kind as the reference prints it (`image(hwc)`, `audio(16000 Hz)`), class labels
/// shortened to their first five names: `class_label(10: cat, dog, …)`.
pub(crate) fn fmt_kind(kind: &Kind) -> String {
    format!("{kind:.5}")
}

/// A Unix-ms timestamp as `2024-05-01 12:34:56Z` (UTC).
pub(crate) fn fmt_time(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Parses sizes like `64M`, `512K`, `1G`, `1000` (bytes; binary multiples).
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((at, unit)) if unit.is_ascii_alphabetic() => {
            let m: u64 = match unit.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'B' => 1,
                _ => return Err(format!("bad size {s:?} (use e.g. 64M, 512K, 1G)")),
            };
            (&t[..at], m)
        }
        _ => (t, 1),
    };
    let n: u64 = num.trim().parse().map_err(|_| format!("bad size {s:?} (use e.g. 64M, 512K, 1G)"))?;
    n.checked_mul(mult).filter(|&v| v > 0).ok_or_else(|| format!("bad size {s:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(fmt_time(0), "1970-01-01 00:00:00Z");
        assert_eq!(fmt_time(1_700_000_000_000), "2023-11-14 22:13:20Z");
        assert_eq!(fmt_time(951_782_400_000), "2000-02-29 00:00:00Z");
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("12X").is_err());
        assert!(parse_size("0").is_err());
        assert_eq!(fmt_bytes(1536), "1.5 KiB");
        assert_eq!(fmt_shape(&[Dim::Ragged, Dim::Fixed(3)]), "[?, 3]");
    }
}
