//! The loader over a version indexed by a fragment tree (SPEC.md §8.3, issue 26): it opens with
//! the manifest and the root node only, finds each batch's fragments through the tree when the
//! batch is filled, and delivers exactly the rows a fragment log of the same data delivers, in
//! every shuffle mode, sharded and resumed.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use tessera::{At, Batch, Column, ColumnData, DType, Dataset, IndexLayout, Limits, Schema, Store, WriteOptions};
use tessera_loader::{Loader, LoaderConfig, ShuffleMode};
use tessera_testkit::counting::CountingStore;

/// Nodes of a few one-file fragment entries: three levels or more over 60 fragments.
const NODE_BYTES: u64 = 700;
const FRAGMENTS: i64 = 60;
const ROWS_PER_FRAGMENT: i64 = 5;

fn options(index: IndexLayout) -> WriteOptions {
    WriteOptions { index, ..WriteOptions::default() }
}

/// 60 fragments of 5 rows (row `r` holds `id = 10 r`), then rows 7, 8 and the whole of
/// fragment 20 (rows 100..105 before the first delete) deleted.
fn dataset(root: &str, index: IndexLayout) -> Dataset {
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let mut ds = Dataset::create(root, schema, &options(index)).unwrap();
    for f in 0..FRAGMENTS {
        let ids: Vec<i64> = (f * ROWS_PER_FRAGMENT..(f + 1) * ROWS_PER_FRAGMENT).map(|r| 10 * r).collect();
        let batch = Batch::new().with("id", ColumnData::from_scalars(&ids)).unwrap();
        ds = ds.append(&batch, "5 rows", options(index)).unwrap();
    }
    ds.delete_rows(&[7, 8, 98, 99, 100, 101, 102], "two rows and a whole fragment", &options(index)).unwrap()
}

fn ids(batch: &tessera_loader::HostBatch) -> Vec<i64> {
    common::bytes(batch, 0).chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()
}

fn epoch(loader: &Loader, e: u64) -> Vec<Vec<i64>> {
    loader.epoch(e).unwrap().map(|b| ids(&b.unwrap())).collect()
}

/// The ids a full read of the latest version holds.
fn live_ids(root: &str) -> BTreeSet<i64> {
    let ds = Dataset::open(root).unwrap();
    let rows = ds.read_rows(0..ds.row_count(), None).unwrap();
    rows.columns()[0].1.to_vec::<i64>().unwrap().into_iter().collect()
}

/// Every shuffle mode, on two ranks: the ranks' rows are disjoint, equal in number, and
/// together exactly the live rows; the same holds on a fragment log of the same data.
#[test]
fn every_mode_reads_exactly_the_live_rows() {
    let (tree_dir, log_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let tree_root = tree_dir.path().to_str().unwrap();
    let log_root = log_dir.path().to_str().unwrap();
    dataset(tree_root, IndexLayout::Tree { node_bytes: NODE_BYTES });
    dataset(log_root, IndexLayout::Log);
    let want = live_ids(log_root);
    assert_eq!(want, live_ids(tree_root));
    assert_eq!(want.len(), 293);
    for shuffle in [ShuffleMode::None, ShuffleMode::Global, ShuffleMode::Block { window_fragments: 3 }] {
        for root in [tree_root, log_root] {
            let mut seen = BTreeSet::new();
            let mut per_rank = Vec::new();
            for rank in 0..2 {
                let cfg = LoaderConfig {
                    drop_last: true,
                    ..LoaderConfig::new(root)
                        .with_batch_size(7)
                        .with_shuffle(shuffle)
                        .with_seed(5)
                        .with_workers(2)
                        .with_rank(rank, 2)
                };
                let loader = Loader::open(cfg).unwrap();
                let got: Vec<i64> = epoch(&loader, 1).into_iter().flatten().collect();
                per_rank.push(got.len());
                for id in got {
                    assert!(seen.insert(id), "{shuffle:?} {root}: id {id} read twice");
                }
            }
            assert_eq!(per_rank[0], per_rank[1], "{shuffle:?}: equal shards");
            assert!(seen.is_subset(&want), "{shuffle:?}: only live rows");
            assert_eq!(seen.len(), 293 / 14 * 14, "{shuffle:?}: every full global batch");
        }
    }
}

/// Opening reads the manifest and the root node and no other node; an epoch reads each node of
/// the version's tree at most once (the catalog keeps what it found); an epoch resumed from a
/// mid-epoch state delivers exactly the batches the uninterrupted epoch delivered after that
/// point.
#[test]
fn a_lazy_open_reads_only_what_the_batches_need() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    dataset(root, IndexLayout::Tree { node_bytes: NODE_BYTES });
    let fs: Arc<dyn object_store::ObjectStore> =
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let counting = Arc::new(CountingStore::logging(fs));
    let store = Store::from_object_store(counting.clone(), "", true);
    let node_gets = || {
        let gets = counting.gets();
        gets.into_iter()
            .map(|(p, _)| p)
            .filter(|p| p.starts_with("index/") && std::path::Path::new(p).extension().is_some_and(|e| e == "tsn"))
            .collect::<Vec<_>>()
    };
    let tree = tessera::tree::FragmentTree::open_at(&store, &At::Latest, Limits::default()).unwrap().1;
    assert!(tree.depth() >= 3, "three levels, got {}", tree.depth());
    let mut in_tree = 0;
    tree.visit_nodes(&mut |_, _| {
        in_tree += 1;
        true
    })
    .unwrap();
    let before = node_gets().len();

    let cfg = LoaderConfig::new(root).with_batch_size(2).with_shuffle(ShuffleMode::Global).with_seed(9).with_workers(1);
    let loader = Loader::open_store(&store, cfg, Arc::new(tessera_loader::AlignedAllocator)).unwrap();
    assert!(loader.dataset().is_partial());
    assert_eq!(node_gets().len() - before, 1, "the root only");
    let full = epoch(&loader, 0);
    assert_eq!(full.iter().map(Vec::len).sum::<usize>(), 294, "293 rows and one of padding");
    let read = &node_gets()[before..];
    let distinct: BTreeSet<&String> = read.iter().collect();
    assert_eq!(distinct.len(), read.len(), "no node read twice in an epoch");
    assert!(read.len() <= in_tree, "{} node reads, {in_tree} nodes in the tree", read.len());

    // Exact resume mid-epoch.
    let mut it = loader.epoch(0).unwrap();
    for _ in 0..40 {
        it.next().unwrap().unwrap();
    }
    let state = it.state();
    drop(it);
    let resumed: Vec<Vec<i64>> = loader.resume(&state).unwrap().map(|b| ids(&b.unwrap())).collect();
    assert_eq!(resumed, full[40..]);
}

/// Block shuffle through the window (an object store) over a tree of fragments of unequal
/// sizes, so blocks of the mean size cut fragments apart and one fragment is read in several
/// windows: it opens with the root only (no whole-version read), reads each live row exactly
/// once across two ranks, in equal shards, within the memory budget, and before its first
/// batch reads only the tree nodes of its first windows, not the tree.
#[test]
fn block_shuffle_through_the_window_opens_lazily_and_reads_every_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let index = IndexLayout::Tree { node_bytes: NODE_BYTES };
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let mut ds = Dataset::create(root, schema, &options(index)).unwrap();
    let sizes = [3i64, 11, 5, 1, 17, 2, 9, 4, 13, 6, 1, 8, 21, 2, 7, 5, 3, 12, 1, 10];
    let mut next = 0i64;
    for round in 0..3 {
        for (i, &n) in sizes.iter().enumerate() {
            let n = n + (round + i as i64) % 3;
            let batch =
                Batch::new().with("id", ColumnData::from_scalars(&(next..next + n).collect::<Vec<_>>())).unwrap();
            ds = ds.append(&batch, "rows", options(index)).unwrap();
            next += n;
        }
    }
    let rows = u64::try_from(next).unwrap();
    assert_eq!(ds.fragments().len(), 60);
    let fs: Arc<dyn object_store::ObjectStore> =
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let counting = Arc::new(CountingStore::logging(fs));
    let store = Store::from_object_store(counting.clone(), "", true);
    let node_gets = || {
        let is_node =
            |p: &String| p.starts_with("index/") && std::path::Path::new(p).extension().is_some_and(|e| e == "tsn");
        counting.gets().into_iter().filter(|(p, _)| is_node(p)).count()
    };
    let tree = tessera::tree::FragmentTree::open_at(&store, &At::Latest, Limits::default()).unwrap().1;
    let mut in_tree = 0;
    tree.visit_nodes(&mut |_, _| {
        in_tree += 1;
        true
    })
    .unwrap();
    let mut seen = BTreeSet::new();
    let mut per_rank = Vec::new();
    for rank in 0..2 {
        let cfg = LoaderConfig::new(root)
            .with_batch_size(4)
            .with_shuffle(ShuffleMode::Block { window_fragments: 2 })
            .with_seed(3)
            .with_workers(2)
            .with_rank(rank, 2);
        let before = node_gets();
        let loader = Loader::open_store(&store, cfg, Arc::new(tessera_loader::AlignedAllocator)).unwrap();
        assert!(loader.dataset().is_partial(), "rank {rank}: opened lazily");
        assert_eq!(node_gets() - before, 1, "rank {rank}: the root only at open");
        let mut it = loader.epoch(0).unwrap();
        let first = ids(&it.next().unwrap().unwrap());
        let to_first = node_gets() - before;
        assert!(to_first < in_tree, "rank {rank}: {to_first} node reads before the first batch, {in_tree} nodes");
        let mut got = first;
        for b in it {
            got.extend(ids(&b.unwrap()));
        }
        // Padding repeats rows from the start of the order: count each position's row once.
        let real = usize::try_from(rows.div_ceil(8) * 4).unwrap();
        per_rank.push(got.len());
        assert_eq!(got.len(), real, "rank {rank}: every batch full");
        for id in got {
            seen.insert(id);
        }
        let m = loader.memory_stats();
        assert!(m.high_water <= m.budget, "rank {rank}: high water {} over the budget", m.high_water);
    }
    assert_eq!(per_rank[0], per_rank[1], "equal shards");
    assert_eq!(seen, (0..next).collect::<BTreeSet<_>>(), "every row read");
    let padding = usize::try_from(rows.div_ceil(8) * 8 - rows).unwrap();
    assert_eq!(per_rank.iter().sum::<usize>() - seen.len(), padding, "no row read twice but the padding");
}
