//! Resilience: a store that fails reads at random and adds latency still yields the identical
//! epoch; a persistent outage surfaces as an error item (after retries) and nothing hangs;
//! dropping an epoch mid-way stops its workers.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tessera_loader::{HostBatch, Loader, LoaderConfig, LoaderError, RetryPolicy, ShuffleMode};
use tessera_testkit::{FaultConfig, FaultyStore, Latency};

fn faults(rate: f64) -> FaultConfig {
    FaultConfig {
        get_error_rate: rate,
        get_latency: Latency::new(Duration::ZERO, Duration::from_millis(2)),
        ..FaultConfig::seeded(11)
    }
}

fn flaky(root: &std::path::Path, rate: f64) -> (Arc<FaultyStore>, tessera::Store) {
    let fs = Arc::new(object_store::local::LocalFileSystem::new_with_prefix(root).unwrap());
    let faulty = Arc::new(FaultyStore::new(fs, faults(rate)));
    let store = tessera::Store::from_object_store(faulty.clone(), "", true);
    (faulty, store)
}

/// A batch's ids, image bytes and (padded) token bytes.
fn signature(b: &HostBatch) -> (Vec<i64>, Vec<u8>, Vec<u8>) {
    (common::ids(b), common::named(b, "img"), common::named(b, "tok"))
}

#[test]
fn flaky_storage_yields_the_identical_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    common::dataset(root, 120, true, &common::small_files());
    for shuffle in [ShuffleMode::Global, ShuffleMode::Block { window_fragments: 2 }] {
        let cfg = LoaderConfig { retry: common::fast_retries(), ..common::config(root) }
            .with_batch_size(8)
            .with_shuffle(shuffle)
            .with_columns(&["id", "img", "tok"])
            .with_workers(3);
        let clean: Vec<_> =
            Loader::open(cfg.clone()).unwrap().epoch(0).unwrap().map(|b| signature(&b.unwrap())).collect();
        let (faulty, store) = flaky(dir.path(), 0.3);
        let loader = common::open_store(&store, cfg).unwrap();
        let got: Vec<_> = loader.epoch(0).unwrap().map(|b| signature(&b.unwrap())).collect();
        assert_eq!(got, clean, "{shuffle:?}");
        assert!(faulty.counts.get_errors.load(Ordering::Relaxed) > 0, "faults were injected");
        assert!(loader.io_stats().retries > 0, "and retried by the loader");
        let mut ids: Vec<i64> = got.iter().flat_map(|s| s.0.clone()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids, (0..120).collect::<Vec<_>>());
    }
}

#[test]
fn an_outage_is_an_error_item_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    common::dataset(root, 60, false, &common::small_files());
    let (faulty, store) = flaky(dir.path(), 0.0);
    let retry = RetryPolicy { max_retries: 2, initial_backoff: Duration::from_millis(1), ..RetryPolicy::default() };
    let cfg = LoaderConfig { retry, ..common::config(root) }.with_batch_size(4).with_workers(2);
    let loader = common::open_store(&store, cfg).unwrap();
    faulty.set_config(faults(1.0));
    let started = Instant::now();
    let mut it = loader.epoch(0).unwrap();
    match it.next() {
        Some(Err(LoaderError::Storage { attempts, .. })) => assert_eq!(attempts, 3),
        other => panic!("expected a storage error, got {:?}", other.map(|r| r.map(|b| b.rows.clone()))),
    }
    assert!(it.next().is_none(), "the iterator ends after an error");
    drop(it);
    assert!(started.elapsed() < Duration::from_secs(20));
    // The outage ends: a new epoch works.
    faulty.disarm();
    assert_eq!(loader.epoch(0).unwrap().flatten().count(), 15);
}

#[test]
fn dropping_an_epoch_stops_its_workers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    common::dataset(root, 200, false, &common::small_files());
    let loader = Loader::open(common::config(root).with_batch_size(2).with_workers(4)).unwrap();
    let mut it = loader.epoch(0).unwrap();
    it.next().unwrap().unwrap();
    let t = Instant::now();
    drop(it);
    assert!(t.elapsed() < Duration::from_secs(5));
    // Only one epoch at a time; after the drop a new one starts.
    let a = loader.epoch(1).unwrap();
    assert!(matches!(loader.epoch(2), Err(LoaderError::Config(_))));
    drop(a);
    assert_eq!(loader.epoch(2).unwrap().count(), 100);
}
