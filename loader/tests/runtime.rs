//! The loader's I/O runs on the loader's own runtime (`tessera-loadio` threads), never on the
//! reference's runtime for blocking callers (`tessera-io`), and a loader refuses to be opened
//! from inside an async runtime. One test in its own binary: the thread census below is this
//! process's alone.

use std::collections::BTreeSet;

use tessera::{Batch, Column, ColumnData, DType, Dataset, IndexLayout, Schema, Store, WriteOptions};
use tessera_loader::{Loader, LoaderConfig, LoaderError, ShuffleMode};

/// The names of this process's threads (Linux truncates them to 15 bytes).
fn thread_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        if let Ok(name) = std::fs::read_to_string(task.unwrap().path().join("comm")) {
            names.insert(name.trim().to_string());
        }
    }
    names
}

#[test]
#[cfg(target_os = "linux")]
fn loader_io_runs_on_the_loaders_runtime_and_not_inside_a_callers() {
    // The dataset is written through the async API on this test's own runtime, so nothing
    // here starts the reference's blocking runtime either.
    let url = "memory://loader-runtime";
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let store = Store::open(url).unwrap();
        let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
        let options = WriteOptions { index: IndexLayout::Tree { node_bytes: 600 }, ..WriteOptions::default() };
        let mut ds = Dataset::create_in_async(&store, schema, &options).await.unwrap();
        for f in 0..12i64 {
            let ids: Vec<i64> = (f * 10..(f + 1) * 10).collect();
            let batch = Batch::new().with("id", ColumnData::from_scalars(&ids)).unwrap();
            ds = ds.append_async(&batch, "ten rows", options.clone()).await.unwrap();
        }
    });
    assert!(!thread_names().contains("tessera-io"), "{:?}", thread_names());

    // Opened inside a runtime: a config error that says what to do, not a panic.
    let inside = rt.block_on(async { Loader::open(LoaderConfig::new(url)) });
    match inside {
        Err(LoaderError::Config(m)) => assert!(m.contains("std::thread::spawn"), "{m}"),
        other => panic!("{:?}", other.map(|_| ())),
    }

    // A view of every other row, saved through the async API too: opening it is part of the
    // loader's I/O.
    rt.block_on(async {
        let store = Store::open(url).unwrap();
        let ds = Dataset::open_lazy_async(&store, &tessera::At::Latest, tessera::Limits::default()).await.unwrap().0;
        let rows: Vec<u64> = (0..120).step_by(2).collect();
        ds.save_view_async("evens", &rows, "every other row").await.unwrap();
    });
    let view = Loader::open(LoaderConfig::new(url).with_batch_size(6).with_view("evens")).unwrap();
    let got: Vec<u64> = view.epoch(0).unwrap().flat_map(|b| b.unwrap().rows).collect();
    assert_eq!(got.len(), 60);
    assert!(got.iter().all(|r| r % 2 == 0), "{got:?}");

    for shuffle in [ShuffleMode::Global, ShuffleMode::Block { window_fragments: 2 }] {
        let loader = Loader::open(LoaderConfig::new(url).with_batch_size(7).with_shuffle(shuffle)).unwrap();
        let mut ids = Vec::new();
        for batch in loader.epoch(0).unwrap() {
            let batch = batch.unwrap();
            ids.extend(batch.rows.iter().copied());
        }
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids, (0..120).collect::<Vec<u64>>(), "{shuffle:?}");
    }
    let names = thread_names();
    assert!(names.contains("tessera-loadio"), "the loader's runtime ran its I/O: {names:?}");
    assert!(!names.contains("tessera-io"), "the reference's blocking runtime stayed unused: {names:?}");
}
