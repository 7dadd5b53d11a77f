//! The commands that change a dataset through the reference API: delete, update, column
//! add/drop/rename, compact, merge, restore and gc; their JSON output and exit codes.

mod common;

use common::*;

/// A dataset of two appends of JSON Lines rows `{id, name, score}`: ids 0..5 then 5..10.
fn rows_dataset(dir: &std::path::Path) -> std::path::PathBuf {
    let ds = dir.join("ds");
    for (part, ids) in [("a", 0..5), ("b", 5..10)] {
        let src = dir.join(format!("{part}.jsonl"));
        let lines: Vec<String> =
            ids.map(|i| format!("{{\"id\": {i}, \"name\": \"n{i}\", \"score\": {}}}", f64::from(i) * 0.5)).collect();
        let lines = lines.join("\n");
        std::fs::write(&src, lines).unwrap();
        ok(&["ingest", s(&ds), s(&src), "-q"]);
    }
    ds
}

/// The ids of a version, in row order.
fn ids(ds: &std::path::Path, extra: &[&str]) -> Vec<i64> {
    let rows = json(&[&["info", s(ds)], extra].concat())["rows"].as_u64().unwrap();
    (0..rows)
        .map(|r| {
            let v = json(&[&["show", s(ds), &r.to_string(), "--columns", "id"], extra].concat());
            v["columns"]["id"]["value"].as_i64().unwrap()
        })
        .collect()
}

#[test]
fn delete_by_predicate_and_by_rows() {
    let dir = tempfile::tempdir().unwrap();
    let ds = rows_dataset(dir.path());
    let d = json(&["delete", s(&ds), "--where", "id < 3 or name = 'n9'"]);
    assert_eq!(
        (d["rows_deleted"].as_u64(), d["rows"].as_u64(), d["committed"].as_bool()),
        (Some(4), Some(6), Some(true))
    );
    assert_eq!(ids(&ds, &[]), [3, 4, 5, 6, 7, 8]);

    let dry = json(&["delete", s(&ds), "--rows", "0,2-3", "--dry-run"]);
    assert_eq!((dry["committed"].as_bool(), dry["rows"].as_u64()), (Some(false), Some(6)));
    assert_eq!(dry["selected"], serde_json::json!([0, 2, 3]));
    assert!(ok(&["delete", s(&ds), "--rows", "0", "-m", "drop the first"]).contains("deleted 1 rows"));
    assert_eq!(ids(&ds, &[]), [4, 5, 6, 7, 8]);
    let log = json(&["log", s(&ds), "-n", "1"]);
    assert_eq!(log[0]["message"], "drop the first");
    // Nothing selected: nothing committed.
    let none = json(&["delete", s(&ds), "--where", "score > 100.5"]);
    assert_eq!(none["committed"], false);

    assert_eq!(fails(&["delete", s(&ds), "--rows", "99"]).0, 3, "a row past the end");
    assert_eq!(fails(&["delete", s(&ds), "--where", "nope = 1"]).0, 2, "an unknown column");
    assert_eq!(fails(&["delete", s(&ds), "--where", "id <"]).0, 2, "a bad expression");
    assert_eq!(fails(&["delete", s(&ds), "--where", "name < 3"]).0, 2, "text that is no number against one");
    assert_eq!(fails(&["delete", s(&ds), "--where", "name + 1 > 0"]).0, 2, "text in arithmetic");
    assert_eq!(fails(&["delete", s(&ds), "--where", "score"]).0, 2, "not a boolean");
    assert_eq!(fails(&["delete", s(&ds)]).0, 2, "no selection");
    assert_eq!(fails(&["delete", s(&ds), "--rows", "1", "--where", "id = 1"]).0, 2, "two selections");
    assert_eq!(fails(&["delete", s(&dir.path().join("nope")), "--rows", "1"]).0, 3);
}

#[test]
fn delete_by_class_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("train");
    image_folder(&root, &["a", "b", "c"], 2);
    let ds = dir.path().join("ds");
    ok(&["ingest", s(&ds), s(&root), "-q", "--size", "8"]);
    let d = json(&["delete", s(&ds), "--where", "label_name = 'b' or label = 2"]);
    assert_eq!((d["rows_deleted"].as_u64(), d["rows"].as_u64()), (Some(4), Some(2)));
    assert_eq!(json(&["show", s(&ds), "1"])["columns"]["label"]["class"], "a");
    let none = json(&["delete", s(&ds), "--where", "label_name = 'zebra'"]);
    assert_eq!((none["rows_deleted"].as_u64(), none["committed"].as_bool()), (Some(0), Some(false)));
    let (code, _, err) = fails(&["delete", s(&ds), "--where", r#"label_name = "b""#]);
    assert_eq!(code, 2, "double quotes name a column");
    assert!(err.contains("single quotes"), "{err}");
    assert_eq!(fails(&["delete", s(&ds), "--where", "image = 1"]).0, 2, "a tensor column does not compare");
}

#[test]
fn update_and_column_evolution() {
    let dir = tempfile::tempdir().unwrap();
    let ds = rows_dataset(dir.path());
    let u = json(&["update", s(&ds), "--where", "id IN (5, 7)", "--set", "name=five", "--set", "score=1.25"]);
    assert_eq!((u["rows_updated"].as_u64(), u["rows"].as_u64()), (Some(2), Some(10)));
    let row = json(&["show", s(&ds), "7"]);
    assert_eq!(
        (row["columns"]["name"]["value"].as_str(), row["columns"]["score"]["value"].as_f64()),
        (Some("five"), Some(1.25))
    );
    assert_eq!(json(&["show", s(&ds), "6"])["columns"]["name"]["value"], "n6", "other rows keep their values");
    assert_eq!(fails(&["update", s(&ds), "--rows", "1", "--set", "id=x"]).0, 2);
    assert_eq!(fails(&["update", s(&ds), "--rows", "1", "--set", "nope=1"]).0, 2);
    assert_eq!(fails(&["update", s(&ds), "--rows", "1"]).0, 2, "--set is required");

    let a = json(&["column", "add", s(&ds), "flag", "--dtype", "bool", "--fill", "true"]);
    assert_eq!(a["added"], "flag");
    assert_eq!(json(&["show", s(&ds), "3"])["columns"]["flag"]["value"], true);
    ok(&["column", "add", s(&ds), "note", "--dtype", "utf8"]);
    assert!(json(&["show", s(&ds), "0"])["columns"]["note"].is_null(), "a column added without --fill is null");
    ok(&["column", "rename", s(&ds), "note", "memo"]);
    ok(&["column", "drop", "-d", s(&ds), "memo"]);
    let cols: Vec<String> = json(&["info", s(&ds)])["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(cols, ["id", "name", "score", "flag"]);
    assert_eq!(fails(&["column", "drop", s(&ds), "nope"]).0, 2);
    assert_eq!(fails(&["column", "rename", s(&ds), "id", "name"]).0, 2, "a taken name");
    assert_eq!(fails(&["column", "add", s(&ds), "x", "--dtype", "u8", "--fill", "300"]).0, 2, "out of range");
    assert_eq!(fails(&["column", "add", s(&ds), "x", "--dtype", "complex"]).0, 2);
    assert!(ok(&["column", "--help"]).contains("rename"));
}

#[test]
fn compact_restore_merge_and_gc() {
    let dir = tempfile::tempdir().unwrap();
    let ds = rows_dataset(dir.path());
    ok(&["delete", s(&ds), "--rows", "0,6"]);
    let before = ids(&ds, &[]);
    let c = json(&["compact", s(&ds), "--target-rows", "100"]);
    assert_eq!((c["fragments_before"].as_u64(), c["fragments_after"].as_u64()), (Some(2), Some(1)));
    assert_eq!(c["committed"], true);
    assert_eq!(ids(&ds, &[]), before, "compaction keeps rows and their order");
    assert_eq!(json(&["compact", s(&ds), "--target-rows", "100"])["committed"], false, "nothing left to compact");

    // Version 3 is the two appends before the delete.
    let r = json(&["restore", s(&ds), "3"]);
    assert_eq!((r["rows"].as_u64(), r["restored"].as_str()), (Some(10), Some("main@3")));
    assert_eq!(json(&["info", s(&ds)])["rows"], 10);
    assert_eq!(fails(&["restore", s(&ds), "99"]).0, 3);

    // A fast-forward, then two branches that change the same fragment: a conflict.
    ok(&["branch", s(&ds), "dev"]);
    ok(&["delete", s(&ds), "--branch", "dev", "--rows", "1"]);
    let m = json(&["merge", s(&ds), "dev"]);
    assert_eq!(
        (m["fast_forward"].as_bool(), m["rows"].as_u64(), m["committed"].as_bool()),
        (Some(true), Some(9), Some(true))
    );
    assert_eq!(json(&["merge", s(&ds), "dev"])["committed"], false, "already merged");
    ok(&["branch", s(&ds), "x"]);
    ok(&["branch", s(&ds), "y"]);
    ok(&["update", s(&ds), "--branch", "x", "--rows", "0", "--set", "name=x"]);
    ok(&["update", s(&ds), "--branch", "y", "--rows", "0", "--set", "name=y"]);
    ok(&["merge", s(&ds), "x"]);
    let (code, _, err) = fails(&["merge", s(&ds), "y"]);
    assert_eq!(code, 4, "{err}");
    assert_eq!(fails(&["merge", s(&ds), "nope"]).0, 3);

    // gc: a stray data file (a failed write) is garbage once older than the retention period,
    // and so are the files the losing merge wrote.
    let stray = ds.join("data").join("stray.tdf");
    std::fs::write(&stray, b"left by a crashed writer").unwrap();
    let kept = json(&["gc", s(&ds)]);
    let young = kept["too_young"].as_u64().unwrap();
    assert_eq!(kept["garbage"].as_array().map(Vec::len), Some(0));
    assert!(young >= 1, "{kept}");
    let dry = json(&["gc", s(&ds), "--retention", "0s", "--dry-run"]);
    let garbage: Vec<&str> = dry["garbage"].as_array().unwrap().iter().map(|g| g["path"].as_str().unwrap()).collect();
    assert_eq!(garbage.len() as u64, young, "{dry}");
    assert!(garbage.contains(&"data/stray.tdf"), "{dry}");
    assert!(stray.exists(), "a dry run deletes nothing");
    assert!(ok(&["gc", s(&ds), "--retention", "0s"]).contains(&format!("deleted {young} unreferenced")));
    assert!(!stray.exists());
    assert_eq!(json(&["gc", s(&ds), "--retention", "0s"])["garbage"].as_array().map(Vec::len), Some(0));
    for v in ["2", "3"] {
        assert_eq!(json(&["verify", s(&ds), "--version", v])["ok"], true, "version {v} whole");
    }
    assert_eq!(json(&["verify", s(&ds)])["ok"], true, "gc left every version whole");
    assert_eq!(fails(&["gc", s(&ds), "--retention", "soon"]).0, 2);
}
