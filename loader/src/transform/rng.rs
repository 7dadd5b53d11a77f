//! The randomness of a transform: a pure function of (seed, epoch, row id, op index).
//!
//! Each op of each row draws from its own stream, keyed by those four numbers through
//! `SplitMix64`'s finaliser, so what a row gets depends on nothing else: not on the worker
//! thread, the rank, the batch it lands in, or whether the epoch was resumed.

use crate::sampler::{GOLDEN_GAMMA as GOLDEN, SplitMix64, mix64 as mix};

/// One op's random stream for one row: the sampler's [`SplitMix64`] from a key mixed out
/// of the four numbers.
#[derive(Clone, Debug)]
pub(crate) struct OpRng {
    inner: SplitMix64,
}

impl OpRng {
    /// The stream of op `op` for row `row` in `epoch` of a run seeded with `seed`.
    pub(crate) fn new(seed: u64, epoch: u64, row: u64, op: usize) -> Self {
        let mut k = mix(seed ^ 0x7465_7373_6572_6121); // "tessera!": apart from the order's keys
        k = mix(k ^ epoch.wrapping_mul(GOLDEN));
        k = mix(k ^ row);
        k = mix(k ^ (op as u64).wrapping_add(GOLDEN));
        Self { inner: SplitMix64::new(k) }
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// Uniform in `[0, 1)`, 53 bits.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[lo, hi)` (`lo` when the range is empty).
    pub(crate) fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        if hi > lo { lo + (hi - lo) * self.unit() } else { lo }
    }

    /// Uniform integer in `[0, n]` (inclusive), unbiased (Lemire's widening multiply with
    /// rejection).
    pub(crate) fn below_incl(&mut self, n: u64) -> u64 {
        let Some(span) = n.checked_add(1) else { return self.next_u64() };
        loop {
            let m = u128::from(self.next_u64()) * u128::from(span);
            #[allow(clippy::cast_possible_truncation)] // the low half of the product
            let low = m as u64;
            if low >= span.wrapping_neg() % span {
                return (m >> 64) as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_pinned_and_independent() {
        // Golden values: a change here changes every augmented batch of every run.
        let mut r = OpRng::new(0, 0, 0, 0);
        let first = [r.next_u64(), r.next_u64()];
        assert_eq!(first, [0xb9ef_d886_34b7_44ec, 0x177e_0a85_a99a_552f], "{first:#x?}");
        let draw = |s, e, row, op| OpRng::new(s, e, row, op).next_u64();
        let base = draw(1, 2, 3, 4);
        for other in [draw(2, 2, 3, 4), draw(1, 3, 3, 4), draw(1, 2, 4, 4), draw(1, 2, 3, 5)] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn bounded_draws_stay_in_range_and_cover_it() {
        let mut r = OpRng::new(7, 0, 0, 0);
        let mut seen = [0u32; 5];
        for _ in 0..5000 {
            let v = r.below_incl(4);
            seen[usize::try_from(v).unwrap()] += 1;
            let u = r.uniform(0.25, 0.5);
            assert!((0.25..0.5).contains(&u));
        }
        assert!(seen.iter().all(|&n| (850..1150).contains(&n)), "{seen:?}");
        assert_eq!(r.below_incl(0), 0);
    }
}
