//! Test support shared by the core loader's integration tests: deterministic datasets written
//! through the reference writer, the bytes of filled columns, and helpers to drain epochs.
#![allow(dead_code, unreachable_pub, missing_docs, unused_imports)]

use tessera_loader::{AlignedBuffer, Elem, HostBatch, Loader};

mod datasets;
pub use datasets::*;

/// Column `c`'s bytes in a batch filled into the default (aligned heap) buffers.
pub fn bytes(batch: &HostBatch, c: usize) -> Vec<u8> {
    let len = batch.columns[c].byte_len;
    batch.with_buffer(c, |b| b.bytes()[..len].to_vec()).unwrap()
}

/// Column `name`'s bytes.
pub fn named(batch: &HostBatch, name: &str) -> Vec<u8> {
    bytes(batch, batch.columns.iter().position(|c| c.name == name).unwrap())
}

/// The `i64` values of the column named `name`.
pub fn i64s(batch: &HostBatch, name: &str) -> Vec<i64> {
    let c = batch.columns.iter().position(|c| c.name == name).unwrap();
    assert_eq!(batch.columns[c].elem, Elem::I64, "column {name:?}");
    bytes(batch, c).chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect()
}

/// The `id` column of a batch.
pub fn ids(batch: &HostBatch) -> Vec<i64> {
    i64s(batch, "id")
}

/// Every batch's ids of one epoch.
pub fn epoch_ids(loader: &Loader, epoch: u64) -> Vec<Vec<i64>> {
    loader.epoch(epoch).unwrap().map(|b| ids(&b.unwrap())).collect()
}

/// A loader over a store built by the test, filling the default buffers.
pub fn open_store(store: &tessera::Store, config: tessera_loader::LoaderConfig) -> tessera_loader::Result<Loader> {
    Loader::open_store(store, config, std::sync::Arc::new(tessera_loader::AlignedAllocator))
}
