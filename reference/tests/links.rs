//! Symbolic links in a local dataset root are not objects `[LAY-11]`: a linked version key is no
//! version, a linked data file is absent (`invalid`, being referenced), and a linked directory
//! hides every key under it. Every reader observes the same objects, whatever the links point to.

#![cfg(unix)]

use std::os::unix::fs::symlink;
use std::path::Path;

use tessera::*;

/// main@1 create; main@2 three rows in one data file. Returns the data file's key.
fn dataset(root: &Path) -> String {
    let schema = Schema::new([Column::new("x", DType::I64, &[])]).unwrap();
    let ds = Dataset::create(root.to_str().unwrap(), schema, &WriteOptions::default()).unwrap();
    let batch = Batch::new().with("x", ColumnData::from_scalars(&[1i64, 2, 3])).unwrap();
    let v2 = ds.append(&batch, "rows", WriteOptions::default()).unwrap();
    v2.fragments()[0].fragment.files[0].path.clone()
}

/// Moves `root/key` to `elsewhere` and puts a symbolic link to it in its place.
fn link_away(root: &Path, key: &str, elsewhere: &Path) {
    let at = root.join(key);
    std::fs::rename(&at, elsewhere).unwrap();
    symlink(elsewhere, &at).unwrap();
}

#[test]
fn a_linked_version_key_is_no_version() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    dataset(&root);
    link_away(&root, "branches/main/00000000000000000002.tsm", &tmp.path().join("v2.tsm"));
    let latest = Dataset::open(root.to_str().unwrap()).unwrap();
    assert_eq!(latest.version(), 1, "the LIST leaves the link out");
    let store = Store::open(root.to_str().unwrap()).unwrap();
    let err = Dataset::open_at(&store, &At::Version(2), Limits::default()).unwrap_err();
    assert_eq!(err.class(), ErrorClass::NotFound, "{err}");
}

#[test]
fn a_linked_data_file_is_absent() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let key = dataset(&root);
    link_away(&root, &key, &tmp.path().join("file.tsd"));
    let ds = Dataset::open(root.to_str().unwrap()).unwrap();
    let err = ds.read_rows(0..3, None).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Invalid, "a referenced object that is a link is absent: {err}");
}

#[test]
fn a_linked_directory_hides_its_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    dataset(&root);
    link_away(&root, "data", &tmp.path().join("data"));
    let ds = Dataset::open(root.to_str().unwrap()).unwrap();
    let err = ds.read_rows(0..3, None).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Invalid, "{err}");
}
