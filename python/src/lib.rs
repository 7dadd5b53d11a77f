//! # `tessera._native`: the Rust half of the Python package `tessera`
//!
//! pyo3 bindings over the reference reader/writer (`tessera`) and the framework-free loader
//! core (`tessera-loader`). The pure-Python package in `python/tessera/` is the public API;
//! this module gives it:
//!
//! * `Dataset` (`dataset`): open/create, schema, reads, appends, tags, branches, log, diff,
//!   verify. Storage calls release the GIL.
//! * `Loader` / `Epoch` (`loader`): batches as numpy arrays over the loader's own buffers
//!   (`buffer`), so `torch.from_numpy` makes tensors without copying; a buffer is refilled
//!   only when no Python object can see it any more. Waiting for a batch releases the GIL.
//! * `write_fragments` / `commit_fragments` (`fragments`): parallel writers, one commit;
//!   `fragment_rows` / `open_view`: the units a parallel reader splits.
//! * `ingest` (`ingest`): inputs decoded once into a dataset by `tessera-ingest`, the code
//!   `tessera ingest` runs.
//! * `cast_numbers` (`cast`): numbers into a column's element type by `tessera::cast`'s
//!   rule, for the values numpy cannot convert exactly.
//! * The exception classes (`errors`): `TesseraError` and one subclass per spec error class.
//!
//! Built by maturin as an abi3 extension module (one wheel for `CPython` 3.9 and newer); it links no
//! libtorch: torch is imported lazily by the Python layer.

#![deny(rustdoc::broken_intra_doc_links)]

mod buffer;
mod cast;
mod dataset;
mod errors;
mod fragments;
mod ingest;
mod loader;
mod packing;
mod transform;

use pyo3::prelude::*;

/// The native module, imported as `tessera._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<dataset::PyDataset>()?;
    m.add_class::<loader::PyLoader>()?;
    m.add_class::<loader::PyEpoch>()?;
    m.add_class::<packing::PyPacker>()?;
    m.add_class::<buffer::BufferOwner>()?;
    m.add_function(wrap_pyfunction!(fragments::write_fragments, m)?)?;
    m.add_function(wrap_pyfunction!(fragments::commit_fragments, m)?)?;
    m.add_function(wrap_pyfunction!(fragments::fragment_rows, m)?)?;
    m.add_function(wrap_pyfunction!(fragments::open_view, m)?)?;
    m.add_function(wrap_pyfunction!(cast::cast_numbers, m)?)?;
    m.add_function(wrap_pyfunction!(ingest::ingest, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
