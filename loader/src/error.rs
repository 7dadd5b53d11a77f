//! The loader's error type. Every variant says where it happened (object key, column, page,
//! row) so a message read in a training log locates the fault.

use crate::sampler::SamplerError;

/// Everything that can go wrong while opening a dataset or producing batches.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoaderError {
    /// The configuration is unusable (zero batch size, unknown column, bad env var, …).
    #[error("invalid loader configuration: {0}")]
    Config(String),
    /// Opening or validating the dataset version failed (manifest, segments, footers).
    #[error("{context}: {source}")]
    Dataset {
        /// What the loader was doing.
        context: String,
        /// The reference reader's error (carries the spec error class).
        #[source]
        source: tessera::Error,
    },
    /// Storage kept failing after every retry.
    #[error("storage error reading {path} (gave up after {attempts} attempts): {source}")]
    Storage {
        /// Object key or local path.
        path: String,
        /// Attempts made, the first included.
        attempts: u32,
        /// The last error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A page's CRC-32 did not match its bytes.
    #[error("checksum mismatch in {what}: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// Object, column and page.
        what: String,
        /// CRC-32 recorded in the footer.
        stored: u32,
        /// CRC-32 of the bytes read.
        computed: u32,
    },
    /// Stored bytes that do not decode or break a format rule (bad codec stream, sizes that
    /// disagree, a bool that is not 0/1, text that is not UTF-8).
    #[error("corrupt data in {what}: {reason}")]
    Corrupt {
        /// Object, column, page or row.
        what: String,
        /// What is wrong.
        reason: String,
        /// The spec's error class (`malformed` or `invalid`).
        class: tessera::ErrorClass,
    },
    /// A valid stored value the output tensor type cannot hold (a `u64` above `i64::MAX`).
    #[error("{what}: {reason}")]
    Unrepresentable {
        /// Column.
        what: String,
        /// What cannot be represented, and the option that would allow it.
        reason: String,
    },
    /// A resume state that belongs to another dataset version, seed or set of settings.
    #[error("resume state refused: {0}")]
    Resume(String),
    /// The sampler rejected the plan.
    #[error("sampler: {0}")]
    Sampler(#[from] SamplerError),
    /// The memory budget cannot hold what the configuration needs.
    #[error("memory budget of {budget} bytes is too small: {what} needs {needed} bytes")]
    Budget {
        /// The configured total budget.
        budget: u64,
        /// What needs the memory.
        what: String,
        /// Bytes it needs.
        needed: u64,
    },
    /// A call into the framework the batches are for failed (buffer allocation, device
    /// transfer, a transform's tensor op).
    #[error("{context}: {source}")]
    Framework {
        /// What the loader was doing.
        context: String,
        /// The framework's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A batch accessor named a column the batch does not have.
    #[error("batch has no column {0:?}")]
    NoColumn(String),
    /// A worker thread panicked (a bug); the message is the panic payload when it is text.
    #[error("loader worker panicked: {0}")]
    WorkerPanicked(String),
    /// The loader was stopped (dropped) while the operation waited.
    #[error("loader stopped")]
    Stopped,
}

/// `Result` with [`LoaderError`].
pub type Result<T, E = LoaderError> = std::result::Result<T, E>;

impl LoaderError {
    /// Wraps a reference-reader error with what the loader was doing.
    pub fn dataset(context: impl Into<String>, source: tessera::Error) -> Self {
        Self::Dataset { context: context.into(), source }
    }

    /// A [`LoaderError::Corrupt`].
    pub fn corrupt(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Corrupt { what: what.into(), reason: reason.into(), class: tessera::ErrorClass::Invalid }
    }

    /// The spec's error class (SPEC.md §"Reader validation"), for errors that have one:
    /// faults of stored bytes, limits, storage, and the caller's mistakes (`usage`).
    #[must_use]
    pub fn class(&self) -> Option<tessera::ErrorClass> {
        use tessera::ErrorClass as C;
        match self {
            Self::Checksum { .. } => Some(C::Malformed),
            Self::Corrupt { class, .. } => Some(*class),
            Self::Dataset { source, .. } => Some(source.class()),
            Self::Storage { .. } => Some(C::Io),
            Self::Budget { .. } => Some(C::Limit),
            Self::Config(_) | Self::Resume(_) | Self::Sampler(_) | Self::NoColumn(_) => Some(C::Usage),
            Self::Unrepresentable { .. } => Some(C::Unsupported),
            Self::Framework { .. } | Self::WorkerPanicked(_) | Self::Stopped => None,
        }
    }

    /// A [`LoaderError::Config`].
    pub fn config(reason: impl Into<String>) -> Self {
        Self::Config(reason.into())
    }

    /// A [`LoaderError::Framework`].
    pub fn framework(context: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Framework { context: context.into(), source: Box::new(source) }
    }

    /// True for faults in the stored bytes of one sample or page: what skip-bad-sample mode
    /// substitutes. Storage failures, configuration and budget errors are never data errors.
    #[must_use]
    pub fn is_data_error(&self) -> bool {
        match self {
            Self::Checksum { .. } | Self::Corrupt { .. } => true,
            Self::Dataset { source, .. } => matches!(
                source.class(),
                tessera::ErrorClass::Malformed | tessera::ErrorClass::Invalid | tessera::ErrorClass::Limit
            ),
            _ => false,
        }
    }
}

/// Maps a reference-reader error found while decoding stored bytes: checksum and format
/// faults become data errors ([`LoaderError::Checksum`], [`LoaderError::Corrupt`]); the rest
/// keep their context.
pub(crate) fn from_format(context: &str, e: tessera::Error) -> LoaderError {
    match e {
        tessera::Error::Checksum { what, stored, computed } => LoaderError::Checksum { what, stored, computed },
        tessera::Error::Malformed { what, reason } => {
            LoaderError::Corrupt { what, reason, class: tessera::ErrorClass::Malformed }
        }
        tessera::Error::Invalid { what, reason } => {
            LoaderError::Corrupt { what, reason, class: tessera::ErrorClass::Invalid }
        }
        other => LoaderError::dataset(context, other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_errors_are_classified() {
        assert!(LoaderError::Checksum { what: "x".into(), stored: 1, computed: 2 }.is_data_error());
        assert!(LoaderError::corrupt("x", "y").is_data_error());
        assert!(!LoaderError::config("x").is_data_error());
        assert!(!LoaderError::Stopped.is_data_error());
        let e = LoaderError::Storage { path: "p".into(), attempts: 3, source: "boom".into() };
        assert!(!e.is_data_error());
        assert!(e.to_string().contains("after 3 attempts"));
    }
}
