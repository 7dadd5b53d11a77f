//! Which compilation of a numeric kernel runs: the same source built for the baseline target
//! or with wider vectors, chosen once per process by what the CPU has.
//!
//! A kernel dispatched on a [`Level`] must compute the same bits at every level (the brief's
//! rule: SIMD may change speed, never bytes). Rust neither reassociates floating-point
//! operations nor contracts a multiply and an add into a fused one, and integer arithmetic is
//! exact, so one source compiled with more vector registers keeps its results; each kernel's
//! tests compare every level this CPU runs against [`Level::Portable`]. Users of this module:
//! [`crate::distance`] (DIST-01) and the loader's image resampler.

use std::sync::OnceLock;

/// A compilation of the crate's (and the loader's) SIMD kernels; every level returns the same
/// bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// The crate's baseline target (SSE2 on x86-64): always available.
    Portable,
    /// The same code compiled with AVX2 (x86-64 only).
    Avx2,
}

impl Level {
    /// The name `TESSERA_SIMD` accepts.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Portable => "portable",
            Self::Avx2 => "avx2",
        }
    }

    /// Whether this CPU runs the level.
    #[must_use]
    pub fn is_available(self) -> bool {
        match self {
            Self::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Self::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            Self::Avx2 => false,
        }
    }

    /// Every level this CPU runs, slowest first.
    #[must_use]
    pub fn available() -> Vec<Self> {
        [Self::Portable, Self::Avx2].into_iter().filter(|l| l.is_available()).collect()
    }

    /// The level the kernels use: the fastest available, or the one
    /// the environment variable `TESSERA_SIMD` names (`portable`, `avx2`) when this CPU runs
    /// it. Read once per process. The answer is the same whichever is chosen; the variable
    /// exists so that tests and users can run every path on one machine.
    #[must_use]
    pub fn current() -> Self {
        static LEVEL: OnceLock<Level> = OnceLock::new();
        *LEVEL.get_or_init(|| {
            let forced = std::env::var("TESSERA_SIMD").ok();
            let all = Self::available();
            forced
                .and_then(|name| all.iter().copied().find(|l| l.name() == name.trim()))
                .or_else(|| all.last().copied())
                .unwrap_or(Self::Portable)
        })
    }
}
