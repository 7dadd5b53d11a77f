//! The adapter's own features: per-batch tensor transforms (deterministic, independent of
//! workers), one-process multi-device batches, tensors kept past their batch without buffer
//! reuse, and the adapter's options. (Shuffle quality is measured in the core's
//! `loader/tests/shuffle.rs`.)

mod common;

use tch::{Device, Kind};
use tessera::WriteOptions;
use tessera_loader_tch::transform::{ImageToFloat, Normalize, RandomCrop, RandomHorizontalFlip};
use tessera_loader_tch::{BatchTransform, DistEnv, Loader, LoaderConfig, LoaderError, TchOptions};

fn image_loader(root: &str, workers: usize) -> Loader {
    let c = common::config(root).with_batch_size(6).with_columns(&["id", "img"]).with_workers(workers).with_seed(3);
    let transforms: Vec<std::sync::Arc<dyn BatchTransform>> = vec![
        std::sync::Arc::new(ImageToFloat { column: "img".into() }),
        std::sync::Arc::new(RandomHorizontalFlip { column: "img".into(), p: 0.5, width_dim: 3 }),
        std::sync::Arc::new(RandomCrop { column: "img".into(), height: 3, width: 3, padding: 1 }),
        std::sync::Arc::new(Normalize { column: "img".into(), mean: vec![0.5; 3], std: vec![0.25; 3] }),
    ];
    Loader::open(c).unwrap().with_transforms(transforms)
}

#[test]
fn transforms_are_deterministic_per_batch() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    common::dataset(root, 48, false, &common::small_files());
    let run = |workers| -> Vec<tch::Tensor> {
        let l = image_loader(root, workers);
        l.epoch(0).unwrap().map(|b| b.unwrap().tensor("img").unwrap().copy()).collect()
    };
    let one_worker = run(1);
    let three_workers = run(3);
    assert_eq!(one_worker.len(), 8);
    for (t1, t3) in one_worker.iter().zip(&three_workers) {
        assert_eq!(t1.size(), [6, 3, 3, 3]);
        assert_eq!(t1.kind(), Kind::Float);
        assert!(t1.equal(t3), "transforms depend on the number of workers");
    }
    // Another epoch draws other augmentations.
    let l = image_loader(root, 2);
    let e1: Vec<_> = l.epoch(1).unwrap().map(|b| b.unwrap().tensor("img").unwrap().copy()).collect();
    assert!(one_worker.iter().zip(&e1).any(|(t0, t1)| !t0.equal(t1)));
    // A flip with p = 1 mirrors every sample.
    let c = common::config(root).with_batch_size(4).with_columns(&["img"]);
    let plain = Loader::open(common::config(root).with_batch_size(4).with_columns(&["img"])).unwrap();
    let flipped = Loader::open(c).unwrap().with_transforms(vec![std::sync::Arc::new(RandomHorizontalFlip {
        column: "img".into(),
        p: 1.0,
        width_dim: 2,
    })]);
    let original = plain.epoch(0).unwrap().next().unwrap().unwrap().tensor("img").unwrap().copy();
    let mirrored = flipped.epoch(0).unwrap().next().unwrap().unwrap().tensor("img").unwrap().copy();
    assert!(original.flip([2]).equal(&mirrored));
}

#[test]
fn one_process_several_devices_matches_more_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    common::dataset(root, 50, true, &common::small_files());
    let cfg = |bs, rank, world| {
        common::config(root).with_batch_size(bs).with_rank(rank, world).with_columns(&["id", "tok", "txt"])
    };
    let one = Loader::open(cfg(8, 0, 1)).unwrap();
    let mut it = one.epoch(0).unwrap();
    let mut parts: Vec<Vec<Vec<i64>>> = vec![Vec::new(), Vec::new()];
    while let Some(group) = it.next_for_devices(&[Device::Cpu, Device::Cpu]) {
        let group = group.unwrap();
        assert_eq!(group.len(), 2);
        for (k, b) in group.iter().enumerate() {
            assert_eq!(b.len(), 4);
            // Side tensors are split consistently with the values.
            let lengths = b.column("tok").unwrap().lengths.as_ref().unwrap().size();
            assert_eq!(lengths, [4]);
            assert_eq!(b.strings("txt").unwrap().len(), 4);
            parts[k].push(common::ids(b));
        }
    }
    for (rank, part) in parts.iter().enumerate() {
        let l = Loader::open(cfg(4, rank, 2)).unwrap();
        assert_eq!(&common::epoch_ids(&l, 0), part, "device {rank} = rank {rank} of 2");
    }
    assert!(it.next_for_devices(&[Device::Cpu; 3]).is_none());
    drop(it);
    let mut it = one.epoch(1).unwrap();
    assert!(it.next_for_devices(&[Device::Cpu; 3]).unwrap().is_err(), "8 rows do not split in 3");
}

#[test]
fn fresh_buffers_when_reuse_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    common::dataset(root, 30, false, &common::small_files());
    let cfg =
        LoaderConfig { reuse_buffers: false, ..common::config(root) }.with_batch_size(5).with_columns(&["id", "img"]);
    let l = Loader::open(cfg).unwrap();
    // Tensors kept (as shallow clones) past their batch stay intact without reuse.
    let kept: Vec<(Vec<i64>, tch::Tensor)> = l
        .epoch(0)
        .unwrap()
        .map(|b| {
            let b = b.unwrap();
            (common::ids(&b), b.tensor("img").unwrap().shallow_clone())
        })
        .collect();
    for (ids, img) in &kept {
        for (j, &id) in ids.iter().enumerate() {
            let first = img.get(j as i64).reshape([-1]).int64_value(&[0]);
            assert_eq!(first, (id * 7) % 256, "row {id}");
        }
    }
    let m = l.memory_stats();
    common::assert_only_kept_memory_stays(&m);
}

#[test]
fn options_take_the_ranks_gpu_and_refuse_devices_batches_cannot_reach() {
    let dist = DistEnv { rank: 5, world_size: 8, local_rank: 1 };
    assert_eq!(TchOptions::on(Device::Cuda(0)).for_rank(&dist).device, Device::Cuda(1));
    assert_eq!(TchOptions::default().for_rank(&dist).device, Device::Cpu, "the CPU stays the CPU");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    common::id_dataset(root, 10, &WriteOptions::default());
    let err = Loader::open_with(common::config(root), TchOptions::on(Device::Mps)).unwrap_err();
    assert!(matches!(err, LoaderError::Config(_)), "{err}");
    let cpu = Loader::open_with(common::config(root), TchOptions::default()).unwrap();
    assert_eq!(cpu.options(), TchOptions::default());
    assert_eq!(common::epoch_ids(&cpu, 0).concat().len(), 32, "10 rows padded to one batch of 32");
}
