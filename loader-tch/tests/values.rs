//! The loader's tensors equal the reference reader's rows, for every column layout (fixed,
//! ragged padded + lengths, inner ragged dims, strings, bytes, nullable, widened u16, bool),
//! compressed and not, with checksums on and off, from a local directory and through the
//! object-store path, in every shuffle mode; projection, offsets and tensor kinds; a taken
//! column outlives its batch. (Deleted rows are tested in the core's `loader/tests/deletions.rs`.)

mod common;

use std::sync::Arc;

use tch::{Kind, Tensor};
use tessera::{ColumnData, DType, Dataset};
use tessera_loader_tch::{Batch, Loader, LoaderConfig, ShuffleMode};

/// Row values of a reference column as f64, in C order.
fn ref_values(c: &ColumnData) -> Vec<f64> {
    let b = c.row(0);
    match c.dtype() {
        DType::Bool | DType::U8 | DType::Utf8 | DType::Bytes => b.iter().map(|&x| f64::from(x)).collect(),
        DType::I32 => b.chunks_exact(4).map(|x| f64::from(i32::from_le_bytes(x.try_into().unwrap()))).collect(),
        DType::I64 => b.chunks_exact(8).map(|x| i64::from_le_bytes(x.try_into().unwrap()) as f64).collect(),
        DType::U16 => b.chunks_exact(2).map(|x| f64::from(u16::from_le_bytes(x.try_into().unwrap()))).collect(),
        DType::F32 => b.chunks_exact(4).map(|x| f64::from(f32::from_le_bytes(x.try_into().unwrap()))).collect(),
        other => panic!("dtype {other} not in the fixture"),
    }
}

fn check_batch(ds: &Dataset, batch: &Batch) {
    for name in batch.names().map(str::to_string).collect::<Vec<_>>() {
        let col = batch.column(&name).unwrap();
        for (j, &row) in batch.rows().iter().enumerate() {
            let reference = ds.read_row(row, Some(&[name.as_str()])).unwrap();
            let rc = reference.get(&name).unwrap();
            let shape = rc.row_shape(0);
            // The row region of the padded tensor holds exactly the reference values...
            let mut t = col.values.get(j as i64);
            for (d, &n) in shape.iter().enumerate() {
                t = t.narrow(d as i64, 0, n as i64);
            }
            let got = Vec::<f64>::try_from(t.to_kind(Kind::Double).contiguous().view([-1])).unwrap();
            assert_eq!(got, ref_values(rc), "column {name} row {row}");
            // ...and everything else in the slot is zero padding.
            let whole = col.values.get(j as i64).to_kind(Kind::Double).abs().sum(Kind::Double).double_value(&[]);
            let part = t.to_kind(Kind::Double).abs().sum(Kind::Double).double_value(&[]);
            assert_eq!(whole.to_bits(), part.to_bits(), "column {name} row {row}: padding is not zero");
            if let Some(lengths) = &col.lengths {
                let l = Vec::<i64>::try_from(lengths.get(j as i64).reshape([-1])).unwrap();
                let want: Vec<i64> = rc.ragged_sizes().iter().map(|&x| x as i64).collect();
                assert_eq!(l, want, "column {name} row {row} lengths");
            }
            if let Some(valid) = &col.valid {
                assert_eq!(valid.get(j as i64).int64_value(&[]) == 1, rc.is_valid(0), "column {name} row {row}");
            }
        }
    }
    let texts = batch.strings("txt").unwrap();
    for (j, &row) in batch.rows().iter().enumerate() {
        let r = ds.read_row(row, Some(&["txt", "blob"])).unwrap();
        assert_eq!(texts[j], r.get("txt").unwrap().str_row(0).unwrap_or(""));
        assert_eq!(batch.byte_strings("blob").unwrap()[j], r.get("blob").unwrap().row(0));
    }
}

fn run(ds: &Dataset, cfg: LoaderConfig, store: Option<tessera::Store>) -> usize {
    let loader = match store {
        Some(s) => Loader::open_store(&s, cfg).unwrap(),
        None => Loader::open(cfg).unwrap(),
    };
    let mut n = 0;
    for batch in loader.epoch(1).unwrap() {
        let batch = batch.unwrap();
        check_batch(ds, &batch);
        n += batch.len();
    }
    n
}

#[test]
fn tensors_equal_reference_rows() {
    for compressed in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        let ds = common::dataset(root, 90, compressed, &common::small_files());
        assert!(ds.fragments().len() > 4, "the fixture should span many fragments");
        let pages = |col: &str| {
            let info = &ds.fragments()[0];
            let f = &info.fragment.files[0];
            let id = ds.schema().column(col).unwrap().id;
            ds.data_file(&info.fragment, f)
                .unwrap()
                .chunk(id)
                .unwrap()
                .pages
                .iter()
                .map(|p| p.row_count)
                .collect::<Vec<_>>()
        };
        assert!(pages("big").iter().all(|&n| n == 1) && pages("img").iter().any(|&n| n > 1));
        for (verify, shuffle) in [
            (true, ShuffleMode::Global),
            (false, ShuffleMode::Global),
            (true, ShuffleMode::Block { window_fragments: 2 }),
            (false, ShuffleMode::None),
        ] {
            let cfg = LoaderConfig { verify_checksums: verify, ..common::config(root) }
                .with_batch_size(7)
                .with_shuffle(shuffle)
                .with_workers(2);
            assert_eq!(run(&ds, cfg.clone(), None), 91, "{compressed} {verify} {shuffle:?}");
            // The same through the object-store path (ranged GETs instead of positioned reads).
            let fs = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
            let store = tessera::Store::from_object_store(Arc::new(fs), "", true);
            assert_eq!(run(&ds, cfg, Some(store)), 91);
        }
    }
}

#[test]
fn projection_offsets_and_dtypes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    common::dataset(root, 20, false, &common::small_files());
    let mut cfg = common::config(root).with_batch_size(5).with_columns(&["tok", "pair", "flag", "grid"]);
    cfg.ragged.offsets = true;
    let loader = Loader::open(cfg).unwrap();
    assert_eq!(loader.column_names(), ["tok", "pair", "flag", "grid"]);
    let batch = loader.epoch(0).unwrap().next().unwrap().unwrap();
    assert!(batch.tensor("id").is_err(), "not projected");
    assert_eq!(batch.tensor("pair").unwrap().kind(), Kind::Int, "u16 widens to i32");
    assert_eq!(batch.tensor("flag").unwrap().kind(), Kind::Bool);
    let tok = batch.column("tok").unwrap();
    let lengths = Vec::<i64>::try_from(tok.lengths.as_ref().unwrap()).unwrap();
    let offsets = Vec::<i64>::try_from(tok.offsets.as_ref().unwrap()).unwrap();
    assert_eq!(offsets.len(), 6);
    for j in 0..5 {
        assert_eq!(offsets[j + 1] - offsets[j], lengths[j]);
    }
    let grid = batch.column("grid").unwrap();
    let gl = Vec::<i64>::try_from(grid.lengths.as_ref().unwrap()).unwrap();
    let go = Vec::<i64>::try_from(grid.offsets.as_ref().unwrap()).unwrap();
    for j in 0..5 {
        assert_eq!(go[j + 1] - go[j], 2 * gl[j], "grid rows are [2, w]");
    }
    assert!(Loader::open(common::config(root).with_columns(&["nope"])).is_err());
    // Taking a column keeps its tensor valid after the batch is gone.
    let mut batch = batch;
    let kept = batch.take("pair").unwrap().values;
    let copy = kept.copy();
    drop(batch);
    let _more: Vec<_> = loader.epoch(1).into_iter().flatten().take(3).collect();
    assert!(kept.equal(&copy));
    let _ = Tensor::zeros([1], (Kind::Float, tch::Device::Cpu));
}
