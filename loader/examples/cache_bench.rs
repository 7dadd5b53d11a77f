//! The node-local disk cache's epochs against local files (issue 28): an mm224-like dataset
//! (150 KB incompressible samples, one page each, global shuffle, batch 64, checksums on) read
//! from local files, from an object store without the cache, and through the cache cold
//! (epoch 0) and warm (epochs 1 and 2).
//!
//! ```text
//! cargo run --release -p tessera-loader --example cache_bench -j1 [-- ROWS [DIR]]
//! ```
//! The object store is `object_store`'s file system over the same directory (no network: it
//! measures what the cache costs against reading local files, not a link); the dataset and
//! the cache live under DIR (default: a temporary directory), in the page cache after the
//! first pass. Prints one line per run and a JSON summary line.

use std::sync::Arc;
use std::time::Instant;

use tessera::{Batch as Rows, Column, ColumnData, DType, Dataset, Dim, Store, WriteOptions};
use tessera_loader::{AlignedAllocator, Loader, LoaderConfig, ShuffleMode};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const SAMPLE: usize = 150_000;

fn build(root: &str, rows: usize) -> Res<()> {
    let opts = WriteOptions { target_file_bytes: 64 << 20, ..WriteOptions::default() };
    let schema = tessera::Schema::new([
        Column::new("label", DType::I64, &[]),
        Column::new("image", DType::U8, &[Dim::Fixed(SAMPLE as u64)]),
    ])?;
    let mut w = Dataset::create(root, schema, &opts)?.writer(opts);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for start in (0..rows).step_by(200) {
        let n = 200.min(rows - start);
        let labels: Vec<i64> = (start..start + n).map(|i| (i % 1000) as i64).collect();
        let img: Vec<u8> = (0..n * SAMPLE)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let b = Rows::new()
            .with("label", ColumnData::from_scalars(&labels))?
            .with("image", ColumnData::from_fixed(&[SAMPLE as u64], &img)?)?;
        w.append(&b)?;
    }
    w.commit("bench")?;
    Ok(())
}

/// The process's CPU time (user + system) in seconds, from /proc (0 where unavailable).
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |r| r.1);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    (field(11) + field(12)) as f64 / 100.0
}

/// Samples per second over `epochs`, and CPU microseconds per sample.
fn run_epochs(loader: &Loader, epochs: std::ops::Range<u64>) -> Res<(f64, f64)> {
    let (t, c) = (Instant::now(), cpu_secs());
    let mut n = 0usize;
    for e in epochs {
        for b in loader.epoch(e)? {
            n += b?.rows.len();
        }
    }
    Ok((n as f64 / t.elapsed().as_secs_f64(), (cpu_secs() - c) * 1e6 / n as f64))
}

/// Samples per second of epoch `e`.
fn run(loader: &Loader, e: u64) -> Res<f64> {
    Ok(run_epochs(loader, e..e + 1)?.0)
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let rows: usize = args.get(1).map_or(Ok(4000), |a| a.parse())?;
    let tmp = tempfile::tempdir()?;
    let base = args.get(2).map_or_else(|| tmp.path().to_path_buf(), std::path::PathBuf::from);
    let data = base.join("ds");
    let root = data.to_str().ok_or("path")?.to_string();
    if !data.exists() {
        build(&root, rows)?;
    }
    let cache = base.join("cache");
    let cfg = LoaderConfig::new(&root).with_batch_size(64).with_shuffle(ShuffleMode::Global).with_seed(1);
    let fs: Arc<dyn object_store::ObjectStore> =
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(&data)?);
    let store = Store::from_object_store(fs, "", true);
    let cached_cfg = cfg.clone().with_cache_dir(&cache, 64 << 30);
    if std::env::var_os("CACHE_BENCH_WARM_ONLY").is_some() {
        // For profiles: only a fresh loader over the cache the last run left in DIR.
        let (rate, cpu) = run_epochs(&Loader::open_store(&store, cached_cfg, AlignedAllocator)?, 0..8)?;
        println!("cache warm (fresh loader), 8 epochs: {rate:.0} samples/s, {cpu:.0} CPU us/sample");
        return Ok(());
    }
    if std::env::var_os("CACHE_BENCH_LOCAL_ONLY").is_some() {
        // For profiles: the local files the warm cache is compared with.
        let (rate, cpu) = run_epochs(&Loader::open(cfg)?, 0..8)?;
        println!("local files, 8 epochs: {rate:.0} samples/s, {cpu:.0} CPU us/sample");
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(&cache);
    if std::env::var_os("CACHE_BENCH_COLD_ONLY").is_some() {
        // For profiles: only a cold epoch over an empty cache.
        let (rate, cpu) = run_epochs(&Loader::open_store(&store, cached_cfg, AlignedAllocator)?, 0..1)?;
        println!("cache cold, epoch 0: {rate:.0} samples/s, {cpu:.0} CPU us/sample");
        return Ok(());
    }

    let local = Loader::open(cfg.clone())?;
    run(&local, 0)?; // the dataset into the page cache
    let plain = Loader::open_store(&store, cfg, AlignedAllocator)?;
    let cached = Loader::open_store(&store, cached_cfg.clone(), AlignedAllocator)?;
    let (cold, cold_cpu) = run_epochs(&cached, 0..1)?;
    let cold_io = cached.io_stats();
    println!("cache cold, epoch 0: {cold:.0} samples/s, {cold_cpu:.0} CPU us/sample ({cold_io:?})");
    // A fresh loader over the warm cache: another rank of the node, or the next job.
    let fresh = Loader::open_store(&store, cached_cfg, AlignedAllocator)?;
    // Rounds of two epochs each, interleaved, so that a busy machine slows all alike.
    let names = ["local files", "object store, no cache", "cache warm (same loader)", "cache warm (fresh loader)"];
    let loaders = [&local, &plain, &cached, &fresh];
    let mut sums = [(0.0f64, 0.0f64); 4];
    let rounds = 3u64;
    for r in 0..rounds {
        for (k, l) in loaders.iter().enumerate() {
            let (rate, cpu) = run_epochs(l, 1 + 2 * r..3 + 2 * r)?;
            sums[k].0 += rate / rounds as f64;
            sums[k].1 += cpu / rounds as f64;
        }
    }
    for (name, (rate, cpu)) in names.iter().zip(sums) {
        println!("{name}: {rate:.0} samples/s, {cpu:.0} CPU us/sample");
    }
    let io = cached.io_stats();
    println!("cache warm: {io:?}; fresh loader: {:?}", fresh.io_stats());
    println!(
        "{{\"rows\": {rows}, \"local\": {:.0}, \"store\": {:.0}, \"cache_cold\": {cold:.0}, \"cache_warm\": {:.0}, \
         \"cache_warm_fresh\": {:.0}, \"warm_of_local\": {:.3}, \"warm_cpu_of_local\": {:.3}, \
         \"warm_store_requests\": {}}}",
        sums[0].0,
        sums[1].0,
        sums[2].0,
        sums[3].0,
        sums[2].0 / sums[0].0,
        sums[2].1 / sums[0].1,
        io.requests - cold_io.requests + fresh.io_stats().requests
    );
    Ok(())
}
