//! A tiny seeded pseudo-random generator (xorshift64*), so fault schedules are reproducible
//! without a `rand` dependency.

/// xorshift64* generator. Not cryptographic; deterministic for a seed.
#[derive(Clone, Debug)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator from a seed (a zero seed is replaced by a fixed non-zero constant).
    #[must_use]
    pub fn new(seed: u64) -> Self {
        // Scramble the seed once so nearby seeds give unrelated streams.
        let s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
        Self(if s == 0 { 0x2545_F491_4F6C_DD1D } else { s })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A float uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p` (`p <= 0` never, `p >= 1` always).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (p >= 1.0 || self.next_f64() < p)
    }

    /// A value uniform in `0..n` (0 when `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}

#[cfg(test)]
mod tests {
    use super::XorShift;

    #[test]
    fn deterministic_and_roughly_uniform() {
        let (mut a, mut b) = (XorShift::new(7), XorShift::new(7));
        assert!((0..100).all(|_| a.next_u64() == b.next_u64()));
        let mut r = XorShift::new(1);
        let hits = (0..100_000).filter(|_| r.chance(0.1)).count();
        assert!((9_000..11_000).contains(&hits), "{hits}");
        assert!(!XorShift::new(0).chance(0.0));
        assert!(XorShift::new(0).chance(1.0));
    }
}
