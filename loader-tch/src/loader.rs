//! The public entry points: [`Loader`] (one opened, pinned dataset version) and
//! [`EpochIter`] (the batches of one epoch, in order), over the framework-free core
//! ([`tessera_loader::Loader`]) with libtorch buffers, devices and transforms.

use std::sync::Arc;
use std::time::Duration;

use tessera::{Dataset, Store};
use tessera_loader::{
    DistEnv, IoStats, LoaderConfig, LoaderState, MemoryStats, Plan, PlanConfig, SkippedSample, Unsigned,
};

use crate::batch::Batch;
use crate::error::{LoaderError, Result};
use crate::sampler::{Xoshiro256StarStar, seed_for};
use crate::slots::{TchAllocator, TensorBuffer};
use crate::transform::BatchTransform;

/// Random streams of transforms: `TRANSFORM_STREAM | position` (the sampler uses small ones).
const TRANSFORM_STREAM: u64 = 1 << 63;

/// The tch adapter's own settings, next to the core's [`LoaderConfig`]: where batches go and
/// how `u64` columns become tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TchOptions {
    /// Where batches are delivered: the CPU, or a CUDA device, for which batches are staged
    /// in pinned host buffers and copied with `non_blocking = true`.
    pub device: tch::Device,
    /// `u64` columns become `i64` tensors (tch has no unsigned kinds wider than a byte; `u16`
    /// and `u32` widen to `i32` and `i64` exactly). By default a value above `i64::MAX` is a
    /// [`LoaderError::Unrepresentable`] error; with this set the bits are kept (two's
    /// complement: such values read as negative, and `x as u64` recovers them).
    pub u64_as_i64_bits: bool,
}

impl Default for TchOptions {
    fn default() -> Self {
        Self { device: tch::Device::Cpu, u64_as_i64_bits: false }
    }
}

impl TchOptions {
    /// Batches delivered to `device`.
    #[must_use]
    pub fn on(device: tch::Device) -> Self {
        Self { device, ..Self::default() }
    }

    /// For a process-per-GPU job: a CUDA device becomes the process's own, `Cuda(LOCAL_RANK)`
    /// (`LoaderConfig::with_torchrun_env` reads it into `dist`).
    #[must_use]
    pub fn for_rank(mut self, dist: &DistEnv) -> Self {
        if let tch::Device::Cuda(_) = self.device {
            self.device = tch::Device::Cuda(dist.local_rank);
        }
        self
    }

    fn allocator(&self) -> Result<TchAllocator> {
        let pin = match self.device {
            tch::Device::Cpu => None,
            tch::Device::Cuda(_) if !tch::Cuda::is_available() => None,
            tch::Device::Cuda(i) => Some(tch::Device::Cuda(i)),
            other => return Err(LoaderError::config(format!("batches cannot be delivered to {other:?}"))),
        };
        let unsigned = if self.u64_as_i64_bits { Unsigned::WidenedBits } else { Unsigned::Widened };
        Ok(TchAllocator { pin, unsigned })
    }
}

/// An opened, pinned dataset version ready to produce epochs of tch batches.
#[derive(Debug)]
pub struct Loader {
    core: tessera_loader::Loader<TensorBuffer>,
    options: TchOptions,
    transforms: Vec<Arc<dyn BatchTransform>>,
}

impl Loader {
    /// Opens the version `config.at` of the dataset at `config.location` and resolves the
    /// projection. Nothing but the manifest, its index segments and deletion vectors is read.
    ///
    /// # Errors
    /// [`LoaderError::Config`] for a bad configuration or unknown column;
    /// [`LoaderError::Dataset`] when the version cannot be opened or fails validation.
    pub fn open(config: LoaderConfig) -> Result<Self> {
        Self::open_with(config, TchOptions::default())
    }

    /// As [`Loader::open`], delivering as `options` say (a CUDA device, `u64` bits).
    ///
    /// # Errors
    /// As [`Loader::open`]; [`LoaderError::Config`] for a device batches cannot go to (MPS,
    /// Vulkan).
    pub fn open_with(config: LoaderConfig, options: TchOptions) -> Result<Self> {
        let core = tessera_loader::Loader::open_with_allocator(config, options.allocator()?)?;
        Ok(Self { core, options, transforms: Vec::new() })
    }

    /// As [`Loader::open`] with a store built by the caller (a custom `object_store`, for
    /// example a fault-injecting wrapper); `config.location` is then only a label.
    ///
    /// # Errors
    /// As [`Loader::open`].
    pub fn open_store(store: &Store, config: LoaderConfig) -> Result<Self> {
        Self::open_store_with(store, config, TchOptions::default())
    }

    /// As [`Loader::open_store`] with the adapter's `options`.
    ///
    /// # Errors
    /// As [`Loader::open_with`].
    pub fn open_store_with(store: &Store, config: LoaderConfig, options: TchOptions) -> Result<Self> {
        let core = tessera_loader::Loader::open_store(store, config, options.allocator()?)?;
        Ok(Self { core, options, transforms: Vec::new() })
    }

    /// The adapter's settings this loader delivers with.
    #[must_use]
    pub fn options(&self) -> TchOptions {
        self.options
    }

    /// Per-batch transforms, applied in order on the consumer thread after the batch is on
    /// its device, each seeded from (dataset, seed, epoch, batch position).
    #[must_use]
    pub fn with_transforms(mut self, transforms: Vec<Arc<dyn BatchTransform>>) -> Self {
        self.transforms = transforms;
        self
    }

    /// The framework-free loader underneath.
    #[must_use]
    pub fn core(&self) -> &tessera_loader::Loader<TensorBuffer> {
        &self.core
    }

    /// The sampler configuration this loader's epochs use.
    #[must_use]
    pub fn plan_config(&self) -> PlanConfig {
        self.core.plan_config()
    }

    /// The plan of `epoch` (the order and this rank's batches), without reading any data.
    ///
    /// # Errors
    /// [`LoaderError::Sampler`] for an unusable configuration.
    pub fn plan(&self, epoch: u64) -> Result<Plan> {
        self.core.plan(epoch)
    }

    /// Starts `epoch` from its beginning.
    ///
    /// # Errors
    /// [`LoaderError::Config`] when another epoch of this loader is still alive;
    /// [`LoaderError::Budget`] when the memory budget cannot hold the pipeline.
    pub fn epoch(&self, epoch: u64) -> Result<EpochIter> {
        Ok(self.wrap(self.core.epoch(epoch)?))
    }

    /// Continues the epoch a [`LoaderState`] was taken in, with exactly the batches that
    /// were not consumed yet. The world size may differ from the run that saved the state as
    /// long as the global batch size (`batch_size × world_size`) is the same.
    ///
    /// # Errors
    /// [`LoaderError::Resume`] when the state belongs to another dataset version, seed or
    /// order settings, or its position is impossible; as [`Loader::epoch`] otherwise.
    pub fn resume(&self, state: &LoaderState) -> Result<EpochIter> {
        Ok(self.wrap(self.core.resume(state)?))
    }

    fn wrap(&self, inner: tessera_loader::EpochIter<TensorBuffer>) -> EpochIter {
        let config = self.core.config();
        EpochIter {
            inner,
            device: self.options.device,
            transforms: self.transforms.clone(),
            dataset_id: self.core.dataset_id(),
            seed: config.seed,
        }
    }

    /// The opened dataset version.
    #[must_use]
    pub fn dataset(&self) -> &Dataset {
        self.core.dataset()
    }

    /// The identity every order derives from (see [`crate::version_id`]).
    #[must_use]
    pub fn dataset_id(&self) -> u64 {
        self.core.dataset_id()
    }

    /// The dataset version number.
    #[must_use]
    pub fn version(&self) -> u64 {
        self.core.version()
    }

    /// Rows in the version.
    #[must_use]
    pub fn row_count(&self) -> u64 {
        self.core.row_count()
    }

    /// Batches every rank yields per full epoch.
    #[must_use]
    pub fn batches_per_epoch(&self) -> usize {
        self.core.batches_per_epoch()
    }

    /// Projected column names, in output order.
    #[must_use]
    pub fn column_names(&self) -> Vec<String> {
        self.core.column_names()
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &LoaderConfig {
        self.core.config()
    }

    /// Memory accounting, with the high-water mark since the loader opened.
    #[must_use]
    pub fn memory_stats(&self) -> MemoryStats {
        self.core.memory_stats()
    }

    /// Storage traffic since the loader opened.
    #[must_use]
    pub fn io_stats(&self) -> IoStats {
        self.core.io_stats()
    }

    /// Every sample replaced so far (skip-bad-sample mode).
    #[must_use]
    pub fn skipped(&self) -> Vec<SkippedSample> {
        self.core.skipped()
    }
}

/// The batches of one epoch on this rank, in order; an `Iterator` of `Result<Batch>`.
///
/// Dropping it stops the workers (and waits for them). After an error the iterator ends.
#[derive(Debug)]
pub struct EpochIter {
    inner: tessera_loader::EpochIter<TensorBuffer>,
    device: tch::Device,
    transforms: Vec<Arc<dyn BatchTransform>>,
    dataset_id: u64,
    seed: u64,
}

impl EpochIter {
    /// The epoch.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.inner.epoch()
    }

    /// The plan this iterator follows.
    #[must_use]
    pub fn plan(&self) -> &Plan {
        self.inner.plan()
    }

    /// Batches yielded so far.
    #[must_use]
    pub fn consumed(&self) -> usize {
        self.inner.consumed()
    }

    /// Batches left to yield.
    #[must_use]
    pub fn remaining(&self) -> usize {
        self.inner.remaining()
    }

    /// Time the consumer spent blocked waiting for batches (loader stall time).
    #[must_use]
    pub fn wait_time(&self) -> Duration {
        self.inner.wait_time()
    }

    /// The resume state after the batches yielded so far. Save it with
    /// [`LoaderState::to_bytes`] or [`LoaderState::to_json`]; pass it to
    /// [`Loader::resume`]. After the last batch it points at the end of the epoch; start
    /// the next epoch with [`Loader::epoch`].
    #[must_use]
    pub fn state(&self) -> LoaderState {
        self.inner.state()
    }

    fn next_host(&mut self) -> Option<Result<Batch>> {
        let r = self.inner.next()?.and_then(Batch::from_host);
        if r.is_err() {
            self.inner.fail();
        }
        Some(r)
    }

    fn deliver(&self, batch: Batch, device: tch::Device) -> Result<Batch> {
        let mut batch = batch.to_device(device)?;
        for t in &self.transforms {
            let stream = TRANSFORM_STREAM | batch.position();
            let mut rng = Xoshiro256StarStar::new(seed_for(self.dataset_id, self.seed, batch.epoch(), stream));
            t.apply(&mut batch, &mut rng)?;
        }
        Ok(batch)
    }

    /// The next batch split into one equal part per device, each moved to its device and
    /// transformed (single-process multi-GPU). The configured batch size must divide by
    /// `devices.len()`; part `k` holds what rank `k` of a run with `devices.len()` times more
    /// ranks and a proportionally smaller batch would hold.
    pub fn next_for_devices(&mut self, devices: &[tch::Device]) -> Option<Result<Vec<Batch>>> {
        let batch = match self.next_host()? {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        let r = batch.split(devices.len()).and_then(|parts| {
            parts.into_iter().zip(devices).map(|(p, &d)| self.deliver(p, d)).collect::<Result<Vec<_>>>()
        });
        if r.is_err() {
            self.inner.fail();
        }
        Some(r)
    }
}

impl Iterator for EpochIter {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        let batch = match self.next_host()? {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        let r = self.deliver(batch, self.device);
        if r.is_err() {
            self.inner.fail();
        }
        Some(r)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}
