//! Batch layout: how each projected column becomes tensors, where each row's bytes go in
//! the batch buffer, padding or packing of ragged rows, lengths/offsets/shapes/validity.
//!
//! | column | values tensor | extra tensors |
//! |---|---|---|
//! | fixed shape `[d1, …]` | `[B, d1, …]` | `valid: bool [B]` when nullable |
//! | ragged, padded | `[B, max d1, …]`, zero padded | `lengths: i64 [B]` (one ragged dim) or `[B, k]`; `offsets: i64 [B+1]` on request |
//! | ragged, packed, only the first dim ragged | `[Σ d1, d2, …]` | `offsets [B+1]` along dim 0, `shapes [B, ndim]`, `lengths` |
//! | ragged, packed, other dims ragged | `[Σ elements]` | `offsets [B+1]` in elements, `shapes [B, ndim]`, `lengths` |
//! | `utf8` / `bytes` | as a ragged `u8 [len?]` column: `u8 [B, max len]` padded, or `u8 [Σ len]` packed | `lengths: i64 [B]` |
//!
//! Padded rows are written once: each run of a row's values, then only the padding after it
//! is zeroed. Packed rows are the stored bytes back to back, so a row read from storage lands
//! in its place with no further copy; the buffer is sized from the batch's actual bytes.
//!
//! Element types map one to one onto [`Elem`]s, the types every tensor framework has,
//! except the unsigned types torch lacks: `u16` widens to `i32`, `u32` to `i64`, and `u64`
//! converts to `i64` (a value above `i64::MAX` is an error rather than a silent wrap, unless
//! the bits are asked for).

use tessera::{Column, DType, Dim};

use crate::batch::{HostColumn, HostLayout};
use crate::config::{RaggedLayout, RaggedOptions};
use crate::error::{LoaderError, Result, from_format};

#[cfg(target_endian = "big")]
compile_error!("tessera-loader copies little-endian stored bytes into buffers as is; big-endian hosts are unsupported");

/// The element type of a batch's values buffer: what an adapter makes its tensor of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    /// `bool`, one byte of 0 or 1.
    Bool,
    /// `u8` (also the bytes of `utf8`/`bytes` columns).
    U8,
    /// `i8`.
    I8,
    /// `i16`.
    I16,
    /// `u16`.
    U16,
    /// `i32` (also `u16` widened for an adapter that asks, [`Unsigned::Widened`]).
    I32,
    /// `u32`.
    U32,
    /// `i64` (also `u32` and `u64` widened for an adapter that asks).
    I64,
    /// `u64`.
    U64,
    /// IEEE half.
    F16,
    /// bfloat16.
    Bf16,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
}

impl Elem {
    /// Bytes per element.
    #[must_use]
    pub fn size(self) -> usize {
        match self {
            Self::Bool | Self::U8 | Self::I8 => 1,
            Self::I16 | Self::U16 | Self::F16 | Self::Bf16 => 2,
            Self::I32 | Self::U32 | Self::F32 => 4,
            Self::I64 | Self::U64 | Self::F64 => 8,
        }
    }
}

/// How the core hands out stored unsigned integers wider than a byte: the choice of the
/// framework adapter ([`BufferAllocator::unsigned`](crate::BufferAllocator::unsigned)), made
/// once when the loader opens. Widening happens while rows are copied into the batch, so it
/// costs no second pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unsigned {
    /// As stored: `u16`, `u32`, `u64` (numpy and every framework with unsigned types).
    #[default]
    Stored,
    /// Widened to a signed type that holds every value, for frameworks without unsigned
    /// arithmetic (libtorch through tch): `u16` → `i32`, `u32` → `i64`; `u64` → `i64`,
    /// where a value above `i64::MAX` is [`LoaderError::Unrepresentable`].
    Widened,
    /// As [`Unsigned::Widened`], but `u64` keeps its bits: a value above `i64::MAX` reads as
    /// negative (hash ids, for example, that are only compared).
    WidenedBits,
}

/// How stored elements become tensor elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Conversion {
    /// Same bytes.
    Copy,
    /// `u16` → `i32`.
    U16ToI32,
    /// `u32` → `i64`.
    U32ToI64,
    /// `u64` → `i64`, refusing values above `i64::MAX`.
    U64ToI64,
    /// `u64` → `i64` bits as they are (values above `i64::MAX` read as negative).
    U64BitsToI64,
}

/// How one projected column is laid out in batches.
#[derive(Clone, Debug)]
pub(crate) struct ColumnLayout {
    pub(crate) name: String,
    pub(crate) column: Column,
    pub(crate) kind: Elem,
    pub(crate) conv: Conversion,
    pub(crate) in_item: usize,
    pub(crate) out_item: usize,
    /// Per-row dims; `utf8`/`bytes` rows are `[Ragged]` bytes.
    pub(crate) dims: Vec<Dim>,
    /// Ragged sizes per row (the data file's shape block width).
    pub(crate) ragged: usize,
    pub(crate) nullable: bool,
    /// Row bytes when no dim is ragged.
    pub(crate) fixed_row_bytes: Option<u64>,
    /// Rows packed back to back instead of padded ([`RaggedLayout::Packed`]; ragged only).
    pub(crate) packed: bool,
}

impl ColumnLayout {
    pub(crate) fn new(column: &Column, unsigned: Unsigned) -> Result<Self> {
        let widened = unsigned != Unsigned::Stored;
        let (kind, conv) = match column.dtype {
            DType::Bool => (Elem::Bool, Conversion::Copy),
            DType::U8 | DType::Utf8 | DType::Bytes => (Elem::U8, Conversion::Copy),
            DType::I8 => (Elem::I8, Conversion::Copy),
            DType::I16 => (Elem::I16, Conversion::Copy),
            DType::I32 => (Elem::I32, Conversion::Copy),
            DType::I64 => (Elem::I64, Conversion::Copy),
            DType::F16 => (Elem::F16, Conversion::Copy),
            DType::Bf16 => (Elem::Bf16, Conversion::Copy),
            DType::F32 => (Elem::F32, Conversion::Copy),
            DType::F64 => (Elem::F64, Conversion::Copy),
            DType::U16 if widened => (Elem::I32, Conversion::U16ToI32),
            DType::U32 if widened => (Elem::I64, Conversion::U32ToI64),
            DType::U64 if unsigned == Unsigned::WidenedBits => (Elem::I64, Conversion::U64BitsToI64),
            DType::U64 if widened => (Elem::I64, Conversion::U64ToI64),
            DType::U16 => (Elem::U16, Conversion::Copy),
            DType::U32 => (Elem::U32, Conversion::Copy),
            DType::U64 => (Elem::U64, Conversion::Copy),
        };
        let dims = if column.dtype.is_variable() { vec![Dim::Ragged] } else { column.shape.clone() };
        let ragged = column.ragged_dims();
        if dims.iter().filter(|d| matches!(d, Dim::Ragged)).count() != ragged {
            return Err(LoaderError::config(format!("column {:?}: inconsistent ragged dims", column.name)));
        }
        Ok(Self {
            name: column.name.clone(),
            column: column.clone(),
            kind,
            conv,
            in_item: column.dtype.item_size(),
            out_item: kind.size(),
            dims,
            ragged,
            nullable: column.nullable,
            fixed_row_bytes: column.fixed_row_bytes(),
            packed: false,
        })
    }

    /// True when the packed values keep the row dims after the first (`[Σ d1, d2, …]`):
    /// exactly one ragged dim, and it is the first.
    pub(crate) fn leading_ragged(&self) -> bool {
        self.ragged == 1 && matches!(self.dims.first(), Some(Dim::Ragged))
    }

    /// True for `utf8`/`bytes` columns.
    pub(crate) fn is_text(&self) -> bool {
        self.column.dtype.is_variable()
    }

    /// A row's dims given its ragged sizes.
    pub(crate) fn row_dims(&self, sizes: &[u64]) -> Vec<u64> {
        let mut it = sizes.iter();
        self.dims
            .iter()
            .map(|d| match d {
                Dim::Fixed(x) => *x,
                Dim::Ragged => it.next().copied().unwrap_or(0),
            })
            .collect()
    }

    /// Stored bytes of a row given its ragged sizes (`None` on overflow).
    pub(crate) fn in_row_bytes(&self, sizes: &[u64]) -> Option<u64> {
        if let Some(b) = self.fixed_row_bytes {
            return Some(b);
        }
        // The format's rule (the exact product, zero when any dim is zero), from the reference.
        tessera::column::row_bytes(self.column.dtype, &self.column.shape, sizes)
    }
}

/// Sets each ragged column's layout from the options.
///
/// # Errors
/// [`LoaderError::Config`] when a per-column layout names a column that is not projected or
/// has no ragged dim.
pub(crate) fn apply_ragged(columns: &mut [ColumnLayout], opts: &RaggedOptions) -> Result<()> {
    for (name, _) in &opts.columns {
        match columns.iter().find(|c| &c.name == name) {
            None => return Err(LoaderError::config(format!("ragged layout for {name:?}: no such projected column"))),
            Some(c) if c.ragged == 0 => {
                return Err(LoaderError::config(format!("ragged layout for {name:?}: the column has a fixed shape")));
            }
            Some(_) => {}
        }
    }
    for c in columns {
        c.packed = c.ragged > 0 && opts.layout_of(&c.name) == RaggedLayout::Packed;
    }
    Ok(())
}

/// Where a batch's rows go in one column's buffer.
#[derive(Clone, Debug)]
pub(crate) struct ColumnPlan {
    /// Padded per-row dims (`[d1, …]`); the padded tensor is `[B, d1, …]`.
    pub(crate) out_dims: Vec<u64>,
    /// Output bytes per row slot (padded layout).
    pub(crate) slot_bytes: usize,
    /// Ragged sizes of every row, `B * ragged`.
    pub(crate) sizes: Vec<u64>,
    /// Whether each row may be written as one contiguous run at the start of its slot.
    pub(crate) prefix: bool,
    /// Packed layout: the byte offset of each row in the buffer, `B + 1` values.
    pub(crate) packed: Option<Vec<usize>>,
}

impl ColumnPlan {
    /// Plans a column for rows with the given ragged sizes (`rows * layout.ragged` values).
    ///
    /// # Errors
    /// [`LoaderError::Config`] when the batch's bytes overflow.
    pub(crate) fn new(layout: &ColumnLayout, rows: usize, sizes: Vec<u64>) -> Result<Self> {
        let too_big = || LoaderError::config(format!("column {:?}: batch buffer size overflows", layout.name));
        let mut out_dims: Vec<u64> = layout.row_dims(&[]);
        let mut ragged_pos = Vec::new();
        for (i, d) in layout.dims.iter().enumerate() {
            if matches!(d, Dim::Ragged) {
                ragged_pos.push(i);
                out_dims[i] = 0;
            }
        }
        if layout.packed {
            let mut starts = Vec::with_capacity(rows + 1);
            let mut at = 0usize;
            starts.push(0);
            for j in 0..rows {
                let row = sizes.get(j * layout.ragged..(j + 1) * layout.ragged).unwrap_or(&[]);
                let elems = layout.row_dims(row).iter().try_fold(1u64, |a, &d| a.checked_mul(d)).ok_or_else(too_big)?;
                let bytes = elems.checked_mul(layout.out_item as u64).ok_or_else(too_big)?;
                at = usize::try_from(bytes).ok().and_then(|b| at.checked_add(b)).ok_or_else(too_big)?;
                starts.push(at);
            }
            return Ok(Self { out_dims, slot_bytes: 0, sizes, prefix: false, packed: Some(starts) });
        }
        if layout.ragged > 0 {
            for row in sizes.chunks_exact(layout.ragged).take(rows) {
                for (k, &i) in ragged_pos.iter().enumerate() {
                    out_dims[i] = out_dims[i].max(row[k]);
                }
            }
        }
        let elems = out_dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).ok_or_else(too_big)?;
        let slot = elems.checked_mul(layout.out_item as u64).ok_or_else(too_big)?;
        let slot_bytes = usize::try_from(slot).map_err(|_| too_big())?;
        slot_bytes.checked_mul(rows).ok_or_else(too_big)?;
        // Rows fill a prefix of their slot when only the first dim can be shorter than the
        // padded one and no element conversion is needed.
        let prefix = layout.conv == Conversion::Copy && ragged_pos.iter().all(|&i| i == 0);
        Ok(Self { out_dims, slot_bytes, sizes, prefix, packed: None })
    }

    /// Bytes of the whole column buffer for `rows` rows: the padded slots, or the packed
    /// rows' actual bytes.
    pub(crate) fn buffer_bytes(&self, rows: usize) -> usize {
        match &self.packed {
            Some(starts) => starts.last().copied().unwrap_or(0),
            None => self.slot_bytes * rows,
        }
    }

    /// The byte range of the buffer row `j`'s output goes to: its packed place, or its
    /// whole padded slot.
    pub(crate) fn row_place(&self, j: usize) -> Option<std::ops::Range<usize>> {
        match &self.packed {
            Some(starts) => Some(*starts.get(j)?..*starts.get(j + 1)?),
            None => Some(j * self.slot_bytes..(j + 1) * self.slot_bytes),
        }
    }

    /// Ragged sizes of row `j`.
    pub(crate) fn row_sizes<'a>(&'a self, layout: &ColumnLayout, j: usize) -> &'a [u64] {
        self.sizes.get(j * layout.ragged..(j + 1) * layout.ragged).unwrap_or(&[])
    }

    /// When row `j`'s stored bytes can be written verbatim, the byte range of the column
    /// buffer they go to (a padded slot's rest is zeroed with [`ColumnPlan::pad`]).
    pub(crate) fn direct_range(&self, layout: &ColumnLayout, j: usize) -> Option<std::ops::Range<usize>> {
        if self.packed.is_some() {
            return if layout.conv == Conversion::Copy { self.row_place(j) } else { None };
        }
        if !self.prefix {
            return None;
        }
        let len = usize::try_from(layout.in_row_bytes(self.row_sizes(layout, j))?).ok()?;
        let start = j * self.slot_bytes;
        (len <= self.slot_bytes).then_some(start..start + len)
    }

    /// Zeroes the padding after a verbatim row written with [`ColumnPlan::direct_range`]
    /// (nothing to do for packed rows).
    pub(crate) fn pad(&self, buf: &mut [u8], j: usize, written: usize) {
        if self.packed.is_some() {
            return;
        }
        let start = j * self.slot_bytes;
        if let Some(tail) = buf.get_mut(start + written..start + self.slot_bytes) {
            tail.fill(0);
        }
    }

    /// Writes row `j` from its stored bytes `src` into its place in `buf`: converts elements
    /// and, when padded, places each innermost run at its padded position and zeroes only
    /// the padding. Each output byte is written once.
    ///
    /// # Errors
    /// [`LoaderError::Corrupt`] when `src` does not match the row's shape or breaks an
    /// element rule; [`LoaderError::Unrepresentable`] for a `u64` above `i64::MAX`.
    pub(crate) fn write_row(&self, layout: &ColumnLayout, buf: &mut [u8], j: usize, src: &[u8]) -> Result<()> {
        let what = || format!("column {:?}", layout.name);
        let dims = layout.row_dims(self.row_sizes(layout, j));
        let elems = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(usize::try_from(d).ok()?));
        if elems.and_then(|e| e.checked_mul(layout.in_item)) != Some(src.len()) {
            return Err(LoaderError::corrupt(what(), format!("row has {} bytes, its shape needs more", src.len())));
        }
        let elems = elems.unwrap_or(0);
        let place = self.row_place(j).and_then(|r| buf.get_mut(r));
        let slot = place
            .ok_or_else(|| LoaderError::WorkerPanicked(format!("{}: row slot outside the batch buffer", what())))?;
        check_elements(layout, src)?;
        let out_len = elems * layout.out_item;
        // Padded with an inner ragged dim. From the last dim where the row is smaller than the
        // slot (`split`) on, the row's values are contiguous runs of `prod(dims[split..])`
        // elements, each the start of a slot run of `prod(out_dims[split..])` elements: walk
        // the slot's runs in order; one inside the row takes the row's next run and zeroes
        // after it, any other is zero. (An image `[h, w, 3]` in a `[H, W, 3]` slot is `H` runs
        // of `W × 3` bytes, not `H × W` runs of 3.) Packed rows, rows of a ragged outer dim
        // only (`prefix`) and rows of the slot's shape are one contiguous run.
        let inner = !(self.packed.is_some() || self.prefix);
        let split = if inner { (0..dims.len()).rev().find(|&k| dims.get(k) != self.out_dims.get(k)) } else { None };
        let Some(split) = split else {
            let (row, tail) = slot
                .split_at_mut_checked(out_len)
                .ok_or_else(|| LoaderError::WorkerPanicked(format!("{}: row larger than its slot", what())))?;
            convert(layout, src, row)?;
            tail.fill(0);
            return Ok(());
        };
        let prod = |d: &[u64]| d.iter().map(|&x| x as usize).product::<usize>();
        let run_in = prod(&dims[split..]) * layout.in_item;
        let run_out = prod(&self.out_dims[split..]) * layout.out_item;
        let values_out = prod(&dims[split..]) * layout.out_item;
        let (outer_out, outer_row) = (&self.out_dims[..split], &dims[..split]);
        let mut index = vec![0u64; split];
        let mut next = 0usize;
        for dst in slot.chunks_exact_mut(run_out.max(1)) {
            if index.iter().zip(outer_row).all(|(i, d)| i < d) {
                let (values, gap) = dst.split_at_mut(values_out);
                convert(layout, &src[next..next + run_in], values)?;
                gap.fill(0);
                next += run_in;
            } else {
                dst.fill(0);
            }
            for k in (0..index.len()).rev() {
                index[k] += 1;
                if index[k] < outer_out[k] {
                    break;
                }
                index[k] = 0;
            }
        }
        Ok(())
    }

    /// Checks and converts a row written verbatim (by a direct read) in place.
    pub(crate) fn check_direct(layout: &ColumnLayout, buf: &[u8], range: std::ops::Range<usize>) -> Result<()> {
        match buf.get(range) {
            Some(row) => check_elements(layout, row),
            None => Err(LoaderError::WorkerPanicked("direct row outside the batch buffer".into())),
        }
    }

    /// The element count of row `j` along the values tensor's first dim when packed: its
    /// first dim for [`ColumnLayout::leading_ragged`] columns, else all its elements.
    fn packed_len(&self, layout: &ColumnLayout, j: usize) -> u64 {
        let dims = layout.row_dims(self.row_sizes(layout, j));
        if layout.leading_ragged() { dims.first().copied().unwrap_or(0) } else { dims.iter().product() }
    }

    /// The column as the batch describes it: values shape and side data (ragged sizes;
    /// offsets when packed or when `offsets` is asked for; per-row shapes when packed),
    /// with `valid` as given.
    pub(crate) fn host_column(
        &self,
        layout: &ColumnLayout,
        rows: usize,
        offsets: bool,
        valid: Option<Vec<bool>>,
    ) -> HostColumn {
        let layout_of = || {
            if layout.ragged == 0 {
                return HostLayout::Fixed;
            }
            let lengths = self.sizes.iter().map(|&s| s as i64).collect();
            let cumulative = |len: &dyn Fn(usize) -> u64| {
                let mut acc = 0i64;
                let mut v = Vec::with_capacity(rows + 1);
                v.push(0);
                for j in 0..rows {
                    acc += len(j) as i64;
                    v.push(acc);
                }
                v
            };
            let ragged_dims = layout.ragged;
            if self.packed.is_some() {
                HostLayout::Packed {
                    lengths,
                    ragged_dims,
                    offsets: cumulative(&|j| self.packed_len(layout, j)),
                    shapes: (0..rows)
                        .flat_map(|j| layout.row_dims(self.row_sizes(layout, j)))
                        .map(|d| d as i64)
                        .collect(),
                }
            } else {
                let offsets =
                    offsets.then(|| cumulative(&|j| layout.row_dims(self.row_sizes(layout, j)).iter().product()));
                HostLayout::Padded { lengths, ragged_dims, offsets }
            }
        };
        HostColumn {
            name: layout.name.clone(),
            elem: layout.kind,
            shape: self.tensor_shape(layout, rows),
            byte_len: self.buffer_bytes(rows),
            layout: layout_of(),
            valid,
            text: layout.is_text(),
        }
    }

    /// The values tensor's shape: `[B, …]` padded; packed `[Σ d1, d2, …]` or `[Σ elements]`.
    pub(crate) fn tensor_shape(&self, layout: &ColumnLayout, rows: usize) -> Vec<i64> {
        if self.packed.is_some() {
            let total: u64 = (0..rows).map(|j| self.packed_len(layout, j)).sum();
            let rest = if layout.leading_ragged() { &self.out_dims[1..] } else { &[][..] };
            return std::iter::once(total as i64).chain(rest.iter().map(|&d| d as i64)).collect();
        }
        std::iter::once(rows as i64).chain(self.out_dims.iter().map(|&d| d as i64)).collect()
    }
}

/// The element rules of the stored bytes of one row (bool 0/1, UTF-8), from the reference.
fn check_elements(layout: &ColumnLayout, row: &[u8]) -> Result<()> {
    let what = || format!("column {:?}", layout.name);
    tessera::datafile::check_row_elements(layout.column.dtype, row, &what).map_err(|e| from_format(&what(), e))
}

/// Converts little-endian stored elements into output elements (lengths already checked).
fn convert(layout: &ColumnLayout, src: &[u8], dst: &mut [u8]) -> Result<()> {
    match layout.conv {
        Conversion::Copy | Conversion::U64BitsToI64 => dst.copy_from_slice(src),
        Conversion::U16ToI32 => {
            for (s, d) in src.chunks_exact(2).zip(dst.chunks_exact_mut(4)) {
                d.copy_from_slice(&i32::from(u16::from_le_bytes([s[0], s[1]])).to_le_bytes());
            }
        }
        Conversion::U32ToI64 => {
            for (s, d) in src.chunks_exact(4).zip(dst.chunks_exact_mut(8)) {
                d.copy_from_slice(&i64::from(u32::from_le_bytes([s[0], s[1], s[2], s[3]])).to_le_bytes());
            }
        }
        Conversion::U64ToI64 => {
            for (s, d) in src.chunks_exact(8).zip(dst.chunks_exact_mut(8)) {
                let mut b = [0u8; 8];
                b.copy_from_slice(s);
                let v = i64::try_from(u64::from_le_bytes(b)).map_err(|_| LoaderError::Unrepresentable {
                    what: format!("column {:?}", layout.name),
                    reason: "a u64 value above i64::MAX, which the adapter widens to i64 (Unsigned::WidenedBits keeps \
                             the bits)"
                        .into(),
                })?;
                d.copy_from_slice(&v.to_le_bytes());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(dtype: DType, shape: &[Dim]) -> ColumnLayout {
        ColumnLayout::new(&Column::new("c", dtype, shape), Unsigned::Widened).unwrap()
    }

    #[test]
    fn ragged_rows_are_padded_and_converted() {
        // [Ragged, 2] u16 → i32; rows of 1 and 3 lines.
        let l = layout(DType::U16, &[Dim::Ragged, Dim::Fixed(2)]);
        let p = ColumnPlan::new(&l, 2, vec![1, 3]).unwrap();
        assert_eq!((p.out_dims.clone(), p.slot_bytes, p.prefix), (vec![3, 2], 24, false));
        let mut buf = vec![0xAAu8; 48];
        let row0: Vec<u8> = [1u16, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
        let row1: Vec<u8> = [3u16, 4, 5, 6, 7, 65535].iter().flat_map(|v| v.to_le_bytes()).collect();
        p.write_row(&l, &mut buf, 0, &row0).unwrap();
        p.write_row(&l, &mut buf, 1, &row1).unwrap();
        let vals: Vec<i32> = buf.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        assert_eq!(vals, [1, 2, 0, 0, 0, 0, 3, 4, 5, 6, 7, 65535]);
        assert!(p.write_row(&l, &mut buf, 0, &row1).is_err(), "length mismatch");
    }

    #[test]
    fn inner_ragged_dims_use_strided_runs() {
        let l = layout(DType::U8, &[Dim::Fixed(2), Dim::Ragged]);
        let p = ColumnPlan::new(&l, 2, vec![1, 2]).unwrap();
        assert_eq!((p.out_dims.clone(), p.prefix), (vec![2, 2], false));
        let mut buf = vec![9u8; 8];
        p.write_row(&l, &mut buf, 0, &[1, 2]).unwrap();
        p.write_row(&l, &mut buf, 1, &[3, 4, 5, 6]).unwrap();
        assert_eq!(buf, [1, 0, 2, 0, 3, 4, 5, 6]);
    }

    #[test]
    fn direct_ranges_and_checks() {
        let l = layout(DType::Utf8, &[]);
        let p = ColumnPlan::new(&l, 2, vec![2, 0]).unwrap();
        assert_eq!(p.direct_range(&l, 0), Some(0..2));
        assert_eq!(p.direct_range(&l, 1), Some(2..2));
        let mut buf = vec![1u8; 4];
        assert!(p.write_row(&l, &mut buf, 0, &[0xff, 0xfe]).is_err(), "not UTF-8");
        let b = layout(DType::Bool, &[Dim::Fixed(2)]);
        let p = ColumnPlan::new(&b, 1, vec![]).unwrap();
        assert!(p.write_row(&b, &mut [0u8; 2], 0, &[1, 2]).is_err());
        let u = layout(DType::U64, &[]);
        let p = ColumnPlan::new(&u, 1, vec![]).unwrap();
        assert!(p.write_row(&u, &mut [0u8; 8], 0, &u64::MAX.to_le_bytes()).is_err());
        let col = ColumnPlan::new(&l, 2, vec![2, 5]).unwrap().host_column(&l, 2, true, None);
        assert_eq!(
            col.layout,
            HostLayout::Padded { lengths: vec![2, 5], ragged_dims: 1, offsets: Some(vec![0, 2, 7]) }
        );
        let fixed = ColumnPlan::new(&u, 2, vec![]).unwrap().host_column(&u, 2, true, None);
        assert_eq!(fixed.layout, HostLayout::Fixed, "fixed shapes have no sizes, even with offsets asked for");
    }

    fn packed(dtype: DType, shape: &[Dim]) -> ColumnLayout {
        let mut l = layout(dtype, shape);
        apply_ragged(std::slice::from_mut(&mut l), &RaggedOptions::packed()).unwrap();
        l
    }

    #[test]
    fn inner_ragged_padding_is_written_once_over_stale_bytes() {
        // [Ragged, Ragged] u8 in a buffer full of stale bytes: every padded byte is zeroed.
        let l = layout(DType::U8, &[Dim::Ragged, Dim::Ragged]);
        let p = ColumnPlan::new(&l, 2, vec![1, 2, 2, 1]).unwrap();
        assert_eq!(p.out_dims, [2, 2]);
        let mut buf = vec![0xEEu8; 8];
        p.write_row(&l, &mut buf, 0, &[1, 2]).unwrap();
        p.write_row(&l, &mut buf, 1, &[3, 4]).unwrap();
        assert_eq!(buf, [1, 2, 0, 0, 3, 0, 4, 0]);
        // An empty row is all padding.
        let p = ColumnPlan::new(&l, 1, vec![0, 3]).unwrap();
        let mut buf = vec![0xEEu8; 0];
        p.write_row(&l, &mut buf, 0, &[]).unwrap();
        assert_eq!(p.tensor_shape(&l, 1), [1, 0, 3]);
    }

    #[test]
    fn packed_rows_sit_back_to_back() {
        // Images [H?, W?, 3]: flat values, offsets in elements, shapes per row.
        let l = packed(DType::U8, &[Dim::Ragged, Dim::Ragged, Dim::Fixed(3)]);
        let p = ColumnPlan::new(&l, 3, vec![1, 2, 0, 4, 2, 1]).unwrap();
        assert_eq!(p.buffer_bytes(3), 6 + 6);
        assert_eq!(p.direct_range(&l, 1), Some(6..6));
        assert_eq!(p.direct_range(&l, 2), Some(6..12));
        let mut buf = vec![0xEEu8; 16];
        p.write_row(&l, &mut buf, 0, &[1, 2, 3, 4, 5, 6]).unwrap();
        p.write_row(&l, &mut buf, 1, &[]).unwrap();
        p.write_row(&l, &mut buf, 2, &[7, 8, 9, 10, 11, 12]).unwrap();
        assert_eq!(&buf[..12], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(buf[12..], [0xEE; 4], "nothing past the batch's bytes is written");
        p.pad(&mut buf, 0, 0);
        assert_eq!(buf[0], 1, "packed rows have no padding");
        assert!(p.write_row(&l, &mut buf, 0, &[1, 2, 3]).is_err(), "length mismatch");
        let col = p.host_column(&l, 3, false, None);
        assert_eq!((col.shape.clone(), col.byte_len), (vec![12], 12));
        assert_eq!(
            col.layout,
            HostLayout::Packed {
                lengths: vec![1, 2, 0, 4, 2, 1],
                ragged_dims: 2,
                offsets: vec![0, 6, 6, 12],
                shapes: vec![1, 2, 3, 0, 4, 3, 2, 1, 3],
            }
        );
    }

    #[test]
    fn packed_leading_ragged_keeps_inner_dims_and_converts() {
        // Boxes [N?, 2] u16 → i32: values [Σ N, 2], offsets along N, no direct landing.
        let l = packed(DType::U16, &[Dim::Ragged, Dim::Fixed(2)]);
        let p = ColumnPlan::new(&l, 2, vec![2, 1]).unwrap();
        assert_eq!(p.direct_range(&l, 0), None, "converted rows go through write_row");
        let mut buf = vec![0u8; p.buffer_bytes(2)];
        let row = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        p.write_row(&l, &mut buf, 1, &row(&[5, 65535])).unwrap();
        p.write_row(&l, &mut buf, 0, &row(&[1, 2, 3, 4])).unwrap();
        let vals: Vec<i32> = buf.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        assert_eq!(vals, [1, 2, 3, 4, 5, 65535]);
        let col = p.host_column(&l, 2, false, None);
        assert_eq!(col.shape, [3, 2]);
        assert_eq!(col.layout.offsets(), Some(&[0, 2, 3][..]));
        assert_eq!(col.layout.shapes(), Some(&[2, 2, 1, 2][..]));
        // Text: bytes back to back.
        let t = packed(DType::Utf8, &[]);
        let p = ColumnPlan::new(&t, 3, vec![2, 0, 3]).unwrap();
        assert_eq!(p.host_column(&t, 3, false, None).shape, [5]);
        assert!(p.write_row(&t, &mut [0u8; 5], 0, &[0xff, 0xfe]).is_err(), "not UTF-8");
    }

    #[test]
    fn ragged_layouts_are_chosen_per_column() {
        let mut cols = vec![
            layout(DType::U8, &[Dim::Ragged]),
            ColumnLayout::new(&Column::new("f", DType::U8, &[Dim::Fixed(2)]), Unsigned::Widened).unwrap(),
        ];
        cols[0].name = "r".into();
        let opts = RaggedOptions { columns: vec![("r".into(), RaggedLayout::Packed)], ..RaggedOptions::default() };
        apply_ragged(&mut cols, &opts).unwrap();
        assert_eq!((cols[0].packed, cols[1].packed), (true, false));
        apply_ragged(&mut cols, &RaggedOptions::packed()).unwrap();
        assert!(!cols[1].packed, "fixed shapes are never packed");
        for bad in ["f", "missing"] {
            let opts = RaggedOptions { columns: vec![(bad.into(), RaggedLayout::Packed)], ..RaggedOptions::default() };
            assert!(matches!(apply_ragged(&mut cols, &opts), Err(LoaderError::Config(_))), "{bad}");
        }
        // Hostile sizes overflow instead of wrapping.
        let l = packed(DType::U64, &[Dim::Ragged, Dim::Ragged]);
        assert!(ColumnPlan::new(&l, 1, vec![u64::MAX, 2]).is_err());
    }
}
