//! Deleted rows: the loader reads exactly the live rows of a version with deletions, in both
//! shuffle modes, and every batch row (a live row id of that version) holds the reference
//! reader's values of that row, in every column layout.

mod common;

use tessera_loader::{Loader, ShuffleMode};

#[test]
fn deleted_rows_are_skipped_and_rows_stay_addressable() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let ds = common::dataset(root, 60, true, &common::small_files());
    let ds = ds.delete_rows(&[0, 5, 6, 7, 33, 59], "drop some", &common::small_files()).unwrap();
    assert_eq!(ds.row_count(), 54);
    for shuffle in [ShuffleMode::Global, ShuffleMode::Block { window_fragments: 3 }] {
        let cfg = common::config(root).with_batch_size(6).with_shuffle(shuffle);
        let loader = Loader::open(cfg).unwrap();
        let mut ids = Vec::new();
        for b in loader.epoch(0).unwrap() {
            let b = b.unwrap();
            common::assert_reference_rows(&ds, &b);
            ids.extend(common::ids(&b));
        }
        ids.sort_unstable();
        let want: Vec<i64> = (0..60).filter(|i| ![0, 5, 6, 7, 33, 59].contains(i)).collect();
        assert_eq!(ids, want);
    }
}
