//! Latency hiding: loader throughput on the mm224 workload through the object-store read path
//! with 0, 20 and 100 ms added to every GET, against the same dataset read as local files.
//!
//! The object-store path is `object_store`'s local file system behind the testkit's
//! fault-injecting wrapper (latency only), so the figures measure the loader, not a server.
//! With `--s3`, the same rows are also read from the S3 test server (`scripts/servers.sh
//! start`, then `eval "$(scripts/servers.sh env)"`) through a loopback proxy adding the same
//! delays; moto serves range GETs of large objects slowly, so those rows are bound by the
//! server. Reports samples/s, the share of the local rate, storage calls (and HTTP requests
//! through the proxy) per epoch, bytes read per epoch and the loader's memory high-water mark.
//!
//! `cargo run --release -p tessera-benches --bin loader_latency -- [ROWS] [--s3] [WORKERS...]`

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use tessera::{Compression, Store};
use tessera_benches::mm224;
use tessera_loader_tch::throughput::{Throughput, measure};
use tessera_loader_tch::{Loader, LoaderConfig};
use tessera_testkit::{FaultConfig, FaultyStore, Latency, LatencyProxy, ProxyConfig, servers};

fn files_under(dir: &Path, base: &Path, out: &mut Vec<(String, PathBuf)>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            files_under(&p, base, out)?;
        } else if let Ok(rel) = p.strip_prefix(base) {
            out.push((rel.to_string_lossy().replace('\\', "/"), p.clone()));
        }
    }
    Ok(())
}

/// The loader settings: batch 64, global shuffle, checksums on; pipeline depth follows the
/// worker count (every worker needs a batch buffer to fill while the others wait on storage).
fn config(location: &str, workers: usize) -> LoaderConfig {
    let mut cfg = LoaderConfig::new(location).with_batch_size(64).with_seed(3).with_workers(workers);
    cfg.prefetch_batches = cfg.prefetch_batches.max(workers + 2);
    cfg
}

fn row(label: &str, workers: usize, cold: &Throughput, t: &Throughput, local: f64, http: Option<u64>) {
    println!(
        "{label:<22} {workers:>7} {:>9.0} {:>11.0} {:>8.0}% {:>9} {:>8.2} {:>9} {:>10.0} {:>9.2} {:>9.1} MiB",
        cold.samples_per_sec(),
        t.samples_per_sec(),
        100.0 * t.samples_per_sec() / local,
        t.requests / t.epochs,
        t.requests as f64 / t.samples.max(1) as f64,
        http.map_or_else(|| "-".to_string(), |n| (n / t.epochs).to_string()),
        t.storage_bytes as f64 / 1e6 / t.epochs as f64,
        t.storage_bytes as f64 / t.tensor_bytes.max(1) as f64,
        t.memory.high_water as f64 / f64::from(1 << 20),
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rows: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(2000);
    let with_s3 = args.iter().any(|a| a == "--s3");
    let mut worker_counts: Vec<usize> = args.iter().skip(1).filter_map(|s| s.parse().ok()).collect();
    if worker_counts.is_empty() {
        worker_counts = vec![2, 8, 16];
    }
    let dir = PathBuf::from(format!("target/mm224-latency-{rows}"));
    let loc = dir.to_str().unwrap_or_default().to_string();
    if tessera::Dataset::open(&loc).map_or(true, |d| d.row_count() != rows as u64) {
        mm224::generate(&dir, rows, Compression::None)?;
    }
    println!("mm224, {rows} rows, batch 64, global shuffle, checksums on; one cold epoch, two timed");
    println!(
        "{:<22} {:>7} {:>9} {:>11} {:>9} {:>9} {:>8} {:>9} {:>10} {:>9} {:>13}",
        "source",
        "workers",
        "cold/s",
        "samples/s",
        "of local",
        "calls",
        "calls/s.",
        "GETs",
        "MB read",
        "read/out",
        "peak memory"
    );
    let mut best_local = 0.0f64;
    for &w in &worker_counts {
        let loader = Loader::open(config(&loc, w))?;
        let cold = measure(&loader, 0, 1)?;
        let t = measure(&loader, 0, 2)?;
        best_local = best_local.max(t.samples_per_sec());
        row("local files", w, &cold, &t, t.samples_per_sec(), None);
    }
    let fs: Arc<dyn object_store::ObjectStore> =
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(std::fs::canonicalize(&dir)?)?);
    for ms in [0u64, 20, 100] {
        let latency = Latency::new(Duration::from_millis(ms), Duration::ZERO);
        let faulty =
            Arc::new(FaultyStore::new(fs.clone(), FaultConfig { get_latency: latency, ..FaultConfig::seeded(1) }));
        let store = Store::from_object_store(faulty.clone(), "", true);
        for &w in &worker_counts {
            let loader = Loader::open_store(&store, config(&loc, w))?;
            // The cold epoch (footers, indexes), then the store's GETs over the timed epochs.
            let cold = measure(&loader, 0, 1)?;
            let before = faulty.counts.gets.load(Ordering::Relaxed);
            let t = measure(&loader, 0, 2)?;
            let gets = faulty.counts.gets.load(Ordering::Relaxed) - before;
            row(&format!("object store +{ms} ms"), w, &cold, &t, best_local, Some(gets));
        }
    }
    if with_s3 {
        s3_rows(&dir, &worker_counts, best_local)?;
    }
    println!("(cold/s: samples/s of the first epoch of a fresh loader (footers and indexes read); then two");
    println!(" timed epochs; calls: the loader's storage requests per epoch (before this change on object stores: one");
    println!(" get_ranges call per file and wave); calls/s.: calls per sample delivered; GETs: range GETs");
    println!(" the object store served, or HTTP requests the proxy forwarded, per epoch; read/out: bytes");
    println!(" the loader counted as read per byte of delivered tensors; 'of local' compares with the best");
    println!(" local rate; peak memory is the loader's accounted high-water mark)");
    Ok(())
}

/// The S3 rows: upload the dataset, then read it through the latency proxy.
fn s3_rows(dir: &Path, worker_counts: &[usize], best_local: f64) -> Result<(), Box<dyn std::error::Error>> {
    let (Some(base), Some(server)) = (servers::s3_base(), servers::s3_server_addr()) else {
        eprintln!("no S3 test server: run `scripts/servers.sh start` and `eval \"$(scripts/servers.sh env)\"` first");
        std::process::exit(2);
    };
    let url = format!("{base}/{}", servers::unique("mm224-latency"));
    let remote = Store::open(&url)?;
    let mut files = Vec::new();
    files_under(dir, dir, &mut files)?;
    for (key, path) in &files {
        remote.put_if_absent(key, Bytes::from(std::fs::read(path)?))?;
    }
    let prefix = url.splitn(4, '/').nth(3).unwrap_or_default().to_string();
    for ms in [0u64, 20] {
        let per_request = Latency::new(Duration::from_millis(ms), Duration::ZERO);
        let proxy = LatencyProxy::start(server, ProxyConfig { per_request, ..ProxyConfig::default() })?;
        tessera::store::install_crypto_provider();
        let s3 =
            object_store::aws::AmazonS3Builder::from_env().with_url(&base).with_endpoint(proxy.endpoint()).build()?;
        let store = Store::from_object_store(Arc::new(s3), &prefix, true);
        for &w in worker_counts {
            let loader = Loader::open_store(&store, config(&url, w))?;
            // Warm up (footers, connections), then count the proxy's requests over the timed epochs.
            let cold = measure(&loader, 0, 1)?;
            let before = proxy.stats.requests.load(Ordering::Relaxed);
            let t = measure(&loader, 0, 2)?;
            let http = proxy.stats.requests.load(Ordering::Relaxed) - before;
            row(&format!("S3 (moto) +{ms} ms"), w, &cold, &t, best_local, Some(http));
        }
    }
    Ok(())
}
