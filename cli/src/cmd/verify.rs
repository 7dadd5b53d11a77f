//! `tessera verify`: read every byte of every data file (and deletion vector) of a version and
//! check every checksum, size, padding byte and decoded value.
//!
//! The checks are the reference crate's ([`Dataset::verify_fragment`]); this command runs them
//! on fragments in parallel (`--jobs`) with a progress bar and reports every fault, where
//! `Dataset::verify` stops at the first.

use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use serde_json::json;
use tessera::{Dataset, ErrorClass, FragmentInfo, VerifyReport};

use super::{AtArgs, Ctx, DatasetArg, emit, emit_json, fmt_bytes, open_store, open_version};
use crate::error::{CliResult, Exit};
use crate::progress::{Progress, Total, visible};

/// Arguments of `tessera verify`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    ds: DatasetArg,
    #[command(flatten)]
    at: AtArgs,
    /// Fragments checked in parallel (default: the number of CPUs).
    #[arg(short, long)]
    jobs: Option<usize>,
}

/// One fault, as reported.
#[derive(Clone, Debug)]
struct Fault {
    /// The object at fault (data file, deletion vector, the dataset for its manifest).
    object: String,
    fragment: Option<u64>,
    column: Option<String>,
    class: ErrorClass,
    error: String,
}

impl Fault {
    fn json(&self) -> serde_json::Value {
        json!({"object": self.object, "fragment": self.fragment, "column": self.column,
               "class": self.class.as_str(), "error": self.error})
    }
}

impl From<tessera::verify::Fault> for Fault {
    fn from(f: tessera::verify::Fault) -> Self {
        Self {
            class: f.class(),
            error: f.error.to_string(),
            object: f.object,
            fragment: Some(f.fragment),
            column: f.column,
        }
    }
}

/// What checking one fragment found.
fn verify_fragment(ds: &Dataset, info: &FragmentInfo) -> (VerifyReport, Vec<Fault>) {
    let mut report = VerifyReport::default();
    let mut faults = Vec::new();
    let _ = ds.verify_fragment(info, &mut report, &mut |f| {
        faults.push(Fault::from(f));
        ControlFlow::Continue(())
    });
    (report, faults)
}

/// Runs `tessera verify`.
///
/// # Errors
/// Not found or usage errors; faults are reported and give exit code 1.
pub(crate) fn run(ctx: Ctx, args: &Args) -> CliResult<Exit> {
    let store = open_store(&args.ds.location()?)?;
    let ds = match open_version(&store, &args.at.at()) {
        Ok(ds) => ds,
        Err(e) if e.exit == Exit::DataFault => {
            // The manifest or an index segment is itself at fault: report it as a fault.
            let f = Fault {
                object: store.url().to_string(),
                fragment: None,
                column: None,
                class: ErrorClass::Invalid,
                error: e.message,
            };
            return Ok(report(ctx, None, &VerifyReport::default(), vec![f]));
        }
        Err(e) => return Err(e),
    };
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from)).clamp(1, 64);
    let fragments = ds.fragments();
    let mut progress = Progress::new("verify", Total::Count(fragments.len() as u64, "fragments"), visible(ctx.quiet));
    let next = AtomicUsize::new(0);
    let mut total = VerifyReport::default();
    let mut faults = Vec::new();
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<(VerifyReport, Vec<Fault>)>();
        for _ in 0..jobs.min(fragments.len().max(1)) {
            let tx = tx.clone();
            let (ds, next) = (&ds, &next);
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(info) = fragments.get(i) else { return };
                    if tx.send(verify_fragment(ds, info)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        for (r, found) in rx {
            for f in &found {
                progress.println(&format!("FAULT {}", f.error));
            }
            progress.advance(1, r.rows, r.bytes);
            total.files += r.files;
            total.bytes += r.bytes;
            total.blocks += r.blocks;
            total.rows += r.rows;
            faults.extend(found);
        }
    });
    progress.finish();
    Ok(report(ctx, Some(&ds), &total, faults))
}

/// Prints the outcome and returns the exit code.
fn report(ctx: Ctx, ds: Option<&Dataset>, r: &VerifyReport, mut faults: Vec<Fault>) -> Exit {
    faults.sort_by(|a, b| (a.fragment, &a.object, &a.column).cmp(&(b.fragment, &b.object, &b.column)));
    let ok = faults.is_empty();
    let rows = r.rows;
    let label = ds.map_or_else(|| "dataset".to_string(), |d| format!("{}@{}", d.branch(), d.version()));
    if ctx.json {
        emit_json(&json!({
            "ok": ok, "branch": ds.map(Dataset::branch), "version": ds.map(Dataset::version),
            "files": r.files, "bytes": r.bytes, "blocks": r.blocks, "rows": rows,
            "faults": faults.iter().map(Fault::json).collect::<Vec<_>>(),
        }));
    } else {
        let mut s = String::new();
        for f in &faults {
            let mut at = vec![f.object.clone()];
            if let Some(id) = f.fragment {
                at.push(format!("fragment {id}"));
            }
            if let Some(c) = &f.column {
                at.push(format!("column {c:?}"));
            }
            let _ = writeln!(s, "FAULT [{}] {}: {}", f.class, at.join(", "), f.error);
        }
        let _ = writeln!(
            s,
            "{label}: checked {} data files ({}), {} blocks, {rows} rows: {}",
            r.files,
            fmt_bytes(r.bytes),
            r.blocks,
            if ok { "OK".to_string() } else { format!("{} FAULTS", faults.len()) }
        );
        emit(&s);
    }
    if ok {
        Exit::Ok
    } else if faults.iter().all(|f| f.class == ErrorClass::Io) {
        Exit::Other // storage trouble, not a finding about the data
    } else {
        Exit::DataFault
    }
}
