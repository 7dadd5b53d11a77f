//! Storage: a dataset root on any `object_store` backend, behind a blocking facade.
//!
//! A plain path opens the local file system (the default store). URLs select a backend:
//! `file://`, `memory://NAME` (process-wide, shared by name), `s3://bucket/prefix`,
//! `gs://bucket/prefix`, `az://container/prefix`, `http(s)://host/prefix` (read-only). Cloud
//! credentials and endpoints come from the environment variables each builder's `from_env`
//! reads (`AWS_ENDPOINT`, `AWS_ALLOW_HTTP`, `AWS_ACCESS_KEY_ID`, `AZURE_STORAGE_USE_EMULATOR`, …).
//!
//! Every request is an `async fn`; its blocking twin runs it through
//! [`crate::blocking::block_on`], so simple callers need no async code. Async callers await the
//! `_async` methods, or take [`Store::object_store`] and [`Store::path`] and drive the
//! requests themselves.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::blocking::block_on;
use crate::error::{Error, Result};

/// Makes rustls on `ring` the process's TLS crypto provider, unless one is installed already.
///
/// The cloud backends' HTTP client (reqwest with rustls) is built without a bundled provider
/// so that no build compiles aws-lc; it needs a process-wide provider before the first client
/// is built. [`Store::open`] calls this; code that builds `object_store` cloud clients itself
/// (tests, benchmarks) calls it first. Idempotent and cheap after the first call.
pub fn install_crypto_provider() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Losing a race to another installer is fine: a provider is installed either way.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

/// What a create-if-absent put found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Created {
    /// The object was created by this call.
    New,
    /// An object existed under the key; nothing was written.
    Existed,
}

/// A dataset root in an object store.
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<dyn ObjectStore>,
    prefix: Path,
    url: String,
    atomic_create: bool,
    /// The root directory of a local store: symbolic links under it are not objects `[LAY-11]`.
    local: Option<std::path::PathBuf>,
}

fn memory_stores() -> &'static Mutex<HashMap<String, Arc<dyn ObjectStore>>> {
    static M: OnceLock<Mutex<HashMap<String, Arc<dyn ObjectStore>>>> = OnceLock::new();
    M.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Store {
    /// Opens a dataset root from a local path or a URL (see the module docs). A local
    /// directory is created if missing.
    ///
    /// # Errors
    /// `usage` for an unknown scheme or bad URL, `io` if the backend cannot be built.
    pub fn open(location: &str) -> Result<Self> {
        let Some((scheme, _)) = location.split_once("://") else {
            return Self::local(std::path::Path::new(location));
        };
        let url = url::Url::parse(location).map_err(|e| Error::usage(format!("bad URL {location:?}: {e}")))?;
        let io = |e: object_store::Error| Error::Io { path: location.to_string(), source: e };
        let prefix =
            Path::from_url_path(url.path()).map_err(|e| Error::usage(format!("bad path in {location:?}: {e}")))?;
        if !matches!(scheme, "file" | "memory") {
            install_crypto_provider();
        }
        let (inner, atomic_create): (Arc<dyn ObjectStore>, bool) = match scheme {
            "file" => {
                let p = url.to_file_path().map_err(|()| Error::usage(format!("bad file URL {location:?}")))?;
                return Self::local(&p);
            }
            "memory" => {
                let name = url.host_str().unwrap_or_default().to_string();
                let mut map = memory_stores().lock().map_err(|_| Error::usage("memory store registry poisoned"))?;
                let s = map.entry(name).or_insert_with(|| Arc::new(object_store::memory::InMemory::new())).clone();
                (s, true)
            }
            "s3" | "s3a" => {
                let s = object_store::aws::AmazonS3Builder::from_env().with_url(location).build().map_err(io)?;
                (Arc::new(s), true)
            }
            "gs" => {
                let s =
                    object_store::gcp::GoogleCloudStorageBuilder::from_env().with_url(location).build().map_err(io)?;
                (Arc::new(s), true)
            }
            "az" | "azure" | "abfs" | "abfss" => {
                let s =
                    object_store::azure::MicrosoftAzureBuilder::from_env().with_url(location).build().map_err(io)?;
                (Arc::new(s), true)
            }
            "http" | "https" => {
                let base = format!("{}://{}", url.scheme(), url.authority());
                // A plain `http://` URL is the user's explicit choice (a server on loopback or
                // inside the cluster): object_store refuses it unless allowed.
                let options = object_store::ClientOptions::new().with_allow_http(url.scheme() == "http");
                let s = object_store::http::HttpBuilder::new()
                    .with_url(base)
                    .with_client_options(options)
                    .build()
                    .map_err(io)?;
                (Arc::new(s), false)
            }
            other => return Err(Error::usage(format!("unsupported store scheme {other:?}"))),
        };
        Ok(Self { inner, prefix, url: location.to_string(), atomic_create, local: None })
    }

    fn local(dir: &std::path::Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| Error::Io {
            path: dir.display().to_string(),
            source: object_store::Error::Generic { store: "LocalFileSystem", source: Box::new(e) },
        })?;
        let fs = object_store::local::LocalFileSystem::new_with_prefix(dir)
            .map_err(|e| Error::Io { path: dir.display().to_string(), source: e })?
            .with_fsync(true);
        Ok(Self {
            inner: Arc::new(fs),
            prefix: Path::default(),
            url: dir.display().to_string(),
            atomic_create: true,
            local: Some(dir.to_path_buf()),
        })
    }

    /// Wraps an existing object store (for tests and fault injection). `atomic_create` says
    /// whether the backend implements `PutMode::Create` atomically.
    #[must_use]
    pub fn from_object_store(inner: Arc<dyn ObjectStore>, prefix: &str, atomic_create: bool) -> Self {
        Self { inner, prefix: Path::from(prefix), url: format!("custom:{prefix}"), atomic_create, local: None }
    }

    /// The underlying object store, for async callers.
    #[must_use]
    pub fn object_store(&self) -> &Arc<dyn ObjectStore> {
        &self.inner
    }

    /// The full object path of a key under the dataset root.
    #[must_use]
    pub fn path(&self, key: &str) -> Path {
        key.split('/').fold(self.prefix.clone(), object_store::path::Path::join)
    }

    /// The location this store was opened from.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether commits are possible: the backend creates objects atomically if absent `[VER-04]`.
    #[must_use]
    pub fn supports_commit(&self) -> bool {
        self.atomic_create
    }

    /// Whether `key` reaches a symbolic link on a local root, as the object itself or as a
    /// directory on its path: such a key names no object, and a LIST leaves it out `[LAY-11]`.
    fn linked(&self, key: &str) -> bool {
        let Some(root) = &self.local else { return false };
        let mut p = root.clone();
        key.split('/').filter(|s| !s.is_empty()).any(|seg| {
            p.push(seg);
            std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink())
        })
    }

    /// `not_found` for a key that reaches a symbolic link `[LAY-11]`.
    fn no_link(&self, key: &str) -> Result<()> {
        if self.linked(key) {
            return Err(Error::NotFound {
                what: format!("object {key} in {} (a symbolic link is no object)", self.url),
            });
        }
        Ok(())
    }

    fn io(&self, key: &str, e: object_store::Error) -> Error {
        match e {
            object_store::Error::NotFound { .. } => Error::NotFound { what: format!("object {key} in {}", self.url) },
            source => Error::Io { path: format!("{}/{key}", self.url), source },
        }
    }

    /// Reads a whole object of at most `max_len` bytes `[ENV-04]`.
    ///
    /// The size the store reports is checked before any body byte is read, and the body is
    /// collected with a running count, so a store that reports less than it sends (or a
    /// stream that never ends) costs at most `max_len` bytes of memory.
    ///
    /// # Errors
    /// `limit` for an object (or a body) larger than `max_len`; `not_found` if absent; `io`
    /// for a body shorter than the size the store reported, or any other failure.
    pub fn get_bounded(&self, key: &str, max_len: u64) -> Result<Bytes> {
        block_on(async { self.get_bounded_async(key, max_len).await })
    }

    /// Reads a whole object of at most `max_len` bytes (async).
    ///
    /// # Errors
    /// As [`Store::get_bounded`].
    pub async fn get_bounded_async(&self, key: &str, max_len: u64) -> Result<Bytes> {
        self.no_link(key)?;
        let r = self.inner.get(&self.path(key)).await.map_err(|e| self.io(key, e))?;
        let declared = r.meta.size;
        Error::check_limit(|| format!("object {key}: size"), max_len, declared)?;
        if let object_store::GetResultPayload::File(..) = &r.payload {
            // A local file: its size came from the file system and one read returns it.
            return r.bytes().await.map_err(|e| self.io(key, e));
        }
        self.collect_bounded(key, r.into_stream(), declared, max_len).await
    }

    /// The body of a GET, at most as long as the range the store says it answers: a longer
    /// body is refused as `limit` as it streams in, a shorter one is an `io` error.
    ///
    /// # Errors
    /// As described; `io` for a failed stream.
    pub async fn bounded_body(&self, key: &str, r: object_store::GetResult) -> Result<Bytes> {
        let want = r.range.end.saturating_sub(r.range.start);
        if let object_store::GetResultPayload::File(..) = &r.payload {
            return r.bytes().await.map_err(|e| self.io(key, e));
        }
        self.collect_bounded(key, r.into_stream(), want, want).await
    }

    /// Collects a body stream the store said is `expected` bytes long, refusing more than
    /// `max_len` bytes as `limit` and a short body as `io`; one chunk is returned without a copy.
    async fn collect_bounded(
        &self,
        key: &str,
        mut stream: futures::stream::BoxStream<'static, object_store::Result<Bytes>>,
        expected: u64,
        max_len: u64,
    ) -> Result<Bytes> {
        use futures::StreamExt;
        let mut first: Option<Bytes> = None;
        let mut buf: Option<bytes::BytesMut> = None;
        let mut total = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.io(key, e))?;
            total = total.saturating_add(chunk.len() as u64);
            Error::check_limit(|| format!("object {key}: body"), max_len.min(expected), total)?;
            match (&mut first, &mut buf) {
                (None, None) => first = Some(chunk),
                (Some(f), None) => {
                    // `expected` is at most `max_len`, checked by the caller.
                    let mut b = bytes::BytesMut::with_capacity(expected as usize);
                    b.extend_from_slice(f);
                    b.extend_from_slice(&chunk);
                    buf = Some(b);
                }
                (_, Some(b)) => b.extend_from_slice(&chunk),
            }
        }
        if total != expected {
            return Err(Error::Io {
                path: format!("{}/{key}", self.url),
                source: object_store::Error::Generic {
                    store: "tessera",
                    source: format!("the store announced {expected} bytes and sent {total}").into(),
                },
            });
        }
        Ok(match (first, buf) {
            (_, Some(b)) => b.freeze(),
            (Some(f), None) => f,
            (None, None) => Bytes::new(),
        })
    }

    /// Reads byte ranges of an object; nearby ranges are coalesced into one request.
    ///
    /// # Errors
    /// As [`Store::get_bounded`]; a range past the end is an error of the backend.
    pub fn get_ranges(&self, key: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        block_on(async { self.get_ranges_async(key, ranges).await })
    }

    /// Reads byte ranges of an object (async).
    ///
    /// # Errors
    /// As [`Store::get_ranges`].
    pub async fn get_ranges_async(&self, key: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        // Coalesce ranges closer than COALESCE into one request each, fetch those concurrently,
        // and check every body's length: a store that returns fewer bytes than asked yields an
        // `io` error, never a short slice or a panic.
        const COALESCE: u64 = 1 << 20;
        self.no_link(key)?;
        if ranges.is_empty() {
            return Ok(Vec::new());
        }
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        order.sort_by_key(|&i| ranges[i].start);
        let mut merged: Vec<Range<u64>> = Vec::new();
        for &i in &order {
            let r = &ranges[i];
            if r.start > r.end {
                return Err(Error::usage(format!("range {r:?} of {key} is reversed")));
            }
            if r.is_empty() {
                // An empty block (CMP-04) needs no request; several backends reject empty ranges.
                continue;
            }
            match merged.last_mut() {
                Some(m) if r.start <= m.end.saturating_add(COALESCE) => m.end = m.end.max(r.end),
                _ => merged.push(r.clone()),
            }
        }
        let path = self.path(key);
        let fetches = merged.iter().map(|m| {
            let path = path.clone();
            let m = m.clone();
            async move {
                let opts = GetOptions { range: Some(GetRange::Bounded(m.clone())), ..GetOptions::default() };
                let body = self.inner.get_opts(&path, opts).await.map_err(|e| self.io(key, e))?;
                // A body longer than the range asked for is refused as it streams in, a
                // shorter one is an `io` error: never a short slice, a panic or unbounded memory.
                let want = m.end - m.start;
                let bytes = if let object_store::GetResultPayload::File(..) = &body.payload {
                    body.bytes().await.map_err(|e| self.io(key, e))?
                } else {
                    self.collect_bounded(key, body.into_stream(), want, want).await?
                };
                if bytes.len() as u64 != want {
                    return Err(Error::Io {
                        path: format!("{}/{key}", self.url),
                        source: object_store::Error::Generic {
                            store: "tessera",
                            source: format!("asked for bytes {m:?}, got {}", bytes.len()).into(),
                        },
                    });
                }
                Ok::<_, Error>((m, bytes))
            }
        });
        let bodies = futures::future::try_join_all(fetches).await?;
        let mut out = vec![Bytes::new(); ranges.len()];
        for (i, r) in ranges.iter().enumerate().filter(|(_, r)| !r.is_empty()) {
            let (m, body) = bodies
                .iter()
                .find(|(m, _)| m.start <= r.start && r.end <= m.end)
                .ok_or_else(|| Error::usage("range lost in coalescing"))?;
            out[i] = body.slice((r.start - m.start) as usize..(r.end - m.start) as usize);
        }
        Ok(out)
    }

    /// Creates an object if no object has the key `[VER-04]`.
    ///
    /// # Errors
    /// `unsupported` when the backend cannot create atomically; `io` on failure.
    pub fn put_if_absent(&self, key: &str, bytes: Bytes) -> Result<Created> {
        block_on(async { self.put_if_absent_async(key, bytes).await })
    }

    /// Creates an object if absent (async).
    ///
    /// # Errors
    /// As [`Store::put_if_absent`].
    pub async fn put_if_absent_async(&self, key: &str, bytes: Bytes) -> Result<Created> {
        if !self.atomic_create {
            return Err(Error::unsupported(
                self.url.clone(),
                "this store cannot create objects atomically; commits are refused [VER-04]",
            ));
        }
        let opts = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        match self.inner.put_opts(&self.path(key), PutPayload::from_bytes(bytes), opts).await {
            Ok(_) => Ok(Created::New),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(Created::Existed),
            Err(e) => Err(self.io(key, e)),
        }
    }

    /// Lists the objects directly under `dir` (one LIST request, or a few pages): file names
    /// and sizes.
    ///
    /// # Errors
    /// `io` on failure.
    pub fn list(&self, dir: &str) -> Result<Vec<(String, u64)>> {
        block_on(self.list_async(dir))
    }

    /// Lists the objects directly under `dir` (async).
    ///
    /// # Errors
    /// As [`Store::list`].
    pub async fn list_async(&self, dir: &str) -> Result<Vec<(String, u64)>> {
        let p = self.path(dir);
        if self.linked(dir) {
            return Ok(Vec::new());
        }
        let listing = self.inner.list_with_delimiter(Some(&p)).await.map_err(|e| self.io(dir, e))?;
        Ok(listing
            .objects
            .into_iter()
            .filter_map(|m| m.location.filename().map(|n| (n.to_string(), m.size)))
            .filter(|(n, _)| !self.linked(&format!("{dir}/{n}")))
            .collect())
    }

    /// Lists the sub-directories directly under `dir`.
    ///
    /// # Errors
    /// `io` on failure.
    pub fn list_dirs(&self, dir: &str) -> Result<Vec<String>> {
        block_on(self.list_dirs_async(dir))
    }

    /// Lists the sub-directories directly under `dir` (async).
    ///
    /// # Errors
    /// As [`Store::list_dirs`].
    pub async fn list_dirs_async(&self, dir: &str) -> Result<Vec<String>> {
        let p = self.path(dir);
        let listing = self.inner.list_with_delimiter(Some(&p)).await.map_err(|e| self.io(dir, e))?;
        Ok(listing.common_prefixes.into_iter().filter_map(|m| m.filename().map(str::to_string)).collect())
    }

    /// Lists every object under `dir` recursively: key relative to the root, size and
    /// last-modified time.
    ///
    /// # Errors
    /// `io` on failure.
    pub fn list_with_times(&self, dir: &str) -> Result<Vec<(String, u64, std::time::SystemTime)>> {
        block_on(self.list_with_times_async(dir))
    }

    /// Lists every object under `dir` recursively, with times (async).
    ///
    /// # Errors
    /// As [`Store::list_with_times`].
    pub async fn list_with_times_async(&self, dir: &str) -> Result<Vec<(String, u64, std::time::SystemTime)>> {
        let p = self.path(dir);
        let root = self.prefix.as_ref().len();
        let items: Vec<_> = self.inner.list(Some(&p)).try_collect().await.map_err(|e| self.io(dir, e))?;
        Ok(items
            .into_iter()
            .map(|m| {
                let full = m.location.as_ref();
                let rel = full.get(root..).unwrap_or(full).trim_start_matches('/').to_string();
                (rel, m.size, std::time::SystemTime::from(m.last_modified))
            })
            .filter(|(rel, _, _)| !self.linked(rel))
            .collect())
    }

    /// Deletes an object (absent objects are not an error).
    ///
    /// # Errors
    /// `io` on failure.
    pub fn delete(&self, key: &str) -> Result<()> {
        block_on(self.delete_async(key))
    }

    /// Deletes an object (async; absent objects are not an error).
    ///
    /// # Errors
    /// As [`Store::delete`].
    pub async fn delete_async(&self, key: &str) -> Result<()> {
        match self.inner.delete(&self.path(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.io(key, e)),
        }
    }

    /// Lists every object key (relative to the root) under `dir`, recursively.
    ///
    /// # Errors
    /// `io` on failure.
    pub fn list_recursive(&self, dir: &str) -> Result<Vec<(String, u64)>> {
        Ok(self.list_with_times(dir)?.into_iter().map(|(key, size, _)| (key, size)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty range (an empty block, CMP-04) is served without a request: `InMemory`, like
    /// HTTP range requests, rejects empty ranges (fuzz finding TFZ-3).
    #[test]
    fn empty_ranges_need_no_request() {
        let store = Store::open("memory://").unwrap();
        store.put_if_absent("obj", Bytes::from_static(b"abcdef")).unwrap();
        let got = store.get_ranges("obj", &[0..0, 2..4, 6..6, 1..3]).unwrap();
        assert_eq!(got, vec![Bytes::new(), Bytes::from_static(b"cd"), Bytes::new(), Bytes::from_static(b"bc")]);
        assert_eq!(store.get_ranges("obj", &[3..3, 0..0]).unwrap(), vec![Bytes::new(), Bytes::new()]);
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = [4..2, 0..1];
        assert!(store.get_ranges("obj", &reversed).is_err(), "a reversed range is a usage error");
    }
}
