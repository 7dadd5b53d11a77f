//! Typed columnar buffers: what a writer appends and what a reader returns.
//!
//! A [`ColumnData`] holds the rows of one column back to back as little-endian bytes in C
//! order, with byte offsets per row, the ragged sizes per row and an optional validity mask.
//! It is the in-memory twin of a column chunk's pages (SPEC.md §"Data file").

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::schema::{Codec, Column, Dim};

/// Rows of one column as contiguous typed bytes.
///
/// Rows of an image column may also carry the file they were decoded from
/// ([`ColumnData::push_encoded`]): a writer stores that file as the row's image page when the
/// column's compression is `Encoded` `[CMP-06]`. Equality compares values only.
#[derive(Clone, Debug, Eq)]
pub struct ColumnData {
    dtype: DType,
    shape: Vec<Dim>,
    ragged: usize,
    values: Vec<u8>,
    offsets: Vec<u64>,
    sizes: Vec<u64>,
    validity: Option<Vec<bool>>,
    /// Per row, the image file the row was decoded from; empty when no row has one.
    encoded: Vec<Option<(Codec, Vec<u8>)>>,
}

impl PartialEq for ColumnData {
    fn eq(&self, other: &Self) -> bool {
        (self.dtype, &self.shape, &self.values, &self.offsets, &self.sizes, &self.validity)
            == (other.dtype, &other.shape, &other.values, &other.offsets, &other.sizes, &other.validity)
    }
}

impl ColumnData {
    /// An empty buffer for rows of `column`.
    #[must_use]
    pub fn for_column(column: &Column) -> Self {
        Self::empty(column.dtype, &column.shape, column.nullable)
    }

    /// An empty buffer for the given dtype and shape.
    #[must_use]
    pub fn empty(dtype: DType, shape: &[Dim], nullable: bool) -> Self {
        let ragged = shape.iter().filter(|d| matches!(d, Dim::Ragged)).count() + usize::from(dtype.is_variable());
        Self {
            dtype,
            shape: shape.to_vec(),
            ragged,
            values: Vec::new(),
            offsets: vec![0],
            sizes: Vec::new(),
            validity: nullable.then(Vec::new),
            encoded: Vec::new(),
        }
    }

    /// A fixed-shape column from a flat slice of elements, `values.len() / product(shape)` rows.
    ///
    /// # Errors
    /// `usage` if the shape has ragged dims or the slice is not a whole number of rows.
    pub fn from_fixed<T: Element>(shape: &[u64], values: &[T]) -> Result<Self> {
        let dims: Vec<Dim> = shape.iter().map(|&d| Dim::Fixed(d)).collect();
        let per_row =
            shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).ok_or_else(|| Error::usage("shape overflows"))?;
        let mut out = Self::empty(T::DTYPE, &dims, false);
        let mut bytes = Vec::with_capacity(std::mem::size_of_val(values));
        for v in values {
            v.put_le(&mut bytes);
        }
        let rows = (values.len() as u64)
            .checked_div(per_row)
            .ok_or_else(|| Error::usage("from_fixed cannot infer the row count of a zero-size shape; use push_row"))?;
        if rows * per_row != values.len() as u64 {
            return Err(Error::usage(format!("{} elements is not a whole number of rows of {per_row}", values.len())));
        }
        let row_bytes = per_row * T::DTYPE.item_size() as u64;
        out.values = bytes;
        out.offsets = (0..=rows).map(|r| r * row_bytes).collect();
        Ok(out)
    }

    /// A scalar column (rank 0) from one element per row.
    #[must_use]
    pub fn from_scalars<T: Element>(values: &[T]) -> Self {
        let mut out = Self::empty(T::DTYPE, &[], false);
        for v in values {
            v.put_le(&mut out.values);
        }
        let n = T::DTYPE.item_size() as u64;
        out.offsets = (0..=values.len() as u64).map(|r| r * n).collect();
        out
    }

    /// A `utf8` column, one string per row.
    #[must_use]
    pub fn from_strings<S: AsRef<str>>(values: &[S]) -> Self {
        let mut out = Self::empty(DType::Utf8, &[], false);
        for v in values {
            out.push_unchecked(&[v.as_ref().len() as u64], v.as_ref().as_bytes());
        }
        out
    }

    /// A `bytes` column, one byte string per row.
    #[must_use]
    pub fn from_byte_strings<B: AsRef<[u8]>>(values: &[B]) -> Self {
        let mut out = Self::empty(DType::Bytes, &[], false);
        for v in values {
            out.push_unchecked(&[v.as_ref().len() as u64], v.as_ref());
        }
        out
    }

    /// A column with one ragged dim, `[?]`, one sequence per row (token ids, audio, …).
    #[must_use]
    pub fn from_sequences<T: Element>(rows: &[&[T]]) -> Self {
        let mut out = Self::empty(T::DTYPE, &[Dim::Ragged], false);
        let mut bytes = Vec::new();
        for r in rows {
            bytes.clear();
            for v in *r {
                v.put_le(&mut bytes);
            }
            out.push_unchecked(&[r.len() as u64], &bytes);
        }
        out
    }

    /// Appends a row given its full shape (fixed dims must match) and its little-endian bytes.
    ///
    /// # Errors
    /// `usage` if the shape or byte length does not fit the column, or `utf8` bytes are not UTF-8.
    pub fn push_row(&mut self, shape: &[u64], bytes: &[u8]) -> Result<()> {
        let (ragged, expect) = self.check_row_shape(shape)?;
        if expect != bytes.len() as u64 {
            return Err(Error::usage(format!("row shape {shape:?} needs {expect} bytes, got {}", bytes.len())));
        }
        if self.dtype == DType::Utf8 && std::str::from_utf8(bytes).is_err() {
            return Err(Error::usage("utf8 row is not valid UTF-8"));
        }
        if self.dtype == DType::Bool && bytes.iter().any(|&b| b > 1) {
            return Err(Error::usage("bool elements must be 0 or 1"));
        }
        self.push_unchecked(&ragged, bytes);
        Ok(())
    }

    /// Appends a null row (zero bytes for fixed shapes, zero sizes for ragged dims).
    ///
    /// # Errors
    /// `usage` if the column is not nullable.
    pub fn push_null(&mut self) -> Result<()> {
        if self.validity.is_none() {
            return Err(Error::usage("column is not nullable"));
        }
        let ragged = vec![0u64; self.ragged];
        let zeros = vec![0u8; usize::try_from(self.row_bytes_for(&ragged)).unwrap_or(0)];
        self.push_unchecked(&ragged, &zeros);
        if let Some(v) = &mut self.validity
            && let Some(last) = v.last_mut()
        {
            *last = false;
        }
        Ok(())
    }

    /// Appends a row given as an image file (JPEG, PNG or WebP): decodes it fully, checks its
    /// shape against the column's `[CMP-09]`, appends the pixels and keeps the file, which a
    /// writer stores as the row's image page in an `Encoded` column.
    ///
    /// # Errors
    /// `usage` for a file that is no JPEG, PNG or WebP, or whose shape does not fit the column;
    /// `invalid` or `malformed` (with [`ErrorClass`](crate::ErrorClass)) for a file outside the
    /// profile of `[CMP-07]` or one that does not decode.
    #[cfg(feature = "images")]
    pub fn push_encoded(&mut self, file: &[u8]) -> Result<()> {
        use crate::image_codec;
        let what = || "image file".to_string();
        let codec = image_codec::sniff(file).ok_or_else(|| Error::usage("not a JPEG, PNG or WebP file"))?;
        if self.dtype != DType::U8 || !(self.shape.len() == 2 || self.shape.len() == 3) {
            return Err(Error::usage(format!(
                "an image file cannot be a row of a {} {:?} column",
                self.dtype, self.shape
            )));
        }
        let header = image_codec::read_header(codec, file, &what)?;
        let shape = header.shape(self.shape.len());
        let (ragged, bytes) = self.check_row_shape(&shape)?;
        Error::check_limit(|| "image row bytes".to_string(), crate::limits::hard::MAX_ROW_BYTES, bytes)?;
        let pixels = image_codec::decode(codec, file, &shape, &what)?;
        self.push_unchecked(&ragged, &pixels);
        if self.encoded.is_empty() {
            self.encoded.resize(self.len(), None);
        }
        if let Some(last) = self.encoded.last_mut() {
            *last = Some((codec, file.to_vec()));
        }
        Ok(())
    }

    /// The image file row `i` was decoded from, if any ([`ColumnData::push_encoded`]).
    #[must_use]
    pub fn encoded(&self, i: usize) -> Option<(Codec, &[u8])> {
        self.encoded.get(i)?.as_ref().map(|(c, f)| (*c, f.as_slice()))
    }

    /// Keeps `file` as the stored form of row `i` (the reader's path: an image page).
    pub(crate) fn set_encoded(&mut self, i: usize, codec: Codec, file: &[u8]) {
        if self.encoded.is_empty() {
            self.encoded.resize(self.len(), None);
        }
        if let Some(slot) = self.encoded.get_mut(i) {
            *slot = Some((codec, file.to_vec()));
        }
    }

    fn push_unchecked(&mut self, ragged: &[u64], bytes: &[u8]) {
        if !self.encoded.is_empty() {
            self.encoded.push(None);
        }
        self.values.extend_from_slice(bytes);
        self.offsets.push(self.values.len() as u64);
        self.sizes.extend_from_slice(ragged);
        if let Some(v) = &mut self.validity {
            v.push(true);
        }
    }

    /// Splits a full row shape into its ragged sizes and returns the expected byte length.
    fn check_row_shape(&self, shape: &[u64]) -> Result<(Vec<u64>, u64)> {
        let want_rank = if self.dtype.is_variable() { 1 } else { self.shape.len() };
        if shape.len() != want_rank {
            return Err(Error::usage(format!("row shape {shape:?} has rank {}, column has {want_rank}", shape.len())));
        }
        let mut ragged = Vec::with_capacity(self.ragged);
        if self.dtype.is_variable() {
            ragged.push(shape[0]);
        } else {
            for (d, &s) in self.shape.iter().zip(shape) {
                match d {
                    Dim::Fixed(f) if *f != s => {
                        return Err(Error::usage(format!("row shape {shape:?} does not match fixed dim {f}")));
                    }
                    Dim::Fixed(_) => {}
                    Dim::Ragged => ragged.push(s),
                }
            }
        }
        let bytes = shape
            .iter()
            .try_fold(self.dtype.item_size() as u64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| Error::usage("row size overflows"))?;
        Ok((ragged, bytes))
    }

    /// Bytes of a row with the given ragged sizes, saturating on overflow.
    pub(crate) fn row_bytes_for(&self, ragged: &[u64]) -> u64 {
        row_bytes(self.dtype, &self.shape, ragged).unwrap_or(u64::MAX)
    }

    /// Number of rows.
    #[must_use]
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True when there are no rows.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The dtype.
    #[must_use]
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The column shape (with ragged dims).
    #[must_use]
    pub fn shape(&self) -> &[Dim] {
        &self.shape
    }

    /// All rows' bytes back to back (little-endian, C order).
    #[must_use]
    pub fn values(&self) -> &[u8] {
        &self.values
    }

    /// Byte offsets of the rows in [`ColumnData::values`], `len() + 1` entries.
    #[must_use]
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// Per-row ragged sizes, `len() * ragged_dims` entries, row-major.
    #[must_use]
    pub fn ragged_sizes(&self) -> &[u64] {
        &self.sizes
    }

    /// Number of ragged sizes per row.
    #[must_use]
    pub fn ragged_dims(&self) -> usize {
        self.ragged
    }

    /// The validity mask, when the column is nullable.
    #[must_use]
    pub fn validity(&self) -> Option<&[bool]> {
        self.validity.as_deref()
    }

    /// True if row `i` holds a value (not null).
    #[must_use]
    pub fn is_valid(&self, i: usize) -> bool {
        self.validity.as_ref().is_none_or(|v| v.get(i).copied().unwrap_or(false))
    }

    /// The bytes of row `i`.
    ///
    /// # Panics
    /// If `i >= len()`.
    #[must_use]
    pub fn row(&self, i: usize) -> &[u8] {
        &self.values[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// The full shape of row `i` (fixed dims and this row's ragged sizes; `[len]` for strings).
    ///
    /// # Panics
    /// If `i >= len()`.
    #[must_use]
    pub fn row_shape(&self, i: usize) -> Vec<u64> {
        let sizes = &self.sizes[i * self.ragged..(i + 1) * self.ragged];
        full_shape(self.dtype, &self.shape, sizes)
    }

    /// Row `i` as a string, for `utf8` columns.
    #[must_use]
    pub fn str_row(&self, i: usize) -> Option<&str> {
        if self.dtype == DType::Utf8 && i < self.len() { std::str::from_utf8(self.row(i)).ok() } else { None }
    }

    /// Decodes every element as `T` (the dtype must match).
    ///
    /// # Errors
    /// `usage` if `T` is not the column's dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype {
            return Err(Error::usage(format!("column is {}, asked for {}", self.dtype, T::DTYPE)));
        }
        let n = self.dtype.item_size();
        Ok(self.values.chunks_exact(n).map(T::from_le).collect())
    }

    /// Appends rows `range` of `other` (same dtype and shape).
    ///
    /// # Errors
    /// `usage` if the columns differ in dtype, shape or nullability.
    pub fn extend_from(&mut self, other: &ColumnData, range: std::ops::Range<usize>) -> Result<()> {
        if other.dtype != self.dtype || other.shape != self.shape || other.validity.is_some() != self.validity.is_some()
        {
            return Err(Error::usage("extend_from needs columns of one dtype, shape and nullability"));
        }
        if range.end > other.len() || range.start > range.end {
            return Err(Error::usage("row range out of bounds"));
        }
        let (a, b) = (other.offsets[range.start] as usize, other.offsets[range.end] as usize);
        let base = self.values.len() as u64;
        self.values.extend_from_slice(&other.values[a..b]);
        let shift = other.offsets[range.start];
        self.offsets.extend(other.offsets[range.start + 1..=range.end].iter().map(|o| o - shift + base));
        self.sizes.extend_from_slice(&other.sizes[range.start * self.ragged..range.end * self.ragged]);
        if let (Some(v), Some(o)) = (&mut self.validity, &other.validity) {
            v.extend_from_slice(&o[range.clone()]);
        }
        if !self.encoded.is_empty() || !other.encoded.is_empty() {
            let before = self.len() - range.len();
            self.encoded.resize(before, None);
            self.encoded.extend(range.map(|i| other.encoded.get(i).cloned().flatten()));
        }
        Ok(())
    }

    /// Assembles a buffer from decoded parts (the reader's path; sizes already validated).
    pub(crate) fn from_parts(
        dtype: DType,
        shape: Vec<Dim>,
        values: Vec<u8>,
        offsets: Vec<u64>,
        sizes: Vec<u64>,
        validity: Option<Vec<bool>>,
    ) -> Self {
        let ragged = shape.iter().filter(|d| matches!(d, Dim::Ragged)).count() + usize::from(dtype.is_variable());
        Self { dtype, shape, ragged, values, offsets, sizes, validity, encoded: Vec::new() }
    }

    /// Checks that this buffer can be stored in `column` `[MOD-01]`: dtype, shape, nullability,
    /// and the kind's value rules (UTF-8, JSON, class ids, vocabulary).
    ///
    /// # Errors
    /// `usage` naming the first mismatch.
    pub fn check_against(&self, column: &Column) -> Result<()> {
        let what = format!("column {:?}", column.name);
        if self.dtype != column.dtype || self.shape != column.shape {
            return Err(Error::usage(format!(
                "{what}: data is {} {:?}, schema says {} {:?}",
                self.dtype, self.shape, column.dtype, column.shape
            )));
        }
        if self.validity.is_some() && !column.nullable {
            return Err(Error::usage(format!("{what}: nullable data for a non-nullable column")));
        }
        crate::kinds::check_values(column, self).map_err(|e| Error::usage(format!("{what}: {e}")))
    }

    /// Returns the buffer as nullable (every row valid), for appending into a nullable column.
    #[must_use]
    pub fn into_nullable(mut self) -> Self {
        if self.validity.is_none() {
            self.validity = Some(vec![true; self.len()]);
        }
        self
    }
}

/// Bytes of a row of a column given its ragged sizes (checked).
#[must_use]
pub fn row_bytes(dtype: DType, shape: &[Dim], ragged: &[u64]) -> Option<u64> {
    let mut it = ragged.iter();
    let mut dims = Vec::with_capacity(shape.len() + 1);
    for d in shape {
        dims.push(match d {
            Dim::Fixed(x) => *x,
            Dim::Ragged => *it.next()?,
        });
    }
    if dtype.is_variable() {
        dims.push(*it.next()?);
    }
    // The exact product: zero if any dim is zero, even when a partial product would overflow.
    if dims.contains(&0) {
        return Some(0);
    }
    dims.iter().try_fold(dtype.item_size() as u64, |n, &d| n.checked_mul(d))
}

/// The full shape of a row from the column shape and its ragged sizes.
pub(crate) fn full_shape(dtype: DType, shape: &[Dim], ragged: &[u64]) -> Vec<u64> {
    if dtype.is_variable() {
        return ragged.to_vec();
    }
    let mut it = ragged.iter();
    shape
        .iter()
        .map(|d| match d {
            Dim::Fixed(x) => *x,
            Dim::Ragged => it.next().copied().unwrap_or(0),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_agree_with_push_row() {
        let c = ColumnData::from_fixed(&[2], &[1u16, 2, 3, 4]).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c.row(1), &[3, 0, 4, 0]);
        let mut d = ColumnData::empty(DType::U16, &[Dim::Fixed(2)], false);
        d.push_row(&[2], &[1, 0, 2, 0]).unwrap();
        d.push_row(&[2], &[3, 0, 4, 0]).unwrap();
        assert_eq!(c, d);
        assert!(d.push_row(&[3], &[0; 6]).is_err());
        assert!(d.push_null().is_err());
        let s = ColumnData::from_strings(&["ab", "", "ü"]);
        assert_eq!(s.row_shape(2), vec![2]);
        assert_eq!(s.str_row(2), Some("ü"));
        let q = ColumnData::from_sequences::<i32>(&[&[1, 2, 3], &[]]);
        assert_eq!(q.row_shape(0), vec![3]);
        assert_eq!(q.to_vec::<i32>().unwrap(), vec![1, 2, 3]);
    }

    #[test]
    fn nulls_and_extend() {
        let mut n = ColumnData::empty(DType::F32, &[Dim::Ragged, Dim::Fixed(2)], true);
        n.push_row(&[1, 2], &[0; 8]).unwrap();
        n.push_null().unwrap();
        assert_eq!(n.validity(), Some(&[true, false][..]));
        assert_eq!(n.row_shape(1), vec![0, 2]);
        let mut m = ColumnData::empty(DType::F32, &[Dim::Ragged, Dim::Fixed(2)], true);
        m.extend_from(&n, 1..2).unwrap();
        assert_eq!(m.len(), 1);
        assert!(!m.is_valid(0));
    }
}
