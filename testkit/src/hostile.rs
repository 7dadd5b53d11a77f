//! An object store that answers some GETs with a body far larger than anything asked for, and
//! counts how many of those bytes the reader actually pulled.
//!
//! It models a hostile or broken store (or a replaced object): a 10 GB manifest, a range GET
//! whose body never ends, a store that reports one size and streams another. The body is a
//! stream of zero-filled chunks generated on demand, so the test itself uses no memory; the
//! counter tells whether the reader stopped early (bounded memory) or drained it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// Bytes in one chunk of a hostile body.
pub const CHUNK: u64 = 1 << 20;

/// What the store claims about a hostile body's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The object's metadata reports the real (huge) size.
    Honest,
    /// The metadata reports the size of the real object (or of the range asked for), and the
    /// body goes on far past it.
    Lies,
}

/// Wraps a store; GETs of keys containing `key_contains` get a `body_len`-byte body.
#[derive(Clone)]
pub struct HostileStore {
    inner: Arc<dyn ObjectStore>,
    key_contains: String,
    body_len: u64,
    claim: Claim,
    pulled: Arc<AtomicU64>,
}

impl fmt::Debug for HostileStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostileStore({:?}, {} bytes, {:?})", self.key_contains, self.body_len, self.claim)
    }
}

impl fmt::Display for HostileStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl HostileStore {
    /// GETs of keys containing `key_contains` answer with `body_len` bytes.
    #[must_use]
    pub fn new(inner: Arc<dyn ObjectStore>, key_contains: &str, body_len: u64, claim: Claim) -> Self {
        Self { inner, key_contains: key_contains.to_string(), body_len, claim, pulled: Arc::default() }
    }

    /// Hostile body bytes the reader has pulled so far.
    #[must_use]
    pub fn pulled(&self) -> u64 {
        self.pulled.load(Ordering::Relaxed)
    }
}

fn zeros(len: u64, pulled: Arc<AtomicU64>) -> BoxStream<'static, Result<Bytes>> {
    let chunk = Bytes::from(vec![0u8; CHUNK as usize]);
    futures::stream::unfold(0u64, move |sent| {
        let (chunk, pulled) = (chunk.clone(), pulled.clone());
        async move {
            if sent >= len {
                return None;
            }
            let n = CHUNK.min(len - sent);
            pulled.fetch_add(n, Ordering::Relaxed);
            Some((Ok(chunk.slice(..n as usize)), sent + n))
        }
    })
    .boxed()
}

#[async_trait::async_trait]
impl ObjectStore for HostileStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if options.head || !location.as_ref().contains(&self.key_contains) {
            return self.inner.get_opts(location, options).await;
        }
        let real = self.inner.get_opts(location, options).await?;
        let mut meta = real.meta.clone();
        let range = match self.claim {
            Claim::Honest => {
                meta.size = self.body_len;
                0..self.body_len
            }
            Claim::Lies => real.range.clone(),
        };
        Ok(GetResult {
            payload: GetResultPayload::Stream(zeros(self.body_len, self.pulled.clone())),
            meta,
            range,
            attributes: real.attributes.clone(),
            extensions: real.extensions.clone(),
        })
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
