//! The async API end to end: opening, appending, committing (with lost races), deleting,
//! branching, tagging and restoring all run as tasks on the caller's own runtime, for both
//! index layouts; the blocking facades refuse to run inside a runtime.

use std::sync::Arc;

use tessera::tree::FragmentTree;
use tessera::{
    At, Batch, Column, ColumnData, DType, Dataset, ErrorClass, IndexLayout, Limits, Schema, Store, WriteOptions,
};

/// Concurrent committers: each loses races to the others and rebases.
const WRITERS: i64 = 6;
/// Rows each writer appends, in files of `FILE_ROWS` rows.
const ROWS: i64 = 10;
const FILE_ROWS: u64 = 4;

fn ids_batch(start: i64, n: i64) -> Batch {
    Batch::new().with("id", ColumnData::from_scalars(&(start..start + n).collect::<Vec<_>>())).unwrap()
}

fn options(index: IndexLayout) -> WriteOptions {
    WriteOptions { target_file_bytes: 8 * FILE_ROWS, index, ..WriteOptions::default() }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

async fn ids(ds: &Dataset) -> Vec<i64> {
    let batch = ds.read_rows_async(0..ds.row_count(), None).await.unwrap();
    batch.get("id").unwrap().to_vec::<i64>().unwrap()
}

/// Every step as a spawned task (which needs `Send` futures: a compile-time check of the API).
fn run_all_steps(index: IndexLayout) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let rt = runtime();
    let opts = options(index);
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let base = {
        let (store, opts) = (store.clone(), opts.clone());
        rt.block_on(rt.spawn(async move { Dataset::create_in_async(&store, schema, &opts).await })).unwrap().unwrap()
    };
    let base = Arc::new(base);

    // Writers on the same base version race; each commit that loses rebases and lands.
    let tasks: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (base, opts) = (base.clone(), opts.clone());
            rt.spawn(async move {
                let mut writer = base.writer(opts);
                writer.append_async(&ids_batch(w * 100, ROWS / 2)).await?;
                writer.append_async(&ids_batch(w * 100 + ROWS / 2, ROWS - ROWS / 2)).await?;
                writer.commit_async(&format!("writer {w}")).await
            })
        })
        .collect();
    for t in tasks {
        rt.block_on(t).unwrap().unwrap();
    }
    let latest = rt
        .block_on(rt.spawn({
            let store = store.clone();
            async move { Dataset::open_at_async(&store, &At::Latest, Limits::default()).await }
        }))
        .unwrap()
        .unwrap();
    assert_eq!(latest.version(), 1 + WRITERS as u64, "every writer's commit landed");
    assert_eq!(latest.row_count(), (WRITERS * ROWS) as u64);
    let mut got = rt.block_on(ids(&latest));
    got.sort_unstable();
    let mut want: Vec<i64> = (0..WRITERS).flat_map(|w| w * 100..w * 100 + ROWS).collect();
    want.sort_unstable();
    assert_eq!(got, want);
    // The blocking reads agree with the async ones (outside the runtime).
    assert_eq!(Dataset::open(dir.path().to_str().unwrap()).unwrap().version(), latest.version());

    let latest = Arc::new(latest);
    let (after_delete, tagged, branch, log, restored) = rt
        .block_on(rt.spawn({
            let (latest, opts) = (latest.clone(), opts.clone());
            async move {
                // Delete the first three rows, then tag, branch and walk the history.
                let deleted = latest.delete_rows_async(&[0, 1, 2], "delete three", &opts).await?;
                deleted.create_tag_async("trimmed", "three rows fewer", &opts).await?;
                let tagged =
                    Dataset::open_at_async(deleted.store(), &At::Tag("trimmed".into()), Limits::default()).await?;
                let branch = deleted.create_branch_async("side", &opts).await?;
                let log = deleted.log_async().await?;
                // Restoring the version before the delete commits it again on top.
                let restored = latest.restore_async("undo", &opts).await?;
                Ok::<_, tessera::Error>((deleted, tagged, branch, log, restored))
            }
        }))
        .unwrap()
        .unwrap();
    assert_eq!(after_delete.row_count(), latest.row_count() - 3);
    assert_eq!(tagged.version(), after_delete.version());
    assert_eq!(rt.block_on(ids(&tagged)), rt.block_on(ids(&after_delete)));
    assert_eq!((branch.branch(), branch.row_count()), ("side", after_delete.row_count()));
    assert_eq!(log.len(), after_delete.version() as usize, "one manifest per version");
    assert_eq!(restored.version(), after_delete.version() + 1);
    assert_eq!(rt.block_on(ids(&restored)), rt.block_on(ids(&latest)));

    // Inside the runtime, the blocking facades refuse rather than stall a worker thread.
    let inside = rt.block_on(async {
        let mut w = latest.writer(opts.clone());
        w.append(&ids_batch(0, 1)).and_then(|()| w.commit("blocked"))
    });
    assert_eq!(inside.unwrap_err().class(), ErrorClass::Usage);
    let inside = rt.block_on(async { Dataset::open(dir.path().to_str().unwrap()) });
    assert_eq!(inside.unwrap_err().class(), ErrorClass::Usage);
}

#[test]
fn a_fragment_log_commits_and_opens_as_tasks() {
    run_all_steps(IndexLayout::Log);
}

#[test]
fn a_fragment_tree_commits_and_opens_as_tasks() {
    // Small nodes: the commits split, rewrite and deepen the tree.
    run_all_steps(IndexLayout::Tree { node_bytes: 256 });
}

#[test]
fn a_lazy_reader_locates_rows_as_a_task() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().to_str().unwrap();
    let opts = options(IndexLayout::Tree { node_bytes: 256 });
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let mut ds = Dataset::create(loc, schema, &opts).unwrap();
    for i in 0..8 {
        ds = ds.append(&ids_batch(i * 16, 16), "more", opts.clone()).unwrap();
    }
    let rows: Vec<u64> = (0..ds.row_count()).step_by(7).collect();
    let blocking = FragmentTree::open_at(ds.store(), &At::Latest, Limits::default()).unwrap().1;
    let want = blocking.locate_many_indexed(&rows).unwrap();
    assert!(blocking.depth() > 1, "the tree has inner nodes");
    let store = ds.store().clone();
    let rt = runtime();
    let (got, lazy_rows) = rt
        .block_on(rt.spawn(async move {
            let (lazy, tree) = Dataset::open_lazy_async(&store, &At::Latest, Limits::default()).await?;
            let tree = tree.expect("a tree-indexed version");
            // Several lookups at once share the node reads (one waits for the other's).
            let (a, b) = tokio::join!(tree.locate_many_indexed_async(&rows), tree.locate_many_indexed_async(&rows));
            assert_eq!(a?, b?.clone());
            Ok::<_, tessera::Error>((tree.locate_many_indexed_async(&rows).await?, lazy.row_count()))
        }))
        .unwrap()
        .unwrap();
    assert_eq!(lazy_rows, ds.row_count());
    let key = |v: &[(u64, tessera::FragmentInfo)]| {
        v.iter().map(|(i, f)| (*i, f.fragment.id, f.first_row)).collect::<Vec<_>>()
    };
    assert_eq!(key(&got), key(&want));
}
