//! `tessera lineage`: a recorded run's step → rows and row → steps, as the loader read them.

mod common;

use common::*;
use tessera::{Batch, Column, ColumnData, DType, Dataset, Schema, WriteOptions};
use tessera_loader::{Loader, LoaderConfig};

#[test]
fn lineage_lists_a_steps_rows_and_a_rows_steps() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let ids: Vec<i64> = (0..20).collect();
    Dataset::create(s(&root), schema, &WriteOptions::default())
        .unwrap()
        .append(&Batch::new().with("id", ColumnData::from_scalars(&ids)).unwrap(), "20", WriteOptions::default())
        .unwrap();
    let record = dir.path().join("run.lineage");
    let loader =
        Loader::open(LoaderConfig::new(s(&root)).with_batch_size(4).with_seed(5).with_lineage(&record)).unwrap();
    let mut seen: Vec<Vec<u64>> = Vec::new();
    for epoch in 0..2 {
        for b in loader.epoch(epoch).unwrap() {
            seen.push(b.unwrap().rows);
        }
    }
    let out = json(&["lineage", s(&record), "--step", "6"]);
    let rows: Vec<u64> = out["rows"].as_array().unwrap().iter().map(|r| r["row"].as_u64().unwrap()).collect();
    assert_eq!(rows, seen[6]);
    let row = seen[3][1];
    let steps: Vec<u64> = json(&["lineage", s(&record), "--row", &row.to_string()])["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let want: Vec<u64> = (0..seen.len() as u64).filter(|&k| seen[k as usize].contains(&row)).collect();
    assert_eq!(steps, want);
    assert!(ok(&["lineage", s(&record), "--step", "0"]).starts_with("step 0: 4 samples"));
    let (code, _, err) = fails(&["lineage", s(&dir.path().join("nope")), "--step", "0"]);
    assert_eq!(code, 3, "{err}");
    let (code, _, _) = fails(&["lineage", s(&record)]);
    assert_eq!(code, 2, "--step or --row is required");
}
