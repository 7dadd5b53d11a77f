//! A dataset handle keeps what it opens (data files, deletion vectors) within its cache bound.

use tessera::{Batch, Column, ColumnData, DType, Dataset, Schema, WriteOptions};

fn ids(ds: &Dataset) -> Vec<i64> {
    ds.read_rows(0..ds.row_count(), None).unwrap().get("id").unwrap().to_vec::<i64>().unwrap()
}

/// 40 fragments of 4 rows, with deletions in every other fragment.
fn many_files(loc: &str) -> Dataset {
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let ds = Dataset::create(loc, schema, &WriteOptions::default()).unwrap();
    let rows = Batch::new().with("id", ColumnData::from_scalars(&(0..160).collect::<Vec<i64>>())).unwrap();
    let ds =
        ds.append(&rows, "160 rows", WriteOptions { target_file_bytes: 8 * 4, ..WriteOptions::default() }).unwrap();
    assert_eq!(ds.fragments().len(), 40);
    let doomed: Vec<u64> = (0..40).step_by(2).map(|f| f * 4).collect(); // row 0 of even fragments
    ds.delete_rows(&doomed, "drop some", &WriteOptions::default()).unwrap()
}

#[test]
fn opened_files_and_deletion_vectors_stay_within_the_cache_bound() {
    let dir = tempfile::tempdir().unwrap();
    let ds = many_files(dir.path().to_str().unwrap());
    let want = ids(&ds);
    assert_eq!(want.len(), 140);
    assert!(want.iter().all(|id| id % 8 != 0), "row 0 of every even fragment is gone");

    // The default bound keeps every file and deletion vector of this small dataset.
    let all = Dataset::open(dir.path().to_str().unwrap()).unwrap();
    assert_eq!(ids(&all), want);
    let kept = all.cache_stats();
    assert_eq!(kept.entries, 60, "40 files and 20 deletion vectors");
    assert_eq!(kept.cap, tessera::DEFAULT_CACHE_BYTES);
    let per_entry = kept.bytes / 60;

    // A bound of about five entries: the same rows, and never more than the bound held.
    let cap = per_entry * 5;
    let small = all.clone().with_cache_bytes(cap);
    assert_eq!(small.cache_stats().entries, 0, "a fresh cache");
    for _ in 0..2 {
        assert_eq!(ids(&small), want);
        let s = small.cache_stats();
        assert!(s.bytes <= cap && s.entries <= 6, "{s:?} within {cap}");
        assert!(s.entries >= 2, "{s:?}: the most recent entries are kept");
    }
    assert_eq!(small.verify().unwrap().rows, 140);
    assert!(small.cache_stats().bytes <= cap);
    // The handle it came from keeps its own cache; a zero bound keeps nothing.
    assert_eq!(all.cache_stats(), kept);
    let none = all.with_cache_bytes(0);
    assert_eq!(ids(&none), want);
    assert_eq!(none.cache_stats().entries, 0);
}
