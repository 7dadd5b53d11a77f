//! Mixtures: one training order over several sources (versions or views, on any stores),
//! each contributing a chosen number of samples per mixture epoch, with changes of the mix
//! at resume points.
//!
//! # The order (frozen, like [`crate::sampler`]'s)
//! A mixture's history is a list of *segments*; segment `j` starts at `(epoch_j, offset_j)`
//! (segment 0 at `(0, 0)`) and gives each source `s` a count `m_s` of samples per mixture
//! epoch, `P = Σ m_s` in all.
//!
//! * **Layout of an epoch.** Position `o < P` of mixture epoch `k` has the *slot*
//!   `v = (a·o + b_k) mod P`, where `a` is the integer nearest `P·(√5 − 1)/2` that is coprime
//!   to `P` (trying `a, a + 1, a − 1, a + 2, …`) and `b_k = seed_for(d_j, seed, k, STREAM) mod P`
//!   (`d_j` the segment's digest, `STREAM` = `0x4D49_58`). Slot `v` belongs to the source `s`
//!   with `M_s ≤ v < M_{s+1}` (`M` the prefix sums of the counts, in source order). So every
//!   source gets exactly `m_s` positions per epoch, spread evenly (a Weyl sequence: any run
//!   of `L` consecutive positions holds `L·m_s/P` of them, give or take a few), and every
//!   batch carries the mixture's proportions.
//! * **Each source is a stream.** Source `s` is read in its own order, epoch after epoch:
//!   stream position `t` is row `π_{s,e}(t mod N_s)` of epoch `e = t div N_s`, with `π_{s,e}`
//!   the source's global-shuffle permutation (the one a loader of the source alone uses in its
//!   epoch `e`), or the identity for sequential order. The `c`-th position of source `s` in the
//!   mixture (counted over the whole history) takes stream position `c`: no row repeats
//!   before its source's stream wraps, whatever the weights, and a smaller source simply
//!   wraps sooner.
//! * **Counting in O(log P).** The positions of source `s` before `o` in epoch `k` are those
//!   `o' < o` with `(a·o' + b_k) mod P ∈ [M_s, M_{s+1})`, counted with the classic floor-sum
//!   identity (`floor_sum`), so any position, a resume point or a change of the mix is
//!   located without walking the epoch.
//! * **A change** at `(epoch_j, offset_j)` keeps every source's stream position there and
//!   continues with the new counts: positions before it keep the old layout, positions from
//!   it on follow the new one (the epoch then ends at `max(offset_j, P_new)`).
//!
//! The resume state stays a [`LoaderState`](crate::LoaderState) of 62 bytes: its
//! `dataset_id` is the digest of the segments that precede its position (FNV-1a chained over
//! each segment's start and its sources' `(id, count)`), so a state resumes with the history
//! it was taken under, or with that history plus changes starting at or after it.

use tessera::At;

use crate::sampler::{IndexShuffle, seed_for};

/// Stream of the per-epoch layout shift `b_k` ("MIX").
const STREAM_LAYOUT: u64 = 0x004D_4958;
/// Stream of each source's own permutation: the global-shuffle stream of a lone loader.
const STREAM_SOURCE: u64 = 0;
/// Largest mixture epoch (samples): keeps every count's products inside `u128`.
pub const MAX_EPOCH_SAMPLES: u64 = 1 << 48;

/// A source of a mixture: a dataset version or a view, at any location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MixSource {
    /// Dataset root (a local path or a store URL, as [`LoaderConfig::location`](crate::LoaderConfig)).
    pub location: String,
    /// Version to read (must be [`At::Latest`] with a view: the view names its version).
    pub at: At,
    /// Read this saved view of the dataset instead of a whole version.
    pub view: Option<String>,
    /// Batch columns this source stores under another name: `(batch column, source column)`.
    pub renames: Vec<(String, String)>,
    /// Batch columns this source lacks, and what its samples hold there instead. A source
    /// lacking a projected column without a fill is a configuration error. The first source
    /// defines the batch's columns and must have them all.
    pub fills: Vec<(String, Fill)>,
}

/// What a mixture source that lacks a batch column delivers in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fill {
    /// Zeros; an empty row for a ragged, `utf8` or `bytes` column; valid where nullable.
    Zeros,
    /// Null (the column must be nullable): the row is marked invalid and zeroed.
    Null,
    /// One row's stored bytes (a fixed-shape column: its element count × item size, little
    /// endian, as the format stores them).
    Row(Vec<u8>),
}

impl MixSource {
    /// The latest version of the dataset at `location`.
    #[must_use]
    pub fn new(location: impl Into<String>) -> Self {
        Self { location: location.into(), at: At::Latest, view: None, renames: Vec::new(), fills: Vec::new() }
    }

    /// Reads batch column `column` from this source's column `stored`.
    #[must_use]
    pub fn rename(mut self, column: impl Into<String>, stored: impl Into<String>) -> Self {
        self.renames.push((column.into(), stored.into()));
        self
    }

    /// Fills batch column `column`, which this source lacks, with `fill`.
    #[must_use]
    pub fn fill(mut self, column: impl Into<String>, fill: Fill) -> Self {
        self.fills.push((column.into(), fill));
        self
    }

    /// Reads version `at`.
    #[must_use]
    pub fn at(mut self, at: At) -> Self {
        self.at = at;
        self
    }

    /// Reads the saved view `name`.
    #[must_use]
    pub fn view(mut self, name: impl Into<String>) -> Self {
        self.view = Some(name.into());
        self
    }
}

/// How much of a source one mixture epoch takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Share {
    /// A weight (≥ 0, finite): the source's part of the epoch's samples.
    Weight(f64),
    /// Exactly this many samples per epoch ("choose n"; `n = k × rows` repeats the source
    /// `k` times).
    Samples(u64),
}

/// One segment of a mixture's history: from `(epoch, offset)` on, these shares.
#[derive(Clone, Debug, PartialEq)]
pub struct MixStep {
    /// Mixture epoch the step starts in.
    pub epoch: u64,
    /// Samples of that epoch (all ranks together) consumed before the step: a resume point.
    pub offset: u64,
    /// One share per source, in source order; sources past the end take none.
    pub shares: Vec<Share>,
    /// Samples per epoch when the shares are weights: `None` is the sum of the rows of the
    /// sources with a positive weight. Ignored for [`Share::Samples`].
    pub epoch_samples: Option<u64>,
}

/// A weighted mixture of sources and the history of its changes.
///
/// ```
/// use tessera_loader::{MixSource, Mixture, Share};
///
/// let mix = Mixture::weighted(
///     [MixSource::new("/data/web"), MixSource::new("/data/code"), MixSource::new("/data/books").view("clean")],
///     &[0.6, 0.25, 0.15],
/// );
/// assert_eq!(mix.sources.len(), 3);
/// assert_eq!(mix.steps[0].shares[2], Share::Weight(0.15));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Mixture {
    /// Every source the run has used, in the order their shares are given.
    pub sources: Vec<MixSource>,
    /// The history: the first step starts at epoch 0, offset 0; each later one at a resume
    /// point after the one before.
    pub steps: Vec<MixStep>,
}

impl Mixture {
    /// Sources with weights (the epoch holds as many samples as the weighted sources' rows).
    #[must_use]
    pub fn weighted(sources: impl IntoIterator<Item = MixSource>, weights: &[f64]) -> Self {
        Self::with_shares(sources, weights.iter().map(|&w| Share::Weight(w)).collect(), None)
    }

    /// Sources with explicit shares, and the epoch's size when they are weights.
    #[must_use]
    pub fn with_shares(
        sources: impl IntoIterator<Item = MixSource>,
        shares: Vec<Share>,
        epoch_samples: Option<u64>,
    ) -> Self {
        Self {
            sources: sources.into_iter().collect(),
            steps: vec![MixStep { epoch: 0, offset: 0, shares, epoch_samples }],
        }
    }

    /// Adds a source (taking no samples in the steps before it is given a share); returns its
    /// index.
    pub fn add_source(&mut self, source: MixSource) -> usize {
        self.sources.push(source);
        self.sources.len() - 1
    }

    /// Changes the mix from a resume point on: the run resumed from `state` continues with
    /// `shares` (one per source, see [`Mixture::add_source`]). The history keeps every earlier
    /// step, so the states taken before the change still replay.
    #[must_use]
    pub fn change_at(mut self, state: &crate::LoaderState, shares: Vec<Share>, epoch_samples: Option<u64>) -> Self {
        self.steps.push(MixStep { epoch: state.epoch, offset: state.samples_consumed_global, shares, epoch_samples });
        self
    }
}

/// Why a mixture cannot be ordered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MixError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, MixError> {
    Err(MixError(msg.into()))
}

/// `Σ_{i<n} floor((a·i + b) / m)` for `m > 0` (the floor-sum identity, by Euclid-like
/// reduction in O(log m) steps). Every intermediate stays below `2^128` while `n`, `m`, `a`,
/// `b` are below `2^50`.
fn floor_sum(terms: u128, modulus: u128, slope: u128, offset: u128) -> u128 {
    let (mut n, mut m, mut a, mut b) = (terms, modulus, slope, offset);
    let mut sum = 0u128;
    loop {
        if a >= m {
            sum += n * n.saturating_sub(1) / 2 * (a / m);
            a %= m;
        }
        if b >= m {
            sum += n * (b / m);
            b %= m;
        }
        let top = a * n + b;
        if top < m {
            return sum;
        }
        n = top / m;
        b = top % m;
        std::mem::swap(&mut m, &mut a);
    }
}

const fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Integer counts `m_s` summing to `total` in proportion to `weights` (largest remainder;
/// ties to the earlier source). IEEE arithmetic only, so every CPU gets the same counts.
fn apportion(weights: &[f64], total: u64) -> Vec<u64> {
    let sum: f64 = weights.iter().sum();
    let quotas: Vec<f64> = weights.iter().map(|&w| w / sum * total as f64).collect();
    let mut counts: Vec<u64> = quotas.iter().map(|&q| q.floor() as u64).collect();
    let given: u64 = counts.iter().sum();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&x, &y| {
        let (fx, fy) = (quotas[x] - quotas[x].floor(), quotas[y] - quotas[y].floor());
        fy.total_cmp(&fx).then(x.cmp(&y))
    });
    for &s in order.iter().cycle().take(usize::try_from(total.saturating_sub(given)).unwrap_or(0)) {
        counts[s] += 1;
    }
    counts
}

/// FNV-1a 64, chained.
fn fnv(mut h: u64, words: impl IntoIterator<Item = u64>) -> u64 {
    for w in words {
        for b in w.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
        }
    }
    h
}

/// One segment, resolved.
#[derive(Clone, Debug)]
struct Segment {
    epoch: u64,
    offset: u64,
    counts: Vec<u64>,
    /// `M`: prefix sums of `counts`, `S + 1` entries.
    prefix: Vec<u64>,
    /// `P`.
    total: u64,
    /// `a`, coprime to `P`.
    mult: u64,
    /// Each source's stream position where the segment starts.
    base: Vec<u64>,
    /// `C(s, epoch, offset)` under this segment's own layout.
    start_cum: Vec<u128>,
    /// The chained digest up to and including this segment.
    digest: u64,
}

impl Segment {
    /// `b_k`.
    fn shift(&self, seed: u64, epoch: u64) -> u64 {
        seed_for(self.digest, seed, epoch, STREAM_LAYOUT) % self.total
    }

    /// `#{o' < n : (a·o' + b) mod P < c}` for `n ≤ P`, `c ≤ P`.
    fn below(&self, shift: u64, upto: u64, bound: u64) -> u64 {
        let (total, mult, shift) = (u128::from(self.total), u128::from(self.mult), u128::from(shift));
        let terms = u128::from(upto);
        let at_least =
            floor_sum(terms, total, mult, shift + total - u128::from(bound)) - floor_sum(terms, total, mult, shift);
        upto - at_least as u64 // at_least ≤ upto
    }

    /// Positions of each source before `o` (`o ≤ P`) in the epoch with shift `b`.
    fn counts_before(&self, b: u64, o: u64, out: &mut Vec<u64>) {
        out.clear();
        let mut prev = 0;
        for s in 0..self.counts.len() {
            let upto = self.below(b, o, self.prefix[s + 1]);
            out.push(upto - prev);
            prev = upto;
        }
    }

    /// `C(s, k, o) = k·m_s + (positions of s before o in epoch k)`.
    fn cum(&self, seed: u64, epoch: u64, o: u64, out: &mut Vec<u128>) {
        let mut before = Vec::new();
        self.counts_before(self.shift(seed, epoch), o.min(self.total), &mut before);
        out.clear();
        out.extend(before.iter().zip(&self.counts).map(|(&c, &m)| u128::from(epoch) * u128::from(m) + u128::from(c)));
    }

    /// The source of slot `v`.
    fn source_of(&self, v: u64) -> usize {
        self.prefix.partition_point(|&m| m <= v) - 1
    }
}

/// The resolved order of a mixture: every position of every mixture epoch to a source and a
/// position of that source, in O(log P) (O(1) for consecutive positions, [`MixOrder::fill`]).
#[derive(Clone, Debug)]
pub struct MixOrder {
    /// Per source: its order identity (version or view id) and its rows.
    sources: Vec<(u64, u64)>,
    seed: u64,
    /// Each source is globally shuffled (otherwise sequential).
    shuffled: bool,
    segments: Vec<Segment>,
}

/// Where a position of the mixture lands: a source and a position in it (its own plan
/// position: a row of its version, or a position of its view).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MixPosition {
    /// The source.
    pub source: usize,
    /// The position in the source.
    pub position: u64,
}

impl MixOrder {
    /// Resolves `mixture`'s history over sources with these identities and row counts.
    ///
    /// # Errors
    /// A step with no samples, a source with samples but no rows, shares of the wrong kind or
    /// count, a step that does not start after the one before (within its epoch), an epoch
    /// over [`MAX_EPOCH_SAMPLES`].
    pub fn new(mixture: &Mixture, sources: &[(u64, u64)], seed: u64, shuffled: bool) -> Result<Self, MixError> {
        if mixture.sources.len() != sources.len() {
            return err("one identity and row count per source is needed");
        }
        if mixture.steps.is_empty() {
            return err("a mixture needs at least one step");
        }
        let n = sources.len();
        let mut segments: Vec<Segment> = Vec::with_capacity(mixture.steps.len());
        let mut digest = fnv(0xCBF2_9CE4_8422_2325, [u64::from_le_bytes(*b"TSMIXv1\0"), u64::from(shuffled)]);
        for (j, step) in mixture.steps.iter().enumerate() {
            if step.shares.len() > n {
                return err(format!("step {j} gives {} shares for {n} sources", step.shares.len()));
            }
            let counts = Self::counts(step, sources, j)?;
            let total: u64 = counts.iter().sum();
            if total == 0 {
                return err(format!("step {j} takes no samples"));
            }
            if total > MAX_EPOCH_SAMPLES {
                return err(format!("step {j} takes {total} samples per epoch (at most 2^48)"));
            }
            for (s, &m) in counts.iter().enumerate() {
                if m > 0 && sources[s].1 == 0 {
                    return err(format!("source {s} has no rows but step {j} takes {m} samples of it"));
                }
            }
            let base = match segments.last() {
                None if (step.epoch, step.offset) != (0, 0) => {
                    return err("the first step starts at epoch 0, offset 0");
                }
                None => vec![0; n],
                Some(prev) => {
                    if (step.epoch, step.offset) <= (prev.epoch, prev.offset) {
                        return err(format!("step {j} does not start after step {}", j - 1));
                    }
                    let len = if prev.epoch == step.epoch { prev.total.max(prev.offset) } else { prev.total };
                    if step.offset > len {
                        return err(format!("step {j} starts at offset {} of an epoch of {len} samples", step.offset));
                    }
                    let mut cum = Vec::new();
                    prev.cum(seed, step.epoch, step.offset, &mut cum);
                    (0..n).map(|s| prev.base[s] + (cum[s] - prev.start_cum[s]) as u64).collect()
                }
            };
            digest = fnv(digest, [step.epoch, step.offset]);
            for (s, &m) in counts.iter().enumerate() {
                if m > 0 {
                    digest = fnv(digest, [sources[s].0, m]);
                }
            }
            let mut prefix = Vec::with_capacity(n + 1);
            prefix.push(0);
            for &m in &counts {
                prefix.push(prefix[prefix.len() - 1] + m);
            }
            let golden = (total as f64 * 0.618_033_988_749_894_8).round() as u64;
            let mult = (0..total)
                .flat_map(|d| [golden.wrapping_add(d), golden.wrapping_sub(d)])
                .find(|&a| a < total.max(2) && gcd(a, total) == 1)
                .unwrap_or(1)
                % total.max(1);
            let mut seg = Segment {
                epoch: step.epoch,
                offset: step.offset,
                counts,
                prefix,
                total,
                mult,
                base,
                start_cum: Vec::new(),
                digest,
            };
            let mut cum = Vec::new();
            seg.cum(seed, step.epoch, step.offset, &mut cum);
            seg.start_cum = cum;
            segments.push(seg);
        }
        Ok(Self { sources: sources.to_vec(), seed, shuffled, segments })
    }

    fn counts(step: &MixStep, sources: &[(u64, u64)], j: usize) -> Result<Vec<u64>, MixError> {
        let n = sources.len();
        let weights = step.shares.iter().all(|s| matches!(s, Share::Weight(_)));
        let samples = step.shares.iter().all(|s| matches!(s, Share::Samples(_)));
        if !weights && !samples {
            return err(format!("step {j} mixes weights and sample counts"));
        }
        let mut counts = vec![0u64; n];
        if samples {
            for (s, share) in step.shares.iter().enumerate() {
                if let Share::Samples(m) = share {
                    counts[s] = *m;
                }
            }
            return Ok(counts);
        }
        let mut w = vec![0f64; n];
        for (s, share) in step.shares.iter().enumerate() {
            if let Share::Weight(x) = *share {
                if !x.is_finite() || x < 0.0 {
                    return err(format!("step {j}: the weight of source {s} is {x}, not a finite number ≥ 0"));
                }
                w[s] = x;
            }
        }
        if w.iter().all(|&x| x == 0.0) {
            return err(format!("step {j} gives every source a weight of 0"));
        }
        let total = match step.epoch_samples {
            Some(t) => t,
            None => (0..n).filter(|&s| w[s] > 0.0).map(|s| sources[s].1).fold(0u64, u64::saturating_add),
        };
        Ok(apportion(&w, total.min(MAX_EPOCH_SAMPLES + 1)))
    }

    /// The segment covering position `o` of epoch `k`.
    fn segment(&self, epoch: u64, o: u64) -> &Segment {
        let j = self.segments.partition_point(|s| (s.epoch, s.offset) <= (epoch, o));
        &self.segments[j.max(1) - 1]
    }

    /// Samples in mixture epoch `epoch`: the last segment's `P`, or the offset it starts at
    /// when that is later in this very epoch.
    #[must_use]
    pub fn epoch_len(&self, epoch: u64) -> u64 {
        let j = self.segments.partition_point(|s| s.epoch <= epoch);
        let seg = &self.segments[j.max(1) - 1];
        if seg.epoch == epoch { seg.total.max(seg.offset) } else { seg.total }
    }

    /// The digest a resume state taken after `consumed` samples of `epoch` carries: the
    /// chained digest of the segments starting strictly before that point (segment 0 always).
    #[must_use]
    pub fn digest_at(&self, epoch: u64, consumed: u64) -> u64 {
        let j = self.segments.partition_point(|s| (s.epoch, s.offset) < (epoch, consumed));
        self.segments[j.max(1) - 1].digest
    }

    /// The digest of the whole history.
    #[must_use]
    pub fn digest(&self) -> u64 {
        self.segments.last().map_or(0, |s| s.digest)
    }

    /// Samples of each source in epoch `epoch` (for positions `0..epoch_len`).
    #[must_use]
    pub fn epoch_counts(&self, epoch: u64) -> Vec<u64> {
        let mut counts = vec![0u64; self.sources.len()];
        let mut out = Vec::new();
        let len = self.epoch_len(epoch);
        let mut o = 0;
        while o < len {
            let seg = self.segment(epoch, o);
            let end = self
                .segments
                .iter()
                .find(|s| (s.epoch, s.offset) > (epoch, o))
                .map_or(len, |s| if s.epoch == epoch { s.offset } else { len })
                .min(len);
            let b = seg.shift(self.seed, epoch);
            seg.counts_before(b, end.min(seg.total), &mut out);
            let mut first = Vec::new();
            seg.counts_before(b, o.min(seg.total), &mut first);
            for s in 0..counts.len() {
                counts[s] += out[s] - first[s];
            }
            o = end;
        }
        counts
    }

    /// The source and source position of position `o < epoch_len(epoch)` of `epoch`.
    #[must_use]
    pub fn at(&self, epoch: u64, o: u64) -> MixPosition {
        let mut cursor = Cursor::default();
        self.at_with(epoch, o, &mut cursor)
    }

    /// As [`MixOrder::at`] for `positions` (any order; consecutive runs cost O(1) each).
    pub fn fill(&self, epoch: u64, positions: impl IntoIterator<Item = u64>, out: &mut Vec<MixPosition>) {
        let mut cursor = Cursor::default();
        out.clear();
        out.extend(positions.into_iter().map(|o| self.at_with(epoch, o, &mut cursor)));
    }

    fn at_with(&self, epoch: u64, o: u64, cursor: &mut Cursor) -> MixPosition {
        let seg = self.segment(epoch, o);
        let key = (seg.epoch, seg.offset, epoch);
        if cursor.key != Some(key) || cursor.next != o {
            cursor.key = Some(key);
            cursor.shift = seg.shift(self.seed, epoch);
            let mut before = Vec::new();
            seg.counts_before(cursor.shift, o.min(seg.total), &mut before);
            cursor.counts = before;
        }
        cursor.next = o + 1;
        let v = ((u128::from(seg.mult) * u128::from(o % seg.total.max(1)) + u128::from(cursor.shift))
            % u128::from(seg.total.max(1))) as u64;
        let s = seg.source_of(v);
        let local = cursor.counts[s];
        cursor.counts[s] += 1;
        let cum = u128::from(epoch) * u128::from(seg.counts[s]) + u128::from(local);
        let stream = u128::from(seg.base[s]) + (cum - seg.start_cum[s]);
        let stream = u64::try_from(stream).unwrap_or(u64::MAX);
        MixPosition { source: s, position: self.stream_row(s, stream, cursor) }
    }

    /// Position `stream` of source `s`'s stream: its order in its epoch `stream div N`.
    fn stream_row(&self, s: usize, stream: u64, cursor: &mut Cursor) -> u64 {
        let (id, rows) = self.sources[s];
        let (e, r) = (stream / rows, stream % rows);
        if !self.shuffled {
            return r;
        }
        if let Some((_, _, p)) = cursor.perms.iter().find(|(src, ep, _)| *src == s && *ep == e) {
            return p.apply(r);
        }
        let p = IndexShuffle::new(rows, seed_for(id, self.seed, e, STREAM_SOURCE));
        let row = p.apply(r);
        if cursor.perms.len() >= 16 {
            cursor.perms.remove(0);
        }
        cursor.perms.push((s, e, p));
        row
    }

    /// Bytes held: a few words per source and segment.
    #[must_use]
    pub fn heap_bytes(&self) -> u64 {
        (self.segments.iter().map(|s| 40 * s.counts.len() + 64).sum::<usize>() + 16 * self.sources.len()) as u64
    }

    /// Number of sources.
    #[must_use]
    pub fn sources(&self) -> usize {
        self.sources.len()
    }
}

/// Running counts for consecutive positions, and the source permutations last used.
#[derive(Debug, Default)]
struct Cursor {
    key: Option<(u64, u64, u64)>,
    next: u64,
    shift: u64,
    counts: Vec<u64>,
    perms: Vec<(usize, u64, IndexShuffle)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LoaderState;

    fn src(n: usize) -> Vec<MixSource> {
        (0..n).map(|i| MixSource::new(format!("/d{i}"))).collect()
    }

    #[test]
    fn floor_sum_matches_brute_force() {
        for (n, m, a, b) in [(0, 5, 3, 2), (7, 5, 3, 2), (100, 97, 60, 96), (1000, 1, 7, 0), (33, 64, 40, 127)] {
            let brute: u128 = (0..n).map(|i| (a * i + b) / m).sum();
            assert_eq!(floor_sum(n, m, a, b), brute, "{n} {m} {a} {b}");
        }
    }

    #[test]
    fn apportion_sums_and_follows_weights() {
        assert_eq!(apportion(&[0.6, 0.25, 0.15], 1000), vec![600, 250, 150]);
        assert_eq!(apportion(&[1.0, 1.0, 1.0], 10), vec![4, 3, 3]);
        assert_eq!(apportion(&[1.0, 0.0], 7), vec![7, 0]);
        let c = apportion(&[0.3, 0.3, 0.4], 101);
        assert_eq!(c.iter().sum::<u64>(), 101);
    }

    /// Brute force: walk every position, count per source, check streams.
    fn walk(order: &MixOrder, epochs: u64) -> Vec<Vec<MixPosition>> {
        (0..epochs)
            .map(|k| {
                let mut out = Vec::new();
                order.fill(k, 0..order.epoch_len(k), &mut out);
                out
            })
            .collect()
    }

    #[test]
    fn every_epoch_takes_exact_counts_and_each_source_streams_without_repeats() {
        let sources = [(11, 100), (22, 37), (33, 5)];
        let mix = Mixture::with_shares(src(3), vec![Share::Samples(60), Share::Samples(30), Share::Samples(10)], None);
        let order = MixOrder::new(&mix, &sources, 7, true).unwrap();
        let epochs = walk(&order, 4);
        let mut streams: Vec<Vec<u64>> = vec![Vec::new(); 3];
        for (k, epoch) in epochs.iter().enumerate() {
            let mut counts = [0u64; 3];
            for (o, p) in epoch.iter().enumerate() {
                counts[p.source] += 1;
                assert_eq!(*p, order.at(k as u64, o as u64), "random access agrees with the walk");
                streams[p.source].push(p.position);
            }
            assert_eq!(counts, [60, 30, 10]);
            assert_eq!(order.epoch_counts(k as u64), vec![60, 30, 10]);
            // Evenly spread: every window of 20 positions holds 12 ± 2 of source 0.
            for w in epoch.windows(20) {
                let n = w.iter().filter(|p| p.source == 0).count();
                assert!((10..=14).contains(&n), "window share {n}");
            }
        }
        // Each source's positions: whole permutations of its rows, back to back.
        for (s, stream) in streams.iter().enumerate() {
            let rows = sources[s].1 as usize;
            for chunk in stream.chunks(rows).filter(|c| c.len() == rows) {
                let mut c = chunk.to_vec();
                c.sort_unstable();
                assert_eq!(c, (0..rows as u64).collect::<Vec<_>>(), "source {s}");
            }
        }
        // Epochs differ in layout.
        assert_ne!(epochs[0], epochs[1]);
    }

    #[test]
    fn a_change_keeps_every_stream_where_it_was() {
        let sources = [(11, 50), (22, 40)];
        let before = Mixture::weighted(src(2), &[0.5, 0.5]);
        let state = LoaderState {
            dataset_id: 0,
            version: 0,
            seed: 3,
            epoch: 1,
            samples_consumed_global: 32,
            settings_digest: 0,
        };
        let after = before.clone().change_at(&state, vec![Share::Weight(0.9), Share::Weight(0.1)], Some(200));
        let (a, b) =
            (MixOrder::new(&before, &sources, 3, true).unwrap(), MixOrder::new(&after, &sources, 3, true).unwrap());
        assert_eq!(a.epoch_len(1), 90);
        assert_eq!(b.epoch_len(1), 200);
        assert_eq!(b.epoch_len(2), 200);
        // Identical before the change; the digest a state carries names the history before it.
        for o in 0..32 {
            assert_eq!(a.at(1, o), b.at(1, o));
        }
        assert_eq!(a.digest_at(1, 32), b.digest_at(1, 32));
        assert_ne!(b.digest_at(1, 64), a.digest_at(1, 64));
        // Each stream continues: positions consumed per source over the whole history form
        // the same streams as the source's own order, nothing skipped or repeated.
        let mut per: Vec<Vec<u64>> = vec![Vec::new(); 2];
        for k in 0..3 {
            for o in 0..b.epoch_len(k) {
                let p = b.at(k, o);
                per[p.source].push(p.position);
            }
        }
        let c = b.epoch_counts(1);
        assert_eq!(c.iter().sum::<u64>(), 200);
        for (s, stream) in per.iter().enumerate() {
            let rows = sources[s].1 as usize;
            for chunk in stream.chunks(rows).filter(|c| c.len() == rows) {
                let mut c = chunk.to_vec();
                c.sort_unstable();
                assert_eq!(c, (0..rows as u64).collect::<Vec<_>>(), "source {s}");
            }
        }
    }

    #[test]
    fn bad_mixtures_are_refused() {
        let sources = [(1, 10), (2, 0)];
        let bad = |m: Mixture| MixOrder::new(&m, &sources, 0, true).unwrap_err();
        bad(Mixture::weighted(src(2), &[0.0, 0.0]));
        bad(Mixture::weighted(src(2), &[1.0, f64::NAN]));
        bad(Mixture::weighted(src(2), &[1.0, -1.0]));
        bad(Mixture::with_shares(src(2), vec![Share::Samples(3), Share::Samples(1)], None)); // empty source
        bad(Mixture::with_shares(src(2), vec![Share::Samples(3), Share::Weight(1.0)], None));
        bad(Mixture::with_shares(src(2), vec![Share::Samples(1 << 49), Share::Samples(0)], None));
        let mut m = Mixture::weighted(src(2), &[1.0, 0.0]);
        m.steps.push(MixStep { epoch: 0, offset: 0, shares: vec![Share::Weight(1.0)], epoch_samples: None });
        bad(m);
        assert!(MixOrder::new(&Mixture::weighted(src(2), &[1.0, 0.0]), &sources, 0, true).is_ok());
    }

    #[test]
    fn the_order_is_pinned() {
        let sources = [(11, 100), (22, 37)];
        let mix = Mixture::weighted(src(2), &[0.7, 0.3]);
        let order = MixOrder::new(&mix, &sources, 42, true).unwrap();
        let got: Vec<(usize, u64)> = (0..8).map(|o| order.at(0, o)).map(|p| (p.source, p.position)).collect();
        let digest = order.digest();
        // Frozen: any change here changes every mixture's order and every saved state.
        assert_eq!(got, [(1, 33), (0, 6), (1, 36), (0, 41), (0, 67), (1, 5), (0, 51), (0, 13)]);
        assert_eq!(digest, 0xfd7a_0d02_c7b3_d1ec);
    }
}
