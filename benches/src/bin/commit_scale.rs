//! Commit cost at scale `[issue: versioning in depth]`: appending one fragment to a dataset
//! with many fragments and versions costs about what it costs on a fresh dataset, and opening
//! the latest version costs one LIST plus a bounded number of GETs.
//!
//! `cargo run --release -p tessera-benches --bin commit_scale -- [FRAGMENTS] [VERSIONS] [DIR]`
//! (defaults 100000, 1000, a temporary directory). Both datasets live on the local file system
//! with fsync on (the default store), wrapped in a request counter; the large one is *built*
//! with fsync off to save minutes, then measured like the fresh one.

use std::sync::Arc;
use std::time::Instant;

use tessera::{At, Batch, Column, ColumnData, DType, Dataset, Limits, Schema, Store, WriteOptions};
use tessera_benches::counting::CountingStore;

fn batch(start: i64, rows: i64) -> Batch {
    Batch::new().with("id", ColumnData::from_scalars(&(start..start + rows).collect::<Vec<_>>())).unwrap()
}

fn opts() -> WriteOptions {
    // One row per data file: every appended row becomes its own fragment.
    WriteOptions { target_file_bytes: 1, timestamp_ms: Some(0), ..WriteOptions::default() }
}

struct Measured {
    ms: f64,
    counts: [u64; 5],
}

fn measure(counter: &CountingStore, f: impl FnOnce()) -> Measured {
    let before = counter.counts.snapshot();
    let t = Instant::now();
    f();
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let after = counter.counts.snapshot();
    Measured { ms, counts: std::array::from_fn(|i| after[i] - before[i]) }
}

fn commit_one(store: &Store, counter: &CountingStore, label: &str) -> Measured {
    let mut samples = Vec::new();
    for i in 0..5 {
        let ds = Dataset::open_at(store, &At::Latest, Limits::default()).unwrap();
        samples.push(measure(counter, || {
            ds.append(&batch(-1 - i, 1), "one fragment", opts()).unwrap();
        }));
    }
    samples.sort_by(|a, b| a.ms.total_cmp(&b.ms));
    let m = samples.swap_remove(2);
    let [gets, gb, puts, pb, lists] = m.counts;
    println!("{label:<34} {:>9.2} ms  GET {gets:>3} ({gb:>9} B)  PUT {puts:>3} ({pb:>9} B)  LIST {lists}", m.ms);
    m
}

fn main() {
    let mut args = std::env::args().skip(1);
    let fragments: i64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let versions: i64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1_000);
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();

    let root = args
        .next()
        .map_or_else(|| std::env::temp_dir().join(format!("commit-scale-{}", std::process::id())), Into::into);
    let local = |dir: &str, fsync: bool| -> Arc<CountingStore> {
        let path = root.join(dir);
        std::fs::create_dir_all(&path).unwrap();
        let fs = object_store::local::LocalFileSystem::new_with_prefix(&path).unwrap().with_fsync(fsync);
        Arc::new(CountingStore::new(Arc::new(fs)))
    };
    let fresh_counter = local("fresh", true);
    let fresh = Store::from_object_store(fresh_counter.clone(), "", true);
    Dataset::create_in(&fresh, schema.clone(), &opts()).unwrap();
    println!("append of one fragment (median of 5):");
    let a = commit_one(&fresh, &fresh_counter, "fresh dataset");

    let builder = Store::from_object_store(local("big", false), "", true);
    let mut ds = Dataset::create_in(&builder, schema, &opts()).unwrap();
    let per_commit = (fragments / (versions - 1).max(1)).max(1);
    let t = Instant::now();
    let mut made = 0;
    while made < fragments {
        let n = per_commit.min(fragments - made);
        ds = ds.append(&batch(made, n), "bulk", opts()).unwrap();
        made += n;
    }
    println!(
        "built {} fragments in {} versions ({} segments) in {:.1} s",
        ds.fragments().len(),
        ds.version(),
        ds.manifest().segments.len(),
        t.elapsed().as_secs_f64()
    );
    let big_counter = local("big", true);
    let big = Store::from_object_store(big_counter.clone(), "", true);
    let b = commit_one(&big, &big_counter, &format!("{fragments} fragments, {} versions", ds.version()));
    println!("ratio big/fresh commit time: {:.2}x", b.ms / a.ms);

    let open = measure(&big_counter, || {
        Dataset::open_at(&big, &At::Latest, Limits::default()).unwrap();
    });
    let [gets, gb, _, _, lists] = open.counts;
    println!("open latest: {:.2} ms, LIST {lists}, GET {gets} ({gb} B)", open.ms);
    std::fs::remove_dir_all(&root).ok();
}
