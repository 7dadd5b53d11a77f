//! What the core hands an adapter: the filled host buffers of one batch with their layout.

use std::sync::Arc;

use crate::assemble::Elem;
use crate::buffer::{AlignedBuffer, HostBuffer};
use crate::pool::Lease;

/// A sample the loader replaced because its stored bytes were corrupt
/// ([`LoaderConfig::skip_bad_samples`](crate::LoaderConfig::skip_bad_samples)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedSample {
    /// Epoch.
    pub epoch: u64,
    /// Batch index within this rank's epoch.
    pub batch: usize,
    /// Row slot within the batch.
    pub slot: usize,
    /// The global row that could not be read.
    pub row: u64,
    /// The global row delivered in its place (the next readable row of the epoch's order).
    pub replacement: u64,
    /// Why the row was skipped.
    pub error: String,
}

/// One column of a filled batch.
///
/// | column | values | [`HostLayout`] |
/// |---|---|---|
/// | fixed shape `[d1, …]` | `[B, d1, …]` | `Fixed` |
/// | ragged, padded | `[B, max d1, …]`, zero padded | `Padded`: `lengths` `[B]` or `[B, k]`; `offsets [B+1]` on request |
/// | ragged, packed | `[Σ d1, d2, …]` (only the first dim ragged) or `[Σ elements]` | `Packed`: `offsets [B+1]` along the values' first dim, `shapes [B, ndim]`, `lengths` |
/// | `utf8` / `bytes` | `u8 [B, max len]` zero padded, or `u8 [Σ len]` packed | `Padded` or `Packed` with one ragged dim |
///
/// Nullable columns of any layout also have `valid [B]`.
///
/// Packed values are the layout of torch's jagged nested tensors: with one leading ragged
/// dim, `torch.nested.nested_tensor_from_jagged(values, offsets)` is the batch.
#[derive(Clone, Debug)]
pub struct HostColumn {
    /// Column name.
    pub name: String,
    /// Element type of the values.
    pub elem: Elem,
    /// Shape of the values (`[B, …]`, or the packed shape); they are the first `byte_len`
    /// bytes of the buffer, row-major and contiguous.
    pub shape: Vec<i64>,
    /// Bytes of the values.
    pub byte_len: usize,
    /// How the rows sit in the values, with the side data of that layout.
    pub layout: HostLayout,
    /// Validity per row (nullable columns).
    pub valid: Option<Vec<bool>>,
    /// A `utf8`/`bytes` column: the values are the rows' bytes (`u8`, padded or packed, one
    /// ragged dim).
    pub text: bool,
}

/// How a column's rows sit in its values, and the side data each layout has. Only the valid
/// combinations exist: a fixed shape has no sizes, a packed column always has its offsets
/// and shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostLayout {
    /// Every row has the column's fixed shape: values `[B, d1, …]`.
    Fixed,
    /// Ragged rows zero padded to the batch's largest size of each ragged dim
    /// ([`RaggedLayout::Padded`](crate::RaggedLayout)).
    Padded {
        /// Ragged sizes, row-major `[B, ragged_dims]`.
        lengths: Vec<i64>,
        /// Ragged sizes per row (the width of `lengths`).
        ragged_dims: usize,
        /// On request ([`RaggedOptions::offsets`](crate::RaggedOptions)): `[B + 1]`, the
        /// element offsets the rows would have packed back to back.
        offsets: Option<Vec<i64>>,
    },
    /// Ragged rows back to back ([`RaggedLayout::Packed`](crate::RaggedLayout)).
    Packed {
        /// Ragged sizes, row-major `[B, ragged_dims]`.
        lengths: Vec<i64>,
        /// Ragged sizes per row (the width of `lengths`).
        ragged_dims: usize,
        /// `[B + 1]`: where each row starts along the values' first dim.
        offsets: Vec<i64>,
        /// Every row's full dims, row-major `[B, ndim]`.
        shapes: Vec<i64>,
    },
}

impl HostLayout {
    /// The ragged sizes (`None` for fixed shapes).
    #[must_use]
    pub fn lengths(&self) -> Option<&[i64]> {
        match self {
            Self::Fixed => None,
            Self::Padded { lengths, .. } | Self::Packed { lengths, .. } => Some(lengths),
        }
    }

    /// Ragged sizes per row (0 for fixed shapes).
    #[must_use]
    pub fn ragged_dims(&self) -> usize {
        match self {
            Self::Fixed => 0,
            Self::Padded { ragged_dims, .. } | Self::Packed { ragged_dims, .. } => *ragged_dims,
        }
    }

    /// The row offsets: always when packed, on request when padded.
    #[must_use]
    pub fn offsets(&self) -> Option<&[i64]> {
        match self {
            Self::Fixed => None,
            Self::Padded { offsets, .. } => offsets.as_deref(),
            Self::Packed { offsets, .. } => Some(offsets),
        }
    }

    /// Every row's dims (packed only).
    #[must_use]
    pub fn shapes(&self) -> Option<&[i64]> {
        match self {
            Self::Packed { shapes, .. } => Some(shapes),
            Self::Fixed | Self::Padded { .. } => None,
        }
    }
}

/// A filled batch: per column the layout of its values in a pooled [`HostBuffer`] and its
/// side data. The buffers go back to the pool when the batch (and every clone of its
/// lease) is dropped, and are refilled only once they are exclusive again.
///
/// `B` is the buffer type of the loader's allocator ([`crate::BufferAllocator::Buffer`]):
/// an adapter reads the buffers its own allocator made.
#[derive(Debug)]
pub struct HostBatch<B: HostBuffer = AlignedBuffer> {
    /// The columns, in projection order.
    pub columns: Vec<HostColumn>,
    /// The global (live) row of each sample, in its source's version (a mixture's rows are
    /// rows of the source in [`HostBatch::sources`]).
    pub rows: Vec<u64>,
    /// A mixture's source (index into [`Mixture::sources`](crate::Mixture)) of each sample;
    /// empty when the loader reads one dataset.
    pub sources: Vec<u32>,
    /// Epoch.
    pub epoch: u64,
    /// Index among this rank's batches of the epoch.
    pub index: usize,
    /// Position of the first sample in the epoch's padded global order.
    pub position: u64,
    /// Samples replaced in this batch.
    pub skipped: Vec<SkippedSample>,
    pub(crate) lease: Option<Arc<Lease<B>>>,
}

impl<B: HostBuffer> HostBatch<B> {
    /// The claim on the buffers: clone it into whatever keeps views of them alive.
    #[must_use]
    pub fn lease(&self) -> Option<&Arc<Lease<B>>> {
        self.lease.as_ref()
    }

    /// Runs `f` on column `c`'s buffer.
    pub fn with_buffer<R>(&self, c: usize, f: impl FnOnce(&B) -> R) -> Option<R> {
        self.lease.as_ref()?.with_buffer(c, f)
    }
}
