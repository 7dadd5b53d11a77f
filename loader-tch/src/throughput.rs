//! Measuring the loader: samples/s and MB/s of whole epochs, with the storage requests and
//! bytes behind them, and the raw `read()` limit of a local dataset to compare against.
//!
//! Used by `tessera bench` and the benchmarks in `benches/`; it is not on the training path.

use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{LoaderError, Result};
use crate::loader::Loader;
use tessera_loader::MemoryStats;

/// What [`measure`] saw over its epochs (all ranks' work this process did).
#[derive(Clone, Debug)]
pub struct Throughput {
    /// Epochs timed (after the warm-up epoch, if any).
    pub epochs: u64,
    /// Samples delivered, padding included.
    pub samples: u64,
    /// Batches delivered.
    pub batches: u64,
    /// Bytes of the delivered tensors (values, lengths, offsets, validity).
    pub tensor_bytes: u64,
    /// Wall time of the timed epochs.
    pub elapsed: Duration,
    /// Wall time of each timed epoch, in order: from a bucket the first epoch that reads a
    /// byte is the cold one, and with a disk cache the later ones are not.
    pub epoch_times: Vec<Duration>,
    /// From the call to [`measure`] to the first batch of the first epoch (warm-up or timed),
    /// the wait a training job sees before its first step once the loader is open.
    pub first_batch: Option<Duration>,
    /// Storage read calls during the timed epochs (one `get_ranges` or positioned read each).
    pub requests: u64,
    /// Bytes read from storage during the timed epochs.
    pub storage_bytes: u64,
    /// Bytes read from storage during each timed epoch, in order (with a disk cache, what
    /// the cache did not serve).
    pub epoch_storage_bytes: Vec<u64>,
    /// Transient failures retried during the timed epochs.
    pub retries: u64,
    /// The loader's memory accounting at the end.
    pub memory: MemoryStats,
}

impl Throughput {
    /// Samples per second.
    #[must_use]
    pub fn samples_per_sec(&self) -> f64 {
        self.samples as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Megabytes (10^6) of delivered tensors per second.
    #[must_use]
    pub fn tensor_mb_per_sec(&self) -> f64 {
        self.tensor_bytes as f64 / 1e6 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn numel_bytes(t: &tch::Tensor) -> u64 {
    (t.numel() * t.kind().elt_size_in_bytes()) as u64
}

/// Runs `warmup` untimed epochs, then `epochs` timed ones (epoch numbers continue, so every
/// epoch has its own order), draining every batch.
///
/// # Errors
/// The first error a batch carries.
pub fn measure(loader: &Loader, warmup: u64, epochs: u64) -> Result<Throughput> {
    let start = Instant::now();
    let mut first_batch = None;
    for e in 0..warmup {
        for batch in loader.epoch(e)? {
            batch?;
            first_batch.get_or_insert_with(|| start.elapsed());
        }
    }
    let io0 = loader.io_stats();
    let t = Instant::now();
    let (mut samples, mut batches, mut tensor_bytes) = (0u64, 0u64, 0u64);
    let (mut epoch_times, mut epoch_storage_bytes) = (Vec::new(), Vec::new());
    for e in warmup..warmup + epochs {
        let te = Instant::now();
        let bytes0 = loader.io_stats().bytes;
        for batch in loader.epoch(e)? {
            let batch = batch?;
            first_batch.get_or_insert_with(|| start.elapsed());
            samples += batch.len() as u64;
            batches += 1;
            for name in batch.names() {
                let c = batch.column(name)?;
                tensor_bytes += numel_bytes(&c.values);
                for t in [&c.lengths, &c.offsets, &c.valid].into_iter().flatten() {
                    tensor_bytes += numel_bytes(t);
                }
            }
        }
        epoch_times.push(te.elapsed());
        epoch_storage_bytes.push(loader.io_stats().bytes - bytes0);
    }
    let elapsed = t.elapsed();
    let io = loader.io_stats();
    Ok(Throughput {
        epochs,
        samples,
        batches,
        tensor_bytes,
        elapsed,
        epoch_times,
        first_batch,
        requests: io.requests - io0.requests,
        storage_bytes: io.bytes - io0.bytes,
        epoch_storage_bytes,
        retries: io.retries - io0.retries,
        memory: loader.memory_stats(),
    })
}

/// The raw read limit of a local dataset: `read()` of every data file the loader's version
/// references, whole, into one reused 1 MiB buffer; `passes` timed passes after one warm-up
/// pass. Returns (bytes per pass, best seconds of a pass).
///
/// # Errors
/// [`LoaderError::Config`] when the dataset is not a local directory; I/O errors.
pub fn raw_read_limit(loader: &Loader, passes: u32) -> Result<(u64, Duration)> {
    let root = Path::new(&loader.config().location);
    if !root.is_dir() {
        return Err(LoaderError::Config(format!(
            "the raw read limit needs a local directory, not {}",
            loader.config().location
        )));
    }
    let mut files: Vec<String> =
        loader.dataset().fragments().iter().flat_map(|f| f.fragment.files.iter().map(|d| d.path.clone())).collect();
    files.sort();
    files.dedup();
    let io = |path: &Path, e: std::io::Error| LoaderError::Storage {
        path: path.display().to_string(),
        attempts: 1,
        source: Box::new(e),
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut best = Duration::MAX;
    let mut bytes = 0;
    for pass in 0..=passes {
        let t = Instant::now();
        bytes = 0;
        for f in &files {
            let path = root.join(f);
            let mut file = std::fs::File::open(&path).map_err(|e| io(&path, e))?;
            loop {
                let n = file.read(&mut buf).map_err(|e| io(&path, e))?;
                if n == 0 {
                    break;
                }
                bytes += n as u64;
            }
        }
        if pass > 0 {
            best = best.min(t.elapsed());
        }
    }
    Ok((bytes, best))
}
