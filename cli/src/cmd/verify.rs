//! `tessera verify`: read every byte of every data file (and deletion vector) of a version and
//! check every checksum, size, padding byte and decoded value.
//!
//! Unlike the reference crate's `Dataset::verify`, which stops at the first fault, this checks
//! each data file (and each column within a file whose footer is sound) on its own, so one
//! fault does not hide others. Fragments are checked in parallel (`--jobs`).

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use serde_json::json;
use tessera::datafile::{self, DataFile};
use tessera::manifest::DataFileRef;
use tessera::{Dataset, ErrorClass, FragmentInfo};

use super::{AtArgs, Ctx, DatasetFlag, emit, emit_json, fmt_bytes, open_store, open_version};
use crate::error::{CliResult, Exit};
use crate::progress::{Progress, Total, visible};

/// Arguments of `tessera verify`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Dataset path or URL (or --dataset).
    #[arg(value_name = "DATASET")]
    location: Option<String>,
    #[command(flatten)]
    ds: DatasetFlag,
    #[command(flatten)]
    at: AtArgs,
    /// Fragments checked in parallel (default: the number of CPUs).
    #[arg(short, long)]
    jobs: Option<usize>,
}

/// One fault.
#[derive(Clone, Debug)]
struct Fault {
    /// The object at fault (data file, deletion vector, manifest, …).
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

/// What checking one fragment found.
#[derive(Debug, Default)]
struct FragmentReport {
    files: u64,
    bytes: u64,
    blocks: u64,
    faults: Vec<Fault>,
}

fn fault(object: &str, fragment: Option<u64>, column: Option<&str>, e: &tessera::Error) -> Fault {
    Fault {
        object: object.to_string(),
        fragment,
        column: column.map(str::to_string),
        class: e.class(),
        error: e.to_string(),
    }
}

/// Checks one data file completely; faults are collected, not returned early.
fn verify_file(ds: &Dataset, info: &FragmentInfo, file: &DataFileRef, report: &mut FragmentReport) {
    let id = Some(info.fragment.id);
    let path = file.path.as_str();
    let mut push = |column: Option<&str>, e: &tessera::Error| report.faults.push(fault(path, id, column, e));
    if let Err(e) = tessera::paths::validate_relative(path, path) {
        push(None, &e);
        return;
    }
    let bytes = match ds.store().get_bounded(path, file.size) {
        Ok(b) => b,
        Err(e) if e.class() == ErrorClass::NotFound => {
            report.faults.push(Fault {
                object: path.to_string(),
                fragment: id,
                column: None,
                class: ErrorClass::Invalid,
                error: format!("invalid {path}: referenced data file does not exist"),
            });
            return;
        }
        Err(e) => {
            push(None, &e);
            return;
        }
    };
    let size = bytes.len() as u64;
    if size != file.size {
        report.faults.push(Fault {
            object: path.to_string(),
            fragment: id,
            column: None,
            class: ErrorClass::Invalid,
            error: format!("invalid {path}: file is {size} bytes, the fragment says {}", file.size),
        });
        return;
    }
    let header = &bytes[..bytes.len().min(datafile::HEADER_LEN as usize)];
    if let Err(e) = datafile::check_header(header, path) {
        push(None, &e);
        return;
    }
    let t = datafile::TRAILER_LEN as usize;
    let trailer = if bytes.len() >= t { &bytes[bytes.len() - t..] } else { &bytes[..] };
    let tail = match datafile::parse_tail(trailer, size, ds.limits(), path) {
        Ok(t) => t,
        Err(e) => {
            push(None, &e);
            return;
        }
    };
    let footer = &bytes[tail.footer_offset as usize..bytes.len() - t];
    let columns = match ds.file_columns(file) {
        Ok(c) => c,
        Err(e) => {
            push(None, &e);
            return;
        }
    };
    let rows = info.fragment.row_count;
    let df = match DataFile::open(path, tail, footer, file.footer_crc32, rows, &columns, ds.limits()) {
        Ok(df) => df,
        Err(e) => {
            push(None, &e);
            return;
        }
    };
    if let Err(e) = df.check_padding(&bytes) {
        push(None, &e);
    }
    for c in &columns {
        let Some(chunk) = df.chunk(c.id) else { continue };
        let all = 0..rows;
        let (blocks, _) = df.blocks_for(chunk, &all);
        // Block ranges lie inside the file: `DataFile::open` checked them against the footer.
        let stored: Vec<&[u8]> = blocks
            .iter()
            .map(|b| bytes.get(b.offset as usize..(b.offset + b.stored_len) as usize).unwrap_or(&[]))
            .collect();
        if let Err(e) = df.decode(c, all, &stored) {
            push(Some(&c.name), &e);
        }
        report.blocks += blocks.len() as u64;
    }
    report.files += 1;
    report.bytes += size;
}

fn verify_fragment(ds: &Dataset, info: &FragmentInfo) -> FragmentReport {
    let mut report = FragmentReport::default();
    for file in &info.fragment.files {
        verify_file(ds, info, file, &mut report);
    }
    if let Err(e) = ds.deleted_rows(info) {
        let object = info.fragment.deletion.as_ref().map_or("deletion vector", |d| d.path.as_str()).to_string();
        report.faults.push(fault(&object, Some(info.fragment.id), None, &e));
    }
    report
}

/// Runs `tessera verify`.
///
/// # Errors
/// Not found or usage errors; faults are reported and give exit code 1.
pub(crate) fn run(ctx: Ctx, args: &Args) -> CliResult<Exit> {
    let store = open_store(&args.ds.location(args.location.as_deref())?)?;
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
            return Ok(report(ctx, None, &FragmentReport { faults: vec![f], ..FragmentReport::default() }, 0));
        }
        Err(e) => return Err(e),
    };
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from)).clamp(1, 64);
    let fragments = ds.fragments();
    let mut progress = Progress::new("verify", Total::Count(fragments.len() as u64, "fragments"), visible(ctx.quiet));
    let next = AtomicUsize::new(0);
    let total = Mutex::new(FragmentReport::default());
    let mut rows = 0u64;
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<(u64, FragmentReport)>();
        for _ in 0..jobs.min(fragments.len().max(1)) {
            let tx = tx.clone();
            let (ds, next) = (&ds, &next);
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(info) = fragments.get(i) else { return };
                    if tx.send((info.fragment.live_rows(), verify_fragment(ds, info))).is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        for (live, r) in rx {
            for f in &r.faults {
                progress.println(&format!("FAULT {}", f.error));
            }
            rows += live;
            progress.advance(1, live, r.bytes);
            if let Ok(mut t) = total.lock() {
                t.files += r.files;
                t.bytes += r.bytes;
                t.blocks += r.blocks;
                t.faults.extend(r.faults);
            }
        }
    });
    progress.finish();
    let total = total.into_inner().unwrap_or_default();
    Ok(report(ctx, Some(&ds), &total, rows))
}

/// Prints the outcome and returns the exit code.
fn report(ctx: Ctx, ds: Option<&Dataset>, r: &FragmentReport, rows: u64) -> Exit {
    let mut faults = r.faults.clone();
    faults.sort_by(|a, b| (a.fragment, &a.object, &a.column).cmp(&(b.fragment, &b.object, &b.column)));
    let ok = faults.is_empty();
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
