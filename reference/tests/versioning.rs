//! Deletion vectors, the segment log with tiered merging, restore, and concurrent committers.

use std::sync::Arc;

use tessera::{At, Batch, Column, ColumnData, DType, Dataset, ErrorClass, Limits, Schema, Store, WriteOptions};

fn ids_batch(start: i64, n: i64) -> Batch {
    Batch::new().with("id", ColumnData::from_scalars(&(start..start + n).collect::<Vec<_>>())).unwrap()
}

fn ids(ds: &Dataset) -> Vec<i64> {
    ds.read_rows(0..ds.row_count(), None).unwrap().get("id").unwrap().to_vec::<i64>().unwrap()
}

fn new_dataset(loc: &str) -> Dataset {
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    Dataset::create(loc, schema, &WriteOptions::default()).unwrap()
}

fn small_files() -> WriteOptions {
    WriteOptions { target_file_bytes: 8 * 4, ..WriteOptions::default() }
}

#[test]
fn deletes_use_deletion_vectors_and_time_travel_keeps_old_rows() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().to_str().unwrap();
    let v2 = new_dataset(loc).append(&ids_batch(0, 12), "twelve", small_files()).unwrap();
    assert_eq!(v2.fragments().len(), 3);
    let data_files_before = std::fs::read_dir(dir.path().join("data")).unwrap().count();
    // Rows 1 and 2 of the first fragment, and all of the second fragment (rows 4..8).
    let v3 = v2.delete_rows(&[1, 2, 4, 5, 6, 7], "drop some", &WriteOptions::default()).unwrap();
    assert_eq!(v3.row_count(), 6);
    assert_eq!(ids(&v3), vec![0, 3, 8, 9, 10, 11]);
    assert_eq!(v3.fragments().len(), 2, "an all-deleted fragment is removed");
    assert_eq!(
        std::fs::read_dir(dir.path().join("data")).unwrap().count(),
        data_files_before,
        "no data file rewritten"
    );
    // Deleting again on top of a deletion vector merges the vectors.
    let v4 = v3.delete_rows(&[0, 5], "more", &WriteOptions::default()).unwrap();
    assert_eq!(ids(&v4), vec![3, 8, 9, 10]);
    assert_eq!(v4.read_rows(1..3, None).unwrap().get("id").unwrap().to_vec::<i64>().unwrap(), vec![8, 9]);
    assert_eq!(v4.verify().unwrap().rows, 4);
    let old = v4.checkout(&At::Version(2)).unwrap();
    assert_eq!(ids(&old), (0..12).collect::<Vec<_>>());
    assert_eq!(v4.delete_rows(&[4], "x", &WriteOptions::default()).unwrap_err().class(), ErrorClass::Usage);
    // Restore makes a new version equal to an old one.
    let v5 = old.restore("undo deletes", &WriteOptions::default()).unwrap();
    assert_eq!((v5.version(), ids(&v5)), (5, (0..12).collect::<Vec<_>>()));
}

#[test]
fn segment_log_stays_logarithmic() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().to_str().unwrap();
    let mut ds = new_dataset(loc);
    for i in 0..100 {
        ds = ds.append(&ids_batch(i, 1), "one row", WriteOptions::default()).unwrap();
        assert!(ds.manifest().segments.len() <= 8, "{} segments after {} commits", ds.manifest().segments.len(), i + 1);
    }
    assert_eq!(ids(&Dataset::open(loc).unwrap()), (0..100).collect::<Vec<_>>());
}

#[test]
fn concurrent_appends_all_land_with_linear_history() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().to_str().unwrap().to_string();
    new_dataset(&loc);
    // A writer gives up after 16 lost races (commit.rs MAX_REBASES), and it loses one only
    // when another writer's commit lands meanwhile: with 3 × 5 = 15 other commits in all, no
    // schedule can exhaust it. (4 × 6 did, once, on 2 busy cores: 16 of the other 18 commits
    // landed while one unoptimised writer retried.)
    let (writers, commits) = (4, 5);
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let loc = loc.clone();
            std::thread::spawn(move || {
                for c in 0..commits {
                    let base = Dataset::open(&loc).unwrap();
                    base.append(&ids_batch(w * 100 + c, 1), "concurrent", WriteOptions::default()).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let ds = Dataset::open(&loc).unwrap();
    assert_eq!(ds.version(), 1 + (writers * commits) as u64);
    let mut got = ids(&ds);
    got.sort_unstable();
    let mut want: Vec<i64> = (0..writers).flat_map(|w| (0..commits).map(move |c| w * 100 + c)).collect();
    want.sort_unstable();
    assert_eq!(got, want);
    let log = ds.log().unwrap();
    assert_eq!(log.len() as u64, ds.version());
    for (i, m) in log.iter().enumerate() {
        assert_eq!(m.version, ds.version() - i as u64, "history is linear");
    }
}

#[test]
fn concurrent_deletes_of_one_fragment_conflict() {
    let store = Store::open("memory://conflict-test").unwrap();
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let v1 = Dataset::create_in(&store, schema, &WriteOptions::default()).unwrap();
    let v2 = v1.append(&ids_batch(0, 8), "rows", small_files()).unwrap();
    // Both writers start from v2; the second touches the same fragment and must not rebase.
    v2.delete_rows(&[0], "a", &WriteOptions::default()).unwrap();
    let e = v2.delete_rows(&[1], "b", &WriteOptions::default()).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Conflict);
    // A delete in another fragment rebases over it.
    let v4 = v2.delete_rows(&[5], "c", &WriteOptions::default()).unwrap();
    assert_eq!(v4.version(), 4);
    assert_eq!(ids(&v4), vec![1, 2, 3, 4, 6, 7]);
    let latest = Dataset::open_at(&store, &At::Latest, Limits::default()).unwrap();
    assert_eq!(latest.version(), 4);
    let _ = Arc::new(latest);
}
