//! The public entry points: [`Loader`] (one opened, pinned dataset version) and
//! [`EpochIter`] (the filled host batches of one epoch, in order).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tessera::tree::FragmentTree;
use tessera::{Dataset, Store, View};

use crate::batch::{HostBatch as Batch, SkippedSample};
use crate::buffer::{AlignedAllocator, AlignedBuffer, BufferAllocator, HostBuffer};
use crate::catalog::Catalog;
use crate::config::LoaderConfig;
use crate::disk_cache::DiskCache;
use crate::error::{LoaderError, Result};
use crate::fill::page_cache::PageCache;
use crate::fill::staging::StagePool;
use crate::lineage::LineageWriter;
use crate::memory::{Accountant, MemoryStats};
use crate::mixture::{MixOrder, MixSource};
use crate::pipeline::{EpochPipeline, PipelineSettings};
use crate::pool::BufferPool;
use crate::sampler::{LoaderState, Plan, PlanConfig, SamplerError, ShuffleMode};
use crate::source::{Fetcher, IoStats, Source, classify, with_retry};
use crate::transform::Pipeline;
use crate::window::ExtentPool;

/// An opened, pinned dataset version ready to produce epochs of batches.
///
/// `B` is the buffer type batches are filled into: the loader's own [`AlignedBuffer`]s
/// ([`Loader::open`]), or an adapter's ([`Loader::open_with_allocator`]), which its batches
/// then hold, typed.
#[derive(Debug)]
pub struct Loader<B: HostBuffer = AlignedBuffer> {
    config: LoaderConfig,
    catalog: Arc<Catalog>,
    fetcher: Arc<Fetcher>,
    acct: Arc<Accountant>,
    skipped: Arc<Mutex<Vec<SkippedSample>>>,
    active: Arc<AtomicBool>,
    /// Block shuffle: the window's extents, kept from epoch to epoch.
    window_pool: Arc<ExtentPool>,
    /// Decoded pages, kept from epoch to epoch (each epoch sets the cache's share).
    pages: Arc<PageCache>,
    /// Batch buffer sets, kept from epoch to epoch (each epoch sets their bound).
    buffers: Arc<BufferPool<B>>,
    /// Object-store staging buffers, kept from epoch to epoch (each epoch sets their cap).
    staging: Arc<StagePool>,
    /// Per projected column, its checked augmentation pipeline.
    transforms: Arc<[Option<Pipeline>]>,
    /// A mixture's resolved order and each source's first plan position.
    mixture: Option<(Arc<MixOrder>, Arc<[u64]>)>,
    /// Rank 0's lineage record, when one is configured.
    lineage: Option<Arc<LineageWriter>>,
    batches_per_epoch: usize,
}

impl Loader {
    /// Opens the version `config.at` of the dataset at `config.location` and resolves the
    /// projection. Nothing but the manifest and its fragment index is read: every index
    /// segment of a fragment log; only the root of a fragment tree, whose other nodes are
    /// read when a batch first needs a fragment below them (in every shuffle mode: block
    /// shuffle's windows are arithmetic, see [`crate::sampler`]). Deletion vectors are read
    /// with a fragment's first row.
    ///
    /// # Errors
    /// [`LoaderError::Config`] for a bad configuration or unknown column;
    /// [`LoaderError::Dataset`] when the version cannot be opened or fails validation.
    pub fn open(config: LoaderConfig) -> Result<Self> {
        Self::open_with_allocator(config, AlignedAllocator)
    }
}

impl<B: HostBuffer> Loader<B> {
    /// As [`Loader::open`], filling buffers from `alloc` (a framework adapter's hook: tensor
    /// storage, pinned memory, arrays a Python caller keeps).
    ///
    /// # Errors
    /// As [`Loader::open`].
    pub fn open_with_allocator(config: LoaderConfig, alloc: impl BufferAllocator<Buffer = B>) -> Result<Self> {
        let alloc: Arc<dyn BufferAllocator<Buffer = B>> = Arc::new(alloc);
        config.validate()?;
        if config.mixture.is_some() {
            return Self::open_mixture(config, alloc);
        }
        let store = Store::open(&config.location)
            .map_err(|e| LoaderError::dataset(format!("opening store {:?}", config.location), e))?;
        let source = Source::for_location(&config.location, &store);
        Self::open_with(&store, source, config, alloc)
    }

    /// As [`Loader::open`] with a store built by the caller (a custom `object_store`, for
    /// example a fault-injecting wrapper); `config.location` is then only a label.
    ///
    /// # Errors
    /// As [`Loader::open`].
    pub fn open_store(store: &Store, config: LoaderConfig, alloc: impl BufferAllocator<Buffer = B>) -> Result<Self> {
        config.validate()?;
        let alloc: Arc<dyn BufferAllocator<Buffer = B>> = Arc::new(alloc);
        let source = Source::Object(store.clone());
        Self::open_with(store, source, config, alloc)
    }

    fn open_with(
        store: &Store,
        source: Source,
        config: LoaderConfig,
        alloc: Arc<dyn BufferAllocator<Buffer = B>>,
    ) -> Result<Self> {
        let spec =
            MixSource { at: config.at.clone(), view: config.view.clone(), ..MixSource::new(config.location.clone()) };
        let fetcher = Self::fetcher(source, &config, &spec.location)?;
        let (dataset, tree, view) = Self::open_source(store, &spec, &config, &fetcher)?;
        let acct = Accountant::new(config.memory_budget);
        let mut catalog =
            Catalog::new(dataset, tree, fetcher.clone(), config.columns.as_deref(), &spec, alloc.unsigned(), &acct)?;
        if let Some(view) = view {
            catalog = catalog.with_view(Arc::new(view))?;
        }
        Self::finish(catalog, fetcher, acct, config, alloc)
    }

    /// Opens every source of `config.mixture`, each on its own store, into one catalog, and
    /// resolves the mixture's order over them.
    fn open_mixture(config: LoaderConfig, alloc: Arc<dyn BufferAllocator<Buffer = B>>) -> Result<Self> {
        let mix = config.mixture.clone().ok_or_else(|| LoaderError::config("no mixture"))?;
        let acct = Accountant::new(config.memory_budget);
        let mut catalog: Option<Catalog> = None;
        let mut primary: Option<Arc<Fetcher>> = None;
        for (k, spec) in mix.sources.iter().enumerate() {
            let store = Store::open(&spec.location).map_err(|e| {
                LoaderError::dataset(format!("opening store {:?} (mixture source {k})", spec.location), e)
            })?;
            let fetcher = Self::fetcher(Source::for_location(&spec.location, &store), &config, &spec.location)?;
            if primary.as_ref().is_none_or(|p| p.is_local() && !fetcher.is_local()) {
                primary = Some(fetcher.clone());
            }
            let (dataset, tree, view) = Self::open_source(&store, spec, &config, &fetcher)?;
            let view = view.map(Arc::new);
            match catalog.as_mut() {
                None => {
                    let mut c =
                        Catalog::new(dataset, tree, fetcher, config.columns.as_deref(), spec, alloc.unsigned(), &acct)?;
                    if let Some(v) = view {
                        c = c.with_view(v)?;
                    }
                    catalog = Some(c);
                }
                Some(c) => c.add_part(dataset, tree, spec, view, fetcher, &acct)?,
            }
        }
        let (Some(catalog), Some(primary)) = (catalog, primary) else {
            return Err(LoaderError::config("a mixture needs at least one source"));
        };
        Self::finish(catalog, primary, acct, config, alloc)
    }

    /// The storage of one source: reads from `source`, retried as `config` says, through the
    /// disk cache when one is configured and the source is remote.
    fn fetcher(source: Source, config: &LoaderConfig, location: &str) -> Result<Arc<Fetcher>> {
        let mut fetcher = Fetcher::new(source, config.retry.clone());
        if let Some(c) = &config.disk_cache
            && !fetcher.is_local()
        {
            // Entries are kept per dataset location (with `open_store`, its label).
            fetcher = fetcher.with_cache(DiskCache::open(&c.dir, c.max_bytes, location)?);
        }
        Ok(Arc::new(fetcher))
    }

    /// Opens one source's version (lazily through its fragment tree where it has one,
    /// unless block shuffle, which plans over every fragment) or view.
    fn open_source(
        store: &Store,
        spec: &MixSource,
        config: &LoaderConfig,
        fetcher: &Fetcher,
    ) -> Result<(Dataset, Option<FragmentTree>, Option<View>)> {
        crate::io::outside_runtime()?;
        let never = AtomicBool::new(false);
        let what = || match &spec.view {
            Some(view) => format!("opening view {view:?} of {}", spec.location),
            None => format!("opening version {:?} of {}", spec.at, spec.location),
        };
        with_retry(&config.retry, &never, &fetcher.counters, &what, || {
            match &spec.view {
                Some(name) => crate::io::drive(Dataset::open_view_async(store, name, config.limits.clone()))
                    .map(|(d, v)| (d, None, Some(v))),
                None => crate::io::drive(Dataset::open_lazy_async(store, &spec.at, config.limits.clone()))
                    .map(|(d, t)| (d, t, None)),
            }
            .map_err(|e| classify(&what(), e))
        })
    }

    /// The loader over an opened catalog: output layouts, transforms, the mixture's order.
    fn finish(
        mut catalog: Catalog,
        fetcher: Arc<Fetcher>,
        acct: Arc<Accountant>,
        config: LoaderConfig,
        alloc: Arc<dyn BufferAllocator<Buffer = B>>,
    ) -> Result<Self> {
        crate::assemble::apply_ragged(&mut catalog.columns, &config.ragged)?;
        let transforms = crate::transform::plan_columns(&mut catalog.columns, &config.transforms)?;
        let mixture = match &config.mixture {
            Some(mix) => {
                let (starts, sources) = catalog.part_layout();
                let order = MixOrder::new(mix, &sources, config.seed, config.shuffle == ShuffleMode::Global)
                    .map_err(|e| LoaderError::config(format!("mixture: {e}")))?;
                catalog.dataset_id = order.digest();
                catalog.mixture = true;
                Some((Arc::new(order), Arc::from(starts)))
            }
            None => None,
        };
        let catalog = Arc::new(catalog);
        let mut loader = Self {
            window_pool: ExtentPool::new(acct.clone()),
            pages: Arc::new(PageCache::new(&acct, 0)),
            staging: Arc::new(StagePool::new(acct.clone(), 0)),
            buffers: BufferPool::new(
                acct.clone(),
                catalog.columns.len(),
                0,
                alloc,
                config.reuse_buffers,
                transforms.iter().map(Option::is_some).collect(),
            ),
            transforms: transforms.into(),
            acct,
            config,
            catalog,
            fetcher,
            skipped: Arc::new(Mutex::new(Vec::new())),
            active: Arc::new(AtomicBool::new(false)),
            mixture,
            lineage: None,
            batches_per_epoch: 0,
        };
        loader.batches_per_epoch = loader.plan(0)?.batches_per_rank();
        if let Some(path) = loader.config.lineage.clone()
            && loader.config.dist.rank == 0
        {
            loader.lineage = Some(Arc::new(LineageWriter::open(&path, &loader)?));
        }
        Ok(loader)
    }

    /// The sampler configuration this loader's epochs use.
    #[must_use]
    pub fn plan_config(&self) -> PlanConfig {
        PlanConfig {
            rows: self.catalog.plan_rows,
            fragments: self.catalog.plan_fragments,
            dataset_id: self.catalog.dataset_id,
            seed: self.config.seed,
            shuffle: self.config.shuffle,
            batch_size: self.config.batch_size,
            world_size: self.config.dist.world_size,
            rank: self.config.dist.rank,
            drop_last: self.config.drop_last,
        }
    }

    /// The plan of `epoch` (the order and this rank's batches), without reading any data.
    ///
    /// # Errors
    /// [`LoaderError::Sampler`] for an unusable configuration.
    pub fn plan(&self, epoch: u64) -> Result<Plan> {
        Ok(match &self.mixture {
            Some((order, starts)) => Plan::mixture(self.plan_config(), order.clone(), starts.clone(), epoch)?,
            None => Plan::new(self.plan_config(), epoch)?,
        })
    }

    /// Starts `epoch` from its beginning.
    ///
    /// # Errors
    /// [`LoaderError::Config`] when another epoch of this loader is still alive;
    /// [`LoaderError::Budget`] when the memory budget cannot hold the pipeline.
    pub fn epoch(&self, epoch: u64) -> Result<EpochIter<B>> {
        self.start(self.plan(epoch)?)
    }

    /// Continues the epoch a [`LoaderState`] was taken in, with exactly the batches that
    /// were not consumed yet. The world size may differ from the run that saved the state as
    /// long as the global batch size (`batch_size × world_size`) is the same.
    ///
    /// # Errors
    /// [`LoaderError::Resume`] when the state belongs to another dataset version, seed or
    /// order settings, or its position is impossible; as [`Loader::epoch`] otherwise.
    pub fn resume(&self, state: &LoaderState) -> Result<EpochIter<B>> {
        let planned = if let Some((order, starts)) = &self.mixture {
            Plan::resume_mixture(self.plan_config(), order.clone(), starts.clone(), state)
        } else {
            if state.version != self.version() {
                return Err(LoaderError::Resume(format!(
                    "the state was saved reading version {} of the dataset; this loader reads version {}",
                    state.version,
                    self.version()
                )));
            }
            Plan::resume(self.plan_config(), state.epoch, state)
        };
        let plan = planned.map_err(|e| self.resume_error(e))?;
        self.start(plan)
    }

    /// Why a state does not resume here, in the loader's words.
    fn resume_error(&self, e: SamplerError) -> LoaderError {
        match e {
            SamplerError::StateMismatch { field: "dataset_id", .. } => {
                LoaderError::Resume(match (&self.mixture, self.catalog.view()) {
                    (Some(_), _) => "the state was taken reading another mixture (other sources or counts), or \
                                     another history of changes before its position"
                        .into(),
                    (None, Some(v)) => format!(
                        "the state was not saved reading view {:?} (but another view, a re-created one, or a \
                         whole version)",
                        v.name
                    ),
                    (None, None) => "the state belongs to another dataset (or a re-created one with the same \
                                     version number), or to a view"
                        .into(),
                })
            }
            SamplerError::StateMismatch { field, expected, found } => LoaderError::Resume(format!(
                "{field} differs: the state has {found}, this loader's settings give {expected} (settings_digest \
                 covers shuffle mode, drop_last, global batch size and, for one dataset, its fragment layout)"
            )),
            SamplerError::InvalidState { field, reason } => LoaderError::Resume(format!("{field} {reason}")),
            other => LoaderError::Sampler(other),
        }
    }

    fn start(&self, plan: Plan) -> Result<EpochIter<B>> {
        if self.active.swap(true, Ordering::AcqRel) {
            return Err(LoaderError::config("another epoch of this loader is still running; drop it first"));
        }
        let guard = ActiveGuard(self.active.clone());
        if let Some(w) = &self.lineage {
            let consumed = plan.checkpoint(0, 0).map_or(0, |s| s.samples_consumed_global);
            w.start(plan.epoch(), consumed, crate::lineage::step_at(self, &plan)?)?;
        }
        let plan = Arc::new(plan);
        let settings = PipelineSettings {
            workers: self.config.workers,
            prefetch_batches: self.config.prefetch_batches,
            verify: self.config.verify_checksums,
            skip_bad: self.config.skip_bad_samples,
            ragged_offsets: self.config.ragged.offsets,
            max_fetch: self.config.max_fetch_bytes,
            max_requests: self.config.max_requests_in_flight,
            coalesce_gap: self.config.coalesce_gap_bytes,
            block: matches!(self.config.shuffle, ShuffleMode::Block { .. }),
            staging: self.staging.clone(),
            window_pool: self.window_pool.clone(),
            pages: self.pages.clone(),
            transforms: self.transforms.clone(),
            seed: self.config.seed,
        };
        let pipeline = EpochPipeline::start(
            self.catalog.clone(),
            self.fetcher.clone(),
            self.acct.clone(),
            plan.clone(),
            settings,
            self.buffers.clone(),
            self.skipped.clone(),
        )?;
        Ok(EpochIter {
            pipeline,
            plan,
            consumed: 0,
            dataset_id: self.catalog.dataset_id,
            seed: self.config.seed,
            version: self.version(),
            waited: Duration::ZERO,
            failed: false,
            _active: guard,
        })
    }

    /// The opened dataset version. For a version indexed by a fragment tree (read without
    /// block shuffle) or a view of one, the handle is partial ([`Dataset::is_partial`]): the
    /// loader finds fragments as it needs them, so the handle lists none (or the view's);
    /// [`Dataset::checkout`] opens the whole version.
    #[must_use]
    pub fn dataset(&self) -> &Dataset {
        self.catalog.dataset()
    }

    /// The identity every order derives from (see [`crate::version_id`]).
    #[must_use]
    pub fn dataset_id(&self) -> u64 {
        self.catalog.dataset_id
    }

    /// The dataset version number.
    #[must_use]
    pub fn version(&self) -> u64 {
        self.catalog.dataset().version()
    }

    /// Rows one epoch reads, before padding: the version's, or the view's.
    #[must_use]
    pub fn row_count(&self) -> u64 {
        self.catalog.rows()
    }

    /// The view this loader reads, if it reads one ([`LoaderConfig::view`]).
    #[must_use]
    pub fn view(&self) -> Option<&View> {
        self.catalog.view().map(|v| &**v)
    }

    /// Batches every rank yields per full epoch.
    #[must_use]
    pub fn batches_per_epoch(&self) -> usize {
        self.batches_per_epoch
    }

    /// Projected column names, in output order.
    #[must_use]
    pub fn column_names(&self) -> Vec<String> {
        self.catalog.columns.iter().map(|c| c.name.clone()).collect()
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &LoaderConfig {
        &self.config
    }

    /// Memory accounting, with the high-water mark since the loader opened.
    #[must_use]
    pub fn memory_stats(&self) -> MemoryStats {
        MemoryStats {
            window: self.window_pool.stats(),
            cached_pages: self.pages.bytes(),
            idle_buffers: self.buffers.idle_bytes(),
            staging_buffers: self.staging.held(),
            ..self.acct.stats()
        }
    }

    /// Storage traffic since the loader opened.
    #[must_use]
    pub fn io_stats(&self) -> IoStats {
        let mut stats = self.fetcher.stats();
        // A mixture's other sources add their traffic.
        for f in self.catalog.fetchers().filter(|f| !Arc::ptr_eq(f, &self.fetcher)) {
            let s = f.stats();
            stats.requests += s.requests;
            stats.bytes += s.bytes;
            stats.retries += s.retries;
            let (c, o) = (&mut stats.cache, s.cache);
            c.hits += o.hits;
            c.misses += o.misses;
            c.read_bytes += o.read_bytes;
            c.written_bytes += o.written_bytes;
            c.evictions += o.evictions;
            c.corrupt += o.corrupt;
            c.errors += o.errors;
        }
        stats
    }

    /// Every source as pinned: its location, the branch and version it reads (a view's
    /// source stays at `At::Latest`, the view naming its version), and its view.
    #[must_use]
    pub fn pinned_sources(&self) -> Vec<MixSource> {
        let locations: Vec<String> = match &self.config.mixture {
            Some(m) => m.sources.iter().map(|s| s.location.clone()).collect(),
            None => vec![self.config.location.clone()],
        };
        (locations.into_iter().zip(self.catalog.pins()))
            .map(|(location, (branch, version, view))| MixSource {
                at: if view.is_some() { tessera::At::Latest } else { tessera::At::BranchVersion(branch, version) },
                view,
                ..MixSource::new(location)
            })
            .collect()
    }

    /// The source (0 unless a mixture) and the row of its version at plan position
    /// `position` ([`Plan::batch_into`] gives positions).
    #[must_use]
    pub fn source_row(&self, position: u64) -> (u32, u64) {
        let (k, row) = self.catalog.source_row(position);
        (u32::try_from(k).unwrap_or(u32::MAX), row)
    }

    /// The mixture's resolved order, when the loader reads a mixture.
    #[must_use]
    pub fn mixture_order(&self) -> Option<&MixOrder> {
        self.mixture.as_ref().map(|(o, _)| &**o)
    }

    /// Every sample replaced so far (skip-bad-sample mode).
    #[must_use]
    pub fn skipped(&self) -> Vec<SkippedSample> {
        self.skipped.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

#[derive(Debug)]
struct ActiveGuard(Arc<AtomicBool>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The filled batches of one epoch on this rank, in order; an `Iterator` of
/// `Result<HostBatch>`.
///
/// Dropping it stops the workers (and waits for them). After an error the iterator ends.
#[derive(Debug)]
pub struct EpochIter<B: HostBuffer = AlignedBuffer> {
    pipeline: EpochPipeline<B>,
    plan: Arc<Plan>,
    consumed: usize,
    dataset_id: u64,
    seed: u64,
    version: u64,
    waited: Duration,
    failed: bool,
    /// Declared last: released after the pipeline has stopped.
    _active: ActiveGuard,
}

impl<B: HostBuffer> EpochIter<B> {
    /// The epoch.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.plan.epoch()
    }

    /// The plan this iterator follows.
    #[must_use]
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Batches yielded so far.
    #[must_use]
    pub fn consumed(&self) -> usize {
        self.consumed
    }

    /// Batches left to yield.
    #[must_use]
    pub fn remaining(&self) -> usize {
        self.pipeline.total().saturating_sub(self.consumed)
    }

    /// Time the consumer spent blocked waiting for batches (loader stall time).
    #[must_use]
    pub fn wait_time(&self) -> Duration {
        self.waited
    }

    /// The resume state after the batches yielded so far. Save it with
    /// [`LoaderState::to_bytes`] or [`LoaderState::to_json`]; pass it to
    /// [`Loader::resume`]. After the last batch it points at the end of the epoch; start
    /// the next epoch with [`Loader::epoch`].
    #[must_use]
    pub fn state(&self) -> LoaderState {
        self.plan.checkpoint(self.consumed, self.version).unwrap_or_else(|| LoaderState {
            dataset_id: self.dataset_id,
            version: self.version,
            seed: self.seed,
            epoch: self.plan.epoch(),
            samples_consumed_global: self.plan.effective_len(),
            settings_digest: crate::sampler::settings_digest(self.plan.config()),
        })
    }

    /// Marks the iterator failed: it yields nothing more (an adapter's delivery failed).
    pub fn fail(&mut self) {
        self.failed = true;
        self.pipeline.shutdown();
    }
}

impl<B: HostBuffer> Iterator for EpochIter<B> {
    type Item = Result<Batch<B>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let t = Instant::now();
        let r = self.pipeline.next_batch();
        self.waited += t.elapsed();
        match r {
            Some(Ok(b)) => {
                self.consumed += 1;
                Some(Ok(b))
            }
            Some(Err(e)) => {
                self.failed = true;
                self.pipeline.shutdown();
                Some(Err(e))
            }
            None => None,
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.failed { (0, Some(0)) } else { (0, Some(self.remaining())) }
    }
}
