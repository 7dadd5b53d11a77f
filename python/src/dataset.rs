//! `tessera._native.Dataset`: one opened version of a dataset, the reference reader and
//! writer behind `tessera.open` / `tessera.create`.
//!
//! The native layer speaks in simple pieces (bytes, flat shape lists, numpy arrays); the
//! pure-Python package (`python/tessera/__init__.py`) turns numpy input into those pieces and
//! the pieces into the user-facing values (stacked arrays, lists of arrays, `str`, `bytes`).
//! Every call that touches storage releases the GIL.

use std::collections::BTreeMap;

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use tessera::{
    At, BBoxFormat, Batch, Column, ColumnData, DType, Dataset, Dim, ImageLayout, Kind, Limits, Metric, Schema, Store,
    WriteOptions,
};

use crate::errors::{IntoPy, usage};

/// Which version `open` means: at most one of `version`, `tag`, `branch` (a version on a
/// branch when both `branch` and `version` are given).
pub(crate) fn at_of(version: Option<u64>, tag: Option<String>, branch: Option<String>) -> PyResult<At> {
    Ok(match (version, tag, branch) {
        (None, None, None) => At::Latest,
        (Some(v), None, None) => At::Version(v),
        (None, Some(t), None) => At::Tag(t),
        (None, None, Some(b)) => At::Branch(b),
        (Some(v), None, Some(b)) => At::BranchVersion(b, v),
        _ => return Err(usage("give at most one of version= and tag= (branch= may go with version=)")),
    })
}

/// The numpy dtype string of a fixed-size dtype (little-endian, as stored).
pub(crate) fn numpy_dtype(d: DType) -> &'static str {
    match d {
        DType::Bool => "bool",
        DType::U8 | DType::Utf8 | DType::Bytes => "u1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::I8 => "i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::F16 => "<f2",
        // numpy has no bfloat16: values are widened to float32 on the way out (exact).
        DType::Bf16 | DType::F32 => "<f4",
        DType::F64 => "<f8",
    }
}

/// The kind's parameters as a dict (empty for kinds without any).
fn kind_params<'py>(py: Python<'py>, kind: &Kind) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    match kind {
        Kind::Image { layout } => d.set_item("layout", layout.name())?,
        Kind::Video { fps_milli } => d.set_item("fps_milli", fps_milli)?,
        Kind::Audio { sample_rate } => d.set_item("sample_rate", sample_rate)?,
        Kind::Tokens { vocab_size } => d.set_item("vocab_size", vocab_size)?,
        Kind::Embedding { metric } => d.set_item("metric", metric.name())?,
        Kind::ClassLabel { names } => d.set_item("names", names.clone())?,
        Kind::BBox { format, normalized } => {
            d.set_item("format", format.name())?;
            d.set_item("normalized", normalized)?;
        }
        _ => {}
    }
    Ok(d)
}

/// A column as the dict `ds.schema` lists.
fn column_dict<'py>(py: Python<'py>, c: &Column) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &c.name)?;
    d.set_item("id", c.id)?;
    d.set_item("dtype", c.dtype.name())?;
    let shape: Vec<Option<u64>> = c
        .shape
        .iter()
        .map(|dim| match dim {
            Dim::Fixed(n) => Some(*n),
            Dim::Ragged => None,
        })
        .collect();
    d.set_item("shape", shape)?;
    d.set_item("kind", c.kind.name())?;
    d.set_item("kind_params", kind_params(py, &c.kind)?)?;
    d.set_item("nullable", c.nullable)?;
    d.set_item("compression", c.compression.to_string())?;
    let meta: BTreeMap<&str, &str> = c.metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    d.set_item("metadata", meta)?;
    Ok(d)
}

/// Reads an optional key of a column spec.
fn get<'py, T: FromPyObjectOwned<'py>>(spec: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<T>> {
    match spec.get_item(key)? {
        Some(v) if !v.is_none() => v
            .extract::<T>()
            .map(Some)
            .map_err(|e| usage(format!("column spec key {key:?}: {}", Into::<PyErr>::into(e)))),
        _ => Ok(None),
    }
}

/// A word of a column spec (`layout`, `metric`, `format`), as the reference spells it.
fn word<T: std::str::FromStr<Err = tessera::ParseWordError>>(
    p: &Bound<'_, PyDict>,
    key: &str,
    default: T,
) -> PyResult<T> {
    match get::<String>(p, key)? {
        Some(s) => s.parse().map_err(|e: tessera::ParseWordError| usage(e.to_string())),
        None => Ok(default),
    }
}

fn parse_kind(name: &str, p: &Bound<'_, PyDict>) -> PyResult<Kind> {
    Ok(match name {
        "generic" => Kind::Generic,
        "text" => Kind::Text,
        "mask" => Kind::Mask,
        "json" => Kind::Json,
        "image" => Kind::Image { layout: word(p, "layout", ImageLayout::Hwc)? },
        "video" => Kind::Video { fps_milli: get(p, "fps_milli")?.unwrap_or(0) },
        "audio" => Kind::Audio {
            sample_rate: get(p, "sample_rate")?.ok_or_else(|| usage("an audio column needs sample_rate"))?,
        },
        "tokens" => Kind::Tokens { vocab_size: get(p, "vocab_size")? },
        "embedding" => Kind::Embedding { metric: word(p, "metric", Metric::Unspecified)? },
        "class_label" => Kind::ClassLabel { names: get(p, "names")?.unwrap_or_default() },
        "bbox" => Kind::BBox {
            format: word(p, "format", BBoxFormat::Xyxy)?,
            normalized: get(p, "normalized")?.unwrap_or(false),
        },
        other => {
            return Err(usage(format!("unknown column kind {other:?} (expected one of {})", Kind::NAMES.join(", "))));
        }
    })
}

/// A column from its spec dict (the keys `ds.schema` lists; only `name` and `dtype` are
/// required).
fn parse_column(spec: &Bound<'_, PyDict>) -> PyResult<Column> {
    let name: String = get(spec, "name")?.ok_or_else(|| usage("a column spec needs \"name\""))?;
    let dtype_name: String = get(spec, "dtype")?.ok_or_else(|| usage(format!("column {name:?} needs \"dtype\"")))?;
    let dtype =
        DType::from_name(&dtype_name).ok_or_else(|| usage(format!("column {name:?}: unknown dtype {dtype_name:?}")))?;
    let shape: Vec<Option<u64>> = get(spec, "shape")?.unwrap_or_default();
    let shape: Vec<Dim> = shape.into_iter().map(|d| d.map_or(Dim::Ragged, Dim::Fixed)).collect();
    let mut col = Column::new(name, dtype, &shape);
    let params = match spec.get_item("kind_params")? {
        Some(p) if !p.is_none() => p.cast_into::<PyDict>().map_err(|_| usage("kind_params must be a dict"))?,
        _ => PyDict::new(spec.py()),
    };
    if let Some(kind) = get::<String>(spec, "kind")? {
        col = col.with_kind(parse_kind(&kind, &params)?);
    }
    if let Some(c) = get::<String>(spec, "compression")? {
        col = col.with_compression(c.parse().map_err(|e: tessera::ParseWordError| usage(e.to_string()))?);
    }
    if get::<bool>(spec, "nullable")?.unwrap_or(false) {
        col = col.nullable();
    }
    for (k, v) in get::<BTreeMap<String, String>>(spec, "metadata")?.unwrap_or_default() {
        col = col.with_metadata(k, v);
    }
    Ok(col)
}

/// One column of rows handed over by `append`: `(name, rows, values, shapes, valid)` with
/// the rows' bytes back to back, every row's full shape flattened (rank numbers per row:
/// 1 for `utf8`/`bytes`), and a validity flag per row (null rows contribute no bytes).
pub(crate) type ColumnRows<'py> = (String, usize, RowBytes<'py>, Vec<u64>, Option<Vec<bool>>);

/// The values of a [`ColumnRows`]: `bytes`, or a contiguous 1-D `uint8` numpy array viewing
/// the caller's array. The array form spares the two copies `ndarray.tobytes()` and a
/// `Vec<u8>` would make of every fixed-shape column (a parallel writer's input is mostly
/// those); the bytes are read once, into the batch, with the GIL held.
#[derive(FromPyObject)]
pub(crate) enum RowBytes<'py> {
    /// A `uint8` array; `as_slice` rejects a non-contiguous one.
    Array(PyReadonlyArray1<'py, u8>),
    /// A `bytes` object (ragged, `utf8` and `bytes` columns).
    Bytes(Bound<'py, PyBytes>),
}

impl RowBytes<'_> {
    fn as_slice(&self) -> PyResult<&[u8]> {
        match self {
            Self::Array(a) => a.as_slice().map_err(|_| usage("row values must be a contiguous uint8 array")),
            Self::Bytes(b) => Ok(b.as_bytes()),
        }
    }
}

/// The rows handed over by `append` (one `ColumnRows` per column) as a batch of `schema`.
pub(crate) fn batch_of(schema: &Schema, columns: &[ColumnRows<'_>]) -> PyResult<Batch> {
    let mut batch = Batch::new();
    for (name, rows, values, shapes, valid) in columns {
        let col = schema.column(name).ok_or_else(|| usage(format!("the schema has no column {name:?}")))?;
        let data = column_data(col, *rows, values.as_slice()?, shapes, valid.as_deref())?;
        batch.push(name.clone(), data).py_err()?;
    }
    Ok(batch)
}

fn column_data(
    col: &Column,
    rows: usize,
    values: &[u8],
    shapes: &[u64],
    valid: Option<&[bool]>,
) -> PyResult<ColumnData> {
    let name = &col.name;
    let rank = if col.dtype.is_variable() { 1 } else { col.shape.len() };
    if shapes.len() != rows.checked_mul(rank).ok_or_else(|| usage("row count overflows"))? {
        return Err(usage(format!("column {name:?}: {} shape entries for {rows} rows of rank {rank}", shapes.len())));
    }
    if valid.is_some_and(|v| v.len() != rows) {
        return Err(usage(format!("column {name:?}: the validity list does not have {rows} entries")));
    }
    if valid.is_some() && !col.nullable {
        return Err(usage(format!("column {name:?} is not nullable")));
    }
    let mut data = ColumnData::for_column(col);
    let mut at = 0usize;
    for i in 0..rows {
        if valid.is_some_and(|v| !v[i]) {
            data.push_null().py_err()?;
            continue;
        }
        let shape = &shapes[i * rank..(i + 1) * rank];
        let len = shape
            .iter()
            .try_fold(col.dtype.item_size() as u64, |a, &d| a.checked_mul(d))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| usage(format!("column {name:?} row {i}: shape {shape:?} overflows")))?;
        let bytes = at
            .checked_add(len)
            .and_then(|end| values.get(at..end))
            .ok_or_else(|| usage(format!("column {name:?}: the values end before row {i}")))?;
        data.push_row(shape, bytes).map_err(|e| usage(format!("column {name:?} row {i}: {e}")))?;
        at += len;
    }
    if at != values.len() {
        return Err(usage(format!(
            "column {name:?}: {} bytes of values left over after {rows} rows",
            values.len() - at
        )));
    }
    Ok(data)
}

/// Splits sorted-or-not row indices into runs of consecutive rows, in the given order.
fn runs(rows: &[u64]) -> Vec<std::ops::Range<u64>> {
    let mut out: Vec<std::ops::Range<u64>> = Vec::new();
    for &r in rows {
        match out.last_mut() {
            Some(run) if run.end == r => run.end += 1,
            _ => out.push(r..r + 1),
        }
    }
    out
}

/// One column read back as the pieces `tessera/__init__.py` assembles:
/// `("fixed", array [n, dims…], valid)`, `("ragged", flat values, shapes i64 [n, rank], valid)`,
/// `("utf8", [str | None])` or `("bytes", [bytes | None])`.
fn column_out<'py>(py: Python<'py>, col: &Column, data: &ColumnData) -> PyResult<Bound<'py, PyAny>> {
    let n = data.len();
    let valid = data.validity().map(|v| PyArray1::from_slice(py, v));
    if col.dtype.is_variable() {
        let items = (0..n).map(|i| -> PyResult<Bound<'py, PyAny>> {
            if !data.is_valid(i) {
                return Ok(py.None().into_bound(py));
            }
            let row = data.row(i);
            Ok(if col.dtype == DType::Utf8 {
                let s =
                    std::str::from_utf8(row).map_err(|_| usage(format!("column {:?} row {i}: not UTF-8", col.name)))?;
                PyString::new(py, s).into_any()
            } else {
                PyBytes::new(py, row).into_any()
            })
        });
        let list = PyList::new(py, items.collect::<PyResult<Vec<_>>>()?)?;
        return (col.dtype.name(), list).into_pyobject(py).map(Bound::into_any);
    }
    let values = if col.dtype == DType::Bf16 {
        // Widen to float32: the upper half of a binary32 is exactly the bfloat16.
        data.values()
            .chunks_exact(2)
            .flat_map(|b| (u32::from(u16::from_le_bytes([b[0], b[1]])) << 16).to_le_bytes())
            .collect()
    } else {
        data.values().to_vec()
    };
    let flat = PyArray1::from_vec(py, values).call_method1("view", (numpy_dtype(col.dtype),))?;
    if col.ragged_dims() == 0 {
        let mut shape: Vec<usize> = vec![n];
        for d in &col.shape {
            if let Dim::Fixed(x) = d {
                shape.push(usize::try_from(*x).map_err(|_| usage("shape overflows"))?);
            }
        }
        let arr = flat.call_method1("reshape", (shape,))?;
        return ("fixed", arr, valid).into_pyobject(py).map(Bound::into_any);
    }
    let rank = col.shape.len();
    let mut shapes: Vec<i64> = Vec::with_capacity(n * rank);
    for i in 0..n {
        shapes.extend(data.row_shape(i).iter().map(|&d| d as i64));
    }
    let shapes = PyArray1::from_vec(py, shapes).reshape([n, rank])?;
    ("ragged", flat, shapes, valid).into_pyobject(py).map(Bound::into_any)
}

/// One opened, validated version of a dataset.
#[pyclass(module = "tessera._native", name = "Dataset", frozen)]
#[derive(Debug)]
pub(crate) struct PyDataset {
    pub(crate) inner: Dataset,
    pub(crate) location: String,
}

#[pymethods]
impl PyDataset {
    /// Opens a version of the dataset at `location` (a path or store URL).
    #[staticmethod]
    #[pyo3(signature = (location, version=None, tag=None, branch=None))]
    fn open(
        py: Python<'_>,
        location: String,
        version: Option<u64>,
        tag: Option<String>,
        branch: Option<String>,
    ) -> PyResult<Self> {
        let at = at_of(version, tag, branch)?;
        let inner = py.detach(|| Store::open(&location).and_then(|s| Dataset::open_at(&s, &at, Limits::default())));
        Ok(Self { inner: inner.py_err()?, location })
    }

    /// Creates a dataset (version 1, no rows) from a list of column spec dicts, its fragments
    /// indexed by `index`: `log` or `tree` (SPEC.md §8.3).
    #[staticmethod]
    #[pyo3(signature = (location, columns, index="log"))]
    #[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over as owned values
    fn create(py: Python<'_>, location: String, columns: Vec<Bound<'_, PyDict>>, index: &str) -> PyResult<Self> {
        let index = index.parse::<tessera::IndexLayout>().py_err()?;
        let cols = columns.iter().map(parse_column).collect::<PyResult<Vec<_>>>()?;
        let schema = Schema::new(cols).py_err()?;
        let options = WriteOptions { index, ..WriteOptions::default() };
        let inner = py.detach(|| Dataset::create(&location, schema, &options)).py_err()?;
        Ok(Self { inner, location })
    }

    /// Opens another version of the same dataset.
    #[pyo3(signature = (version=None, tag=None, branch=None))]
    fn checkout(
        &self,
        py: Python<'_>,
        version: Option<u64>,
        tag: Option<String>,
        branch: Option<String>,
    ) -> PyResult<Self> {
        let at = at_of(version, tag, branch)?;
        let inner = py.detach(|| self.inner.checkout(&at)).py_err()?;
        Ok(Self { inner, location: self.location.clone() })
    }

    /// The location it was opened from.
    #[getter]
    fn location(&self) -> &str {
        &self.location
    }

    /// The version number.
    #[getter]
    fn version(&self) -> u64 {
        self.inner.version()
    }

    /// The branch of the version.
    #[getter]
    fn branch(&self) -> &str {
        self.inner.branch()
    }

    /// How the version indexes its fragments: `log` or `tree`.
    #[getter]
    fn index(&self) -> &'static str {
        if self.inner.manifest().reader_flags & tessera::manifest::READER_FLAG_FRAGMENT_TREE == 0 {
            "log"
        } else {
            "tree"
        }
    }

    /// Live rows.
    #[getter]
    fn row_count(&self) -> u64 {
        self.inner.row_count()
    }

    /// The columns, as dicts.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let cols = self.inner.schema().columns.iter().map(|c| column_dict(py, c)).collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, cols)
    }

    /// Reads the rows `rows` (global indices, any order, repeats allowed) of the projected
    /// columns: a dict from column name to the pieces described on `column_out`.
    #[pyo3(signature = (rows, columns=None))]
    #[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over as owned values
    fn read<'py>(&self, py: Python<'py>, rows: Vec<u64>, columns: Option<Vec<String>>) -> PyResult<Bound<'py, PyDict>> {
        let n = self.inner.row_count();
        if let Some(bad) = rows.iter().find(|&&r| r >= n) {
            return Err(usage(format!("row {bad} is out of range (the version has {n} rows)")));
        }
        let names: Vec<&str> = columns.as_deref().map(|c| c.iter().map(String::as_str).collect()).unwrap_or_default();
        let projection = columns.as_ref().map(|_| names.as_slice());
        let cols: Vec<Column> = self.inner.project(projection).py_err()?.into_iter().cloned().collect();
        let datas = py.detach(|| -> tessera::Result<Vec<ColumnData>> {
            let mut out: Vec<ColumnData> = cols.iter().map(ColumnData::for_column).collect();
            let proj: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
            for run in runs(&rows) {
                let batch = self.inner.read_rows(run, Some(&proj))?;
                for (c, o) in cols.iter().zip(out.iter_mut()) {
                    let got = batch
                        .get(&c.name)
                        .ok_or_else(|| tessera::Error::Usage(format!("the reader returned no column {:?}", c.name)))?;
                    o.extend_from(got, 0..got.len())?;
                }
            }
            Ok(out)
        });
        let datas = datas.py_err()?;
        let out = PyDict::new(py);
        for (c, d) in cols.iter().zip(&datas) {
            out.set_item(&c.name, column_out(py, c, d)?)?;
        }
        Ok(out)
    }

    /// Appends rows (one `ColumnRows` tuple per column) as one commit; returns the new
    /// version.
    #[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over as owned values
    fn append(&self, py: Python<'_>, columns: Vec<ColumnRows<'_>>, message: &str) -> PyResult<Self> {
        let batch = batch_of(self.inner.schema(), &columns)?;
        let inner = py.detach(|| self.inner.append(&batch, message, WriteOptions::default())).py_err()?;
        Ok(Self { inner, location: self.location.clone() })
    }

    /// Tags this version.
    #[pyo3(signature = (name, message=""))]
    fn tag(&self, py: Python<'_>, name: &str, message: &str) -> PyResult<()> {
        py.detach(|| self.inner.create_tag(name, message, &WriteOptions::default())).py_err()
    }

    /// Creates a branch at this version; returns the branch's first version.
    fn create_branch(&self, py: Python<'_>, name: &str) -> PyResult<Self> {
        let inner = py.detach(|| self.inner.create_branch(name, &WriteOptions::default())).py_err()?;
        Ok(Self { inner, location: self.location.clone() })
    }

    /// Tag names, sorted.
    fn tags(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        py.detach(|| self.inner.tags()).py_err()
    }

    /// Saves rows of this version, in this order, as a view (SPEC.md §"Views").
    #[pyo3(signature = (name, rows, query=""))]
    #[allow(clippy::needless_pass_by_value)] // pyo3 extracts a Python list as an owned Vec
    fn save_view(&self, py: Python<'_>, name: &str, rows: Vec<u64>, query: &str) -> PyResult<()> {
        py.detach(|| self.inner.save_view(name, &rows, query).map(|_| ())).py_err()
    }

    /// View names, sorted.
    fn views(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        py.detach(|| self.inner.views()).py_err()
    }

    /// Builds a vector index (IVF-Flat) over `column` of this version (SPEC.md §24); returns
    /// its summary.
    #[pyo3(signature = (name, column, metric="cosine", lists=None, sample=None, iterations=10))]
    #[allow(clippy::too_many_arguments)]
    fn create_index<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        column: &str,
        metric: &str,
        lists: Option<usize>,
        sample: Option<usize>,
        iterations: u32,
    ) -> PyResult<Bound<'py, PyDict>> {
        let metric = match metric {
            "cosine" => tessera::distance::Distance::Cosine,
            "l2" => tessera::distance::Distance::L2,
            other => return Err(usage(format!("metric {other:?}: use 'cosine' or 'l2'"))),
        };
        let spec =
            tessera::ann::IndexSpec { lists, sample, iterations, ..tessera::ann::IndexSpec::new(name, column, metric) };
        let index = py.detach(|| self.inner.create_vector_index(&spec, &tessera::WriteOptions::default())).py_err()?;
        index_summary(py, &index)
    }

    /// Vector index names, sorted.
    fn indexes(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        py.detach(|| self.inner.vector_indexes()).py_err()
    }

    /// One vector index's summary (its version, column, metric, lists, rows, bytes).
    fn index_info<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let index = py.detach(|| self.inner.vector_index(name)).py_err()?;
        index_summary(py, &index)
    }

    /// Deletes a vector index (no version changes).
    fn drop_index(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        py.detach(|| self.inner.delete_vector_index(name)).py_err()
    }

    /// The `k` rows nearest `vector` by the index's metric, probing `nprobe` lists (default
    /// 1/64 of them, at least 8): `(row, distance)` pairs, nearest first (SPEC.md ANN-10).
    #[pyo3(signature = (index, vector, k=10, nprobe=None))]
    #[allow(clippy::needless_pass_by_value)] // pyo3 extracts a Python list as an owned Vec
    fn search(
        &self,
        py: Python<'_>,
        index: &str,
        vector: Vec<f64>,
        k: usize,
        nprobe: Option<usize>,
    ) -> PyResult<Vec<(u64, f64)>> {
        py.detach(|| -> tessera::Result<Vec<(u64, f64)>> {
            let ix = self.inner.vector_index(index)?;
            let nprobe = nprobe.unwrap_or_else(|| ix.default_nprobe());
            let (hits, _) = ix.search(self.inner.store(), &vector, k, nprobe)?;
            Ok(hits.into_iter().map(|h| (h.row, h.distance)).collect())
        })
        .py_err()
    }

    /// Rows within `threshold` of a row with a smaller id, among their list and the
    /// `probe - 1` nearest lists, ascending (curation: drop them).
    #[pyo3(signature = (index, threshold, probe=1))]
    fn near_duplicates(&self, py: Python<'_>, index: &str, threshold: f64, probe: usize) -> PyResult<Vec<u64>> {
        py.detach(|| self.inner.vector_index(index)?.near_duplicates(self.inner.store(), threshold, probe)).py_err()
    }

    /// Branch names, sorted.
    fn branches(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        py.detach(|| self.inner.branches()).py_err()
    }

    /// This version's history, newest first, as dicts.
    fn log<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let log = py.detach(|| self.inner.log()).py_err()?;
        let items = log
            .iter()
            .map(|m| -> PyResult<Bound<'py, PyDict>> {
                let d = PyDict::new(py);
                d.set_item("version", m.version)?;
                d.set_item("branch", &m.branch)?;
                d.set_item("message", &m.message)?;
                d.set_item("timestamp_ms", m.timestamp_ms)?;
                d.set_item("row_count", m.row_count)?;
                d.set_item("parent", m.parent.as_ref().map(|p| (p.branch.clone(), p.version)))?;
                Ok(d)
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// What changed from `older` to this version (`rows_added`, `rows_deleted`,
    /// `rows_changed`, `columns_added`, `columns_dropped`, `columns_renamed`).
    fn diff_from<'py>(&self, py: Python<'py>, older: &PyDataset) -> PyResult<Bound<'py, PyDict>> {
        let d = py.detach(|| self.inner.diff_from(&older.inner)).py_err()?;
        let out = PyDict::new(py);
        out.set_item("from_version", older.inner.version())?;
        out.set_item("to_version", self.inner.version())?;
        out.set_item("rows_added", d.rows_added)?;
        out.set_item("rows_deleted", d.rows_deleted)?;
        out.set_item("rows_changed", d.rows_changed)?;
        out.set_item("columns_added", d.columns_added)?;
        out.set_item("columns_dropped", d.columns_dropped)?;
        out.set_item("columns_renamed", d.columns_renamed)?;
        Ok(out)
    }

    /// Reads every byte of the version and checks every checksum and value; raises the
    /// first fault's exception, or returns what was checked.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = py.detach(|| self.inner.verify()).py_err()?;
        let out = PyDict::new(py);
        out.set_item("files", r.files)?;
        out.set_item("bytes", r.bytes)?;
        out.set_item("blocks", r.blocks)?;
        out.set_item("rows", r.rows)?;
        Ok(out)
    }

    fn __repr__(&self) -> String {
        format!(
            "<tessera Dataset {} {}@{} rows={}>",
            self.location,
            self.inner.branch(),
            self.inner.version(),
            self.inner.row_count()
        )
    }
}

/// A vector index's summary as a dict.
fn index_summary<'py>(py: Python<'py>, i: &tessera::ann::VectorIndex) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &i.name)?;
    d.set_item("branch", &i.target.branch)?;
    d.set_item("version", i.target.version)?;
    d.set_item("column", &i.column)?;
    d.set_item("metric", tessera::ann::metric_name(i.metric))?;
    d.set_item("lists", i.nlist())?;
    d.set_item("rows", i.rows)?;
    d.set_item("bytes", i.data_size)?;
    d.set_item("default_nprobe", i.default_nprobe())?;
    Ok(d)
}
