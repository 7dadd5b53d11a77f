//! The node-local disk cache (`LoaderConfig::with_cache_dir`) on object stores: a cached run's
//! batches are byte-identical to an uncached run's, its first batch reads only the rows it
//! misses, and its second epoch sends the store no request for data bytes; two processes sharing one cache directory download each block
//! once, and one killed mid-download leaves no partial entry and wedges nobody; corrupt
//! entries are detected, dropped and fetched again; the byte bound holds on a dataset more
//! than four times larger than the cache; a local directory does not use the cache.
//!
//! The two-process test runs this binary again as its children (`child_process`, which does
//! nothing unless `TESSERA_CACHE_CHILD` is set).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::{GetRange, ObjectStore};
use tessera::{Batch as Rows, Column, ColumnData, DType, Dataset, Dim, Store, WriteOptions};
use tessera_loader::{AlignedAllocator, Loader, LoaderConfig, ShuffleMode};
use tessera_testkit::{CountingStore, FaultConfig, FaultyStore};

/// Bytes of a file per cache entry (the loader's `disk_cache::BLOCK_BYTES`).
const BLOCK: u64 = 1 << 20;
/// `rows` rows of an id and a `row_bytes` image derived from it, in files of about
/// `file_bytes`, with small pages (a few rows each: random reads touch many blocks). Returns
/// the data files' sizes by key.
fn dataset(root: &Path, rows: usize, row_bytes: usize, file_bytes: u64) -> BTreeMap<String, u64> {
    let opts = WriteOptions { target_file_bytes: file_bytes, page_bytes: 8 << 10, ..WriteOptions::default() };
    let schema = tessera::Schema::new([
        Column::new("id", DType::I64, &[]),
        Column::new("img", DType::U8, &[Dim::Fixed(row_bytes as u64)]),
    ])
    .unwrap();
    let ds = Dataset::create(root.to_str().unwrap(), schema, &opts).unwrap();
    let mut w = ds.writer(opts);
    for start in (0..rows).step_by(500) {
        let n = 500.min(rows - start);
        let ids: Vec<i64> = (start..start + n).map(|i| i as i64).collect();
        let img: Vec<u8> = (0..n * row_bytes).map(|k| (k * 31 + k / 977 + start) as u8).collect();
        let b = Rows::new()
            .with("id", ColumnData::from_scalars(&ids))
            .unwrap()
            .with("img", ColumnData::from_fixed(&[row_bytes as u64], &img).unwrap())
            .unwrap();
        w.append(&b).unwrap();
    }
    let ds = w.commit("rows").unwrap();
    ds.fragments().iter().flat_map(|f| f.fragment.files.iter().map(|x| (x.path.clone(), x.size))).collect()
}

fn config(root: &Path) -> LoaderConfig {
    LoaderConfig { retry: common::fast_retries(), ..LoaderConfig::new(root.to_str().unwrap()) }
        .with_batch_size(32)
        .with_seed(11)
        .with_workers(2)
}

/// One epoch: per batch, its rows and each column's bytes.
type Epoch = Vec<(Vec<u64>, Vec<Vec<u8>>)>;

fn epoch(loader: &Loader, e: u64) -> Epoch {
    loader
        .epoch(e)
        .unwrap()
        .map(|b| {
            let b = b.unwrap();
            (b.rows.clone(), (0..b.columns.len()).map(|c| common::bytes(&b, c)).collect())
        })
        .collect()
}

/// The object store over a local directory (file handle bodies).
fn fs_store(dir: &Path) -> Arc<dyn ObjectStore> {
    Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir).unwrap())
}

fn open(store: Arc<dyn ObjectStore>, cfg: LoaderConfig) -> Loader {
    Loader::open_store(&Store::from_object_store(store, "", true), cfg, AlignedAllocator).unwrap()
}

/// GETs of whole cache blocks of data files (what the cache fetches): (key, block).
fn block_gets(counting: &CountingStore) -> Vec<(String, u64)> {
    counting
        .gets()
        .into_iter()
        .filter_map(|(path, range)| match range {
            Some(GetRange::Bounded(r))
                if path.starts_with("data/") && r.start % BLOCK == 0 && r.end - r.start == BLOCK =>
            {
                Some((path, r.start / BLOCK))
            }
            _ => None,
        })
        .collect()
}

/// Committed entries under a cache directory: (path, length).
fn entries(cache: &Path) -> Vec<(PathBuf, u64)> {
    files(cache, ".tc")
}

fn files(cache: &Path, suffix: &str) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let Ok(dirs) = std::fs::read_dir(cache) else { return out };
    for d in dirs {
        let d = d.unwrap().path();
        if d.is_dir() {
            for f in std::fs::read_dir(&d).unwrap() {
                let f = f.unwrap();
                if f.file_name().to_string_lossy().ends_with(suffix) {
                    out.push((f.path(), f.metadata().unwrap().len()));
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn cached_epochs_equal_uncached_ones_and_the_second_reads_no_data_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    let sizes = dataset(&data, 1500, 3000, 1536 << 10);
    let memory: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let mem_store = Store::from_object_store(memory.clone(), "", true);
    for e in walk(&data) {
        let key = e.strip_prefix(&data).unwrap().to_string_lossy().replace('\\', "/");
        mem_store.put_if_absent(&key, std::fs::read(&e).unwrap().into()).unwrap();
    }
    let truncating = FaultConfig { truncate_rate: 0.2, slow_stream_chunk: Some(4093), ..FaultConfig::seeded(5) };
    let cases: [(&str, Arc<dyn ObjectStore>, ShuffleMode, bool); 5] = [
        ("file handles, global", fs_store(&data), ShuffleMode::Global, true),
        ("file handles, global, no checksums", fs_store(&data), ShuffleMode::Global, false),
        ("file handles, block", fs_store(&data), ShuffleMode::Block { window_fragments: 1 }, true),
        ("memory (streams), global", memory.clone(), ShuffleMode::Global, true),
        (
            "bodies cut short, global",
            Arc::new(FaultyStore::new(fs_store(&data), truncating)),
            ShuffleMode::Global,
            true,
        ),
    ];
    for (i, (name, store, shuffle, verify)) in cases.into_iter().enumerate() {
        let cfg = LoaderConfig { verify_checksums: verify, ..config(&data) }.with_shuffle(shuffle);
        let plain = open(store.clone(), cfg.clone());
        let want = [epoch(&plain, 0), epoch(&plain, 1)];
        let cache = dir.path().join(format!("cache{i}"));
        let counting = Arc::new(CountingStore::logging(store));
        let loader = open(counting.clone(), cfg.clone().with_cache_dir(&cache, 256 << 20));
        assert!(epoch(&loader, 0) == want[0], "{name}: epoch 0 differs from the uncached run");
        let first = loader.io_stats();
        let gets = block_gets(&counting);
        let distinct: BTreeSet<_> = gets.iter().cloned().collect();
        assert!(first.cache.misses > 0 && first.cache.written_bytes > 0, "{name}: {first:?}");
        // The first batch's misses read only their rows (32 rows, each in one or two blocks);
        // their blocks were fetched whole by later batches (epoch 1 below reads no data).
        // (Block shuffle reads whole fragments through its window, often ahead of batch 0.)
        if shuffle == ShuffleMode::Global {
            assert!((1..=64).contains(&first.cache.direct), "{name}: {first:?}");
        }
        if !name.starts_with("bodies") {
            // Retried GETs repeat a block; without faults each block is fetched once.
            assert_eq!(gets.len(), distinct.len(), "{name}: a block fetched twice");
        }
        assert_eq!(entries(&cache).len(), distinct.len(), "{name}: one entry per block fetched");
        let data_gets = |c: &CountingStore| c.gets().iter().filter(|(p, _)| p.starts_with("data/")).count();
        let before = data_gets(&counting);
        assert!(epoch(&loader, 1) == want[1], "{name}: epoch 1 differs from the uncached run");
        let second = loader.io_stats();
        assert_eq!(data_gets(&counting), before, "{name}: epoch 1 asked the store for data bytes");
        assert_eq!((second.requests, second.bytes), (first.requests, first.bytes), "{name}");
        assert_eq!(second.cache.misses, first.cache.misses, "{name}");
        assert!(second.cache.hits > first.cache.hits && second.cache.read_bytes > first.cache.read_bytes, "{name}");
        assert_eq!((second.cache.corrupt, second.cache.errors, second.cache.evictions), (0, 0, 0), "{name}");
        // Epochs 0 and 1 ran self-tuned (epoch 0 missed). Epoch 1 was served by the cache
        // alone, so epoch 2 runs as on local files: the configured two workers.
        assert!(second.threads > 2, "{name}: {second:?}");
        assert!(epoch(&loader, 2) == epoch(&plain, 2), "{name}: epoch 2 (warm) differs from the uncached run");
        assert_eq!(loader.io_stats().threads, 2, "{name}: a warm cache runs the configured workers");
        if i == 0 {
            // Another loader over the full cache, with a budget whose page cache holds a
            // fraction of the pages (so every epoch reads the disk cache): its first epoch is
            // self-tuned and hits only, so its second runs as on local files. Corrupt entries
            // are misses: that epoch still yields the right rows, and the next is self-tuned.
            let small = LoaderConfig { memory_budget: 8 << 20, ..cfg.clone() }.with_cache_dir(&cache, 256 << 20);
            let again = open(counting.clone(), small);
            assert!(epoch(&again, 0) == want[0] && again.io_stats().threads > 2, "{:?}", again.io_stats());
            assert!(epoch(&again, 1) == want[1] && again.io_stats().threads == 2, "{:?}", again.io_stats());
            for (e, len) in entries(&cache) {
                flip(&e, len - data_len(&e, &sizes) / 2);
            }
            assert!(epoch(&again, 2) == epoch(&plain, 2), "epoch 2 (corrupt entries) differs");
            assert!(again.io_stats().cache.corrupt > 0, "{:?}", again.io_stats());
            assert!(epoch(&again, 3) == epoch(&plain, 3), "epoch 3 differs");
            assert!(again.io_stats().threads > 2, "after misses the cache runs self-tuned again");
        }
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

/// Flips one byte of a file at `at`.
fn flip(path: &Path, at: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize] ^= 0x5a;
    std::fs::write(path, b).unwrap();
}

/// The data length of an entry file: its block of the data file, up to the file's end.
fn data_len(entry: &Path, sizes: &BTreeMap<String, u64>) -> u64 {
    let name = entry.file_name().unwrap().to_string_lossy().into_owned();
    // <stem>.<hash>.<block>.tc, the stem being the data file's name.
    let parts: Vec<&str> = name.rsplitn(4, '.').collect();
    let block: u64 = parts[1].parse().unwrap();
    let size = sizes[&format!("data/{}", parts[3])];
    BLOCK.min(size - block * BLOCK)
}

/// Rewrites an entry with one data byte changed and its chunk CRC and header CRC recomputed:
/// an entry sound by its own checks whose bytes are not the file's.
fn forge(entry: &Path, data_len: u64) {
    let mut b = std::fs::read(entry).unwrap();
    let header_len = b.len() - data_len as usize;
    let at = header_len + data_len as usize / 2;
    b[at] ^= 0x5a;
    let key_len = u32::from_le_bytes(b[20..24].try_into().unwrap()) as usize;
    let crcs_at = 24 + key_len + 8 + 8 + 4;
    let chunk = (at - header_len) / (16 << 10);
    let chunk_bytes = &b[header_len + chunk * (16 << 10)..(header_len + (chunk + 1) * (16 << 10)).min(b.len())];
    let crc = crc32fast::hash(chunk_bytes);
    b[crcs_at + 4 * chunk..crcs_at + 4 * chunk + 4].copy_from_slice(&crc.to_le_bytes());
    let header_crc = crc32fast::hash(&b[..header_len - 4]);
    b[header_len - 4..header_len].copy_from_slice(&header_crc.to_le_bytes());
    std::fs::write(entry, b).unwrap();
}

#[test]
fn corrupt_entries_are_detected_dropped_and_fetched_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    let sizes = dataset(&data, 1500, 3000, 1536 << 10);
    let cache = dir.path().join("cache");
    let cfg = config(&data);
    let want = epoch(&open(fs_store(&data), cfg.clone()), 0);
    let cfg = cfg.with_cache_dir(&cache, 256 << 20);
    assert!(epoch(&open(fs_store(&data), cfg.clone()), 0) == want);
    let all = entries(&cache);
    assert!(all.len() >= 4, "{} entries", all.len());
    // Block 0 of files: pages in the middle (a block's first bytes are the file's header,
    // its last ones maybe the footer, which the loader reads around the cache).
    let firsts: Vec<&PathBuf> = all.iter().map(|(p, _)| p).filter(|p| p.to_string_lossy().ends_with(".0.tc")).collect();
    assert!(firsts.len() >= 3);
    let (a, b, c) = (firsts[0], firsts[1], firsts[2]);
    let a_len = std::fs::metadata(a).unwrap().len();
    flip(a, a_len - data_len(a, &sizes) / 2); // a data byte
    flip(b, 10); // the header
    let c_len = std::fs::metadata(c).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(c).unwrap().set_len(c_len - 1).unwrap(); // truncated
    let loader = open(fs_store(&data), cfg.clone());
    assert!(epoch(&loader, 0) == want, "batches differ after corruption");
    let s = loader.io_stats().cache;
    assert_eq!((s.corrupt, s.misses), (3, 3), "{s:?}");
    assert!(s.hits > 0);
    assert_eq!(entries(&cache).len(), all.len(), "the corrupt entries were fetched again");
    let again = open(fs_store(&data), cfg.clone());
    assert!(epoch(&again, 0) == want);
    assert_eq!((again.io_stats().cache.corrupt, again.io_stats().cache.misses), (0, 0), "restored entries are sound");

    // Checksums off: only the entry's own CRCs can see a flipped data byte.
    flip(a, a_len - data_len(a, &sizes) / 2);
    let unchecked = open(fs_store(&data), LoaderConfig { verify_checksums: false, ..cfg.clone() });
    assert!(epoch(&unchecked, 0) == want, "batches differ after corruption, checksums off");
    let s = unchecked.io_stats().cache;
    assert_eq!((s.corrupt, s.misses), (1, 1), "checksums off: {s:?}");

    // Sound by its own checksums, wrong by the format's page checksum: fetched again from the
    // store, the entry replaced.
    forge(a, data_len(a, &sizes));
    let forged = open(fs_store(&data), cfg.clone());
    assert!(epoch(&forged, 0) == want, "batches differ with a forged entry");
    let s = forged.io_stats().cache;
    assert_eq!((s.corrupt, s.misses), (1, 1), "{s:?}");
    let after = open(fs_store(&data), cfg);
    assert!(epoch(&after, 0) == want);
    assert_eq!((after.io_stats().cache.corrupt, after.io_stats().cache.misses), (0, 0));
}

#[test]
fn the_bound_holds_on_a_dataset_four_times_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    // Rows of 48 KiB: a global shuffle's misses (a block each) stay few.
    let sizes = dataset(&data, 400, 48 << 10, 4 << 20);
    let total: u64 = sizes.values().sum();
    let bound = 4u64 << 20;
    assert!(total >= 4 * bound, "dataset {total} bytes, bound {bound}");
    let cache = dir.path().join("cache");
    for shuffle in [ShuffleMode::Global, ShuffleMode::Block { window_fragments: 1 }] {
        let cfg = config(&data).with_shuffle(shuffle).with_batch_size(64);
        let plain = open(fs_store(&data), cfg.clone());
        let loader = open(fs_store(&data), cfg.with_cache_dir(&cache, bound));
        for e in 0..2 {
            assert!(epoch(&loader, e) == epoch(&plain, e), "{shuffle:?} epoch {e}: batches differ");
            let held: u64 = entries(&cache).iter().map(|(_, n)| n).sum();
            assert!(held <= bound, "{shuffle:?} epoch {e}: {held} bytes cached > bound {bound}");
            assert!(files(&cache, ".tmp").is_empty() && files(&cache, ".lock").is_empty());
        }
        let s = loader.io_stats().cache;
        assert!(s.evictions > 0 && s.written_bytes > bound, "{shuffle:?}: {s:?}");
        assert_eq!((s.corrupt, s.errors), (0, 0));
    }
}

#[test]
fn local_directories_do_not_use_the_cache_and_a_bad_cache_dir_fails_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    dataset(&data, 200, 3000, 1 << 20);
    let cache = dir.path().join("cache");
    let loader = Loader::open(config(&data).with_cache_dir(&cache, 64 << 20)).unwrap();
    assert_eq!(epoch(&loader, 0).len(), 7);
    assert_eq!(loader.io_stats().cache, tessera_loader::CacheStats::default());
    assert!(!cache.exists(), "a local dataset made a cache directory");

    let not_a_dir = dir.path().join("file");
    std::fs::write(&not_a_dir, b"x").unwrap();
    let store = Store::from_object_store(fs_store(&data), "", true);
    let cfg = config(&data).with_cache_dir(not_a_dir.join("cache"), 64 << 20);
    let e = Loader::open_store(&store, cfg, AlignedAllocator).unwrap_err();
    assert!(matches!(e, tessera_loader::LoaderError::Config(_)), "{e}");
    let small = config(&data).with_cache_dir(&cache, 1 << 20);
    assert!(matches!(Loader::open_store(&store, small, AlignedAllocator), Err(tessera_loader::LoaderError::Config(_))));
}

// ---- two processes -------------------------------------------------------------------------

const CHILD: &str = "TESSERA_CACHE_CHILD";

/// A child process's run: the dataset, the cache directory, where to write its report, and
/// whether the store streams slowly (so a download can be caught in the middle).
fn spawn(data: &Path, cache: &Path, out: &Path, slow: bool) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["child_process", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, format!("{}\n{}\n{}\n{}", data.display(), cache.display(), out.display(), u8::from(slow)))
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn wait(child: &mut Child, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "child failed: {status}");
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a child process did not finish within {within:?} (wedged?)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What a child reports: a CRC per batch, the blocks it fetched, its cache stats.
#[derive(Debug)]
struct Report {
    batches: Vec<u32>,
    gets: Vec<(String, u64)>,
    corrupt: u64,
    hits: u64,
}

fn report(path: &Path) -> Report {
    let text = std::fs::read_to_string(path).unwrap();
    let mut r = Report { batches: Vec::new(), gets: Vec::new(), corrupt: 0, hits: 0 };
    for line in text.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        match w[0] {
            "batch" => r.batches.push(w[1].parse().unwrap()),
            "get" => r.gets.push((w[1].to_string(), w[2].parse().unwrap())),
            "stats" => (r.hits, r.corrupt) = (w[1].parse().unwrap(), w[2].parse().unwrap()),
            _ => panic!("{line}"),
        }
    }
    r
}

fn digest(epoch: &Epoch) -> Vec<u32> {
    epoch
        .iter()
        .map(|(rows, cols)| {
            let mut h = crc32fast::Hasher::new();
            for r in rows {
                h.update(&r.to_le_bytes());
            }
            for c in cols {
                h.update(c);
            }
            h.finalize()
        })
        .collect()
}

fn child_config(data: &Path, cache: &Path) -> LoaderConfig {
    config(data).with_workers(3).with_cache_dir(cache, 256 << 20)
}

/// The child side of `two_processes_share_one_cache_directory` (nothing without its variable).
#[test]
fn child_process() {
    let Ok(spec) = std::env::var(CHILD) else { return };
    let spec: Vec<&str> = spec.lines().collect();
    let (data, cache, out, slow) = (Path::new(spec[0]), Path::new(spec[1]), Path::new(spec[2]), spec[3] == "1");
    let inner = if slow {
        // About 0.2 s per block: a kill lands in the middle of one.
        let cfg = FaultConfig {
            slow_stream_chunk: Some(16 << 10),
            slow_stream_pause: Duration::from_millis(3),
            ..FaultConfig::seeded(1)
        };
        Arc::new(FaultyStore::new(fs_store(data), cfg)) as Arc<dyn ObjectStore>
    } else {
        fs_store(data)
    };
    let counting = Arc::new(CountingStore::logging(inner));
    let loader = open(counting.clone(), child_config(data, cache));
    let got = epoch(&loader, 0);
    let mut text = String::new();
    for d in digest(&got) {
        writeln!(text, "batch {d}").unwrap();
    }
    for (key, block) in block_gets(&counting) {
        writeln!(text, "get {key} {block}").unwrap();
    }
    let s = loader.io_stats().cache;
    writeln!(text, "stats {} {}", s.hits, s.corrupt).unwrap();
    let tmp = out.with_extension("part");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(tmp, out).unwrap();
}

#[test]
fn two_processes_share_one_cache_directory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    dataset(&data, 1500, 3000, 1536 << 10);
    let want = digest(&epoch(&open(fs_store(&data), config(&data).with_workers(3)), 0));

    // Two processes over the same epoch at once: the same batches as an uncached run, and
    // each block downloaded once between them.
    let cache = dir.path().join("cache");
    let outs = [dir.path().join("a.txt"), dir.path().join("b.txt")];
    let mut children: Vec<Child> = outs.iter().map(|o| spawn(&data, &cache, o, true)).collect();
    for c in &mut children {
        wait(c, Duration::from_secs(120));
    }
    let (a, b) = (report(&outs[0]), report(&outs[1]));
    assert_eq!(a.batches, want, "process a's batches differ from an uncached run");
    assert_eq!(b.batches, want, "process b's batches differ from an uncached run");
    let mut all: Vec<(String, u64)> = a.gets.iter().chain(&b.gets).cloned().collect();
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n, "{} block downloads for {} blocks", n, all.len());
    assert_eq!(all.len(), entries(&cache).len());
    assert!(a.hits > 0 && b.hits > 0, "each process read blocks the other fetched: {a:?} {b:?}");
    assert_eq!((a.corrupt, b.corrupt), (0, 0));

    // A process killed in the middle of a download: its partial entry is never visible, and
    // the next processes (a restart and another) finish with the same batches.
    let cache = dir.path().join("cache2");
    let out = dir.path().join("killed.txt");
    let mut doomed = spawn(&data, &cache, &out, true);
    let deadline = Instant::now() + Duration::from_secs(60);
    // Killed once some download has written part of a block (whatever its file's name).
    loop {
        if files(&cache, "").iter().any(|(_, len)| *len > 64 << 10) {
            break;
        }
        assert!(Instant::now() < deadline, "no download seen in progress");
        assert!(doomed.try_wait().unwrap().is_none(), "the child finished before it could be killed");
        std::thread::sleep(Duration::from_millis(2));
    }
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    assert!(!out.exists(), "the child finished before it was killed");
    let partial = files(&cache, ".tc.tmp");
    for (tmp, _) in &partial {
        // <entry>.tc.tmp: the entry itself is not there (or whole, if it was committed
        // between the look and the kill: then reading it below finds nothing corrupt).
        let entry = tmp.with_extension("");
        assert!(!entry.exists() || entries(&cache).iter().any(|(p, _)| p == &entry));
    }
    let outs = [dir.path().join("c.txt"), dir.path().join("d.txt")];
    let mut children: Vec<Child> = outs.iter().map(|o| spawn(&data, &cache, o, true)).collect();
    for c in &mut children {
        wait(c, Duration::from_secs(120));
    }
    for o in &outs {
        let r = report(o);
        assert_eq!(r.batches, want, "after the kill: batches differ");
        assert_eq!(r.corrupt, 0, "after the kill: a reader met a corrupt entry");
    }
    assert!(!partial.is_empty(), "no download was cut short (under its temporary name)");
    assert!(files(&cache, ".tmp").is_empty(), "temporary files left: {:?}", files(&cache, ".tmp"));
    assert!(files(&cache, ".lock").is_empty(), "lock files left: {:?}", files(&cache, ".lock"));
}
