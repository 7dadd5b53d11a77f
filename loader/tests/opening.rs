//! Opening data files on an object store (issue 27, the async seam): a batch's new files are
//! opened together as futures driven by the filling thread, not one thread per file, and
//! their requests overlap.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::ObjectStore;
use object_store::memory::InMemory;
use tessera::{Batch, Column, ColumnData, DType, Dataset, Schema, Store, WriteOptions};
use tessera_loader::{AlignedAllocator, Loader, LoaderConfig, ShuffleMode};
use tessera_testkit::{FaultConfig, FaultyStore, Latency};

const FRAGMENTS: i64 = 240;
const ROWS_PER_FRAGMENT: i64 = 4;

/// The thread ids of this process whose name starts with `prefix` (threads inherit their
/// creator's name on Linux, so a loader worker's unnamed helpers count too).
fn threads_named(prefix: &str) -> BTreeSet<u64> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return BTreeSet::new() };
    tasks
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with(prefix)))
        .filter_map(|t| t.file_name().to_str()?.parse().ok())
        .collect()
}

/// Every fragment in a data file of its own, in an in-memory store read with 20 ms added to
/// every GET.
fn store() -> (Store, Arc<FaultyStore>) {
    let memory: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let write = Store::from_object_store(memory.clone(), "", true);
    let mut ds = Dataset::create_in(&write, schema, &WriteOptions::default()).unwrap();
    for f in 0..FRAGMENTS {
        let ids: Vec<i64> = (f * ROWS_PER_FRAGMENT..(f + 1) * ROWS_PER_FRAGMENT).collect();
        let batch = Batch::new().with("id", ColumnData::from_scalars(&ids)).unwrap();
        ds = ds.append(&batch, "one file", WriteOptions::default()).unwrap();
    }
    let latency = Latency::new(Duration::from_millis(20), Duration::ZERO);
    let faulty = Arc::new(FaultyStore::new(memory, FaultConfig { get_latency: latency, ..FaultConfig::seeded(3) }));
    (Store::from_object_store(faulty.clone(), "", true), faulty)
}

#[test]
fn a_batch_opens_its_files_together_without_a_thread_per_file() {
    let (store, faulty) = store();
    let cfg = LoaderConfig::new("unused").with_batch_size(48).with_shuffle(ShuffleMode::Global).with_seed(9);
    let loader = Loader::open_store(&store, cfg, AlignedAllocator).unwrap();
    // Sample the loader's threads while the epoch runs.
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (seen, stop) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                seen.lock().unwrap().extend(threads_named("tessera-loader"));
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let mut ids = BTreeSet::new();
    for batch in loader.epoch(0).unwrap() {
        let batch = batch.unwrap();
        let len = batch.columns[0].byte_len;
        let bytes = batch.with_buffer(0, |b| b.bytes()[..len].to_vec()).unwrap();
        ids.extend(bytes.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())));
    }
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    assert_eq!(ids.len() as i64, FRAGMENTS * ROWS_PER_FRAGMENT, "every row once");

    let stats = loader.io_stats();
    let seen = seen.lock().unwrap().len() as u64;
    assert!(stats.threads >= 1, "the epoch reports its filling threads");
    // Before the async seam each of a batch's new files was opened on a thread of its own:
    // 240 files meant 560 loader threads in one epoch, 128 of them filling threads for 20
    // batches (now at most one per batch).
    assert!(seen <= stats.threads, "{seen} loader threads seen, the epoch started {}", stats.threads);
    // Opened together: many GETs were in flight at once, more than the filling threads.
    let most = faulty.counts.most_gets_in_flight.load(Ordering::Relaxed);
    assert!(most > stats.threads.min(8), "at most {most} GETs in flight with {} threads", stats.threads);
}

#[test]
fn filling_threads_start_as_the_depth_asks_not_as_the_budget_allows() {
    // No added latency: fills wait for nothing, so the self-tuned depth stays near its floor,
    // while the budget holds 128 batches of 4 rows (the most an object-store epoch fills at
    // once), and the epoch has 240 of them.
    let memory: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let store = Store::from_object_store(memory, "", true);
    let ids: Vec<i64> = (0..960).collect();
    let batch = Batch::new().with("id", ColumnData::from_scalars(&ids)).unwrap();
    Dataset::create_in(&store, schema, &WriteOptions::default())
        .unwrap()
        .append(&batch, "rows", WriteOptions::default())
        .unwrap();
    let cfg = LoaderConfig::new("unused").with_batch_size(4).with_shuffle(ShuffleMode::Global).with_seed(2);
    let loader = Loader::open_store(&store, cfg, AlignedAllocator).unwrap();
    for e in 0..2 {
        let mut seen = BTreeSet::new();
        for batch in loader.epoch(e).unwrap() {
            seen.extend(batch.unwrap().rows);
        }
        assert_eq!(seen.len(), 960, "epoch {e}: every row once");
        let stats = loader.io_stats();
        // Before, every such epoch started 128 filling threads, 120 or more of them idle.
        assert!(
            stats.threads >= 2 && stats.threads <= 32,
            "epoch {e}: {} filling threads at depth {}",
            stats.threads,
            stats.depth
        );
    }
}
