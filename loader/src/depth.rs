//! How many batches an object-store epoch keeps in flight: sized from what fills measure, so
//! nobody tunes `workers` or `prefetch_batches` for a bucket's latency.
//!
//! A fill of a batch takes `fill` seconds of wall time, of which `waited` were spent waiting on
//! storage (round trips: time to the first byte, backoffs); the rest, `service = fill −
//! waited`, is the work only a CPU can do. `workers` CPUs' worth of fills complete
//! `workers / service` batches per second, and by Little's law keeping them busy takes
//! `throughput × fill = workers × fill / service` batches in flight: the bandwidth-delay
//! product counted in batches (each batch's bytes are in flight for one `fill`). The
//! pipeline allows that many claimed-but-undelivered batches, plus `workers` of slack for
//! jitter, within `[floor, cap]`: `cap` is what the memory budget holds (`pipeline::Shares`),
//! so the bytes in flight never leave the budget.
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

#[derive(Clone, Copy, Debug, Default)]
struct State {
    fill_s: f64,
    service_s: f64,
    fills: u64,
}

/// Moving averages of fill and service time per batch (object stores).
#[derive(Debug, Default)]
pub(crate) struct DepthModel {
    state: Mutex<State>,
    /// The last depth [`DepthModel::target`] gave.
    last: AtomicUsize,
}

impl DepthModel {
    /// Records one finished fill: its wall time and the part spent waiting on storage.
    pub(crate) fn observe(&self, fill: Duration, waited: Duration) {
        let f = fill.as_secs_f64();
        // At least 1/256 of the fill is service: a fill measured as all waiting (timer
        // granularity, waits that overlap work) must not ask for an unbounded depth.
        let s = (f - waited.as_secs_f64()).max(f / 256.0);
        if !(f.is_finite() && f > 0.0) {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if st.fills == 0 {
            (st.fill_s, st.service_s) = (f, s);
        } else {
            st.fill_s += ALPHA * (f - st.fill_s);
            st.service_s += ALPHA * (s - st.service_s);
        }
        st.fills += 1;
    }

    /// Batches to keep claimed and not yet delivered: `workers × fill / service` (with
    /// headroom) plus `workers`, within `[floor, cap]`; `floor` until a fill was measured.
    pub(crate) fn target(&self, workers: usize, floor: usize, cap: usize) -> usize {
        let st = *self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let floor = floor.min(cap);
        let depth = if st.fills == 0 || st.service_s <= 0.0 {
            floor
        } else {
            let in_flight = (workers as f64 * st.fill_s / st.service_s * HEADROOM).ceil();
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
        d.observe(2 * MS, Duration::ZERO);
        assert_eq!(d.target(2, 6, 64), 6);
        // 20 ms round trips around 1 ms of work: 2 × 21 / 1 × 1.25 = 52.5 → 53, + 2.
        let d = DepthModel::default();
        d.observe(21 * MS, 20 * MS);
        assert_eq!(d.target(2, 6, 64), 55);
        assert_eq!(d.target(2, 6, 40), 40, "capped by the budget");
        assert_eq!(d.target(2, 80, 40), 40, "the cap wins over the floor");
        // A fill measured as all waiting asks for a bounded depth.
        let d = DepthModel::default();
        d.observe(10 * MS, 10 * MS);
        assert_eq!(d.target(1, 2, 10_000), 321);
        assert_eq!(d.last(), 321);
    }

    #[test]
    fn the_averages_follow_a_changing_link() {
        let d = DepthModel::default();
        d.observe(101 * MS, 100 * MS);
        let slow = d.target(2, 2, 1000);
        for _ in 0..100 {
            d.observe(2 * MS, MS);
        }
        let fast = d.target(2, 2, 1000);
        assert!(fast < slow / 4, "{fast} vs {slow}");
    }
}
