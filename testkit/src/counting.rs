//! An object store wrapper that counts requests and bytes, for benchmarks that report how
//! many requests an operation costs.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetRange, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// Request counters.
#[derive(Debug, Default)]
pub struct Counts {
    /// GET requests (ranged or whole).
    pub gets: AtomicU64,
    /// Bytes returned by GETs.
    pub get_bytes: AtomicU64,
    /// PUT requests.
    pub puts: AtomicU64,
    /// Bytes sent by PUTs.
    pub put_bytes: AtomicU64,
    /// LIST requests.
    pub lists: AtomicU64,
}

impl Counts {
    /// A snapshot as (gets, get bytes, puts, put bytes, lists).
    #[must_use]
    pub fn snapshot(&self) -> [u64; 5] {
        [&self.gets, &self.get_bytes, &self.puts, &self.put_bytes, &self.lists].map(|c| c.load(Ordering::Relaxed))
    }
}

/// A recorded `get_opts` call: the path and the range asked.
pub type LoggedGet = (String, Option<GetRange>);

/// Wraps a store and counts what passes through.
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    /// The counters.
    pub counts: Arc<Counts>,
    /// Every `get_opts` call's path and range, when made with [`CountingStore::logging`].
    log: Option<Mutex<Vec<LoggedGet>>>,
}

impl CountingStore {
    /// Wraps `inner`.
    #[must_use]
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self { inner, counts: Arc::new(Counts::default()), log: None }
    }

    /// Wraps `inner` and also records the path and range of every `get_opts` call (for
    /// tests that ask which requests an operation made).
    #[must_use]
    pub fn logging(inner: Arc<dyn ObjectStore>) -> Self {
        Self { log: Some(Mutex::default()), ..Self::new(inner) }
    }

    /// The `get_opts` calls recorded so far (empty unless made with
    /// [`CountingStore::logging`]).
    ///
    /// # Panics
    /// If a thread panicked while recording.
    #[must_use]
    pub fn gets(&self) -> Vec<LoggedGet> {
        self.log.as_ref().map(|l| l.lock().unwrap().clone()).unwrap_or_default()
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.counts.puts.fetch_add(1, Ordering::Relaxed);
        self.counts.put_bytes.fetch_add(payload.content_length() as u64, Ordering::Relaxed);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        self.counts.puts.fetch_add(1, Ordering::Relaxed);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.counts.gets.fetch_add(1, Ordering::Relaxed);
        if let Some(log) = &self.log {
            log.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((location.to_string(), options.range.clone()));
        }
        let r = self.inner.get_opts(location, options).await?;
        self.counts.get_bytes.fetch_add(r.range.end - r.range.start, Ordering::Relaxed);
        Ok(r)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        // Count as the backend would after coalescing: the inner store's default
        // implementation issues get_opts calls, which are not seen here, so count one request
        // per coalesced run of ranges closer than 1 MiB.
        let mut sorted = ranges.to_vec();
        sorted.sort_by_key(|r| r.start);
        let mut runs = 0u64;
        let mut end = None;
        for r in &sorted {
            if end.is_none_or(|e: u64| r.start > e + (1 << 20)) {
                runs += 1;
            }
            end = Some(end.map_or(r.end, |e: u64| e.max(r.end)));
        }
        self.counts.gets.fetch_add(runs, Ordering::Relaxed);
        let out = self.inner.get_ranges(location, ranges).await?;
        self.counts.get_bytes.fetch_add(out.iter().map(|b| b.len() as u64).sum(), Ordering::Relaxed);
        Ok(out)
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.counts.lists.fetch_add(1, Ordering::Relaxed);
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.counts.lists.fetch_add(1, Ordering::Relaxed);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
