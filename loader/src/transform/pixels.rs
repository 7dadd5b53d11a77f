//! Element access for transforms: sources read as `f32`, destinations written from `f32`
//! in the batch's element type.

use crate::assemble::Elem;

/// Reads element `i` of a source as `f32` (`i` is in bounds: views are checked against
/// their source's length before any read).
pub(crate) trait Pixels {
    fn sample(&self, i: isize) -> f32;

    /// `out[k] = sample(at + k · step)`.
    #[inline]
    fn gather(&self, at: isize, step: isize, out: &mut [f32]) {
        for (k, o) in out.iter_mut().enumerate() {
            *o = self.sample(at + k as isize * step);
        }
    }

    /// `out[off + k · every] = sample(at + k · step)` for `k < n`.
    #[inline]
    fn gather_spread(&self, at: isize, step: isize, n: usize, out: &mut [f32], off: usize, every: usize) {
        for (k, o) in out[off..].iter_mut().step_by(every).take(n).enumerate() {
            *o = self.sample(at + k as isize * step);
        }
    }

    /// One line of `n` pixels of `channels` values each (pixel `x`, channel `c` at
    /// `at + x · sx + c · sc`) into lane `lane` of `out`, laid out `[x][c][LANES]`:
    /// `out[(x · channels + c) · LANES + lane]`.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn gather_line<const LANES: usize>(
        &self,
        at: isize,
        sx: isize,
        sc: isize,
        n: usize,
        channels: usize,
        out: &mut [f32],
        lane: usize,
    ) {
        for c in 0..channels {
            self.gather_spread(at + c as isize * sc, sx, n, out, c * LANES + lane, channels * LANES);
        }
    }

    /// The lines of `b`, line `r` as [`Pixels::gather_line`] lane `r`.
    #[inline]
    fn gather_rows<const LANES: usize>(&self, b: RowBlock, out: &mut [f32]) {
        b.line_by_line::<LANES, _>(self, out);
    }
}

/// `rows` lines of `n` pixels of `channels` values each: line `r`, pixel `x`, channel `c` at
/// `at + r · sy + x · sx + c · sc`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowBlock {
    pub(crate) at: isize,
    pub(crate) sy: isize,
    pub(crate) sx: isize,
    pub(crate) sc: isize,
    pub(crate) n: usize,
    pub(crate) channels: usize,
    pub(crate) rows: usize,
}

impl RowBlock {
    /// The element-by-element gather of every line ([`Pixels::gather_rows`]' definition).
    #[inline]
    fn line_by_line<const LANES: usize, P: Pixels + ?Sized>(self, px: &P, out: &mut [f32]) {
        for r in 0..self.rows {
            px.gather_line::<LANES>(self.at + r as isize * self.sy, self.sx, self.sc, self.n, self.channels, out, r);
        }
    }
}

impl Pixels for &[f32] {
    #[inline]
    #[allow(clippy::cast_sign_loss)] // checked views never reach below 0
    fn sample(&self, i: isize) -> f32 {
        self[i as usize]
    }

    #[inline]
    #[allow(clippy::cast_sign_loss)]
    fn gather(&self, at: isize, step: isize, out: &mut [f32]) {
        let n = out.len();
        match step {
            1 => out.copy_from_slice(&self[at as usize..at as usize + n]),
            -1 if n > 0 => {
                let lo = (at + 1 - n as isize) as usize;
                for (o, &v) in out.iter_mut().zip(self[lo..=at as usize].iter().rev()) {
                    *o = v;
                }
            }
            _ => {
                for (k, o) in out.iter_mut().enumerate() {
                    *o = self.sample(at + k as isize * step);
                }
            }
        }
    }
}

/// `u8` elements.
pub(crate) struct U8s<'a>(pub(crate) &'a [u8]);

impl Pixels for U8s<'_> {
    #[inline]
    #[allow(clippy::cast_sign_loss)]
    fn sample(&self, i: isize) -> f32 {
        f32::from(self.0[i as usize])
    }

    /// Eight interleaved lines at once (`sc = 1`, `|sx| = channels`: the stored `[H, W, C]`
    /// image, flipped or not): each output vector of `LANES` values is one byte from each line,
    /// so the lines are read in order and `out` is written in order. Any other shape goes
    /// line by line.
    #[allow(clippy::inline_always)] // compiled into each SIMD level's copy of the resampler
    #[inline(always)]
    #[allow(clippy::cast_sign_loss)] // checked views never reach below 0
    fn gather_rows<const LANES: usize>(&self, b: RowBlock, out: &mut [f32]) {
        let RowBlock { at, sy, sx, sc, n, channels, rows } = b;
        let values = n * channels;
        if rows != LANES || sc != 1 || sx.unsigned_abs() != channels || n == 0 {
            b.line_by_line::<LANES, _>(self, out);
            return;
        }
        let flipped = sx < 0;
        let runs: [&[u8]; LANES] = std::array::from_fn(|r| {
            let line = at + r as isize * sy;
            let first = if flipped { line + (n as isize - 1) * sx } else { line } as usize;
            &self.0[first..first + values]
        });
        let out = &mut out[..values * LANES];
        if flipped {
            // Pixel `x` is the run's pixel `n − 1 − x`; its channels keep their order.
            for (x, px) in out.chunks_exact_mut(channels * LANES).enumerate() {
                let base = (n - 1 - x) * channels;
                for (c, o) in px.chunks_exact_mut(LANES).enumerate() {
                    for (d, run) in o.iter_mut().zip(&runs) {
                        *d = f32::from(run[base + c]);
                    }
                }
            }
        } else {
            for (i, o) in out.chunks_exact_mut(LANES).enumerate() {
                for (d, run) in o.iter_mut().zip(&runs) {
                    *d = f32::from(run[i]);
                }
            }
        }
    }

    #[inline]
    #[allow(clippy::cast_sign_loss)] // checked views never reach below 0
    fn gather_spread(&self, at: isize, step: isize, n: usize, out: &mut [f32], off: usize, every: usize) {
        let dst = out[off..].iter_mut().step_by(every).take(n);
        if step > 0 {
            // One bounds check for the whole run instead of one per element.
            let src = self.0[at as usize..].iter().step_by(step as usize).take(n);
            for (o, &v) in dst.zip(src) {
                *o = f32::from(v);
            }
        } else if n > 0 {
            let first = at + (n as isize - 1) * step; // the lowest offset read
            let src = self.0[first as usize..=at as usize].iter().rev().step_by(step.unsigned_abs()).take(n);
            for (o, &v) in dst.zip(src) {
                *o = f32::from(v);
            }
        }
    }
}

/// Little-endian elements of any other type.
pub(crate) struct Le<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) elem: Elem,
}

impl Pixels for Le<'_> {
    #[inline]
    #[allow(clippy::cast_sign_loss, clippy::cast_possible_truncation, clippy::cast_precision_loss)]
    fn sample(&self, i: isize) -> f32 {
        let n = self.elem.size();
        let at = i as usize * n;
        let b = &self.bytes[at..at + n];
        let a2 = || [b[0], b[1]];
        let a4 = || [b[0], b[1], b[2], b[3]];
        let a8 = || [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
        match self.elem {
            Elem::Bool | Elem::U8 => f32::from(b[0]),
            Elem::I8 => f32::from(b[0] as i8),
            Elem::I16 => f32::from(i16::from_le_bytes(a2())),
            Elem::U16 => f32::from(u16::from_le_bytes(a2())),
            Elem::U32 => u32::from_le_bytes(a4()) as f32,
            Elem::U64 => u64::from_le_bytes(a8()) as f32,
            Elem::F16 => half::f16::from_le_bytes(a2()).to_f32(),
            Elem::Bf16 => half::bf16::from_le_bytes(a2()).to_f32(),
            Elem::I32 => i32::from_le_bytes(a4()) as f32,
            Elem::F32 => f32::from_le_bytes(a4()),
            Elem::I64 => i64::from_le_bytes(a8()) as f32,
            Elem::F64 => f64::from_le_bytes(a8()) as f32,
        }
    }
}

/// Writes `v` as element `i` of `out` in type `elem`: floats round to nearest even,
/// integers round half to even and saturate (NaN becomes 0), `bool` is `v != 0`.
#[inline]
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // `as` from float saturates
pub(crate) fn put(out: &mut [u8], i: usize, elem: Elem, v: f32) {
    let n = elem.size();
    let d = &mut out[i * n..(i + 1) * n];
    match elem {
        Elem::U8 => d[0] = v.round_ties_even() as u8,
        Elem::Bool => d[0] = u8::from(v != 0.0),
        Elem::I8 => d[0] = (v.round_ties_even() as i8) as u8,
        Elem::I16 => d.copy_from_slice(&(v.round_ties_even() as i16).to_le_bytes()),
        Elem::I32 => d.copy_from_slice(&(v.round_ties_even() as i32).to_le_bytes()),
        Elem::I64 => d.copy_from_slice(&(v.round_ties_even() as i64).to_le_bytes()),
        Elem::U16 => d.copy_from_slice(&(v.round_ties_even() as u16).to_le_bytes()),
        Elem::U32 => d.copy_from_slice(&(v.round_ties_even() as u32).to_le_bytes()),
        Elem::U64 => d.copy_from_slice(&(v.round_ties_even() as u64).to_le_bytes()),
        Elem::F16 => d.copy_from_slice(&half::f16::from_f32(v).to_le_bytes()),
        Elem::Bf16 => d.copy_from_slice(&half::bf16::from_f32(v).to_le_bytes()),
        Elem::F32 => d.copy_from_slice(&v.to_le_bytes()),
        Elem::F64 => d.copy_from_slice(&f64::from(v).to_le_bytes()),
    }
}

/// An output element type known at compile time (the common outputs' fast path).
pub(crate) trait Out {
    fn write(out: &mut [u8], i: usize, v: f32);

    /// Writes `v` as elements `i..i + v.len()`.
    #[inline]
    fn write_slice(out: &mut [u8], i: usize, v: &[f32]) {
        for (k, &x) in v.iter().enumerate() {
            Self::write(out, i + k, x);
        }
    }
}

/// `f32` outputs.
pub(crate) struct OutF32;
/// `f16` outputs.
pub(crate) struct OutF16;
/// `bf16` outputs.
pub(crate) struct OutBf16;
/// `u8` outputs (round half to even, saturate).
pub(crate) struct OutU8;

impl Out for OutF32 {
    #[inline]
    fn write(out: &mut [u8], i: usize, v: f32) {
        out[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
    }

    /// One copy where `out` is aligned for `f32` (batch slots are).
    #[inline]
    fn write_slice(out: &mut [u8], i: usize, v: &[f32]) {
        let bytes = &mut out[i * 4..(i + v.len()) * 4];
        #[cfg(target_endian = "little")]
        if let Ok(dst) = <[f32] as zerocopy::FromBytes>::mut_from_bytes(bytes) {
            dst.copy_from_slice(v);
            return;
        }
        for (d, x) in bytes.chunks_exact_mut(4).zip(v) {
            d.copy_from_slice(&x.to_le_bytes());
        }
    }
}

impl Out for OutF16 {
    #[inline]
    fn write(out: &mut [u8], i: usize, v: f32) {
        out[i * 2..i * 2 + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
    }

    /// Converts in blocks (the F16C instructions when the CPU has them: the same IEEE
    /// rounding, to nearest even, as the scalar conversion), straight into `out` where it is
    /// aligned for `u16` (batch slots are).
    #[inline]
    fn write_slice(out: &mut [u8], i: usize, v: &[f32]) {
        use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
        #[cfg(target_endian = "little")]
        if let Ok(bits) = <[u16] as zerocopy::FromBytes>::mut_from_bytes(&mut out[i * 2..(i + v.len()) * 2]) {
            let done = f16c_convert(bits, v);
            bits[done..].reinterpret_cast_mut::<half::f16>().convert_from_f32_slice(&v[done..]);
            return;
        }
        let mut h = [half::f16::ZERO; 64];
        for (block, vals) in out[i * 2..(i + v.len()) * 2].chunks_mut(128).zip(v.chunks(64)) {
            let h = &mut h[..vals.len()];
            h.convert_from_f32_slice(vals);
            for (d, x) in block.chunks_exact_mut(2).zip(h.iter()) {
                d.copy_from_slice(&x.to_le_bytes());
            }
        }
    }
}

/// Converts the longest multiple of 8 of `v` into `bits` with F16C's packed conversion,
/// inline, where the CPU has it; returns how many it converted (0 without F16C). The packed
/// instruction rounds to nearest even, as `half`'s conversion does.
#[allow(clippy::inline_always, unsafe_code)]
#[inline(always)]
fn f16c_convert(bits: &mut [u16], v: &[f32]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("f16c") && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: `f16c_blocks` only requires F16C and AVX, which were just detected.
        return unsafe { f16c_blocks(bits, v) };
    }
    let _ = (bits, v);
    0
}

/// [`f16c_convert`]'s loop.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
#[allow(unsafe_code)]
fn f16c_blocks(bits: &mut [u16], v: &[f32]) -> usize {
    use std::arch::x86_64::{__m128i, _MM_FROUND_TO_NEAREST_INT, _mm_storeu_si128, _mm256_cvtps_ph, _mm256_loadu_ps};
    let mut n = 0;
    for (d, s) in bits.chunks_exact_mut(8).zip(v.chunks_exact(8)) {
        // SAFETY: `s` is 8 `f32`s and `d` 8 `u16`s (16 bytes); the unaligned load and store
        // touch exactly those (`storeu` needs no alignment, whatever the pointer's type says).
        #[allow(clippy::cast_ptr_alignment)]
        unsafe {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(s.as_ptr()));
            _mm_storeu_si128(d.as_mut_ptr().cast::<__m128i>(), h);
        }
        n += 8;
    }
    n
}

impl Out for OutBf16 {
    #[inline]
    fn write(out: &mut [u8], i: usize, v: f32) {
        out[i * 2..i * 2 + 2].copy_from_slice(&half::bf16::from_f32(v).to_le_bytes());
    }
}

impl Out for OutU8 {
    #[inline]
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // in 0..=255 after the clamp
    fn write(out: &mut [u8], i: usize, v: f32) {
        // Clamped (NaN becomes 0), then rounded half to even by adding and subtracting 2^23:
        // the float addition rounds to an integer, ties to even, exactly as
        // `round_ties_even`, without a call into the maths library.
        const MAGIC: f32 = 8_388_608.0;
        let c = if v > 0.0 { v.min(255.0) } else { 0.0 };
        out[i] = ((c + MAGIC) - MAGIC) as u8;
    }
}
