//! Test support shared by the core loader's integration tests.
#![allow(dead_code, unreachable_pub, missing_docs)]

use tessera_loader::{AlignedBuffer, HostBatch};

/// Column `c`'s bytes in a batch filled into the default (aligned heap) buffers.
pub fn bytes(batch: &HostBatch, c: usize) -> Vec<u8> {
    let len = batch.columns[c].byte_len;
    batch
        .with_buffer(c, |b| b.as_any().downcast_ref::<AlignedBuffer>().map(|a| a.bytes()[..len].to_vec()))
        .flatten()
        .unwrap()
}
