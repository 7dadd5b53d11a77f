//! Where page bytes come from, and retrying what failed transiently.
//!
//! * [`Source::Local`]: the store is a local directory. Files stay open and bytes are read
//!   with positioned reads (`pread`, [`FileExt::read_exact_at`]) straight into the caller's
//!   buffer, which is usually the batch tensor's slot itself.
//! * [`Source::Object`]: any `object_store` backend through the reference [`tessera::Store`].
//!   A batch's range GETs ([`RangeRequest`]) are futures the worker drives together on the
//!   loader's runtime ([`Fetcher::run_requests`], [`crate::io`]); each body lands where its caller said (batch
//!   slots, a reused staging arena), and [`LinkModel`] measures latency and bandwidth to size
//!   the gaps worth coalescing. Data-file indexes still go through one `get_ranges` call.
//!
//! With a node-local disk cache (`LoaderConfig::with_cache_dir`), an object store's data-file
//! reads go through `crate::disk_cache` instead: whole cache blocks are fetched once
//! ([`Fetcher::get_body`]) and later served from disk; a local source never uses it.
//!
//! Both retry transient failures with exponential backoff and full jitter ([`RetryPolicy`]).
//! Time a thread spends waiting on an object store is summed per thread ([`WaitTimer`]), for
//! the pipeline's self-tuned depth (`crate::depth`).

use std::cell::Cell;
use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use object_store::{GetOptions, GetRange, GetResultPayload};
use tessera::datafile::Block;

use crate::config::RetryPolicy;
use crate::depth::DepthModel;
use crate::disk_cache::{CacheStats, DiskCache};
use crate::error::{LoaderError, Result};
use crate::flight::FlightLimit;

/// Files kept open by a local source before the handle cache is flushed.
const MAX_OPEN_FILES: usize = 256;
/// Cache blocks fetched at once for [`Fetcher::fetch`] through the disk cache (a data file's
/// index blocks: a few, usually in one block).
const FETCH_CONCURRENCY: usize = 16;

/// The outcome of one attempt, as the retry loop sees it.
#[derive(Debug)]
pub(crate) enum Attempt {
    /// Worth retrying (network, throttling, interrupted I/O).
    Transient(Box<dyn std::error::Error + Send + Sync>),
    /// Retrying cannot help.
    Fatal(LoaderError),
}

thread_local! {
    /// Time this thread spent in object-store calls since [`take_waited`] last ran.
    static WAITED: Cell<Duration> = const { Cell::new(Duration::ZERO) };
    /// [`WaitTimer`]s running on this thread: only the outermost one counts.
    static TIMING: Cell<u32> = const { Cell::new(0) };
}

/// Returns and resets the time the calling thread spent waiting on an object store.
pub(crate) fn take_waited() -> Duration {
    WAITED.with(|w| w.replace(Duration::ZERO))
}

/// Adds the time from its start to its drop to the calling thread's waiting time, unless
/// another timer already runs on the thread: a worker that drives several requests' futures
/// at once waits once, however many of them wait inside.
pub(crate) struct WaitTimer(Option<Instant>);

impl WaitTimer {
    pub(crate) fn start() -> Self {
        let outermost = TIMING.with(|t| t.replace(t.get() + 1)) == 0;
        Self(outermost.then(Instant::now))
    }
}

impl Drop for WaitTimer {
    fn drop(&mut self) {
        TIMING.with(|t| t.set(t.get().saturating_sub(1)));
        if let Some(t0) = self.0 {
            let d = t0.elapsed();
            WAITED.with(|w| w.set(w.get() + d));
        }
    }
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
    /// Storage requests issued: one positioned read each on local files, one range GET
    /// (attempt) each on object stores; opening a data file's footer is not counted.
    pub requests: u64,
    /// Bytes read from storage, including the gaps a coalesced range GET streams past.
    pub bytes: u64,
    /// Attempts repeated after a transient failure.
    pub retries: u64,
    /// Object stores: the self-tuned pipeline depth (batches claimed and not yet delivered)
    /// the last epoch ran at; 0 on local files, whose depth is `prefetch_batches`.
    pub depth: u64,
    /// Object stores with streamed bodies: the adapted limit of requests in flight across
    /// the loader's threads (it shrinks while requests queue at the server).
    pub in_flight_limit: u64,
    /// Filling threads the last epoch started: on local files `workers`; on an object store
    /// as many as its self-tuned depth asked for (at most as many as the budget holds batches
    /// in flight, and 128). Data files are opened and range GETs driven as futures on these
    /// threads, on the loader's runtime: no thread per file or request.
    pub threads: u64,
    /// The node-local disk cache's traffic (all zero without one, and on local files).
    /// `requests` and `bytes` above count only what reached the store.
    pub cache: CacheStats,
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
            Err(failed) => backoff_sleep(after_failure(policy, counters, &mut retry, failed, what)?, stopped)?,
        }
    }
}

/// [`with_retry`] for async attempts: the backoff is a timer, not a sleeping thread.
///
/// # Errors
/// As [`with_retry`].
pub(crate) async fn with_retry_async<T, F: Future<Output = std::result::Result<T, Attempt>>>(
    policy: &RetryPolicy,
    stopped: &AtomicBool,
    counters: &IoCounters,
    what: &dyn Fn() -> String,
    mut attempt: impl FnMut() -> F,
) -> Result<T> {
    let mut retry = 0u32;
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(failed) => backoff_wait(after_failure(policy, counters, &mut retry, failed, what)?, stopped).await?,
        }
    }
}

/// The retry policy's answer to failed attempt number `retry`: the backoff before the next
/// attempt (counted as a retry), or the error to report.
fn after_failure(
    policy: &RetryPolicy,
    counters: &IoCounters,
    retry: &mut u32,
    failed: Attempt,
    what: &dyn Fn() -> String,
) -> Result<Duration> {
    match failed {
        Attempt::Fatal(e) => Err(e),
        Attempt::Transient(e) if *retry >= policy.max_retries => {
            Err(LoaderError::Storage { path: what(), attempts: *retry + 1, source: e })
        }
        Attempt::Transient(_) => {
            let sleep = policy.backoff_bound(*retry).mul_f64(jitter());
            *retry += 1;
            counters.retries.fetch_add(1, Ordering::Relaxed);
            Ok(sleep)
        }
    }
}

/// Copies the part of `chunk` (at offset `pos` of its body) that each destination wants.
pub(crate) fn scatter(dests: &mut [Dest<'_>], pos: u64, chunk: &[u8]) {
    let end = pos + chunk.len() as u64;
    for d in dests {
        if d.off >= end {
            break;
        }
        let d_end = d.end();
        if d_end <= pos {
            continue;
        }
        let from = pos.max(d.off);
        let to = end.min(d_end);
        let n = (to - from) as usize;
        let src_at = (from - pos) as usize;
        let dst_at = (from - d.off) as usize;
        d.buf[dst_at..dst_at + n].copy_from_slice(&chunk[src_at..src_at + n]);
    }
}

/// `sleep` cut into steps of at most 10 ms, between which a backoff checks for a stop.
fn backoff_steps(sleep: Duration) -> impl Iterator<Item = Duration> {
    const STEP: Duration = Duration::from_millis(10);
    let steps = u32::try_from(sleep.as_nanos().div_ceil(STEP.as_nanos())).unwrap_or(u32::MAX);
    (0..steps).map(move |i| STEP.min(sleep.saturating_sub(STEP.saturating_mul(i))))
}

/// Sleeps for `sleep` in steps of 10 ms, returning [`LoaderError::Stopped`] as soon as the
/// epoch is stopped, so a shutdown never waits out a long backoff.
pub(crate) fn backoff_sleep(sleep: Duration, stopped: &AtomicBool) -> Result<()> {
    for step in backoff_steps(sleep) {
        if stopped.load(Ordering::Acquire) {
            return Err(LoaderError::Stopped);
        }
        std::thread::sleep(step);
    }
    Ok(())
}

/// [`backoff_sleep`] on the loader runtime's timer, for async callers.
pub(crate) async fn backoff_wait(sleep: Duration, stopped: &AtomicBool) -> Result<()> {
    for step in backoff_steps(sleep) {
        if stopped.load(Ordering::Acquire) {
            return Err(LoaderError::Stopped);
        }
        tokio::time::sleep(step).await;
    }
    Ok(())
}

/// A uniform value in `[0, 1)` for backoff jitter (not part of any data order).
pub(crate) fn jitter() -> f64 {
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

pub(crate) fn classify_io(path: &str, e: std::io::Error) -> Attempt {
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

/// Coalescing gap used until a request has been measured.
pub(crate) const DEFAULT_GAP: u64 = 1 << 20;
/// Bounds of the measured coalescing gap.
const MIN_GAP: u64 = 64 << 10;
const MAX_GAP: u64 = 4 << 20;
/// Requests per window of the latency minimum: long enough to remember the idle round trip
/// while requests queue (the in-flight limit then shrinks until they do not).
const LATENCY_WINDOW: u32 = 1024;
/// Bodies at least this long update the measured transfer rate.
const RATE_SAMPLE_MIN: u64 = 64 << 10;

/// The measured cost of an object-store request: time to the first byte (latency) and the
/// body's transfer rate. Reading a gap between two wanted ranges is cheaper than another round
/// trip while the gap is shorter than latency × bandwidth.
///
/// The latency is the smallest first-byte time of the recent requests (the round trip of an
/// idle link, as BBR measures it), not their average: when the server or the link is the
/// bottleneck, requests queue and their first-byte times grow, and an average would then
/// widen the gap and spend the scarce bandwidth on bytes nobody wants. The rate is a moving
/// average of body transfer rates.
#[derive(Debug, Default)]
pub(crate) struct LinkModel {
    state: Mutex<LinkState>,
}

#[derive(Clone, Copy, Debug, Default)]
struct LinkState {
    /// Smallest first-byte time of the current window of [`LATENCY_WINDOW`] requests, and
    /// of the window before it; the latency is the smaller of the two.
    min_now_s: f64,
    min_prev_s: f64,
    rate: f64,
    latencies: u32,
    rates: u32,
    /// The last body was a local file handle (`object_store`'s file system): the loader
    /// reads only the wanted pieces, so a gap costs nothing.
    file_bodies: bool,
}

impl LinkState {
    /// The idle round trip in seconds: the smaller of the two windows' minimums.
    fn idle_s(&self) -> f64 {
        self.min_now_s.min(self.min_prev_s)
    }
}

impl LinkModel {
    fn observe(&self, first_byte: Duration, body: u64, body_time: Duration, file_body: bool) {
        const ALPHA: f64 = 0.2;
        let mut s = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        s.file_bodies = file_body;
        let l = first_byte.as_secs_f64();
        if s.latencies.is_multiple_of(LATENCY_WINDOW) {
            // A new window: the minimum forgets requests two windows old (a link that got
            // slower is followed within two windows).
            s.min_prev_s = if s.latencies == 0 { l } else { s.min_now_s };
            s.min_now_s = l;
        } else {
            s.min_now_s = s.min_now_s.min(l);
        }
        s.latencies = s.latencies.saturating_add(1);
        if body >= RATE_SAMPLE_MIN && !body_time.is_zero() {
            let r = body as f64 / body_time.as_secs_f64();
            s.rate = if s.rates == 0 { r } else { s.rate + ALPHA * (r - s.rate) };
            s.rates = s.rates.saturating_add(1);
        }
    }

    /// Whether gaps cost nothing: the store answers with local file handles, and the loader
    /// reads only the wanted pieces of a coalesced range (one request per file and wave).
    pub(crate) fn gaps_free(&self) -> bool {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).file_bodies
    }

    /// The link's idle round trip: the smallest first-byte time of the recent requests
    /// (`None` before the first).
    pub(crate) fn idle_latency(&self) -> Option<Duration> {
        let s = *self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let l = s.idle_s();
        (s.latencies > 0 && l.is_finite() && l >= 0.0).then(|| Duration::from_secs_f64(l))
    }

    /// Idle round trip × bandwidth in bytes, within `[MIN_GAP, MAX_GAP]`; [`DEFAULT_GAP`]
    /// before anything was measured. With `slot_rate` (bytes per second one request in flight
    /// gets when many share the link), that rate replaces a single body's rate where lower.
    pub(crate) fn gap_bytes_at(&self, slot_rate: Option<f64>) -> u64 {
        let s = *self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if s.latencies == 0 || s.rates == 0 {
            return DEFAULT_GAP;
        }
        let rate = slot_rate.map_or(s.rate, |r| r.min(s.rate));
        let product = s.idle_s() * rate;
        if product.is_finite() { (product as u64).clamp(MIN_GAP, MAX_GAP) } else { MAX_GAP }
    }
}

/// Where the body of [`Fetcher::get_body`] goes, in order.
pub(crate) trait BodySink {
    /// The body will be `len` bytes (called once, before any chunk).
    ///
    /// # Errors
    /// A fatal attempt when the body cannot serve what the caller wants.
    fn start(&mut self, len: u64) -> std::result::Result<(), Attempt>;
    /// The next `bytes` of the body, at offset `pos` of the range.
    fn chunk(&mut self, pos: u64, bytes: &[u8]);
}

/// One range GET of an object whose body lands in place: `dests` ascend by offset; bytes no
/// destination wants are skipped (streamed past, or never read from a local file).
pub(crate) struct RangeRequest<'a> {
    pub(crate) key: &'a str,
    pub(crate) range: Range<u64>,
    pub(crate) dests: Vec<Dest<'a>>,
}

/// Where part of a range GET's body lands: `buf.len()` bytes from `off` bytes into the range.
///
/// A destination that holds one whole stored block carries it in `check`: its checksum is
/// verified the moment the bytes land, while they are still in cache, instead of in a second
/// pass over the whole wave once it has landed (and left the cache). `verified` records a
/// pass; a mismatch leaves it false, and the caller's own check reports the fault.
pub(crate) struct Dest<'a> {
    pub(crate) off: u64,
    pub(crate) buf: &'a mut [u8],
    pub(crate) check: Option<&'a Block>,
    pub(crate) verified: bool,
}

impl<'a> Dest<'a> {
    /// A destination whose bytes are not verified on landing.
    pub(crate) fn new(off: u64, buf: &'a mut [u8]) -> Self {
        Self { off, buf, check: None, verified: false }
    }

    pub(crate) fn end(&self) -> u64 {
        self.off + self.buf.len() as u64
    }

    /// Verifies the landed bytes against `check` (the reference's rule), if any.
    pub(crate) fn landed(&mut self) {
        if let Some(block) = self.check {
            self.verified = tessera::datafile::verify_block(block, self.buf, true, &String::new).is_ok();
        }
    }
}

/// The bookkeeping of jobs driven concurrently in rounds, each failed one tried again after a
/// backoff (range GETs, [`Fetcher::run_direct`]; disk-cache blocks, `disk_cache.rs`): which are
/// done and how often each was tried. The caller runs the pending jobs of a round; [`Rounds::settle`]
/// takes their outcomes.
pub(crate) struct Rounds {
    /// Whether job `i` has succeeded.
    pub(crate) done: Vec<bool>,
    tries: Vec<u32>,
}

impl Rounds {
    pub(crate) fn new(jobs: usize) -> Self {
        Self { done: vec![false; jobs], tries: vec![0; jobs] }
    }

    /// Records one round's outcomes: `Ok(None)` when every job is done; otherwise the
    /// backoff of the most-tried failed job, to wait before another round.
    ///
    /// # Errors
    /// A fatal outcome; a job out of retries (`Storage`, naming `key(i)`).
    pub(crate) fn settle(
        &mut self,
        f: &Fetcher,
        results: Vec<(usize, std::result::Result<(), Attempt>)>,
        key: &dyn Fn(usize) -> String,
    ) -> Result<Option<Duration>> {
        let mut worst = None;
        for (i, r) in results {
            match r {
                Ok(()) => self.done[i] = true,
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Transient(e)) => {
                    if self.tries[i] >= f.retry.max_retries {
                        return Err(LoaderError::Storage { path: key(i), attempts: self.tries[i] + 1, source: e });
                    }
                    self.tries[i] += 1;
                    f.counters.retries.fetch_add(1, Ordering::Relaxed);
                    worst = worst.max(Some(self.tries[i] - 1));
                }
            }
        }
        Ok(worst.map(|retry| f.retry.backoff_bound(retry).mul_f64(jitter())))
    }
}

/// A source with its retry policy and counters.
#[derive(Debug)]
pub(crate) struct Fetcher {
    pub(crate) source: Source,
    pub(crate) retry: RetryPolicy,
    pub(crate) counters: IoCounters,
    /// Measured request latency and bandwidth (object stores).
    pub(crate) link: LinkModel,
    /// Measured fill and service time per batch: the self-tuned pipeline depth (object stores).
    pub(crate) depth: DepthModel,
    /// Streamed object-store requests in flight, adapted to the link.
    pub(crate) flight: FlightLimit,
    /// The node-local disk cache of data-file bytes (object stores, when configured).
    pub(crate) cache: Option<DiskCache>,
    /// Filling threads the last epoch started ([`IoStats::threads`]).
    pub(crate) threads: AtomicU64,
    /// Whether the last epoch this loader finished read every byte from the disk cache
    /// (no store request, no miss): the next epoch then runs as on local files.
    cache_warm: AtomicBool,
}

/// Where an epoch started, for [`Fetcher::note_epoch`]: store requests, cache misses of any
/// kind (misses, direct reads, corrupt entries, cache failures) and cache hits so far.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Warmth {
    requests: u64,
    misses: u64,
    hits: u64,
}

impl Fetcher {
    pub(crate) fn new(source: Source, retry: RetryPolicy) -> Self {
        Self {
            source,
            retry,
            counters: IoCounters::default(),
            link: LinkModel::default(),
            depth: DepthModel::default(),
            flight: FlightLimit::default(),
            cache: None,
            threads: AtomicU64::new(0),
            cache_warm: AtomicBool::new(false),
        }
    }

    /// True when the last epoch this loader finished was served by the disk cache alone
    /// ([`Fetcher::note_epoch`]).
    pub(crate) fn cache_warm(&self) -> bool {
        self.cache_warm.load(Ordering::Acquire)
    }

    /// The counters an epoch starts at (`None` without a disk cache).
    pub(crate) fn warmth(&self) -> Option<Warmth> {
        let c = self.cache.as_ref()?.stats();
        Some(Warmth {
            requests: self.counters.requests.load(Ordering::Relaxed),
            misses: c.misses + c.direct + c.corrupt + c.errors,
            hits: c.hits,
        })
    }

    /// Records how an epoch that started at `from` went: any store request or cache miss
    /// since makes the cache cold for the next epoch; an epoch `finished` on cache hits alone
    /// makes it warm.
    pub(crate) fn note_epoch(&self, from: Warmth, finished: bool) {
        let Some(now) = self.warmth() else { return };
        if now.requests > from.requests || now.misses > from.misses {
            self.cache_warm.store(false, Ordering::Release);
        } else if finished && now.hits > from.hits {
            self.cache_warm.store(true, Ordering::Release);
        }
    }

    /// Serves the object store's data-file reads through `cache` (a local source ignores it:
    /// its files are on this machine already).
    pub(crate) fn with_cache(mut self, cache: DiskCache) -> Self {
        if !self.is_local() {
            self.cache = Some(cache);
        }
        self
    }

    pub(crate) fn is_local(&self) -> bool {
        self.source.is_local()
    }

    /// The coalescing gap of object-store range GETs: the idle round trip × the rate one
    /// request in flight gets (see [`LinkModel`] and `crate::flight`).
    pub(crate) fn gap_bytes(&self) -> u64 {
        self.link.gap_bytes_at(self.flight.slot_rate())
    }

    pub(crate) fn stats(&self) -> IoStats {
        IoStats {
            requests: self.counters.requests.load(Ordering::Relaxed),
            bytes: self.counters.bytes.load(Ordering::Relaxed),
            retries: self.counters.retries.load(Ordering::Relaxed),
            depth: self.depth.last() as u64,
            in_flight_limit: self.flight.limit() as u64,
            threads: self.threads.load(Ordering::Relaxed),
            cache: self.cache.as_ref().map(DiskCache::stats).unwrap_or_default(),
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

    /// Runs range GETs on an object store, at most `concurrency` at a time, landing every
    /// body in its destinations. The requests are futures driven together by the calling
    /// worker on the loader's runtime (no thread or blocking-pool hop per request beyond what
    /// the backend itself does); a request that fails transiently is repeated, alone, after
    /// a backoff, until the retry policy is spent.
    ///
    /// # Errors
    /// The first fatal error; [`LoaderError::Storage`] when a request's retries are spent;
    /// [`LoaderError::Stopped`] when `stopped` is set during a backoff.
    pub(crate) fn run_requests(
        &self,
        requests: &mut [RangeRequest<'_>],
        concurrency: usize,
        stopped: &AtomicBool,
    ) -> Result<()> {
        if let (Source::Object(_), Some(cache)) = (&self.source, &self.cache)
            && cache.serve_hits(requests)?
        {
            return Ok(()); // every block from the disk cache, on this thread
        }
        let _waiting = WaitTimer::start();
        crate::io::drive(self.run_requests_async(requests, concurrency, stopped))
    }

    /// [`Fetcher::run_requests`] for async callers.
    ///
    /// # Errors
    /// As [`Fetcher::run_requests`].
    pub(crate) async fn run_requests_async(
        &self,
        requests: &mut [RangeRequest<'_>],
        concurrency: usize,
        stopped: &AtomicBool,
    ) -> Result<()> {
        let Source::Object(store) = &self.source else {
            return Err(LoaderError::WorkerPanicked("range requests need an object store".into()));
        };
        match &self.cache {
            Some(cache) => cache.run(self, store, requests, concurrency, stopped).await,
            None => self.run_direct(store, requests, concurrency, stopped).await,
        }
    }

    /// [`Fetcher::run_requests`] straight from the store (no disk cache).
    ///
    /// # Errors
    /// As [`Fetcher::run_requests`].
    pub(crate) async fn run_direct(
        &self,
        store: &tessera::Store,
        requests: &mut [RangeRequest<'_>],
        concurrency: usize,
        stopped: &AtomicBool,
    ) -> Result<()> {
        let mut rounds = Rounds::new(requests.len());
        loop {
            if stopped.load(Ordering::Acquire) {
                return Err(LoaderError::Stopped);
            }
            let pending = requests.iter_mut().enumerate().filter(|(i, _)| !rounds.done[*i]);
            let futs = pending.map(|(i, req)| async move { (i, self.get_into(store, req).await) });
            let results: Vec<(usize, std::result::Result<(), Attempt>)> =
                futures::stream::iter(futs).buffer_unordered(concurrency.max(1)).collect().await;
            match rounds.settle(self, results, &|i| requests[i].key.to_string())? {
                None => return Ok(()),
                Some(backoff) => backoff_wait(backoff, stopped).await?,
            }
        }
    }

    /// One attempt of a range GET: the body lands in the request's destinations. A local
    /// file (`object_store`'s file system) is read with positioned reads of the wanted pieces
    /// only; a stream is scattered chunk by chunk. A short body is transient, a long one fatal.
    pub(crate) async fn get_into(
        &self,
        store: &tessera::Store,
        req: &mut RangeRequest<'_>,
    ) -> std::result::Result<(), Attempt> {
        let key = req.key;
        for d in &mut req.dests {
            d.verified = false; // a retried request lands (and verifies) its bytes again
        }
        let io = |e: object_store::Error| classify(key, tessera::Error::Io { path: key.to_string(), source: e });
        // Streamed bodies wait for a permit (released on return, also on failure); local
        // file handles buffer nothing and are not limited.
        let permit = if self.link.gaps_free() { None } else { self.flight.acquire().await };
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let t0 = Instant::now();
        let opts = GetOptions { range: Some(GetRange::Bounded(req.range.clone())), ..GetOptions::default() };
        let got = store.object_store().get_opts(&store.path(key), opts).await.map_err(io)?;
        let first_byte = t0.elapsed();
        let want = req.range.end - req.range.start;
        let t1 = Instant::now();
        let file_body = matches!(got.payload, GetResultPayload::File(..));
        let read = match got.payload {
            GetResultPayload::File(file, _) => {
                if got.range != req.range {
                    return Err(Attempt::Fatal(LoaderError::corrupt(key, "file is shorter than its footer says")));
                }
                let mut n = 0u64;
                for d in &mut req.dests {
                    file.read_exact_at(d.buf, req.range.start + d.off).map_err(|e| classify_io(key, e))?;
                    d.landed();
                    n += d.buf.len() as u64;
                }
                n
            }
            GetResultPayload::Stream(mut body) => {
                let (mut pos, mut first) = (0u64, 0usize);
                while let Some(chunk) = body.next().await {
                    let chunk = chunk.map_err(io)?;
                    let end = pos + chunk.len() as u64;
                    if end > want {
                        return Err(Attempt::Fatal(LoaderError::corrupt(
                            key,
                            format!("asked for bytes {:?}, the body goes on past {want}", req.range),
                        )));
                    }
                    scatter(&mut req.dests[first..], pos, &chunk);
                    while first < req.dests.len() && req.dests[first].end() <= end {
                        req.dests[first].landed();
                        first += 1;
                    }
                    pos = end;
                }
                if pos != want {
                    return Err(Attempt::Transient(
                        format!("{key}: asked for bytes {:?}, the body ended after {pos}", req.range).into(),
                    ));
                }
                pos
            }
        };
        self.link.observe(first_byte, read, t1.elapsed(), file_body);
        if let Some(permit) = permit {
            self.flight.done(permit, read, first_byte, self.link.idle_latency());
        }
        self.counters.bytes.fetch_add(read, Ordering::Relaxed);
        Ok(())
    }

    /// One attempt of a range GET of `range` of object `key` whose whole body goes to `sink`,
    /// in order. The store may end the range early at the object's end (a file's last cache
    /// block); the body's length, returned, is what the store's answer says the range is, and
    /// it must be `range` cut at the object's size. A short body is transient, a long one or
    /// an answer for other bytes fatal. Counted, limited and measured as [`Fetcher::get_into`].
    pub(crate) async fn get_body(
        &self,
        store: &tessera::Store,
        key: &str,
        range: Range<u64>,
        sink: &mut dyn BodySink,
    ) -> std::result::Result<u64, Attempt> {
        /// Bytes read at a time from a local file handle body (below glibc's mmap threshold:
        /// a buffer per request then costs no page faults).
        const FILE_PIECE: u64 = 64 << 10;
        let io = |e: object_store::Error| classify(key, tessera::Error::Io { path: key.to_string(), source: e });
        let permit = if self.link.gaps_free() { None } else { self.flight.acquire().await };
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let t0 = Instant::now();
        let opts = GetOptions { range: Some(GetRange::Bounded(range.clone())), ..GetOptions::default() };
        let got = store.object_store().get_opts(&store.path(key), opts).await.map_err(io)?;
        let first_byte = t0.elapsed();
        let end = range.end.min(got.meta.size);
        if range.start >= end || got.range != (range.start..end) {
            return Err(Attempt::Fatal(LoaderError::corrupt(
                key,
                format!(
                    "asked for bytes {range:?} of an object of {} bytes, the store answered {:?}",
                    got.meta.size, got.range
                ),
            )));
        }
        let len = end - range.start;
        sink.start(len)?;
        let t1 = Instant::now();
        let file_body = matches!(got.payload, GetResultPayload::File(..));
        match got.payload {
            GetResultPayload::File(file, _) => {
                let mut buf = vec![0u8; len.min(FILE_PIECE) as usize];
                let mut pos = 0u64;
                while pos < len {
                    let n = (len - pos).min(FILE_PIECE) as usize;
                    file.read_exact_at(&mut buf[..n], range.start + pos).map_err(|e| classify_io(key, e))?;
                    sink.chunk(pos, &buf[..n]);
                    pos += n as u64;
                }
            }
            GetResultPayload::Stream(mut body) => {
                let mut pos = 0u64;
                while let Some(chunk) = body.next().await {
                    let chunk = chunk.map_err(io)?;
                    let chunk_end = pos + chunk.len() as u64;
                    if chunk_end > len {
                        return Err(Attempt::Fatal(LoaderError::corrupt(
                            key,
                            format!("asked for bytes {range:?}, the body goes on past {len}"),
                        )));
                    }
                    sink.chunk(pos, &chunk);
                    pos = chunk_end;
                }
                if pos != len {
                    return Err(Attempt::Transient(
                        format!("{key}: asked for bytes {range:?}, the body ended after {pos} of {len}").into(),
                    ));
                }
            }
        }
        self.link.observe(first_byte, len, t1.elapsed(), file_body);
        if let Some(permit) = permit {
            self.flight.done(permit, len, first_byte, self.link.idle_latency());
        }
        self.counters.bytes.fetch_add(len, Ordering::Relaxed);
        Ok(len)
    }

    /// Reads byte ranges of object `key` in one call (the object store coalesces them), or
    /// through the disk cache when there is one.
    ///
    /// # Errors
    /// Storage errors after retries; [`LoaderError::Corrupt`] when a range comes back short.
    pub(crate) fn fetch(&self, key: &str, ranges: &[Range<u64>], stopped: &AtomicBool) -> Result<Vec<Bytes>> {
        if self.is_local() {
            // Positioned reads: nothing to wait for on the runtime.
            return futures::executor::block_on(self.fetch_async(key, ranges, stopped));
        }
        let _waiting = WaitTimer::start();
        crate::io::drive(self.fetch_async(key, ranges, stopped))
    }

    /// [`Fetcher::fetch`] for async callers (on a local source it reads in place and never
    /// waits).
    ///
    /// # Errors
    /// As [`Fetcher::fetch`].
    pub(crate) async fn fetch_async(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        stopped: &AtomicBool,
    ) -> Result<Vec<Bytes>> {
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
            Source::Object(_) if self.cache.is_some() && DiskCache::caches(key) => {
                // Each range lands in its own buffer, through the cache's blocks.
                let mut bufs: Vec<Vec<u8>> = ranges.iter().map(|r| vec![0u8; (r.end - r.start) as usize]).collect();
                let mut requests: Vec<RangeRequest<'_>> = ranges
                    .iter()
                    .zip(&mut bufs)
                    .map(|(r, buf)| RangeRequest { key, range: r.clone(), dests: vec![Dest::new(0, buf)] })
                    .collect();
                self.run_requests_async(&mut requests, FETCH_CONCURRENCY, stopped).await?;
                drop(requests);
                return Ok(bufs.into_iter().map(Bytes::from).collect());
            }
            Source::Object(store) => {
                with_retry_async(&self.retry, stopped, &self.counters, &|| key.to_string(), || async {
                    self.counters.requests.fetch_add(1, Ordering::Relaxed);
                    store.get_ranges_async(key, ranges).await.map_err(|e| classify(key, e))
                })
                .await?
            }
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
    fn a_backoff_is_cut_into_steps_that_add_up_to_it() {
        for ms in [0u64, 1, 10, 25, 1000] {
            let sleep = Duration::from_millis(ms);
            let steps: Vec<Duration> = backoff_steps(sleep).collect();
            assert_eq!(steps.iter().sum::<Duration>(), sleep, "{ms} ms");
            assert!(steps.iter().all(|s| !s.is_zero() && *s <= Duration::from_millis(10)), "{ms} ms: {steps:?}");
        }
        let stopped = AtomicBool::new(true);
        assert!(matches!(backoff_sleep(Duration::from_secs(60), &stopped), Err(LoaderError::Stopped)));
        let waited = crate::io::drive(backoff_wait(Duration::from_secs(60), &stopped));
        assert!(matches!(waited, Err(LoaderError::Stopped)), "a stop ends an async backoff at once");
    }

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
    fn a_destination_is_verified_as_it_lands() {
        let bytes: Vec<u8> = (0u8..100).collect();
        let block = |crc32| Block { offset: 0, stored_len: 100, raw_len: 100, codec: tessera::Codec::None, crc32 };
        let (good, bad) = (block(crc32fast::hash(&bytes)), block(crc32fast::hash(&bytes) ^ 1));
        for (check, want) in [(Some(&good), true), (Some(&bad), false), (None, false)] {
            let mut buf = bytes.clone();
            let mut d = Dest { check, ..Dest::new(0, &mut buf) };
            d.landed();
            assert_eq!(d.verified, want, "{check:?}");
        }
        // A destination shorter than its block never passes.
        let mut short = bytes[..99].to_vec();
        let mut d = Dest { check: Some(&good), ..Dest::new(0, &mut short) };
        d.landed();
        assert!(!d.verified);
    }

    #[test]
    fn chunks_scatter_into_their_destinations_and_gaps_are_dropped() {
        let body: Vec<u8> = (0u8..40).collect();
        let (mut a, mut b, mut c) = ([0u8; 5], [0u8; 10], [0u8; 3]);
        // a = 2..7, b = 5..15 (overlaps a), c = 30..33; everything else is gap.
        let mut dests = vec![Dest::new(2, &mut a), Dest::new(5, &mut b), Dest::new(30, &mut c)];
        for (i, chunk) in body.chunks(7).enumerate() {
            scatter(&mut dests, 7 * i as u64, chunk);
        }
        assert_eq!(a, [2, 3, 4, 5, 6]);
        assert_eq!(b, [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
        assert_eq!(c, [30, 31, 32]);
    }

    #[test]
    fn the_coalescing_gap_is_latency_times_bandwidth_within_bounds() {
        let link = LinkModel::default();
        assert_eq!(link.gap_bytes_at(None), DEFAULT_GAP);
        // 1 ms to the first byte, 1 MB in 1 ms: 1 GB/s × 1 ms = 1 MB.
        link.observe(Duration::from_millis(1), 1_000_000, Duration::from_millis(1), false);
        assert!(!link.gaps_free());
        assert_eq!(link.gap_bytes_at(None), 1_000_000);
        let slow = LinkModel::default();
        slow.observe(Duration::from_millis(100), 1_000_000, Duration::from_millis(1), false);
        assert_eq!(slow.gap_bytes_at(None), MAX_GAP);
        // 50 requests in flight share 1 GB/s: a round trip saved is worth 1 ms × 20 MB/s.
        assert_eq!(link.gap_bytes_at(Some(20e6)), MIN_GAP.max(20_000));
        let busy = LinkModel::default();
        busy.observe(Duration::from_millis(20), 1_000_000, Duration::from_millis(1), false);
        assert_eq!(busy.gap_bytes_at(Some(20e6)), 400_000);
        // A single body's rate bounds the slot rate: 20 ms × 10 MB/s = 200 KB, not the
        // 4 MiB ceiling a slot rate of 1 TB/s alone would give.
        let thin = LinkModel::default();
        thin.observe(Duration::from_millis(20), 1_000_000, Duration::from_millis(100), false);
        assert_eq!(thin.gap_bytes_at(Some(1e12)), 200_000);
        let near = LinkModel::default();
        near.observe(Duration::from_micros(1), 1_000_000, Duration::from_millis(10), true);
        assert!(near.gaps_free());
        assert_eq!(near.gap_bytes_at(None), MIN_GAP);
    }

    #[test]
    fn queueing_does_not_widen_the_gap_and_a_slower_link_is_followed() {
        let ms = Duration::from_millis;
        let link = LinkModel::default();
        // An idle link: 1 ms to the first byte at 1 GB/s.
        link.observe(ms(1), 1_000_000, ms(1), false);
        // A saturated server: requests queue for 40 ms before their first byte, and each
        // body still streams at 1 GB/s. The gap stays the idle link's 1 MB.
        for _ in 0..LATENCY_WINDOW - 1 {
            link.observe(ms(40), 1_000_000, ms(1), false);
        }
        assert_eq!(link.gap_bytes_at(None), 1_000_000);
        for _ in 0..LATENCY_WINDOW {
            link.observe(ms(2), 1_000_000, ms(1), false);
        }
        assert_eq!(link.gap_bytes_at(None), 1_000_000, "the previous window still holds 1 ms");
        // The link got slower for good (2 ms at best): followed after two windows.
        for _ in 0..LATENCY_WINDOW {
            link.observe(ms(3), 1_000_000, ms(1), false);
        }
        assert_eq!(link.gap_bytes_at(None), 2_000_000);
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
