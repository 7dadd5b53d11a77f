//! `cast_numbers`: a flat array of numbers into a column's element type, by the one rule of
//! `tessera::cast` (values the column cannot hold are an error, never a silent change).
//!
//! The Python layer calls it for every input whose numpy dtype does not convert exactly
//! (numpy's "safe" casting) into the column's; exact conversions stay in numpy.

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tessera::DType;
use tessera::cast::{Number, push_numbers};

/// A 1-D contiguous array of float64, int64 or uint64 values.
#[derive(FromPyObject)]
pub(crate) enum Numbers<'py> {
    /// float64.
    F64(PyReadonlyArray1<'py, f64>),
    /// int64.
    I64(PyReadonlyArray1<'py, i64>),
    /// uint64.
    U64(PyReadonlyArray1<'py, u64>),
}

/// `values` in `dtype`'s little-endian bytes (a `uint8` array); `ValueError` naming the
/// first value that does not fit, and its index.
#[pyfunction]
#[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over as owned values
pub(crate) fn cast_numbers<'py>(
    py: Python<'py>,
    dtype: &str,
    values: Numbers<'py>,
) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let dtype = DType::from_name(dtype).ok_or_else(|| PyValueError::new_err(format!("unknown dtype {dtype:?}")))?;
    let not_contiguous = |_| PyValueError::new_err("values must be a contiguous 1-D array");
    let mut out = Vec::new();
    let result = match &values {
        Numbers::F64(a) => {
            push_numbers(dtype, a.as_slice().map_err(not_contiguous)?.iter().map(|&x| Number::F64(x)), &mut out)
        }
        Numbers::I64(a) => {
            push_numbers(dtype, a.as_slice().map_err(not_contiguous)?.iter().map(|&x| Number::I64(x)), &mut out)
        }
        Numbers::U64(a) => {
            push_numbers(dtype, a.as_slice().map_err(not_contiguous)?.iter().map(|&x| Number::U64(x)), &mut out)
        }
    };
    result.map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyArray1::from_vec(py, out))
}
