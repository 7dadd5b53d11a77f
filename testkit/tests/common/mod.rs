//! Shared data builders for the storage and fault suites.
#![allow(
    dead_code,
    unreachable_pub,
    missing_docs,
    clippy::missing_panics_doc,
    clippy::must_use_candidate,
    clippy::missing_errors_doc
)]

use tessera::{Batch, Column, ColumnData, DType, Dataset, Dim, Schema, WriteOptions};

pub fn schema() -> Schema {
    Schema::new([
        Column::new("id", DType::I64, &[]),
        Column::new("name", DType::Utf8, &[]),
        Column::new("vec", DType::F32, &[Dim::Fixed(4)]),
        Column::new("tokens", DType::I32, &[Dim::Ragged]),
    ])
    .unwrap()
}

/// Rows `start..start+n`; every value is a function of the id, so any row can be checked alone.
pub fn batch(start: i64, n: i64) -> Batch {
    let ids: Vec<i64> = (start..start + n).collect();
    let names: Vec<String> = ids.iter().map(|i| format!("row-{i}")).collect();
    let vecs: Vec<f32> = ids.iter().flat_map(|&i| (0..4).map(move |k| (i * 4 + k) as f32)).collect();
    let toks: Vec<Vec<i32>> = ids.iter().map(|&i| (0..(i % 5) as i32).map(|k| i as i32 * 10 + k).collect()).collect();
    let tok_refs: Vec<&[i32]> = toks.iter().map(Vec::as_slice).collect();
    Batch::new()
        .with("id", ColumnData::from_scalars(&ids))
        .unwrap()
        .with("name", ColumnData::from_strings(&names))
        .unwrap()
        .with("vec", ColumnData::from_fixed(&[4], &vecs).unwrap())
        .unwrap()
        .with("tokens", ColumnData::from_sequences::<i32>(&tok_refs))
        .unwrap()
}

/// Small files and pages so a few rows make several fragments and range reads.
pub fn small() -> WriteOptions {
    WriteOptions { target_file_bytes: 512, page_bytes: 128, ..WriteOptions::default() }
}

pub fn ids(ds: &Dataset) -> Vec<i64> {
    ds.read_rows(0..ds.row_count(), Some(&["id"])).unwrap().get("id").unwrap().to_vec::<i64>().unwrap()
}

/// Checks that every column of `b` holds exactly what [`batch`] wrote for its ids.
pub fn check_rows(b: &Batch) -> Result<usize, String> {
    let ids = b.get("id").ok_or("no id column")?.to_vec::<i64>().map_err(|e| e.to_string())?;
    if let Some(c) = b.get("name") {
        for (r, id) in ids.iter().enumerate() {
            if c.str_row(r) != Some(format!("row-{id}").as_str()) {
                return Err(format!("row {r}: name {:?} for id {id}", c.str_row(r)));
            }
        }
    }
    if let Some(c) = b.get("vec") {
        let v = c.to_vec::<f32>().map_err(|e| e.to_string())?;
        let want: Vec<f32> = ids.iter().flat_map(|&i| (0..4).map(move |k| (i * 4 + k) as f32)).collect();
        if v != want {
            return Err("vec values differ".into());
        }
    }
    if let Some(c) = b.get("tokens") {
        for (r, &id) in ids.iter().enumerate() {
            let want: Vec<i32> = (0..(id % 5) as i32).map(|k| id as i32 * 10 + k).collect();
            let got: Vec<i32> =
                c.row(r).chunks_exact(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            if got != want {
                return Err(format!("row {r}: tokens {got:?} for id {id}"));
            }
        }
    }
    Ok(ids.len())
}
