//! Batch layout: how each projected column becomes tensors, where each row's bytes go in
//! the batch buffer, padding of ragged rows, lengths/offsets/validity tensors.
//!
//! | column | values tensor | extra tensors |
//! |---|---|---|
//! | fixed shape `[d1, …]` | `[B, d1, …]` | `valid: bool [B]` when nullable |
//! | ragged dims | `[B, max d1, …]`, zero padded | `lengths: i64 [B]` (one ragged dim) or `[B, k]`; `offsets: i64 [B+1]` on request |
//! | `utf8` / `bytes` | `u8 [B, max len]`, zero padded | `lengths: i64 [B]` |
//!
//! Element types map one to one onto [`Elem`]s, the types every tensor framework has,
//! except the unsigned types torch lacks: `u16` widens to `i32`, `u32` to `i64`, and `u64`
//! converts to `i64` (a value above `i64::MAX` is an error rather than a silent wrap, unless
//! the bits are asked for).

use tessera::{Column, DType, Dim};

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
    /// `i32` (also widened `u16`).
    I32,
    /// `i64` (also widened `u32`, and `u64`).
    I64,
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
            Self::I16 | Self::F16 | Self::Bf16 => 2,
            Self::I32 | Self::F32 => 4,
            Self::I64 | Self::F64 => 8,
        }
    }
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
}

impl ColumnLayout {
    pub(crate) fn new(column: &Column, u64_bits: bool) -> Result<Self> {
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
            DType::U16 => (Elem::I32, Conversion::U16ToI32),
            DType::U32 => (Elem::I64, Conversion::U32ToI64),
            DType::U64 if u64_bits => (Elem::I64, Conversion::U64BitsToI64),
            DType::U64 => (Elem::I64, Conversion::U64ToI64),
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
        })
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

/// Where a batch's rows go in one column's buffer.
#[derive(Clone, Debug)]
pub(crate) struct ColumnPlan {
    /// Padded per-row dims (`[d1, …]`); the tensor is `[B, d1, …]`.
    pub(crate) out_dims: Vec<u64>,
    /// Output bytes per row slot.
    pub(crate) slot_bytes: usize,
    /// Ragged sizes of every row, `B * ragged`.
    pub(crate) sizes: Vec<u64>,
    /// Whether each row may be written as one contiguous run at the start of its slot.
    pub(crate) prefix: bool,
}

impl ColumnPlan {
    /// Plans a column for rows with the given ragged sizes (`rows * layout.ragged` values).
    pub(crate) fn new(layout: &ColumnLayout, rows: usize, sizes: Vec<u64>) -> Result<Self> {
        let too_big = || LoaderError::config(format!("column {:?}: batch slot size overflows", layout.name));
        let mut out_dims: Vec<u64> = layout.row_dims(&[]);
        let mut ragged_pos = Vec::new();
        for (i, d) in layout.dims.iter().enumerate() {
            if matches!(d, Dim::Ragged) {
                ragged_pos.push(i);
                out_dims[i] = 0;
            }
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
        Ok(Self { out_dims, slot_bytes, sizes, prefix })
    }

    /// Bytes of the whole column buffer for `rows` rows.
    pub(crate) fn buffer_bytes(&self, rows: usize) -> usize {
        self.slot_bytes * rows
    }

    /// Ragged sizes of row `j`.
    pub(crate) fn row_sizes<'a>(&'a self, layout: &ColumnLayout, j: usize) -> &'a [u64] {
        self.sizes.get(j * layout.ragged..(j + 1) * layout.ragged).unwrap_or(&[])
    }

    /// When row `j`'s stored bytes can be written verbatim, the byte range of the column
    /// buffer they go to (the rest of the slot is padding to zero with [`ColumnPlan::pad`]).
    pub(crate) fn direct_range(&self, layout: &ColumnLayout, j: usize) -> Option<std::ops::Range<usize>> {
        if !self.prefix {
            return None;
        }
        let len = usize::try_from(layout.in_row_bytes(self.row_sizes(layout, j))?).ok()?;
        let start = j * self.slot_bytes;
        (len <= self.slot_bytes).then_some(start..start + len)
    }

    /// Zeroes the padding after a verbatim row written with [`ColumnPlan::direct_range`].
    pub(crate) fn pad(&self, buf: &mut [u8], j: usize, written: usize) {
        let start = j * self.slot_bytes;
        if let Some(tail) = buf.get_mut(start + written..start + self.slot_bytes) {
            tail.fill(0);
        }
    }

    /// Writes row `j` from its stored bytes `src` into its slot of `buf`: converts elements,
    /// places each innermost run at its padded position, and zeroes the padding.
    pub(crate) fn write_row(&self, layout: &ColumnLayout, buf: &mut [u8], j: usize, src: &[u8]) -> Result<()> {
        let what = || format!("column {:?}", layout.name);
        let dims = layout.row_dims(self.row_sizes(layout, j));
        let elems: usize = dims.iter().map(|&d| d as usize).product();
        if elems * layout.in_item != src.len() {
            return Err(LoaderError::corrupt(what(), format!("row has {} bytes, its shape needs more", src.len())));
        }
        let slot_start = j * self.slot_bytes;
        let slot = buf
            .get_mut(slot_start..slot_start + self.slot_bytes)
            .ok_or_else(|| LoaderError::WorkerPanicked(format!("{}: row slot outside the batch buffer", what())))?;
        check_elements(layout, src)?;
        if self.prefix {
            let out_len = elems * layout.out_item;
            convert(layout, src, &mut slot[..out_len])?;
            slot[out_len..].fill(0);
            return Ok(());
        }
        slot.fill(0);
        let rank = dims.len();
        let inner = dims.last().copied().unwrap_or(1) as usize;
        if inner == 0 || elems == 0 {
            return Ok(());
        }
        // Strides of the padded slot, in elements.
        let mut stride = vec![1usize; rank];
        for i in (0..rank.saturating_sub(1)).rev() {
            stride[i] = stride[i + 1] * self.out_dims[i + 1] as usize;
        }
        let outer_dims = &dims[..rank.saturating_sub(1)];
        let mut index = vec![0u64; outer_dims.len()];
        for run in 0..elems / inner {
            let dst_elem: usize = index.iter().zip(&stride).map(|(&i, &s)| i as usize * s).sum();
            let src_at = run * inner * layout.in_item;
            let dst_at = dst_elem * layout.out_item;
            convert(
                layout,
                &src[src_at..src_at + inner * layout.in_item],
                &mut slot[dst_at..dst_at + inner * layout.out_item],
            )?;
            for k in (0..index.len()).rev() {
                index[k] += 1;
                if index[k] < outer_dims[k] {
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

    /// The side data of this column: ragged sizes per row (`[B]` or `[B, k]` row-major),
    /// element offsets of the rows packed back to back (`[B + 1]`, when asked for).
    pub(crate) fn side_data(
        &self,
        layout: &ColumnLayout,
        rows: usize,
        offsets: bool,
    ) -> (Option<Vec<i64>>, Option<Vec<i64>>) {
        if layout.ragged == 0 {
            return (None, None);
        }
        let lengths = self.sizes.iter().map(|&s| s as i64).collect();
        let offsets = offsets.then(|| {
            let mut acc = 0i64;
            let mut v = Vec::with_capacity(rows + 1);
            v.push(0);
            for j in 0..rows {
                let n: u64 = layout.row_dims(self.row_sizes(layout, j)).iter().product();
                acc += n as i64;
                v.push(acc);
            }
            v
        });
        (Some(lengths), offsets)
    }

    /// The values tensor's shape.
    pub(crate) fn tensor_shape(&self, rows: usize) -> Vec<i64> {
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
                    reason: "a u64 value above i64::MAX (set LoaderConfig::u64_as_i64_bits to keep the bits)".into(),
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
        ColumnLayout::new(&Column::new("c", dtype, shape), false).unwrap()
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
        let (lengths, offsets) = ColumnPlan::new(&l, 2, vec![2, 5]).unwrap().side_data(&l, 2, true);
        assert_eq!(lengths.unwrap(), [2, 5]);
        assert_eq!(offsets.unwrap(), [0, 2, 7]);
    }
}
