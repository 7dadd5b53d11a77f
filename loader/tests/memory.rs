//! The memory budget holds on datasets several times larger than it: the loader's own
//! accounting high-water mark stays within the budget in every mode, and a separate process
//! shows the resident-set growth (`VmHWM`) stays near the budget, far below the dataset size.

mod common;

use std::sync::Arc;

use tessera_loader::{Loader, LoaderConfig, ShuffleMode};

fn budget_config(root: &str, budget: u64) -> LoaderConfig {
    common::config(root).with_batch_size(16).with_memory_budget(budget)
}

#[test]
fn accounting_high_water_stays_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let data = common::big_dataset(root, 2000, 256 << 10);
    let budget = 3 << 20;
    assert!(data > 2 * budget, "dataset ({data}) must be several times the budget ({budget})");
    for (shuffle, verify, workers, remote) in [
        (ShuffleMode::Global, true, 1, false),
        (ShuffleMode::Global, true, 3, false),
        (ShuffleMode::Global, false, 2, false),
        (ShuffleMode::Block { window_fragments: 2 }, true, 2, false),
        (ShuffleMode::Global, true, 2, true),
        (ShuffleMode::Block { window_fragments: 2 }, true, 3, true),
    ] {
        let cfg = LoaderConfig { verify_checksums: verify, ..budget_config(root, budget) }
            .with_shuffle(shuffle)
            .with_workers(workers);
        let loader = if remote {
            let fs = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
            common::open_store(&tessera::Store::from_object_store(Arc::new(fs), "", true), cfg).unwrap()
        } else {
            Loader::open(cfg).unwrap()
        };
        let mut rows = 0;
        for b in loader.epoch(0).unwrap() {
            rows += b.unwrap().rows.len();
        }
        assert_eq!(rows, 2000);
        let m = loader.memory_stats();
        println!("{shuffle:?} verify={verify} workers={workers} remote={remote}: {m:?}");
        assert!(m.high_water <= budget, "{shuffle:?}: high water {} > budget {budget}", m.high_water);
        assert!(m.high_water > 0 && m.by_use[0].high_water > 0);
        assert_eq!(m.overcommits, 0);
        common::assert_only_kept_memory_stays(&m);
        if matches!(shuffle, ShuffleMode::Block { .. }) && !remote {
            assert_eq!(m.by_use[2].high_water, 0, "local files are read without a window");
        }
        if matches!(shuffle, ShuffleMode::Block { .. }) && remote {
            assert!(m.by_use[2].high_water > 0, "the window was used");
            // Each data file is read once per epoch (plus its footer and index blocks).
            assert!(loader.io_stats().bytes <= data + data / 8, "{} read of {data}", loader.io_stats().bytes);
        }
    }
    // A budget that cannot hold two batches is refused up front, with what needs it.
    let tiny = Loader::open(budget_config(root, 200 << 10)).unwrap();
    let err = tiny.epoch(0).unwrap_err().to_string();
    assert!(err.contains("memory budget") && err.contains("batch buffers"), "{err}");
}

fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Runs in a child process (see below): reads the whole dataset in both modes and prints the
/// growth of the peak resident set over the resident set before the loader started.
#[test]
fn rss_child() {
    let Ok(root) = std::env::var("TESSERA_RSS_CHILD_DIR") else { return };
    let budget: u64 = std::env::var("TESSERA_RSS_BUDGET").unwrap().parse().unwrap();
    // Warm the allocator before the baseline.
    drop(std::hint::black_box(vec![1u8; 1 << 20]));
    let loaders: Vec<Loader> = [ShuffleMode::Global, ShuffleMode::Block { window_fragments: 2 }]
        .into_iter()
        .map(|s| Loader::open(budget_config(&root, budget).with_shuffle(s).with_workers(2)).unwrap())
        .collect();
    let base = status_kib("VmRSS:");
    // One loader after the other, each dropped after its epoch: a loader keeps its idle
    // buffers, extents and pages for its next epoch, within its own budget.
    for l in loaders {
        for b in l.epoch(0).unwrap() {
            drop(b.unwrap());
        }
    }
    let hwm = status_kib("VmHWM:");
    println!("RSS_DELTA_KIB={}", hwm.saturating_sub(base));
}

#[test]
fn resident_set_growth_stays_near_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let data = common::big_dataset(root, 8000, 256 << 10);
    let budget: u64 = 6 << 20;
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "rss_child", "--nocapture", "--test-threads=1"])
        .env("TESSERA_RSS_CHILD_DIR", root)
        .env("TESSERA_RSS_BUDGET", budget.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let delta: u64 = stdout
        .lines()
        .find_map(|l| l.split("RSS_DELTA_KIB=").nth(1))
        .unwrap_or_else(|| panic!("the child reports its RSS growth: {stdout}"))
        .trim()
        .parse()
        .unwrap();
    let delta = delta * 1024;
    println!("dataset {data} bytes, budget {budget}, peak RSS growth {delta}");
    // Allocator slack and thread stacks on top of the budget, but nowhere near the data.
    assert!(delta < budget + (12 << 20), "RSS grew by {delta} bytes with a {budget}-byte budget");
    assert!(delta < data / 2);
}

/// A loop that keeps every batch (here: collects the epoch into a Vec) holds more batches
/// than the pipeline has buffer sets; the loader must still deliver the whole epoch.
#[test]
fn a_loop_that_keeps_every_batch_does_not_stall() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    common::id_dataset(root, 200, &common::small_files());
    let mut cfg = common::config(root).with_batch_size(4).with_workers(3);
    cfg.prefetch_batches = 2;
    let loader = Loader::open(cfg).unwrap();
    let kept: Vec<_> = loader.epoch(0).unwrap().collect();
    assert_eq!(kept.len(), 50);
    let mut ids: Vec<i64> = kept.iter().flat_map(|b| common::ids(b.as_ref().unwrap())).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..200).collect::<Vec<i64>>());
}
