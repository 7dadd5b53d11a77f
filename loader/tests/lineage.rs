//! Lineage: the record a run writes gives, for every step, exactly the rows the ranks read
//! (checked against a brute-force log of the batches), and for any row the steps that saw it.

use std::collections::{BTreeMap, BTreeSet};

use tessera::{Batch, Column, ColumnData, DType, Dataset, Schema, WriteOptions};
use tessera_loader::{LineageRecord, Loader, LoaderConfig, MixSource, Mixture};

fn dataset(root: &str, rows: i64) {
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let ds = Dataset::create(root, schema, &WriteOptions::default()).unwrap();
    let ids: Vec<i64> = (0..rows).collect();
    ds.append(&Batch::new().with("id", ColumnData::from_scalars(&ids)).unwrap(), "rows", WriteOptions::default())
        .unwrap();
}

/// Runs `epochs` epochs on `world` ranks (rank 0 recording), with a stop and resume in the
/// middle of epoch 1; returns the brute-force log: step → the global batch's (source, row).
fn run(config: &LoaderConfig, world: usize, epochs: u64) -> BTreeMap<u64, Vec<(u32, u64)>> {
    let loaders: Vec<Loader> = (0..world)
        .map(|r| Loader::open(config.clone().with_batch_size(6 / world).with_rank(r, world)).unwrap())
        .collect();
    let mut log: BTreeMap<u64, Vec<(u32, u64)>> = BTreeMap::new();
    let mut step = 0u64;
    for epoch in 0..epochs {
        let mut iters: Vec<_> = loaders.iter().map(|l| l.epoch(epoch).unwrap()).collect();
        let n = loaders[0].batches_per_epoch();
        let mut i = 0;
        while i < n {
            if epoch == 1 && i == 2 {
                // Stop and resume from the state, as a restarted job does.
                let state = iters[0].state();
                drop(iters);
                iters = loaders.iter().map(|l| l.resume(&state).unwrap()).collect();
            }
            let mut global = Vec::new();
            for it in &mut iters {
                let b = it.next().unwrap().unwrap();
                let sources = if b.sources.is_empty() { vec![0; b.rows.len()] } else { b.sources.clone() };
                global.extend(sources.into_iter().zip(b.rows.iter().copied()));
            }
            log.insert(step, global);
            step += 1;
            i += 1;
        }
    }
    log
}

fn check(record_path: &std::path::Path, log: &BTreeMap<u64, Vec<(u32, u64)>>) {
    let record = LineageRecord::read(record_path).unwrap();
    let loader = record.open_loader().unwrap();
    for (&step, rows) in log {
        assert_eq!(&LineageRecord::rows_at_step(&loader, step).unwrap(), rows, "step {step}");
    }
    let steps = log.len() as u64;
    let samples: BTreeSet<(u32, u64)> = log.values().flatten().copied().collect();
    for &(source, row) in samples.iter().step_by(3) {
        let want: Vec<u64> = log.iter().filter(|(_, r)| r.contains(&(source, row))).map(|(&s, _)| s).collect();
        assert_eq!(LineageRecord::steps_of_row(&loader, source, row, steps).unwrap(), want, "{source}:{row}");
    }
    assert_eq!(record.steps_through_last_epoch(&loader).unwrap(), steps);
    // Three start lines: epoch 0, epoch 1, the resume in epoch 1 at step n + 2.
    let starts = record.starts();
    assert_eq!(starts.len(), 3);
    assert_eq!((starts[2].epoch, starts[2].consumed), (1, 12));
    assert_eq!(starts[2].step, starts[1].step + 2);
    // The record is small: a header and a line per start.
    assert!(std::fs::metadata(record_path).unwrap().len() < 2048);
}

#[test]
fn a_recorded_mixture_run_gives_every_steps_rows_and_every_rows_steps() {
    let dir = tempfile::tempdir().unwrap();
    let roots: Vec<String> = ["a", "b"].iter().map(|n| dir.path().join(n).to_str().unwrap().to_string()).collect();
    dataset(&roots[0], 40);
    dataset(&roots[1], 15);
    let record = dir.path().join("run.lineage");
    let mix = Mixture::weighted([MixSource::new(&roots[0]), MixSource::new(&roots[1])], &[0.6, 0.4]);
    let config = LoaderConfig::for_mixture(mix).with_seed(3).with_lineage(&record);
    let log = run(&config, 2, 2);
    check(&record, &log);
    // A later append does not change what the record names: it pinned the versions.
    dataset(&dir.path().join("c").to_string_lossy(), 1);
    let loader = LineageRecord::read(&record).unwrap().open_loader().unwrap();
    assert_eq!(LineageRecord::rows_at_step(&loader, 0).unwrap(), log[&0]);
}

#[test]
fn a_recorded_run_over_one_version_pins_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds").to_str().unwrap().to_string();
    dataset(&root, 33);
    let record = dir.path().join("run.lineage");
    let log = run(&LoaderConfig::new(&root).with_seed(8).with_lineage(&record), 3, 2);
    // Appending to the dataset afterwards leaves the recorded version's order as it was.
    let ds = Dataset::open(&root).unwrap();
    ds.append(&Batch::new().with("id", ColumnData::from_scalars(&[99i64])).unwrap(), "more", WriteOptions::default())
        .unwrap();
    check(&record, &log);
    assert_eq!(LineageRecord::read(&record).unwrap().sources()[0].version, Some(2));
}
