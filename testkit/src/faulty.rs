//! An object store wrapper that injects faults: seeded, configurable, counted.
//!
//! Every random decision comes from one [`XorShift`] seeded by [`FaultConfig::seed`], so a
//! failing schedule can be replayed (up to the interleaving of concurrent requests).
//!
//! Faults:
//! - GET/PUT/LIST errors at a rate, as `object_store::Error::Generic` with a transient-looking
//!   message (what a reset connection or a 503 looks like after the HTTP client gave up);
//! - latency: a fixed delay plus uniform jitter before every request;
//! - truncated bodies for range GETs: fewer bytes than asked, with the result still claiming
//!   the full range (a body cut short);
//! - slow streams: the body is delivered in small chunks with a pause between them;
//! - targeted PUT failures ([`FaultyStore::fail_puts`]): the next N PUTs whose key contains a
//!   string fail, either before the write (nothing lands) or after it (the object lands and the
//!   caller still sees an error, like a response lost on the way back).
//!
//! `get_ranges` is not overridden: the trait's default coalesces the ranges and calls
//! `get_opts` on this wrapper, so every coalesced range request is subject to faults.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, Error, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

use crate::rng::XorShift;

/// A delay: `fixed` plus a uniform draw from `0..=jitter`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Latency {
    /// Always waited.
    pub fixed: Duration,
    /// Upper bound of the uniform extra wait.
    pub jitter: Duration,
}

impl Latency {
    /// No delay.
    pub const NONE: Self = Self { fixed: Duration::ZERO, jitter: Duration::ZERO };

    /// `fixed` plus uniform jitter up to `jitter`.
    #[must_use]
    pub fn new(fixed: Duration, jitter: Duration) -> Self {
        Self { fixed, jitter }
    }

    fn is_zero(&self) -> bool {
        self.fixed.is_zero() && self.jitter.is_zero()
    }

    fn draw(&self, rng: &mut XorShift) -> Duration {
        let j = self.jitter.as_nanos() as u64;
        self.fixed + Duration::from_nanos(if j == 0 { 0 } else { rng.below(j + 1) })
    }
}

/// What to inject. The default injects nothing.
#[derive(Clone, Debug, Default)]
pub struct FaultConfig {
    /// Seed of the generator.
    pub seed: u64,
    /// Probability that a GET (whole or range, including each coalesced range) fails.
    pub get_error_rate: f64,
    /// Probability that a PUT fails before anything is written.
    pub put_error_rate: f64,
    /// Probability that a LIST fails.
    pub list_error_rate: f64,
    /// Delay before each GET.
    pub get_latency: Latency,
    /// Delay before each PUT.
    pub put_latency: Latency,
    /// Probability that a range GET returns fewer bytes than asked.
    pub truncate_rate: f64,
    /// Deliver GET bodies in chunks of this many bytes with `slow_stream_pause` between them.
    pub slow_stream_chunk: Option<usize>,
    /// Pause between chunks of a slow stream.
    pub slow_stream_pause: Duration,
}

impl FaultConfig {
    /// No faults, with a seed.
    #[must_use]
    pub fn seeded(seed: u64) -> Self {
        Self { seed, ..Self::default() }
    }
}

/// A targeted PUT failure: see [`FaultyStore::fail_puts`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PutFault {
    /// Substring of the object key to match.
    pub key_contains: String,
    /// How many more matching PUTs fail.
    pub remaining: u32,
    /// Whether the write lands before the error is returned.
    pub lands: bool,
}

/// One request counted in a gauge (`now`, `most`) until dropped: GETs in
/// [`FaultCounts::gets_in_flight`], PUTs in [`FaultCounts::puts_in_flight`].
struct InFlight<'a>(&'a AtomicU64);

impl<'a> InFlight<'a> {
    fn enter(now: &'a AtomicU64, most: &AtomicU64) -> Self {
        let n = now.fetch_add(1, Ordering::Relaxed) + 1;
        most.fetch_max(n, Ordering::Relaxed);
        Self(now)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counters of requests seen and faults injected.
#[derive(Debug, Default)]
pub struct FaultCounts {
    /// GET requests seen (each coalesced range counts).
    pub gets: AtomicU64,
    /// PUT requests seen.
    pub puts: AtomicU64,
    /// LIST requests seen.
    pub lists: AtomicU64,
    /// Injected GET errors.
    pub get_errors: AtomicU64,
    /// Injected PUT errors where nothing was written.
    pub put_errors: AtomicU64,
    /// Injected PUT errors after the object was written.
    pub put_errors_after_write: AtomicU64,
    /// Injected LIST errors.
    pub list_errors: AtomicU64,
    /// Range GETs whose body was cut short.
    pub truncated: AtomicU64,
    /// Requests delayed.
    pub delayed: AtomicU64,
    /// Bodies delivered as slow streams.
    pub slow_streams: AtomicU64,
    /// GETs in flight now (from the request to its answer, bodies not included).
    pub gets_in_flight: AtomicU64,
    /// The most GETs that were in flight at once.
    pub most_gets_in_flight: AtomicU64,
    /// PUTs in flight now (from the request to its answer, delays included).
    pub puts_in_flight: AtomicU64,
    /// The most PUTs that were in flight at once.
    pub most_puts_in_flight: AtomicU64,
}

impl FaultCounts {
    /// Every injected fault (errors and truncations; delays are not faults).
    #[must_use]
    pub fn injected(&self) -> u64 {
        [&self.get_errors, &self.put_errors, &self.put_errors_after_write, &self.list_errors, &self.truncated]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

impl fmt::Display for FaultCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        write!(
            f,
            "gets {} (errors {}, truncated {}), puts {} (errors {}, after write {}), lists {} (errors {}), delayed {}, slow streams {}",
            l(&self.gets),
            l(&self.get_errors),
            l(&self.truncated),
            l(&self.puts),
            l(&self.put_errors),
            l(&self.put_errors_after_write),
            l(&self.lists),
            l(&self.list_errors),
            l(&self.delayed),
            l(&self.slow_streams),
        )
    }
}

#[derive(Debug)]
struct State {
    config: FaultConfig,
    rng: XorShift,
    put_faults: Vec<PutFault>,
}

/// Wraps a store and injects faults (see the module docs).
#[derive(Debug, Clone)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    state: Arc<Mutex<State>>,
    /// The counters.
    pub counts: Arc<FaultCounts>,
}

/// The error an injected fault returns: `Generic`, worded like a transient network failure.
fn injected(op: &str, location: &Path) -> Error {
    Error::Generic {
        store: "FaultyStore",
        source: format!("injected fault: {op} {location}: connection reset by peer (transient, retry may succeed)")
            .into(),
    }
}

impl FaultyStore {
    /// Wraps `inner` with a configuration.
    #[must_use]
    pub fn new(inner: Arc<dyn ObjectStore>, config: FaultConfig) -> Self {
        let rng = XorShift::new(config.seed);
        Self {
            inner,
            state: Arc::new(Mutex::new(State { config, rng, put_faults: Vec::new() })),
            counts: Arc::new(FaultCounts::default()),
        }
    }

    /// The wrapped store (no faults).
    #[must_use]
    pub fn inner(&self) -> &Arc<dyn ObjectStore> {
        &self.inner
    }

    /// Replaces the configuration (the generator keeps its state).
    ///
    /// # Panics
    /// If the state mutex is poisoned.
    pub fn set_config(&self, config: FaultConfig) {
        self.state.lock().unwrap().config = config;
    }

    /// Turns every random fault off (targeted PUT failures stay armed).
    pub fn disarm(&self) {
        let seed = self.config().seed;
        self.set_config(FaultConfig::seeded(seed));
    }

    /// The configuration in force.
    ///
    /// # Panics
    /// If the state mutex is poisoned.
    #[must_use]
    pub fn config(&self) -> FaultConfig {
        self.state.lock().unwrap().config.clone()
    }

    /// Makes the next `count` PUTs whose key contains `key_contains` fail. With `lands`, the
    /// object is written first and the error comes after (a lost response).
    ///
    /// # Panics
    /// If the state mutex is poisoned.
    pub fn fail_puts(&self, key_contains: &str, count: u32, lands: bool) {
        self.state.lock().unwrap().put_faults.push(PutFault {
            key_contains: key_contains.to_string(),
            remaining: count,
            lands,
        });
    }

    /// Targeted PUT failures not yet used up.
    ///
    /// # Panics
    /// If the state mutex is poisoned.
    #[must_use]
    pub fn pending_put_faults(&self) -> Vec<PutFault> {
        self.state.lock().unwrap().put_faults.iter().filter(|f| f.remaining > 0).cloned().collect()
    }

    /// Draws the decisions for one request under the lock: (delay, fail).
    fn decide(
        &self,
        latency: impl Fn(&FaultConfig) -> Latency,
        rate: impl Fn(&FaultConfig) -> f64,
    ) -> (Duration, bool) {
        let mut s = self.state.lock().unwrap();
        let State { config, rng, .. } = &mut *s;
        let l = latency(config);
        let delay = if l.is_zero() { Duration::ZERO } else { l.draw(rng) };
        let fail = rng.chance(rate(config));
        (delay, fail)
    }

    async fn delay(&self, d: Duration) {
        if !d.is_zero() {
            FaultCounts::bump(&self.counts.delayed);
            tokio::time::sleep(d).await;
        }
    }

    /// The targeted fault for a PUT to `location`, if one is armed: `Some(lands)`.
    fn targeted_put(&self, location: &Path) -> Option<bool> {
        let mut s = self.state.lock().unwrap();
        let f = s.put_faults.iter_mut().find(|f| f.remaining > 0 && location.as_ref().contains(&f.key_contains))?;
        f.remaining -= 1;
        Some(f.lands)
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Faulty({})", self.inner)
    }
}

/// A stream that yields `body` in `chunk`-byte pieces, sleeping `pause` before each.
fn slow_stream(body: Bytes, chunk: usize, pause: Duration) -> BoxStream<'static, Result<Bytes>> {
    let chunk = chunk.max(1);
    futures::stream::unfold(body, move |mut rest| async move {
        if rest.is_empty() {
            return None;
        }
        tokio::time::sleep(pause).await;
        let piece = rest.split_to(chunk.min(rest.len()));
        Some((Ok(piece), rest))
    })
    .boxed()
}

#[async_trait::async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        FaultCounts::bump(&self.counts.puts);
        let _in_flight = InFlight::enter(&self.counts.puts_in_flight, &self.counts.most_puts_in_flight);
        let (delay, fail) = self.decide(|c| c.put_latency, |c| c.put_error_rate);
        self.delay(delay).await;
        match self.targeted_put(location) {
            Some(true) => {
                self.inner.put_opts(location, payload, opts).await?;
                FaultCounts::bump(&self.counts.put_errors_after_write);
                return Err(injected("PUT (after write)", location));
            }
            Some(false) => {
                FaultCounts::bump(&self.counts.put_errors);
                return Err(injected("PUT", location));
            }
            None => {}
        }
        if fail {
            FaultCounts::bump(&self.counts.put_errors);
            return Err(injected("PUT", location));
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        FaultCounts::bump(&self.counts.puts);
        let (delay, fail) = self.decide(|c| c.put_latency, |c| c.put_error_rate);
        self.delay(delay).await;
        if fail || self.targeted_put(location) == Some(false) {
            FaultCounts::bump(&self.counts.put_errors);
            return Err(injected("PUT multipart", location));
        }
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        FaultCounts::bump(&self.counts.gets);
        let _in_flight = InFlight::enter(&self.counts.gets_in_flight, &self.counts.most_gets_in_flight);
        let ranged = options.range.is_some() && !options.head;
        let (delay, fail, cut, slow) = {
            let mut s = self.state.lock().unwrap();
            let State { config, rng, .. } = &mut *s;
            let delay = if config.get_latency.is_zero() { Duration::ZERO } else { config.get_latency.draw(rng) };
            let fail = rng.chance(config.get_error_rate);
            let cut = ranged && rng.chance(config.truncate_rate);
            let cut_draw = rng.next_u64();
            (delay, fail, cut.then_some(cut_draw), config.slow_stream_chunk.map(|c| (c, config.slow_stream_pause)))
        };
        self.delay(delay).await;
        if fail {
            FaultCounts::bump(&self.counts.get_errors);
            return Err(injected("GET", location));
        }
        let r = self.inner.get_opts(location, options).await?;
        if cut.is_none() && slow.is_none() {
            return Ok(r);
        }
        let (meta, range, attributes, extensions) =
            (r.meta.clone(), r.range.clone(), r.attributes.clone(), r.extensions.clone());
        let mut body = r.bytes().await?;
        if let Some(draw) = cut
            && !body.is_empty()
        {
            // Keep 0..len-1 bytes: always strictly fewer than asked.
            let keep = (draw % body.len() as u64) as usize;
            body.truncate(keep);
            FaultCounts::bump(&self.counts.truncated);
        }
        let payload = match slow {
            Some((chunk, pause)) => {
                FaultCounts::bump(&self.counts.slow_streams);
                slow_stream(body, chunk, pause)
            }
            None => futures::stream::once(async move { Ok(body) }).boxed(),
        };
        // `range` still claims everything that was asked for: the body was cut in transit.
        Ok(GetResult { payload: GetResultPayload::Stream(payload), meta, range, attributes, extensions })
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        FaultCounts::bump(&self.counts.lists);
        let (_, fail) = self.decide(|_| Latency::NONE, |c| c.list_error_rate);
        if fail {
            FaultCounts::bump(&self.counts.list_errors);
            let p = prefix.cloned().unwrap_or_default();
            return futures::stream::once(async move { Err(injected("LIST", &p)) }).boxed();
        }
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        FaultCounts::bump(&self.counts.lists);
        let (_, fail) = self.decide(|_| Latency::NONE, |c| c.list_error_rate);
        if fail {
            FaultCounts::bump(&self.counts.list_errors);
            return Err(injected("LIST", &prefix.cloned().unwrap_or_default()));
        }
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
