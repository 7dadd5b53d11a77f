//! Parallel writers from Python (SPEC.md §15.7): `write_fragments` writes data files and
//! returns fragment records as JSON text, which pickle and travel between processes (Ray tasks,
//! torchrun ranks) as plain strings; `commit_fragments` commits any number of them as one
//! version. Both release the GIL. `fragment_rows` and `open_view` give a parallel reader
//! its units of work.

use numpy::PyArray1;
use pyo3::prelude::*;
use tessera::{CommitMode, Dataset, FragmentRecord, Limits, Store, WriteOptions};

use crate::dataset::{ColumnRows, PyDataset, batch_of};
use crate::errors::{IntoPy, usage};

/// Writes rows (one `ColumnRows` tuple per column) as data files of `dataset`'s schema without
/// committing; returns one JSON fragment record per fragment written. `target_file_bytes`
/// bounds the raw bytes per data file (the writer's 64 MiB default when `None`).
#[pyfunction]
#[pyo3(signature = (dataset, columns, target_file_bytes=None))]
#[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over as owned values
pub(crate) fn write_fragments(
    py: Python<'_>,
    dataset: &PyDataset,
    columns: Vec<ColumnRows<'_>>,
    target_file_bytes: Option<u64>,
) -> PyResult<Vec<String>> {
    let batch = batch_of(dataset.inner.schema(), &columns)?;
    let mut options = WriteOptions::default();
    if let Some(t) = target_file_bytes {
        if t == 0 {
            return Err(usage("target_file_bytes must be at least 1"));
        }
        options.target_file_bytes = t;
    }
    let records = py.detach(|| dataset.inner.write_fragments(&batch, options)).py_err()?;
    records.iter().map(FragmentRecord::to_json).collect::<Result<Vec<_>, _>>().py_err()
}

/// Commits JSON fragment records as one new version on top of `dataset` (`mode`: `"append"`
/// or `"overwrite"`); returns the new version. Every record is validated first (FRG-03).
#[pyfunction]
#[pyo3(signature = (dataset, records, message="", mode="append"))]
#[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over as owned values
pub(crate) fn commit_fragments(
    py: Python<'_>,
    dataset: &PyDataset,
    records: Vec<String>,
    message: &str,
    mode: &str,
) -> PyResult<PyDataset> {
    let mode = match mode {
        "append" => CommitMode::Append,
        "overwrite" => CommitMode::Overwrite,
        other => return Err(usage(format!("mode must be \"append\" or \"overwrite\", not {other:?}"))),
    };
    let records = records.iter().map(|r| FragmentRecord::from_json(r)).collect::<Result<Vec<_>, _>>().py_err()?;
    let inner =
        py.detach(|| dataset.inner.commit_fragments(&records, mode, message, &WriteOptions::default())).py_err()?;
    Ok(PyDataset { inner, location: dataset.location.clone() })
}

/// Each fragment of `dataset` with live rows, in row order, as `(start, end, bytes)`: its global
/// row range and the stored bytes of its data files. The units a parallel reader splits on.
#[pyfunction]
pub(crate) fn fragment_rows(dataset: &PyDataset) -> Vec<(u64, u64, u64)> {
    dataset
        .inner
        .fragments()
        .iter()
        .filter(|f| f.fragment.live_rows() > 0)
        .map(|f| (f.rows().start, f.rows().end, f.fragment.files.iter().map(|d| d.size).sum()))
        .collect()
}

/// Opens the version view `name` of the dataset at `location` pins, after validating the view
/// (VAL-18), and returns it with the view's rows (global row ids of that version, in the view's
/// order, as a `uint64` array): what a parallel reader of a view splits.
#[pyfunction]
pub(crate) fn open_view<'py>(
    py: Python<'py>,
    location: String,
    name: &str,
) -> PyResult<(PyDataset, Bound<'py, PyArray1<u64>>)> {
    let (inner, view) =
        py.detach(|| Store::open(&location).and_then(|s| Dataset::open_view(&s, name, Limits::default()))).py_err()?;
    // The array is the rows themselves: a runs view (VIEW-11) is expanded here, 8 bytes a row.
    Ok((PyDataset { inner, location }, PyArray1::from_vec(py, view.rows.to_vec())))
}
