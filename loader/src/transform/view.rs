//! A row seen through crops, flips and strides without copying: per axis, where the data
//! sits in the output (the rest is padding) and how to step through the source.
//!
//! Crops (also ones larger than the row, which pad), flips and temporal strides only change
//! the view; the one pass that writes the batch slot ([`View::emit`]) reads the source
//! through it. Only a resize materialises pixels.

/// One axis of a view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Axis {
    /// Source element offset of the first data element along this axis.
    pub(crate) start: isize,
    /// Source elements between neighbouring output positions (negative when flipped).
    pub(crate) step: isize,
    /// Data positions along the axis.
    pub(crate) n: usize,
    /// Output length along the axis.
    pub(crate) out: usize,
    /// Output position of the first data element (positions outside `off..off + n` pad).
    pub(crate) off: usize,
}

/// A strided, padded view of a row-major source.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct View {
    pub(crate) axes: Vec<Axis>,
}

impl View {
    /// The whole of a row-major source of `dims`.
    pub(crate) fn dense(dims: &[usize]) -> Self {
        let mut axes = vec![Axis { start: 0, step: 1, n: 0, out: 0, off: 0 }; dims.len()];
        let mut step = 1isize;
        for (a, &d) in axes.iter_mut().zip(dims).rev() {
            *a = Axis { start: 0, step, n: d, out: d, off: 0 };
            step = step.saturating_mul(isize::try_from(d).unwrap_or(isize::MAX));
        }
        Self { axes }
    }

    /// Output lengths.
    pub(crate) fn dims(&self) -> Vec<usize> {
        self.axes.iter().map(|a| a.out).collect()
    }

    /// True when no axis pads.
    pub(crate) fn unpadded(&self) -> bool {
        self.axes.iter().all(|a| a.off == 0 && a.n == a.out)
    }

    /// Source offset of the first data element.
    pub(crate) fn base(&self) -> isize {
        self.axes.iter().map(|a| a.start).sum()
    }

    /// Keeps output positions `begin..begin + len` of axis `k` (`begin` may be negative and
    /// the range may pass the end: those positions pad).
    pub(crate) fn crop(&mut self, k: usize, begin: isize, len: usize) {
        let a = &mut self.axes[k];
        let (off, n) = (a.off as isize, a.n as isize);
        let lo = (off - begin).max(0);
        let hi = (off + n - begin).min(len as isize);
        if hi <= lo {
            a.n = 0;
            a.off = 0;
        } else {
            a.start += (lo + begin - off) * a.step;
            a.n = (hi - lo).unsigned_abs();
            a.off = lo.unsigned_abs();
        }
        a.out = len;
    }

    /// Reverses axis `k`.
    pub(crate) fn flip(&mut self, k: usize) {
        let a = &mut self.axes[k];
        if a.n > 0 {
            a.start += (a.n as isize - 1) * a.step;
        }
        a.step = -a.step;
        a.off = a.out - a.off - a.n;
    }

    /// Keeps every `s`-th output position of axis `k`, from the first.
    pub(crate) fn stride(&mut self, k: usize, s: usize) {
        let a = &mut self.axes[k];
        let first = a.off.div_ceil(s); // first kept position holding data, in new units
        let end = (a.off + a.n).div_ceil(s);
        if end > first {
            a.start += (first * s - a.off) as isize * a.step;
            a.n = end - first;
        } else {
            a.n = 0;
        }
        a.off = if a.n > 0 { first } else { 0 };
        a.step *= s as isize;
        a.out = a.out.div_ceil(s);
    }

    /// The largest and smallest source offsets the view reads (`None` when it reads none).
    pub(crate) fn reach(&self) -> Option<(isize, isize)> {
        let (mut lo, mut hi) = (0isize, 0isize);
        for a in &self.axes {
            if a.n == 0 {
                return None;
            }
            let end = a.start + (a.n as isize - 1) * a.step;
            lo += a.start.min(end);
            hi += a.start.max(end);
        }
        Some((lo, hi))
    }

    /// Calls `f(out, Some(src), index)` for every output position holding data and
    /// `f(out, None, index)` for padding, where the output is row-major in the axes permuted
    /// by `perm` (output axis `i` is view axis `perm[i]`), `out` counts output elements from
    /// 0, and `index` is the position's view index along axis `chan` (0 when `None`).
    pub(crate) fn emit(&self, perm: &[usize], chan: Option<usize>, mut f: impl FnMut(usize, Option<isize>, usize)) {
        self.lines(perm, chan, |l| {
            let (d0, n, mut src, step) = l.data.unwrap_or((l.len, 0, 0, 0));
            for j in 0..l.len {
                let c = l.chan.unwrap_or(j);
                let out = l.out + j * l.out_step;
                if j >= d0 && j < d0 + n {
                    f(out, Some(src), c);
                    src += step;
                } else {
                    f(out, None, c);
                }
            }
        });
    }

    /// Walks the output line by line: a line runs along one output axis at fixed other
    /// indexes — the innermost, or the one before it when the innermost is short (a pixel's
    /// channels: lines of 3 would cost more to walk than to fill).
    pub(crate) fn lines(&self, perm: &[usize], chan: Option<usize>, mut f: impl FnMut(Line)) {
        for l in self.line_iter(perm, chan) {
            f(l);
        }
    }

    /// [`View::lines`] as an iterator (a loop over it compiles in its caller, with the
    /// caller's target features, where a closure would not).
    pub(crate) fn line_iter(&self, perm: &[usize], chan: Option<usize>) -> Lines {
        let r = perm.len();
        let axes: Vec<Axis> = perm.iter().map(|&p| self.axes[p]).collect();
        if r == 0 {
            let only = Line { out: 0, len: 1, out_step: 1, data: Some((0, 1, self.base(), 0)), chan: Some(0) };
            return Lines { single: Some(only), ..Lines::default() };
        }
        if axes.iter().any(|a| a.out == 0) {
            return Lines::default();
        }
        // Row-major strides of the output.
        let mut ostride = vec![1usize; r];
        for i in (0..r - 1).rev() {
            ostride[i] = ostride[i + 1] * axes[i + 1].out;
        }
        let along = if r >= 2 && axes[r - 1].out <= 4 && axes[r - 2].out > axes[r - 1].out { r - 2 } else { r - 1 };
        let chan_pos = chan.and_then(|c| perm.iter().position(|&p| p == c));
        let others: Vec<usize> = (0..r).filter(|&i| i != along).collect();
        let idx = vec![0usize; others.len()];
        let left: usize = others.iter().map(|&i| axes[i].out).product();
        Lines { axes, ostride, along, chan_pos, others, idx, left, single: None }
    }
}

/// The iterator of [`View::line_iter`].
#[derive(Debug, Default)]
pub(crate) struct Lines {
    axes: Vec<Axis>,
    ostride: Vec<usize>,
    along: usize,
    chan_pos: Option<usize>,
    others: Vec<usize>,
    idx: Vec<usize>,
    /// Lines still to come.
    left: usize,
    /// The one line of a zero-dimensional view.
    single: Option<Line>,
}

impl Iterator for Lines {
    type Item = Line;

    #[inline]
    fn next(&mut self) -> Option<Line> {
        if let Some(l) = self.single.take() {
            return Some(l);
        }
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let inner = self.axes[self.along];
        let mut src = inner.start;
        let mut out = 0usize;
        let mut inside = inner.n > 0;
        for (&i, &k) in self.others.iter().zip(&self.idx) {
            let a = self.axes[i];
            out += k * self.ostride[i];
            if k < a.off || k >= a.off + a.n {
                inside = false;
            } else {
                src += a.start + (k - a.off) as isize * a.step;
            }
        }
        let line_chan = match self.chan_pos {
            Some(p) if p == self.along => None,
            Some(p) => self.others.iter().position(|&i| i == p).map(|q| self.idx[q]),
            None => Some(0),
        };
        let line = Line {
            out,
            len: inner.out,
            out_step: self.ostride[self.along],
            data: inside.then_some((inner.off, inner.n, src, inner.step)),
            chan: line_chan,
        };
        for k in (0..self.idx.len()).rev() {
            self.idx[k] += 1;
            if self.idx[k] < self.axes[self.others[k]].out {
                break;
            }
            self.idx[k] = 0;
        }
        Some(line)
    }
}

/// One output line of a [`View`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Line {
    /// Output index of the line's first element.
    pub(crate) out: usize,
    /// Elements in the line.
    pub(crate) len: usize,
    /// Output elements between neighbours on the line.
    pub(crate) out_step: usize,
    /// `(first, count, src, step)`: elements `first..first + count` of the line read the
    /// source at `src`, `src + step`, …; the others pad (`None`: the whole line pads).
    pub(crate) data: Option<(usize, usize, isize, isize)>,
    /// The line's channel index, or `None` when the channel is the line's own axis (element
    /// `j` is channel `j`).
    pub(crate) chan: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The view's output as source indexes (`None` for padding), row-major.
    fn read(v: &View) -> Vec<Option<isize>> {
        let mut out = vec![None; v.dims().iter().product()];
        let perm: Vec<usize> = (0..v.axes.len()).collect();
        v.emit(&perm, None, |o, s, _| out[o] = s);
        out
    }

    #[test]
    fn crops_flips_and_strides_compose() {
        // A 1-D row 0..6.
        let mut v = View::dense(&[6]);
        assert_eq!(read(&v), (0..6).map(Some).collect::<Vec<_>>());
        v.crop(0, 1, 3);
        assert_eq!(read(&v), [Some(1), Some(2), Some(3)]);
        v.flip(0);
        assert_eq!(read(&v), [Some(3), Some(2), Some(1)]);
        // Larger than the data: padding on both sides.
        v.crop(0, -2, 6);
        assert_eq!(read(&v), [None, None, Some(3), Some(2), Some(1), None]);
        v.flip(0);
        assert_eq!(read(&v), [None, Some(1), Some(2), Some(3), None, None]);
        v.stride(0, 2);
        assert_eq!(read(&v), [None, Some(2), None]);
        let mut w = View::dense(&[7]);
        w.stride(0, 3);
        assert_eq!(read(&w), [Some(0), Some(3), Some(6)]);
        w.crop(0, 5, 2);
        assert_eq!(read(&w), [None, None]);
        assert_eq!(w.reach(), None);
    }

    #[test]
    fn two_dims_and_a_permuted_walk() {
        let mut v = View::dense(&[2, 3]); // [[0, 1, 2], [3, 4, 5]]
        v.flip(1);
        assert_eq!(read(&v), [2, 1, 0, 5, 4, 3].map(Some));
        let mut t = vec![(0, 0); 6];
        v.emit(&[1, 0], Some(1), |o, s, c| t[o] = (s.unwrap(), c));
        assert_eq!(t, [(2, 0), (5, 0), (1, 1), (4, 1), (0, 2), (3, 2)]);
        assert_eq!(v.reach(), Some((0, 5)));
    }
}
