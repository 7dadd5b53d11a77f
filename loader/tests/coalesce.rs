//! The object-store read path with coalesced range GETs: the same epoch is byte-identical
//! from local files and from object stores (the file system through `object_store`, the
//! in-memory store, a store that cuts bodies short and streams them slowly), for every
//! coalescing gap; and the accounted memory high-water stays within the budget with
//! coalescing on, on a dataset several times larger than the budget; and a cold epoch opens
//! each data file once, however many threads want it at once; block shuffle reads a batch's
//! window fragments together.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tessera::WriteOptions;
use tessera_loader::{AlignedAllocator, HostBatch, HostLayout, Loader, LoaderConfig, ShuffleMode};
use tessera_testkit::{CountingStore, FaultConfig, FaultyStore, Latency};

/// Everything a batch holds, by column: values bytes, shape, layout (lengths, offsets,
/// shapes) and validity.
type Column = (String, Vec<u8>, Vec<i64>, HostLayout, Option<Vec<bool>>);

fn raw(b: &HostBatch) -> Vec<Column> {
    b.columns
        .iter()
        .enumerate()
        .map(|(c, col)| {
            (col.name.clone(), common::bytes(b, c), col.shape.clone(), col.layout.clone(), col.valid.clone())
        })
        .collect()
}

type Epoch = Vec<(Vec<u64>, Vec<Column>)>;

fn epoch(loader: &Loader) -> Epoch {
    loader
        .epoch(1)
        .unwrap()
        .map(|b| {
            let b = b.unwrap();
            (b.rows.clone(), raw(&b))
        })
        .collect()
}

/// Copies every file under `dir` into `store` under the same keys.
fn upload(dir: &std::path::Path, base: &std::path::Path, store: &tessera::Store) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            upload(&p, base, store);
        } else {
            let key = p.strip_prefix(base).unwrap().to_string_lossy().replace('\\', "/");
            store.put_if_absent(&key, std::fs::read(&p).unwrap().into()).unwrap();
        }
    }
}

/// Rows of an epoch (the last batch padded).
fn epoch_rows(loader: &Loader, e: u64) -> usize {
    loader.epoch(e).unwrap().map(|b| b.unwrap().rows.len()).sum()
}

#[test]
fn object_stores_give_the_local_epoch_byte_for_byte_with_coalescing() {
    let dir = tempfile::tempdir().unwrap();
    // Larger files than the small-file default, so one file holds many pages a batch wants.
    let opts = WriteOptions { target_file_bytes: 24 << 10, page_bytes: 300, ..WriteOptions::default() };
    let memory = tessera::Store::open(&format!("memory://coalesce-{}", std::process::id())).unwrap();
    for compressed in [false, true] {
        let sub = dir.path().join(if compressed { "z" } else { "raw" });
        let sub_root = sub.to_str().unwrap();
        common::dataset(sub_root, 300, compressed, &opts);
        let prefix = if compressed { "z" } else { "raw" };
        upload(&sub, &sub, &tessera::Store::from_object_store(memory.object_store().clone(), prefix, true));
        for verify in [true, false] {
            let cfg =
                LoaderConfig { verify_checksums: verify, retry: common::fast_retries(), ..common::config(sub_root) }
                    .with_batch_size(16)
                    .with_seed(5)
                    .with_workers(2);
            let local = epoch(&Loader::open(cfg.clone()).unwrap());
            assert_eq!(local.iter().map(|b| b.0.len()).sum::<usize>(), 304);
            let block_cfg = cfg.clone().with_shuffle(ShuffleMode::Block { window_fragments: 2 });
            let local_block = epoch(&Loader::open(block_cfg.clone()).unwrap());
            let fs: Arc<dyn object_store::ObjectStore> =
                Arc::new(object_store::local::LocalFileSystem::new_with_prefix(&sub).unwrap());
            let hostile = FaultConfig {
                truncate_rate: 0.2,
                slow_stream_chunk: Some(509),
                slow_stream_pause: Duration::ZERO,
                ..FaultConfig::seeded(3)
            };
            let stores = [
                ("file system", tessera::Store::from_object_store(fs.clone(), "", true)),
                ("memory", tessera::Store::from_object_store(memory.object_store().clone(), prefix, true)),
                (
                    "short bodies, slow streams",
                    tessera::Store::from_object_store(Arc::new(FaultyStore::new(fs.clone(), hostile)), "", true),
                ),
            ];
            for (name, store) in &stores {
                // Block shuffle reads through its window on a store (whole runs, or each page
                // verified as it lands): the same batches as from local files.
                let got = epoch(&common::open_store(store, block_cfg.clone()).unwrap());
                assert!(got == local_block, "{name}, block, compressed {compressed}, verify {verify}: batches differ");
                for gap in [None, Some(0), Some(1 << 20), Some(u64::MAX)] {
                    let cfg = LoaderConfig { coalesce_gap_bytes: gap, ..cfg.clone() };
                    let loader = common::open_store(store, cfg).unwrap();
                    let got = epoch(&loader);
                    assert!(
                        got == local,
                        "{name}, gap {gap:?}, compressed {compressed}, verify {verify}: batches differ from local files"
                    );
                    if gap == Some(u64::MAX) && *name == "file system" {
                        // Everything a batch wants of a file is one request: far fewer than needs.
                        let io = loader.io_stats();
                        assert!(io.requests > 0 && io.bytes > 0);
                    }
                }
            }
        }
    }
}

#[test]
fn coalescing_keeps_the_accounted_high_water_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let rows = 4000;
    let data = common::big_dataset(root, rows, 512 << 10);
    let budget = 4 << 20;
    assert!(data > 3 * budget, "dataset ({data}) must be several times the budget ({budget})");
    let fs: Arc<dyn object_store::ObjectStore> =
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let store = tessera::Store::from_object_store(fs, "", true);
    for (shuffle, verify, workers, gap) in [
        (ShuffleMode::Global, true, 2, None),
        (ShuffleMode::Global, true, 3, Some(u64::MAX)),
        (ShuffleMode::Global, false, 2, Some(u64::MAX)),
        (ShuffleMode::Block { window_fragments: 2 }, true, 2, Some(u64::MAX)),
    ] {
        let cfg = LoaderConfig { verify_checksums: verify, coalesce_gap_bytes: gap, ..common::config(root) }
            .with_batch_size(16)
            .with_memory_budget(budget)
            .with_shuffle(shuffle)
            .with_workers(workers);
        let loader = common::open_store(&store, cfg).unwrap();
        for e in 0..2 {
            assert_eq!(epoch_rows(&loader, e), rows.div_ceil(16) * 16, "every row, the last batch padded");
        }
        let m = loader.memory_stats();
        println!("{shuffle:?} verify={verify} workers={workers} gap={gap:?}: {m:?}");
        assert!(m.high_water <= budget, "{shuffle:?}: high water {} > budget {budget}", m.high_water);
        assert_eq!(m.overcommits, 0);
        common::assert_only_kept_memory_stays(&m);
    }
}

/// At the start of a cold epoch every filling thread wants the same files; one opens each,
/// the others wait for it: one header read per data file, in both shuffle modes.
#[test]
fn a_cold_epoch_opens_each_data_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    common::big_dataset(root, 2000, 256 << 10);
    let files = std::fs::read_dir(dir.path().join("data")).unwrap().count();
    assert!(files >= 8, "{files} data files");
    let fs: Arc<dyn object_store::ObjectStore> =
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    // A few milliseconds per request, so the threads' first requests overlap.
    let slow =
        FaultConfig { get_latency: Latency::new(Duration::from_millis(5), Duration::ZERO), ..FaultConfig::seeded(7) };
    for shuffle in [ShuffleMode::Global, ShuffleMode::Block { window_fragments: 2 }] {
        let counting = Arc::new(CountingStore::logging(Arc::new(FaultyStore::new(fs.clone(), slow.clone()))));
        let store = tessera::Store::from_object_store(counting.clone(), "", true);
        let cfg = common::config(root).with_batch_size(16).with_workers(4).with_shuffle(shuffle);
        let loader = common::open_store(&store, cfg).unwrap();
        assert_eq!(epoch_rows(&loader, 0), 2000);
        let header = Some(object_store::GetRange::Bounded(0..tessera::datafile::HEADER_LEN));
        let mut opened: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
        for (path, range) in counting.gets() {
            if path.starts_with("data/") && range == header {
                *opened.entry(path).or_default() += 1;
            }
        }
        assert_eq!(opened.len(), files, "{shuffle:?}: every data file opened");
        assert!(opened.values().all(|&k| k == 1), "{shuffle:?}: a file opened more than once: {opened:?}");
    }
}

/// Block shuffle on an object store: a fragment's files open while an earlier fragment is
/// planned, together with it, so most fragments' header reads come before the first data
/// read of the fragment admitted just before them (opening one fragment at a time, each
/// header read would follow its predecessor's data reads). The order of requests is what
/// counts, not their timing.
#[test]
fn block_shuffle_opens_the_next_fragments_files_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    common::big_dataset(root, 2000, 256 << 10);
    let fs: Arc<dyn object_store::ObjectStore> =
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let counting = Arc::new(CountingStore::logging(fs));
    let store = tessera::Store::from_object_store(counting.clone(), "", true);
    let shuffle = ShuffleMode::Block { window_fragments: 2 };
    let cfg = common::config(root).with_batch_size(16).with_workers(2).with_shuffle(shuffle);
    let loader = common::open_store(&store, cfg).unwrap();
    assert_eq!(epoch_rows(&loader, 0), 2000);
    let ds = tessera::Dataset::open_at(&store, &tessera::At::Latest, tessera::Limits::default()).unwrap();
    let file_of: std::collections::HashMap<String, (usize, u64)> = ds
        .fragments()
        .iter()
        .enumerate()
        .flat_map(|(f, info)| info.fragment.files.iter().map(move |r| (r.path.clone(), (f, r.size))))
        .collect();
    let header = object_store::GetRange::Bounded(0..tessera::datafile::HEADER_LEN);
    let mut first_header = vec![usize::MAX; ds.fragments().len()];
    let mut first_data = vec![usize::MAX; ds.fragments().len()];
    for (i, (path, range)) in counting.gets().into_iter().enumerate() {
        let (Some(&(f, size)), Some(range)) = (file_of.get(&path), range) else { continue };
        let first = match &range {
            r if *r == header => &mut first_header[f],
            object_store::GetRange::Bounded(r) if r.end == size => continue, // the tail read
            _ => &mut first_data[f],
        };
        *first = (*first).min(i);
    }
    // Admission order: by the first batch that needs a fragment (then by fragment).
    let mut first_need = vec![usize::MAX; ds.fragments().len()];
    for (i, rows) in loader.plan(0).unwrap().batches().enumerate() {
        for row in rows {
            let f = ds.fragments().partition_point(|info| info.rows().end <= row);
            first_need[f] = first_need[f].min(i);
        }
    }
    let mut order: Vec<usize> = (0..first_need.len()).collect();
    order.sort_by_key(|&f| (first_need[f], f));
    assert!(order.len() >= 10 && first_data.iter().all(|&i| i != usize::MAX), "{} fragments, all read", order.len());
    // A fragment that opens the files of the next ones (its own not open yet) is followed by
    // `OPEN_AHEAD` (4) whose files were opened before its data was read.
    let pairs: Vec<(usize, usize)> = order.windows(2).map(|p| (p[0], p[1])).collect();
    let ahead = pairs.iter().filter(|&&(a, b)| first_header[b] < first_data[a]).count();
    assert!(
        ahead * 3 >= pairs.len() * 2,
        "only {ahead} of {} fragments had their files opened before the previous one's data was read",
        pairs.len()
    );
}

/// 240 fragments of 4 rows, each in a data file of its own, in an in-memory store read with
/// 20 ms added to every GET.
fn fragments_behind_latency() -> (tessera::Store, Arc<FaultyStore>) {
    use tessera::{Batch, ColumnData, Dataset};
    let memory: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let schema = tessera::Schema::new([tessera::Column::new("id", tessera::DType::I64, &[])]).unwrap();
    let write = tessera::Store::from_object_store(memory.clone(), "", true);
    let mut ds = Dataset::create_in(&write, schema, &WriteOptions::default()).unwrap();
    for f in 0..240_i64 {
        let batch =
            Batch::new().with("id", ColumnData::from_scalars(&[f * 4, f * 4 + 1, f * 4 + 2, f * 4 + 3])).unwrap();
        ds = ds.append(&batch, "one file", WriteOptions::default()).unwrap();
    }
    let latency = Latency::new(Duration::from_millis(20), Duration::ZERO);
    let faulty = Arc::new(FaultyStore::new(memory, FaultConfig { get_latency: latency, ..FaultConfig::seeded(3) }));
    (tessera::Store::from_object_store(faulty.clone(), "", true), faulty)
}

#[test]
fn a_rank_of_many_reads_its_batch_fragments_in_one_wave() {
    // Block shuffle, 60 ranks of 16 rows: each rank has one batch, drawn from a window of 16
    // fragments of 4 rows, so it needs about ten fragments a few rows each. Their file
    // indexes and their rows are read together: as many GETs in flight as the batch has
    // fragments. Planned one fragment after another, their reads went out about four at a
    // time (files opened in groups of five, then one fragment's rows at a time).
    let (store, faulty) = fragments_behind_latency();
    let cfg = LoaderConfig::new("unused")
        .with_batch_size(16)
        .with_shuffle(ShuffleMode::Block { window_fragments: 16 })
        .with_seed(4)
        .with_rank(0, 60);
    let loader = Loader::open_store(&store, cfg, AlignedAllocator).unwrap();
    let fragments: BTreeSet<u64> = loader.plan(0).unwrap().batches().next().unwrap().iter().map(|&r| r / 4).collect();
    assert!(fragments.len() >= 8, "batch 0 draws from {} fragments", fragments.len());
    // Opening the version read its log segments together: count from here.
    faulty.counts.most_gets_in_flight.store(0, Ordering::Relaxed);
    let batches: Vec<_> = loader.epoch(0).unwrap().map(Result::unwrap).collect();
    assert_eq!(batches.len(), 1, "one batch per rank");
    let ids: BTreeSet<u64> = batches[0].rows.iter().map(|&r| r / 4).collect();
    assert_eq!(ids, fragments, "the batch holds the planned rows");
    let most = faulty.counts.most_gets_in_flight.load(Ordering::Relaxed);
    assert!(most >= fragments.len() as u64, "at most {most} GETs in flight for {} fragments", fragments.len());
}
