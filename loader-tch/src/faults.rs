//! A fault-injecting [`ObjectStore`] wrapper for resilience tests: reads fail at random with
//! a transient error and take a random extra latency; everything else passes through.
//!
//! ```
//! use std::sync::Arc;
//! use tessera_loader_tch::faults::{FaultConfig, FaultyStore};
//! let inner = Arc::new(object_store::memory::InMemory::new());
//! let flaky = FaultyStore::new(inner, FaultConfig { get_error_rate: 0.2, ..FaultConfig::default() });
//! let store = tessera::Store::from_object_store(Arc::new(flaky), "", true);
//! # let _ = store;
//! ```

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, RenameOptions,
};

use crate::sampler::SplitMix64;

/// What to inject.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultConfig {
    /// Initial probability that a read (`get_opts`, `get_ranges`) fails with a transient error.
    pub get_error_rate: f64,
    /// Each read sleeps a uniform random time up to this.
    pub max_latency: Duration,
    /// Seed of the fault generator.
    pub seed: u64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        Self { get_error_rate: 0.1, max_latency: Duration::from_millis(2), seed: 1 }
    }
}

/// Counts of what a [`FaultyStore`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Reads attempted.
    pub reads: u64,
    /// Reads failed on purpose.
    pub injected_errors: u64,
}

/// An [`ObjectStore`] that makes reads of another store flaky and slow.
#[derive(Debug)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    config: FaultConfig,
    /// The current error rate's bits (changeable while in use).
    rate: AtomicU64,
    rng: Mutex<SplitMix64>,
    reads: AtomicU64,
    injected: AtomicU64,
}

impl FaultyStore {
    /// Wraps `inner`.
    #[must_use]
    pub fn new(inner: Arc<dyn ObjectStore>, config: FaultConfig) -> Self {
        let rng = Mutex::new(SplitMix64::new(config.seed));
        let rate = AtomicU64::new(config.get_error_rate.to_bits());
        Self { inner, config, rate, rng, reads: AtomicU64::new(0), injected: AtomicU64::new(0) }
    }

    /// Changes the probability that a read fails (for example to simulate an outage).
    pub fn set_error_rate(&self, rate: f64) {
        self.rate.store(rate.to_bits(), Ordering::Relaxed);
    }

    /// What was injected so far.
    #[must_use]
    pub fn stats(&self) -> FaultStats {
        FaultStats { reads: self.reads.load(Ordering::Relaxed), injected_errors: self.injected.load(Ordering::Relaxed) }
    }

    /// Decides the fate of one read: a latency, and whether it fails.
    fn roll(&self) -> (Duration, bool) {
        let mut rng = self.rng.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let unit = |x: u64| (x >> 11) as f64 / (1u64 << 53) as f64;
        let latency = self.config.max_latency.mul_f64(unit(rng.next_u64()));
        let fail = unit(rng.next_u64()) < f64::from_bits(self.rate.load(Ordering::Relaxed));
        (latency, fail)
    }

    async fn before_read(&self, location: &Path) -> object_store::Result<()> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let (latency, fail) = self.roll();
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        if fail {
            self.injected.fetch_add(1, Ordering::Relaxed);
            return Err(object_store::Error::Generic {
                store: "FaultyStore",
                source: format!("injected transient failure reading {location}").into(),
            });
        }
        Ok(())
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        self.before_read(location).await?;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> object_store::Result<Vec<Bytes>> {
        self.before_read(location).await?;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> object_store::Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}
