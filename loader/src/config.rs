//! Loader configuration, and rank/world discovery from torchrun's environment variables.

use std::path::PathBuf;
use std::time::Duration;

use tessera::{At, Limits};

use crate::error::{LoaderError, Result};
use crate::mixture::Mixture;
use crate::sampler::ShuffleMode;
use crate::transform::{ColumnTransform, Transform};

/// Retries of transient storage errors: exponential backoff with full jitter.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables retrying).
    pub max_retries: u32,
    /// Backoff before the first retry.
    pub initial_backoff: Duration,
    /// Ceiling of one backoff.
    pub max_backoff: Duration,
    /// Growth factor per retry (≥ 1).
    pub multiplier: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 6,
            initial_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_secs(2),
            multiplier: 2.0,
        }
    }
}

impl RetryPolicy {
    /// The upper bound of the backoff before retry `retry` (0-based): `initial * multiplier^retry`,
    /// capped at `max_backoff`. The actual sleep is uniform in `[0, bound]` ("full jitter"), so
    /// ranks that failed together do not retry together.
    #[must_use]
    pub fn backoff_bound(&self, retry: u32) -> Duration {
        let factor = self.multiplier.max(1.0).powi(retry.min(64) as i32);
        let secs = (self.initial_backoff.as_secs_f64() * factor).min(self.max_backoff.as_secs_f64());
        Duration::from_secs_f64(secs.max(0.0))
    }
}

/// How the rows of a ragged column sit in its batch buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RaggedLayout {
    /// `[B, max d1, …]`: every row zero padded to the batch's largest (what a dense tensor
    /// needs; costs the padded bytes).
    #[default]
    Padded,
    /// The rows' values back to back (the layout of torch's jagged nested tensors) with
    /// `offsets [B + 1]` and per-row `shapes [B, ndim]`: one copy of the payload, no padding.
    Packed,
}

/// How ragged columns (a `Ragged` dim, or `utf8`/`bytes`) are handed out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaggedOptions {
    /// Padded columns: also produce an `i64 [B + 1]` offsets tensor, the element offsets the
    /// rows would have if packed back to back (row `i` has `offsets[i+1] - offsets[i]`
    /// elements). Packed columns always have offsets.
    pub offsets: bool,
    /// The layout of every ragged column not named in `columns`.
    pub layout: RaggedLayout,
    /// Per-column layouts that override `layout` (each name must be a projected ragged
    /// column).
    pub columns: Vec<(String, RaggedLayout)>,
}

impl RaggedOptions {
    /// Every ragged column packed.
    #[must_use]
    pub fn packed() -> Self {
        Self { layout: RaggedLayout::Packed, ..Self::default() }
    }

    /// The layout of column `name`.
    #[must_use]
    pub fn layout_of(&self, name: &str) -> RaggedLayout {
        self.columns.iter().rev().find(|(n, _)| n == name).map_or(self.layout, |&(_, l)| l)
    }
}

/// A node-local disk cache of the data-file bytes read from an object store
/// ([`LoaderConfig::with_cache_dir`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskCacheConfig {
    /// The cache directory, shared by every loader (process, rank) of the node that names it;
    /// created if missing. Best on a local file system (the cache relies on `flock`).
    pub dir: PathBuf,
    /// The most bytes of cached entries the directory holds, whatever the datasets (at least
    /// 4 MiB); the least recently used are evicted beyond it.
    pub max_bytes: u64,
}

/// Rank and world size of a data-parallel job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DistEnv {
    /// This process's rank, `0..world_size`.
    pub rank: usize,
    /// Number of processes.
    pub world_size: usize,
    /// Rank on this node: the CUDA device index a process-per-GPU job uses.
    pub local_rank: usize,
}

impl Default for DistEnv {
    fn default() -> Self {
        Self { rank: 0, world_size: 1, local_rank: 0 }
    }
}

impl DistEnv {
    /// Reads `RANK`, `WORLD_SIZE` and `LOCAL_RANK` as torchrun sets them. Unset variables
    /// default to a single process (rank 0 of 1, local rank 0).
    ///
    /// # Errors
    /// [`LoaderError::Config`] for a value that is not a number, `WORLD_SIZE` of 0, or
    /// `RANK >= WORLD_SIZE`.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// As [`DistEnv::from_env`] with a custom variable lookup (for tests and launchers).
    ///
    /// # Errors
    /// As [`DistEnv::from_env`].
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let num = |key: &str, default: usize| -> Result<usize> {
            match get(key) {
                None => Ok(default),
                Some(v) => v.trim().parse::<usize>().map_err(|_| {
                    LoaderError::config(format!("environment variable {key}={v:?} is not a non-negative integer"))
                }),
            }
        };
        let env = Self { rank: num("RANK", 0)?, world_size: num("WORLD_SIZE", 1)?, local_rank: num("LOCAL_RANK", 0)? };
        if env.world_size == 0 {
            return Err(LoaderError::config("WORLD_SIZE must be at least 1"));
        }
        if env.rank >= env.world_size {
            return Err(LoaderError::config(format!(
                "RANK {} must be less than WORLD_SIZE {}",
                env.rank, env.world_size
            )));
        }
        Ok(env)
    }
}

/// Everything the loader needs to know. Build with [`LoaderConfig::new`] and adjust fields.
///
/// Defaults: latest version of `main`, every column, batch 32, global shuffle, seed 0,
/// `drop_last = false` (the last global batch is padded by repeating rows from the start
/// of the epoch's order), rank 0 of 1, 2 workers, 6 batch buffers, 1 GiB memory budget,
/// checksums verified, bad samples are errors, CPU output.
#[derive(Clone, Debug)]
#[allow(clippy::struct_excessive_bools)] // independent switches, each documented
pub struct LoaderConfig {
    /// Dataset root: a local path or a store URL (`file://`, `s3://`, `gs://`, `az://`,
    /// `http(s)://`, `memory://`).
    pub location: String,
    /// Which version to read (pinned for the loader's lifetime).
    pub at: At,
    /// Read the rows of this view (SPEC.md §"Views") instead of a whole version: the view's
    /// rows of the version it pins, with every shuffle mode, sharding and resume as for a
    /// version. `at` must then be left at [`At::Latest`]: the view names its version.
    pub view: Option<String>,
    /// Column projection, in output order; `None` reads every column.
    pub columns: Option<Vec<String>>,
    /// Rows per batch on this rank.
    pub batch_size: usize,
    /// Epoch order; see [`ShuffleMode`] for the quality of each mode.
    pub shuffle: ShuffleMode,
    /// Seed of every random choice (order, transforms).
    pub seed: u64,
    /// Drop the incomplete last global batch instead of padding it (padding repeats rows
    /// from the start of the epoch's order, so every row is seen at least once).
    pub drop_last: bool,
    /// Data-parallel rank and world size.
    pub dist: DistEnv,
    /// Decode/assembly worker threads (≥ 1): the CPUs' worth of work the loader may use.
    /// Results never depend on it. On an object store more threads wait on round trips
    /// (the self-tuned depth, see the crate docs); `workers` still sizes the CPU work.
    pub workers: usize,
    /// Local files: batch buffers in the pipeline (ready + being filled), ≥ 2. Bounded by
    /// the budget. Object stores: the depth before the first fill is measured (then it
    /// tunes itself, within the budget).
    pub prefetch_batches: usize,
    /// Total bytes the loader may hold: batch buffers, fetch/decode buffers, the block
    /// shuffle window cache and per-file metadata.
    pub memory_budget: u64,
    /// Largest byte count one storage request may ask for (ranges are split above it), and
    /// the most bytes one worker has in flight: a batch's requests to an object store go out
    /// together in waves of at most this many bytes.
    pub max_fetch_bytes: u64,
    /// The most storage requests one filling thread has in flight at once (object stores).
    /// The default, 128, lets a batch of up to 128 randomly placed samples, one range GET
    /// each (a global shuffle over a bucket, where neighbours are rarely close enough to
    /// coalesce), go out in one round trip: at 32, mm224 (batch 64) took two, and an
    /// in-memory store at +100 ms per request delivered 12.0k samples/s against 17.7k at 128.
    /// Across the loader's threads,
    /// requests with streamed bodies (HTTP stores) are also held to a limit that adapts to
    /// the link: it grows while first-byte times stay near the idle round trip and shrinks
    /// while requests queue at the server ([`IoStats::in_flight_limit`](crate::IoStats::in_flight_limit)).
    pub max_requests_in_flight: usize,
    /// Object stores: two wanted byte ranges of a data file closer than this many bytes are
    /// read with one range GET (the gap is read and dropped). `None` (the default) measures
    /// it: the idle round trip (smallest recent first-byte time) × the transfer rate one
    /// request in flight gets, within 64 KiB..4 MiB, 1 MiB until measured, and unbounded for
    /// a store that answers with local file handles (`object_store`'s file system), whose
    /// gaps are never read. `Some(0)` coalesces only touching ranges.
    pub coalesce_gap_bytes: Option<u64>,
    /// Verify every page's CRC-32 (pages are then read whole). `false` lets uncompressed
    /// rows be read alone, which is much cheaper for big samples in a global shuffle.
    pub verify_checksums: bool,
    /// Replace samples whose stored bytes are corrupt by the next valid row of the epoch's
    /// order instead of failing; skipped samples are reported.
    pub skip_bad_samples: bool,
    /// Retries of transient storage errors.
    pub retry: RetryPolicy,
    /// Recycle batch buffers when a [`HostBatch`](crate::HostBatch) is dropped and nothing
    /// the adapter handed out shares them any more. `false` allocates fresh buffers for
    /// every batch.
    pub reuse_buffers: bool,
    /// Ragged output options.
    pub ragged: RaggedOptions,
    /// Reader limits for untrusted datasets.
    pub limits: Limits,
    /// Per-column augmentation, run on the filling threads into the batch slots
    /// ([`Transform`]; at most one entry per column). Checked when the loader opens.
    pub transforms: Vec<ColumnTransform>,
    /// Object stores: keep the data-file bytes read in a node-local disk cache, so later
    /// epochs (and the other ranks of the node) read them from disk. `None` (the default)
    /// reads the store every epoch. A local dataset directory never uses it.
    pub disk_cache: Option<DiskCacheConfig>,
    /// Read a mixture of sources ([`Mixture`]) instead of one dataset: `location`, `at` and
    /// `view` are then unused (`location` labels the loader). Every source must have the
    /// projected columns with one layout; each is read in its own global-shuffle order
    /// ([`ShuffleMode::Global`]) or sequentially ([`ShuffleMode::None`]).
    pub mixture: Option<Mixture>,
    /// Rank 0 appends the run's lineage record here ([`crate::lineage`]): its sources, order
    /// settings and a line per epoch started or resumed, from which `tessera lineage` lists
    /// the rows of any step and the steps that saw any row.
    pub lineage: Option<PathBuf>,
}

impl LoaderConfig {
    /// The defaults (see the type docs) for a dataset at `location`.
    #[must_use]
    pub fn new(location: impl Into<String>) -> Self {
        Self {
            location: location.into(),
            at: At::Latest,
            view: None,
            columns: None,
            batch_size: 32,
            shuffle: ShuffleMode::Global,
            seed: 0,
            drop_last: false,
            dist: DistEnv::default(),
            workers: 2,
            prefetch_batches: 6,
            memory_budget: 1 << 30,
            max_fetch_bytes: 16 << 20,
            max_requests_in_flight: 128,
            coalesce_gap_bytes: None,
            verify_checksums: true,
            skip_bad_samples: false,
            retry: RetryPolicy::default(),
            reuse_buffers: true,
            ragged: RaggedOptions::default(),
            limits: Limits::default(),
            transforms: Vec::new(),
            disk_cache: None,
            mixture: None,
            lineage: None,
        }
    }

    /// Records the run's lineage in `path` (rank 0 writes; see [`LoaderConfig::lineage`]).
    #[must_use]
    pub fn with_lineage(mut self, path: impl Into<PathBuf>) -> Self {
        self.lineage = Some(path.into());
        self
    }

    /// The defaults for a mixture of sources (see [`LoaderConfig::mixture`]).
    ///
    /// ```
    /// use tessera_loader::{LoaderConfig, MixSource, Mixture};
    ///
    /// let mix = Mixture::weighted([MixSource::new("/data/web"), MixSource::new("/data/code")], &[0.8, 0.2]);
    /// let config = LoaderConfig::for_mixture(mix).with_batch_size(64);
    /// assert_eq!(config.location, "/data/web");
    /// ```
    #[must_use]
    pub fn for_mixture(mixture: Mixture) -> Self {
        let label = mixture.sources.first().map_or_else(String::new, |s| s.location.clone());
        Self { mixture: Some(mixture), ..Self::new(label) }
    }

    /// Augments column `column` with `ops`, in order (replacing earlier ops for it).
    ///
    /// ```
    /// use tessera_loader::{Elem, LoaderConfig, Transform};
    ///
    /// let config = LoaderConfig::new("data/ds").with_transform(
    ///     "image",
    ///     [
    ///         Transform::random_resized_crop(224, 224),
    ///         Transform::HorizontalFlip { p: 0.5 },
    ///         Transform::imagenet_normalize(Elem::F16),
    ///     ],
    /// );
    /// assert_eq!(config.transforms[0].ops.len(), 3);
    /// ```
    #[must_use]
    pub fn with_transform(mut self, column: impl Into<String>, ops: impl IntoIterator<Item = Transform>) -> Self {
        let column = column.into();
        self.transforms.retain(|t| t.column != column);
        self.transforms.push(ColumnTransform { column, ops: ops.into_iter().collect() });
        self
    }

    /// Caches the data-file bytes read from an object store in directory `dir`, at most
    /// `max_bytes` of them (least recently used evicted first). The ranks of a node share
    /// one directory safely: each block of a file is fetched once, and a reader never sees a
    /// partial or corrupt entry. A local dataset directory does not use the cache (its files
    /// are local already). An unusable directory fails [`Loader::open`](crate::Loader::open)
    /// with [`LoaderError::Config`]; see [`IoStats::cache`](crate::IoStats::cache) for hits,
    /// misses and evictions.
    ///
    /// ```
    /// use tessera_loader::LoaderConfig;
    ///
    /// let config = LoaderConfig::new("s3://bucket/ds").with_cache_dir("/local/nvme/tessera-cache", 200 << 30);
    /// assert_eq!(config.disk_cache.unwrap().max_bytes, 200 << 30);
    /// ```
    #[must_use]
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>, max_bytes: u64) -> Self {
        self.disk_cache = Some(DiskCacheConfig { dir: dir.into(), max_bytes });
        self
    }

    /// Sets the projection.
    #[must_use]
    pub fn with_columns<S: AsRef<str>>(mut self, columns: &[S]) -> Self {
        self.columns = Some(columns.iter().map(|c| c.as_ref().to_string()).collect());
        self
    }

    /// Reads view `name` instead of a version (see [`LoaderConfig::view`]).
    #[must_use]
    pub fn with_view(mut self, name: impl Into<String>) -> Self {
        self.view = Some(name.into());
        self
    }

    /// Sets the batch size per rank.
    #[must_use]
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Sets the shuffle mode.
    #[must_use]
    pub fn with_shuffle(mut self, shuffle: ShuffleMode) -> Self {
        self.shuffle = shuffle;
        self
    }

    /// Sets the seed.
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets rank and world size explicitly.
    #[must_use]
    pub fn with_rank(mut self, rank: usize, world_size: usize) -> Self {
        self.dist = DistEnv { rank, world_size, local_rank: rank };
        self
    }

    /// Sets the number of worker threads.
    #[must_use]
    pub fn with_workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// Sets the memory budget in bytes.
    #[must_use]
    pub fn with_memory_budget(mut self, bytes: u64) -> Self {
        self.memory_budget = bytes;
        self
    }

    /// Takes rank and world size from torchrun's `RANK`/`WORLD_SIZE`/`LOCAL_RANK` (an
    /// adapter that delivers to a GPU picks device `LOCAL_RANK` from `dist`).
    ///
    /// # Errors
    /// As [`DistEnv::from_env`].
    pub fn with_torchrun_env(mut self) -> Result<Self> {
        self.dist = DistEnv::from_env()?;
        Ok(self)
    }

    /// Checks the fields that need no dataset.
    ///
    /// # Errors
    /// [`LoaderError::Config`] naming the first bad field.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(LoaderError::config(m));
        if self.batch_size == 0 {
            return bad("batch_size must be at least 1");
        }
        if self.workers == 0 {
            return bad("workers must be at least 1");
        }
        if self.prefetch_batches < 2 {
            return bad("prefetch_batches must be at least 2");
        }
        if self.dist.world_size == 0 || self.dist.rank >= self.dist.world_size {
            return bad("rank must be less than world_size, and world_size at least 1");
        }
        if self.max_requests_in_flight == 0 {
            return bad("max_requests_in_flight must be at least 1");
        }
        if self.max_fetch_bytes == 0 {
            return bad("max_fetch_bytes must be at least 1");
        }
        if self.view.is_some() && self.at != At::Latest {
            return bad("a view pins its own version: leave `at` unset when `view` is set");
        }
        if let Some(c) = &self.disk_cache
            && c.max_bytes < crate::disk_cache::MIN_CACHE_BYTES
        {
            return Err(LoaderError::config(format!(
                "the disk cache's max_bytes ({}) must be at least {} (four cache blocks)",
                c.max_bytes,
                crate::disk_cache::MIN_CACHE_BYTES
            )));
        }
        if let Some(m) = &self.mixture {
            if m.sources.is_empty() {
                return bad("a mixture needs at least one source");
            }
            if m.sources.iter().any(|s| s.view.is_some() && s.at != At::Latest) {
                return bad("a view pins its own version: leave a mixture source's `at` unset when its `view` is set");
            }
            if matches!(self.shuffle, ShuffleMode::Block { .. }) {
                return bad("a mixture reads each source in global-shuffle or sequential order, not block shuffle");
            }
        }
        if let ShuffleMode::Block { window_fragments: 0 } = self.shuffle {
            return bad("block shuffle needs window_fragments >= 1");
        }
        if !(self.retry.multiplier.is_finite() && self.retry.multiplier >= 1.0) {
            return bad("retry.multiplier must be a finite number >= 1");
        }
        if let Some(cols) = &self.columns {
            if cols.is_empty() {
                return bad("the column projection is empty");
            }
            for (i, c) in cols.iter().enumerate() {
                if cols[..i].contains(c) {
                    return Err(LoaderError::config(format!("column {c:?} is projected twice")));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_string())
    }

    #[test]
    fn torchrun_variables_are_parsed_and_checked() {
        assert_eq!(DistEnv::from_lookup(env(&[])).unwrap(), DistEnv::default());
        let e = DistEnv::from_lookup(env(&[("RANK", "3"), ("WORLD_SIZE", "8"), ("LOCAL_RANK", "1")])).unwrap();
        assert_eq!(e, DistEnv { rank: 3, world_size: 8, local_rank: 1 });
        for bad in [
            &[("RANK", "8"), ("WORLD_SIZE", "8")][..],
            &[("WORLD_SIZE", "0")],
            &[("RANK", "-1"), ("WORLD_SIZE", "2")],
            &[("RANK", "x")],
        ] {
            assert!(matches!(DistEnv::from_lookup(env(bad)), Err(LoaderError::Config(_))), "{bad:?}");
        }
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff_bound(0), Duration::from_millis(20));
        assert_eq!(p.backoff_bound(1), Duration::from_millis(40));
        assert_eq!(p.backoff_bound(30), Duration::from_secs(2));
    }

    #[test]
    fn bad_configs_are_refused() {
        let ok = LoaderConfig::new("x");
        assert!(ok.validate().is_ok());
        for c in [
            ok.clone().with_batch_size(0),
            ok.clone().with_workers(0),
            ok.clone().with_rank(2, 2),
            ok.clone().with_shuffle(ShuffleMode::Block { window_fragments: 0 }),
            ok.clone().with_columns(&["a", "a"]),
            LoaderConfig { prefetch_batches: 1, ..ok.clone() },
            LoaderConfig { at: At::Version(2), ..ok.clone().with_view("v") },
            ok.clone().with_cache_dir("/tmp/c", 1 << 20),
        ] {
            assert!(c.validate().is_err());
        }
    }
}
