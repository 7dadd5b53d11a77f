//! `tessera view ls|show|rm`, and views in `tessera log` and `tessera info`.

mod common;

use common::*;
use tessera::{Batch, Column, ColumnData, DType, Dataset, Schema, WriteOptions};

/// A dataset of 8 `id` rows (version 2) and a view of it; version 3 appends more rows.
fn dataset_with_view(dir: &std::path::Path) -> std::path::PathBuf {
    let root = dir.join("ds");
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let rows = |a: i64, b: i64| Batch::new().with("id", ColumnData::from_scalars(&(a..b).collect::<Vec<_>>())).unwrap();
    let v2 = Dataset::create(s(&root), schema, &WriteOptions::default())
        .unwrap()
        .append(&rows(0, 8), "eight", WriteOptions::default())
        .unwrap();
    v2.save_view("evens", &[6, 4, 2, 0], "SELECT * WHERE id % 2 = 0 ORDER BY id DESC").unwrap();
    v2.append(&rows(8, 10), "two more", WriteOptions::default()).unwrap();
    root
}

#[test]
fn ls_show_rm() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset_with_view(dir.path());
    let ls = json(&["view", "ls", s(&ds)]);
    assert_eq!(ls.as_array().unwrap().len(), 1);
    assert_eq!(
        (ls[0]["view"].as_str(), ls[0]["version"].as_u64(), ls[0]["rows"].as_u64()),
        (Some("evens"), Some(2), Some(4))
    );
    let text = ok(&["view", "ls", s(&ds)]);
    assert!(text.starts_with("evens  main@2  4 rows  SELECT"), "{text}");

    let show = json(&["view", "show", s(&ds), "evens"]);
    assert_eq!(show["row_ids"], serde_json::json!([6, 4, 2, 0]));
    assert_eq!(show["rows_sha256"].as_str().unwrap().len(), 64);
    let text = ok(&["view", "show", "-d", s(&ds), "evens", "--rows", "2"]);
    assert!(text.contains("version   main@2") && text.contains("row ids   6 4 … (2 more)"), "{text}");
    assert_eq!(fails(&["view", "show", s(&ds), "nope"]).0, 3, "not found");
    assert_eq!(fails(&["view", "show", s(&ds), "../x"]).0, 2, "bad name");

    // log marks the pinned version; info lists the names.
    let log = ok(&["log", s(&ds)]);
    let line = log.lines().find(|l| l.starts_with("main@2")).unwrap();
    assert!(line.ends_with("[views: evens]"), "{log}");
    assert!(!log.lines().next().unwrap().contains("views"), "{log}");
    assert_eq!(json(&["log", s(&ds)])[1]["views"], serde_json::json!(["evens"]));
    assert_eq!(json(&["info", s(&ds)])["views"], serde_json::json!(["evens"]));
    assert!(ok(&["info", s(&ds)]).contains("views     evens"));

    assert_eq!(ok(&["view", "rm", s(&ds), "evens"]).trim(), "deleted view evens");
    assert_eq!(fails(&["view", "rm", s(&ds), "evens"]).0, 3);
    assert!(json(&["view", "ls", s(&ds)]).as_array().unwrap().is_empty());
    assert_eq!(json(&["info", s(&ds)])["rows"], 10, "no version changed");
}

#[test]
fn a_damaged_view_is_a_data_fault() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset_with_view(dir.path());
    let path = ds.join("views/evens.tsview");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - 10;
    bytes[at] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let (code, _, err) = fails(&["view", "show", s(&ds), "evens"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("CRC-32"), "{err}");
    // log still works, and says why the view is left out.
    let out = run(&["log", s(&ds)]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("view \"evens\" is unreadable"));
    ok(&["view", "rm", s(&ds), "evens"]);
}

/// A runs view (SPEC.md VIEW-11) shows its runs in JSON, never its rows expanded, and its
/// first row ids in text.
#[test]
fn show_prints_a_runs_view_as_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset_with_view(dir.path());
    let v3 = Dataset::open(s(&ds)).unwrap();
    v3.save_view("ranges", &[0, 1, 2, 3, 7, 8, 9], "SELECT * WHERE id < 4 OR id > 6").unwrap();
    let show = json(&["view", "show", s(&ds), "ranges"]);
    assert_eq!(show["runs"], serde_json::json!([[0, 4], [7, 3]]));
    assert!(show.get("row_ids").is_none(), "{show}");
    assert_eq!(show["rows"], 7);
    let text = ok(&["view", "show", "-d", s(&ds), "ranges", "--rows", "5"]);
    assert!(text.contains("row ids   0 1 2 3 7 … (2 more)"), "{text}");
}
