//! Views (SPEC.md §"Views"): pinning, binding to one dataset, validation classes, listing
//! and deletion.

use tessera::{At, Batch, Column, ColumnData, DType, Dataset, ErrorClass, Limits, Schema, Store, WriteOptions};

fn ids_batch(start: i64, n: i64) -> Batch {
    Batch::new().with("id", ColumnData::from_scalars(&(start..start + n).collect::<Vec<_>>())).unwrap()
}

fn new_dataset(loc: &str, rows: i64) -> Dataset {
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    Dataset::create(loc, schema, &WriteOptions::default())
        .unwrap()
        .append(&ids_batch(0, rows), "rows", WriteOptions::default())
        .unwrap()
}

fn view_ids(store: &Store, name: &str) -> Vec<i64> {
    let (ds, view) = Dataset::open_view(store, name, Limits::default()).unwrap();
    view.rows.iter().map(|r| ds.read_row(r, None).unwrap().get("id").unwrap().to_vec::<i64>().unwrap()[0]).collect()
}

#[test]
fn a_view_pins_its_version_across_later_commits() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().to_str().unwrap();
    let v2 = new_dataset(loc, 10);
    let view = v2.save_view("odd", &[9, 7, 5, 3, 1], "SELECT * WHERE id % 2 = 1 ORDER BY id DESC").unwrap();
    assert_eq!((view.target.branch.as_str(), view.target.version), ("main", 2));
    let store = Store::open(loc).unwrap();
    assert_eq!(view_ids(&store, "odd"), vec![9, 7, 5, 3, 1]);
    // Deleting rows and appending moves row ids in newer versions, not in the view.
    let v3 = v2.delete_rows(&[0, 1, 2], "drop the first three", &WriteOptions::default()).unwrap();
    let v4 = v3.append(&ids_batch(100, 5), "more", WriteOptions::default()).unwrap();
    assert_eq!(v4.read_row(1, None).unwrap().get("id").unwrap().to_vec::<i64>().unwrap(), vec![4]);
    assert_eq!(view_ids(&store, "odd"), vec![9, 7, 5, 3, 1]);
    let (pinned, read) = Dataset::open_view(&store, "odd", Limits::default()).unwrap();
    assert_eq!((pinned.version(), &read), (2, &view));
    assert_eq!(v4.view("odd").unwrap(), view, "readable from any version");
    assert_eq!(v4.views().unwrap(), vec!["odd".to_string()]);
}

#[test]
fn writers_refuse_bad_names_rows_and_existing_views() {
    let dir = tempfile::tempdir().unwrap();
    let ds = new_dataset(dir.path().to_str().unwrap(), 4);
    let class = |r: tessera::Result<tessera::View>| r.unwrap_err().class();
    assert_eq!(class(ds.save_view(".hidden", &[0], "q")), ErrorClass::Usage);
    assert_eq!(class(ds.save_view("a/b", &[0], "q")), ErrorClass::Usage);
    assert_eq!(class(ds.save_view("v", &[4], "q")), ErrorClass::Usage, "row id out of range");
    assert_eq!(class(ds.save_view("v", &[1, 2, 1], "q")), ErrorClass::Usage, "duplicate row id");
    assert_eq!(class(ds.save_view("v", &[0], &"q".repeat(65_537))), ErrorClass::Limit);
    assert!(ds.views().unwrap().is_empty(), "nothing was written");
    let opts = WriteOptions { timestamp_ms: Some(1), ..WriteOptions::default() };
    ds.save_view_with("v", &[3, 0], "q", &opts).unwrap();
    // The same request again (a retry whose first attempt landed) succeeds; another conflicts.
    ds.save_view_with("v", &[3, 0], "q", &opts).unwrap();
    assert_eq!(class(ds.save_view("v", &[3], "q")), ErrorClass::Conflict);
    assert!(ds.save_view("empty", &[], "q").unwrap().rows.is_empty());
}

#[test]
fn a_view_copied_from_another_dataset_is_invalid() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let ds_a = new_dataset(a.path().to_str().unwrap(), 4);
    // Same branch, version and row count, different manifest bytes (writer id, time).
    let ds_b = new_dataset(b.path().to_str().unwrap(), 4);
    ds_a.save_view("v", &[0, 1], "q").unwrap();
    std::fs::create_dir_all(b.path().join("views")).unwrap();
    std::fs::copy(a.path().join("views/v.tsview"), b.path().join("views/v.tsview")).unwrap();
    let e = ds_b.view("v").unwrap_err();
    assert_eq!(e.class(), ErrorClass::Invalid, "{e}");
    assert!(e.to_string().contains("VIEW-05"), "{e}");
    // A view read from A opens A's version, and not B's version of the same number.
    let view = ds_a.view("v").unwrap();
    assert_eq!(view.open_dataset(ds_a.store(), Limits::default()).unwrap().version(), 2);
    assert_eq!(view.open_dataset(ds_b.store(), Limits::default()).unwrap_err().class(), ErrorClass::Invalid);
}

#[test]
fn damaged_views_are_rejected_with_their_class() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().to_str().unwrap();
    let ds = new_dataset(loc, 4);
    ds.save_view("v", &[2, 1], "q").unwrap();
    let path = dir.path().join("views/v.tsview");
    let good = std::fs::read(&path).unwrap();
    let class_of = |bytes: &[u8]| {
        std::fs::write(&path, bytes).unwrap();
        ds.view("v").unwrap_err().class()
    };
    // A flipped bit in the body: the envelope CRC fails.
    let mut bad = good.clone();
    bad[40] ^= 1;
    assert_eq!(class_of(&bad), ErrorClass::Malformed);
    assert_eq!(class_of(&good[..good.len() - 1]), ErrorClass::Malformed);
    // A tag's magic on a view.
    let mut bad = good.clone();
    bad[3] = b'T';
    assert_eq!(class_of(&bad), ErrorClass::Malformed);
    std::fs::write(&path, &good).unwrap();
    assert_eq!(ds.view("missing").unwrap_err().class(), ErrorClass::NotFound);
    assert_eq!(ds.view("../x").unwrap_err().class(), ErrorClass::Usage);
    // A view under another name's key names itself: invalid.
    std::fs::copy(&path, dir.path().join("views/w.tsview")).unwrap();
    assert_eq!(ds.view("w").unwrap_err().class(), ErrorClass::Invalid);
    // Keys that are not views are ignored by the listing.
    std::fs::write(dir.path().join("views/notes.txt"), b"x").unwrap();
    assert_eq!(ds.views().unwrap(), vec!["v".to_string(), "w".to_string()]);
}

#[test]
fn deleting_a_view_changes_no_version() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().to_str().unwrap();
    let ds = new_dataset(loc, 4);
    ds.save_view("v", &[0], "q").unwrap();
    ds.delete_view("v").unwrap();
    assert!(ds.views().unwrap().is_empty());
    assert_eq!(ds.view("v").unwrap_err().class(), ErrorClass::NotFound);
    assert_eq!(ds.delete_view("v").unwrap_err().class(), ErrorClass::NotFound);
    let again = ds.checkout(&At::Latest).unwrap();
    assert_eq!((again.version(), again.row_count()), (2, 4));
    // The name can be reused; the new view is another object.
    assert_eq!(ds.save_view("v", &[3], "q2").unwrap().rows.to_vec(), vec![3]);
}

#[test]
fn garbage_collection_keeps_what_a_view_reads() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().to_str().unwrap();
    let v2 = new_dataset(loc, 6);
    v2.save_view("v", &[5, 1], "q").unwrap();
    // Later versions drop every row the view reads; only main@2 still references them.
    let v3 = v2.delete_rows(&[0, 1, 2, 3, 4, 5], "drop all", &WriteOptions::default()).unwrap();
    assert_eq!(v3.row_count(), 0);
    let store = Store::open(loc).unwrap();
    let report = tessera::gc::collect_garbage(&store, std::time::Duration::ZERO, false).unwrap();
    assert!(report.garbage.is_empty(), "{report:?}");
    assert_eq!(view_ids(&store, "v"), vec![5, 1]);
    assert_eq!(v3.views().unwrap(), vec!["v".to_string()]);
}

/// Issue 26: a view of more than 2^24 rows (the list limit) is stored as runs, round-trips, and
/// indexes without expanding. The dataset has 17 × 2^20 rows in 17 fragments that share one
/// data file of 2^20 one-byte rows, so neither the store nor the test holds 2^24 of anything.
#[test]
fn a_runs_view_past_2_24_rows_round_trips_in_small_memory() {
    use tessera::{CommitMode, RowRuns, Run, ViewRows};
    const FILE_ROWS: u64 = 1 << 20;
    let loc = "memory://a-runs-view-past-2-24-rows";
    let opts = WriteOptions { timestamp_ms: Some(7), ..WriteOptions::default() };
    let schema = Schema::new([Column::new("b", DType::U8, &[])]).unwrap();
    let base = Dataset::create(loc, schema, &opts).unwrap();
    let bytes: Vec<u8> = (0..FILE_ROWS).map(|r| (r % 251) as u8).collect();
    let batch = Batch::new().with("b", ColumnData::from_scalars(&bytes)).unwrap();
    let records = base.write_fragments(&batch, opts.clone()).unwrap();
    assert_eq!(records.len(), 1);
    let shared = vec![records[0].clone(); 17];
    let ds = base.commit_fragments(&shared, CommitMode::Append, "17 fragments, one file", &opts).unwrap();
    assert_eq!(ds.row_count(), 17 * FILE_ROWS);

    let n_first = (1 << 24) + 10;
    let runs = vec![Run { start: 3, len: n_first }, Run { start: (1 << 24) + 100, len: 1000 }];
    let rows = ViewRows::Runs(RowRuns::new(runs.clone()).unwrap());
    let total = n_first + 1000;
    assert_eq!(rows.len(), total);
    let view = ds.save_view_rows_with("big", rows.clone(), "SELECT _rowid FROM ds WHERE ...", &opts).unwrap();
    assert_eq!(view.rows, rows, "kept as runs: more rows than a list may hold");
    assert_eq!(view.rows_sha256, tessera::View::digest_runs(&runs));

    let store = Store::open(loc).unwrap();
    let object = store.get_bounded("views/big.tsview", 1 << 20).unwrap();
    assert_eq!(u16::from_le_bytes([object[8], object[9]]), 2, "envelope major 2: runs");
    assert!(object.len() < 300, "the body is a few runs, not 2^24 ids: {} bytes", object.len());

    let (pinned, read) = Dataset::open_view(&store, "big", Limits::default()).unwrap();
    assert_eq!(read, view);
    assert_eq!(pinned.version(), ds.version());
    let at = |k: u64| read.rows.get(k);
    assert_eq!(
        (at(0), at(n_first - 1), at(n_first), at(total - 1), at(total)),
        (Some(3), Some(n_first + 2), Some((1 << 24) + 100), Some((1 << 24) + 1099), None)
    );
    for k in [0, n_first - 1, n_first, total - 1] {
        let row = at(k).unwrap();
        let got = pinned.read_row(row, None).unwrap().get("b").unwrap().to_vec::<u8>().unwrap();
        assert_eq!(got, vec![((row % FILE_ROWS) % 251) as u8], "view row {k} is dataset row {row}");
    }
    // A reader with a smaller row limit has none to configure: the body limit bounds runs.
    let tight = Limits::default().with_max_segment_body(100);
    assert_eq!(Dataset::open_view(&store, "big", tight).unwrap_err().class(), ErrorClass::Limit);
    // Past the version's rows: refused before writing.
    let past = ViewRows::Runs(RowRuns::new(vec![Run { start: 17 * FILE_ROWS - 5, len: 6 }]).unwrap());
    assert_eq!(ds.save_view_rows_with("past", past, "q", &opts).unwrap_err().class(), ErrorClass::Usage);
}

/// VIEW-12: the writer's choice of encoding is a function of the rows alone.
#[test]
fn writers_store_long_ascending_answers_as_runs_and_the_rest_as_lists() {
    use tessera::{RowRuns, Run, ViewRows};
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().to_str().unwrap();
    let ds = new_dataset(loc, 10);
    let store = Store::open(loc).unwrap();
    let major = |name: &str| {
        let b = store.get_bounded(&format!("views/{name}.tsview"), 1 << 20).unwrap();
        u16::from_le_bytes([b[8], b[9]])
    };
    let is_runs = |v: &tessera::View| matches!(v.rows, ViewRows::Runs(_));
    // 5 ascending rows in 2 runs: runs.
    assert!(is_runs(&ds.save_view("a", &[0, 1, 2, 4, 5], "q").unwrap()));
    assert_eq!(major("a"), 2);
    assert_eq!(view_ids(&store, "a"), vec![0, 1, 2, 4, 5]);
    // 3 ascending rows in 3 runs, 4 rows in 2 runs: no smaller as runs, so lists.
    assert!(!is_runs(&ds.save_view("b", &[0, 2, 4], "q").unwrap()));
    assert!(!is_runs(&ds.save_view("c", &[0, 1, 3, 4], "q").unwrap()));
    assert_eq!(major("b"), 1);
    // Not ascending, or empty: lists.
    assert!(!is_runs(&ds.save_view("d", &[5, 4, 3, 2, 1], "q").unwrap()));
    assert!(!is_runs(&ds.save_view("e", &[], "q").unwrap()));
    // Runs given for rows a list stores smaller are stored as that list, with its checksum.
    let given = ViewRows::Runs(RowRuns::new(vec![Run { start: 1, len: 1 }, Run { start: 3, len: 1 }]).unwrap());
    let f = ds.save_view_rows_with("f", given, "q", &WriteOptions::default()).unwrap();
    assert_eq!(f.rows, ViewRows::List(vec![1, 3]));
    assert_eq!(f.rows_sha256, tessera::View::digest_rows(&[1, 3]));
    assert_eq!(major("f"), 1);
    // A reader of list views only (major 1) refuses a runs view as unsupported, not as damage.
    let b = store.get_bounded("views/a.tsview", 1 << 20).unwrap();
    let old = tessera::envelope::open_raw(tessera::envelope::ObjectKind::View, &b, 1 << 20, "views/a.tsview", &[1]);
    assert_eq!(old.unwrap_err().class(), ErrorClass::Unsupported);
}
