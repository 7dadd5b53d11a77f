//! Schema evolution, updates, compaction, diff, merge and garbage collection.

use std::time::Duration;

use tessera::gc::collect_garbage;
use tessera::{At, Batch, Column, ColumnData, DType, Dataset, Dim, ErrorClass, Schema, Store, WriteOptions};

fn ids_batch(start: i64, n: i64) -> Batch {
    let ids: Vec<i64> = (start..start + n).collect();
    let names: Vec<String> = ids.iter().map(|i| format!("n{i}")).collect();
    Batch::new()
        .with("id", ColumnData::from_scalars(&ids))
        .unwrap()
        .with("name", ColumnData::from_strings(&names))
        .unwrap()
}

fn col<T: tessera::Element>(ds: &Dataset, name: &str) -> Vec<T> {
    ds.read_rows(0..ds.row_count(), Some(&[name])).unwrap().get(name).unwrap().to_vec::<T>().unwrap()
}

fn names(ds: &Dataset, name: &str) -> Vec<String> {
    let b = ds.read_rows(0..ds.row_count(), Some(&[name])).unwrap();
    let c = b.get(name).unwrap();
    (0..c.len()).map(|i| c.str_row(i).unwrap_or("<null>").to_string()).collect()
}

fn setup(loc: &str, rows: i64) -> Dataset {
    let schema = Schema::new([Column::new("id", DType::I64, &[]), Column::new("name", DType::Utf8, &[])]).unwrap();
    let ds = Dataset::create(loc, schema, &WriteOptions::default()).unwrap();
    ds.append(&ids_batch(0, rows), "rows", WriteOptions { target_file_bytes: 40, ..WriteOptions::default() }).unwrap()
}

fn files_in(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir.join("data")).map_or(0, Iterator::count)
}

#[test]
fn add_drop_rename_columns_write_only_what_changes() {
    let dir = tempfile::tempdir().unwrap();
    let ds = setup(dir.path().to_str().unwrap(), 10);
    let ds = ds.delete_rows(&[3], "drop row 3", &WriteOptions::default()).unwrap();
    let before = files_in(dir.path());
    let score = ColumnData::from_scalars(&(0..9).map(|i| i as f32 * 0.5).collect::<Vec<_>>());
    let v =
        ds.add_column(Column::new("score", DType::F32, &[]), Some(&score), "add", &WriteOptions::default()).unwrap();
    assert_eq!(files_in(dir.path()) - before, v.fragments().len(), "one new file per fragment, only the new column");
    assert_eq!(col::<f32>(&v, "score"), (0..9).map(|i| i as f32 * 0.5).collect::<Vec<_>>());
    let v = v
        .add_column(
            Column::new("mask", DType::U8, &[Dim::Fixed(2)]).nullable(),
            None,
            "nulls",
            &WriteOptions::default(),
        )
        .unwrap();
    let m = v.read_rows(0..9, Some(&["mask"])).unwrap();
    assert!((0..9).all(|i| !m.get("mask").unwrap().is_valid(i)));
    let v = v.rename_column("name", "label", "rename", &WriteOptions::default()).unwrap();
    assert_eq!(names(&v, "label")[3], "n4");
    let v = v.drop_column("score", "drop", &WriteOptions::default()).unwrap();
    assert!(v.schema().column("score").is_none());
    assert_eq!(v.verify().unwrap().rows, 9);
    // Time travel still reads the dropped column; ids are never reused.
    let old = v.checkout(&At::Version(v.version() - 1)).unwrap();
    assert_eq!(col::<f32>(&old, "score").len(), 9);
    let v2 = v
        .add_column(Column::new("score", DType::I32, &[]).nullable(), None, "re-add", &WriteOptions::default())
        .unwrap();
    assert!(v2.schema().column("score").unwrap().id > old.schema().column("score").unwrap().id);
    let d = v2.diff_from(&ds).unwrap();
    assert_eq!(d.columns_added, vec!["mask".to_string(), "score".to_string()]);
    assert_eq!(d.columns_renamed, vec![("name".to_string(), "label".to_string())]);
    assert_eq!(d.columns_dropped, Vec::<String>::new(), "score was dropped and re-added under a new id");
}

#[test]
fn updates_rewrite_only_touched_columns_and_diff_sees_them() {
    let dir = tempfile::tempdir().unwrap();
    let ds = setup(dir.path().to_str().unwrap(), 12);
    let values = Batch::new().with("name", ColumnData::from_strings(&["changed-1", "changed-9"])).unwrap();
    let v = ds.update_rows(&[1, 9], &values, "fix names", &WriteOptions::default()).unwrap();
    let got = names(&v, "name");
    assert_eq!((got[1].as_str(), got[9].as_str(), got[2].as_str()), ("changed-1", "changed-9", "n2"));
    assert_eq!(col::<i64>(&v, "id"), (0..12).collect::<Vec<_>>());
    let d = v.diff_from(&ds).unwrap();
    assert_eq!((d.rows_added, d.rows_deleted), (0, 0));
    assert!(d.rows_changed.contains_key("name") && !d.rows_changed.contains_key("id"), "{d:?}");
    let again = Batch::new().with("name", ColumnData::from_strings(&["x", "y"])).unwrap();
    assert_eq!(v.update_rows(&[1, 1], &again, "dup", &WriteOptions::default()).unwrap_err().class(), ErrorClass::Usage);
    assert_eq!(v.verify().unwrap().rows, 12);
}

#[test]
fn compaction_merges_small_fragments_and_keeps_order() {
    let dir = tempfile::tempdir().unwrap();
    let ds = setup(dir.path().to_str().unwrap(), 20);
    let ds = ds.delete_rows(&[0, 7], "holes", &WriteOptions::default()).unwrap();
    let frags = ds.fragments().len();
    assert!(frags > 4);
    let c = ds.compact(100, "compact", &WriteOptions::default()).unwrap();
    assert_eq!(c.fragments().len(), 1, "from {frags}");
    assert!(c.fragments()[0].fragment.deletion.is_none());
    assert_eq!(col::<i64>(&c, "id"), col::<i64>(&ds, "id"));
    let d = c.diff_from(&ds).unwrap();
    assert_eq!(d.rows_added, d.rows_deleted, "compaction moves rows, it does not change them");
}

#[test]
fn merge_fast_forward_three_way_and_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().to_str().unwrap();
    let main = setup(loc, 8);
    let dev = main.create_branch("dev", &WriteOptions::default()).unwrap();
    let dev = dev.append(&ids_batch(100, 2), "dev rows", WriteOptions::default()).unwrap();
    // Fast-forward: main has not moved.
    let out = dev.merge_into("main", "ff", &WriteOptions::default()).unwrap();
    assert!(out.fast_forward);
    assert_eq!(out.dataset.row_count(), 10);
    // Both sides move: three-way merge of appends and deletes.
    let dev = dev.append(&ids_batch(200, 2), "more dev", WriteOptions::default()).unwrap();
    let dev = dev.delete_rows(&[0], "dev deletes row 0", &WriteOptions::default()).unwrap();
    // A deletion vector inside a fragment the merge brings over under a new id (regression:
    // the vector kept naming the old id and the merged version did not read).
    let dev = dev.delete_rows(&[dev.row_count() - 1], "dev deletes 201", &WriteOptions::default()).unwrap();
    let main = Dataset::open(loc).unwrap().append(&ids_batch(300, 1), "main row", WriteOptions::default()).unwrap();
    let out = dev.merge_into("main", "merge dev", &WriteOptions::default()).unwrap();
    assert!(!out.fast_forward);
    let mut ids = col::<i64>(&out.dataset, "id");
    ids.sort_unstable();
    let mut want: Vec<i64> = (1..8).chain([100, 101, 200, 300]).collect();
    out.dataset.verify().unwrap();
    want.sort_unstable();
    assert_eq!(ids, want);
    assert_eq!(out.dataset.manifest().merged.as_ref().map(|r| r.version), Some(dev.version()));
    // Merging again is a no-op; a later dev change merges on the new base without duplicates.
    let again = dev.merge_into("main", "again", &WriteOptions::default()).unwrap();
    assert_eq!(again.dataset.version(), out.dataset.version());
    let dev = dev.append(&ids_batch(400, 1), "late", WriteOptions::default()).unwrap();
    let out2 = dev.merge_into("main", "late", &WriteOptions::default()).unwrap();
    assert_eq!(out2.dataset.row_count(), out.dataset.row_count() + 1);
    // Conflict: both sides delete in the same fragment.
    let base = out2.dataset.clone();
    let b2 = base.create_branch("b2", &WriteOptions::default()).unwrap();
    // Global rows 1 and 2 are both in fragment 0 (whose row 0 is deleted).
    assert_eq!(base.fragments()[0].rows(), 0..3);
    b2.delete_rows(&[1], "b2 delete", &WriteOptions::default()).unwrap();
    base.delete_rows(&[2], "main delete", &WriteOptions::default()).unwrap();
    let b2 = b2.checkout(&At::Branch("b2".into())).unwrap();
    let e = b2.merge_into("main", "conflict", &WriteOptions::default()).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Conflict);
    assert!(e.to_string().contains("changed on both sides"), "{e}");
    let _ = main;
}

#[test]
fn gc_deletes_only_unreferenced_old_objects() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().to_str().unwrap();
    let ds = setup(loc, 6);
    // An abandoned writer: data files uploaded, never committed.
    let mut w = ds.writer(WriteOptions { target_file_bytes: 1, ..WriteOptions::default() });
    w.append(&ids_batch(50, 3)).unwrap();
    drop(w);
    let store = Store::open(loc).unwrap();
    let young = collect_garbage(&store, Duration::from_secs(3600), false).unwrap();
    assert!(young.garbage.is_empty() && young.too_young >= 2, "{young:?}");
    let dry = collect_garbage(&store, Duration::ZERO, true).unwrap();
    assert!(dry.garbage.len() >= 2);
    let files = files_in(dir.path());
    let real = collect_garbage(&store, Duration::ZERO, false).unwrap();
    assert_eq!(files - files_in(dir.path()), real.garbage.iter().filter(|(k, _)| k.starts_with("data/")).count());
    // Every version is still readable and verifies.
    for v in 1..=ds.version() {
        ds.checkout(&At::Version(v)).unwrap().verify().unwrap();
    }
    assert_eq!(collect_garbage(&store, Duration::ZERO, true).unwrap().garbage, vec![]);
}

#[test]
fn tags_are_checked_when_opened_through_open_at() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().to_str().unwrap();
    let ds = setup(loc, 4);
    ds.create_tag("t", "", &WriteOptions::default()).unwrap();
    // Retrying an identical tag write is not a conflict; a different one is.
    ds.create_tag("t", "", &WriteOptions { timestamp_ms: Some(0), ..WriteOptions::default() }).unwrap_err();
    let store = Store::open(loc).unwrap();
    assert_eq!(Dataset::open_at(&store, &At::Tag("t".into()), tessera::Limits::default()).unwrap().version(), 2);
    // Rewrite the tagged manifest with different (valid) content: the tag must notice.
    let key = dir.path().join("branches/main/00000000000000000002.tsm");
    let bytes = std::fs::read(&key).unwrap();
    let mut m: tessera::manifest::Manifest =
        tessera::envelope::open(tessera::envelope::ObjectKind::Manifest, &bytes, 1 << 20, "m").unwrap();
    m.message = "rewritten".into();
    std::fs::write(&key, tessera::envelope::seal(tessera::envelope::ObjectKind::Manifest, &m).unwrap()).unwrap();
    let e = Dataset::open_at(&store, &At::Tag("t".into()), tessera::Limits::default()).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Invalid, "{e}");
}
