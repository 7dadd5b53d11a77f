//! Shuffle quality of both modes, measured on the order of the rows the loader yields:
//! global shuffle keeps no adjacent pairs and moves rows a third of the epoch on average;
//! block shuffle keeps few pairs, moves fragments across the whole epoch and draws each
//! batch from few fragments; no shuffle keeps the stored order.

mod common;

use std::collections::BTreeSet;

use tessera::WriteOptions;
use tessera_loader::sampler::{adjacent_pair_retention, displacement_stats};
use tessera_loader::{Loader, ShuffleMode};

#[test]
fn shuffle_quality_of_both_modes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    // 4000 rows in fragments of 64 rows.
    common::id_dataset(
        root,
        4000,
        &WriteOptions { target_file_bytes: 512, page_bytes: 128, ..WriteOptions::default() },
    );
    let order = |shuffle| -> Vec<u64> {
        let l = Loader::open(common::config(root).with_batch_size(50).with_shuffle(shuffle)).unwrap();
        common::epoch_ids(&l, 0).concat().into_iter().map(|x| x as u64).collect()
    };
    let global = order(ShuffleMode::Global);
    let block = order(ShuffleMode::Block { window_fragments: 4 });
    let seq = order(ShuffleMode::None);
    let (dg, db, ds) = (displacement_stats(&global), displacement_stats(&block), displacement_stats(&seq));
    let rows_per_window = 4.0 * 64.0;
    println!(
        "global: adjacent-pair retention {:.4}, displacement mean {:.3} max {:.3}",
        adjacent_pair_retention(&global),
        dg.mean_normalized,
        dg.max_normalized
    );
    println!(
        "block(4 fragments = {rows_per_window} rows): retention {:.4}, displacement mean {:.3} max {:.3}",
        adjacent_pair_retention(&block),
        db.mean_normalized,
        db.max_normalized
    );
    // Batch diversity: distinct fragments per batch of 50.
    let frags_per_batch = |o: &[u64]| {
        o.chunks(50).map(|c| c.iter().map(|r| r / 64).collect::<BTreeSet<_>>().len()).sum::<usize>() as f64
            / (o.len() / 50) as f64
    };
    println!(
        "distinct fragments per batch of 50: global {:.1}, block {:.1}",
        frags_per_batch(&global),
        frags_per_batch(&block)
    );
    assert!(adjacent_pair_retention(&global) < 0.005);
    assert!((dg.mean_normalized - 1.0 / 3.0).abs() < 0.03);
    assert!(adjacent_pair_retention(&block) < 2.0 / rows_per_window);
    assert!(db.mean_normalized > 0.2, "fragments move across the whole epoch");
    assert!(frags_per_batch(&block) <= 8.0 && frags_per_batch(&global) > 20.0);
    assert!(ds.mean_normalized.abs() < f64::EPSILON && adjacent_pair_retention(&seq) > 0.99);
}
