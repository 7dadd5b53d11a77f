//! Sharding on the batches the core loader yields: for world sizes 1..=8 and 1..=4 workers, rank
//! slices are disjoint, their union is the dataset exactly once plus the documented padding
//! (the last global batch repeats rows from the start of the epoch's order), every rank yields
//! the same number of batches, and the order is the same whatever the world size or workers.

mod common;

use tessera::WriteOptions;
use tessera_loader::{Loader, ShuffleMode};

const ROWS: usize = 203;

fn tiny_files() -> WriteOptions {
    WriteOptions { target_file_bytes: 256, page_bytes: 64, ..WriteOptions::default() }
}

/// Every rank's batches (ids) of one epoch.
fn ranks(root: &str, shuffle: ShuffleMode, world: usize, workers: usize, drop_last: bool) -> Vec<Vec<Vec<i64>>> {
    (0..world)
        .map(|rank| {
            let mut cfg = common::config(root)
                .with_batch_size(4)
                .with_shuffle(shuffle)
                .with_seed(99)
                .with_rank(rank, world)
                .with_workers(workers);
            cfg.drop_last = drop_last;
            let loader = Loader::open(cfg).unwrap();
            let batches = common::epoch_ids(&loader, 3);
            assert_eq!(batches.len(), loader.batches_per_epoch());
            batches
        })
        .collect()
}

/// Ranks' batches interleaved back into global order.
fn interleave(per_rank: &[Vec<Vec<i64>>]) -> Vec<i64> {
    let n = per_rank[0].len();
    assert!(per_rank.iter().all(|r| r.len() == n), "ranks yield different batch counts");
    let mut out = Vec::new();
    for k in 0..n {
        for r in per_rank {
            assert_eq!(r[k].len(), 4, "every batch is full");
            out.extend_from_slice(&r[k]);
        }
    }
    out
}

#[test]
fn ranks_partition_each_epoch_for_every_world_size_and_worker_count() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let ds = common::id_dataset(root, ROWS, &tiny_files());
    assert!(ds.fragments().len() > 5);
    for shuffle in [ShuffleMode::Global, ShuffleMode::Block { window_fragments: 2 }] {
        let mut reference: Option<Vec<i64>> = None;
        for world in 1..=8 {
            for workers in 1..=4 {
                let all = interleave(&ranks(root, shuffle, world, workers, false));
                let global_batch = 4 * world;
                assert_eq!(all.len(), ROWS.div_ceil(global_batch) * global_batch);
                let (real, pad) = all.split_at(ROWS);
                let mut sorted = real.to_vec();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..ROWS as i64).collect::<Vec<_>>(), "{shuffle:?} W={world} workers={workers}");
                assert_eq!(pad, &real[..pad.len()], "padding repeats the start of the order");
                match &reference {
                    None => reference = Some(real.to_vec()),
                    Some(g) => assert_eq!(g, real, "order changed with W={world} workers={workers}"),
                }
            }
        }
    }
}

#[test]
fn drop_last_drops_the_incomplete_global_batch() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    common::id_dataset(root, ROWS, &tiny_files());
    for world in [3, 8] {
        let all = interleave(&ranks(root, ShuffleMode::Global, world, 2, true));
        assert_eq!(all.len(), ROWS / (4 * world) * 4 * world);
        let mut sorted = all.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), all.len(), "no row twice");
    }
}

#[test]
fn epochs_and_seeds_change_the_order_and_runs_repeat_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    common::id_dataset(root, ROWS, &tiny_files());
    for shuffle in [ShuffleMode::Global, ShuffleMode::Block { window_fragments: 3 }] {
        let open =
            |seed| Loader::open(common::config(root).with_batch_size(8).with_shuffle(shuffle).with_seed(seed)).unwrap();
        let a = open(5);
        let e0 = common::epoch_ids(&a, 0);
        assert_eq!(e0, common::epoch_ids(&open(5), 0), "same seed, same order in a new run");
        assert_ne!(e0, common::epoch_ids(&a, 1), "another epoch, another order");
        assert_ne!(e0, common::epoch_ids(&open(6), 0), "another seed, another order");
    }
}
