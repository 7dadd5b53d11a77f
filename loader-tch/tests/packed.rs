//! Packed (jagged) ragged output: every packed row equals the reference reader's row (values
//! and shape) with nothing but the rows in the values, for the fixture's layouts and for
//! random ragged schemas with empty rows, nulls and text; padded output of the same schemas
//! still equals the reference; packed output works with resume, sharding, skip-bad-sample
//! and within the memory budget.

mod common;

use std::os::unix::fs::FileExt;

use tch::Kind;
use tessera::{Batch as Rows, Column, ColumnData, Compression, DType, Dataset, Dim};
use tessera_loader_tch::{Batch, Loader, LoaderConfig, LoaderState, RaggedLayout, RaggedOptions, ShuffleMode};

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

fn drain(ds: &Dataset, cfg: LoaderConfig) -> (usize, usize) {
    let loader = Loader::open(cfg).unwrap();
    let (mut rows, mut packed) = (0, 0);
    for b in loader.epoch(1).unwrap() {
        let b = b.unwrap();
        packed += check(ds, &b);
        rows += b.len();
    }
    (rows, packed)
}

#[test]
fn packed_rows_equal_reference_rows_in_every_mode() {
    for compressed in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        let ds = common::dataset(root, 60, compressed, &common::small_files());
        for (verify, shuffle) in [
            (true, ShuffleMode::Global),
            (false, ShuffleMode::Global),
            (true, ShuffleMode::Block { window_fragments: 2 }),
        ] {
            let cfg =
                LoaderConfig { verify_checksums: verify, ragged: RaggedOptions::packed(), ..common::config(root) }
                    .with_batch_size(7)
                    .with_shuffle(shuffle);
            let (rows, packed) = drain(&ds, cfg);
            assert_eq!(rows, 63, "{compressed} {verify} {shuffle:?}");
            // tok, txt, boxes, blob, grid in each of the 9 batches.
            assert_eq!(packed, 5 * 9);
        }
    }
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

/// A tiny deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random schema of ragged columns (plus `id`) and `n` rows of it: sizes 0..=4 per ragged
/// dim (empty rows included), some nullable columns, text and bytes.
fn random_dataset(root: &str, seed: u64, n: usize) -> Dataset {
    let mut rng = Rng(seed | 1);
    let dtypes = [DType::U8, DType::I32, DType::U16, DType::F32, DType::I64];
    let shapes: [&[Dim]; 5] = [
        &[Dim::Ragged],
        &[Dim::Ragged, Dim::Fixed(3)],
        &[Dim::Fixed(2), Dim::Ragged],
        &[Dim::Ragged, Dim::Ragged, Dim::Fixed(3)],
        &[Dim::Ragged, Dim::Ragged],
    ];
    let mut columns = vec![Column::new("id", DType::I64, &[])];
    for k in 0..4 {
        let dtype = dtypes[rng.below(5) as usize];
        let mut c = Column::new(format!("r{k}"), dtype, shapes[rng.below(5) as usize]);
        if rng.below(3) == 0 {
            c = c.nullable();
        }
        if rng.below(2) == 0 {
            c = c.with_compression(Compression::Zstd { level: 1 });
        }
        columns.push(c);
    }
    columns.push(Column::new("txt", DType::Utf8, &[]).nullable());
    columns.push(Column::new("raw", DType::Bytes, &[]));
    let schema = tessera::Schema::new(columns.clone()).unwrap();
    let opts = common::small_files();
    let ds = Dataset::create(root, schema, &opts).unwrap();
    let ids: Vec<i64> = (0..n as i64).collect();
    let mut batch = Rows::new().with("id", ColumnData::from_scalars(&ids)).unwrap();
    for c in &columns[1..] {
        let mut data = ColumnData::empty(c.dtype, &c.shape, c.nullable);
        for i in 0..n {
            if c.nullable && rng.below(5) == 0 {
                data.push_null().unwrap();
                continue;
            }
            if c.dtype.is_variable() {
                let len = rng.below(6) as usize;
                let s: String = (0..len).map(|k| ['a', 'é', 'z', '€'][(i + k) % 4]).collect();
                data.push_row(&[s.len() as u64], s.as_bytes()).unwrap();
                continue;
            }
            let dims: Vec<u64> = c
                .shape
                .iter()
                .map(|d| match d {
                    Dim::Fixed(x) => *x,
                    Dim::Ragged => rng.below(5),
                })
                .collect();
            let elems: u64 = dims.iter().product();
            let bytes: Vec<u8> = (0..elems)
                .flat_map(|e| {
                    let v = (i as u64 * 31 + e) % 200;
                    match c.dtype {
                        DType::U8 => vec![v as u8],
                        DType::I32 => (v as i32 - 100).to_le_bytes().to_vec(),
                        DType::U16 => (60_000 + v as u16).to_le_bytes().to_vec(),
                        DType::F32 => (v as f32 / 4.0).to_le_bytes().to_vec(),
                        _ => (v as i64 - 7).to_le_bytes().to_vec(),
                    }
                })
                .collect();
            data.push_row(&dims, &bytes).unwrap();
        }
        batch = batch.with(&c.name, data).unwrap();
    }
    ds.append(&batch, "random ragged rows", opts).unwrap()
}

#[test]
fn random_ragged_schemas_packed_and_padded() {
    for seed in 1..=6u64 {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        let ds = random_dataset(root, seed * 0x9E37_79B9, 40);
        let base = common::config(root).with_batch_size(8);
        let (rows, packed) = drain(&ds, LoaderConfig { ragged: RaggedOptions::packed(), ..base.clone() });
        assert_eq!((rows, packed), (40, 6 * 5), "seed {seed}");
        let (rows, packed) = drain(&ds, base.clone());
        assert_eq!((rows, packed), (40, 0), "seed {seed}: padded");
        // Per column: r0 and txt packed, the rest padded.
        let ragged = RaggedOptions {
            columns: vec![("r0".into(), RaggedLayout::Packed), ("txt".into(), RaggedLayout::Packed)],
            ..RaggedOptions::default()
        };
        let (rows, packed) = drain(&ds, LoaderConfig { ragged, ..base.clone() });
        assert_eq!((rows, packed), (40, 2 * 5), "seed {seed}: per column");
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    random_dataset(root, 7, 4);
    let ragged = RaggedOptions { columns: vec![("id".into(), RaggedLayout::Packed)], ..RaggedOptions::default() };
    assert!(Loader::open(LoaderConfig { ragged, ..common::config(root) }).is_err(), "id has a fixed shape");
}

/// The packed values of every batch of an epoch (from `state` when given), with the ids.
fn packed_epoch(loader: &Loader, state: Option<&LoaderState>) -> Vec<(Vec<i64>, Vec<f64>, Vec<i64>)> {
    let it = match state {
        Some(s) => loader.resume(s).unwrap(),
        None => loader.epoch(0).unwrap(),
    };
    it.map(|b| {
        let b = b.unwrap();
        let c = b.column("tok").unwrap();
        (common::ids(&b), flat(&c.values), Vec::<i64>::try_from(c.offsets.as_ref().unwrap()).unwrap())
    })
    .collect()
}

#[test]
fn packed_output_resumes_and_shards() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let ds = common::dataset(root, 50, true, &common::small_files());
    let cfg = LoaderConfig { ragged: RaggedOptions::packed(), ..common::config(root) }
        .with_batch_size(4)
        .with_columns(&["id", "tok", "txt"]);
    let loader = Loader::open(cfg.clone()).unwrap();
    let all = packed_epoch(&loader, None);
    let mut it = loader.epoch(0).unwrap();
    for _ in 0..5 {
        it.next().unwrap().unwrap();
    }
    let state = it.state();
    drop(it);
    let again = Loader::open(cfg.clone()).unwrap();
    assert_eq!(packed_epoch(&again, Some(&state)), all[5..], "resume continues with the same packed batches");
    // Two ranks: disjoint rows, every packed row equal to the reference.
    let mut seen = Vec::new();
    for rank in 0..2 {
        let l = Loader::open(cfg.clone().with_rank(rank, 2)).unwrap();
        for b in l.epoch(0).unwrap() {
            let b = b.unwrap();
            assert_eq!(check(&ds, &b), 2);
            seen.extend(common::ids(&b));
        }
    }
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, (0..50).collect::<Vec<i64>>());
}

#[test]
fn packed_output_skips_bad_samples_and_stays_in_budget() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let ds = common::dataset(root, 80, false, &common::small_files());
    // Corrupt the first page of `tok` in fragment 1.
    let info = &ds.fragments()[1];
    let file = &info.fragment.files[0];
    let df = ds.data_file(&info.fragment, file).unwrap();
    let page = df.chunk(ds.schema().column("tok").unwrap().id).unwrap().pages.iter().find(|p| p.block.stored_len > 4);
    let block = page.unwrap().block;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(format!("{root}/{}", file.path)).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, block.offset + 3).unwrap();
    f.write_all_at(&[b[0] ^ 0x5A], block.offset + 3).unwrap();
    let budget = 8 << 20;
    let cfg = LoaderConfig { ragged: RaggedOptions::packed(), skip_bad_samples: true, ..common::config(root) }
        .with_batch_size(5)
        .with_memory_budget(budget);
    let loader = Loader::open(cfg).unwrap();
    let mut rows = 0;
    for b in loader.epoch(0).unwrap() {
        let b = b.unwrap();
        assert_eq!(check(&ds, &b), 5);
        rows += b.len();
    }
    assert_eq!(rows, 80);
    assert!(!loader.skipped().is_empty(), "the corrupt page's rows were skipped");
    let high = loader.memory_stats().high_water;
    assert!(high <= budget, "accounted high-water {high} over the {budget}-byte budget");
}
