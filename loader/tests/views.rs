//! The loader over a view (SPEC.md §"Views"): exactly the view's rows of its pinned version,
//! in every shuffle mode; disjoint equal shards; exact resume; a state of another view or of
//! the bare version refused.

use std::collections::BTreeSet;

use tessera::{At, Batch, Column, ColumnData, DType, Dataset, Schema, WriteOptions};
use tessera_loader::{Loader, LoaderConfig, LoaderError, ShuffleMode};

/// 5 fragments of 12 rows each; row `r` holds `id = 10 r`.
fn dataset(root: &str) -> Dataset {
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let mut ds = Dataset::create(root, schema, &WriteOptions::default()).unwrap();
    for f in 0..5i64 {
        let ids: Vec<i64> = (f * 12..(f + 1) * 12).map(|r| 10 * r).collect();
        ds = ds
            .append(
                &Batch::new().with("id", ColumnData::from_scalars(&ids)).unwrap(),
                "12 rows",
                WriteOptions::default(),
            )
            .unwrap();
    }
    ds
}

/// A view of 23 rows in no particular order, spread over every fragment.
fn view_rows() -> Vec<u64> {
    let mut rows: Vec<u64> = (0..60).filter(|r| r % 3 == 1 || r % 7 == 0).take(23).collect();
    rows.reverse();
    rows.swap(2, 17);
    rows
}

fn config(root: &str, shuffle: ShuffleMode) -> LoaderConfig {
    LoaderConfig::new(root).with_view("sel").with_batch_size(4).with_shuffle(shuffle).with_seed(3).with_workers(2)
}

/// Per batch: the ids read and the batch's reported rows.
fn epoch(loader: &Loader, e: u64) -> Vec<(Vec<i64>, Vec<u64>)> {
    loader.epoch(e).unwrap().map(|b| collect(&b.unwrap())).collect()
}

fn collect(batch: &tessera_loader::HostBatch) -> (Vec<i64>, Vec<u64>) {
    let col = &batch.columns[0];
    let bytes = batch.with_buffer(0, |b| b.bytes()[..col.byte_len].to_vec()).unwrap();
    let ids = bytes.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
    (ids, batch.rows.clone())
}

fn ids_of(rows: &[u64]) -> Vec<i64> {
    rows.iter().map(|&r| 10 * r as i64).collect()
}

#[test]
fn a_view_yields_exactly_its_rows_of_its_pinned_version() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let ds = dataset(root);
    let rows = view_rows();
    ds.save_view("sel", &rows, "test rows").unwrap();
    // Later commits change row ids of the newest version, not the view.
    ds.delete_rows(&[0, 1, 2, 3, 4, 5], "drop six", &WriteOptions::default()).unwrap();

    let none = Loader::open(config(root, ShuffleMode::None).with_view("sel")).unwrap();
    assert_eq!((none.row_count(), none.version(), none.view().unwrap().rows.len()), (23, 6, 23));
    let batches = epoch(&none, 0);
    assert_eq!(batches.len(), 6, "23 rows in batches of 4, the last padded");
    let read: Vec<i64> = batches.iter().flat_map(|(ids, _)| ids.clone()).collect();
    assert_eq!(read[..23], ids_of(&rows)[..], "sequential reads the view's order");
    for (ids, reported) in &batches {
        assert_eq!(*ids, ids_of(reported), "batch.rows are the version's row ids");
    }

    for shuffle in [ShuffleMode::Global, ShuffleMode::Block { window_fragments: 2 }] {
        let loader = Loader::open(config(root, shuffle)).unwrap();
        let mut orders = Vec::new();
        for e in 0..2 {
            let read: Vec<i64> = epoch(&loader, e).into_iter().flat_map(|(ids, _)| ids).collect();
            let first: BTreeSet<i64> = read[..23].iter().copied().collect();
            assert_eq!(first, ids_of(&rows).into_iter().collect(), "{shuffle:?}: every view row once");
            orders.push(read);
        }
        assert_ne!(orders[0], orders[1], "{shuffle:?}: epochs differ");
        assert_ne!(orders[0][..23], ids_of(&rows)[..], "{shuffle:?}: shuffled");
    }
}

#[test]
fn shards_over_a_view_are_disjoint_and_equal() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    dataset(root).save_view("sel", &view_rows(), "q").unwrap();
    for shuffle in [ShuffleMode::Global, ShuffleMode::Block { window_fragments: 2 }, ShuffleMode::None] {
        let mut seen = Vec::new();
        let mut counts = BTreeSet::new();
        for rank in 0..3 {
            let mut c = config(root, shuffle).with_rank(rank, 3);
            c.drop_last = true;
            let loader = Loader::open(c).unwrap();
            let batches = epoch(&loader, 1);
            counts.insert(batches.len());
            seen.extend(batches.into_iter().flat_map(|(_, rows)| rows));
        }
        assert_eq!(counts.len(), 1, "{shuffle:?}: equal batch counts");
        // 23 rows, global batches of 12 with drop_last: one global batch, 12 distinct rows.
        assert_eq!(seen.len(), 12);
        let distinct: BTreeSet<u64> = seen.iter().copied().collect();
        assert_eq!(distinct.len(), 12, "{shuffle:?}: ranks are disjoint");
        assert!(distinct.is_subset(&view_rows().into_iter().collect()), "{shuffle:?}: only view rows");
    }
}

#[test]
fn resume_over_a_view_is_exact_and_bound_to_the_view() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let ds = dataset(root);
    ds.save_view("sel", &view_rows(), "q").unwrap();
    let mut other = view_rows();
    other.swap(0, 1);
    ds.save_view("other", &other, "q").unwrap();

    let full = epoch(&Loader::open(config(root, ShuffleMode::Global)).unwrap(), 2);
    let first = Loader::open(config(root, ShuffleMode::Global)).unwrap();
    let mut it = first.epoch(2).unwrap();
    for _ in 0..2 {
        it.next().unwrap().unwrap();
    }
    let state = it.state();
    drop(it);
    let resumed = Loader::open(config(root, ShuffleMode::Global)).unwrap();
    let rest: Vec<_> = resumed.resume(&state).unwrap().map(|b| collect(&b.unwrap())).collect();
    assert_eq!(rest, full[2..], "the remaining batches, exactly");

    let refused = |c: LoaderConfig| match Loader::open(c).unwrap().resume(&state) {
        Err(LoaderError::Resume(m)) => m,
        other => panic!("expected a refused state, got {:?}", other.map(|_| ())),
    };
    let m = refused(config(root, ShuffleMode::Global).with_view("other"));
    assert!(m.contains("\"other\""), "{m}");
    let mut bare = config(root, ShuffleMode::Global);
    bare.view = None;
    refused(bare.clone());
    // And the other way round: a bare version's state does not resume a view.
    let mut it = Loader::open(bare).unwrap().epoch(2).unwrap();
    it.next().unwrap().unwrap();
    let bare_state = it.state();
    drop(it);
    assert!(matches!(
        Loader::open(config(root, ShuffleMode::Global)).unwrap().resume(&bare_state),
        Err(LoaderError::Resume(_))
    ));
}

#[test]
fn views_are_checked_when_the_loader_opens() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    dataset(root).save_view("sel", &view_rows(), "q").unwrap();
    let class = |c: LoaderConfig| match Loader::open(c) {
        Err(e) => e.class(),
        Ok(_) => panic!("expected an error"),
    };
    assert_eq!(class(config(root, ShuffleMode::Global).with_view("missing")), Some(tessera::ErrorClass::NotFound));
    let both = LoaderConfig { at: At::Version(2), ..config(root, ShuffleMode::Global) };
    assert!(matches!(Loader::open(both), Err(LoaderError::Config(m)) if m.contains("view")));
    let path = dir.path().join("views/sel.tsview");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[30] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    assert_eq!(class(config(root, ShuffleMode::Global)), Some(tessera::ErrorClass::Malformed));
}

/// A runs view (SPEC.md VIEW-11): 3 runs, 31 ascending rows, the middle run crossing three
/// fragment ends, and a run that ends a fragment.
fn runs_view_rows() -> Vec<u64> {
    (2..5).chain(10..35).chain(57..60).collect()
}

#[test]
fn the_loader_trains_on_a_runs_view_like_on_a_list_view() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let ds = dataset(root);
    let rows = runs_view_rows();
    let saved = ds.save_view("runs", &rows, "SELECT * FROM ds WHERE ...").unwrap();
    assert!(matches!(saved.rows, tessera::ViewRows::Runs(ref r) if r.runs().len() == 3), "{:?}", saved.rows);
    // The same rows as a list view under another name: the loader must read the same rows.
    let runs_cfg = |shuffle| config(root, shuffle).with_view("runs");

    let none = Loader::open(runs_cfg(ShuffleMode::None)).unwrap();
    assert_eq!(none.row_count(), 31);
    let batches = epoch(&none, 0);
    assert_eq!(batches.len(), 8, "31 rows in batches of 4, the last padded");
    let read: Vec<i64> = batches.iter().flat_map(|(ids, _)| ids.clone()).collect();
    assert_eq!(read[..31], ids_of(&rows)[..], "sequential reads the view's order");
    for (ids, reported) in &batches {
        assert_eq!(*ids, ids_of(reported), "batch.rows are the version's row ids");
    }
    for shuffle in [ShuffleMode::Global, ShuffleMode::Block { window_fragments: 2 }] {
        let loader = Loader::open(runs_cfg(shuffle)).unwrap();
        let read: Vec<i64> = epoch(&loader, 1).into_iter().flat_map(|(ids, _)| ids).collect();
        let first: BTreeSet<i64> = read[..31].iter().copied().collect();
        assert_eq!(first, ids_of(&rows).into_iter().collect(), "{shuffle:?}: every view row once");
        assert_ne!(read[..31], ids_of(&rows)[..], "{shuffle:?}: shuffled");
    }

    // Resume binds to the runs view: exact continuation, and refused over a list view.
    let full = epoch(&Loader::open(runs_cfg(ShuffleMode::Global)).unwrap(), 2);
    let first = Loader::open(runs_cfg(ShuffleMode::Global)).unwrap();
    let mut it = first.epoch(2).unwrap();
    for _ in 0..3 {
        it.next().unwrap().unwrap();
    }
    let state = it.state();
    drop(it);
    let rest: Vec<_> = Loader::open(runs_cfg(ShuffleMode::Global))
        .unwrap()
        .resume(&state)
        .unwrap()
        .map(|b| collect(&b.unwrap()))
        .collect();
    assert_eq!(rest, full[3..], "the remaining batches, exactly");
    ds.save_view("sel", &view_rows(), "q").unwrap();
    assert!(matches!(
        Loader::open(config(root, ShuffleMode::Global)).unwrap().resume(&state),
        Err(LoaderError::Resume(_))
    ));
}

/// A rank reads the deletion vector of a fragment only when it reads a row of it (SPEC VAL-19):
/// with fragment 2's vector gone from the store, a view of rows outside fragment 2 opens and
/// reads its epoch, and one with a row of fragment 2 opens but fails when it reaches that row.
#[test]
fn deletion_vectors_are_read_only_for_fragments_read() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    // Row 30 is in fragment 2 (rows 24..36); after the delete, fragment 2 holds live rows
    // 24..35, fragment 3 35..47 and fragment 4 47..59.
    let ds = dataset(root).delete_rows(&[30], "one row of fragment 2", &WriteOptions::default()).unwrap();
    ds.save_view("sel", &[0, 5, 13, 40, 50], "outside fragment 2").unwrap();
    ds.save_view("bad", &[0, 25], "a row of fragment 2").unwrap();
    for entry in std::fs::read_dir(dir.path().join("deletions")).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    let loader = Loader::open(config(root, ShuffleMode::None)).unwrap();
    let read: Vec<i64> = epoch(&loader, 0).into_iter().flat_map(|(ids, _)| ids).collect();
    assert_eq!(read[..5], [0, 50, 130, 410, 510], "view rows 40 and 50 are physical rows 41 and 51");

    let bad = Loader::open(config(root, ShuffleMode::None).with_view("bad")).unwrap();
    let outcome: Result<Vec<_>, LoaderError> = bad.epoch(0).unwrap().collect();
    assert!(outcome.is_err(), "the row of fragment 2 needs its missing deletion vector");
}
