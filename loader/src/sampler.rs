//! Sampling plan: the order in which an epoch visits a dataset version's rows, and how that
//! order is split across DDP ranks.
//!
//! Everything here is pure, `std`-only logic with a self-contained PRNG, so a given
//! `(rows, fragments, dataset_id, seed, epoch, shuffle)` yields the same global order on every
//! platform and with every future version of this crate. The algorithms below are frozen:
//! changing any of them changes every training order, so the golden-value tests pin them.
//!
//! Layering: the *global order* G depends only on the dataset and the shuffle settings; G is
//! cut into *global batches* of `batch_size * world_size` rows, and rank `r` takes the `r`-th
//! contiguous block of `batch_size` rows of each global batch. Because the global batch is the
//! unit, a run can resume with another world size as long as the global batch size is kept.
//!
//! G is never materialised: a [`Plan`] evaluates position `p → G[p]` on demand from a few
//! numbers (the row and fragment counts, the keys), so its memory is O(1) in every mode and
//! building it costs nothing per row or per fragment.
//!
//! # Frozen algorithm (order format v3)
//! * Keys: stream `s` of an epoch has key `seed_for(dataset_id, seed, epoch, s)` ([`seed_for`]):
//!   stream 0 orders [`ShuffleMode::Global`], stream 1 permutes the blocks of
//!   [`ShuffleMode::Block`], stream `2 + k` orders block window `k`.
//! * Permutation of `0..n` under key `K` ([`IndexShuffle`]): a balanced Feistel network on the
//!   smallest even bit width `2h ≥ bits(n − 1)` (so the domain `D = 4^h` is below `4n`), with
//!   8 rounds. Round keys `k_0..k_7` are the first eight outputs of `SplitMix64::new(K)`;
//!   a round maps the halves `(L, R)` (each `h` bits, `L` the high half) to
//!   `(R, L ^ (mix64(R ^ k_i) >> (64 − h)))`. Values at or above `n` are *cycle-walked*: the
//!   network is applied again until the value falls below `n` (fewer than 4 applications are
//!   expected since `D < 4n`). `n ≤ 1` is the identity.
//! * [`ShuffleMode::None`]: `G[p] = p`. [`ShuffleMode::Global`]: `G[p] = π₀(p)` with `π₀` the
//!   permutation of `0..N` under stream 0.
//! * [`ShuffleMode::Block`]: the rows `0..N` are cut into `nb = ⌈N / b⌉` blocks of
//!   `b = ⌈N / F⌉` consecutive rows (`F` the version's fragment count, at least 1: a block is
//!   a mean fragment's worth of rows, and where fragments hold equal row counts each block is
//!   one fragment), the last block holding the `N − (nb − 1)·b` rows left. The blocks are
//!   visited in the order `π₁(0), π₁(1), …` (`π₁` the permutation of `0..nb` under stream 1);
//!   window `k` is the `w = window_fragments` consecutive visited blocks `k·w..(k+1)·w` (the last
//!   window may hold fewer), its rows the concatenation of their row ranges in visiting order,
//!   `W` rows in all. Window `k` fills the positions `[S_k, S_k + W)` of G (`S_k` the rows of
//!   the windows before it), and `G[S_k + o]` is the row at offset `π_{2+k}(o)` of the
//!   concatenation (`π_{2+k}` the permutation of `0..W` under stream `2 + k`). Every block but
//!   the last has `b` rows, so locating a position is arithmetic: O(1), no table.
//! * Tail: positions `p ≥ N` of the padded order repeat G from its start, `G[p mod N]`.
//!
//! Version 2 of the order (until the order tag of [`settings_digest`] became `…order.v3`)
//! windowed whole fragments in a permuted order, which took a prefix table of every
//! fragment's rows (24 bytes per fragment on every rank); version 1 materialised G with
//! Fisher–Yates over xoshiro256\*\*. A [`LoaderState`] taken under either carries another
//! digest and is refused rather than resumed into the new order. [`Xoshiro256StarStar`] stays
//! for the data transforms, which draw from it.

use std::fmt;
use std::sync::Arc;

use crate::mixture::MixOrder;

// ------------------------------------------------------------------------------------------
// PRNG
// ------------------------------------------------------------------------------------------

pub(crate) const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
/// Domain separator for [`seed_for`] ("TSSAMPL1" read as a little-endian u64).
const SEED_DOMAIN: u64 = u64::from_le_bytes(*b"TSSAMPL1");
/// Stream of the [`ShuffleMode::Global`] permutation.
const STREAM_GLOBAL: u64 = 0;
/// Stream of the block permutation of [`ShuffleMode::Block`].
const STREAM_BLOCKS: u64 = 1;
/// Window `k` of [`ShuffleMode::Block`] is shuffled with stream `STREAM_WINDOW_BASE + k`.
const STREAM_WINDOW_BASE: u64 = 2;

/// The `SplitMix64` output function (a bijection on `u64`).
pub(crate) const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `SplitMix64` (Steele, Lea, Flood 2014): a 64-bit counter passed through the `mix64` finalizer.
///
/// Used only to expand one `u64` seed into generator state and to mix keys; it is tiny,
/// passes `BigCrush` as a seeder, and its output sequence is fully specified by the seed.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// Creates the generator; the first output is `mix64(seed + GOLDEN_GAMMA)`.
    #[must_use]
    pub const fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// Advances the counter by the golden-ratio gamma and returns the mixed value.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix64(self.state)
    }
}

/// xoshiro256\*\* 1.0 (Blackman & Vigna 2018), the generator behind every shuffle here.
///
/// Chosen over PCG64 because it needs only 64-bit operations (no 128-bit multiply in the
/// core step), is fast, has a 2^256 − 1 period and a public reference implementation to check
/// against. The state is seeded with four consecutive [`SplitMix64`] outputs, as its authors
/// recommend; those are images of four distinct counters under a bijection, so at most one is
/// zero and the forbidden all-zero state cannot occur.
#[derive(Clone, Debug)]
pub struct Xoshiro256StarStar {
    s: [u64; 4],
}

impl Xoshiro256StarStar {
    /// Seeds the state from `SplitMix64::new(seed)`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        let mut sm = SplitMix64::new(seed);
        Self { s: [sm.next_u64(), sm.next_u64(), sm.next_u64(), sm.next_u64()] }
    }

    /// Returns the next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Returns a uniform value in `0..n` (0 when `n == 0`, consuming nothing).
    ///
    /// Lemire's multiply-and-reject method (2019): exact (no modulo bias) and usually one
    /// draw; the rejection rule is part of the frozen algorithm.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }

    /// Fisher–Yates (Durstenfeld) shuffle: for `i` from `len-1` down to 1, swap `i` with
    /// `below(i + 1)`. Every permutation is equally likely.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// Derives the seed of one random stream from the run key.
///
/// `stream` separates independent uses within one epoch (0 = global permutation, 1 = fragment
/// permutation, 2 + k = block window k). Each word is folded in as
/// `h = mix64((h + GOLDEN_GAMMA) ^ word)`, starting from a fixed domain constant; each step is
/// a bijection of the word, so keys differing in one word never share a seed.
#[must_use]
pub fn seed_for(dataset_id: u64, seed: u64, epoch: u64, stream: u64) -> u64 {
    [dataset_id, seed, epoch, stream]
        .into_iter()
        .fold(SEED_DOMAIN, |h, word| mix64(h.wrapping_add(GOLDEN_GAMMA) ^ word))
}

// ------------------------------------------------------------------------------------------
// Index shuffle
// ------------------------------------------------------------------------------------------

/// Rounds of the Feistel network behind [`IndexShuffle`] (frozen).
const FEISTEL_ROUNDS: usize = 8;

/// A keyed pseudo-random permutation of `0..n`, evaluated one index at a time.
///
/// A balanced Feistel network on the smallest even bit width whose domain holds `n`, with
/// cycle walking back into `0..n` (see the module docs for the frozen definition). It holds
/// 80 bytes whatever `n` (any `u64`), and [`IndexShuffle::apply`] costs a few dozen
/// multiplications: 8 rounds per network application, under 4 applications expected.
/// The idea follows the stateless `index_shuffle` of TensorFlow and Grain; this instance (round
/// count, round function, key schedule) is this crate's own and frozen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexShuffle {
    n: u64,
    /// Bits of each Feistel half (0 when `n ≤ 1`).
    half_bits: u32,
    keys: [u64; FEISTEL_ROUNDS],
}

impl IndexShuffle {
    /// The permutation of `0..n` under `key` (round keys: `SplitMix64::new(key)`'s outputs).
    #[must_use]
    pub fn new(n: u64, key: u64) -> Self {
        let bits = u64::BITS - n.saturating_sub(1).leading_zeros();
        let mut sm = SplitMix64::new(key);
        Self { n, half_bits: bits.div_ceil(2), keys: std::array::from_fn(|_| sm.next_u64()) }
    }

    /// `n`, the size of the permuted range.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Whether the range is empty (`n == 0`).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The image of `i` for `i < n`; indices at or past `n` are returned unchanged (the
    /// permutation is the identity there), so the call never loops or panics.
    #[must_use]
    pub fn apply(&self, i: u64) -> u64 {
        if i >= self.n || self.half_bits == 0 {
            return i;
        }
        let mut x = i;
        loop {
            x = self.network(x);
            if x < self.n {
                return x;
            }
        }
    }

    /// The preimage of `y` for `y < n` (`apply(invert(y)) == y`); indices at or past `n` are
    /// returned unchanged. The network runs backwards, cycle-walking the same way.
    #[must_use]
    pub fn invert(&self, y: u64) -> u64 {
        if y >= self.n || self.half_bits == 0 {
            return y;
        }
        let mut x = y;
        loop {
            x = self.network_inverse(x);
            if x < self.n {
                return x;
            }
        }
    }

    /// The inverse of [`IndexShuffle::network`].
    fn network_inverse(&self, x: u64) -> u64 {
        let h = self.half_bits;
        let mask = (1u64 << h) - 1;
        let (mut left, mut right) = (x >> h, x & mask);
        for &k in self.keys.iter().rev() {
            let f = mix64(left ^ k) >> (64 - h);
            (left, right) = (right ^ f, left);
        }
        left << h | right
    }

    /// One pass of the Feistel network over `0..4^half_bits` (`x` in that range).
    fn network(&self, x: u64) -> u64 {
        let h = self.half_bits; // 1..=32
        let mask = (1u64 << h) - 1;
        let (mut left, mut right) = (x >> h, x & mask);
        for &k in &self.keys {
            let f = mix64(right ^ k) >> (64 - h);
            (left, right) = (right, left ^ f);
        }
        left << h | right
    }
}

// ------------------------------------------------------------------------------------------
// Errors and configuration
// ------------------------------------------------------------------------------------------

/// Errors from building, resuming or checkpointing a [`Plan`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SamplerError {
    /// A [`PlanConfig`] field is unusable (zero, out of range, or overflowing).
    InvalidConfig {
        /// The offending field.
        field: &'static str,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A [`LoaderState`] belongs to another run: `field` differs from the configuration.
    StateMismatch {
        /// The field that differs (`dataset_id`, `seed`, `settings_digest` or `epoch`).
        field: &'static str,
        /// The value the configuration implies.
        expected: u64,
        /// The value found in the state.
        found: u64,
    },
    /// A [`LoaderState`] matches the run but its position is impossible.
    InvalidState {
        /// The offending field.
        field: &'static str,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// Serialized state bytes or JSON could not be decoded.
    Decode {
        /// What was wrong with the input.
        reason: &'static str,
    },
}

impl fmt::Display for SamplerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidConfig { field, reason } => {
                write!(f, "invalid sampler config: {field} {reason}")
            }
            Self::StateMismatch { field, expected, found } => {
                write!(f, "loader state mismatch: {field} is {found}, expected {expected}")
            }
            Self::InvalidState { field, reason } => {
                write!(f, "invalid loader state: {field} {reason}")
            }
            Self::Decode { reason } => write!(f, "cannot decode loader state: {reason}"),
        }
    }
}

impl std::error::Error for SamplerError {}

/// How an epoch orders the rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShuffleMode {
    /// Sequential: G = 0, 1, …, N−1 in every epoch.
    None,
    /// A pseudo-random permutation of all N rows (a keyed Feistel bijection evaluated per
    /// position, no memory per row). Best mixing, but the reader touches fragments in random
    /// order.
    Global,
    /// Chunk-local block shuffle: cut the rows into blocks of a mean fragment's rows, permute
    /// the blocks, take consecutive groups of `window_fragments` blocks (in permuted order),
    /// and emit each group's rows in a pseudo-random permutation. Each block is read once per
    /// epoch and about `window_fragments` fragments' rows need to be resident at a time (two
    /// windows when a batch straddles them).
    Block {
        /// Blocks (mean fragments) per window; must be at least 1.
        window_fragments: usize,
    },
}

/// Everything a [`Plan`] depends on besides the epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanConfig {
    /// Rows of the version (N): the order is a permutation of `0..rows`.
    pub rows: u64,
    /// Fragments of the version: [`ShuffleMode::Block`]'s blocks hold `⌈rows / fragments⌉`
    /// rows (0 counts as 1).
    pub fragments: u64,
    /// Dataset identity, mixed into every random stream.
    pub dataset_id: u64,
    /// User seed, mixed into every random stream.
    pub seed: u64,
    /// Order within an epoch.
    pub shuffle: ShuffleMode,
    /// Rows per batch per rank (≥ 1).
    pub batch_size: usize,
    /// Number of DDP ranks (≥ 1).
    pub world_size: usize,
    /// This rank, `0..world_size`.
    pub rank: usize,
    /// `true` drops the incomplete final global batch; `false` (the recommended default) pads
    /// it with rows repeated from the start of G, so no row is ever skipped.
    pub drop_last: bool,
}

/// Checks `config`, returning `(N, global batch size)`.
/// Row counts of a validated configuration.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    /// N, the length of G.
    rows: u64,
    global_batch: u64,
    /// Length of the order after dropping/padding: a multiple of `global_batch`.
    end: u64,
}

/// Checks `config` and sizes its epoch.
fn validate(config: &PlanConfig) -> Result<Sizes, SamplerError> {
    let bad = |field, reason| Err(SamplerError::InvalidConfig { field, reason });
    if config.batch_size == 0 {
        return bad("batch_size", "must be at least 1");
    }
    if config.world_size == 0 {
        return bad("world_size", "must be at least 1");
    }
    if config.rank >= config.world_size {
        return bad("rank", "must be less than world_size");
    }
    if config.shuffle == (ShuffleMode::Block { window_fragments: 0 }) {
        return bad("shuffle", "window_fragments must be at least 1");
    }
    let Some(global_batch) = config.batch_size.checked_mul(config.world_size) else {
        return bad("batch_size", "times world_size overflows");
    };
    let global_batch = global_batch as u64;
    let rows = config.rows;
    let end = if config.drop_last {
        Some(rows / global_batch * global_batch)
    } else {
        rows.div_ceil(global_batch).checked_mul(global_batch)
    };
    let Some(end) = end else {
        return bad("rows", "padded row count overflows u64");
    };
    if usize::try_from(end / global_batch).is_err() {
        return bad("rows", "batch count does not fit in usize");
    }
    Ok(Sizes { rows, global_batch, end })
}

/// How a [`Plan`] maps a position of G to a row.
#[derive(Clone, Debug)]
enum Order {
    /// `G[p] = p`.
    Sequential,
    /// `G[p] = shuffle(p)`.
    Global(IndexShuffle),
    /// Windows of permuted blocks, each in its own permutation.
    Block(Blocks),
    /// A mixture's epoch ([`crate::mixture`]): each position to a source's position, offset
    /// by where that source's positions start.
    Mixture(Arc<MixOrder>, Arc<[u64]>),
}

/// The geometry of a block order (see the module docs): a few numbers, whatever the size.
#[derive(Clone, Debug)]
struct Blocks {
    /// Blocks per window (`w`).
    per_window: u64,
    /// Rows per block (`b`, at least 1); the last block lacks `short` of them.
    block_rows: u64,
    /// Blocks (`nb`).
    count: u64,
    /// Rows the last block lacks (`nb·b − N`, below `b`).
    short: u64,
    /// Place of the last block in visiting order (`π₁⁻¹(nb − 1)`).
    short_at: u64,
    /// `π₁`, the visiting order of the blocks.
    visit: IndexShuffle,
    /// Key material of the window streams: `(dataset_id, seed, epoch)`.
    key: (u64, u64, u64),
}

/// The window holding some position of a block order: its place in G and its permutation.
#[derive(Clone, Debug)]
struct Window {
    /// First position of G the window fills.
    start: u64,
    shuffle: IndexShuffle,
}

impl Window {
    fn contains(&self, p: u64) -> bool {
        p >= self.start && p - self.start < self.shuffle.len()
    }
}

impl Blocks {
    fn new(config: &PlanConfig, epoch: u64, rows: u64, window_fragments: usize) -> Self {
        let block_rows = rows.div_ceil(config.fragments.max(1)).max(1);
        let count = rows.div_ceil(block_rows);
        let short = count * block_rows - rows;
        let visit = IndexShuffle::new(count, seed_for(config.dataset_id, config.seed, epoch, STREAM_BLOCKS));
        let short_at = visit.invert(count.saturating_sub(1));
        let key = (config.dataset_id, config.seed, epoch);
        Self { per_window: window_fragments as u64, block_rows, count, short, short_at, visit, key }
    }

    /// First position of G of the block visited `q`-th (`q ≤ nb`; `nb` gives N).
    fn block_start(&self, q: u64) -> u64 {
        q.saturating_mul(self.block_rows) - if q > self.short_at { self.short } else { 0 }
    }

    /// The place in visiting order of the block holding position `p` (`p < N`).
    fn block_at(&self, p: u64) -> u64 {
        let b = self.block_rows;
        if p < self.short_at.saturating_mul(b).saturating_add(b - self.short) {
            (p / b).min(self.short_at)
        } else {
            (p + self.short) / b
        }
    }

    /// The window holding position `p` (`p < N`).
    fn window_of(&self, p: u64) -> u64 {
        self.block_at(p) / self.per_window
    }

    /// Positions `[S_k, E_k)` of window `k`.
    fn window_range(&self, k: u64) -> std::ops::Range<u64> {
        let first = k.saturating_mul(self.per_window).min(self.count);
        let end = first.saturating_add(self.per_window).min(self.count);
        self.block_start(first)..self.block_start(end)
    }

    /// The window holding position `p` (`p < N`), with its permutation.
    fn window(&self, p: u64) -> Window {
        let k = self.window_of(p);
        let range = self.window_range(k);
        let (dataset_id, seed, epoch) = self.key;
        let key = seed_for(dataset_id, seed, epoch, STREAM_WINDOW_BASE.wrapping_add(k));
        Window { start: range.start, shuffle: IndexShuffle::new(range.end - range.start, key) }
    }

    /// `G[p]` (`p < N`) with `p` in `window`: the row at the permuted offset of the window's
    /// concatenated blocks.
    fn row(&self, window: &Window, p: u64) -> u64 {
        let x = window.start + window.shuffle.apply(p - window.start);
        let q = self.block_at(x);
        self.visit.apply(q) * self.block_rows + (x - self.block_start(q))
    }
}

impl Order {
    fn new(config: &PlanConfig, epoch: u64, rows: u64) -> Self {
        let key = |stream| seed_for(config.dataset_id, config.seed, epoch, stream);
        match config.shuffle {
            ShuffleMode::None => Self::Sequential,
            ShuffleMode::Global => Self::Global(IndexShuffle::new(rows, key(STREAM_GLOBAL))),
            ShuffleMode::Block { window_fragments } => Self::Block(Blocks::new(config, epoch, rows, window_fragments)),
        }
    }

    /// `G[p]` for `p < N`; `cache` keeps the last block window between calls.
    fn at(&self, p: u64, cache: &mut Option<Window>, epoch: u64) -> u64 {
        match self {
            Self::Mixture(mix, starts) => {
                let at = mix.at(epoch, p);
                starts[at.source] + at.position
            }
            Self::Sequential => p,
            Self::Global(shuffle) => shuffle.apply(p),
            Self::Block(blocks) => {
                let window = match cache {
                    Some(w) if w.contains(p) => w,
                    _ => cache.insert(blocks.window(p)),
                };
                blocks.row(window, p)
            }
        }
    }
}

/// Incremental FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
struct Fnv1a(u64);

impl Fnv1a {
    fn new() -> Self {
        Self(0xCBF2_9CE4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) -> &mut Self {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
        }
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.write(&v.to_le_bytes())
    }
}

/// Tag opening every [`settings_digest`]: the version of the order's definition. v3 windows
/// blocks of rows; v2 (windows of whole fragments) and v1 (Fisher–Yates) states carry other
/// digests and are refused.
const ORDER_TAG: &[u8] = b"tessera.sampler.order.v3";

/// Digest of the settings that determine the global order and its batching.
///
/// FNV-1a 64 over the canonical little-endian encoding: the ASCII tag
/// `tessera.sampler.order.v3`, the row count and the fragment count (u64 each), the shuffle
/// tag (u8: 0 None, 1 Global, 2 Block followed by `window_fragments` as u64),
/// `drop_last` (u8) and the global batch size `batch_size * world_size` (u64, saturating).
/// World size and rank are deliberately absent beyond that product, so a checkpoint stays valid
/// when a job is resumed on a different number of ranks with the same global batch. The tag
/// changes whenever the order's definition does, so a state never resumes into another order.
#[must_use]
pub fn settings_digest(config: &PlanConfig) -> u64 {
    tagged_digest(ORDER_TAG, config)
}

/// Tag of a mixture's settings digest (its history's digest is the state's `dataset_id`).
const MIXTURE_TAG: &[u8] = b"tessera.sampler.mixture.v1";

/// [`settings_digest`] of a mixture plan: the same fields under the mixture's tag, without
/// the epoch's length (a change of the mix may change it; the history digest covers it).
#[must_use]
pub fn mixture_settings_digest(config: &PlanConfig) -> u64 {
    tagged_digest(MIXTURE_TAG, &PlanConfig { rows: 0, fragments: 0, ..config.clone() })
}

/// [`settings_digest`] under an explicit order tag.
fn tagged_digest(tag: &[u8], config: &PlanConfig) -> u64 {
    let mut h = Fnv1a::new();
    h.write(tag).u64(config.rows).u64(config.fragments);
    match config.shuffle {
        ShuffleMode::None => h.write(&[0]),
        ShuffleMode::Global => h.write(&[1]),
        ShuffleMode::Block { window_fragments } => h.write(&[2]).u64(window_fragments as u64),
    };
    let global_batch = (config.batch_size as u64).saturating_mul(config.world_size as u64);
    h.write(&[u8::from(config.drop_last)]).u64(global_batch);
    h.0
}

// ------------------------------------------------------------------------------------------
// Plan
// ------------------------------------------------------------------------------------------

/// One rank's view of one epoch: the global order, its batching, and this rank's batches.
///
/// G is evaluated on demand ([`Plan::row_at`], [`Plan::batch_into`]); the plan holds a few
/// numbers ([`Plan::heap_bytes`]: nothing on the heap but a mixture's tables), never a list of
/// rows or fragments.
#[derive(Clone, Debug)]
pub struct Plan {
    config: PlanConfig,
    epoch: u64,
    order: Order,
    /// N, the length of G.
    rows: u64,
    /// Length of the order after dropping/padding: a multiple of `global_batch`.
    end: u64,
    /// First global position this plan serves (non-zero after a resume).
    start: u64,
    global_batch: u64,
}

impl Plan {
    /// Plans `epoch` from its beginning, in O(1) time and memory.
    ///
    /// # Errors
    /// [`SamplerError::InvalidConfig`] when a field of `config` is unusable.
    pub fn new(config: PlanConfig, epoch: u64) -> Result<Self, SamplerError> {
        let Sizes { rows, global_batch, end } = validate(&config)?;
        let order = Order::new(&config, epoch, rows);
        Ok(Self { config, epoch, order, rows, end, start: 0, global_batch })
    }

    /// Plans the rest of `epoch` after `state.samples_consumed_global` global samples.
    ///
    /// The state must come from the same dataset, seed, epoch and order settings (see
    /// [`settings_digest`]); `world_size`, `batch_size` and `rank` may differ as long as the
    /// global batch size is unchanged, and the remaining global batches are split the new way.
    /// The dataset *version* is not checked here: the loader opening the version does that.
    ///
    /// # Errors
    /// [`SamplerError::InvalidConfig`] for a bad `config`; [`SamplerError::StateMismatch`] naming
    /// the first differing field; [`SamplerError::InvalidState`] when the consumed count is not
    /// a multiple of the global batch size or lies beyond the end of the epoch.
    pub fn resume(config: PlanConfig, epoch: u64, state: &LoaderState) -> Result<Self, SamplerError> {
        let checks = [
            ("dataset_id", config.dataset_id, state.dataset_id),
            ("seed", config.seed, state.seed),
            ("settings_digest", settings_digest(&config), state.settings_digest),
            ("epoch", epoch, state.epoch),
        ];
        for (field, expected, found) in checks {
            if expected != found {
                return Err(SamplerError::StateMismatch { field, expected, found });
            }
        }
        let mut plan = Self::new(config, epoch)?;
        let invalid = |reason| SamplerError::InvalidState { field: "samples_consumed_global", reason };
        let consumed = state.samples_consumed_global;
        if consumed > plan.end {
            return Err(invalid("lies beyond the end of the epoch"));
        }
        if !consumed.is_multiple_of(plan.global_batch) {
            return Err(invalid("is not a multiple of the global batch size"));
        }
        plan.start = consumed;
        Ok(plan)
    }

    /// Plans `epoch` of a mixture: `G[p]` is the plan position `starts[s] + q` of the
    /// source `s` and source position `q` that `mix` gives position `p` ([`crate::mixture`]);
    /// `config.rows`, `config.fragments` and `config.dataset_id` are set from the mixture (the
    /// epoch's length, one fragment, the history's digest).
    ///
    /// # Errors
    /// As [`Plan::new`]; `starts` must hold one entry per source.
    pub fn mixture(
        mut config: PlanConfig,
        mix: Arc<MixOrder>,
        starts: Arc<[u64]>,
        epoch: u64,
    ) -> Result<Self, SamplerError> {
        if starts.len() != mix.sources() {
            return Err(SamplerError::InvalidConfig { field: "starts", reason: "needs one entry per source" });
        }
        if matches!(config.shuffle, ShuffleMode::Block { .. }) {
            return Err(SamplerError::InvalidConfig {
                field: "shuffle",
                reason: "block shuffle does not apply to a mixture (each source is shuffled globally or read in order)",
            });
        }
        (config.rows, config.fragments) = (mix.epoch_len(epoch), 1);
        config.dataset_id = mix.digest();
        let Sizes { rows, global_batch, end } = validate(&config)?;
        Ok(Self { config, epoch, order: Order::Mixture(mix, starts), rows, end, start: 0, global_batch })
    }

    /// Plans the rest of a mixture's epoch after `state` (see [`Plan::resume`]): the state's
    /// `dataset_id` must be the digest of the history before its position
    /// ([`MixOrder::digest_at`]), so a history extended by changes at or after it resumes.
    ///
    /// # Errors
    /// As [`Plan::resume`].
    pub fn resume_mixture(
        config: PlanConfig,
        mix: Arc<MixOrder>,
        starts: Arc<[u64]>,
        state: &LoaderState,
    ) -> Result<Self, SamplerError> {
        let consumed = state.samples_consumed_global;
        let checks = [
            ("dataset_id", mix.digest_at(state.epoch, consumed), state.dataset_id),
            ("seed", config.seed, state.seed),
            ("settings_digest", mixture_settings_digest(&config), state.settings_digest),
        ];
        for (field, expected, found) in checks {
            if expected != found {
                return Err(SamplerError::StateMismatch { field, expected, found });
            }
        }
        let mut plan = Self::mixture(config, mix, starts, state.epoch)?;
        let invalid = |reason| SamplerError::InvalidState { field: "samples_consumed_global", reason };
        if !consumed.is_multiple_of(plan.global_batch) {
            return Err(invalid("is not a multiple of the global batch size"));
        }
        // A change of the mix may have shortened the epoch to before the state: it is over.
        plan.start = consumed.min(plan.end);
        Ok(plan)
    }

    /// The configuration this plan was built from.
    #[must_use]
    pub fn config(&self) -> &PlanConfig {
        &self.config
    }

    /// The epoch this plan covers.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Rows per global batch: `batch_size * world_size`.
    #[must_use]
    pub fn global_batch_size(&self) -> usize {
        self.config.batch_size * self.config.world_size // checked in `validate`
    }

    /// N: the rows of the dataset, the length of G.
    #[must_use]
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Length of G after tail handling: N truncated to whole global batches (`drop_last`) or
    /// padded up to them; global batch `b` covers positions `b*gb..(b+1)*gb`. Ignores any
    /// resume point.
    #[must_use]
    pub fn effective_len(&self) -> u64 {
        self.end
    }

    /// The row at `position` of the padded order: `G[position mod N]` (so the padding repeats
    /// G from its start, and positions past [`Plan::effective_len`] keep wrapping); `None`
    /// only when the dataset has no rows. Cost: one or two permutations.
    #[must_use]
    pub fn row_at(&self, position: u64) -> Option<u64> {
        (self.rows > 0).then(|| self.order.at(position % self.rows, &mut None, self.epoch))
    }

    /// Every position of the padded order (`0..effective_len`) holding dataset row `row`
    /// (the row once, plus its repeats in the padding), in O(1) for sequential and global
    /// order; `None` for block shuffle and mixtures, whose orders are not inverted here.
    #[must_use]
    pub fn positions_of(&self, row: u64) -> Option<Vec<u64>> {
        let first = match &self.order {
            Order::Sequential => row,
            Order::Global(shuffle) => shuffle.invert(row),
            Order::Block(_) | Order::Mixture(..) => return None,
        };
        if row >= self.rows {
            return Some(Vec::new());
        }
        // The row at `first`, then every `rows` positions while the padding repeats G.
        Some((first..self.end).step_by(usize::try_from(self.rows).unwrap_or(usize::MAX)).collect())
    }

    /// Bytes this plan holds on the heap besides its [`PlanConfig`]: a mixture's tables,
    /// nothing otherwise; never anything per row or per fragment.
    #[must_use]
    pub fn heap_bytes(&self) -> u64 {
        match &self.order {
            Order::Sequential | Order::Global(_) | Order::Block(_) => 0,
            Order::Mixture(mix, starts) => mix.heap_bytes() + 8 * starts.len() as u64,
        }
    }

    /// Block shuffle's geometry: rows per window (full windows) and rows per block; `None`
    /// for other orders.
    #[must_use]
    pub fn block_rows(&self) -> Option<(u64, u64)> {
        match &self.order {
            Order::Block(b) => Some((b.per_window.saturating_mul(b.block_rows), b.block_rows)),
            _ => None,
        }
    }

    /// The block window holding position `position` of the padded order (of `G[position mod
    /// N]`), and the positions `[S_k, E_k)` of G it fills; `None` unless the order is a
    /// [`ShuffleMode::Block`] one with rows.
    #[must_use]
    pub fn block_window(&self, position: u64) -> Option<(u64, std::ops::Range<u64>)> {
        match &self.order {
            Order::Block(blocks) if self.rows > 0 => {
                let k = blocks.window_of(position % self.rows);
                Some((k, blocks.window_range(k)))
            }
            _ => None,
        }
    }

    /// Batches this rank still has to take in this plan; the same on every rank.
    #[must_use]
    pub fn batches_per_rank(&self) -> usize {
        // `validate` checked that the whole epoch's count fits in usize.
        usize::try_from((self.end - self.start) / self.global_batch).unwrap_or(usize::MAX)
    }

    /// Global position of row `j` of this rank's `i`-th remaining batch.
    fn position(&self, i: usize, j: usize) -> u64 {
        self.start + i as u64 * self.global_batch + (self.config.rank * self.config.batch_size + j) as u64
    }

    /// Writes this rank's `i`-th remaining batch (exactly `batch_size` rows) into `out`,
    /// replacing its contents; `false` (and `out` empty) past the end. Reusing `out` keeps the
    /// hot path free of allocation.
    pub fn batch_into(&self, i: usize, out: &mut Vec<u64>) -> bool {
        out.clear();
        if i >= self.batches_per_rank() || self.rows == 0 {
            return false;
        }
        let first = self.position(i, 0);
        if let Order::Mixture(mix, starts) = &self.order {
            let mut at = Vec::with_capacity(self.config.batch_size);
            mix.fill(self.epoch, (first..first + self.config.batch_size as u64).map(|p| p % self.rows), &mut at);
            out.extend(at.iter().map(|a| starts[a.source] + a.position));
            return true;
        }
        let mut cache = None;
        out.extend(
            (first..first + self.config.batch_size as u64)
                .map(|p| self.order.at(p % self.rows, &mut cache, self.epoch)),
        );
        true
    }

    /// Iterates over this rank's remaining batches in order, one new `Vec` per batch (use
    /// [`Plan::batch_into`] with a reused buffer on hot paths).
    #[must_use]
    pub fn batches(&self) -> impl ExactSizeIterator<Item = Vec<u64>> + '_ {
        (0..self.batches_per_rank()).map(|i| {
            let mut rows = Vec::with_capacity(self.config.batch_size);
            self.batch_into(i, &mut rows);
            rows
        })
    }

    /// The whole un-padded G as a vector of N rows (ignoring any resume point). **For tests
    /// and benchmarks only**: it materialises 8·N bytes, which the loader never does.
    #[must_use]
    pub fn collect_global_order(&self) -> Vec<u64> {
        let mut cache = None;
        let mut out = Vec::with_capacity(usize::try_from(self.rows).unwrap_or(0));
        out.extend((0..self.rows).map(|p| self.order.at(p, &mut cache, self.epoch)));
        out
    }

    /// The resume state after every rank has taken `batches_consumed` batches of this plan,
    /// or `None` when that exceeds [`Plan::batches_per_rank`]. `version` is the dataset version
    /// being read, recorded for the loader's own check.
    #[must_use]
    pub fn checkpoint(&self, batches_consumed: usize, version: u64) -> Option<LoaderState> {
        let consumed = self.start + batches_consumed as u64 * self.global_batch;
        let (dataset_id, settings) = match &self.order {
            Order::Mixture(mix, _) => (mix.digest_at(self.epoch, consumed), mixture_settings_digest(&self.config)),
            _ => (self.config.dataset_id, settings_digest(&self.config)),
        };
        (batches_consumed <= self.batches_per_rank()).then_some(LoaderState {
            dataset_id,
            version,
            seed: self.config.seed,
            epoch: self.epoch,
            samples_consumed_global: consumed,
            settings_digest: settings,
        })
    }
}

// ------------------------------------------------------------------------------------------
// Resume state
// ------------------------------------------------------------------------------------------

const STATE_MAGIC: [u8; 4] = *b"TSLS";
const STATE_FORMAT_VERSION: u16 = 1;
/// Length of [`LoaderState::to_bytes`]: magic, version, six u64 fields, FNV-1a 64 checksum.
pub const STATE_BYTES_LEN: usize = 4 + 2 + 6 * 8 + 8;
const STATE_JSON_FORMAT: &str = "TSLS/1";
const STATE_FIELDS: [&str; 6] =
    ["dataset_id", "version", "seed", "epoch", "samples_consumed_global", "settings_digest"];

/// Where a run stands, enough to continue the exact same order after a restart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoaderState {
    /// Dataset identity the order was derived from.
    pub dataset_id: u64,
    /// Dataset version being read (checked by the loader, not by [`Plan::resume`]).
    pub version: u64,
    /// User seed.
    pub seed: u64,
    /// Current epoch.
    pub epoch: u64,
    /// Samples of the epoch's (padded) global order consumed by all ranks together; a multiple
    /// of the global batch size at batch boundaries.
    pub samples_consumed_global: u64,
    /// [`settings_digest`] of the configuration that produced the order.
    pub settings_digest: u64,
}

impl LoaderState {
    fn fields(&self) -> [u64; 6] {
        [self.dataset_id, self.version, self.seed, self.epoch, self.samples_consumed_global, self.settings_digest]
    }

    fn from_fields(f: [u64; 6]) -> Self {
        let [dataset_id, version, seed, epoch, samples_consumed_global, settings_digest] = f;
        Self { dataset_id, version, seed, epoch, samples_consumed_global, settings_digest }
    }

    /// Fixed little-endian encoding of [`STATE_BYTES_LEN`] bytes: magic `TSLS`, format version
    /// u16 = 1, the six fields as u64 in declaration order, then the FNV-1a 64 of all preceding
    /// bytes (so a flipped bit is detected rather than silently resuming elsewhere).
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(STATE_BYTES_LEN);
        out.extend_from_slice(&STATE_MAGIC);
        out.extend_from_slice(&STATE_FORMAT_VERSION.to_le_bytes());
        for v in self.fields() {
            out.extend_from_slice(&v.to_le_bytes());
        }
        let checksum = Fnv1a::new().write(&out).0;
        out.extend_from_slice(&checksum.to_le_bytes());
        out
    }

    /// Decodes [`LoaderState::to_bytes`] output, rejecting anything else.
    ///
    /// # Errors
    /// [`SamplerError::Decode`] for a wrong magic, an unsupported version, a wrong length or a
    /// checksum mismatch.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SamplerError> {
        let fail = |reason| Err(SamplerError::Decode { reason });
        let le = |b: &[u8]| b.iter().rev().fold(0u64, |acc, &x| acc << 8 | u64::from(x));
        if bytes.len() < 6 {
            return fail("truncated");
        }
        if bytes[..4] != STATE_MAGIC {
            return fail("bad magic (not a TSLS loader state)");
        }
        if le(&bytes[4..6]) != u64::from(STATE_FORMAT_VERSION) {
            return fail("unsupported format version");
        }
        if bytes.len() != STATE_BYTES_LEN {
            return fail(if bytes.len() < STATE_BYTES_LEN { "truncated" } else { "trailing bytes" });
        }
        let (body, checksum) = bytes.split_at(STATE_BYTES_LEN - 8);
        if Fnv1a::new().write(body).0 != le(checksum) {
            return fail("checksum mismatch");
        }
        let mut fields = [0u64; 6];
        for (slot, chunk) in fields.iter_mut().zip(body[6..].chunks_exact(8)) {
            *slot = le(chunk);
        }
        Ok(Self::from_fields(fields))
    }

    /// A flat JSON object: `"format": "TSLS/1"` plus every field as a decimal *string* (u64
    /// exceeds the 2^53 integers JSON consumers handle exactly), e.g. `{"format":"TSLS/1",
    /// "dataset_id":"7",…}`. Written by hand: no serde dependency.
    #[must_use]
    pub fn to_json(&self) -> String {
        use std::fmt::Write as _;
        let mut out = format!("{{\"format\":\"{STATE_JSON_FORMAT}\"");
        for (name, value) in STATE_FIELDS.iter().zip(self.fields()) {
            let _ = write!(out, ",\"{name}\":\"{value}\""); // writing to a String cannot fail
        }
        out.push('}');
        out
    }

    /// Parses [`LoaderState::to_json`] output, tolerantly: any whitespace, values as decimal
    /// strings or bare integers, members in any order, unknown members ignored. Values must be
    /// strings without escapes or numbers (no nesting); `format` and all six fields are required.
    ///
    /// # Errors
    /// [`SamplerError::Decode`] for anything else, including duplicate or missing fields.
    pub fn from_json(text: &str) -> Result<Self, SamplerError> {
        fn unquote(s: &str) -> Option<&str> {
            let inner = s.strip_prefix('"')?.strip_suffix('"')?;
            (!inner.contains(['"', '\\'])).then_some(inner)
        }
        let fail = |reason| SamplerError::Decode { reason };
        let body = text.trim().strip_prefix('{').and_then(|s| s.strip_suffix('}'));
        let body = body.ok_or(fail("expected a JSON object"))?;
        let mut fields = [None; 6];
        let mut format_seen = false;
        for member in body.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            let (key, value) = member.split_once(':').ok_or(fail("expected \"key\": value"))?;
            let key = unquote(key.trim()).ok_or(fail("keys must be plain strings"))?;
            let value = value.trim();
            let value = unquote(value).unwrap_or(value);
            if key == "format" {
                if format_seen || value != STATE_JSON_FORMAT {
                    return Err(fail("format must appear once and be \"TSLS/1\""));
                }
                format_seen = true;
            } else if let Some(i) = STATE_FIELDS.iter().position(|&f| f == key) {
                let parsed = value.parse::<u64>().map_err(|_| fail("field is not a u64"))?;
                if fields[i].replace(parsed).is_some() {
                    return Err(fail("duplicate field"));
                }
            }
        }
        if !format_seen {
            return Err(fail("missing format"));
        }
        let mut out = [0u64; 6];
        for (slot, value) in out.iter_mut().zip(fields) {
            *slot = value.ok_or(fail("missing field"))?;
        }
        Ok(Self::from_fields(out))
    }
}

// ------------------------------------------------------------------------------------------
// Shuffle quality measures
// ------------------------------------------------------------------------------------------

/// How far rows move from their sorted position, as fractions of the order's length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DisplacementStats {
    /// Mean over positions of `|position − sorted position| / len`.
    pub mean_normalized: f64,
    /// Maximum of `|position − sorted position| / len`.
    pub max_normalized: f64,
}

/// Displacement of each element from where it would sit in sorted order (ties broken by
/// position, so padding repeats are handled); for a permutation of `0..N` the sorted position
/// of row `v` is `v`.
///
/// Expected values: sequential order gives 0 / 0. A uniform permutation (Global) has mean
/// (N²−1)/(3N²) ≈ 1/3 and max close to 1. Block mode moves whole fragments, so with many
/// fragments its mean is also ≈ 1/3; what it gives up is local mixing, which
/// [`adjacent_pair_retention`] and per-batch fragment diversity show instead. Empty input gives
/// zeros.
#[must_use]
#[allow(clippy::cast_precision_loss)] // statistics: lengths far below 2^52
pub fn displacement_stats(order: &[u64]) -> DisplacementStats {
    if order.is_empty() {
        return DisplacementStats { mean_normalized: 0.0, max_normalized: 0.0 };
    }
    let mut by_value: Vec<usize> = (0..order.len()).collect();
    by_value.sort_by_key(|&i| (order[i], i));
    let (sum, max) = by_value.iter().enumerate().fold((0u64, 0usize), |(sum, max), (sorted, &pos)| {
        let d = sorted.abs_diff(pos);
        (sum + d as u64, max.max(d))
    });
    let n = order.len() as f64;
    DisplacementStats { mean_normalized: sum as f64 / n / n, max_normalized: max as f64 / n }
}

/// Fraction of positions `i` with `order[i + 1] == order[i] + 1`, i.e. how much sequential
/// structure survives (0.0 for fewer than two elements).
///
/// Expected values: 1.0 for sequential order (less one break per wrap of the padding);
/// ≈ 1/N for Global; ≈ 1/W for Block with W rows per window (each window is a uniform
/// permutation, which keeps about one successor pair).
#[must_use]
#[allow(clippy::cast_precision_loss)] // statistics: lengths far below 2^52
pub fn adjacent_pair_retention(order: &[u64]) -> f64 {
    if order.len() < 2 {
        return 0.0;
    }
    let kept = order.windows(2).filter(|w| w[0].checked_add(1) == Some(w[1])).count();
    kept as f64 / (order.len() - 1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    const MODES: [ShuffleMode; 3] =
        [ShuffleMode::None, ShuffleMode::Global, ShuffleMode::Block { window_fragments: 3 }];

    /// Splits `n` rows into fragments of varied sizes, including empty ones.
    fn fragments(n: u64) -> Vec<u64> {
        let (mut left, mut out) = (n, Vec::new());
        for size in [13, 5, 0, 29].into_iter().cycle() {
            if left == 0 {
                break;
            }
            out.push(size.min(left));
            left -= size.min(left);
        }
        out
    }

    fn config(n: u64, shuffle: ShuffleMode, batch_size: usize, world_size: usize, drop_last: bool) -> PlanConfig {
        let fragments = fragments(n).len() as u64;
        PlanConfig { rows: n, fragments, dataset_id: 7, seed: 42, shuffle, batch_size, world_size, rank: 0, drop_last }
    }

    fn plans(c: &PlanConfig, epoch: u64, state: Option<&LoaderState>) -> Vec<Plan> {
        (0..c.world_size)
            .map(|rank| {
                let c = PlanConfig { rank, ..c.clone() };
                match state {
                    Some(s) => Plan::resume(c, epoch, s).unwrap(),
                    None => Plan::new(c, epoch).unwrap(),
                }
            })
            .collect()
    }

    /// The ranks' batches re-interleaved into global order (global batch by global batch).
    fn interleave(plans: &[Plan]) -> Vec<u64> {
        let count = plans[0].batches_per_rank();
        assert!(plans.iter().all(|p| p.batches_per_rank() == count), "ranks disagree on batch count");
        let (mut out, mut b) = (Vec::new(), vec![99]);
        for i in 0..count {
            for p in plans {
                assert!(p.batch_into(i, &mut b));
                assert_eq!(b.len(), p.config().batch_size);
                out.extend_from_slice(&b);
            }
        }
        assert!(plans.iter().all(|p| !p.batch_into(count, &mut b) && b.is_empty()));
        out
    }

    /// The padded order through [`Plan::row_at`], position by position.
    fn effective(plan: &Plan) -> Vec<u64> {
        (0..plan.effective_len()).map(|p| plan.row_at(p).unwrap()).collect()
    }

    #[test]
    fn ranks_partition_the_epoch() {
        for world in 1..=8 {
            for bs in [1, 3, 8] {
                for n in [0u64, 1, 7, 100, 1001] {
                    for drop_last in [false, true] {
                        for mode in MODES {
                            let c = config(n, mode, bs, world, drop_last);
                            let ps = plans(&c, 3, None);
                            let g = ps[0].collect_global_order();
                            assert!(ps.iter().all(|p| p.collect_global_order() == g));
                            assert_eq!(ps[0].rows(), n);
                            let mut sorted = g.clone();
                            sorted.sort_unstable();
                            assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "{mode:?} G is not a permutation");
                            let gb = (bs * world) as u64;
                            let expected: Vec<u64> = if drop_last {
                                g[..(n / gb * gb) as usize].to_vec()
                            } else {
                                (0..n.div_ceil(gb) * gb).map(|i| g[(i % n) as usize]).collect()
                            };
                            let got = interleave(&ps);
                            assert_eq!(got, expected, "n={n} bs={bs} world={world} drop={drop_last} {mode:?}");
                            let real = &got[..got.len().min(n as usize)];
                            assert_eq!(real.iter().collect::<HashSet<_>>().len(), real.len(), "overlap");
                            assert_eq!(effective(&ps[0]), got);
                            assert_eq!(ps[0].row_at(u64::MAX), (n > 0).then(|| g[(u64::MAX % n) as usize]));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn order_depends_on_epoch_and_seed_but_not_on_world_size() {
        for mode in [ShuffleMode::Global, ShuffleMode::Block { window_fragments: 2 }] {
            for n in [10, 100, 1001] {
                let g = |world, epoch, seed| {
                    let c = PlanConfig { seed, rank: world - 1, ..config(n, mode, 3, world, false) };
                    Plan::new(c, epoch).unwrap().collect_global_order()
                };
                let base = g(1, 5, 42);
                for world in 2..=8 {
                    assert_eq!(g(world, 5, 42), base);
                }
                assert_ne!(g(1, 6, 42), base, "{mode:?} n={n}");
                assert_ne!(g(1, 5, 43), base, "{mode:?} n={n}");
            }
        }
        let seq = Plan::new(config(50, ShuffleMode::None, 4, 2, true), 9).unwrap();
        assert_eq!(seq.collect_global_order(), (0..50).collect::<Vec<_>>());
    }

    #[test]
    fn block_windows_are_contiguous_and_blocks_stay_in_their_window() {
        // (rows, fragments): blocks of ⌈rows / fragments⌉ rows, the last one short or not.
        for (rows, fragments) in [(1_300u64, 9u64), (1_000, 10), (17, 17), (5, 9), (1, 1), (640, 3)] {
            let block_rows = rows.div_ceil(fragments);
            for window_fragments in [1, 2, 3, 4, 9, 20] {
                let shuffle = ShuffleMode::Block { window_fragments };
                let c = PlanConfig { rows, fragments, shuffle, ..config(0, shuffle, 4, 2, false) };
                let plan = Plan::new(c.clone(), 1).unwrap();
                let g = plan.collect_global_order();
                let mut start = 0u64;
                let mut seen_blocks = HashSet::new();
                while start < rows {
                    let (k, range) = plan.block_window(start).unwrap();
                    assert_eq!(range.start, start, "windows tile G in order");
                    assert!(range.end > start);
                    let segment = &g[range.start as usize..range.end as usize];
                    assert!(segment.iter().all(|&p| plan.block_window(p).is_some()));
                    for p in range.clone() {
                        assert_eq!(plan.block_window(p).unwrap().0, k);
                    }
                    // The window's rows are whole blocks, `window_fragments` of them (fewer last).
                    let blocks: HashSet<u64> = segment.iter().map(|&r| r / block_rows).collect();
                    let whole: u64 = blocks.iter().map(|&j| block_rows.min(rows - j * block_rows)).sum();
                    assert_eq!(whole, segment.len() as u64, "window {k} holds whole blocks");
                    assert!(blocks.len() <= window_fragments, "window {k}: {} blocks", blocks.len());
                    assert!(blocks.iter().all(|&j| seen_blocks.insert(j)), "a block in two windows");
                    if segment.len() > 50 {
                        assert!(adjacent_pair_retention(segment) < 0.1, "window not shuffled");
                    }
                    start = range.end;
                }
                assert_eq!(seen_blocks.len() as u64, rows.div_ceil(block_rows));
                let (window_rows, b) = plan.block_rows().unwrap();
                assert_eq!((window_rows, b), (block_rows * window_fragments as u64, block_rows));
            }
        }
        let seq = Plan::new(config(100, ShuffleMode::None, 10, 1, false), 0).unwrap();
        assert!(seq.block_window(3).is_none() && seq.block_rows().is_none());
    }

    #[test]
    fn resume_at_every_boundary_reproduces_the_remainder() {
        for mode in MODES {
            for drop_last in [false, true] {
                let c = config(100, mode, 3, 2, drop_last);
                let full = plans(&c, 2, None);
                for k in 0..=full[0].batches_per_rank() {
                    let state = full[1].checkpoint(k, 11).unwrap();
                    assert_eq!(state.samples_consumed_global, 6 * k as u64);
                    let state = LoaderState::from_bytes(&state.to_bytes()).unwrap();
                    let resumed = plans(&c, 2, Some(&state));
                    for (a, b) in full.iter().zip(&resumed) {
                        assert_eq!(a.batches().skip(k).collect::<Vec<_>>(), b.batches().collect::<Vec<_>>());
                    }
                }
                assert!(full[0].checkpoint(full[0].batches_per_rank() + 1, 11).is_none());
            }
        }
    }

    #[test]
    fn resume_with_another_world_size_keeps_the_global_order() {
        for ((w0, b0), (w1, b1)) in [((1, 8), (2, 4)), ((4, 2), (2, 4)), ((2, 4), (8, 1))] {
            for mode in MODES {
                for drop_last in [false, true] {
                    let before = config(1001, mode, b0, w0, drop_last);
                    let after = config(1001, mode, b1, w1, drop_last);
                    let full = interleave(&plans(&before, 4, None));
                    let first = Plan::new(before.clone(), 4).unwrap();
                    for k in [0, 1, 17, first.batches_per_rank() - 1, first.batches_per_rank()] {
                        let state = first.checkpoint(k, 1).unwrap();
                        let rest = interleave(&plans(&after, 4, Some(&state)));
                        assert_eq!(rest, full[k * 8..], "{w0}x{b0} -> {w1}x{b1} at {k} {mode:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn resume_rejects_foreign_or_impossible_states() {
        let c = config(100, ShuffleMode::Global, 4, 2, false);
        let state = Plan::new(c.clone(), 3).unwrap().checkpoint(2, 1).unwrap();
        let field = |c: PlanConfig, epoch| match Plan::resume(c, epoch, &state) {
            Err(SamplerError::StateMismatch { field, .. }) => field,
            other => panic!("expected a mismatch, got {other:?}"),
        };
        assert_eq!(field(PlanConfig { dataset_id: 8, ..c.clone() }, 3), "dataset_id");
        assert_eq!(field(PlanConfig { seed: 1, ..c.clone() }, 3), "seed");
        assert_eq!(field(PlanConfig { drop_last: true, ..c.clone() }, 3), "settings_digest");
        assert_eq!(field(PlanConfig { batch_size: 8, ..c.clone() }, 3), "settings_digest");
        assert_eq!(field(PlanConfig { shuffle: ShuffleMode::None, ..c.clone() }, 3), "settings_digest");
        assert_eq!(field(PlanConfig { rows: 101, ..c.clone() }, 3), "settings_digest");
        assert_eq!(field(PlanConfig { fragments: 1, ..c.clone() }, 3), "settings_digest");
        assert_eq!(field(c.clone(), 4), "epoch");
        let err = Plan::resume(c.clone(), 3, &LoaderState { dataset_id: 9, ..state.clone() }).unwrap_err();
        assert_eq!(err, SamplerError::StateMismatch { field: "dataset_id", expected: 7, found: 9 });
        assert!(err.to_string().contains("dataset_id"));
        for consumed in [3, 1000, u64::MAX] {
            let bad = LoaderState { samples_consumed_global: consumed, ..state.clone() };
            assert!(matches!(Plan::resume(c.clone(), 3, &bad), Err(SamplerError::InvalidState { .. })));
        }
        // Same global batch, other split: accepted.
        assert!(Plan::resume(PlanConfig { batch_size: 2, world_size: 4, rank: 3, ..c }, 3, &state).is_ok());
    }

    #[test]
    fn invalid_configs_are_rejected() {
        let c = config(10, ShuffleMode::None, 2, 2, false);
        for (bad, name) in [
            (PlanConfig { batch_size: 0, ..c.clone() }, "batch_size"),
            (PlanConfig { world_size: 0, rank: 0, ..c.clone() }, "world_size"),
            (PlanConfig { rank: 2, ..c.clone() }, "rank"),
            (PlanConfig { shuffle: ShuffleMode::Block { window_fragments: 0 }, ..c.clone() }, "shuffle"),
            (PlanConfig { batch_size: usize::MAX, ..c.clone() }, "batch_size"),
            (PlanConfig { rows: u64::MAX, ..c.clone() }, "rows"),
            (PlanConfig { rows: u64::MAX - 1, ..c.clone() }, "rows"),
        ] {
            assert!(matches!(Plan::new(bad, 0), Err(SamplerError::InvalidConfig { field, .. }) if field == name));
        }
    }

    #[test]
    fn state_bytes_and_json_round_trip_and_reject_garbage() {
        let state = LoaderState {
            dataset_id: u64::MAX,
            version: 3,
            seed: 0x0123_4567_89AB_CDEF,
            epoch: 12,
            samples_consumed_global: 4096,
            settings_digest: settings_digest(&config(10, ShuffleMode::Global, 2, 2, false)),
        };
        let bytes = state.to_bytes();
        assert_eq!(bytes.len(), STATE_BYTES_LEN);
        assert_eq!(&bytes[..6], b"TSLS\x01\x00");
        assert_eq!(LoaderState::from_bytes(&bytes), Ok(state.clone()));
        for len in 0..bytes.len() {
            assert!(LoaderState::from_bytes(&bytes[..len]).is_err(), "truncated to {len}");
        }
        for bit in 0..bytes.len() * 8 {
            let mut garbled = bytes.clone();
            garbled[bit / 8] ^= 1 << (bit % 8);
            assert!(LoaderState::from_bytes(&garbled).is_err(), "bit {bit} flip accepted");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(LoaderState::from_bytes(&long), Err(SamplerError::Decode { reason: "trailing bytes" }));

        let json = state.to_json();
        assert_eq!(LoaderState::from_json(&json), Ok(state.clone()));
        let loose = " { \"epoch\" : 12 , \"format\":\"TSLS/1\", \"dataset_id\": \"18446744073709551615\",\n \
             \"note\": \"hi\", \"version\":3, \"seed\":\"81985529216486895\", \"samples_consumed_global\":4096, \
             \"settings_digest\":\""
            .to_string()
            + &state.settings_digest.to_string()
            + "\", }";
        assert_eq!(LoaderState::from_json(&loose), Ok(state));
        let bad_inputs = [
            String::new(),
            "[]".into(),
            json.replace("TSLS/1", "TSLS/2"),
            json.replace("\"epoch\"", "\"epoch\":\"1\",\"epoch\""),
            json.replace(",\"seed\"", ",\"ignored\""),
            json.replace("\"12\"", "\"-1\""),
            json.replace("\"12\"", "\"1e3\""),
            json.replace("\"version\":\"3\"", "\"version\":\"18446744073709551616\""),
            json[..json.len() - 1].to_string(),
        ];
        for bad in bad_inputs {
            assert!(matches!(LoaderState::from_json(&bad), Err(SamplerError::Decode { .. })), "{bad}");
        }
    }

    #[test]
    #[allow(clippy::cast_precision_loss)]
    fn shuffle_quality_measures() {
        let global = Plan::new(config(10_000, ShuffleMode::Global, 32, 1, false), 0).unwrap().collect_global_order();
        assert!(adjacent_pair_retention(&global) < 0.01);
        let d = displacement_stats(&global);
        assert!((d.mean_normalized - 1.0 / 3.0).abs() < 0.02 && d.max_normalized > 0.9, "{d:?}");

        let seq = Plan::new(config(10_000, ShuffleMode::None, 3, 1, false), 0).unwrap();
        assert!((adjacent_pair_retention(&seq.collect_global_order()) - 1.0).abs() < f64::EPSILON);
        assert_eq!(
            displacement_stats(&seq.collect_global_order()),
            DisplacementStats { mean_normalized: 0.0, max_normalized: 0.0 }
        );
        let padded = effective(&seq); // 10_002 rows: one break where the padding wraps to 0
        let expected = (padded.len() - 2) as f64 / (padded.len() - 1) as f64;
        assert!((adjacent_pair_retention(&padded) - expected).abs() < 1e-12);

        let mut block = config(10_000, ShuffleMode::Block { window_fragments: 8 }, 32, 1, false);
        block.fragments = 100;
        let block = Plan::new(block, 0).unwrap().collect_global_order();
        assert!(adjacent_pair_retention(&block) < 0.01);
        assert!(displacement_stats(&block).mean_normalized > 0.2);
        assert!(adjacent_pair_retention(&[]) == 0.0 && adjacent_pair_retention(&[5]) == 0.0);
    }

    #[test]
    fn prng_and_derivation_are_pinned() {
        let mut sm = SplitMix64::new(0);
        assert_eq!(
            [sm.next_u64(), sm.next_u64(), sm.next_u64()],
            [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F]
        );
        let mut x = Xoshiro256StarStar { s: [1, 2, 3, 4] };
        assert_eq!(
            [x.next_u64(), x.next_u64(), x.next_u64(), x.next_u64()],
            [11520, 0, 1_509_978_240, 1_215_971_899_390_074_240]
        );
        assert_eq!(seed_for(1, 2, 3, 4), 0xF47E_DE8D_FE08_43E7);
        let g = Plan::new(config(10, ShuffleMode::Global, 1, 1, false), 0).unwrap();
        assert_eq!(g.collect_global_order(), GOLDEN_GLOBAL_10);
        let block =
            PlanConfig { rows: 15, fragments: 5, ..config(0, ShuffleMode::Block { window_fragments: 2 }, 1, 1, false) };
        let visit = IndexShuffle::new(5, seed_for(7, 42, 0, STREAM_BLOCKS));
        assert_eq!((0..5).map(|q| visit.apply(q) as usize).collect::<Vec<_>>(), GOLDEN_BLOCKS_5);
        assert_eq!(Plan::new(block, 0).unwrap().collect_global_order(), GOLDEN_BLOCK_15);
        let mut rng = Xoshiro256StarStar::new(9);
        let mut counts = [0u32; 3];
        for _ in 0..30_000 {
            counts[rng.below(3) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (9_500..10_500).contains(&c)), "{counts:?}");
        assert_eq!(rng.below(0), 0);
    }

    /// Pinned outputs of the frozen order (see `prng_and_derivation_are_pinned`).
    const GOLDEN_GLOBAL_10: [u64; 10] = [6, 5, 0, 2, 4, 1, 7, 9, 8, 3];
    const GOLDEN_BLOCKS_5: [usize; 5] = [1, 4, 2, 0, 3];
    const GOLDEN_BLOCK_15: [u64; 15] = [3, 14, 13, 4, 12, 5, 2, 1, 8, 0, 7, 6, 10, 11, 9];
    const GOLDEN_SHUFFLE_10: [u64; 10] = [9, 0, 1, 4, 8, 2, 6, 5, 7, 3];
    const GOLDEN_SHUFFLE_2_40: [u64; 10] = [
        187_658_179_272,
        344_836_076_278,
        596_173_770_221,
        246_797_986_007,
        889_704_404_930,
        843_468_888_513,
        1_098_984_284_905,
        389_747_230_028,
        445_297_146_030,
        62_736_776_659,
    ];

    /// Asserts that `shuffle` maps `0..n` onto `0..n` (exhaustively, with a bitmap).
    fn assert_permutation(shuffle: &IndexShuffle) {
        let n = shuffle.len();
        let mut hit = vec![false; usize::try_from(n).unwrap()];
        for i in 0..n {
            let v = shuffle.apply(i);
            assert!(v < n, "n={n}: {i} -> {v}");
            assert!(!std::mem::replace(&mut hit[v as usize], true), "n={n}: {v} hit twice");
        }
    }

    #[test]
    fn index_shuffle_inverts() {
        for (n, key) in [(1u64, 3u64), (2, 9), (7, 1), (1000, 42), (1 << 20, 7), (u64::MAX / 3, 11)] {
            let s = IndexShuffle::new(n, key);
            for x in (0..n.min(2000)).chain([n - 1, n / 2]) {
                assert_eq!(s.invert(s.apply(x)), x, "n {n}, x {x}");
                assert_eq!(s.apply(s.invert(x)), x, "n {n}, x {x}");
            }
            assert_eq!(s.invert(n), n, "past the end: unchanged");
        }
    }

    #[test]
    fn index_shuffle_is_a_permutation() {
        for key in [0, 1, 0xDEAD_BEEF, seed_for(7, 42, 3, STREAM_GLOBAL)] {
            for n in 0..=2000 {
                assert_permutation(&IndexShuffle::new(n, key));
            }
        }
        let primes = [2003, 4099, 8191, 16_381, 32_749, 65_521, 65_537];
        let powers = (1..=16).flat_map(|k| [(1u64 << k) - 1, 1 << k, (1 << k) + 1]);
        for n in primes.into_iter().chain(powers) {
            for key in [3, 0x0123_4567_89AB_CDEF] {
                assert_permutation(&IndexShuffle::new(n, key));
            }
        }
        let empty = IndexShuffle::new(0, 5);
        assert!(empty.is_empty() && empty.apply(0) == 0 && empty.apply(9) == 9);
        assert_eq!(IndexShuffle::new(1, 5).apply(0), 0);
        // Outside the range: the identity.
        assert_eq!(IndexShuffle::new(10, 5).apply(10), 10);
        assert_eq!(IndexShuffle::new(10, 5).apply(u64::MAX), u64::MAX);
        // Different keys give different permutations.
        let a: Vec<u64> = (0..100).map(|i| IndexShuffle::new(100, 1).apply(i)).collect();
        let b: Vec<u64> = (0..100).map(|i| IndexShuffle::new(100, 2).apply(i)).collect();
        assert_ne!(a, b);
    }

    #[test]
    fn index_shuffle_on_huge_domains_is_injective_on_samples() {
        for n in [(1u64 << 40) + 7, 1_000_000_000_000, (1 << 62) + 1, u64::MAX] {
            let shuffle = IndexShuffle::new(n, 99);
            let mut rng = Xoshiro256StarStar::new(n);
            let sample: HashSet<u64> = (0..1000).chain(n - 1000..n).chain((0..2000).map(|_| rng.below(n))).collect();
            let images: HashSet<u64> = sample.iter().map(|&i| shuffle.apply(i)).collect();
            assert_eq!(images.len(), sample.len(), "n={n}: collision");
            assert!(images.iter().all(|&v| v < n));
            assert!(sample.iter().take(100).all(|&i| shuffle.apply(i) == IndexShuffle::new(n, 99).apply(i)));
            // Not the identity and not a shift: few fixed points, images spread over the range.
            assert!(sample.iter().filter(|&&i| shuffle.apply(i) == i).count() < 3);
            let low = images.iter().filter(|&&v| v < n / 2).count();
            assert!((1400..2600).contains(&low), "n={n}: {low} of ~4000 images in the low half");
        }
    }

    #[test]
    fn trillion_row_plans_partition_and_resume_without_materialising() {
        const N: u64 = 1_000_000_000_000;
        let fragments = N.div_ceil(1 << 30);
        assert_eq!(fragments, 932);
        for shuffle in MODES.into_iter().chain([ShuffleMode::Block { window_fragments: 8 }]) {
            for drop_last in [false, true] {
                // Global batch 7000 does not divide N: the last global batch is padded (or dropped).
                let before = PlanConfig {
                    rows: N,
                    fragments,
                    dataset_id: 7,
                    seed: 42,
                    shuffle,
                    batch_size: 1000,
                    world_size: 7,
                    rank: 0,
                    drop_last,
                };
                let ps = plans(&before, 2, None);
                let count = ps[0].batches_per_rank();
                assert!(ps.iter().all(|p| p.batches_per_rank() == count && p.rows() == N));
                assert_eq!(count as u64, if drop_last { N / 7000 } else { N.div_ceil(7000) });
                assert!(ps.iter().all(|p| p.heap_bytes() == 0), "{}", ps[0].heap_bytes());
                let global_batch = |ps: &[Plan], k: usize| {
                    let (mut out, mut b) = (Vec::new(), Vec::new());
                    for p in ps {
                        assert!(p.batch_into(k, &mut b));
                        out.extend_from_slice(&b);
                    }
                    out
                };
                let sampled = [0, 1, 2, count / 3, count / 2, count - 2, count - 1];
                let mut seen = HashSet::new();
                for &k in &sampled {
                    let rows = global_batch(&ps, k);
                    assert_eq!(rows.len(), 7000);
                    for (j, &row) in rows.iter().enumerate() {
                        let position = k as u64 * 7000 + j as u64;
                        assert_eq!(ps[3].row_at(position), Some(row));
                        assert!(row < N);
                        if position < N {
                            assert!(seen.insert(row), "{shuffle:?}: row {row} twice");
                        } else {
                            assert_eq!(Some(row), ps[0].row_at(position - N), "padding repeats G");
                        }
                    }
                }
                if shuffle == ShuffleMode::None {
                    assert_eq!(
                        global_batch(&ps, count / 2)[..3],
                        [count as u64 / 2 * 7000, count as u64 / 2 * 7000 + 1, count as u64 / 2 * 7000 + 2]
                    );
                }
                // Resume half-way on 14 ranks of 500 rows: the same global batches follow.
                let at = count / 2;
                let state = ps[5].checkpoint(at, 1).unwrap();
                let after = PlanConfig { batch_size: 500, world_size: 14, ..before.clone() };
                let resumed = plans(&after, 2, Some(&state));
                assert!(resumed.iter().all(|p| p.batches_per_rank() == count - at));
                for j in [0, 1, count - at - 1] {
                    assert_eq!(global_batch(&resumed, j), global_batch(&ps, at + j), "{shuffle:?} at {j}");
                }
            }
        }
    }

    #[test]
    fn plans_hold_no_memory_per_row() {
        for shuffle in MODES {
            let c = PlanConfig { rows: 10 << 40, fragments: 10, ..config(0, shuffle, 4, 2, false) };
            let plan = Plan::new(c, 0).unwrap();
            assert_eq!(plan.rows(), 10 << 40);
            assert_eq!(plan.heap_bytes(), 0);
        }
    }

    /// Quality figures of an order: (adjacent pairs kept, mean and max displacement,
    /// distinct fragments per batch of 64 as a share of 64).
    #[allow(clippy::cast_precision_loss)]
    fn figures(order: &[u64], fragment_len: u64) -> (f64, f64, f64, f64) {
        let d = displacement_stats(order);
        let batches = order.chunks(64);
        let n = batches.len() as f64;
        let fragments: usize = batches.map(|b| b.iter().map(|&r| r / fragment_len).collect::<HashSet<_>>().len()).sum();
        (adjacent_pair_retention(order), d.mean_normalized, d.max_normalized, fragments as f64 / n / 64.0)
    }

    /// The Feistel order against an exact Fisher–Yates permutation on the same figures
    /// (printed with `--nocapture`): they must agree within sampling noise.
    #[test]
    #[allow(clippy::cast_precision_loss)]
    fn feistel_order_matches_fisher_yates_quality() {
        for (n, fragment_len) in [(10_000u64, 100), (100_000, 1000), (1_000_003, 1 << 14)] {
            let c = PlanConfig { rows: n, fragments: 1, ..config(0, ShuffleMode::Global, 64, 1, false) };
            let feistel = Plan::new(c, 0).unwrap().collect_global_order();
            let mut fisher_yates: Vec<u64> = (0..n).collect();
            Xoshiro256StarStar::new(seed_for(7, 42, 0, STREAM_GLOBAL)).shuffle(&mut fisher_yates);
            let (a, b) = (figures(&feistel, fragment_len), figures(&fisher_yates, fragment_len));
            println!(
                "n={n}: adjacent kept {:.2e} / {:.2e}, mean displacement {:.4} / {:.4}, max {:.4} / {:.4}, \
                 fragments per batch {:.4} / {:.4} (Feistel / Fisher-Yates)",
                a.0, b.0, a.1, b.1, a.2, b.2, a.3, b.3
            );
            assert!(a.0 < 10.0 / n as f64 && (a.1 - b.1).abs() < 0.01 && a.2 > 0.9 && (a.3 - b.3).abs() < 0.01);
        }
    }

    #[test]
    fn v1_states_are_refused() {
        let c = config(100, ShuffleMode::Global, 4, 2, false);
        let v1 = LoaderState {
            settings_digest: tagged_digest(b"tessera.sampler.order.v1", &c),
            ..Plan::new(c.clone(), 3).unwrap().checkpoint(2, 1).unwrap()
        };
        assert!(matches!(Plan::resume(c, 3, &v1), Err(SamplerError::StateMismatch { field: "settings_digest", .. })));
    }

    #[test]
    fn index_shuffle_is_pinned() {
        let first = |n, key| -> Vec<u64> { (0..10).map(|i| IndexShuffle::new(n, key).apply(i)).collect() };
        assert_eq!(first(10, 0), GOLDEN_SHUFFLE_10);
        assert_eq!(first((1 << 40) + 7, 42), GOLDEN_SHUFFLE_2_40);
    }
}
