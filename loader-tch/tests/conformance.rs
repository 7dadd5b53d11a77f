//! The tch adapter as a conforming reader's tensor mapping: every valid read case of
//! `fixtures/` read through the adapter yields exactly the values of its expected dump,
//! converted back from the batch tensors (each stored dtype's tensor kind, `u16`/`u32`/`u64`
//! widened with `u64` bits kept, padded values cut to the rows' lengths, validity) and dumped
//! by the reference's `dump_column`. (Rejections, hangs and the host batches themselves are
//! tested in the core's `loader/tests/conformance.rs`, which shares the case handling.)

#[path = "../../loader/tests/common/fixtures.rs"]
mod fixtures;

use tch::{Device, Kind, Tensor};
use tessera::{ColumnData, DType, Dim};
use tessera_conformance::case::{Case, CaseClass};
use tessera_loader_tch::{Batch, ColumnTensors, Loader, LoaderError, TchOptions};

/// One row's bytes in the stored dtype, from the row's (unpadded) tensor.
fn stored_bytes(dtype: DType, row: &Tensor) -> Vec<u8> {
    let row = row.contiguous().flatten(0, -1);
    let n = row.numel();
    match dtype {
        DType::U16 | DType::U32 | DType::U64 => {
            let v: Vec<i64> = Vec::try_from(row.to_kind(Kind::Int64)).expect("integer row");
            v.iter()
                .flat_map(|&x| match dtype {
                    DType::U16 => (x as u16).to_le_bytes().to_vec(),
                    DType::U32 => (x as u32).to_le_bytes().to_vec(),
                    _ => x.to_le_bytes().to_vec(),
                })
                .collect()
        }
        _ => {
            let mut out = vec![0u8; n * row.kind().elt_size_in_bytes()];
            row.copy_data_u8(&mut out, n);
            out
        }
    }
}

/// Rebuilds a column's rows from its batch tensors (padding removed).
fn append_rows(col: &tessera::Column, t: &ColumnTensors, out: &mut ColumnData) {
    let values = t.values.to_device(Device::Cpu);
    let rows = values.size()[0];
    let lengths: Option<Vec<i64>> = t.lengths.as_ref().map(|l| Vec::try_from(l.reshape([-1])).expect("lengths"));
    let valid: Option<Vec<bool>> = t.valid.as_ref().map(|v| Vec::try_from(v).expect("validity"));
    let ragged = if col.dtype.is_variable() { 1 } else { col.ragged_dims() };
    for j in 0..rows {
        if valid.as_ref().is_some_and(|v| !v[j as usize]) {
            out.push_null().expect("push null");
            continue;
        }
        let mut sizes = lengths.as_ref().map_or(&[][..], |l| &l[j as usize * ragged..(j as usize + 1) * ragged]).iter();
        let shape: Vec<u64> = if col.dtype.is_variable() {
            vec![*sizes.next().expect("text length") as u64]
        } else {
            col.shape
                .iter()
                .map(|d| match d {
                    Dim::Fixed(x) => *x,
                    Dim::Ragged => *sizes.next().expect("ragged size") as u64,
                })
                .collect()
        };
        let mut row = values.get(j);
        for (k, &d) in shape.iter().enumerate() {
            row = row.narrow(k as i64, 0, d as i64);
        }
        out.push_row(&shape, &stored_bytes(col.dtype, &row)).expect("push row");
    }
}

/// Reads the whole version (or the view) through the adapter, in order, and dumps each column.
fn read_through_loader(case: &Case, rows: u64) -> Result<serde_json::Value, LoaderError> {
    // Every stored u64 must come back exactly (tch has no u64 kind; see the option).
    let options = TchOptions { u64_as_i64_bits: true, ..TchOptions::default() };
    let loader = Loader::open_with(fixtures::case_config(case, rows), options)?;
    let schema = loader.dataset().schema().clone();
    let mut data: Vec<ColumnData> = schema.columns.iter().map(ColumnData::for_column).collect();
    let mut delivered = 0u64;
    for batch in loader.epoch(0)? {
        let batch: Batch = batch?;
        for (c, col) in schema.columns.iter().enumerate() {
            append_rows(col, batch.column(&col.name)?, &mut data[c]);
        }
        delivered += batch.len() as u64;
    }
    assert_eq!(delivered, loader.row_count(), "rows delivered");
    let mut columns = serde_json::Map::new();
    for (col, d) in schema.columns.iter().zip(&data) {
        columns.insert(col.name.clone(), tessera::dump::dump_column(d));
    }
    Ok(serde_json::Value::Object(columns))
}

#[test]
fn every_valid_read_fixture_through_the_adapter() {
    let cases: Vec<Case> = fixtures::read_cases().into_iter().filter(|c| c.class == CaseClass::Valid).collect();
    let (passed, failures) = fixtures::run_cases(cases, |case| {
        fixtures::expect_dump(case, |rows| read_through_loader(case, rows).map_err(|e| e.to_string()))
    });
    println!("adapter conformance: {passed} passed, {} failed", failures.len());
    assert!(passed > 100, "only {passed} cases ran");
    assert!(failures.is_empty(), "{} cases failed:\n{}", failures.len(), failures.join("\n"));
}
