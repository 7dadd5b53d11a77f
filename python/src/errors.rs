//! Python exceptions mirroring the spec's error classes (`tessera::ErrorClass`), and the
//! mapping of the reader's and the loader's errors onto them.
//!
//! Every exception derives from `tessera.TesseraError` and carries the class name as the
//! attribute `error_class` (`"malformed"`, `"io"`, …), so a caller can catch one class, or
//! all of them, and log the spec's name.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyModule;
use tessera::ErrorClass;
use tessera_loader::LoaderError;

pyo3::create_exception!(tessera, TesseraError, PyException, "Base class of every Tessera error.");
pyo3::create_exception!(
    tessera,
    MalformedError,
    TesseraError,
    "Stored bytes that cannot be decoded (bad magic, truncation, checksum mismatch)."
);
pyo3::create_exception!(tessera, InvalidError, TesseraError, "Stored bytes that decode but break a rule of the spec.");
pyo3::create_exception!(
    tessera,
    UnsupportedError,
    TesseraError,
    "Well-formed, but needs a feature this implementation does not have."
);
pyo3::create_exception!(tessera, LimitError, TesseraError, "A size or count above a hard or configured limit.");
pyo3::create_exception!(tessera, StorageError, TesseraError, "The storage failed (the spec's `io` class).");
pyo3::create_exception!(tessera, NotFoundError, TesseraError, "The dataset, version, branch or tag does not exist.");
pyo3::create_exception!(
    tessera,
    ConflictError,
    TesseraError,
    "Another writer committed first, or the branch, tag or dataset exists."
);
pyo3::create_exception!(
    tessera,
    UsageError,
    TesseraError,
    "The arguments are wrong (unknown column, bad value, a resume state of another version)."
);

/// Registers the exception classes in the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("TesseraError", py.get_type::<TesseraError>())?;
    m.add("MalformedError", py.get_type::<MalformedError>())?;
    m.add("InvalidError", py.get_type::<InvalidError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("LimitError", py.get_type::<LimitError>())?;
    m.add("StorageError", py.get_type::<StorageError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("ConflictError", py.get_type::<ConflictError>())?;
    m.add("UsageError", py.get_type::<UsageError>())?;
    Ok(())
}

/// The exception of a class (`None`: the base class, for failures without a spec class).
fn exception(class: Option<ErrorClass>, message: String) -> PyErr {
    let (err, name) = match class {
        Some(ErrorClass::Malformed) => (MalformedError::new_err(message), "malformed"),
        Some(ErrorClass::Invalid) => (InvalidError::new_err(message), "invalid"),
        Some(ErrorClass::Unsupported) => (UnsupportedError::new_err(message), "unsupported"),
        Some(ErrorClass::Limit) => (LimitError::new_err(message), "limit"),
        Some(ErrorClass::Io) => (StorageError::new_err(message), "io"),
        Some(ErrorClass::NotFound) => (NotFoundError::new_err(message), "not_found"),
        Some(ErrorClass::Conflict) => (ConflictError::new_err(message), "conflict"),
        Some(ErrorClass::Usage) => (UsageError::new_err(message), "usage"),
        // `ErrorClass` is non-exhaustive: a class added later still raises a TesseraError.
        Some(other) => (TesseraError::new_err(message), other.as_str()),
        None => (TesseraError::new_err(message), "internal"),
    };
    Python::attach(|py| {
        // Best effort: the class name is a convenience on top of the exception type.
        let _ = err.value(py).setattr("error_class", name);
    });
    err
}

/// Maps a reference-reader error to its class's exception.
pub(crate) fn from_tessera(e: &tessera::Error) -> PyErr {
    exception(Some(e.class()), e.to_string())
}

/// Maps an ingest error to its class's exception; its notes follow the message, one per line.
pub(crate) fn from_ingest(e: &tessera_ingest::IngestError) -> PyErr {
    exception(Some(e.class()), e.to_string())
}

/// Maps a loader error to its class's exception (the base class for a worker panic, a
/// stopped loader or a framework failure, which have no spec class).
pub(crate) fn from_loader(e: &LoaderError) -> PyErr {
    exception(e.class(), e.to_string())
}

/// A `usage` error raised by this package's own argument checks.
pub(crate) fn usage(message: impl Into<String>) -> PyErr {
    exception(Some(ErrorClass::Usage), message.into())
}

/// A `TesseraError` (no spec class) for a broken internal invariant: a bug, never bad input.
pub(crate) fn internal(message: impl Into<String>) -> PyErr {
    exception(None, format!("internal error: {}", message.into()))
}

/// `Result` → `PyResult` for reader calls.
pub(crate) trait IntoPy<T> {
    /// Converts the error into its Python exception.
    fn py_err(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for Result<T, tessera::Error> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(|e| from_tessera(&e))
    }
}

impl<T> IntoPy<T> for Result<T, LoaderError> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(|e| from_loader(&e))
    }
}
