//! Batch buffers outlive the epoch: the sets idle when an epoch ends serve the next ones, so
//! over many epochs a loader allocates no more buffers than its pool ever holds at once (for
//! fixed-shape columns), from local files and from an object store alike, and its batches
//! are byte-identical to a fresh loader's.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tessera::{Batch, ColumnData, DType, Dataset, Dim, Schema, Store, WriteOptions};
use tessera_loader::{AlignedAllocator, AlignedBuffer, BufferAllocator, Loader, LoaderConfig};

const ROWS: usize = 600;
const SIDE: usize = 16;

/// Counts the buffers it allocates.
#[derive(Debug, Default)]
struct Counting(AtomicUsize);

impl BufferAllocator for Counting {
    type Buffer = AlignedBuffer;

    fn allocate(&self, bytes: usize) -> tessera_loader::Result<AlignedBuffer> {
        self.0.fetch_add(1, Ordering::Relaxed);
        AlignedAllocator.allocate(bytes)
    }
}

/// `ROWS` rows of an id and a `[SIDE, SIDE]` u8 image whose bytes derive from the id, in
/// three fragments.
fn dataset(root: &str) {
    let shape = [Dim::Fixed(SIDE as u64), Dim::Fixed(SIDE as u64)];
    let schema =
        Schema::new([tessera::Column::new("id", DType::I64, &[]), tessera::Column::new("img", DType::U8, &shape)])
            .unwrap();
    let mut ds = Dataset::create(root, schema, &WriteOptions::default()).unwrap();
    for part in 0..3 {
        let rows = part * ROWS / 3..(part + 1) * ROWS / 3;
        let ids: Vec<i64> = rows.clone().map(|r| r as i64).collect();
        let mut img = ColumnData::empty(DType::U8, &shape, false);
        for r in rows {
            let px: Vec<u8> = (0..SIDE * SIDE).map(|i| (r * 31 + i) as u8).collect();
            img.push_row(&[SIDE as u64, SIDE as u64], &px).unwrap();
        }
        let batch = Batch::new().with("id", ColumnData::from_scalars(&ids)).unwrap().with("img", img).unwrap();
        ds = ds.append(&batch, "part", WriteOptions::default()).unwrap();
    }
}

/// One epoch's batches, each column's bytes, dropping every batch before the next.
fn epoch(loader: &Loader, e: u64) -> Vec<Vec<Vec<u8>>> {
    loader.epoch(e).unwrap().map(|b| b.unwrap()).map(|b| (0..2).map(|c| common::bytes(&b, c)).collect()).collect()
}

#[test]
fn later_epochs_reuse_the_pools_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    dataset(root);
    let fs: Arc<dyn object_store::ObjectStore> =
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let store = Store::from_object_store(fs, "", true);
    for (label, object) in [("local files", false), ("object store", true)] {
        let cfg = LoaderConfig::new(root).with_batch_size(32).with_seed(5).with_workers(2);
        let counting = Arc::new(Counting::default());
        let open = |alloc: Arc<dyn BufferAllocator<Buffer = AlignedBuffer>>| {
            if object {
                Loader::open_store(&store, cfg.clone(), alloc).unwrap()
            } else {
                Loader::open_with_allocator(cfg.clone(), alloc).unwrap()
            }
        };
        let loader = open(counting.clone());
        let first = epoch(&loader, 0);
        let after_first = counting.0.load(Ordering::Relaxed);
        assert!(after_first >= 2, "{label}: the first epoch allocates its buffers");
        assert!(loader.memory_stats().idle_buffers > 0, "{label}: the first epoch's sets stay idle in the pool");
        let second = epoch(&loader, 1);
        for e in 2..12 {
            epoch(&loader, e);
        }
        // The pool holds at most as many sets as the Ready share (one more while the consumer
        // holds every set out): later epochs may add sets up to that bound, never more. A pool
        // per epoch allocated at least one set (two buffers) in every epoch.
        let m = loader.memory_stats();
        let set_bytes = (ROWS / 3).min(32) as u64 * (8 + (SIDE * SIDE) as u64);
        let bound = 2 * (m.by_use[0].share / set_bytes + 1) as usize;
        let later = counting.0.load(Ordering::Relaxed) - after_first;
        assert!(later < 2 * 11, "{label}: {later} buffers allocated in 11 later epochs");
        assert!(
            after_first + later <= bound,
            "{label}: {} buffers allocated, the pool holds {bound}",
            after_first + later
        );
        // Reused buffers hold exactly what fresh ones would.
        let fresh = open(Arc::new(AlignedAllocator));
        assert_eq!(first, epoch(&fresh, 0), "{label}: epoch 0");
        assert_eq!(second, epoch(&fresh, 1), "{label}: epoch 1");
        assert_ne!(first, second, "{label}: the epochs are shuffled differently");
    }
}

/// `rows` rows of a ragged u8 column: one row in `every` is `big` bytes, the others 1 byte,
/// so a padded batch holding a big row is several times what the files suggest per row.
fn skewed_dataset(root: &str, rows: usize, every: usize, big: usize) {
    let schema = Schema::new([tessera::Column::new("v", DType::U8, &[Dim::Ragged])]).unwrap();
    let ds = Dataset::create(root, schema, &WriteOptions::default()).unwrap();
    let values: Vec<Vec<u8>> = (0..rows).map(|r| vec![r as u8; if r % every == 0 { big } else { 1 }]).collect();
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    let batch = Batch::new().with("v", ColumnData::from_sequences(&refs)).unwrap();
    ds.append(&batch, "skewed", WriteOptions::default()).unwrap();
}

#[test]
fn padded_ragged_batches_larger_than_estimated_reuse_buffers_from_the_second_epoch() {
    // Padded batches pay the batch's longest row for every row: here about 8 times the
    // average the files give. Sized by that estimate, the `Ready` share held fewer sets than
    // the pipeline runs, so workers freed idle sets and allocated fresh buffers batch after
    // batch; sized by what the first epoch's sets needed, later epochs reuse them.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    skewed_dataset(root, 4_000, 16, 4_096);
    let counting = Arc::new(Counting::default());
    let cfg = LoaderConfig::new(root).with_batch_size(16).with_seed(3).with_workers(2);
    let loader = Loader::open_with_allocator(cfg, counting.clone()).unwrap();
    let drain = |e: u64| {
        // The consumer keeps the last two batches alive, as the Python adapter does.
        let mut held = std::collections::VecDeque::new();
        let mut n = 0;
        for b in loader.epoch(e).unwrap() {
            held.push_back(b.unwrap());
            if held.len() > 2 {
                held.pop_front();
            }
            n += 1;
        }
        n
    };
    let batches = drain(0);
    assert_eq!(batches, 250);
    let after_first = counting.0.load(Ordering::Relaxed);
    for e in 1..4 {
        drain(e);
    }
    let later = counting.0.load(Ordering::Relaxed) - after_first;
    let sets = loader.memory_stats().by_use[0].share / (16 * 4_096);
    assert!(
        later <= 2 * sets as usize,
        "{later} buffers allocated in 3 later epochs of {batches} batches ({after_first} in the first)"
    );
}

#[test]
fn a_budget_too_small_for_the_learned_size_keeps_the_estimate() {
    // Under a budget that holds two estimated batches but not two of the padded batches the
    // first epoch met, later epochs run as the first did (overcommitting for the largest
    // batches) instead of refusing to start.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    skewed_dataset(root, 4_000, 16, 4_096);
    let mut cfg =
        LoaderConfig::new(root).with_batch_size(16).with_seed(3).with_workers(2).with_memory_budget(700 << 10);
    // Ten estimated batches hold one padded batch of a long row (16 × 4 KiB), so the first
    // epoch runs; 700 KiB cannot hold two such batches next to the fetch buffers.
    cfg.prefetch_batches = 10;
    let loader = Loader::open(cfg).unwrap();
    for e in 0..3 {
        let it = loader.epoch(e).unwrap_or_else(|err| panic!("epoch {e} does not start: {err}"));
        assert_eq!(it.map(|b| b.unwrap().rows.len()).sum::<usize>(), 4_000, "epoch {e}");
    }
}
