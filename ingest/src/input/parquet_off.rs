//! Parquet and Arrow IPC inputs when the crate is built without the `tables` feature (the
//! Python wheel's default, which then needs no Arrow or Parquet): the same items as
//! `parquet.rs`, whose only outcome is an `unsupported` error naming the feature.

use std::convert::Infallible;
use std::path::PathBuf;

use tessera::ErrorClass;

use super::wds::WdsOptions;
pub(crate) use super::{ARROW_EXTENSIONS, PARQUET_EXTENSIONS};
use super::{Bad, Decoded};
use crate::error::{IngestError, IngestResult};

/// Opened tables: never made without the feature.
#[derive(Debug)]
pub(crate) struct TableSource {
    pub(crate) rows: Option<u64>,
    pub(crate) bytes: u64,
    never: Infallible,
}

/// A slice of a record batch: never made without the feature.
#[derive(Debug)]
pub(crate) struct TableChunk {
    never: Infallible,
}

/// Always an `unsupported` error.
pub(crate) fn open(_files: Vec<PathBuf>, parquet: bool) -> IngestResult<TableSource> {
    let what = if parquet { "Parquet" } else { "Arrow IPC" };
    Err(IngestError::new(
        ErrorClass::Unsupported,
        format!("{what} inputs need tessera-ingest's `tables` feature, which this build lacks"),
    )
    .note("the Python package: MATURIN_PEP517_ARGS=\"--features tables\" pip install ./python"))
}

impl TableSource {
    pub(crate) fn read(&self, _emit: &mut dyn FnMut(Result<TableChunk, Bad>) -> bool) {
        match self.never {}
    }
}

pub(crate) fn decode_chunk(chunk: &TableChunk, _opts: &WdsOptions) -> Vec<Decoded> {
    match chunk.never {}
}
