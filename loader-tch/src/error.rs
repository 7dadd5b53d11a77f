//! The loader's error type is the core's ([`tessera_loader::LoaderError`]); a failed libtorch
//! call becomes its `Framework` variant.

pub use tessera_loader::{LoaderError, Result};

/// A failed libtorch call, with what the loader was doing.
pub(crate) fn tensor_err(context: impl Into<String>, e: tch::TchError) -> LoaderError {
    LoaderError::framework(context, e)
}
