//! The adapter's packed (jagged) tensors: a batch split for several devices cuts the packed
//! values at the row offsets, and every part's tensors (values, `packed_rows` views, offsets,
//! shapes and lengths tensors, byte strings) equal the reference reader's rows. (The packed
//! layout itself, in every mode and for random ragged schemas, with resume, sharding,
//! skip-bad-sample and the budget, is tested on host batches in the core's
//! `loader/tests/ragged.rs`.)

mod common;

use tch::Kind;
use tessera::{DType, Dataset};
use tessera_loader_tch::{Batch, Loader, LoaderConfig, RaggedOptions};

/// A stored row's elements as f64 (the loader widens `u16`; every other dtype here is copied).
fn ref_values(dtype: DType, b: &[u8]) -> Vec<f64> {
    match dtype {
        DType::Bool | DType::U8 | DType::Utf8 | DType::Bytes => b.iter().map(|&x| f64::from(x)).collect(),
        DType::I32 => b.chunks_exact(4).map(|x| f64::from(i32::from_le_bytes(x.try_into().unwrap()))).collect(),
        DType::I64 => b.chunks_exact(8).map(|x| i64::from_le_bytes(x.try_into().unwrap()) as f64).collect(),
        DType::U16 => b.chunks_exact(2).map(|x| f64::from(u16::from_le_bytes(x.try_into().unwrap()))).collect(),
        DType::F32 => b.chunks_exact(4).map(|x| f64::from(f32::from_le_bytes(x.try_into().unwrap()))).collect(),
        other => panic!("dtype {other} not generated"),
    }
}

fn flat(t: &tch::Tensor) -> Vec<f64> {
    Vec::<f64>::try_from(t.to_kind(Kind::Double).contiguous().view([-1])).unwrap()
}

/// Checks every column of `batch` against the reference rows: packed columns row by row
/// (values, shape, offsets, and no bytes beyond the rows), padded ones in their slots with
/// zero padding. Returns how many packed columns it saw.
fn check(ds: &Dataset, batch: &Batch) -> usize {
    let mut packed = 0;
    for name in batch.names().map(str::to_string).collect::<Vec<_>>() {
        let col = batch.column(&name).unwrap();
        let dtype = ds.schema().column(&name).unwrap().dtype;
        let views = col.is_packed().then(|| batch.packed_rows(&name).unwrap());
        let mut total = 0i64;
        for (j, &row) in batch.rows().iter().enumerate() {
            let r = ds.read_row(row, Some(&[name.as_str()])).unwrap();
            let rc = r.get(&name).unwrap();
            let shape: Vec<i64> = rc.row_shape(0).iter().map(|&d| d as i64).collect();
            let want = ref_values(dtype, rc.row(0));
            if let Some(views) = &views {
                assert_eq!(views[j].size(), shape, "column {name} row {row}: shape");
                assert_eq!(flat(&views[j]), want, "column {name} row {row}: values");
                let s = Vec::<i64>::try_from(col.shapes.as_ref().unwrap().get(j as i64)).unwrap();
                assert_eq!(s, shape, "column {name} row {row}: shapes tensor");
                total += views[j].numel() as i64;
            } else if rc.ragged_dims() > 0 || dtype.is_variable() {
                let mut t = col.values.get(j as i64);
                for (d, &n) in shape.iter().enumerate() {
                    t = t.narrow(d as i64, 0, n);
                }
                assert_eq!(flat(&t), want, "column {name} row {row}: padded values");
                let whole: f64 = flat(&col.values.get(j as i64)).iter().map(|x| x.abs()).sum();
                let part: f64 = want.iter().map(|x| x.abs()).sum();
                assert_eq!(
                    (whole + 0.0).to_bits(),
                    (part + 0.0).to_bits(),
                    "column {name} row {row}: padding is not zero"
                );
            } else {
                assert_eq!(flat(&col.values.get(j as i64)), want, "column {name} row {row}");
            }
            if let Some(lengths) = &col.lengths {
                let l = Vec::<i64>::try_from(lengths.get(j as i64).reshape([-1])).unwrap();
                let want: Vec<i64> = rc.ragged_sizes().iter().map(|&x| x as i64).collect();
                assert_eq!(l, want, "column {name} row {row}: lengths");
            }
            if let Some(valid) = &col.valid {
                assert_eq!(valid.get(j as i64).int64_value(&[]) == 1, rc.is_valid(0), "column {name} row {row}");
            }
        }
        if col.is_packed() {
            packed += 1;
            assert_eq!(col.values.numel() as i64, total, "column {name}: the values are the rows, nothing else");
            let offsets = Vec::<i64>::try_from(col.offsets.as_ref().unwrap()).unwrap();
            assert_eq!((offsets.len(), offsets[0]), (batch.len() + 1, 0), "column {name}: offsets");
            assert_eq!(*offsets.last().unwrap(), col.values.size()[0], "column {name}: offsets end");
        }
        if dtype.is_variable() {
            let got = batch.byte_strings(&name).unwrap();
            for (j, &row) in batch.rows().iter().enumerate() {
                let r = ds.read_row(row, Some(&[name.as_str()])).unwrap();
                assert_eq!(got[j], r.get(&name).unwrap().row(0), "column {name} row {row}: byte strings");
            }
        }
    }
    packed
}

#[test]
fn split_batches_cut_packed_values_at_the_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let ds = common::dataset(root, 24, false, &common::small_files());
    let cfg = LoaderConfig { ragged: RaggedOptions::packed(), ..common::config(root) }.with_batch_size(6);
    let loader = Loader::open(cfg).unwrap();
    for b in loader.epoch(0).unwrap() {
        let b = b.unwrap();
        for part in b.split(3).unwrap() {
            assert_eq!(check(&ds, &part), 5);
        }
    }
}
