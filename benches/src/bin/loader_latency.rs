//! Latency hiding: the mm224 workload (batch 64, all four columns, checksums on, default
//! loader settings: 2 workers, self-tuned depth, 1 GiB budget) read from local files and
//! through the object-store read path with 0, 20 and 100 ms added to every request, in global
//! and block shuffle, each row against local `pread` with global shuffle in the same run.
//!
//! The "store" rows read `object_store`'s local file system behind the testkit's
//! fault-injecting wrapper (latency only), so they measure the loader, not a server; that
//! file system opens and `fstat`s every range GET on tokio's blocking pool, which at 100 ms
//! runs to about 180 threads. The "memory" rows read the same files copied into
//! `object_store`'s in-memory store behind the same wrapper: requests that cost nothing but
//! their latency, with bodies streamed as from a bucket, so the loader's own costs show. With the
//! benchmark HTTP server running (`scripts/benchserver.sh start`, then `eval
//! "$(scripts/benchserver.sh env)"`: `TESSERA_BENCH_HTTP`), the dataset is also read from it
//! through a loopback proxy adding 0 and 20 ms per request; with `--s3`, from the S3 test
//! server (`scripts/servers.sh`; moto serves large ranges at a few MB/s, so those rows are
//! bound by the server).
//!
//! Every row runs in a child process of its own, so its peak resident set (`VmHWM`) is the
//! row's own. A row reports the first epoch of a fresh loader (cold: footers and indexes
//! read, depth not yet measured) and two more epochs (warm), samples/s and the ratio of the
//! warm rate to local global-shuffle `pread`, storage requests per sample, bytes read per
//! byte delivered, the loader's accounted memory high-water mark and the depth it ran at.
//!
//! `cargo run --release -p tessera-benches --bin loader_latency -- [ROWS] [--json] [--s3]`
//! (ROWS defaults to 10,000; a few hundred make a quick check). `--json` prints one object per
//! row and a last `{"summary": {...}}` line; `lz4_vs_none` comes from the `codecs` bench
//! binary and `ragged_packed_vs_read` from the `ragged` one, run next to this one when they
//! are built (`null` otherwise).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tessera::{Compression, Store};
use tessera_benches::mm224;
use tessera_benches::procfs::{files_under, status_bytes, watch_threads};
use tessera_loader_tch::throughput::{Throughput, measure};
use tessera_loader_tch::{Loader, LoaderConfig, ShuffleMode};
use tessera_testkit::{FaultConfig, FaultyStore, Latency, LatencyProxy, ProxyConfig, servers};

/// A `/proc/self/status` field in MiB.
fn status_mb(field: &str) -> f64 {
    status_bytes(field) as f64 / f64::from(1 << 20)
}

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The loader's default memory budget, which every row runs at.
const BUDGET: u64 = 1 << 30;

/// One measured row: where the bytes come from, the added latency and the shuffle.
#[derive(Clone, Debug)]
struct Spec {
    source: &'static str,
    ms: u64,
    block: bool,
}

impl Spec {
    fn label(&self) -> String {
        let shuffle = if self.block { "block(4)" } else { "global" };
        match self.source {
            "local" => format!("local files, {shuffle}"),
            s => format!("{s} +{} ms, {shuffle}", self.ms),
        }
    }
}

/// The loader settings of every row: the defaults, batch 64, checksums on.
fn config(location: &str, block: bool) -> LoaderConfig {
    let shuffle = if block { ShuffleMode::Block { window_fragments: 4 } } else { ShuffleMode::Global };
    LoaderConfig::new(location).with_batch_size(64).with_seed(3).with_shuffle(shuffle)
}

/// Measures one row in this process and returns it as JSON (without the ratios).
fn run_row(spec: &Spec, dir: &Path) -> BenchResult<Value> {
    // Warm libtorch and the allocator before the baseline.
    let _ = tch::Tensor::zeros([1024], (tch::Kind::Uint8, tch::Device::Cpu)).sum(tch::Kind::Int64);
    let loc = dir.to_str().unwrap_or_default().to_string();
    let cfg = config(&loc, spec.block);
    let (store, gets): (Option<Store>, Box<dyn Fn() -> u64>) = match spec.source {
        "local" => (None, Box::new(|| 0)),
        "store" | "memory" => {
            let fs: Arc<dyn object_store::ObjectStore> = if spec.source == "store" {
                Arc::new(object_store::local::LocalFileSystem::new_with_prefix(std::fs::canonicalize(dir)?)?)
            } else {
                in_memory(dir)?
            };
            let latency = Latency::new(Duration::from_millis(spec.ms), Duration::ZERO);
            let faulty = Arc::new(FaultyStore::new(fs, FaultConfig { get_latency: latency, ..FaultConfig::seeded(1) }));
            let counts = faulty.clone();
            (
                Some(Store::from_object_store(faulty, "", true)),
                Box::new(move || counts.counts.gets.load(Ordering::Relaxed)),
            )
        }
        "http" | "s3" => {
            let (store, proxy) = remote_store(spec, dir)?;
            let proxy = Arc::new(proxy);
            (Some(store), Box::new(move || proxy.stats.requests.load(Ordering::Relaxed)))
        }
        other => return Err(format!("unknown source {other}").into()),
    };
    // After the store: a "memory" row's copy of the dataset is resident before the loader is.
    let rss_base = status_mb("VmRSS:");
    let threads = watch_threads();
    let loader = match &store {
        Some(s) => Loader::open_store(s, cfg)?,
        None => Loader::open(cfg)?,
    };
    let cold = measure(&loader, 0, 1)?;
    let before = gets();
    let warm = measure(&loader, 0, 2)?;
    let gets = (gets() - before) as f64 / warm.samples.max(1) as f64;
    let per = |t: &Throughput| {
        json!({
            "samples_per_s": t.samples_per_sec().round(),
            "requests_per_sample": t.requests as f64 / t.samples.max(1) as f64,
            "read_per_delivered": t.storage_bytes as f64 / t.tensor_bytes.max(1) as f64,
        })
    };
    Ok(json!({
        "row": spec.label(),
        "source": spec.source,
        "added_ms": spec.ms,
        "shuffle": if spec.block { "block" } else { "global" },
        "rows": warm.samples / warm.epochs.max(1),
        "samples_per_s": warm.samples_per_sec().round(),
        "cold": per(&cold),
        "warm": per(&warm),
        "gets_per_sample": if spec.source == "local" { Value::Null } else { json!(gets) },
        "depth": loader.io_stats().depth,
        "retries": loader.io_stats().retries,
        "in_flight_limit": loader.io_stats().in_flight_limit,
        "accounted_high_water_mb": warm.memory.high_water.max(cold.memory.high_water) as f64 / f64::from(1 << 20),
        "peak_rss_mb": status_mb("VmHWM:"),
        "threads_peak": threads.peak(),
        "rss_before_loader_mb": rss_base,
        "budget_mb": BUDGET >> 20,
    }))
}

/// The store of an `http` or `s3` row, behind a loopback proxy adding the row's latency.
fn remote_store(spec: &Spec, dir: &Path) -> BenchResult<(Store, LatencyProxy)> {
    tessera::store::install_crypto_provider();
    let per_request = Latency::new(Duration::from_millis(spec.ms), Duration::ZERO);
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
    if spec.source == "http" {
        let base = std::env::var("TESSERA_BENCH_HTTP")?;
        let server = base.trim_start_matches("http://").trim_end_matches('/').parse()?;
        let proxy = LatencyProxy::start(server, ProxyConfig { per_request, ..ProxyConfig::default() })?;
        let options = object_store::ClientOptions::new().with_allow_http(true);
        let http =
            object_store::http::HttpBuilder::new().with_url(proxy.endpoint()).with_client_options(options).build()?;
        return Ok((Store::from_object_store(Arc::new(http), &name, false), proxy));
    }
    let (Some(base), Some(server)) = (servers::s3_base(), servers::s3_server_addr()) else {
        return Err("no S3 test server: run `scripts/servers.sh start` and `eval \"$(scripts/servers.sh env)\"`".into());
    };
    let url = format!("{base}/{}", servers::unique("mm224-latency"));
    let remote = Store::open(&url)?;
    let mut files = Vec::new();
    files_under(dir, dir, &mut files)?;
    for (key, path) in &files {
        remote.put_if_absent(key, Bytes::from(std::fs::read(path)?))?;
    }
    let prefix = url.splitn(4, '/').nth(3).unwrap_or_default().to_string();
    let proxy = LatencyProxy::start(server, ProxyConfig { per_request, ..ProxyConfig::default() })?;
    let s3 = object_store::aws::AmazonS3Builder::from_env().with_url(&base).with_endpoint(proxy.endpoint()).build()?;
    Ok((Store::from_object_store(Arc::new(s3), &prefix, true), proxy))
}

/// Runs one row in a child process (its own peak RSS) and parses its JSON line.
fn child(spec: &Spec, rows: usize) -> BenchResult<Value> {
    let exe = std::env::current_exe()?;
    let out = Command::new(exe)
        .args(["--row", spec.source, &spec.ms.to_string(), if spec.block { "block" } else { "global" }])
        .arg(rows.to_string())
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    match (out.status.success(), line) {
        (true, Some(l)) => Ok(serde_json::from_str(l)?),
        _ => Err(format!("row {} failed: {}", spec.label(), String::from_utf8_lossy(&out.stderr).trim()).into()),
    }
}

/// The `summary` figure `key` of a sibling bench binary (`codecs`, `ragged`) run with
/// `args --json`, if that binary is built.
fn sibling_summary(bin: &str, args: &[String], key: &str) -> Option<f64> {
    let exe = std::env::current_exe().ok()?.with_file_name(bin);
    if !exe.exists() {
        eprintln!("{key}: no {bin} binary next to this one (build it: --bin {bin}); null");
        return None;
    }
    let out = Command::new(exe).args(args).arg("--json").output().ok()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last: Value = serde_json::from_str(stdout.lines().rev().find(|l| l.contains("\"summary\""))?).ok()?;
    last["summary"][key].as_f64()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// The dataset under `dir`, copied into `object_store`'s in-memory store: a backend whose
/// requests cost next to nothing but the added latency (no system call, no thread hop), so
/// its rows show what the loader itself costs on the streamed-body path.
fn in_memory(dir: &Path) -> BenchResult<Arc<dyn object_store::ObjectStore>> {
    let store = Arc::new(object_store::memory::InMemory::new());
    let mem = Store::from_object_store(store.clone(), "", true);
    let mut files = Vec::new();
    files_under(dir, dir, &mut files)?;
    for (key, path) in files {
        mem.put_if_absent(&key, Bytes::from(std::fs::read(&path)?))?;
    }
    Ok(store)
}

/// Every row to measure: local files, the latency-wrapped store and in-memory store at 0, 20
/// and 100 ms, the
/// benchmark HTTP server (when running) and the S3 test server (`--s3`) at 0 and 20 ms; each
/// in global and block shuffle.
fn specs(with_s3: bool) -> Vec<Spec> {
    let mut sources: Vec<(&'static str, Vec<u64>)> =
        vec![("local", vec![0]), ("store", vec![0, 20, 100]), ("memory", vec![0, 20, 100])];
    if std::env::var("TESSERA_BENCH_HTTP").is_ok_and(|s| !s.is_empty()) {
        sources.push(("http", vec![0, 20]));
    } else {
        eprintln!("no benchmark HTTP server (TESSERA_BENCH_HTTP unset): its rows are skipped");
    }
    if with_s3 {
        sources.push(("s3", vec![0, 20]));
    }
    let mut specs = Vec::new();
    for (source, latencies) in sources {
        for ms in latencies {
            for block in [false, true] {
                specs.push(Spec { source, ms, block });
            }
        }
    }
    specs
}

fn print_row(spec: &Spec, r: &Value) {
    println!(
        "{:<26} {:>9} {:>9} {:>7.2} {:>8.3} {:>8.2} {:>8} {:>6} {:>9.0} {:>9.0} {:>7}",
        spec.label(),
        r["cold"]["samples_per_s"],
        r["samples_per_s"],
        f(&r["of_local_pread"]),
        f(&r["warm"]["requests_per_sample"]),
        f(&r["warm"]["read_per_delivered"]),
        r["gets_per_sample"].as_f64().map_or_else(|| "-".into(), |g| format!("{g:.3}")),
        r["depth"],
        f(&r["accounted_high_water_mb"]),
        f(&r["peak_rss_mb"]),
        r["threads_peak"],
    );
}

/// The summary line: the goals' figures over every row measured (and, with `--json`, the
/// sibling benches' figures).
fn summary(results: &[Value], local_global: f64, rows: usize, siblings: bool, load: &str) -> Value {
    let rate = |source: &str, ms: u64, shuffle: &str| {
        results
            .iter()
            .find(|r| r["source"] == source && r["added_ms"] == ms && r["shuffle"] == shuffle)
            .map_or(f64::NAN, |r| f(&r["samples_per_s"]))
    };
    // Block against global: the lowest ratio over every source and latency measured.
    let block_vs_global = results
        .iter()
        .filter(|r| r["shuffle"] == "block")
        .map(|r| {
            let ms = r["added_ms"].as_u64().unwrap_or(0);
            f(&r["samples_per_s"]) / rate(r["source"].as_str().unwrap_or_default(), ms, "global")
        })
        .fold(f64::INFINITY, f64::min);
    // "memory" rows hold the dataset itself in the process: their peak is not the loader's.
    let over = results
        .iter()
        .filter(|r| r["source"] != "memory")
        .map(|r| f(&r["peak_rss_mb"]) - (BUDGET >> 20) as f64)
        .fold(f64::NEG_INFINITY, f64::max);
    let (lz4, ragged) = if siblings {
        (
            sibling_summary("codecs", &[rows.to_string()], "lz4_vs_none"),
            sibling_summary("ragged", &[], "ragged_packed_vs_read"),
        )
    } else {
        (None, None)
    };
    json!({"summary": {
        "global_20ms_ratio": rate("store", 20, "global") / local_global,
        "global_100ms_ratio": rate("store", 100, "global") / local_global,
        "block_vs_global": block_vs_global,
        "peak_rss_over_budget_mb": over,
        "lz4_vs_none": lz4,
        "ragged_packed_vs_read": ragged,
        "load_average": load.split_whitespace().next().unwrap_or_default(),
    }})
}

fn main() -> BenchResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--row") {
        let [_, source, ms, shuffle, rows] = args.as_slice() else {
            return Err("--row SOURCE MS SHUFFLE ROWS".into());
        };
        let source =
            ["local", "store", "memory", "http", "s3"].into_iter().find(|s| s == source).ok_or("unknown source")?;
        let spec = Spec { source, ms: ms.parse()?, block: shuffle == "block" };
        let rows: usize = rows.parse()?;
        println!("{}", run_row(&spec, &dataset_dir(rows))?);
        return Ok(());
    }
    let rows: usize = args.iter().find_map(|s| s.parse().ok()).unwrap_or(10_000);
    let as_json = args.iter().any(|a| a == "--json");
    let dir = dataset_dir(rows);
    let loc = dir.to_str().unwrap_or_default().to_string();
    if tessera::Dataset::open(&loc).map_or(true, |d| d.row_count() != rows as u64) {
        mm224::generate(&dir, rows, Compression::None)?;
    }
    let specs = specs(args.iter().any(|a| a == "--s3"));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    if !as_json {
        println!("mm224, {rows} rows, batch 64, 4 columns, checksums on, default settings; load {}", load.trim());
        println!(
            "{:<26} {:>9} {:>9} {:>7} {:>8} {:>8} {:>8} {:>6} {:>9} {:>9} {:>7}",
            "row",
            "cold/s",
            "warm/s",
            "of pread",
            "req/smp",
            "read/out",
            "GET/smp",
            "depth",
            "acct MiB",
            "VmHWM MiB",
            "threads"
        );
    }
    let mut results: Vec<Value> = Vec::new();
    let mut local_global = f64::NAN;
    for spec in &specs {
        let mut r = match child(spec, rows) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{e}");
                continue;
            }
        };
        if spec.source == "local" && !spec.block {
            local_global = f(&r["samples_per_s"]);
        }
        r["of_local_pread"] = json!(f(&r["samples_per_s"]) / local_global);
        if as_json {
            println!("{r}");
        } else {
            print_row(spec, &r);
        }
        results.push(r);
    }
    println!("{}", summary(&results, local_global, rows, as_json, &load));
    if !as_json {
        println!("(cold: the first epoch of a fresh loader; warm/s: two more epochs; of pread: warm rate over local");
        println!(" files with global shuffle in this run; req/smp: the loader's storage requests per sample;");
        println!(" read/out: bytes read per byte of delivered tensors; GET/smp: requests the store or proxy served");
        println!(" per sample; depth: the self-tuned depth of the last epoch (0 on local files); acct: the loader's");
        println!(" accounted high-water mark; VmHWM: the row's process peak resident set, libtorch included");
        println!(" (and, in the memory rows, the in-memory copy of the dataset); threads: the process's peak thread");
        println!(" count while the loader ran (sampled every 10 ms; tokio's blocking pool and libtorch's included);");
        println!(" --json adds lz4_vs_none from the codecs bench and ragged_packed_vs_read from the ragged bench)");
    }
    Ok(())
}

fn dataset_dir(rows: usize) -> PathBuf {
    PathBuf::from(format!("target/prefetch-mm224-{rows}"))
}
