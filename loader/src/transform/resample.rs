//! Antialiased bilinear resampling, separable: the triangle filter widened by the scale
//! factor when shrinking (the filter of Pillow's `BILINEAR` and of torchvision's
//! `resize(antialias=True)`), plain bilinear with half-pixel centres when enlarging.
//!
//! Why written here rather than taken from a SIMD resizer: the loader promises the same
//! bytes on every CPU, and a resizer that picks its kernel (and with it its rounding) per
//! instruction set cannot promise that. This one is scalar `f32` in a fixed order of
//! operations, shaped so that its vertical pass auto-vectorises (a multiply-add over whole
//! rows), which vectorisation does not reorder.

use super::pixels::Pixels;

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
    /// [`ROWS`] source rows of one channel, column-major.
    block: Vec<f32>,
}

/// Source rows the horizontal pass resamples together.
const ROWS: usize = 8;

impl Resampler {
    /// Bytes held.
    pub(crate) fn capacity_bytes(&self) -> usize {
        (self.tmp.capacity() + self.block.capacity() + self.tx.weights.capacity() + self.ty.weights.capacity()) * 4
            + (self.tx.start.capacity()
                + self.tx.count.capacity()
                + self.ty.start.capacity()
                + self.ty.count.capacity())
                * std::mem::size_of::<usize>()
    }

    /// Resamples `g` of `src` to `out_h × out_w`, into `out`: `out_h` rows, each `channels`
    /// planes of `out_w` values (`[out_h, channels, out_w]`, row-major; overwritten).
    pub(crate) fn run<S: Pixels>(&mut self, src: &S, g: Grid, out_h: usize, out_w: usize, out: &mut [f32]) {
        let c = g.channels;
        self.tx.compute(g.width, out_w);
        self.ty.compute(g.height, out_h);
        let line = out_w * c;
        // Every element of both buffers is written before it is read: no zeroing.
        grow(&mut self.tmp, g.height * line);
        // Horizontal pass, eight source rows at a time: the rows' values are gathered as
        // `f32` into `block`, column-major (`block[x · 8 + r]`), so each output column sums its
        // taps (in tap order) for eight rows at once in one vector.
        let span = g.width;
        grow(&mut self.block, span * ROWS);
        for y0 in (0..g.height).step_by(ROWS) {
            let rows = ROWS.min(g.height - y0);
            for ch in 0..c {
                for r in 0..rows {
                    let at = g.base + (y0 + r) as isize * g.sy + ch as isize * g.sc;
                    src.gather_spread(at, g.sx, span, &mut self.block, r, ROWS);
                }
                for x in 0..out_w {
                    let (x0, w) = self.tx.of(x);
                    let mut acc = [0.0f32; ROWS];
                    for (k, &wk) in w.iter().enumerate() {
                        let col = &self.block[(x0 + k) * ROWS..(x0 + k + 1) * ROWS];
                        for (a, &v) in acc.iter_mut().zip(col) {
                            *a += wk * v;
                        }
                    }
                    for (r, &a) in acc.iter().enumerate().take(rows) {
                        self.tmp[(y0 + r) * line + ch * out_w + x] = a;
                    }
                }
            }
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
