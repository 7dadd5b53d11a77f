//! How many batches an object-store epoch keeps in flight: sized from what fills measure, so
//! nobody tunes `workers` or `prefetch_batches` for a bucket's latency.
//!
//! A fill of a batch costs `cpu` seconds of its thread's CPU time (decode, copy, checksums:
//! the work only a CPU can do) and spends `waited` seconds waiting on storage (round trips,
//! backoffs). `workers` CPUs' worth of fills complete `workers / cpu` batches per second, and
//! by Little's law keeping them busy takes `workers × (cpu + waited) / cpu` batches in
//! flight: the bandwidth-delay product counted in batches (each batch's bytes are in flight
//! for one fill). The pipeline allows that many claimed-but-undelivered batches (with
//! headroom), plus `workers` of slack for jitter, within `[floor, cap]`: `cap` is what the
//! memory budget holds (`pipeline::Shares`), so the bytes in flight never leave the budget.
//!
//! CPU time is the thread's own (`CLOCK_THREAD_CPUTIME_ID`), not wall time minus waiting:
//! with many filling threads on few cores, a fill's wall time also counts the time its thread
//! was ready but not running, and a depth computed from it shrinks exactly when the cores
//! are busy, then grows again when they idle (it oscillated between 12 and 80 batches on
//! mm224 at +100 ms). Where thread CPU time is unavailable, wall time minus waiting stands in.
//!
//! The model lives with the loader's fetcher, so a later epoch starts at the depth the last
//! one measured; moving averages let it follow a link that changes.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Weight of a new measurement in the moving averages.
const ALPHA: f64 = 0.1;
/// Extra depth over the estimate, for fills slower than the average.
const HEADROOM: f64 = 1.25;

/// CPU time the calling thread has used so far, where the platform measures it.
#[cfg(unix)]
pub(crate) fn thread_cpu_time() -> Option<Duration> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a live, writable `timespec` owned by this frame for the whole call, and
    // `clock_gettime` writes only through the pointer it is given; a clock the platform
    // lacks makes it return -1, which is checked before `ts` is read.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u32::try_from(ts.tv_nsec).ok()?;
    (rc == 0).then(|| Duration::new(secs, nanos))
}

/// CPU time the calling thread has used so far, where the platform measures it.
#[cfg(not(unix))]
pub(crate) fn thread_cpu_time() -> Option<Duration> {
    None
}

#[derive(Clone, Copy, Debug, Default)]
struct State {
    cpu_s: f64,
    waited_s: f64,
    fills: u64,
}

/// Moving averages of CPU time and storage waiting per batch (object stores).
#[derive(Debug, Default)]
pub(crate) struct DepthModel {
    state: Mutex<State>,
    /// The last depth [`DepthModel::target`] gave.
    last: AtomicUsize,
}

impl DepthModel {
    /// Records one finished fill: its wall time, the part spent waiting on storage, and the
    /// CPU time its thread used (`None`: wall time minus waiting stands in).
    pub(crate) fn observe(&self, fill: Duration, waited: Duration, cpu: Option<Duration>) {
        let (f, w) = (fill.as_secs_f64(), waited.as_secs_f64());
        if !(f.is_finite() && f > 0.0) {
            return;
        }
        // At least 1/256 of the fill is CPU: a fill measured as all waiting (timer
        // granularity) must not ask for an unbounded depth.
        let c = cpu.map_or(f - w, |c| c.as_secs_f64()).max(f / 256.0);
        let w = w.min(f);
        let mut st = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if st.fills == 0 {
            (st.cpu_s, st.waited_s) = (c, w);
        } else {
            st.cpu_s += ALPHA * (c - st.cpu_s);
            st.waited_s += ALPHA * (w - st.waited_s);
        }
        st.fills += 1;
    }

    /// Batches to keep claimed and not yet delivered: `workers × (cpu + waited) / cpu`
    /// (with headroom) plus `workers`, within `[floor, cap]`; `floor` until a fill was
    /// measured.
    pub(crate) fn target(&self, workers: usize, floor: usize, cap: usize) -> usize {
        let st = *self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let floor = floor.min(cap);
        let depth = if st.fills == 0 || st.cpu_s <= 0.0 {
            floor
        } else {
            let in_flight = (workers as f64 * (st.cpu_s + st.waited_s) / st.cpu_s * HEADROOM).ceil();
            let want = if in_flight.is_finite() { in_flight.min(cap as f64) as usize } else { cap };
            (want + workers).clamp(floor, cap)
        };
        self.last.store(depth, Ordering::Relaxed);
        depth
    }

    /// The depth the last call of [`DepthModel::target`] gave (0 before any).
    pub(crate) fn last(&self) -> usize {
        self.last.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn depth_is_the_bandwidth_delay_product_within_its_bounds() {
        let d = DepthModel::default();
        assert_eq!(d.target(2, 6, 64), 6, "the floor until a fill is measured");
        // No waiting: the depth of the CPUs alone (the floor).
        d.observe(2 * MS, Duration::ZERO, Some(2 * MS));
        assert_eq!(d.target(2, 6, 64), 6);
        // 20 ms round trips around 1 ms of CPU: 2 × 21 / 1 × 1.25 = 52.5 → 53, + 2.
        let d = DepthModel::default();
        d.observe(21 * MS, 20 * MS, Some(MS));
        assert_eq!(d.target(2, 6, 64), 55);
        assert_eq!(d.target(2, 6, 40), 40, "capped by the budget");
        assert_eq!(d.target(2, 80, 40), 40, "the cap wins over the floor");
        // Contention: the same fill took 61 ms of wall time because its thread waited 40 ms
        // for a core; the depth still follows CPU time and storage waiting.
        let d = DepthModel::default();
        d.observe(61 * MS, 20 * MS, Some(MS));
        assert_eq!(d.target(2, 6, 64), 55);
        // Without thread CPU time, wall time minus waiting stands in.
        let d = DepthModel::default();
        d.observe(21 * MS, 20 * MS, None);
        assert_eq!(d.target(2, 6, 64), 55);
        // A fill measured as all waiting asks for a bounded depth.
        let d = DepthModel::default();
        d.observe(10 * MS, 10 * MS, Some(Duration::ZERO));
        assert_eq!(d.target(1, 2, 10_000), 323); // 1 × 257 × 1.25 → 322, + 1
        assert_eq!(d.last(), 323);
    }

    #[test]
    fn the_averages_follow_a_changing_link() {
        let d = DepthModel::default();
        d.observe(101 * MS, 100 * MS, Some(MS));
        let slow = d.target(2, 2, 1000);
        for _ in 0..100 {
            d.observe(2 * MS, MS, Some(MS));
        }
        let fast = d.target(2, 2, 1000);
        assert!(fast < slow / 4, "{fast} vs {slow}");
    }

    #[cfg(unix)]
    #[test]
    fn thread_cpu_time_counts_work_not_sleep() {
        let t0 = thread_cpu_time().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let t1 = thread_cpu_time().unwrap();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let t2 = thread_cpu_time().unwrap();
        let (slept, spun) = (t1.saturating_sub(t0), t2.saturating_sub(t1));
        assert!(slept < Duration::from_millis(25), "sleeping used {slept:?} of CPU");
        assert!(spun >= Duration::from_millis(10), "30 ms of spinning used only {spun:?}");
    }
}
