//! `tessera._native.Packer`: token packing (the core's `tessera_loader::Packer`) for
//! `Loader.packed()`.

use std::sync::{Arc, Mutex, PoisonError};

use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tessera_loader::{Elem, Loader, LoaderState, PackConfig, PackState, Packer};

use crate::buffer::PyHostBuffer;
use crate::errors::{IntoPy, from_loader, usage};
use crate::loader::elem_dtype;

/// One epoch of packed batches.
#[pyclass(module = "tessera._native", name = "Packer", frozen)]
#[derive(Debug)]
pub(crate) struct PyPacker {
    inner: Mutex<Option<Packer<PyHostBuffer>>>,
}

/// Packs `epoch` of `loader` (or continues from `state`, what `Packer.state()` gave); a
/// `stream` runs on into the next epochs.
pub(crate) fn pack(
    py: Python<'_>,
    loader: &Arc<Loader<PyHostBuffer>>,
    config: PackConfig,
    epoch: u64,
    state: Option<(String, u64)>,
    stream: bool,
) -> PyResult<PyPacker> {
    {
        let packer = match state {
            None if stream => py.detach(|| Packer::stream(loader.clone(), config, epoch)).py_err()?,
            None => py.detach(|| Packer::epoch(loader, config, epoch)).py_err()?,
            Some(text) => {
                let state = state_of(text)?;
                if stream {
                    py.detach(|| Packer::resume_stream(loader.clone(), config, &state)).py_err()?
                } else {
                    py.detach(|| Packer::resume(loader, config, &state)).py_err()?
                }
            }
        };
        Ok(PyPacker { inner: Mutex::new(Some(packer)) })
    }
}

/// A packing state from `(loader state JSON, tokens)`, as `state()` gives it.
fn state_of((loader, tokens): (String, u64)) -> PyResult<PackState> {
    let loader = LoaderState::from_json(&loader).map_err(|e| usage(format!("not a packing state: {e}")))?;
    Ok(PackState { loader, tokens })
}

#[pymethods]
impl PyPacker {
    /// The next packed batch as `(tokens [W, C], segment_ids [W, C], position_ids [W, C],
    /// pieces [n, 6], real_tokens, elem)`, or `None` after the last one. `pieces` rows are
    /// `(window, start, len, row, source, doc_offset)`. Waits with the GIL released.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let got =
            py.detach(|| self.inner.lock().unwrap_or_else(PoisonError::into_inner).as_mut().and_then(Iterator::next));
        let b = match got {
            None => return Ok(None),
            Some(Err(e)) => return Err(from_loader(&e)),
            Some(Ok(b)) => b,
        };
        let shape = [b.windows, b.context];
        let tokens = PyArray1::from_vec(py, b.tokens)
            .call_method1("view", (elem_dtype(b.elem),))?
            .call_method1("reshape", (shape,))?;
        let segments = PyArray1::from_vec(py, b.segment_ids).reshape(shape)?;
        let positions = PyArray1::from_vec(py, b.position_ids).reshape(shape)?;
        let flat: Vec<u64> = b
            .pieces
            .iter()
            .flat_map(|p| {
                [p.window as u64, p.start as u64, p.len as u64, p.row, u64::from(p.source), p.doc_offset as u64]
            })
            .collect();
        let pieces = PyArray1::from_vec(py, flat).reshape([b.pieces.len(), 6])?;
        let elem = if b.elem == Elem::Bf16 { "bf16" } else { elem_dtype(b.elem) };
        Ok(Some((tokens, segments, positions, pieces, b.real_tokens, elem).into_pyobject(py)?))
    }

    /// The state after the batches yielded so far: the loader's state (JSON text) before the
    /// document batch being consumed, and the tokens of it already emitted.
    fn state(&self) -> PyResult<(String, u64)> {
        let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let p = guard.as_ref().ok_or_else(|| usage("the packer was closed"))?;
        let s = p.state();
        Ok((s.loader.to_json(), s.tokens))
    }

    /// Stops the loader's workers and frees the epoch.
    fn close(&self, py: Python<'_>) {
        let p = self.inner.lock().unwrap_or_else(PoisonError::into_inner).take();
        py.detach(move || drop(p));
    }
}
