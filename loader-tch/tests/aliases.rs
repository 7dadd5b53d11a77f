//! Buffer reuse cannot be observed: a batch tensor the training loop keeps past the batch,
//! through any kind of alias, keeps its values while the loader goes on filling buffers.

mod common;

use tch::{Device, Kind, Tensor};
use tessera_loader_tch::{Loader, ShuffleMode};

/// Each way a training loop can keep an alias of a batch tensor.
const ALIASES: [&str; 7] = ["shallow_clone", "view", "permute", "to_device_cpu", "narrow", "view_dtype", "flatten"];

fn alias(kind: &str, t: &Tensor) -> Tensor {
    match kind {
        "shallow_clone" => t.shallow_clone(),
        "view" => t.view([-1]),
        "permute" => {
            let dims: Vec<i64> = (0..t.dim() as i64).rev().collect();
            t.permute(dims)
        }
        "to_device_cpu" => t.to_device(Device::Cpu),
        "narrow" => t.narrow(0, 1, 3),
        "view_dtype" => t.view_dtype(Kind::Int8),
        "flatten" => t.flatten(0, -1),
        other => panic!("unknown alias {other}"),
    }
}

fn keep_alias_past_the_batch(kind: &str, columns: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    let root = root.to_str().unwrap();
    common::dataset(root, 400, true, &common::small_files());
    let cfg = common::config(root)
        .with_batch_size(8)
        .with_shuffle(ShuffleMode::Global)
        .with_seed(3)
        .with_workers(2)
        .with_columns(columns);
    let loader = Loader::open(cfg).unwrap();
    let mut it = loader.epoch(0).unwrap();
    let first = it.next().unwrap().unwrap();
    let kept: Vec<(String, Tensor, Tensor)> = columns
        .iter()
        .map(|&c| {
            let a = alias(kind, first.tensor(c).unwrap());
            let copy = a.copy();
            (c.to_string(), a, copy)
        })
        .collect();
    drop(first);
    for _ in 0..20 {
        let b = it.next().expect("more batches").unwrap();
        drop(b);
    }
    for (c, a, copy) in &kept {
        assert!(a.equal(copy), "{kind} alias of column {c} changed after 20 more batches");
    }
}

#[test]
fn every_kind_of_alias_keeps_its_values() {
    for kind in ALIASES {
        keep_alias_past_the_batch(kind, &["img", "big", "tok", "id"]);
    }
}
