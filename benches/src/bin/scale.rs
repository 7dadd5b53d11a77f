//! `scale` (issue 26): what a rank reads, holds and waits for before its first batch, and what a
//! one-fragment append writes, from 10^3 to 10^7 fragments (10^6 to 10^10 rows), for a version
//! indexed by a fragment tree (SPEC.md §8.3) against one indexed by a fragment log (§8.2).
//!
//! ```text
//! cargo run --release -p tessera-benches --bin scale -- [--json] [--max-fragments N]
//!     [--rows-per-fragment R] [--latency-ms L] [--ranks 0,499,999] [--world 1000] [--batch 64]
//!     [--log-max-fragments N] [--together] [--node-bytes N] [--budget-mb M] [--max-requests K]
//!     [--block K] [--dir D]
//! ```
//!
//! Each dataset is real metadata over one real data file: version 2 appends `R` rows normally,
//! then version 3 lists `F` fragments that all reference that file (SPEC.md §8, the note after
//! SEG-07, allows it), indexed by a tree of 64 KiB nodes (`--node-bytes`) or by a log of segments under
//! 200 MiB (the log's best case: as few segments as the limit allows). So petabytes of rows need
//! no petabytes of disk, and every metadata object is what a writer of that many fragments
//! would store.
//!
//! Each rank is measured in a fresh process (`--measure`), through the request-counting store
//! over `LinkStore` (every GET waits `L` ms, then its bytes' time on a 10 Gb/s link) over the
//! local file system: it opens a `tessera_loader::Loader` on the latest version as rank `r` of
//! `world` (global shuffle, or block shuffle of `K` blocks per window with `--block K`; batch
//! `B`, the default 1 GiB memory budget) — on a tree the manifest
//! and the root only, on a log every segment — takes its first batch, then 20 more. It reports
//! the time and requests (metadata and data) to the first batch, bytes read, peak RSS, and the
//! samples/s of the 20 batches after it. The ranks run one after another, or all at once with
//! `--together` (e.g. `--ranks 0,1,2,3,4,5,6,7 --world 8`: eight real ranks of one job).
//!
//! The append is one one-row commit through the counting store over `LinkStore` (every
//! request waits `L` ms, as a bucket's would) on a base opened beforehand (its opening is not
//! counted; a tree's lazily, `Dataset::open_lazy`): requests, bytes written and time, against
//! the same commit on a dataset with one fragment.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use serde_json::{Value, json};
use tessera::envelope::{self, ObjectKind};
use tessera::manifest::{Fragment, Manifest, Segment, SegmentRef};
use tessera::tree;
use tessera::{At, Batch, Column, ColumnData, DType, Dataset, IndexLayout, Limits, Schema, Store, WriteOptions};
use tessera_benches::counting::CountingStore;
use tessera_benches::link::LinkStore;
use tessera_benches::procfs::peak_rss;
use tessera_loader::{AlignedAllocator, Loader, LoaderConfig, ShuffleMode};

/// Segment bodies the log layout fills up to (under the 256 MiB limit).
const LOG_SEGMENT_BYTES: usize = 200 << 20;
/// The link's rate: 10 Gb/s.
const LINK_BYTES_PER_SEC: f64 = 1.25e9;
/// Seed of the global shuffle the ranks read in.
const SHUFFLE_KEY: u64 = 0x5CA1E;
/// The most fragments rank 0 opens a whole version of (every record in memory).
const WHOLE_OPEN_MAX: u64 = 10_000_000;
/// Batches a rank takes after its first, for the steady-state rate.
const STEADY_BATCHES: usize = 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    Tree,
    Log,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Self::Tree => "tree",
            Self::Log => "log",
        }
    }
}

struct Args {
    json: bool,
    max_fragments: u64,
    log_max_fragments: u64,
    rows_per_fragment: u64,
    latency_ms: u64,
    ranks: Vec<u64>,
    world: u64,
    batch: u64,
    /// Run the ranks' processes at once instead of one after another.
    together: bool,
    /// Body size the tree's nodes aim at.
    node_bytes: u64,
    /// Each rank's memory budget, in MB (the loader's default when `None`).
    budget_mb: Option<u64>,
    /// Each rank's `max_requests_in_flight` (the loader's default when `None`).
    max_requests: Option<u64>,
    /// Block shuffle with this many blocks per window (global shuffle when `None`).
    block: Option<u64>,
    dir: Option<PathBuf>,
}

/// A child run: the dataset directory, its layout and the rank to measure.
type Measure = (PathBuf, Layout, u64);

fn parse() -> Result<(Args, Option<Measure>), String> {
    let mut a = Args {
        json: false,
        max_fragments: 10_000_000,
        log_max_fragments: 1_000_000,
        rows_per_fragment: 1000,
        latency_ms: 20,
        ranks: vec![0, 499, 999],
        world: 1000,
        batch: 64,
        together: false,
        node_bytes: tree::DEFAULT_NODE_BYTES,
        budget_mb: None,
        max_requests: None,
        block: None,
        dir: None,
    };
    let mut measure = None;
    let mut it = std::env::args().skip(1);
    let num = |v: Option<String>, what: &str| -> Result<u64, String> {
        v.and_then(|s| s.parse().ok()).ok_or_else(|| format!("{what} needs a number"))
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--json" => a.json = true,
            "--together" => a.together = true,
            "--node-bytes" => a.node_bytes = num(it.next(), &arg)?.max(1),
            "--budget-mb" => a.budget_mb = Some(num(it.next(), &arg)?.max(1)),
            "--max-requests" => a.max_requests = Some(num(it.next(), &arg)?.max(1)),
            "--block" => a.block = Some(num(it.next(), &arg)?.max(1)),
            "--max-fragments" => a.max_fragments = num(it.next(), &arg)?,
            "--log-max-fragments" => a.log_max_fragments = num(it.next(), &arg)?,
            "--rows-per-fragment" => a.rows_per_fragment = num(it.next(), &arg)?.max(1),
            "--latency-ms" => a.latency_ms = num(it.next(), &arg)?,
            "--world" => a.world = num(it.next(), &arg)?.max(1),
            "--batch" => a.batch = num(it.next(), &arg)?.max(1),
            "--ranks" => {
                let v = it.next().ok_or("--ranks needs a list")?;
                a.ranks =
                    v.split(',').map(|s| s.parse().map_err(|_| format!("bad rank {s:?}"))).collect::<Result<_, _>>()?;
            }
            "--dir" => a.dir = Some(PathBuf::from(it.next().ok_or("--dir needs a path")?)),
            "--measure" => {
                let dir = PathBuf::from(it.next().ok_or("--measure needs a dir")?);
                let layout = match it.next().as_deref() {
                    Some("tree") => Layout::Tree,
                    Some("log") => Layout::Log,
                    other => return Err(format!("--measure DIR tree|log RANK, got {other:?}")),
                };
                measure = Some((dir, layout, num(it.next(), "--measure RANK")?));
            }
            "-h" | "--help" => {
                println!(
                    "scale [--json] [--max-fragments N] [--log-max-fragments N] [--rows-per-fragment R] \
                     [--latency-ms L] [--ranks a,b,c] [--world W] [--batch B] [--together] [--node-bytes N] [--budget-mb M] [--max-requests K] [--block K] [--dir D]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok((a, measure))
}

fn schema() -> Schema {
    Schema::new([Column::new("id", DType::I64, &[])]).expect("a valid schema")
}

fn options(layout: Layout, node_bytes: u64) -> WriteOptions {
    let index = match layout {
        Layout::Tree => IndexLayout::Tree { node_bytes },
        Layout::Log => IndexLayout::Log,
    };
    WriteOptions { timestamp_ms: Some(0), writer_id: Some([5; 16]), index, ..WriteOptions::default() }
}

fn rows(start: i64, n: u64) -> Batch {
    let n = i64::try_from(n).expect("rows fit i64");
    Batch::new().with("id", ColumnData::from_scalars(&(start..start + n).collect::<Vec<_>>())).expect("a batch")
}

/// Writes the dataset of `fragments` fragments of `per` rows each at `dir`; returns the index
/// bytes written and the seconds it took.
fn build(dir: &Path, layout: Layout, fragments: u64, per: u64, node_bytes: u64) -> (u64, f64) {
    let t = Instant::now();
    std::fs::create_dir_all(dir).expect("dataset dir");
    let fs = LocalFileSystem::new_with_prefix(dir).expect("local store").with_fsync(false);
    let store = Store::from_object_store(Arc::new(fs), "", true);
    let v1 = Dataset::create_in(&store, schema(), &options(layout, node_bytes)).expect("create");
    let v2 = v1.append(&rows(0, per), "one real data file", options(layout, node_bytes)).expect("append");
    let template = (*v2.fragments()[0].fragment).clone();
    // Generated as they are indexed: 10^8 fragment records would not fit in memory at once.
    let fragment = |id: u64| Fragment { id, ..template.clone() };
    let limits = Limits::default();
    let (segments, index_bytes) = match layout {
        Layout::Tree => {
            let w = tree::build(&store, (0..fragments).map(fragment), &schema(), node_bytes, &limits).expect("tree");
            (w.root.into_iter().collect::<Vec<_>>(), w.bytes_written)
        }
        Layout::Log => {
            let entry = envelope::encode_body(&template).expect("encode").len().max(1);
            let per_segment = (LOG_SEGMENT_BYTES / entry).max(1) as u64;
            let mut refs = Vec::new();
            let mut bytes = 0u64;
            for first in (0..fragments).step_by(per_segment as usize) {
                let chunk: Vec<Fragment> = (first..fragments.min(first + per_segment)).map(fragment).collect();
                let count = chunk.len() as u64;
                let seg = Segment { fragments: chunk, removed: Vec::new() };
                let sealed = envelope::seal(ObjectKind::Segment, &seg).expect("seal");
                let key = tessera::paths::content_key(tessera::paths::INDEX_DIR, "tsi", &sealed);
                bytes += sealed.len() as u64;
                refs.push(SegmentRef {
                    path: key.clone(),
                    size: sealed.len() as u64,
                    crc32: envelope::stored_crc(&sealed),
                    fragment_count: count,
                    row_count: count * per,
                });
                store.put_if_absent(&key, sealed.into()).expect("put segment");
            }
            (refs, bytes)
        }
    };
    let base = v2.manifest();
    let m = Manifest {
        version: 3,
        parent: Some(base.version_ref()),
        message: format!("{fragments} fragments"),
        next_fragment_id: fragments,
        row_count: fragments * per,
        segments,
        ..base.clone()
    };
    let sealed = envelope::seal(ObjectKind::Manifest, &m).expect("seal manifest");
    store.put_if_absent(&tessera::paths::manifest_key("main", 3), sealed.into()).expect("put manifest");
    (index_bytes, t.elapsed().as_secs_f64())
}

/// One rank's start, in this process: open a loader on the latest version (global shuffle,
/// rank `rank` of `world`), take its first batch, then [`STEADY_BATCHES`] more. Prints one JSON
/// object.
fn measure(dir: &Path, layout: Layout, rank: u64, a: &Args) {
    let fs: Arc<dyn ObjectStore> =
        Arc::new(LocalFileSystem::new_with_prefix(std::fs::canonicalize(dir).expect("dir")).expect("local store"));
    let link = Arc::new(LinkStore::new(fs, Duration::from_millis(a.latency_ms), LINK_BYTES_PER_SEC));
    let counter = Arc::new(CountingStore::logging(link));
    let counts = counter.counts.clone();
    let store = Store::from_object_store(counter.clone(), "", true);
    // The process's own start (libtorch is linked into the bench binaries) is not the rank's.
    let rss0 = tessera_benches::procfs::status_bytes("VmRSS:");
    let threads = tessera_benches::procfs::watch_threads();
    let t = Instant::now();
    let cfg = LoaderConfig::new(format!("scale-{}", layout.name()))
        .with_batch_size(usize::try_from(a.batch).expect("batch fits usize"))
        .with_shuffle(match a.block {
            Some(k) => ShuffleMode::Block { window_fragments: usize::try_from(k).expect("window fits usize") },
            None => ShuffleMode::Global,
        })
        .with_seed(SHUFFLE_KEY)
        .with_rank(usize::try_from(rank).expect("rank"), usize::try_from(a.world).expect("world"));
    let mut cfg = cfg;
    if let Some(mb) = a.budget_mb {
        cfg = cfg.with_memory_budget(mb << 20);
    }
    if let Some(k) = a.max_requests {
        cfg.max_requests_in_flight = usize::try_from(k).expect("max requests fit usize");
    }
    let budget = cfg.memory_budget;
    let loader = Loader::open_store(&store, cfg, Arc::new(AlignedAllocator)).expect("open a loader");
    let open_s = t.elapsed().as_secs_f64();
    let open_counts = counts.snapshot();
    let total_rows = loader.dataset().row_count();
    let mut epoch = loader.epoch(0).expect("an epoch");
    let first = epoch.next().expect("a first batch").expect("the first batch");
    let first_s = t.elapsed().as_secs_f64();
    let c = counts.snapshot();
    let gets = counter.gets();
    let data_gets = gets.iter().filter(|(p, _)| p.starts_with("data/")).count() as u64;
    let peak_first = peak_rss();
    let threads_first = threads.peak();
    let steady_t = Instant::now();
    let mut samples = 0usize;
    for b in epoch.by_ref().take(STEADY_BATCHES) {
        samples += b.expect("a batch").rows.len();
    }
    let steady_s = steady_t.elapsed().as_secs_f64();
    drop((first, epoch));
    let io = loader.io_stats();
    let threads_steady = threads.peak();
    drop(threads);
    // Rank 0 of a tree also opens the whole version as `Dataset::open_at` does (every node, a
    // level or a chunk of leaves at a time): what a reader of every fragment pays. Up to
    // WHOLE_OPEN_MAX fragments: the records of 10^8 take more memory than this machine has.
    let fragments = loader.dataset().manifest().next_fragment_id;
    let eager = (layout == Layout::Tree && rank == 0 && fragments <= WHOLE_OPEN_MAX).then(|| {
        let before = counts.snapshot();
        let t = Instant::now();
        let ds = Dataset::open_at(&store, &At::Latest, Limits::default()).expect("open whole tree");
        let s = t.elapsed().as_secs_f64();
        let after = counts.snapshot();
        json!({"whole_open_s": s, "whole_open_requests": after[0] - before[0], "fragments": ds.fragments().len()})
    });
    let requests = c[0] + c[4];
    let out = json!({
        "layout": layout.name(), "rank": rank, "rows": total_rows,
        "open_s": open_s, "open_requests": open_counts[0] + open_counts[4], "open_bytes": open_counts[1],
        "first_batch_s": first_s,
        "requests_before_first_batch": requests,
        "metadata_requests_before_first_batch": requests - data_gets,
        "data_requests_before_first_batch": data_gets,
        "bytes_before_first_batch": c[1],
        "memory_budget_mb": budget as f64 / 1e6,
        "peak_rss_mb": peak_first as f64 / 1e6,
        "rss_at_start_mb": rss0 as f64 / 1e6,
        "peak_rss_over_start_mb": peak_first.saturating_sub(rss0) as f64 / 1e6,
        "steady_samples_per_s": samples as f64 / steady_s,
        "threads_peak_before_first_batch": threads_first,
        "threads_peak": threads_steady,
        "depth": io.depth,
        "in_flight_limit": io.in_flight_limit,
        "whole_open": eager,
    });
    println!("{out}");
}

/// The one-row append on the dataset at `dir`, every request `latency_ms` away: requests,
/// bytes written and time of the commit.
fn append(dir: &Path, layout: Layout, node_bytes: u64, latency_ms: u64) -> Value {
    let fs: Arc<dyn ObjectStore> = Arc::new(
        LocalFileSystem::new_with_prefix(std::fs::canonicalize(dir).expect("dir")).expect("local").with_fsync(false),
    );
    let link = Arc::new(LinkStore::new(fs, Duration::from_millis(latency_ms), LINK_BYTES_PER_SEC));
    let counter = Arc::new(CountingStore::new(link));
    let counts = counter.counts.clone();
    let store = Store::from_object_store(counter, "", true);
    let mut samples = Vec::new();
    for i in 0..3 {
        // A tree's writer opens lazily (the manifest and the root), as a loader rank does.
        let base = match layout {
            Layout::Tree => Dataset::open_lazy(&store, &At::Latest, Limits::default()).expect("open base").0,
            Layout::Log => Dataset::open_at(&store, &At::Latest, Limits::default()).expect("open base"),
        };
        let before = counts.snapshot();
        let t = Instant::now();
        base.append(&rows(-1 - i, 1), "one more fragment", options(layout, node_bytes)).expect("append");
        let s = t.elapsed().as_secs_f64();
        let after = counts.snapshot();
        samples.push((s, std::array::from_fn::<u64, 5, _>(|k| after[k] - before[k])));
    }
    samples.sort_by(|x, y| x.0.total_cmp(&y.0));
    let (s, c) = samples[1];
    json!({"commit_s": s, "commit_gets": c[0], "commit_puts": c[2], "commit_bytes_written": c[3]})
}

/// Runs each of `ranks` in a process of its own, one after another, or all at once with
/// `--together` (real ranks sharing the machine, the store and its link).
fn run_ranks(dir: &Path, layout: Layout, ranks: &[u64], a: &Args) -> Vec<Value> {
    let exe = std::env::current_exe().expect("own path");
    let spawn = |rank: u64| {
        std::process::Command::new(&exe)
            .args(["--measure", &dir.to_string_lossy(), layout.name(), &rank.to_string()])
            .args(["--latency-ms", &a.latency_ms.to_string(), "--batch", &a.batch.to_string()])
            .args(["--world", &a.world.to_string()])
            .args(a.budget_mb.map(|m| ["--budget-mb".to_string(), m.to_string()]).into_iter().flatten())
            .args(a.max_requests.map(|k| ["--max-requests".to_string(), k.to_string()]).into_iter().flatten())
            .args(a.block.map(|k| ["--block".to_string(), k.to_string()]).into_iter().flatten())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run a rank")
    };
    let finish = |rank: u64, child: std::process::Child| -> Value {
        let out = child.wait_with_output().expect("a rank's output");
        assert!(out.status.success(), "rank {rank}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(String::from_utf8_lossy(&out.stdout).trim().as_bytes()).expect("rank json")
    };
    if a.together {
        let children: Vec<_> = ranks.iter().map(|&r| (r, spawn(r))).collect();
        children.into_iter().map(|(r, c)| finish(r, c)).collect()
    } else {
        ranks.iter().map(|&r| finish(r, spawn(r))).collect()
    }
}

fn main() {
    let (a, measuring) = match parse() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("scale: {e}");
            std::process::exit(2);
        }
    };
    if let Some((dir, layout, rank)) = measuring {
        measure(&dir, layout, rank, &a);
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = a.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let mut sizes = Vec::new();
    let mut f = 1000u64;
    while f <= a.max_fragments {
        sizes.push(f);
        f *= 10;
    }
    let fresh: Vec<(Layout, f64)> = [Layout::Tree, Layout::Log]
        .into_iter()
        .map(|layout| {
            let dir = root.join(format!("fresh-{}", layout.name()));
            build(&dir, layout, 1, a.rows_per_fragment, a.node_bytes);
            let v = append(&dir, layout, a.node_bytes, a.latency_ms);
            (layout, v["commit_s"].as_f64().unwrap_or(f64::NAN))
        })
        .collect();
    let mut rows_out: Vec<Value> = Vec::new();
    for &fragments in &sizes {
        for layout in [Layout::Tree, Layout::Log] {
            if layout == Layout::Log && fragments > a.log_max_fragments {
                continue;
            }
            let dir = root.join(format!("{}-{fragments}", layout.name()));
            let (index_bytes, build_s) = build(&dir, layout, fragments, a.rows_per_fragment, a.node_bytes);
            let wanted: Vec<u64> = a.ranks.iter().map(|&r| r % a.world).collect();
            let ranks = run_ranks(&dir, layout, &wanted, &a);
            let worst = |k: &str| ranks.iter().filter_map(|r| r[k].as_f64()).fold(0.0, f64::max);
            let commit = append(&dir, layout, a.node_bytes, a.latency_ms);
            let fresh_s = fresh.iter().find(|(l, _)| *l == layout).map_or(f64::NAN, |x| x.1);
            let whole = ranks.iter().find_map(|r| r["whole_open"].as_object().cloned());
            let row = json!({
                "whole_open": whole,
                "layout": layout.name(), "fragments": fragments, "rows": fragments * a.rows_per_fragment,
                "shuffle": a.block.map_or_else(|| "global".to_string(), |k| format!("block({k})")),
                "index_bytes": index_bytes, "build_s": build_s, "latency_ms": a.latency_ms,
                "open_s_max": worst("open_s"), "first_batch_s_max": worst("first_batch_s"),
                "requests_before_first_batch_max": worst("requests_before_first_batch"),
                "metadata_requests_before_first_batch_max": worst("metadata_requests_before_first_batch"),
                "bytes_before_first_batch_max": worst("bytes_before_first_batch"),
                "steady_samples_per_s_min": ranks.iter().filter_map(|r| r["steady_samples_per_s"].as_f64()).fold(f64::INFINITY, f64::min),
                "threads_peak_max": worst("threads_peak"),
                "memory_budget_mb": ranks.first().map_or(Value::Null, |r| r["memory_budget_mb"].clone()),
                "peak_rss_mb_max": worst("peak_rss_mb"),
                "peak_rss_over_start_mb_max": worst("peak_rss_over_start_mb"),
                "append": commit, "append_commit_ratio": commit["commit_s"].as_f64().unwrap_or(f64::NAN) / fresh_s,
                "ranks": ranks,
            });
            if a.json {
                println!("{row}");
            } else {
                println!(
                    "{:<4} {:>9} fragments {:>12} rows: open {:>7.3} s, first batch {:>7.3} s, {:>5} requests \
                     ({} metadata), {:>11} B read, peak RSS {:>8.1} MB over start, {:>7.0} samples/s after, {} threads at most; \
                     append {:>6.3} s ({:.2}x fresh), {:>8} B written{}",
                    layout.name(),
                    fragments,
                    fragments * a.rows_per_fragment,
                    worst("open_s"),
                    worst("first_batch_s"),
                    worst("requests_before_first_batch"),
                    worst("metadata_requests_before_first_batch"),
                    worst("bytes_before_first_batch"),
                    worst("peak_rss_over_start_mb"),
                    row["steady_samples_per_s_min"].as_f64().unwrap_or(f64::NAN),
                    row["threads_peak_max"],
                    commit["commit_s"].as_f64().unwrap_or(f64::NAN),
                    row["append_commit_ratio"].as_f64().unwrap_or(f64::NAN),
                    commit["commit_bytes_written"],
                    row["whole_open"].as_object().map_or(String::new(), |w| format!(
                        "; whole tree read {:.3} s, {} requests",
                        w["whole_open_s"].as_f64().unwrap_or(f64::NAN),
                        w["whole_open_requests"]
                    )),
                );
            }
            rows_out.push(row);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    if let Some(summary) = summary(&rows_out) {
        println!("{summary}");
    }
}

/// The issue's summary line, over the tree rows (`None` without any).
fn summary(rows_out: &[Value]) -> Option<Value> {
    let trees: Vec<&Value> = rows_out.iter().filter(|r| r["layout"] == "tree").collect();
    let (Some(first), Some(last)) = (trees.first(), trees.last()) else { return None };
    let rss = |r: &Value| r["peak_rss_over_start_mb_max"].as_f64().unwrap_or(f64::NAN);
    let summary = json!({"summary": {
        "layout": "tree", "shuffle": last["shuffle"],
        "rows_max": last["rows"], "fragments_max": last["fragments"],
        "rss_over_budget_mb_at_max": last["peak_rss_mb_max"].as_f64().unwrap_or(f64::NAN)
            - last["memory_budget_mb"].as_f64().unwrap_or(f64::NAN),
        "peak_rss_over_start_mb_at_max": rss(last),
        "rss_growth_1e6_to_max": rss(last) / rss(first),
        "first_batch_s_at_max": last["first_batch_s_max"],
        "requests_before_first_batch_at_max": last["requests_before_first_batch_max"],
        "metadata_requests_before_first_batch_at_max": last["metadata_requests_before_first_batch_max"],
        "steady_samples_per_s_at_max": last["steady_samples_per_s_min"],
        "append_commit_ratio_at_max": last["append_commit_ratio"],
        "append_commit_bytes_at_max": last["append"]["commit_bytes_written"],
    }});
    Some(summary)
}
