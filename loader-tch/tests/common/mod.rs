//! Test support: the datasets the core loader's tests use (`loader/tests/common/datasets.rs`)
//! and helpers to drain epochs as tensors.
#![allow(dead_code, unreachable_pub, missing_docs, unused_imports)]

use tessera_loader_tch::{Batch, Loader};

#[path = "../../../loader/tests/common/datasets.rs"]
mod datasets;
pub use datasets::*;

pub fn ids(batch: &Batch) -> Vec<i64> {
    Vec::<i64>::try_from(batch.tensor("id").unwrap()).unwrap()
}

/// Every batch's ids of one epoch.
pub fn epoch_ids(loader: &Loader, epoch: u64) -> Vec<Vec<i64>> {
    loader.epoch(epoch).unwrap().map(|b| ids(&b.unwrap())).collect()
}
