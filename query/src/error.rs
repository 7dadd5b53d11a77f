//! The crate's error type: every error carries a spec error class (SPEC.md §17).

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use tessera::ErrorClass;

/// What can go wrong running a query.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The query is wrong: bad SQL (with the position), an unknown column (with the real
    /// ones), a function applied to the wrong types.
    #[error("{0}")]
    Usage(String),
    /// Reading the dataset failed (storage, checksums, validation); its own class.
    #[error(transparent)]
    Dataset(#[from] tessera::Error),
    /// The query engine failed while executing a valid plan.
    #[error("query engine: {0}")]
    Engine(DataFusionError),
}

impl QueryError {
    /// The spec error class: `usage` for the query's faults, the dataset's own class for read
    /// errors, `io` for engine failures.
    #[must_use]
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Usage(_) => ErrorClass::Usage,
            Self::Dataset(e) => e.class(),
            Self::Engine(_) => ErrorClass::Io,
        }
    }
}

impl From<DataFusionError> for QueryError {
    /// A dataset error raised inside the engine (by the scan) keeps its class; planning
    /// errors and values the query's own expressions cannot compute (a cast of `'x'` to a
    /// number, a division by zero, an overflow) are the query's fault (`usage`); the rest is
    /// the engine's.
    fn from(e: DataFusionError) -> Self {
        let e = match take_dataset_error(e) {
            Ok(inner) => return Self::Dataset(inner),
            Err(e) => e,
        };
        match e.find_root() {
            DataFusionError::SQL(..)
            | DataFusionError::Plan(_)
            | DataFusionError::SchemaError(..)
            | DataFusionError::NotImplemented(_) => Self::Usage(e.find_root().to_string()),
            DataFusionError::ArrowError(a, _)
                if matches!(
                    **a,
                    ArrowError::CastError(_)
                        | ArrowError::ParseError(_)
                        | ArrowError::DivideByZero
                        | ArrowError::ArithmeticOverflow(_)
                ) =>
            {
                Self::Usage(e.find_root().to_string())
            }
            _ => Self::Engine(e),
        }
    }
}

/// The `tessera::Error` a scan wrapped into the engine's error, or the error unchanged.
fn take_dataset_error(e: DataFusionError) -> Result<tessera::Error, DataFusionError> {
    match e {
        DataFusionError::External(inner) => {
            inner.downcast::<tessera::Error>().map(|b| *b).map_err(DataFusionError::External)
        }
        DataFusionError::Context(what, inner) => {
            take_dataset_error(*inner).map_err(|inner| DataFusionError::Context(what, Box::new(inner)))
        }
        other => Err(other),
    }
}

/// Results of this crate.
pub type QueryResult<T> = std::result::Result<T, QueryError>;
