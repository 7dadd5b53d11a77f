//! A bucket behind a network link, modelled without spending CPU: an `ObjectStore` wrapper
//! that delays every GET by a fixed latency and then by its body's transfer time on one shared
//! link of a given rate (first come, first served), then hands over the inner store's answer.
//! Writes and listings wait one latency too (a PUT also its body's time on the way up, a
//! link of its own), so a commit's sequential requests cost what they cost on a bucket.
//!
//! Over loopback, bytes cost CPU (kernel copies, HTTP parsing) on the same two cores that
//! decompress, which says nothing about a training node whose network card moves the bytes.
//! This model charges bytes in time only, so a codec that reads fewer bytes wins exactly when
//! the link, not decoding, is the bottleneck.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// The wrapper; see the module docs.
pub struct LinkStore {
    inner: Arc<dyn ObjectStore>,
    latency: Duration,
    bytes_per_sec: f64,
    /// When the link is next free.
    free_at: Mutex<Instant>,
}

impl LinkStore {
    /// `inner` behind `latency` per GET and a link of `bytes_per_sec`.
    #[must_use]
    pub fn new(inner: Arc<dyn ObjectStore>, latency: Duration, bytes_per_sec: f64) -> Self {
        Self { inner, latency, bytes_per_sec: bytes_per_sec.max(1.0), free_at: Mutex::new(Instant::now()) }
    }

    /// Reserves `n` bytes on the link after the request's latency; returns when they arrive.
    fn arrival(&self, sent: Instant, n: u64) -> Instant {
        let transfer = Duration::from_secs_f64(n as f64 / self.bytes_per_sec);
        let first_byte = sent + self.latency;
        let mut free = self.free_at.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let start = (*free).max(first_byte);
        *free = start + transfer;
        *free
    }
}

impl fmt::Debug for LinkStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LinkStore({:?}, {:.0} MB/s, {})", self.latency, self.bytes_per_sec / 1e6, self.inner)
    }
}

impl fmt::Display for LinkStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[async_trait::async_trait]
impl ObjectStore for LinkStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        let up = Duration::from_secs_f64(payload.content_length() as f64 / self.bytes_per_sec);
        let r = self.inner.put_opts(location, payload, opts).await;
        tokio::time::sleep(self.latency + up).await;
        r
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let sent = Instant::now();
        if options.head {
            let r = self.inner.get_opts(location, options).await?;
            tokio::time::sleep_until(self.arrival(sent, 0).into()).await;
            return Ok(r);
        }
        let r = self.inner.get_opts(location, options).await?;
        // The body as a stream, as a network store delivers it: a local file handle would let
        // the loader read only the wanted pieces of a coalesced range, while the link charges
        // every byte of it.
        let (meta, range, attributes, extensions) =
            (r.meta.clone(), r.range.clone(), r.attributes.clone(), r.extensions.clone());
        let body = r.bytes().await?;
        tokio::time::sleep_until(self.arrival(sent, body.len() as u64).into()).await;
        let payload = GetResultPayload::Stream(futures::stream::once(async move { Ok(body) }).boxed());
        Ok(GetResult { payload, meta, range, attributes, extensions })
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let r = self.inner.list_with_delimiter(prefix).await;
        tokio::time::sleep(self.latency).await;
        r
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        let r = self.inner.copy_opts(from, to, options).await;
        tokio::time::sleep(self.latency).await;
        r
    }
}
