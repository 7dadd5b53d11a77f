//! What the core hands an adapter: the filled host buffers of one batch with their layout.

use std::sync::Arc;

use crate::assemble::Elem;
use crate::buffer::HostBuffer;
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
/// | column | values | side data |
/// |---|---|---|
/// | fixed shape `[d1, …]` | `[B, d1, …]` | `valid [B]` when nullable |
/// | ragged, padded | `[B, max d1, …]`, zero padded | `lengths` `[B]` or `[B, k]`; `offsets [B+1]` on request |
/// | ragged, packed | `[Σ d1, d2, …]` (only the first dim ragged) or `[Σ elements]` | `offsets [B+1]` along the values' first dim, `shapes [B, ndim]`, `lengths` |
/// | `utf8` / `bytes` | `u8 [B, max len]` zero padded, or `u8 [Σ len]` packed | `lengths [B]` (and `offsets`, `shapes` packed) |
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
    /// Ragged sizes, row-major `[B, ragged_dims]` (`None` for fixed shapes).
    pub lengths: Option<Vec<i64>>,
    /// Ragged sizes per row (the width of `lengths`).
    pub ragged_dims: usize,
    /// `[B + 1]`: where each row starts along the values' first dim when packed; when padded
    /// (on request), the element offsets the rows would have packed back to back.
    pub offsets: Option<Vec<i64>>,
    /// Packed columns: every row's full dims, row-major `[B, ndim]`.
    pub shapes: Option<Vec<i64>>,
    /// Validity per row (nullable columns).
    pub valid: Option<Vec<bool>>,
    /// A `utf8`/`bytes` column.
    pub text: bool,
    /// The rows are packed back to back ([`RaggedLayout::Packed`](crate::RaggedLayout)).
    pub packed: bool,
}

/// A filled batch: per column the layout of its values in a pooled [`HostBuffer`] and its
/// side data. The buffers go back to the pool when the batch (and every clone of its
/// lease) is dropped, and are refilled only once they are exclusive again.
#[derive(Debug)]
pub struct HostBatch {
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
    pub(crate) lease: Option<Arc<Lease>>,
}

impl HostBatch {
    /// The claim on the buffers: clone it into whatever keeps views of them alive.
    #[must_use]
    pub fn lease(&self) -> Option<&Arc<Lease>> {
        self.lease.as_ref()
    }

    /// Runs `f` on column `c`'s buffer.
    pub fn with_buffer<R>(&self, c: usize, f: impl FnOnce(&dyn HostBuffer) -> R) -> Option<R> {
        self.lease.as_ref()?.with_buffer(c, f)
    }
}
