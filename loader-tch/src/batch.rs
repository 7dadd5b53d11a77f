//! What the training loop receives: named column tensors of one batch.

use std::sync::Arc;

use tch::{Device, Kind, Tensor};
use tessera_loader::{Elem, HostBatch, HostColumn, Lease, SkippedSample};

use crate::error::{LoaderError, Result, tensor_err};
use crate::slots::TensorBuffer;

/// The tensors of one column of a batch (`B` rows).
///
/// A packed ragged column ([`RaggedLayout::Packed`](tessera_loader::RaggedLayout)) is
/// `(values, offsets, shapes)`: its rows back to back, the layout of torch's jagged nested
/// tensors (`torch.nested.nested_tensor_from_jagged(values, offsets)` with one leading
/// ragged dim); [`Batch::packed_rows`] gives each row as a view.
#[derive(Debug)]
pub struct ColumnTensors {
    /// The values: `[B, ...]` for fixed shapes; zero-padded `[B, max, ...]` for padded ragged
    /// columns (`u8 [B, max_len]` for `utf8`/`bytes`); packed `[Σ d1, d2, ...]` (only the
    /// first dim ragged, text included) or flat `[Σ elements]`.
    pub values: Tensor,
    /// Ragged sizes, `i64 [B]` (one ragged dim or text) or `[B, k]`; `None` for fixed shapes.
    pub lengths: Option<Tensor>,
    /// `i64 [B + 1]`: packed, where each row starts along the values' first dim; padded (on
    /// request), the element offsets the rows would have packed back to back.
    pub offsets: Option<Tensor>,
    /// Packed columns: `i64 [B, ndim]`, every row's full dims.
    pub shapes: Option<Tensor>,
    /// `bool [B]` validity for nullable columns (null rows hold zeros / zero lengths).
    pub valid: Option<Tensor>,
}

impl ColumnTensors {
    fn map(&self, f: &dyn Fn(&Tensor) -> std::result::Result<Tensor, tch::TchError>) -> Result<Self> {
        let ctx = |e| tensor_err("moving or splitting a batch", e);
        let opt = |t: &Option<Tensor>| t.as_ref().map(|t| f(t).map_err(ctx)).transpose();
        Ok(Self {
            values: f(&self.values).map_err(ctx)?,
            lengths: opt(&self.lengths)?,
            offsets: opt(&self.offsets)?,
            shapes: opt(&self.shapes)?,
            valid: opt(&self.valid)?,
        })
    }

    /// True for a packed ragged column (it has per-row shapes).
    #[must_use]
    pub fn is_packed(&self) -> bool {
        self.shapes.is_some()
    }

    /// Rows `start..start + n` of the column (views, no copy); packed values are cut at the
    /// offsets, and the offsets rebased to start at 0.
    fn rows(&self, start: i64, n: i64) -> Result<Self> {
        let ctx = |e| tensor_err("splitting a batch", e);
        let narrow = |t: &Tensor| t.f_narrow(0, start, n);
        let mut part = Self {
            values: self.values.shallow_clone(),
            lengths: self.lengths.as_ref().map(narrow).transpose().map_err(ctx)?,
            offsets: None,
            shapes: self.shapes.as_ref().map(narrow).transpose().map_err(ctx)?,
            valid: self.valid.as_ref().map(narrow).transpose().map_err(ctx)?,
        };
        if let Some(off) = &self.offsets {
            let o = off.f_narrow(0, start, n + 1).map_err(ctx)?;
            let (first, last) = (o.f_int64_value(&[0]).map_err(ctx)?, o.f_int64_value(&[n]).map_err(ctx)?);
            part.offsets = Some(o.f_sub_scalar(first).map_err(ctx)?);
            if self.is_packed() {
                part.values = self.values.f_narrow(0, first, last - first).map_err(ctx)?;
            }
        }
        if !self.is_packed() {
            part.values = narrow(&self.values).map_err(ctx)?;
        }
        Ok(part)
    }
}

/// One batch: named column tensors, the global rows they hold, and where the batch sits
/// in the epoch.
///
/// On the CPU the value tensors are views of a pooled buffer that is recycled when the
/// batch (and every [`Batch::split`] part of it) is dropped and no tensor shares the buffer
/// any more. A tensor (or any alias of one) kept past the batch keeps its values: its buffer
/// is then not recycled.
#[derive(Debug)]
pub struct Batch {
    pub(crate) names: Vec<String>,
    pub(crate) columns: Vec<Option<ColumnTensors>>,
    pub(crate) text: Vec<bool>,
    pub(crate) rows: Vec<u64>,
    pub(crate) sources: Vec<u32>,
    pub(crate) epoch: u64,
    pub(crate) index: usize,
    pub(crate) position: u64,
    pub(crate) skipped: Vec<SkippedSample>,
    /// Declared last: the tensors above drop before the buffers go back to the pool.
    pub(crate) lease: Option<Arc<Lease<TensorBuffer>>>,
}

/// The torch kind of a core element type: tch has no unsigned kinds wider than a byte, so
/// the adapter asks the core for them widened ([`Unsigned::Widened`](tessera_loader::Unsigned))
/// and never receives them.
pub(crate) fn kind_of(elem: Elem) -> Result<Kind> {
    Ok(match elem {
        Elem::Bool => Kind::Bool,
        Elem::U8 => Kind::Uint8,
        Elem::I8 => Kind::Int8,
        Elem::I16 => Kind::Int16,
        Elem::I32 => Kind::Int,
        Elem::I64 => Kind::Int64,
        Elem::F16 => Kind::Half,
        Elem::Bf16 => Kind::BFloat16,
        Elem::F32 => Kind::Float,
        Elem::F64 => Kind::Double,
        Elem::U16 | Elem::U32 | Elem::U64 => {
            return Err(LoaderError::WorkerPanicked(format!("{elem:?} values reached the tch adapter unwidened")));
        }
    })
}

/// The tensors of one filled column: a view of the pooled buffer and small side tensors.
fn column_tensors(host: &HostBatch<TensorBuffer>, c: usize, col: &HostColumn) -> Result<ColumnTensors> {
    let ctx = |e| tensor_err(format!("column {:?} side tensors", col.name), e);
    let values = host
        .with_buffer(c, |b| b.view(col.byte_len, kind_of(col.elem)?, &col.shape))
        .ok_or_else(|| LoaderError::WorkerPanicked(format!("column {c} has no buffer")))??;
    let rows = host.rows.len() as i64;
    let ragged_dims = col.layout.ragged_dims();
    let lengths = match col.layout.lengths() {
        Some(v) => {
            let t = Tensor::f_from_slice(v).map_err(ctx)?;
            Some(if ragged_dims == 1 { t } else { t.f_view([rows, ragged_dims as i64]).map_err(ctx)? })
        }
        None => None,
    };
    let offsets = col.layout.offsets().map(Tensor::f_from_slice).transpose().map_err(ctx)?;
    let shapes = match col.layout.shapes() {
        Some(v) => {
            let ndim = if rows > 0 { v.len() as i64 / rows } else { 0 };
            Some(Tensor::f_from_slice(v).and_then(|t| t.f_view([rows, ndim])).map_err(ctx)?)
        }
        None => None,
    };
    let valid = col.valid.as_deref().map(Tensor::f_from_slice).transpose().map_err(ctx)?;
    Ok(ColumnTensors { values, lengths, offsets, shapes, valid })
}

impl Batch {
    /// Wraps a filled host batch as tensors: the values are views of its buffers (no copy),
    /// which stay leased until the batch and every tensor viewing them are gone.
    pub(crate) fn from_host(host: HostBatch<TensorBuffer>) -> Result<Self> {
        let columns = host
            .columns
            .iter()
            .enumerate()
            .map(|(c, col)| column_tensors(&host, c, col).map(Some))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            names: host.columns.iter().map(|c| c.name.clone()).collect(),
            columns,
            text: host.columns.iter().map(|c| c.text).collect(),
            lease: host.lease().cloned(),
            rows: host.rows,
            sources: host.sources,
            epoch: host.epoch,
            index: host.index,
            position: host.position,
            skipped: host.skipped,
        })
    }

    /// Rows in the batch.
    #[must_use]
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True for a batch without rows.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The global (live) row index of each sample, in batch order.
    #[must_use]
    pub fn rows(&self) -> &[u64] {
        &self.rows
    }

    /// A mixture's source of each sample (`LoaderConfig::for_mixture`), in batch order;
    /// empty for one dataset. [`Batch::rows`] are then rows of each sample's source.
    #[must_use]
    pub fn sources(&self) -> &[u32] {
        &self.sources
    }

    /// The epoch this batch belongs to.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// This batch's index among the rank's batches of the epoch.
    #[must_use]
    pub fn index(&self) -> usize {
        self.index
    }

    /// Position of the batch's first sample in the epoch's (padded) global order; seeds
    /// per-batch transforms.
    #[must_use]
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Samples replaced in this batch (skip-bad-sample mode).
    #[must_use]
    pub fn skipped(&self) -> &[SkippedSample] {
        &self.skipped
    }

    /// Column names in projection order (taken columns included).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    fn position_of(&self, name: &str) -> Result<usize> {
        self.names.iter().position(|n| n == name).ok_or_else(|| LoaderError::NoColumn(name.to_string()))
    }

    /// All tensors of a column.
    ///
    /// # Errors
    /// [`LoaderError::NoColumn`] for an unknown or taken column.
    pub fn column(&self, name: &str) -> Result<&ColumnTensors> {
        let i = self.position_of(name)?;
        self.columns[i].as_ref().ok_or_else(|| LoaderError::NoColumn(format!("{name} (taken)")))
    }

    /// The values tensor of a column.
    ///
    /// # Errors
    /// As [`Batch::column`].
    pub fn tensor(&self, name: &str) -> Result<&Tensor> {
        Ok(&self.column(name)?.values)
    }

    /// Replaces a column's tensors (what transforms do), or adds a new column.
    pub fn set(&mut self, name: &str, tensors: ColumnTensors) {
        if let Some(i) = self.names.iter().position(|n| n == name) {
            self.columns[i] = Some(tensors);
        } else {
            self.names.push(name.to_string());
            self.columns.push(Some(tensors));
            self.text.push(false);
        }
    }

    /// Takes a column's tensors out of the batch, to keep beyond the batch's life. Its
    /// buffer leaves the pool (it is no longer recycled nor counted).
    ///
    /// # Errors
    /// As [`Batch::column`].
    pub fn take(&mut self, name: &str) -> Result<ColumnTensors> {
        let i = self.position_of(name)?;
        let t = self.columns[i].take().ok_or_else(|| LoaderError::NoColumn(format!("{name} (taken)")))?;
        if let Some(lease) = &self.lease {
            lease.forfeit(i);
        }
        Ok(t)
    }

    /// A text column's rows as strings (`utf8` columns; bytes are checked at load time).
    ///
    /// # Errors
    /// [`LoaderError::NoColumn`]; [`LoaderError::Corrupt`] for bytes that are not UTF-8.
    pub fn strings(&self, name: &str) -> Result<Vec<String>> {
        self.byte_strings(name)?
            .into_iter()
            .map(|b| String::from_utf8(b).map_err(|_| LoaderError::corrupt(name, "text is not UTF-8")))
            .collect()
    }

    /// A ragged `u8` column's rows (`bytes`/`utf8` columns) as byte vectors.
    ///
    /// # Errors
    /// [`LoaderError::NoColumn`], or a column that is not `u8` with lengths.
    pub fn byte_strings(&self, name: &str) -> Result<Vec<Vec<u8>>> {
        let c = self.column(name)?;
        let ctx = |e| tensor_err(format!("reading column {name:?} as strings"), e);
        let (Some(lengths), Kind::Uint8) = (&c.lengths, c.values.kind()) else {
            return Err(LoaderError::config(format!("column {name:?} is not a text or bytes column")));
        };
        let values = c.values.f_to_device(Device::Cpu).map_err(ctx)?.f_contiguous().map_err(ctx)?;
        let lengths: Vec<i64> =
            Vec::try_from(lengths.f_to_device(Device::Cpu).map_err(ctx)?.f_reshape([-1]).map_err(ctx)?).map_err(ctx)?;
        let mut flat = vec![0u8; values.numel()];
        let n = flat.len();
        values.f_copy_data_u8(&mut flat, n).map_err(ctx)?;
        if let (true, Some(offsets)) = (c.is_packed(), &c.offsets) {
            let offsets: Vec<i64> = Vec::try_from(offsets.f_to_device(Device::Cpu).map_err(ctx)?).map_err(ctx)?;
            return Ok(offsets
                .windows(2)
                .map(|w| flat.get(w[0].max(0) as usize..w[1].max(0) as usize).map(<[u8]>::to_vec).unwrap_or_default())
                .collect());
        }
        let width = values.size().get(1).copied().unwrap_or(0).max(0) as usize;
        Ok(lengths
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let n = (n.max(0) as usize).min(width);
                flat.get(i * width..i * width + n).map(<[u8]>::to_vec).unwrap_or_default()
            })
            .collect())
    }

    /// A packed column's rows, each a view of the values (no copy) in its own shape.
    ///
    /// # Errors
    /// [`LoaderError::NoColumn`]; [`LoaderError::Config`] for a column that is not packed.
    pub fn packed_rows(&self, name: &str) -> Result<Vec<Tensor>> {
        let c = self.column(name)?;
        let ctx = |e| tensor_err(format!("cutting column {name:?} into rows"), e);
        let (Some(offsets), Some(shapes)) = (&c.offsets, &c.shapes) else {
            return Err(LoaderError::config(format!("column {name:?} is not packed")));
        };
        let offsets: Vec<i64> = Vec::try_from(offsets.f_to_device(Device::Cpu).map_err(ctx)?).map_err(ctx)?;
        let shapes = shapes.f_to_device(Device::Cpu).map_err(ctx)?;
        let ndim = shapes.size().get(1).copied().unwrap_or(0);
        let shapes: Vec<i64> = Vec::try_from(shapes.f_reshape([-1]).map_err(ctx)?).map_err(ctx)?;
        offsets
            .windows(2)
            .zip(shapes.chunks(ndim.max(1) as usize))
            .map(|(w, shape)| c.values.f_narrow(0, w[0], w[1] - w[0]).and_then(|t| t.f_reshape(shape)).map_err(ctx))
            .collect()
    }

    /// Moves every tensor to `device` (`non_blocking` copies from pinned memory on CUDA).
    /// The batch's host buffers stay leased until the returned batch is dropped, and are
    /// synchronised before they are refilled.
    ///
    /// # Errors
    /// [`LoaderError::Framework`] when a copy fails.
    pub fn to_device(self, device: Device) -> Result<Batch> {
        if device == Device::Cpu {
            return Ok(self);
        }
        let mut out = self.shell();
        out.columns = self
            .columns
            .iter()
            .map(|c| c.as_ref().map(|c| c.map(&|t| t.f_to_device_(device, t.kind(), true, false))).transpose())
            .collect::<Result<_>>()?;
        if let (Device::Cuda(index), Some(lease)) = (device, &self.lease) {
            for c in 0..self.columns.len() {
                lease.with_buffer_mut(c, |b| b.mark_cuda(index));
            }
        }
        out.lease.clone_from(&self.lease);
        Ok(out)
    }

    /// Splits the batch into `parts` equal batches along the row dimension (one per device
    /// for single-process multi-GPU training). The parts share the host buffers.
    ///
    /// # Errors
    /// [`LoaderError::Config`] when the rows do not divide evenly.
    pub fn split(&self, parts: usize) -> Result<Vec<Batch>> {
        let n = self.len();
        if parts == 0 || !n.is_multiple_of(parts) {
            return Err(LoaderError::config(format!("a batch of {n} rows cannot be split into {parts} equal parts")));
        }
        let m = n / parts;
        (0..parts)
            .map(|k| {
                let start = (k * m) as i64;
                let mut b = self.shell();
                b.rows = self.rows[k * m..(k + 1) * m].to_vec();
                b.position = self.position + (k * m) as u64;
                b.columns = self
                    .columns
                    .iter()
                    .map(|c| c.as_ref().map(|c| c.rows(start, m as i64)).transpose())
                    .collect::<Result<_>>()?;
                b.lease.clone_from(&self.lease);
                Ok(b)
            })
            .collect()
    }

    fn shell(&self) -> Batch {
        Batch {
            names: self.names.clone(),
            columns: Vec::new(),
            text: self.text.clone(),
            rows: self.rows.clone(),
            sources: self.sources.clone(),
            epoch: self.epoch,
            index: self.index,
            position: self.position,
            skipped: self.skipped.clone(),
            lease: None,
        }
    }
}
