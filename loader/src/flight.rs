//! How many object-store requests the loader keeps in flight, adapted to the link.
//!
//! A self-tuned pipeline runs many filling threads, each sending its batch's range GETs
//! together. Against a server that is the bottleneck, more requests in flight add nothing but
//! queueing: first bytes come later, the HTTP client buffers bodies outside the memory budget,
//! and the measured latency (which sizes the coalescing gap) grows with the queue. So every
//! streamed request takes a permit from one [`FlightLimit`], whose limit follows the link
//! additively up and multiplicatively down (AIMD, as TCP's congestion window), judged by
//! first-byte times: after each round of `limit` requests, a median first-byte time more than
//! [`QUEUEING`] times the link's idle round trip (plus [`SLACK`]) means requests queue, and the
//! limit shrinks by a quarter; otherwise it grows by an eighth. Latency that is the link's own
//! (a far region, an added delay) is not queueing, so it never lowers the limit.
//!
//! Until the first round that queues, the limit doubles instead (slow start, as TCP's) after
//! each round in which at least half of it was in use. A round lasts at least a round trip, so
//! growing by an eighth from 64 to the 3,000 requests a far link needs took about 33 rounds,
//! over 3 s at 100 ms: mm224 from an in-memory store at +100 ms spent its first three epochs
//! below the limit it needed.
//!
//! The same rounds measure the rate one request in flight gets (bytes per second over the
//! requests in flight): the coalescing gap is the idle round trip times that rate.
//!
//! Bodies served as local file handles (`object_store`'s file system) are not limited: the
//! loader reads only the wanted bytes from them, and no buffer waits.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, SemaphorePermit};

/// The limit a loader starts with.
const START: usize = 64;
/// The limit never goes below this many requests.
const FLOOR: usize = 4;
/// Nor above this many.
const CEILING: usize = 4096;
/// A round's median first-byte time above this multiple of the idle round trip is queueing.
const QUEUEING: f64 = 2.0;
/// Timer and scheduling noise allowed on top (loopback round trips are tens of µs).
const SLACK: Duration = Duration::from_millis(1);

/// The in-flight limit and its permits.
#[derive(Debug)]
pub(crate) struct FlightLimit {
    permits: Semaphore,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    limit: usize,
    /// Permits to retire as they come back (the limit shrank while they were lent).
    debt: usize,
    /// First-byte times of the current round, in seconds.
    round: Vec<f64>,
    /// When the current round started, its bytes, and the permits lent summed at each return.
    round_start: Option<Instant>,
    round_bytes: u64,
    round_lent: usize,
    /// Bytes per second one request in flight carried in the last round (0: not measured):
    /// the aggregate rate over the requests in flight.
    slot_rate: f64,
    /// No round has queued yet: a round that used the limit doubles it.
    slow_start: bool,
}

impl Default for FlightLimit {
    fn default() -> Self {
        let state = State {
            limit: START,
            debt: 0,
            round: Vec::new(),
            round_start: None,
            round_bytes: 0,
            round_lent: 0,
            slot_rate: 0.0,
            slow_start: true,
        };
        Self { permits: Semaphore::new(START), state: Mutex::new(state) }
    }
}

impl FlightLimit {
    /// Waits for a permit to send one request.
    pub(crate) async fn acquire(&self) -> Option<SemaphorePermit<'_>> {
        // The semaphore is never closed, so this is `None` only in theory.
        self.permits.acquire().await.ok()
    }

    /// The current limit.
    pub(crate) fn limit(&self) -> usize {
        self.lock().limit
    }

    /// The transfer rate one request in flight gets, in bytes per second (`None` before a
    /// round was measured): a round trip saved by coalescing is worth this rate × the idle
    /// round trip, because the other requests in flight share the link meanwhile.
    pub(crate) fn slot_rate(&self) -> Option<f64> {
        let r = self.lock().slot_rate;
        (r > 0.0).then_some(r)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Returns a permit after its request's `bytes` arrived, with the request's first-byte
    /// time and the link's idle round trip (`None` before one was measured); adjusts the
    /// limit at the end of a round.
    pub(crate) fn done(&self, permit: SemaphorePermit<'_>, bytes: u64, first_byte: Duration, idle: Option<Duration>) {
        let now = Instant::now();
        let mut s = self.lock();
        let start = *s.round_start.get_or_insert(now);
        s.round_bytes += bytes;
        s.round_lent += (s.limit + s.debt).saturating_sub(self.permits.available_permits());
        if s.debt > 0 {
            permit.forget();
            s.debt -= 1;
        } else {
            drop(permit);
        }
        s.round.push(first_byte.as_secs_f64());
        if s.round.len() < s.limit.max(8) {
            return;
        }
        let mut round = std::mem::take(&mut s.round);
        let (bytes, lent) = (std::mem::take(&mut s.round_bytes), std::mem::take(&mut s.round_lent));
        s.round_start = Some(now);
        let secs = now.duration_since(start).as_secs_f64();
        let in_flight = lent as f64 / round.len() as f64;
        if secs > 0.0 && in_flight >= 1.0 {
            s.slot_rate = bytes as f64 / secs / in_flight;
        }
        let mid = round.len() / 2;
        let median = *round.select_nth_unstable_by(mid, f64::total_cmp).1;
        let Some(idle) = idle else { return };
        if median > QUEUEING * idle.as_secs_f64() + SLACK.as_secs_f64() {
            s.slow_start = false;
            let cut = s.limit - (s.limit - s.limit / 4).max(FLOOR);
            s.limit -= cut;
            let retired = self.permits.forget_permits(cut);
            s.debt += cut - retired;
        } else if s.limit < CEILING {
            let step = if s.slow_start && 2.0 * in_flight >= s.limit as f64 { s.limit } else { s.limit / 8 };
            let add = step.max(1).min(CEILING - s.limit);
            s.limit += add;
            let repaid = add.min(s.debt);
            s.debt -= repaid;
            self.permits.add_permits(add - repaid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn round(f: &FlightLimit, first_byte: Duration, idle: Duration) {
        let n = f.limit().max(8);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for _ in 0..n {
            let p = rt.block_on(f.acquire()).unwrap();
            f.done(p, 1 << 20, first_byte, Some(idle));
        }
    }

    #[test]
    fn queueing_shrinks_the_limit_and_link_latency_does_not() {
        let f = FlightLimit::default();
        // A far link: 100 ms round trips, no queueing: the limit grows.
        assert_eq!(f.slot_rate(), None);
        round(&f, 100 * MS, 100 * MS);
        assert_eq!(f.limit(), START + START / 8);
        assert!(f.slot_rate().is_some_and(|r| r > 0.0), "a round measures the rate per request");
        // A saturated server: 1 ms idle round trips, 40 ms first bytes: it shrinks by a
        // quarter each round, down to the floor, and the semaphore follows.
        let before = f.limit();
        round(&f, 40 * MS, MS);
        assert_eq!(f.limit(), before - before / 4);
        for _ in 0..30 {
            round(&f, 40 * MS, MS);
        }
        assert_eq!(f.limit(), FLOOR);
        assert_eq!(f.permits.available_permits(), FLOOR);
        // Within 2 × idle + 1 ms is not queueing.
        round(&f, 2 * MS + MS, MS);
        assert_eq!(f.limit(), FLOOR + 1);
    }

    /// A round with every permit lent at once: `limit` requests in flight together.
    fn busy_round(f: &FlightLimit, first_byte: Duration, idle: Duration) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let lent: Vec<_> = (0..f.limit()).map(|_| rt.block_on(f.acquire()).unwrap()).collect();
        for p in lent {
            f.done(p, 1 << 20, first_byte, Some(idle));
        }
    }

    #[test]
    fn a_far_link_in_use_doubles_the_limit_until_a_round_queues() {
        let f = FlightLimit::default();
        busy_round(&f, 100 * MS, 100 * MS);
        assert_eq!(f.limit(), 2 * START, "slow start: the limit was in use, so it doubles");
        busy_round(&f, 100 * MS, 100 * MS);
        assert_eq!(f.limit(), 4 * START);
        // One request at a time does not use the limit: it grows by an eighth only.
        round(&f, 100 * MS, 100 * MS);
        assert_eq!(f.limit(), 4 * START + 4 * START / 8);
        // A round that queues ends slow start for good: a quarter off, then eighths.
        let before = f.limit();
        busy_round(&f, 300 * MS, 100 * MS);
        let cut = before - before / 4;
        assert_eq!(f.limit(), cut);
        busy_round(&f, 100 * MS, 100 * MS);
        assert_eq!(f.limit(), cut + cut / 8);
        assert_eq!(f.permits.available_permits(), f.limit(), "the semaphore follows");
    }

    #[test]
    fn permits_lent_when_the_limit_shrinks_are_retired_on_return() {
        let f = FlightLimit::default();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        // 56 queued requests of the round have come back one at a time.
        for _ in 0..START - 8 {
            let p = rt.block_on(f.acquire()).unwrap();
            f.done(p, 1 << 20, 40 * MS, Some(MS));
        }
        // Now every permit is lent, and the round ends after 8 of them come back: 8 of the
        // 16 permits cut are available and retired at once, 8 are a debt.
        let mut lent: Vec<_> = (0..START).map(|_| rt.block_on(f.acquire()).unwrap()).collect();
        assert_eq!(f.permits.available_permits(), 0);
        for p in lent.drain(..8) {
            f.done(p, 1 << 20, 40 * MS, Some(MS));
        }
        let limit = START - START / 4;
        assert_eq!(f.limit(), limit);
        assert_eq!(f.permits.available_permits(), 0);
        // 47 of the other 56 come back (not yet a whole round): the first 8 are retired.
        for p in lent.drain(..47) {
            f.done(p, 1 << 20, MS, Some(MS));
        }
        assert_eq!(f.limit(), limit);
        assert_eq!(f.permits.available_permits() + lent.len(), limit, "lent and available make the limit");
    }
}
