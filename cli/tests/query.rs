//! `tessera query` end to end: table and JSON output, tensor summaries, `--at`, `--limit`,
//! `--save-view`, and the usage errors (SQL position, the real columns).

mod common;

use common::{fails, json, ok};
use tessera::{Batch, Column, ColumnData, DType, Dataset, Dim, Kind, Metric, Schema, WriteOptions};

/// Six rows: ids 0..6, labels cat/dog alternating, 2-d embeddings, small images. Version 2
/// has four rows, version 3 six; version 2 is tagged `first`.
fn dataset(dir: &std::path::Path) -> String {
    let root = dir.join("ds").to_str().unwrap().to_owned();
    let schema = Schema::new([
        Column::new("id", DType::I64, &[]),
        Column::new("label", DType::I64, &[]).with_kind(Kind::ClassLabel { names: vec!["cat".into(), "dog".into()] }),
        Column::new("emb", DType::F32, &[Dim::Fixed(2)]).with_kind(Kind::Embedding { metric: Metric::Cosine }),
        Column::new("image", DType::U8, &[Dim::Fixed(4), Dim::Fixed(4), Dim::Fixed(3)]),
    ])
    .unwrap();
    let rows = |r: std::ops::Range<i64>| {
        let n = (r.end - r.start) as usize;
        let emb: Vec<f32> = r.clone().flat_map(|i| [1.0, i as f32]).collect();
        Batch::new()
            .with("id", ColumnData::from_scalars(&r.clone().collect::<Vec<_>>()))
            .unwrap()
            .with("label", ColumnData::from_scalars(&r.clone().map(|i| i % 2).collect::<Vec<_>>()))
            .unwrap()
            .with("emb", ColumnData::from_fixed(&[2], &emb).unwrap())
            .unwrap()
            .with("image", ColumnData::from_fixed(&[4, 4, 3], &vec![9u8; n * 48]).unwrap())
            .unwrap()
    };
    let ds = Dataset::create(&root, schema, &WriteOptions::default()).unwrap();
    let ds = ds.append(&rows(0..4), "four", WriteOptions::default()).unwrap();
    ds.create_tag("first", "", &WriteOptions::default()).unwrap();
    ds.append(&rows(4..6), "two more", WriteOptions::default()).unwrap();
    root
}

#[test]
fn prints_a_table_with_tensors_summarized() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path());
    let out = ok(&["query", &ds, "SELECT _rowid, label_name, emb, image FROM ds WHERE label = 1 ORDER BY _rowid"]);
    assert_eq!(
        out,
        "_rowid  label_name  emb     image\n     1  dog         f32[2]  u8[4,4,3]\n     3  dog         f32[2]  u8[4,4,3]\n     5  dog         f32[2]  u8[4,4,3]\n(3 rows)\n"
    );
}

#[test]
fn json_output_versions_and_limit() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path());
    let sql = "SELECT id, cosine_distance(emb, [1, 0]) AS d FROM ds ORDER BY d LIMIT 2";
    let v = json(&["query", &ds, sql]);
    assert_eq!(v["rows"][0]["id"], 0);
    assert_eq!(v["rows"][0]["d"], 0.0);
    assert_eq!(v["rows"][1]["id"], 1);
    assert_eq!(v["truncated"], false);
    let count = |at: &str| json(&["query", &ds, "SELECT count(*) AS n FROM ds", "--at", at])["rows"][0]["n"].clone();
    assert_eq!(count("2"), 4);
    assert_eq!(count("first"), 4);
    assert_eq!(count("3"), 6);
    let v = json(&["query", &ds, "SELECT id FROM ds ORDER BY id", "--limit", "2"]);
    assert_eq!(v["rows"].as_array().unwrap().len(), 2);
    assert_eq!(v["truncated"], true);
}

#[test]
fn save_view_keeps_the_answer_rows_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path());
    let out =
        ok(&["query", &ds, "SELECT id FROM ds ORDER BY l2_distance(emb, [1, 3]) LIMIT 3", "--save-view", "near3"]);
    assert_eq!(out, "saved view near3: 3 rows of main@3\n");
    let store = tessera::Store::open(&ds).unwrap();
    let (_, view) = Dataset::open_view(&store, "near3", tessera::Limits::default()).unwrap();
    // Distances 0, 1, 1: the tie between rows 2 and 4 goes to the lower row id.
    assert_eq!(view.rows.to_vec(), vec![3, 2, 4]);
}

#[test]
fn usage_errors_point_at_the_sql_and_list_columns() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path());
    let (code, _, err) = fails(&["query", &ds, "SELECT id FROM ds WHERE id >"]);
    assert_eq!(code, 2);
    assert!(err.contains("bad SQL at line 1, column 29"), "{err}");
    assert!(err.contains("\n  SELECT id FROM ds WHERE id >\n                              ^\n"), "{err}");
    let (code, _, err) = fails(&["query", &ds, "SELECT lable FROM ds"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown column \"lable\""), "{err}");
    assert!(err.contains("the columns are: id, label, emb, image, label_name, _rowid"), "{err}");
    let (code, _, _) = fails(&["query", &ds, "SELECT 1", "--at", "no-such-tag"]);
    assert_eq!(code, 3);
}
