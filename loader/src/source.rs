//! Where page bytes come from, and retrying what failed transiently.
//!
//! * [`Source::Local`]: the store is a local directory. Files stay open and bytes are read
//!   with positioned reads (`pread`, [`FileExt::read_exact_at`]) straight into the caller's
//!   buffer, which is usually the batch tensor's slot itself.
//! * [`Source::Object`]: any `object_store` backend through the reference [`tessera::Store`];
//!   all the ranges one data file contributes to a batch go out as one `get_ranges` call, which
//!   coalesces nearby ranges into few requests and runs them in parallel.
//!
//! Both retry transient failures with exponential backoff and full jitter ([`RetryPolicy`]).

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

use crate::config::RetryPolicy;
use crate::error::{LoaderError, Result};

/// Files kept open by a local source before the handle cache is flushed.
const MAX_OPEN_FILES: usize = 256;

/// The outcome of one attempt, as the retry loop sees it.
#[derive(Debug)]
pub(crate) enum Attempt {
    /// Worth retrying (network, throttling, interrupted I/O).
    Transient(Box<dyn std::error::Error + Send + Sync>),
    /// Retrying cannot help.
    Fatal(LoaderError),
}

/// Counters of storage traffic.
#[derive(Debug, Default)]
pub(crate) struct IoCounters {
    pub(crate) requests: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) retries: AtomicU64,
}

/// A snapshot of storage traffic since the loader opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoStats {
    /// Read calls issued (one `get_ranges` or one positioned read each).
    pub requests: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Attempts repeated after a transient failure.
    pub retries: u64,
}

/// Runs `attempt` until it succeeds, fails fatally, or `policy.max_retries` retries are spent.
///
/// # Errors
/// The fatal error, [`LoaderError::Storage`] with the last transient error, or
/// [`LoaderError::Stopped`] if `stopped` is set during a backoff.
pub(crate) fn with_retry<T>(
    policy: &RetryPolicy,
    stopped: &AtomicBool,
    counters: &IoCounters,
    what: &dyn Fn() -> String,
    mut attempt: impl FnMut() -> std::result::Result<T, Attempt>,
) -> Result<T> {
    let mut retry = 0u32;
    loop {
        match attempt() {
            Ok(v) => return Ok(v),
            Err(Attempt::Fatal(e)) => return Err(e),
            Err(Attempt::Transient(e)) if retry >= policy.max_retries => {
                return Err(LoaderError::Storage { path: what(), attempts: retry + 1, source: e });
            }
            Err(Attempt::Transient(_)) => {
                let bound = policy.backoff_bound(retry);
                let sleep = bound.mul_f64(jitter());
                let step = Duration::from_millis(10);
                let mut slept = Duration::ZERO;
                while slept < sleep {
                    if stopped.load(Ordering::Acquire) {
                        return Err(LoaderError::Stopped);
                    }
                    let d = step.min(sleep.saturating_sub(slept));
                    std::thread::sleep(d);
                    slept += d;
                }
                retry += 1;
                counters.retries.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A uniform value in `[0, 1)` for backoff jitter (not part of any data order).
fn jitter() -> f64 {
    use std::hash::{BuildHasher, RandomState};
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let h = RandomState::new().hash_one(nanos);
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Classifies a reference-reader error for retrying: storage errors are transient unless
/// they say the object is missing or access is refused; everything else is fatal.
pub(crate) fn classify(context: &str, e: tessera::Error) -> Attempt {
    match e {
        tessera::Error::Io { source, path } => match source {
            object_store::Error::NotFound { .. }
            | object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. }
            | object_store::Error::NotImplemented { .. }
            | object_store::Error::NotSupported { .. }
            | object_store::Error::InvalidPath { .. } => {
                Attempt::Fatal(LoaderError::dataset(context, tessera::Error::Io { path, source }))
            }
            source => Attempt::Transient(Box::new(tessera::Error::Io { path, source })),
        },
        other => Attempt::Fatal(crate::error::from_format(context, other)),
    }
}

fn classify_io(path: &str, e: std::io::Error) -> Attempt {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::NotFound | K::PermissionDenied => {
            Attempt::Fatal(LoaderError::Storage { path: path.to_string(), attempts: 1, source: Box::new(e) })
        }
        K::UnexpectedEof => Attempt::Fatal(LoaderError::corrupt(path, "file is shorter than its footer says")),
        _ => Attempt::Transient(Box::new(e)),
    }
}

/// Reads from a local dataset directory with positioned reads on kept-open files.
#[derive(Debug)]
pub(crate) struct LocalSource {
    root: PathBuf,
    files: Mutex<HashMap<String, Arc<File>>>,
}

impl LocalSource {
    fn file(&self, key: &str) -> std::io::Result<Arc<File>> {
        let mut files = self.files.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(f) = files.get(key) {
            return Ok(f.clone());
        }
        if files.len() >= MAX_OPEN_FILES {
            files.clear();
        }
        let f = Arc::new(File::open(self.root.join(key))?);
        files.insert(key.to_string(), f.clone());
        Ok(f)
    }
}

/// A dataset's byte source.
#[derive(Debug)]
pub(crate) enum Source {
    /// A local directory (positioned reads).
    Local(LocalSource),
    /// Any object store (range GETs).
    Object(tessera::Store),
}

impl Source {
    /// A local source when `location` is a plain path or a `file://` URL, otherwise the
    /// object store behind `store`.
    pub(crate) fn for_location(location: &str, store: &tessera::Store) -> Self {
        let local = match location.split_once("://") {
            None => Some(PathBuf::from(location)),
            Some(("file", _)) => url_path(location),
            Some(_) => None,
        };
        match local {
            Some(root) if root.is_dir() => Source::Local(LocalSource { root, files: Mutex::new(HashMap::new()) }),
            _ => Source::Object(store.clone()),
        }
    }

    /// True for the local fast path.
    pub(crate) fn is_local(&self) -> bool {
        matches!(self, Source::Local(_))
    }
}

/// The path of a `file://` URL (no percent-decoding beyond what plain paths need).
fn url_path(location: &str) -> Option<PathBuf> {
    let rest = location.strip_prefix("file://")?;
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    path.starts_with('/').then(|| PathBuf::from(path))
}

/// A source with its retry policy and counters.
#[derive(Debug)]
pub(crate) struct Fetcher {
    pub(crate) source: Source,
    pub(crate) retry: RetryPolicy,
    pub(crate) counters: IoCounters,
}

impl Fetcher {
    pub(crate) fn new(source: Source, retry: RetryPolicy) -> Self {
        Self { source, retry, counters: IoCounters::default() }
    }

    pub(crate) fn is_local(&self) -> bool {
        self.source.is_local()
    }

    pub(crate) fn stats(&self) -> IoStats {
        IoStats {
            requests: self.counters.requests.load(Ordering::Relaxed),
            bytes: self.counters.bytes.load(Ordering::Relaxed),
            retries: self.counters.retries.load(Ordering::Relaxed),
        }
    }

    /// Reads `dst.len()` bytes of object `key` at `offset` into `dst`.
    ///
    /// # Errors
    /// Storage errors after retries; [`LoaderError::Corrupt`] for a short file.
    pub(crate) fn read_into(&self, key: &str, offset: u64, dst: &mut [u8], stopped: &AtomicBool) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let end = offset + dst.len() as u64;
        match &self.source {
            Source::Local(local) => with_retry(&self.retry, stopped, &self.counters, &|| key.to_string(), || {
                self.counters.requests.fetch_add(1, Ordering::Relaxed);
                let f = local.file(key).map_err(|e| classify_io(key, e))?;
                f.read_exact_at(dst, offset).map_err(|e| classify_io(key, e))?;
                self.counters.bytes.fetch_add(dst.len() as u64, Ordering::Relaxed);
                Ok(())
            }),
            Source::Object(_) => {
                let got = self.fetch(key, std::slice::from_ref(&(offset..end)), stopped)?;
                let bytes = got.first().map_or(&[][..], Bytes::as_ref);
                if bytes.len() != dst.len() {
                    return Err(LoaderError::corrupt(key, "storage returned fewer bytes than asked"));
                }
                dst.copy_from_slice(bytes);
                Ok(())
            }
        }
    }

    /// Runs several [`Fetcher::fetch`] calls (object, ranges) at once, each with its own
    /// retries, and returns their bodies in order. The calls block on storage, not on the CPU,
    /// so each runs on a scoped thread of its own: a batch that touches many files waits
    /// about one round trip instead of one per file.
    ///
    /// # Errors
    /// The first failed call's error (in request order).
    pub(crate) fn fetch_many(
        &self,
        requests: &[(&str, &[Range<u64>])],
        stopped: &AtomicBool,
    ) -> Result<Vec<Vec<Bytes>>> {
        if let [(key, ranges)] = requests {
            return Ok(vec![self.fetch(key, ranges, stopped)?]);
        }
        std::thread::scope(|scope| {
            let handles: Vec<_> =
                requests.iter().map(|(key, ranges)| scope.spawn(move || self.fetch(key, ranges, stopped))).collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| Err(LoaderError::WorkerPanicked("a storage request panicked".into())))
                })
                .collect()
        })
    }

    /// Reads byte ranges of object `key` in one call (the object store coalesces them).
    ///
    /// # Errors
    /// Storage errors after retries; [`LoaderError::Corrupt`] when a range comes back short.
    pub(crate) fn fetch(&self, key: &str, ranges: &[Range<u64>], stopped: &AtomicBool) -> Result<Vec<Bytes>> {
        if ranges.is_empty() {
            return Ok(Vec::new());
        }
        let got = match &self.source {
            Source::Local(local) => with_retry(&self.retry, stopped, &self.counters, &|| key.to_string(), || {
                let f = local.file(key).map_err(|e| classify_io(key, e))?;
                let mut out = Vec::with_capacity(ranges.len());
                for r in ranges {
                    self.counters.requests.fetch_add(1, Ordering::Relaxed);
                    let mut buf = vec![0u8; (r.end - r.start) as usize];
                    f.read_exact_at(&mut buf, r.start).map_err(|e| classify_io(key, e))?;
                    out.push(Bytes::from(buf));
                }
                Ok(out)
            })?,
            Source::Object(store) => with_retry(&self.retry, stopped, &self.counters, &|| key.to_string(), || {
                self.counters.requests.fetch_add(1, Ordering::Relaxed);
                store.get_ranges(key, ranges).map_err(|e| classify(key, e))
            })?,
        };
        if got.len() != ranges.len() || got.iter().zip(ranges).any(|(b, r)| b.len() as u64 != r.end - r.start) {
            return Err(LoaderError::corrupt(key, "storage returned ranges of the wrong length"));
        }
        let total: u64 = got.iter().map(|b| b.len() as u64).sum();
        self.counters.bytes.fetch_add(total, Ordering::Relaxed);
        Ok(got)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_errors_are_retried_then_reported() {
        let policy =
            RetryPolicy { max_retries: 3, initial_backoff: Duration::from_millis(1), ..RetryPolicy::default() };
        let stop = AtomicBool::new(false);
        let counters = IoCounters::default();
        let mut calls = 0;
        let r = with_retry(&policy, &stop, &counters, &|| "k".into(), || {
            calls += 1;
            if calls < 3 { Err(Attempt::Transient("flaky".into())) } else { Ok(calls) }
        });
        assert_eq!(r.unwrap(), 3);
        assert_eq!(counters.retries.load(Ordering::Relaxed), 2);
        let r: Result<()> =
            with_retry(&policy, &stop, &counters, &|| "k".into(), || Err(Attempt::Transient("down".into())));
        assert!(matches!(r, Err(LoaderError::Storage { attempts: 4, .. })));
        let mut calls = 0;
        let r: Result<()> = with_retry(&policy, &stop, &counters, &|| "k".into(), || {
            calls += 1;
            Err(Attempt::Fatal(LoaderError::config("no")))
        });
        assert!(matches!(r, Err(LoaderError::Config(_))));
        assert_eq!(calls, 1);
    }

    #[test]
    fn local_reads_are_positioned() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("data")).unwrap();
        std::fs::write(dir.path().join("data/f.tsd"), (0u8..100).collect::<Vec<_>>()).unwrap();
        let loc = dir.path().to_str().unwrap();
        let store = tessera::Store::open(loc).unwrap();
        let f = Fetcher::new(Source::for_location(loc, &store), RetryPolicy::default());
        assert!(f.is_local());
        let stop = AtomicBool::new(false);
        let mut buf = [0u8; 4];
        f.read_into("data/f.tsd", 10, &mut buf, &stop).unwrap();
        assert_eq!(buf, [10, 11, 12, 13]);
        let got = f.fetch("data/f.tsd", &[0..2, 98..100], &stop).unwrap();
        assert_eq!((got[0].as_ref(), got[1].as_ref()), (&[0u8, 1][..], &[98u8, 99][..]));
        assert!(matches!(f.read_into("data/f.tsd", 99, &mut buf, &stop), Err(LoaderError::Corrupt { .. })));
        assert!(matches!(f.read_into("data/none.tsd", 0, &mut buf, &stop), Err(LoaderError::Storage { .. })));
        let obj = Fetcher::new(Source::Object(store), RetryPolicy::default());
        obj.read_into("data/f.tsd", 10, &mut buf, &stop).unwrap();
        assert_eq!(buf, [10, 11, 12, 13]);
    }
}
