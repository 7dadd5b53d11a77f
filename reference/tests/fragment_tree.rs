//! The fragment tree (issue 26, SPEC.md §"The fragment tree"): every node stays within its
//! limit however many fragments a dataset has, a commit rewrites only the nodes on its paths,
//! a reader finds any row in one node read per level, and every operation gives the same rows
//! as on a fragment log.

use std::collections::BTreeMap;

use proptest::prelude::*;
use tessera::dump::{dump, dump_column};
use tessera::envelope::{self, ObjectKind};
use tessera::manifest::{DataFileRef, DeletionRef, Fragment, Manifest};
use tessera::tree::{self, FragmentTree, IndexNode};
use tessera::{
    At, Batch, Column, ColumnData, DType, Dataset, ErrorClass, IndexLayout, Limits, Schema, Store, WriteOptions,
};

/// About 26 one-file fragment entries of one `i64` column per node.
const NODE_BYTES: u64 = 1024;
/// The segment (and node) body limit the writer works under.
const BODY_LIMIT: u64 = 4096;

fn options(index: IndexLayout) -> WriteOptions {
    WriteOptions {
        timestamp_ms: Some(1),
        writer_id: Some([7; 16]),
        limits: Limits::default().with_max_segment_body(BODY_LIMIT),
        index,
        ..WriteOptions::default()
    }
}

fn tree_options() -> WriteOptions {
    options(IndexLayout::Tree { node_bytes: NODE_BYTES })
}

fn ids(values: &[i64]) -> Batch {
    Batch::new().with("id", ColumnData::from_scalars(values)).unwrap()
}

fn create(location: &str, opts: &WriteOptions) -> (Store, Dataset) {
    let store = Store::open(location).unwrap();
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let ds = Dataset::create_in(&store, schema, opts).unwrap();
    (store, ds)
}

fn open(store: &Store, version: u64) -> Dataset {
    Dataset::open_at(
        store,
        &At::BranchVersion("main".into(), version),
        Limits::default().with_max_segment_body(BODY_LIMIT),
    )
    .unwrap_or_else(|e| panic!("version {version} does not open: {e}"))
}

fn assert_rows(ds: &Dataset, want: &[i64]) {
    let got = dump(ds).unwrap();
    assert_eq!(got["row_count"], want.len() as u64, "version {}", ds.version());
    assert_eq!(got["columns"]["id"], dump_column(&ColumnData::from_scalars(want)), "version {}", ds.version());
}

/// Node objects in the store: key and body length.
fn nodes(store: &Store) -> Vec<(String, u64)> {
    let frame = (envelope::HEADER_LEN + envelope::TRAILER_LEN) as u64;
    store
        .list_recursive("index")
        .unwrap()
        .into_iter()
        .filter(|(k, _)| std::path::Path::new(k).extension().is_some_and(|e| e == "tsn"))
        .map(|(k, size)| (k, size - frame))
        .collect()
}

fn tree_of(store: &Store, ds: &Dataset) -> FragmentTree {
    FragmentTree::open(store, ds.manifest(), Limits::default().with_max_segment_body(BODY_LIMIT)).unwrap()
}

/// A thousand one-row appends with a delete every 7th commit, under a 4 KiB body limit and
/// 1 KiB nodes: every node ever written is within the limit, the tree grows levels instead of
/// nodes, each one-row append writes one node per level, and every 50th version and the last
/// dump the brute-force expectation.
#[test]
fn a_thousand_commits_keep_every_node_bounded() {
    let opts = tree_options();
    let (store, mut ds) = create("memory://tree-appends", &opts);
    let mut expected: Vec<Vec<i64>> = vec![Vec::new()];
    let mut rows: Vec<i64> = Vec::new();
    let mut worst_new_nodes = 0usize;
    for i in 0..1000i64 {
        let before = nodes(&store).len();
        if i % 7 == 6 && !rows.is_empty() {
            let r = (i as usize * 31) % rows.len();
            ds = ds.delete_rows(&[r as u64], &format!("delete {r}"), &opts).unwrap();
            rows.remove(r);
        } else {
            ds = ds.append(&ids(&[i]), &format!("append {i}"), opts.clone()).unwrap();
            rows.push(i);
            let depth = tree_of(&store, &ds).depth() as usize;
            worst_new_nodes = worst_new_nodes.max(nodes(&store).len() - before);
            assert!(nodes(&store).len() - before <= depth + 1, "append {i} wrote more than a path");
        }
        expected.push(rows.clone());
    }
    assert!(ds.manifest().reader_flags & tessera::manifest::READER_FLAG_FRAGMENT_TREE != 0);
    assert_eq!(ds.manifest().segments.len(), 1, "one root");
    let tree = tree_of(&store, &ds);
    assert!(tree.depth() >= 3, "1 KiB nodes over ~860 fragments give at least three levels, got {}", tree.depth());
    assert!(worst_new_nodes >= 2, "appends rewrite the path to the last leaf");
    for (key, body) in nodes(&store) {
        assert!(body <= BODY_LIMIT, "{key}: body {body} over the {BODY_LIMIT}-byte limit");
    }
    let last = ds.version();
    for v in (1..=last).filter(|v| v % 50 == 0 || *v == last) {
        assert_rows(&open(&store, v), &expected[v as usize - 1]);
    }
}

/// Every row and every fragment id is found through one node per level, and agrees with the
/// fragments a full read of the version lists.
#[test]
fn lookups_read_one_node_per_level() {
    let opts = tree_options();
    let (store, mut ds) = create("memory://tree-lookups", &opts);
    for i in 0..150i64 {
        ds = ds.append(&ids(&[i, i + 1000]), "two rows", opts.clone()).unwrap();
    }
    ds = ds.delete_rows(&[3, 4, 5, 200], "a few", &opts).unwrap();
    // Both rows of one fragment: a fragment with no live row before the ones that follow.
    ds = ds.delete_rows(&[40, 41], "a whole fragment", &opts).unwrap();
    let reopened = open(&store, ds.version());
    let all = reopened.fragments();
    let depth = tree_of(&store, &ds).depth();
    assert!(depth >= 2);
    for row in 0..reopened.row_count() {
        let tree = tree_of(&store, &ds);
        let got = tree.locate(row).unwrap();
        let want = all.iter().find(|f| f.rows().contains(&row)).unwrap();
        assert_eq!((got.fragment.id, got.first_row), (want.fragment.id, want.first_row), "row {row}");
        assert!(tree.node_reads() <= u64::from(depth), "row {row}: {} reads at depth {depth}", tree.node_reads());
    }
    // All rows at once, in a scrambled order with repeats: the same answers, and each node is
    // read once (one round trip per level).
    let rows: Vec<u64> = (0..reopened.row_count()).map(|i| (i * 37) % reopened.row_count()).chain([0, 0]).collect();
    let tree = tree_of(&store, &ds);
    let many = tree.locate_many(&rows).unwrap();
    for (row, got) in rows.iter().zip(&many) {
        let want = all.iter().find(|f| f.rows().contains(row)).unwrap();
        assert_eq!((got.fragment.id, got.first_row), (want.fragment.id, want.first_row), "row {row}");
    }
    // Each fragment's index is its position among the version's fragments (a fully deleted
    // fragment, which holds no row, still counts).
    let tree = tree_of(&store, &ds);
    for (row, (index, got)) in rows.iter().zip(tree.locate_many_indexed(&rows).unwrap()) {
        let want = usize::try_from(index).unwrap();
        assert_eq!(all[want].fragment.id, got.fragment.id, "row {row}: index {index}");
    }
    let nodes_in_tree = nodes(&store).len() as u64;
    assert!(tree.node_reads() <= nodes_in_tree, "{} reads for {nodes_in_tree} node objects", tree.node_reads());
    assert!(tree.locate_many(&[]).unwrap().is_empty());
    assert_eq!(tree.locate_many(&[0, reopened.row_count()]).unwrap_err().class(), ErrorClass::Usage);
    let tree = tree_of(&store, &ds);
    for f in all {
        let got = tree.fragment(f.fragment.id).unwrap().unwrap();
        assert_eq!(got.first_row, f.first_row);
    }
    let next = ds.manifest().next_fragment_id;
    assert!(tree.fragment(next + 5).unwrap().is_none());
    assert_eq!(tree.locate(reopened.row_count()).unwrap_err().class(), ErrorClass::Usage);
}

/// Updates, deletes, a new column, compaction and a restore give, on a tree, exactly the rows
/// they give on a fragment log; a log converts to a tree on request.
#[test]
fn operations_agree_with_the_fragment_log() {
    let run = |location: &str, index: IndexLayout| -> (Store, Dataset) {
        let opts = options(index);
        let (store, mut ds) = create(location, &opts);
        for i in 0..40i64 {
            ds = ds.append(&ids(&[3 * i, 3 * i + 1, 3 * i + 2]), "append", opts.clone()).unwrap();
        }
        ds = ds.delete_rows(&[0, 7, 8, 50, 119], "delete", &opts).unwrap();
        ds = ds.update_rows(&[1, 2, 60], &ids(&[-1, -2, -3]), "update", &opts).unwrap();
        let extra = ColumnData::from_scalars(&(0..ds.row_count() as i64).map(|r| r * 10).collect::<Vec<_>>());
        ds = ds.add_column(Column::new("x", DType::I64, &[]), Some(&extra), "add x", &opts).unwrap();
        ds = ds.compact(16, "compact", &opts).unwrap();
        ds.delete_rows(&[2], "delete after compact", &opts).unwrap();
        let restored = open(&store, 3).restore("restore v3", &opts).unwrap();
        (store, restored)
    };
    let (log_store, log) = run("memory://ops-log", IndexLayout::Log);
    let (tree_store, tree) = run("memory://ops-tree", IndexLayout::Tree { node_bytes: NODE_BYTES });
    assert_eq!(log.version(), tree.version());
    for v in 1..=tree.version() {
        let (a, b) = (open(&log_store, v), open(&tree_store, v));
        assert_eq!(dump(&a).unwrap()["columns"], dump(&b).unwrap()["columns"], "version {v}");
        assert!(b.manifest().reader_flags & tessera::manifest::READER_FLAG_FRAGMENT_TREE != 0);
        assert!(a.manifest().reader_flags & tessera::manifest::READER_FLAG_FRAGMENT_TREE == 0);
    }
    // Garbage collection keeps every node and file that some version reaches.
    let before: Vec<_> = (1..=tree.version()).map(|v| dump(&open(&tree_store, v)).unwrap()).collect();
    let report = tessera::gc::collect_garbage(&tree_store, std::time::Duration::ZERO, false).unwrap();
    assert!(report.referenced > 0);
    for v in 1..=tree.version() {
        assert_eq!(dump(&open(&tree_store, v)).unwrap(), before[v as usize - 1], "version {v} after gc");
    }
    // A log converts on the first commit asked to write a tree.
    let converted = log.append(&ids(&[7]), "to a tree", tree_options()).unwrap();
    assert!(converted.manifest().reader_flags & tessera::manifest::READER_FLAG_FRAGMENT_TREE != 0);
    let a = dump(&open(&log_store, log.version())).unwrap();
    let b = dump(&open(&log_store, converted.version())).unwrap();
    assert_eq!(b["row_count"], a["row_count"].as_u64().unwrap() + 1);
}

/// What a reader refuses: a node whose bytes differ from its reference, a node whose counts
/// differ from its parent's summary, a manifest with two roots, and a level over the limit.
#[test]
fn broken_trees_are_refused() {
    let opts = tree_options();
    let (store, mut ds) = create("memory://tree-reject", &opts);
    for i in 0..60i64 {
        ds = ds.append(&ids(&[i]), "append", opts.clone()).unwrap();
    }
    let limits = Limits::default().with_max_segment_body(BODY_LIMIT);
    let manifest = ds.manifest().clone();
    let root_key = manifest.segments[0].path.clone();
    let root_bytes = store.get_bounded(&root_key, 1 << 20).unwrap();
    let root: IndexNode = envelope::open(ObjectKind::Node, &root_bytes, BODY_LIMIT, "root").unwrap();
    assert!(root.level >= 1);
    let child = root.children[0].path.clone();
    let original = store.get_bounded(&child, 1 << 20).unwrap();

    // A flipped byte of a child's stored CRC: it no longer matches the parent's reference,
    // which is checked before the envelope.
    let mut flipped = original.to_vec();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    overwrite(&store, &child, flipped);
    let err = full_read(&store, &manifest, &limits);
    assert_eq!(err.class(), ErrorClass::Invalid, "{err}");
    assert!(err.to_string().contains("TREE-02"), "{err}");

    // A child holding fewer fragments than its parent's summary says.
    let mut node: IndexNode = envelope::open(ObjectKind::Node, &original, BODY_LIMIT, "child").unwrap();
    if node.level == 0 {
        node.fragments.pop();
    } else {
        node.children.pop();
    }
    let resealed = envelope::seal(ObjectKind::Node, &node).unwrap();
    let mut parent = root.clone();
    parent.children[0].size = resealed.len() as u64;
    parent.children[0].crc32 = envelope::stored_crc(&resealed);
    overwrite(&store, &child, resealed);
    let parent_bytes = envelope::seal(ObjectKind::Node, &parent).unwrap();
    let mut m = manifest.clone();
    m.segments[0].size = parent_bytes.len() as u64;
    m.segments[0].crc32 = envelope::stored_crc(&parent_bytes);
    overwrite(&store, &root_key, parent_bytes);
    let err = full_read(&store, &m, &limits);
    assert_eq!(err.class(), ErrorClass::Invalid, "{err}");
    assert!(err.to_string().contains("TREE-05"), "{err}");

    // Two roots.
    let mut two = manifest.clone();
    two.segments.push(two.segments[0].clone());
    let err = FragmentTree::open(&store, &two, limits.clone()).unwrap_err();
    assert!(err.to_string().contains("TREE-06"), "{err}");

    // A root at a level over LIM-17.
    let deep = IndexNode { level: 16, ..root.clone() };
    let deep_bytes = envelope::seal(ObjectKind::Node, &deep).unwrap();
    let mut m = manifest.clone();
    m.segments[0].size = deep_bytes.len() as u64;
    m.segments[0].crc32 = envelope::stored_crc(&deep_bytes);
    overwrite(&store, &root_key, deep_bytes);
    let err = FragmentTree::open(&store, &m, limits).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Limit, "{err}");
}

fn overwrite(store: &Store, key: &str, bytes: Vec<u8>) {
    store.delete(key).unwrap();
    store.put_if_absent(key, bytes.into()).unwrap();
}

fn full_read(store: &Store, manifest: &Manifest, limits: &Limits) -> tessera::Error {
    let tree = match FragmentTree::open(store, manifest, limits.clone()) {
        Ok(t) => t,
        Err(e) => return e,
    };
    tree.for_each(|_| Ok(())).unwrap_err()
}

/// A fragment entry with no real data file: the tree never opens data files.
fn fragment(id: u64, rows: u64, deleted: u64) -> Fragment {
    Fragment {
        id,
        row_count: rows,
        files: vec![DataFileRef {
            path: format!("data/{id:08}.tsd"),
            size: 100,
            footer_crc32: id as u32,
            column_ids: vec![0],
        }],
        deletion: (deleted > 0).then(|| DeletionRef {
            path: format!("deletions/{id:08}.tsx"),
            size: 40,
            crc32: 0,
            deleted_count: deleted,
        }),
        stats: Vec::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random batches of inserts, replacements and removals applied copy-on-write agree with a
    /// map from id to fragment, every node within the limit, every row located.
    #[test]
    fn random_edits_match_a_map(
        steps in prop::collection::vec(
            prop::collection::vec((0u64..400, 0u64..6, 0u64..3, any::<bool>()), 1..40),
            1..12,
        ),
        node_bytes in 200u64..2000,
    ) {
        let store = Store::open("memory://").unwrap();
        let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
        let limits = Limits::default().with_max_segment_body(BODY_LIMIT);
        let mut model: BTreeMap<u64, Fragment> = BTreeMap::new();
        let mut root: Option<tessera::manifest::SegmentRef> = None;
        for step in steps {
            let mut removed = Vec::new();
            let mut upserts = BTreeMap::new();
            for (id, rows, deleted, remove) in step {
                if remove {
                    removed.push(id);
                    upserts.remove(&id);
                } else {
                    upserts.insert(id, fragment(id, rows + deleted.min(rows), deleted.min(rows)));
                }
            }
            removed.sort_unstable();
            removed.dedup();
            removed.retain(|id| !upserts.contains_key(id));
            let upserts: Vec<Fragment> = upserts.into_values().collect();
            let base_manifest = manifest_for(root.clone(), &model);
            let base = root.as_ref().map(|_| FragmentTree::open(&store, &base_manifest, limits.clone()).unwrap());
            for id in &removed {
                model.remove(id);
            }
            for f in &upserts {
                model.insert(f.id, f.clone());
            }
            let out = tree::apply(&store, base.as_ref(), &removed, &upserts, &schema, node_bytes, &limits).unwrap();
            root = out.root;
            let manifest = manifest_for(root.clone(), &model);
            let tree = FragmentTree::open(&store, &manifest, limits.clone()).unwrap();
            let mut got = Vec::new();
            tree.for_each(|info| { got.push(info); Ok(()) }).unwrap();
            prop_assert_eq!(got.len(), model.len());
            let mut first = 0;
            for (info, want) in got.iter().zip(model.values()) {
                prop_assert_eq!(&*info.fragment, want);
                prop_assert_eq!(info.first_row, first);
                first += want.live_rows();
            }
            for row in (0..first).step_by(7) {
                let f = tree.locate(row).unwrap();
                prop_assert!(f.rows().contains(&row));
            }
        }
        let frame = (envelope::HEADER_LEN + envelope::TRAILER_LEN) as u64;
        for (_, size) in store.list_recursive("index").unwrap() {
            prop_assert!(size - frame <= BODY_LIMIT);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// The streaming builder writes the tree `apply` writes for a first version, byte for
    /// byte (the same root), whatever the fragments' entry sizes and the node size.
    #[test]
    fn a_streamed_build_equals_a_first_apply(
        entries in prop::collection::vec((1u64..4, 0u64..6, 0u64..3), 0..130),
        node_bytes in 200u64..2000,
    ) {
        let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
        let limits = Limits::default().with_max_segment_body(BODY_LIMIT);
        let mut id = 0;
        let fragments: Vec<Fragment> = entries
            .iter()
            .map(|&(gap, rows, deleted)| {
                id += gap;
                fragment(id, rows + deleted.min(rows), deleted.min(rows))
            })
            .collect();
        let applied = tree::apply(&Store::open("memory://").unwrap(), None, &[], &fragments, &schema, node_bytes, &limits).unwrap();
        let store = Store::open("memory://").unwrap();
        let built = tree::build(&store, fragments.iter().cloned(), &schema, node_bytes, &limits).unwrap();
        prop_assert_eq!(&built, &applied);
        if let Some(root) = &built.root {
            let mut model = BTreeMap::new();
            for f in &fragments {
                model.insert(f.id, f.clone());
            }
            let tree = FragmentTree::open(&store, &manifest_for(Some(root.clone()), &model), limits.clone()).unwrap();
            prop_assert_eq!(tree.fragment_count(), fragments.len() as u64);
        }
    }
}

#[test]
fn a_streamed_build_refuses_ids_out_of_order() {
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let store = Store::open("memory://").unwrap();
    let limits = Limits::default();
    let err = tree::build(&store, [fragment(1, 1, 0), fragment(3, 1, 0), fragment(3, 1, 0)], &schema, 1024, &limits)
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Usage, "{err}");
    assert!(err.to_string().contains("strictly ascending"), "{err}");
    let empty = tree::build(&store, std::iter::empty(), &schema, 1024, &limits).unwrap();
    assert_eq!(empty.root, None);
}

/// A manifest whose fragments are `model`'s, indexed by the tree `root`.
fn manifest_for(root: Option<tessera::manifest::SegmentRef>, model: &BTreeMap<u64, Fragment>) -> Manifest {
    Manifest {
        reader_flags: tessera::manifest::READER_FLAG_FRAGMENT_TREE,
        writer_flags: 0,
        branch: "main".into(),
        version: 1,
        parent: None,
        base: None,
        merged: None,
        timestamp_ms: 0,
        message: String::new(),
        writer_id: [0; 16],
        schema: Schema::new([Column::new("id", DType::I64, &[])]).unwrap(),
        next_column_id: 1,
        next_fragment_id: 400,
        row_count: model.values().map(Fragment::live_rows).sum(),
        segments: root.into_iter().collect(),
        stats: Vec::new(),
        metadata: Vec::new(),
    }
}

/// A view of a tree version loads only the fragments holding its rows (VAL-19): it reads them,
/// refuses rows it did not load instead of answering wrongly, and verifies the whole version.
#[test]
fn a_view_loads_only_its_fragments() {
    let opts = tree_options();
    let (store, mut ds) = create("memory://tree-view", &opts);
    for i in 0..40i64 {
        ds = ds.append(&ids(&[i]), "append", opts.clone()).unwrap();
    }
    ds.save_view_with("few", &[3, 17, 18], "SELECT * FROM t", &opts).unwrap();
    let (view_ds, view) =
        Dataset::open_view(&store, "few", Limits::default().with_max_segment_body(BODY_LIMIT)).unwrap();
    assert!(view_ds.is_partial());
    assert_eq!(view_ds.fragments().len(), 3);
    assert_eq!(
        tessera::dump::dump_view(&view_ds, &view).unwrap()["columns"]["id"],
        dump_column(&ColumnData::from_scalars(&[3i64, 17, 18]))
    );
    assert_eq!(view_ds.read_rows(0..5, None).unwrap_err().class(), ErrorClass::Usage);
    assert_eq!(view_ds.verify().unwrap().files, 40);
}

/// A version opened lazily (`Dataset::open_lazy`: the manifest and the root) takes appends: the
/// commit reads only the nodes on its path and writes exactly the version an append on the
/// whole version writes; the new handle stays partial and reads its new rows. Deletes and
/// rewrites, which need fragments a partial handle lacks, are `usage` errors.
#[test]
fn a_lazily_opened_version_takes_appends() {
    let opts = tree_options();
    let limits = Limits::default().with_max_segment_body(BODY_LIMIT);
    let mut versions = Vec::new();
    for name in ["memory://tree-lazy-append-a", "memory://tree-lazy-append-b"] {
        let (store, mut ds) = create(name, &opts);
        for i in 0..60i64 {
            ds = ds.append(&ids(&[i, -i]), "append", opts.clone()).unwrap();
        }
        versions.push((store, ds));
    }
    let ((lazy_store, _), (_, whole)) = (&versions[0], &versions[1]);
    let (lazy, tree) = Dataset::open_lazy(lazy_store, &At::Latest, limits.clone()).unwrap();
    assert!(lazy.is_partial() && lazy.fragments().is_empty());
    assert!(tree.unwrap().depth() >= 2);
    let appended = lazy.append(&ids(&[100, 101]), "on a partial handle", opts.clone()).unwrap();
    let reference = whole.append(&ids(&[100, 101]), "on a partial handle", opts.clone()).unwrap();
    assert!(appended.is_partial());
    assert_eq!(appended.manifest(), reference.manifest(), "the same version either way");
    let got = appended.read_rows(120..122, None).unwrap();
    assert_eq!(got.columns()[0].1.to_vec::<i64>().unwrap(), [100, 101]);
    assert_eq!(appended.read_rows(0..2, None).unwrap_err().class(), ErrorClass::Usage);
    assert_rows(&open(lazy_store, appended.version()), &{
        let mut all: Vec<i64> = (0..60).flat_map(|i| [i, -i]).collect();
        all.extend([100, 101]);
        all
    });
    assert_eq!(appended.delete_rows(&[0], "needs fragment 0", &opts).unwrap_err().class(), ErrorClass::Usage);

    // A lost race rebases onto the newer version, lazily.
    let (stale, _) = Dataset::open_lazy(lazy_store, &At::Latest, limits).unwrap();
    let winner = open(lazy_store, stale.version()).append(&ids(&[200]), "first", opts.clone()).unwrap();
    let second = stale.append(&ids(&[201]), "second", opts.clone()).unwrap();
    assert_eq!(second.version(), winner.version() + 1);
    assert!(second.is_partial());
    let last: Vec<i64> =
        open(lazy_store, second.version()).read_rows(122..124, None).unwrap().columns()[0].1.to_vec().unwrap();
    assert_eq!(last, [200, 201]);
}
