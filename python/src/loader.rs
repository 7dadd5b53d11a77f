//! `tessera._native.Loader` and `Epoch`: the framework-free loader core behind
//! `ds.pytorch()` / `ds.numpy()`.
//!
//! Batches come out as numpy arrays over the loader's own buffers (see `buffer`), so
//! `torch.from_numpy` makes tensors without a copy. The GIL is released while the consumer
//! waits for a batch, so other Python threads run meanwhile.
//!
//! Buffer reuse: the epoch keeps the leases of the last [`HELD_LEASES`] batches it handed
//! out and returns a lease to the pool two batches later. By then a training loop has
//! normally dropped that batch; buffers whose arrays are still alive somewhere (a tensor the
//! user kept) are not exclusive and are let go by the pool, never refilled, so what the user
//! keeps keeps its values. Only buffers nobody can see any more are reused.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use tessera::DType;
use tessera_loader::{
    DiskCacheConfig, DistEnv, Elem, EpochIter, Fill, HostBatch, HostLayout, Lease, Loader, LoaderConfig, LoaderState,
    MixSource, MixStep, Mixture, RaggedLayout, Share, ShuffleMode, Unsigned,
};

use crate::buffer::{PyAllocator, PyHostBuffer};
use crate::dataset::at_of;
use crate::errors::{IntoPy, from_loader, internal, usage};

/// Leases of batches handed out that the epoch still holds (see the module docs).
const HELD_LEASES: usize = 2;

/// The numpy dtype of a loader element type (`bf16` travels as its `uint16` bits; the
/// Python layer views it as `torch.bfloat16` or widens it to float32).
pub(crate) fn elem_dtype(e: Elem) -> &'static str {
    match e {
        Elem::Bool => "bool",
        Elem::U8 => "u1",
        Elem::I8 => "i1",
        Elem::I16 => "<i2",
        Elem::I32 => "<i4",
        Elem::U32 => "<u4",
        Elem::I64 => "<i8",
        Elem::U64 => "<u8",
        Elem::F16 => "<f2",
        Elem::U16 | Elem::Bf16 => "<u2",
        Elem::F32 => "<f4",
        Elem::F64 => "<f8",
    }
}

/// A mixture source from Python: `(location, version, tag, branch, view, renames, fills)`;
/// renames are `(batch column, stored column)`, fills `(column, "zeros" | "null" | "row",
/// row bytes)`.
type MixSourceArgs = (
    String,
    Option<u64>,
    Option<String>,
    Option<String>,
    Option<String>,
    Vec<(String, String)>,
    Vec<(String, String, Option<Vec<u8>>)>,
);
/// A mixture step from Python: `(epoch, offset, "weights" | "samples", values, epoch_samples)`.
type MixStepArgs = (u64, u64, String, Vec<f64>, Option<u64>);

/// The core's [`Mixture`] from the Python package's description of one.
fn mixture_of(sources: Vec<MixSourceArgs>, steps: Vec<MixStepArgs>) -> PyResult<Mixture> {
    let sources = sources
        .into_iter()
        .map(|(location, version, tag, branch, view, renames, fills)| {
            let fills = fills
                .into_iter()
                .map(|(column, kind, row)| {
                    let fill = match (kind.as_str(), row) {
                        ("zeros", None) => Fill::Zeros,
                        ("null", None) => Fill::Null,
                        ("row", Some(bytes)) => Fill::Row(bytes),
                        _ => {
                            return Err(usage(format!("column {column:?}: a fill is \"zeros\", None (null) or bytes")));
                        }
                    };
                    Ok((column, fill))
                })
                .collect::<PyResult<Vec<_>>>()?;
            Ok(MixSource { at: at_of(version, tag, branch)?, view, renames, fills, ..MixSource::new(location) })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let steps = steps
        .into_iter()
        .map(|(epoch, offset, kind, values, epoch_samples)| {
            let shares = match kind.as_str() {
                "weights" => values.into_iter().map(Share::Weight).collect(),
                "samples" => values
                    .into_iter()
                    .map(|v| {
                        if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 2f64.powi(53) {
                            Ok(Share::Samples(v as u64))
                        } else {
                            Err(usage(format!("a sample count must be a whole number >= 0, not {v}")))
                        }
                    })
                    .collect::<PyResult<Vec<_>>>()?,
                other => return Err(usage(format!("a mixture step gives \"weights\" or \"samples\", not {other:?}"))),
            };
            Ok(MixStep { epoch, offset, shares, epoch_samples })
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(Mixture { sources, steps })
}

/// A loader over one pinned dataset version (or a mixture of sources).
#[pyclass(module = "tessera._native", name = "Loader", frozen)]
#[derive(Debug)]
pub(crate) struct PyLoader {
    inner: Arc<Loader<PyHostBuffer>>,
    /// Per projected column: `Some(true)` for `utf8`, `Some(false)` for `bytes`, `None` for
    /// tensors.
    text: Vec<Option<bool>>,
}

#[pymethods]
impl PyLoader {
    /// Opens a loader. `rank`/`world_size` default to torchrun's `RANK`/`WORLD_SIZE`.
    #[new]
    #[pyo3(signature = (
        location, *, version=None, tag=None, branch=None, view=None, batch_size=32, columns=None, shuffle="global",
        window_fragments=4, seed=0, drop_last=false, workers=2, prefetch_batches=6, memory_budget=None,
        rank=None, world_size=None, verify_checksums=true, skip_bad_samples=false, widen_unsigned=true, u64_as_i64_bits=false,
        ragged_offsets=false, ragged="padded", transforms=None, cache_dir=None, cache_bytes=None, mixture=None, lineage=None,
    ))]
    #[allow(clippy::too_many_arguments, clippy::fn_params_excessive_bools)] // keyword-only Python options
    fn new(
        py: Python<'_>,
        location: String,
        version: Option<u64>,
        tag: Option<String>,
        branch: Option<String>,
        view: Option<String>,
        batch_size: usize,
        columns: Option<Vec<String>>,
        shuffle: Option<&str>,
        window_fragments: usize,
        seed: u64,
        drop_last: bool,
        workers: usize,
        prefetch_batches: usize,
        memory_budget: Option<u64>,
        rank: Option<usize>,
        world_size: Option<usize>,
        verify_checksums: bool,
        skip_bad_samples: bool,
        widen_unsigned: bool,
        u64_as_i64_bits: bool,
        ragged_offsets: bool,
        ragged: &str,
        transforms: Option<Vec<(String, Vec<Bound<'_, PyDict>>)>>,
        cache_dir: Option<std::path::PathBuf>,
        cache_bytes: Option<u64>,
        mixture: Option<(Vec<MixSourceArgs>, Vec<MixStepArgs>)>,
        lineage: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        let mut cfg = LoaderConfig::new(location);
        cfg.lineage = lineage;
        if let Some((sources, steps)) = mixture {
            cfg.mixture = Some(mixture_of(sources, steps)?);
        }
        cfg.at = at_of(version, tag, branch)?;
        cfg.view = view;
        cfg.columns = columns;
        cfg.batch_size = batch_size;
        cfg.shuffle = match shuffle {
            Some("global") => ShuffleMode::Global,
            Some("block") => ShuffleMode::Block { window_fragments },
            None | Some("none") => ShuffleMode::None,
            Some(other) => return Err(usage(format!("shuffle must be \"global\", \"block\" or None, not {other:?}"))),
        };
        cfg.seed = seed;
        cfg.drop_last = drop_last;
        cfg.workers = workers;
        cfg.prefetch_batches = prefetch_batches;
        if let Some(b) = memory_budget {
            cfg.memory_budget = b;
        }
        cfg.verify_checksums = verify_checksums;
        cfg.skip_bad_samples = skip_bad_samples;
        cfg.ragged.offsets = ragged_offsets;
        cfg.ragged.layout = match ragged {
            "padded" => RaggedLayout::Padded,
            "packed" => RaggedLayout::Packed,
            other => return Err(usage(format!("ragged must be \"padded\" or \"packed\", not {other:?}"))),
        };
        for (column, ops) in transforms.unwrap_or_default() {
            let ops = ops.iter().map(crate::transform::op).collect::<PyResult<Vec<_>>>()?;
            cfg = cfg.with_transform(column, ops);
        }
        cfg.disk_cache = match (cache_dir, cache_bytes) {
            (None, None) => None,
            (Some(dir), Some(max_bytes)) => Some(DiskCacheConfig { dir, max_bytes }),
            _ => return Err(usage("give both cache_dir and cache_bytes (the cache's bound), or neither")),
        };
        cfg.dist = match (rank, world_size) {
            (None, None) => DistEnv::from_env().py_err()?,
            (Some(rank), Some(world_size)) => DistEnv { rank, world_size, local_rank: rank },
            _ => return Err(usage("give both rank and world_size, or neither (then RANK/WORLD_SIZE are read)")),
        };
        // numpy takes u16/u32/u64 as stored; torch (no unsigned arithmetic), JAX and
        // TensorFlow get them widened, u64 by value or, on request, by its bits.
        let unsigned = match (widen_unsigned, u64_as_i64_bits) {
            (false, _) => Unsigned::Stored,
            (true, false) => Unsigned::Widened,
            (true, true) => Unsigned::WidenedBits,
        };
        let loader = py.detach(|| Loader::open_with_allocator(cfg, PyAllocator { unsigned })).py_err()?;
        let schema = loader.dataset().schema();
        let text = loader
            .column_names()
            .iter()
            .map(|n| match schema.column(n).map(|c| c.dtype) {
                Some(DType::Utf8) => Some(true),
                Some(DType::Bytes) => Some(false),
                _ => None,
            })
            .collect();
        Ok(Self { inner: Arc::new(loader), text })
    }

    /// Starts epoch `epoch` from its beginning.
    fn epoch(&self, py: Python<'_>, epoch: u64) -> PyResult<PyEpoch> {
        let it = py.detach(|| self.inner.epoch(epoch)).py_err()?;
        Ok(self.wrap(it))
    }

    /// Continues the epoch a state (from `Epoch.state()`) was taken in.
    fn resume(&self, py: Python<'_>, state: &str) -> PyResult<PyEpoch> {
        let state = LoaderState::from_json(state).map_err(|e| usage(format!("not a loader state: {e}")))?;
        let it = py.detach(|| self.inner.resume(&state)).py_err()?;
        Ok(self.wrap(it))
    }

    /// The dataset version read.
    #[getter]
    fn version(&self) -> u64 {
        self.inner.version()
    }

    /// Rows in the version.
    #[getter]
    fn row_count(&self) -> u64 {
        self.inner.row_count()
    }

    /// Batches this rank yields per epoch.
    #[getter]
    fn batches_per_epoch(&self) -> usize {
        self.inner.batches_per_epoch()
    }

    /// Projected column names, in output order.
    #[getter]
    fn columns(&self) -> Vec<String> {
        self.inner.column_names()
    }

    /// `(rank, world_size)`.
    #[getter]
    fn dist(&self) -> (usize, usize) {
        let d = self.inner.config().dist;
        (d.rank, d.world_size)
    }

    /// Packs `epoch` (or continues from `state`, what `Packer.state()` gave) of the ragged
    /// token column `column` into batches of `windows` windows of `context` tokens; with
    /// `stream`, epoch after epoch without padding at epoch ends.
    #[pyo3(signature = (column, context, windows, split_documents=true, epoch=0, state=None, stream=false))]
    #[allow(clippy::too_many_arguments)] // keyword options from Python
    fn pack(
        &self,
        py: Python<'_>,
        column: String,
        context: usize,
        windows: usize,
        split_documents: bool,
        epoch: u64,
        state: Option<(String, u64)>,
        stream: bool,
    ) -> PyResult<crate::packing::PyPacker> {
        let config =
            tessera_loader::PackConfig { split_documents, ..tessera_loader::PackConfig::new(column, context, windows) };
        crate::packing::pack(py, &self.inner, config, epoch, state, stream)
    }

    /// Samples of each mixture source in `epoch` (`None` for one dataset).
    fn mixture_counts(&self, epoch: u64) -> Option<Vec<u64>> {
        self.inner.mixture_order().map(|o| o.epoch_counts(epoch))
    }

    /// The global rows of this rank's batches of `epoch`, in order (no data is read).
    fn plan_rows(&self, epoch: u64) -> PyResult<Vec<Vec<u64>>> {
        if self.inner.mixture_order().is_some() {
            return Err(usage("plan_rows lists one dataset's rows; a mixture's batches carry their sources and rows"));
        }
        let plan = self.inner.plan(epoch).py_err()?;
        // Over a view the plan orders positions in the view; report the version's rows.
        let row = |p: u64| self.inner.view().and_then(|v| v.rows.get(p)).unwrap_or(p);
        Ok(plan.batches().map(|b| b.into_iter().map(&row).collect()).collect())
    }

    /// Peak bytes held per memory use since the loader opened.
    fn memory_high_water(&self) -> u64 {
        self.inner.memory_stats().high_water
    }

    /// Storage traffic since the loader opened, as a dict: `requests`, `bytes` and `retries`
    /// (what reached the store), `threads` (the filling threads the last epoch started), and
    /// the disk cache's `cache_hits`, `cache_misses`, `cache_direct` (first-batch misses read
    /// without their block),
    /// `cache_read_bytes`, `cache_written_bytes`, `cache_evictions`, `cache_corrupt`,
    /// `cache_errors` (zero without `cache_dir`).
    fn io_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.io_stats();
        let d = PyDict::new(py);
        for (k, v) in [
            ("requests", s.requests),
            ("bytes", s.bytes),
            ("retries", s.retries),
            ("threads", s.threads),
            ("cache_hits", s.cache.hits),
            ("cache_misses", s.cache.misses),
            ("cache_direct", s.cache.direct),
            ("cache_read_bytes", s.cache.read_bytes),
            ("cache_written_bytes", s.cache.written_bytes),
            ("cache_evictions", s.cache.evictions),
            ("cache_corrupt", s.cache.corrupt),
            ("cache_errors", s.cache.errors),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Every sample replaced so far (`skip_bad_samples=True`), as dicts: `epoch`, `batch`,
    /// `slot`, `row` (unreadable), `replacement` (delivered instead), `error`.
    fn skipped<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .inner
            .skipped()
            .into_iter()
            .map(|s| -> PyResult<Bound<'py, PyDict>> {
                let d = PyDict::new(py);
                d.set_item("epoch", s.epoch)?;
                d.set_item("batch", s.batch)?;
                d.set_item("slot", s.slot)?;
                d.set_item("row", s.row)?;
                d.set_item("replacement", s.replacement)?;
                d.set_item("error", s.error)?;
                Ok(d)
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }
}

impl PyLoader {
    fn wrap(&self, it: EpochIter<PyHostBuffer>) -> PyEpoch {
        PyEpoch { iter: Mutex::new(Some(it)), held: Mutex::new(VecDeque::new()), text: self.text.clone() }
    }
}

/// The batches of one epoch on this rank: `next()` returns the pieces of a batch, or `None`
/// at the end.
#[pyclass(module = "tessera._native", name = "Epoch", frozen)]
#[derive(Debug)]
pub(crate) struct PyEpoch {
    iter: Mutex<Option<EpochIter<PyHostBuffer>>>,
    held: Mutex<VecDeque<Arc<Lease<PyHostBuffer>>>>,
    text: Vec<Option<bool>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl PyEpoch {
    /// One column's pieces: `(name, values, lengths, offsets, shapes, valid, elem)` where
    /// `values` is a numpy array over the batch buffer (no copy) for tensors, or a list of
    /// `str`/`bytes` for text columns (`elem` is then `"utf8"`/`"bytes"`); `shapes` (`[B,
    /// ndim]`) marks a packed ragged column.
    fn column<'py>(&self, py: Python<'py>, batch: &HostBatch<PyHostBuffer>, c: usize) -> PyResult<Bound<'py, PyTuple>> {
        let col = &batch.columns[c];
        let ragged_dims = col.layout.ragged_dims();
        let lengths = col.layout.lengths().map(|l| {
            let a = PyArray1::from_slice(py, l);
            if ragged_dims > 1 {
                a.reshape([l.len() / ragged_dims, ragged_dims]).map(Bound::into_any)
            } else {
                Ok(a.into_any())
            }
        });
        let lengths = lengths.transpose()?;
        let offsets = col.layout.offsets().map(|o| PyArray1::from_slice(py, o));
        let shapes = match col.layout.shapes() {
            Some(v) => {
                let rows = batch.rows.len();
                let ndim = v.len().checked_div(rows).unwrap_or(0);
                Some(PyArray1::from_slice(py, v).reshape([rows, ndim])?)
            }
            None => None,
        };
        let valid = col.valid.as_ref().map(|v| PyArray1::from_slice(py, v));
        let bug = |m: &str| internal(format!("column {:?}: {m}", col.name));
        if let Some(utf8) = self.text.get(c).copied().flatten() {
            let rows = batch.rows.len();
            let width = col.shape.get(1).copied().unwrap_or(0).max(0) as usize;
            let lens = col.layout.lengths().ok_or_else(|| bug("a text column without lengths"))?;
            // Row i's bytes: back to back from the offsets when packed, else at i × width.
            let span = |i: usize| -> Option<std::ops::Range<usize>> {
                let n = lens.get(i).copied().unwrap_or(0).max(0) as usize;
                match &col.layout {
                    HostLayout::Packed { offsets, .. } => {
                        let start = offsets.get(i).copied()?.max(0) as usize;
                        Some(start..start + n)
                    }
                    HostLayout::Padded { .. } | HostLayout::Fixed => Some(i * width..i * width + n.min(width)),
                }
            };
            let items = batch
                .with_buffer(c, |buf| -> PyResult<Vec<Bound<'py, PyAny>>> {
                    let bytes = buf.bytes().ok_or_else(|| bug("the buffer is shared"))?;
                    (0..rows)
                        .map(|i| {
                            let valid = col.valid.as_ref().is_none_or(|v| v.get(i).copied().unwrap_or(false));
                            if !valid {
                                return Ok(py.None().into_bound(py));
                            }
                            let row = span(i).and_then(|r| bytes.get(r)).ok_or_else(|| bug("short"))?;
                            Ok(if utf8 {
                                let s = std::str::from_utf8(row).map_err(|_| bug("text is not UTF-8"))?;
                                PyString::new(py, s).into_any()
                            } else {
                                PyBytes::new(py, row).into_any()
                            })
                        })
                        .collect()
                })
                .ok_or_else(|| bug("no buffer"))??;
            let list = PyList::new(py, items)?;
            let elem = if utf8 { "utf8" } else { "bytes" };
            return (col.name.as_str(), list, lengths, offsets, shapes, valid, elem).into_pyobject(py);
        }
        let array = batch.with_buffer(c, |buf| buf.view(py, col.byte_len)).ok_or_else(|| bug("no buffer"))??;
        let shape: Vec<usize> = col.shape.iter().map(|&d| d.max(0) as usize).collect();
        let values = array.call_method1("view", (elem_dtype(col.elem),))?.call_method1("reshape", (shape,))?;
        let elem = if col.elem == Elem::Bf16 { "bf16" } else { elem_dtype(col.elem) };
        (col.name.as_str(), values, lengths, offsets, shapes, valid, elem).into_pyobject(py)
    }
}

#[pymethods]
impl PyEpoch {
    /// The next batch as `(columns, rows, epoch, index, sources)` (`sources`: each sample's
    /// mixture source, `None` for one dataset), or `None` after the last one. Waits with the
    /// GIL released.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let got = py.detach(|| lock(&self.iter).as_mut().and_then(Iterator::next));
        let batch = match got {
            None => return Ok(None),
            Some(Err(e)) => return Err(from_loader(&e)),
            Some(Ok(b)) => b,
        };
        let cols = (0..batch.columns.len()).map(|c| self.column(py, &batch, c)).collect::<PyResult<Vec<_>>>()?;
        let rows = PyArray1::from_slice(py, &batch.rows);
        let sources = (!batch.sources.is_empty()).then(|| PyArray1::from_slice(py, &batch.sources));
        let out = (PyList::new(py, cols)?, rows, batch.epoch, batch.index, sources).into_pyobject(py)?;
        if let Some(lease) = batch.lease().cloned() {
            let released = {
                let mut held = lock(&self.held);
                held.push_back(lease);
                if held.len() > HELD_LEASES { held.pop_front() } else { None }
            };
            drop(batch);
            // Returning a set to the pool only takes its lock: no need to release the GIL.
            drop(released);
        }
        Ok(Some(out))
    }

    /// The resume state after the batches yielded so far (JSON text of the core's
    /// `LoaderState`).
    fn state(&self) -> PyResult<String> {
        lock(&self.iter).as_ref().map(|it| it.state().to_json()).ok_or_else(|| usage("the epoch was closed"))
    }

    /// Batches yielded so far.
    #[getter]
    fn consumed(&self) -> usize {
        lock(&self.iter).as_ref().map_or(0, EpochIter::<PyHostBuffer>::consumed)
    }

    /// Batches left.
    #[getter]
    fn remaining(&self) -> usize {
        lock(&self.iter).as_ref().map_or(0, EpochIter::<PyHostBuffer>::remaining)
    }

    /// The epoch number.
    #[getter]
    fn epoch(&self) -> Option<u64> {
        lock(&self.iter).as_ref().map(EpochIter::<PyHostBuffer>::epoch)
    }

    /// Seconds the consumer spent waiting for batches.
    #[getter]
    fn wait_seconds(&self) -> f64 {
        lock(&self.iter).as_ref().map_or(0.0, |it| it.wait_time().as_secs_f64())
    }

    /// Stops the workers (waiting for them with the GIL released) and frees the epoch, so
    /// the loader can start another one.
    fn close(&self, py: Python<'_>) {
        let it = lock(&self.iter).take();
        let held = std::mem::take(&mut *lock(&self.held));
        py.detach(move || {
            drop(it);
            drop(held);
        });
    }
}
