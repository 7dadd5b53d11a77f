//! `tessera bench`: the loader's throughput on a dataset version (samples/s, MB/s, storage
//! requests and bytes per epoch), against the raw `read()` limit of the same files when the
//! dataset is a local directory.

use std::fmt::Write as _;

use serde_json::json;
use tessera_loader_tch::throughput::{measure, raw_read_limit};
use tessera_loader_tch::{Loader, LoaderConfig, LoaderError, ShuffleMode};

use super::{AtArgs, Ctx, DatasetArg, emit, emit_json, open_store};
use crate::error::{CliError, CliResult, Exit};

/// Shuffle modes `--shuffle` accepts.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(crate) enum Shuffle {
    /// An exact global permutation.
    Global,
    /// Chunk-local block shuffle (`--window` fragments at a time).
    Block,
    /// Sequential.
    None,
}

/// Arguments of `tessera bench`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    ds: DatasetArg,
    #[command(flatten)]
    at: AtArgs,
    /// Columns to load (comma-separated; default: all).
    #[arg(long, value_delimiter = ',')]
    columns: Vec<String>,
    /// Samples per batch.
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    /// Shuffle mode.
    #[arg(long, value_enum, default_value = "global")]
    shuffle: Shuffle,
    /// Fragments per block-shuffle window.
    #[arg(long, default_value_t = 4)]
    window: usize,
    /// Loader worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Untimed warm-up epochs before the timed ones (0 from a bucket: the first epoch is the
    /// cold one, which is the figure wanted).
    #[arg(long, default_value_t = 1)]
    warmup: u64,
    /// Timed epochs (after the warm-up).
    #[arg(long, default_value_t = 2)]
    epochs: u64,
    /// A node-local disk cache for an object store's data files (`LoaderConfig::with_cache_dir`).
    #[arg(long, requires = "cache_mib")]
    cache_dir: Option<std::path::PathBuf>,
    /// The disk cache's bound in MiB.
    #[arg(long, requires = "cache_dir")]
    cache_mib: Option<u64>,
    /// Skip page checksum verification.
    #[arg(long)]
    no_verify: bool,
    /// Loader memory budget in MiB.
    #[arg(long, default_value_t = 1024)]
    memory_mib: u64,
}

fn loader_error(e: &LoaderError) -> CliError {
    let exit = if e.is_data_error() { Exit::DataFault } else { Exit::Other };
    CliError::new(exit, e.to_string())
}

pub(crate) fn run(ctx: Ctx, a: &Args) -> CliResult<Exit> {
    let location = a.ds.location()?;
    open_store(&location)?; // a missing local path is `not found`, not created
    let shuffle = match a.shuffle {
        Shuffle::Global => ShuffleMode::Global,
        Shuffle::Block => ShuffleMode::Block { window_fragments: a.window },
        Shuffle::None => ShuffleMode::None,
    };
    let mut cfg = LoaderConfig::new(location.clone())
        .with_batch_size(a.batch_size)
        .with_shuffle(shuffle)
        .with_workers(a.workers)
        .with_memory_budget(a.memory_mib << 20);
    cfg.at = a.at.at();
    cfg.verify_checksums = !a.no_verify;
    if !a.columns.is_empty() {
        cfg = cfg.with_columns(&a.columns);
    }
    if let (Some(dir), Some(mib)) = (&a.cache_dir, a.cache_mib) {
        cfg = cfg.with_cache_dir(dir, mib << 20);
    }
    let opening = std::time::Instant::now();
    let loader = Loader::open(cfg).map_err(|e| loader_error(&e))?;
    let open_seconds = opening.elapsed().as_secs_f64();
    ctx.info(&format!(
        "bench {location} v{}: {} rows, batch {}, {:?}, {} worker(s), checksums {}",
        loader.version(),
        loader.row_count(),
        a.batch_size,
        shuffle,
        a.workers,
        if a.no_verify { "off" } else { "on" }
    ));
    let t = measure(&loader, a.warmup, a.epochs.max(1)).map_err(|e| loader_error(&e))?;
    let first_batch = t.first_batch.map(|d| open_seconds + d.as_secs_f64());
    let cache = loader.io_stats().cache;
    let raw = raw_read_limit(&loader, 2).ok();
    let per_epoch = |n: u64| n / t.epochs.max(1);
    let raw_rate = raw.map(|(_, secs)| loader.row_count() as f64 / secs.as_secs_f64());
    if ctx.json {
        emit_json(&json!({
            "dataset": location, "version": loader.version(), "rows": loader.row_count(),
            "epochs": t.epochs, "samples": t.samples, "seconds": t.elapsed.as_secs_f64(),
            "samples_per_sec": t.samples_per_sec(), "tensor_mb_per_sec": t.tensor_mb_per_sec(),
            "requests_per_epoch": per_epoch(t.requests), "bytes_read_per_epoch": per_epoch(t.storage_bytes),
            "retries": t.retries, "memory_high_water": t.memory.high_water, "memory_budget": t.memory.budget,
            "raw_read_samples_per_sec": raw_rate,
            "raw_read_mb_per_sec": raw.map(|(b, secs)| b as f64 / 1e6 / secs.as_secs_f64()),
            "epoch_seconds": t.epoch_times.iter().map(std::time::Duration::as_secs_f64).collect::<Vec<_>>(),
            "open_seconds": open_seconds, "first_batch_seconds": first_batch,
            "cache_hits": cache.hits, "cache_misses": cache.misses, "cache_direct": cache.direct, "cache_read_bytes": cache.read_bytes,
            "cache_written_bytes": cache.written_bytes,
            "epoch_storage_bytes": t.epoch_storage_bytes, "tensor_bytes_per_epoch": per_epoch(t.tensor_bytes),
        }));
    } else {
        let mut out = format!(
            "loader: {:.0} samples/s, {:.0} MB/s of tensors ({} samples in {:.2} s)\n\
             storage: {} requests and {:.1} MB per epoch, {} retries\n\
             memory: high-water {:.1} MiB of a {:.0} MiB budget\n\
             epochs: {} s; first batch {} s after the start (open {open_seconds:.2} s)\n",
            t.samples_per_sec(),
            t.tensor_mb_per_sec(),
            t.samples,
            t.elapsed.as_secs_f64(),
            per_epoch(t.requests),
            per_epoch(t.storage_bytes) as f64 / 1e6,
            t.retries,
            t.memory.high_water as f64 / f64::from(1 << 20),
            t.memory.budget as f64 / f64::from(1 << 20),
            t.epoch_times.iter().map(|d| format!("{:.2}", d.as_secs_f64())).collect::<Vec<_>>().join(", "),
            first_batch.map_or_else(|| "–".to_string(), |s| format!("{s:.2}")),
        );
        if cache.hits + cache.misses > 0 {
            let _ = writeln!(
                out,
                "disk cache: {} hits, {} misses, {:.1} MB read from it",
                cache.hits,
                cache.misses,
                cache.read_bytes as f64 / 1e6
            );
        }
        if let (Some((bytes, secs)), Some(rate)) = (raw, raw_rate) {
            let _ = writeln!(
                out,
                "raw read() of the same files: {rate:.0} samples/s, {:.0} MB/s; the loader runs at {:.0}% of it",
                bytes as f64 / 1e6 / secs.as_secs_f64(),
                100.0 * t.samples_per_sec() / rate
            );
        }
        emit(&out);
    }
    Ok(Exit::Ok)
}
