//! Batch buffers outlive the epoch: the sets idle when an epoch ends serve the next ones, so
//! over many epochs a loader allocates no more buffers than its pool ever holds at once (for
//! fixed-shape columns), from local files and from an object store alike, and its batches
//! are byte-identical to a fresh loader's.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tessera::{Batch, ColumnData, DType, Dataset, Dim, Schema, Store, WriteOptions};
use tessera_loader::{AlignedAllocator, BufferAllocator, HostBuffer, Loader, LoaderConfig};

const ROWS: usize = 600;
const SIDE: usize = 16;

/// Counts the buffers it allocates.
#[derive(Debug, Default)]
struct Counting(AtomicUsize);

impl BufferAllocator for Counting {
    fn allocate(&self, bytes: usize) -> tessera_loader::Result<Box<dyn HostBuffer>> {
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
        let open = |alloc: Arc<dyn BufferAllocator>| {
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
