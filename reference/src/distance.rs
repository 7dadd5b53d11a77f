//! Vector distances (SPEC.md §23): cosine distance, Euclidean (L2) distance and inner product,
//! bit-identical on every CPU.
//!
//! A query's ranking, a top-k's tie-breaking and a saved view's rows all follow from these
//! numbers, so they must not depend on the machine (DIST-01). The definition fixes every
//! rounding: elements are widened exactly to binary64; products and sums are binary64
//! operations, round to nearest even, never fused; the sums run in [`LANES`] interleaved lanes
//! (lane `j` adds the terms of elements `i ≡ j (mod 16)` in increasing `i`) that are then folded
//! by a fixed tree; square roots are IEEE `sqrt` (correctly rounded). IEEE 754 makes each of
//! those operations exact-rounded, and Rust neither reassociates floating-point sums nor
//! contracts a multiply and an add into a fused one, so any compilation of this code (any
//! `target-cpu`, any vector width) computes the same bits.
//!
//! The lanes are what make the sums fast: each lane is an independent chain, so the compiler
//! turns 16 lanes into whole vector registers. [`Level::Avx2`] is the same source compiled
//! with AVX2 enabled and chosen at run time where the CPU has it; the tests check that every
//! level this CPU runs returns the bits of [`Level::Portable`].
//!
//! ```
//! use tessera::distance::{Distance, distance_f32};
//! let a = [1.0f32, 0.0];
//! assert_eq!(distance_f32(Distance::Cosine, &a, &a), Some(0.0));
//! assert_eq!(distance_f32(Distance::Cosine, &a, &[0.0, 1.0]), Some(1.0));
//! assert_eq!(distance_f32(Distance::L2, &a, &[4.0, 4.0]), Some(5.0));
//! assert_eq!(distance_f32(Distance::InnerProduct, &a, &[3.0, 9.0]), Some(3.0));
//! assert_eq!(distance_f32(Distance::L2, &a, &[1.0]), None); // lengths differ
//! ```

pub use crate::simd::Level;

/// Interleaved partial sums per reduction (DIST-02).
pub const LANES: usize = 16;

/// Which function of two vectors (SPEC.md §23).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Distance {
    /// `1 − cos(a, b)`, in `[0, 2]` (DIST-04).
    Cosine,
    /// Euclidean distance `‖a − b‖` (DIST-05).
    L2,
    /// Inner product `a · b`, a similarity (DIST-06).
    InnerProduct,
}

/// A query vector for a column of f32-widened elements (DIST-02): rounded once to the column's
/// element type (`f16` when `f16`, else `f32`, which bf16 columns use too), then widened to f32
/// exactly.
#[must_use]
pub fn query_f32(q: &[f64], f16: bool) -> Vec<f32> {
    if f16 {
        q.iter().map(|&x| half::f16::from_f64(x).to_f32()).collect()
    } else {
        q.iter().map(|&x| x as f32).collect()
    }
}

/// The distance of two `f32` vectors (f16 and bf16 widen to f32 exactly first), or `None` when
/// their lengths differ. Uses [`Level::current`].
#[must_use]
pub fn distance_f32(d: Distance, a: &[f32], b: &[f32]) -> Option<f64> {
    distance_f32_at(Level::current(), d, a, b)
}

/// The distance of two `f64` vectors, or `None` when their lengths differ.
#[must_use]
pub fn distance_f64(d: Distance, a: &[f64], b: &[f64]) -> Option<f64> {
    distance_f64_at(Level::current(), d, a, b)
}

/// [`distance_f32`] computed by one [`Level`]; a level this CPU lacks runs as
/// [`Level::Portable`] (same bits).
#[must_use]
pub fn distance_f32_at(level: Level, d: Distance, a: &[f32], b: &[f32]) -> Option<f64> {
    (a.len() == b.len()).then(|| finish(d, sums_at(level, d, a, b)))
}

/// [`distance_f64`] computed by one [`Level`].
#[must_use]
pub fn distance_f64_at(level: Level, d: Distance, a: &[f64], b: &[f64]) -> Option<f64> {
    (a.len() == b.len()).then(|| finish(d, sums_at(level, d, a, b)))
}

/// The reductions `d` needs, on `level`.
#[allow(unsafe_code)]
fn sums_at<T: Element>(level: Level, d: Distance, a: &[T], b: &[T]) -> [f64; 3] {
    #[cfg(target_arch = "x86_64")]
    if level == Level::Avx2 && Level::Avx2.is_available() {
        // SAFETY: `sums_avx2` only requires the CPU to support AVX2, which
        // `is_x86_feature_detected!("avx2")` (in `is_available`) has just confirmed.
        return unsafe { sums_avx2(d, a, b) };
    }
    let _ = level;
    sums(d, a, b)
}

/// [`sums`] compiled with AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sums_avx2<T: Element>(d: Distance, a: &[T], b: &[T]) -> [f64; 3] {
    sums(d, a, b)
}

// `inline(always)` below: each level's `target_feature` function must get its own copy of the
// loops, compiled with its features, rather than a call into the baseline compilation.

/// An element type the kernels widen exactly to binary64.
trait Element: Copy {
    fn widen(self) -> f64;
}
impl Element for f32 {
    #[allow(clippy::inline_always)] // see above
    #[inline(always)]
    fn widen(self) -> f64 {
        f64::from(self)
    }
}
impl Element for f64 {
    #[allow(clippy::inline_always)] // see above
    #[inline(always)]
    fn widen(self) -> f64 {
        self
    }
}

/// `[Σ a·b, Σ a·a, Σ b·b]` for cosine, `[Σ (a−b)², 0, 0]` for L2, `[Σ a·b, 0, 0]` for the inner
/// product, each summed as DIST-02 says. `a` and `b` have equal lengths.
#[allow(clippy::inline_always)] // see above
#[inline(always)]
fn sums<T: Element>(d: Distance, a: &[T], b: &[T]) -> [f64; 3] {
    match d {
        Distance::Cosine => {
            let (mut ab, mut aa, mut bb) = ([0.0f64; LANES], [0.0f64; LANES], [0.0f64; LANES]);
            lanes(a, b, |j, x, y| {
                ab[j] += x * y;
                aa[j] += x * x;
                bb[j] += y * y;
            });
            [fold(ab), fold(aa), fold(bb)]
        }
        Distance::L2 => {
            let mut sq = [0.0f64; LANES];
            lanes(a, b, |j, x, y| {
                let t = x - y;
                sq[j] += t * t;
            });
            [fold(sq), 0.0, 0.0]
        }
        Distance::InnerProduct => {
            let mut ab = [0.0f64; LANES];
            lanes(a, b, |j, x, y| ab[j] += x * y);
            [fold(ab), 0.0, 0.0]
        }
    }
}

/// Calls `f(i mod LANES, a[i], b[i])` for every `i` in increasing order, widened.
#[allow(clippy::inline_always)] // see above
#[inline(always)]
fn lanes<T: Element>(a: &[T], b: &[T], mut f: impl FnMut(usize, f64, f64)) {
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for j in 0..LANES {
            f(j, x[j].widen(), y[j].widen());
        }
    }
    for (j, (x, y)) in ra.iter().zip(rb).enumerate() {
        f(j, x.widen(), y.widen());
    }
}

/// Folds the lanes: for `w` = 8, 4, 2, 1, lane `j < w` becomes lane `j` + lane `j + w`.
#[allow(clippy::inline_always)] // see above
#[inline(always)]
fn fold(mut s: [f64; LANES]) -> f64 {
    let mut w = LANES / 2;
    while w > 0 {
        for j in 0..w {
            s[j] += s[j + w];
        }
        w /= 2;
    }
    s[0]
}

/// The distance from its sums (DIST-03 to DIST-07); every NaN leaves as the one canonical NaN,
/// whose sign (the sort order of NaN) would otherwise depend on the CPU.
fn finish(d: Distance, sums: [f64; 3]) -> f64 {
    let r = unrounded(d, sums);
    if r.is_nan() { f64::NAN } else { r }
}

fn unrounded(d: Distance, [s, aa, bb]: [f64; 3]) -> f64 {
    match d {
        Distance::InnerProduct => s,
        Distance::L2 => s.sqrt(),
        Distance::Cosine => {
            if !(s.is_finite() && aa.is_finite() && bb.is_finite()) {
                return f64::NAN;
            }
            if aa == 0.0 && bb == 0.0 {
                return 0.0; // both zero: the vectors are equal
            }
            if aa == 0.0 || bb == 0.0 {
                return 1.0; // one zero: no direction to compare
            }
            let p = aa * bb;
            // sqrt(aa·bb) is correctly rounded and, for a == b, exactly aa (so the distance is
            // exactly 0) while the product neither overflows nor leaves the normal range.
            let norm = if p.is_finite() && p >= f64::MIN_POSITIVE { p.sqrt() } else { aa.sqrt() * bb.sqrt() };
            1.0 - (s / norm).clamp(-1.0, 1.0)
        }
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // the bits are the point: every comparison here is exact
mod tests {
    use super::*;

    /// Deterministic awkward values: every magnitude class f32 has.
    fn values(seed: u64, n: usize) -> Vec<f32> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let f = f32::from_bits((x >> 32) as u32);
                if f.is_finite() { f } else { (x % 1000) as f32 / 7.0 }
            })
            .collect()
    }

    #[test]
    fn every_level_returns_the_portable_bits() {
        let levels = Level::available();
        for n in [0usize, 1, 2, 3, 15, 16, 17, 31, 33, 100, 128, 513, 1536] {
            for seed in 1..20u64 {
                let (a, b) = (values(seed, n), values(seed * 7919, n));
                // Also vectors of ordinary size, where cancellation makes the order matter.
                let small: Vec<f32> = a.iter().map(|x| (x.to_bits() % 2001) as f32 / 1000.0 - 1.0).collect();
                let other: Vec<f32> = b.iter().map(|x| (x.to_bits() % 2001) as f32 / 1000.0 - 1.0).collect();
                for d in [Distance::Cosine, Distance::L2, Distance::InnerProduct] {
                    for (x, y) in [(&a, &b), (&small, &other), (&small, &small)] {
                        let want = distance_f32_at(Level::Portable, d, x, y).unwrap();
                        let wide: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
                        let wide_y: Vec<f64> = y.iter().map(|&v| f64::from(v)).collect();
                        for &level in &levels {
                            let got = distance_f32_at(level, d, x, y).unwrap();
                            assert_eq!(got.to_bits(), want.to_bits(), "{level:?} {d:?} n={n} seed={seed}");
                            // f32 products are exact in binary64: the f64 kernel on widened
                            // values is the same computation.
                            let got = distance_f64_at(level, d, &wide, &wide_y).unwrap();
                            assert_eq!(got.to_bits(), want.to_bits(), "f64 {level:?} {d:?} n={n}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn identical_vectors_are_at_distance_zero() {
        for n in [1usize, 2, 7, 16, 100, 768] {
            for seed in 1..50u64 {
                let v: Vec<f32> = values(seed, n).iter().map(|x| x / 1e30).collect();
                let v: Vec<f32> = v.iter().map(|x| if x.is_finite() { *x } else { 1.0 }).collect();
                if v.iter().all(|&x| x == 0.0) {
                    continue;
                }
                for level in Level::available() {
                    assert_eq!(distance_f32_at(level, Distance::Cosine, &v, &v), Some(0.0), "n={n} seed={seed}");
                    assert_eq!(distance_f32_at(level, Distance::L2, &v, &v), Some(0.0));
                }
            }
        }
    }

    #[test]
    fn the_summation_order_is_the_specified_one() {
        // 2^53 absorbs a 1.0 added to it (a tie, rounded to even), so a plain left-to-right
        // sum of 2^53 and 33 ones is 2^53; in 16 lanes only the two ones of lane 0 meet 2^53
        // alone, and the other lanes' ones are summed before the fold adds them.
        let mut a = vec![1.0f64; 34];
        a[0] = 2f64.powi(53);
        let ones = vec![1.0f64; 34];
        let mut lanes = [0.0f64; LANES];
        for (i, x) in a.iter().enumerate() {
            lanes[i % LANES] += x;
        }
        let sequential = a.iter().fold(0.0, |s, x| s + x);
        assert_eq!(sequential, 2f64.powi(53));
        for level in Level::available() {
            let got = distance_f64_at(level, Distance::InnerProduct, &a, &ones).unwrap();
            assert_eq!(got, fold(lanes));
            assert_eq!(got, 2f64.powi(53) + 32.0, "{level:?}"); // 2^53 + 31, a tie, to even
        }
    }

    #[test]
    fn the_current_level_is_available() {
        assert!(Level::current().is_available());
        assert!(Level::available().contains(&Level::Portable));
    }
}
