//! Antialiased bilinear resampling, separable: the triangle filter widened by the scale
//! factor when shrinking (the filter of Pillow's `BILINEAR` and of torchvision's
//! `resize(antialias=True)`), plain bilinear with half-pixel centres when enlarging.
//!
//! Why written here rather than taken from a SIMD resizer: the loader promises the same
//! bytes on every CPU, and a resizer that picks its kernel (and with it its rounding) per
//! instruction set cannot promise that. This one is scalar `f32` in a fixed order of
//! operations, shaped so that both passes auto-vectorise (multiply-adds across eight rows,
//! then over whole rows), which vectorisation does not reorder. The same source is compiled
//! once more with AVX2 and chosen per [`tessera::simd::Level`]; no multiply and add is fused
//! at either level, so both compute the same bits (a test compares them).

use tessera::simd::Level;

use super::pixels::{Pixels, RowBlock};

/// The filter taps of every output position along one axis.
#[derive(Debug, Default)]
pub(crate) struct Taps {
    /// First source index of output `i`'s taps.
    start: Vec<usize>,
    /// Tap count of output `i`.
    count: Vec<usize>,
    /// Tap weights, `stride` per output position (normalised to sum 1).
    weights: Vec<f32>,
    stride: usize,
}

impl Taps {
    /// Computes the taps resampling `input` positions to `output`.
    pub(crate) fn compute(&mut self, input: usize, output: usize) {
        self.start.clear();
        self.count.clear();
        self.weights.clear();
        if input == 0 || output == 0 {
            self.stride = 0;
            return;
        }
        let scale = input as f64 / output as f64;
        let fscale = scale.max(1.0);
        let support = fscale; // the triangle's half-width, 1, in source pixels
        // An output position covers at most ceil(2 × support) + 1 source pixels.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // small positive
        let stride = (support * 2.0).ceil() as usize + 1;
        self.stride = stride;
        self.weights.resize(output * stride, 0.0);
        let inv = 1.0 / fscale;
        for i in 0..output {
            let center = (i as f64 + 0.5) * scale;
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // clamped to [0, input]
            let lo = ((center - support + 0.5).floor().max(0.0)) as usize;
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let hi = ((center + support + 0.5).floor().min(input as f64)) as usize;
            let n = hi.saturating_sub(lo).min(stride);
            let w = &mut self.weights[i * stride..i * stride + n];
            let mut sum = 0.0f64;
            let mut raw = [0.0f64; 64];
            for (k, r) in raw.iter_mut().enumerate().take(n) {
                let x = ((k + lo) as f64 - center + 0.5) * inv;
                *r = (1.0 - x.abs()).max(0.0);
                sum += *r;
            }
            if n > raw.len() {
                // Shrinking by more than 31×: compute the rest without the fixed array.
                sum = 0.0;
                for k in 0..n {
                    let x = ((k + lo) as f64 - center + 0.5) * inv;
                    sum += (1.0 - x.abs()).max(0.0);
                }
                for (k, wk) in w.iter_mut().enumerate() {
                    let x = ((k + lo) as f64 - center + 0.5) * inv;
                    #[allow(clippy::cast_possible_truncation)]
                    let v = ((1.0 - x.abs()).max(0.0) / sum) as f32;
                    *wk = v;
                }
            } else {
                for (wk, r) in w.iter_mut().zip(&raw) {
                    #[allow(clippy::cast_possible_truncation)] // weights in [0, 1]
                    let v = if sum > 0.0 { (r / sum) as f32 } else { 0.0 };
                    *wk = v;
                }
            }
            self.start.push(lo);
            self.count.push(n);
        }
    }

    #[inline]
    fn of(&self, i: usize) -> (usize, &[f32]) {
        let n = self.count[i];
        (self.start[i], &self.weights[i * self.stride..i * self.stride + n])
    }
}

/// A 2-D grid of `channels`-vectors in a source: element `(y, x, c)` is at
/// `base + y·sy + x·sx + c·sc`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Grid {
    pub(crate) base: isize,
    pub(crate) sy: isize,
    pub(crate) sx: isize,
    pub(crate) sc: isize,
    pub(crate) height: usize,
    pub(crate) width: usize,
    pub(crate) channels: usize,
}

/// Reusable buffers of the resampler.
#[derive(Debug, Default)]
pub(crate) struct Resampler {
    tx: Taps,
    ty: Taps,
    /// The horizontal pass's output, `[height, channels, out_w]`.
    tmp: Vec<f32>,
    /// [`ROWS`] source rows, `[x][channel][row]`.
    block: Vec<f32>,
    /// The horizontal pass's sums for [`ROWS`] rows, `[channel][x][row]`.
    stage: Vec<f32>,
}

/// Source rows the horizontal pass resamples together.
const ROWS: usize = 8;

impl Resampler {
    /// Bytes held.
    pub(crate) fn capacity_bytes(&self) -> usize {
        (self.tmp.capacity()
            + self.block.capacity()
            + self.stage.capacity()
            + self.tx.weights.capacity()
            + self.ty.weights.capacity())
            * 4
            + (self.tx.start.capacity()
                + self.tx.count.capacity()
                + self.ty.start.capacity()
                + self.ty.count.capacity())
                * std::mem::size_of::<usize>()
    }

    /// Resamples `g` of `src` to `out_h × out_w`, into `out`: `out_h` rows, each `channels`
    /// planes of `out_w` values (`[out_h, channels, out_w]`, row-major; overwritten).
    pub(crate) fn run<S: Pixels>(&mut self, src: &S, g: Grid, out_h: usize, out_w: usize, out: &mut [f32]) {
        self.run_at(Level::current(), src, g, out_h, out_w, out);
    }

    /// [`Resampler::run`] compiled for `level` (the same bits at every level: see
    /// [`tessera::simd`]); a level this CPU lacks runs as [`Level::Portable`].
    #[allow(unsafe_code)]
    pub(crate) fn run_at<S: Pixels>(
        &mut self,
        level: Level,
        src: &S,
        g: Grid,
        out_h: usize,
        out_w: usize,
        out: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if level == Level::Avx2 && Level::Avx2.is_available() {
            // SAFETY: `run_avx2` only requires the CPU to support AVX2, which
            // `is_x86_feature_detected!("avx2")` (in `is_available`) has just confirmed.
            unsafe { self.run_avx2(src, g, out_h, out_w, out) };
            return;
        }
        let _ = level;
        self.run_body::<S, false>(src, g, out_h, out_w, out);
    }

    /// [`Resampler::run_body`] compiled with AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn run_avx2<S: Pixels>(&mut self, src: &S, g: Grid, out_h: usize, out_w: usize, out: &mut [f32]) {
        self.run_body::<S, true>(src, g, out_h, out_w, out);
    }

    /// The resampler's loops: `inline(always)` so that each level's `target_feature` function
    /// gets its own copy compiled with its features.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn run_body<S: Pixels, const AVX2: bool>(&mut self, src: &S, g: Grid, out_h: usize, out_w: usize, out: &mut [f32]) {
        let c = g.channels;
        self.tx.compute(g.width, out_w);
        self.ty.compute(g.height, out_h);
        let line = out_w * c;
        // Every element of both buffers is written before it is read: no zeroing.
        grow(&mut self.tmp, g.height * line);
        // Horizontal pass, eight source rows at a time: the rows' values are gathered as
        // `f32` into `block`, laid out `[x][channel][row]` (`block[(x · c + ch) · 8 + r]`), so
        // each output column sums its taps (in tap order) for eight rows at once in one vector.
        let span = g.width;
        grow(&mut self.block, span * c * ROWS);
        grow(&mut self.stage, line * ROWS);
        for y0 in (0..g.height).step_by(ROWS) {
            let rows = ROWS.min(g.height - y0);
            let at = g.base + y0 as isize * g.sy;
            let b = RowBlock { at, sy: g.sy, sx: g.sx, sc: g.sc, n: span, channels: c, rows };
            src.gather_rows::<ROWS>(b, &mut self.block);
            // Each output column's sums land in `stage` as `[channel][x][row]` (whole vectors),
            // then move to their rows of `tmp`.
            match c {
                1 => horizontal::<1>(&self.tx, &self.block, &mut self.stage),
                3 => horizontal::<3>(&self.tx, &self.block, &mut self.stage),
                4 => horizontal::<4>(&self.tx, &self.block, &mut self.stage),
                _ => horizontal_any(&self.tx, c, &self.block, &mut self.stage),
            }
            transpose_into_rows::<AVX2>(&self.stage, &mut self.tmp[y0 * line..(y0 + rows) * line], line);
        }
        // Vertical pass: each output row a weighted sum of whole rows.
        for (y, dst) in out.chunks_exact_mut(line.max(1)).take(out_h).enumerate() {
            let (y0, w) = self.ty.of(y);
            for (k, &wk) in w.iter().enumerate() {
                let s = &self.tmp[(y0 + k) * line..(y0 + k + 1) * line];
                if k == 0 {
                    // 0 + w·v = w·v: the first tap starts the sum.
                    for (d, &v) in dst.iter_mut().zip(s) {
                        *d = wk * v;
                    }
                } else {
                    for (d, &v) in dst.iter_mut().zip(s) {
                        *d += wk * v;
                    }
                }
            }
            if w.is_empty() {
                dst.fill(0.0);
            }
        }
    }
}

/// The horizontal sums of one block of [`ROWS`] rows with `C` channels: `block` is
/// `[x][channel][row]`, `stage` becomes `[channel][out x][row]`. Each output column's taps are
/// summed in tap order, eight rows per vector.
#[allow(clippy::inline_always)] // compiled into each level's copy of the resampler
#[inline(always)]
fn horizontal<const C: usize>(taps: &Taps, block: &[f32], stage: &mut [f32]) {
    let out_w = taps.start.len();
    let pixel = C * ROWS;
    for x in 0..out_w {
        let (x0, w) = taps.of(x);
        let mut acc = [[0.0f32; ROWS]; C];
        let span = &block[x0 * pixel..(x0 + w.len()) * pixel];
        for (&wk, px) in w.iter().zip(span.chunks_exact(pixel)) {
            for (a, col) in acc.iter_mut().zip(px.chunks_exact(ROWS)) {
                for (a, &v) in a.iter_mut().zip(col) {
                    *a += wk * v;
                }
            }
        }
        for (ch, a) in acc.iter().enumerate() {
            let at = (ch * out_w + x) * ROWS;
            stage[at..at + ROWS].copy_from_slice(a);
        }
    }
}

/// Moves `stage` (`[j][row]`, [`ROWS`] lanes per `j`) into `rows` (`rows.len() / line` rows
/// of `line` values): `rows[r · line + j] = stage[j · ROWS + r]`. Whole 8 × 8 tiles go through
/// fixed-size arrays, which the compiler turns into register shuffles; data movement only.
/// `AVX2`: the copy compiled with AVX2 transposes each tile in eight registers.
#[allow(clippy::inline_always)]
#[inline(always)]
fn transpose_into_rows<const AVX2: bool>(stage: &[f32], rows: &mut [f32], line: usize) {
    let n = rows.len() / line.max(1);
    let tiles = line / ROWS;
    if n == ROWS {
        let (rows_out, _) = rows.split_at_mut(ROWS * line);
        for t in 0..tiles {
            let Ok(tile) = <&[f32; ROWS * ROWS]>::try_from(&stage[t * ROWS * ROWS..(t + 1) * ROWS * ROWS]) else {
                continue; // unreachable: the range is ROWS² long
            };
            let moved = if AVX2 { transposed(tile) } else { None };
            for (r, row) in rows_out.chunks_exact_mut(line).enumerate() {
                let Ok(dst) = <&mut [f32; ROWS]>::try_from(&mut row[t * ROWS..(t + 1) * ROWS]) else {
                    continue;
                };
                match &moved {
                    Some(m) => *dst = m[r],
                    None => {
                        for (i, d) in dst.iter_mut().enumerate() {
                            *d = tile[i * ROWS + r];
                        }
                    }
                }
            }
        }
    }
    // The tail columns, and blocks of fewer than ROWS rows.
    let from = if n == ROWS { tiles * ROWS } else { 0 };
    for (r, row) in rows.chunks_exact_mut(line).enumerate() {
        for (j, d) in row.iter_mut().enumerate().skip(from) {
            *d = stage[j * ROWS + r];
        }
    }
}

/// The transpose of an 8 × 8 tile (`out[r][i] = tile[i · 8 + r]`) in AVX2 registers, or
/// `None` where this CPU lacks AVX2. Data movement only: no value changes.
#[allow(clippy::inline_always)]
#[inline(always)]
#[allow(unsafe_code)]
fn transposed(tile: &[f32; ROWS * ROWS]) -> Option<[[f32; ROWS]; ROWS]> {
    #[cfg(target_arch = "x86_64")]
    if Level::Avx2.is_available() {
        // SAFETY: `transpose_avx2` only requires the CPU to support AVX2, which
        // `is_x86_feature_detected!("avx2")` (in `is_available`) has just confirmed.
        return Some(unsafe { transpose_avx2(tile) });
    }
    let _ = tile;
    None
}

/// [`transposed`] with AVX2 instructions: unpack pairs of rows, shuffle pairs of pairs, then
/// swap 128-bit halves.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
fn transpose_avx2(tile: &[f32; ROWS * ROWS]) -> [[f32; ROWS]; ROWS] {
    use std::arch::x86_64::{
        __m256, _mm256_loadu_ps, _mm256_permute2f128_ps, _mm256_shuffle_ps, _mm256_storeu_ps, _mm256_unpackhi_ps,
        _mm256_unpacklo_ps,
    };
    // SAFETY: row `i < 8` of `tile` is its elements `8 i .. 8 i + 8`, inside its 64; the
    // unaligned load reads exactly those 8 `f32`s.
    let r: [__m256; ROWS] = std::array::from_fn(|i| unsafe { _mm256_loadu_ps(tile[i * ROWS..].as_ptr()) });
    let t = [
        _mm256_unpacklo_ps(r[0], r[1]),
        _mm256_unpackhi_ps(r[0], r[1]),
        _mm256_unpacklo_ps(r[2], r[3]),
        _mm256_unpackhi_ps(r[2], r[3]),
        _mm256_unpacklo_ps(r[4], r[5]),
        _mm256_unpackhi_ps(r[4], r[5]),
        _mm256_unpacklo_ps(r[6], r[7]),
        _mm256_unpackhi_ps(r[6], r[7]),
    ];
    let u = [
        _mm256_shuffle_ps::<0x44>(t[0], t[2]),
        _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
        _mm256_shuffle_ps::<0x44>(t[1], t[3]),
        _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
        _mm256_shuffle_ps::<0x44>(t[4], t[6]),
        _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
        _mm256_shuffle_ps::<0x44>(t[5], t[7]),
        _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
    ];
    let o = [
        _mm256_permute2f128_ps::<0x20>(u[0], u[4]),
        _mm256_permute2f128_ps::<0x20>(u[1], u[5]),
        _mm256_permute2f128_ps::<0x20>(u[2], u[6]),
        _mm256_permute2f128_ps::<0x20>(u[3], u[7]),
        _mm256_permute2f128_ps::<0x31>(u[0], u[4]),
        _mm256_permute2f128_ps::<0x31>(u[1], u[5]),
        _mm256_permute2f128_ps::<0x31>(u[2], u[6]),
        _mm256_permute2f128_ps::<0x31>(u[3], u[7]),
    ];
    let mut out = [[0.0f32; ROWS]; ROWS];
    for (d, v) in out.iter_mut().zip(o) {
        // SAFETY: `d` is 8 `f32`s; the unaligned store writes exactly those.
        unsafe { _mm256_storeu_ps(d.as_mut_ptr(), v) };
    }
    out
}

/// [`horizontal`] for a channel count known only at run time.
#[allow(clippy::inline_always)]
#[inline(always)]
fn horizontal_any(taps: &Taps, c: usize, block: &[f32], stage: &mut [f32]) {
    let out_w = taps.start.len();
    let pixel = c * ROWS;
    for x in 0..out_w {
        let (x0, w) = taps.of(x);
        let span = &block[x0 * pixel..(x0 + w.len()) * pixel];
        for ch in 0..c {
            let mut acc = [0.0f32; ROWS];
            for (&wk, px) in w.iter().zip(span.chunks_exact(pixel)) {
                for (a, &v) in acc.iter_mut().zip(&px[ch * ROWS..(ch + 1) * ROWS]) {
                    *a += wk * v;
                }
            }
            let at = (ch * out_w + x) * ROWS;
            stage[at..at + ROWS].copy_from_slice(&acc);
        }
    }
}

/// Makes `v` at least `n` long without touching what it holds.
fn grow(v: &mut Vec<f32>, n: usize) {
    if v.len() < n {
        v.resize(n, 0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weights_of(input: usize, output: usize) -> Vec<(usize, Vec<f32>)> {
        let mut t = Taps::default();
        t.compute(input, output);
        (0..output).map(|i| (t.of(i).0, t.of(i).1.to_vec())).collect()
    }

    #[test]
    fn taps_sum_to_one_and_stay_inside() {
        for (i, o) in [(1, 1), (1, 7), (7, 1), (256, 224), (224, 256), (1000, 3), (3, 1000), (5000, 7)] {
            for (start, w) in weights_of(i, o) {
                assert!(start + w.len() <= i, "{i}->{o}");
                let s: f32 = w.iter().sum();
                assert!((s - 1.0).abs() < 1e-5, "{i}->{o}: {s}");
            }
        }
    }

    #[test]
    fn halving_averages_pairs_and_doubling_interpolates() {
        // 4 → 2: each output is the triangle-weighted mean of its 4 neighbours (1/8, 3/8,
        // 3/8, 1/8, cut at the edges and renormalised).
        let w = weights_of(4, 2);
        assert_eq!(w[0].0, 0);
        let expect = [3.0 / 7.0, 3.0 / 7.0, 1.0 / 7.0];
        for (a, b) in w[0].1.iter().zip(expect) {
            assert!((a - b).abs() < 1e-6, "{:?}", w[0]);
        }
        // 2 → 4 (bilinear, half-pixel centres): outputs at 0.25, 0.75, 1.25, 1.75 (in
        // source pixel units from the left edge).
        let src = [0.0f32, 100.0];
        let mut out = vec![0.0; 4];
        let g = Grid { base: 0, sy: 0, sx: 1, sc: 0, height: 1, width: 2, channels: 1 };
        Resampler::default().run(&src.as_slice(), g, 1, 4, &mut out);
        assert_eq!(out, [0.0, 25.0, 75.0, 100.0]);
    }

    #[test]
    fn every_simd_level_computes_the_same_bits() {
        // Awkward sizes in both directions, u8 and f32 sources, three channels strided as HWC.
        let (h, w) = (37usize, 53usize);
        let bytes: Vec<u8> = (0..h * w * 3).map(|i| (i * 7919 % 251) as u8).collect();
        let floats: Vec<f32> = (0..h * w * 3).map(|i| ((i * 104_729) % 1009) as f32 / 7.3).collect();
        let g = Grid { base: 0, sy: (w * 3) as isize, sx: 3, sc: 1, height: h, width: w, channels: 3 };
        for (oh, ow) in [(1, 1), (5, 224), (224, 7), (37, 53), (100, 31), (9, 9)] {
            let run = |level: Level, u8s: bool| {
                let mut out = vec![0.0f32; oh * ow * 3];
                let mut r = Resampler::default();
                if u8s {
                    r.run_at(level, &super::super::pixels::U8s(&bytes), g, oh, ow, &mut out);
                } else {
                    r.run_at(level, &floats.as_slice(), g, oh, ow, &mut out);
                }
                out.iter().map(|v| v.to_bits()).collect::<Vec<u32>>()
            };
            for u8s in [true, false] {
                let portable = run(Level::Portable, u8s);
                for level in Level::available() {
                    assert_eq!(run(level, u8s), portable, "{level:?} {oh}x{ow} u8={u8s}");
                }
            }
        }
    }

    #[test]
    fn constant_images_stay_constant() {
        let src = vec![77.0f32; 13 * 9 * 3];
        let g = Grid { base: 0, sy: 9 * 3, sx: 3, sc: 1, height: 13, width: 9, channels: 3 };
        for (h, w) in [(1, 1), (5, 4), (13, 9), (30, 20)] {
            let mut out = vec![0.0; h * w * 3];
            Resampler::default().run(&src.as_slice(), g, h, w, &mut out);
            assert!(out.iter().all(|&v| (v - 77.0).abs() < 1e-3), "{h}x{w}");
        }
    }
}
