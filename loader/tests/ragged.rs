//! Packed (jagged) ragged output: every packed row equals the reference reader's row (bytes
//! and shape, between its offsets) with nothing but the rows in the values, for the common
//! dataset's layouts in every mode and for random ragged schemas with empty rows, nulls and
//! text; padded output of the same schemas still equals the reference; packed output works
//! with resume, sharding, skip-bad-sample and within the memory budget.

mod common;

use std::os::unix::fs::FileExt;

use tessera::{Batch as Rows, Column, ColumnData, Compression, DType, Dataset, Dim};
use tessera_loader::{Loader, LoaderConfig, LoaderState, RaggedLayout, RaggedOptions, ShuffleMode};

/// Rows and packed columns of one epoch, every batch checked against the reference rows.
fn drain(ds: &Dataset, cfg: LoaderConfig) -> (usize, usize) {
    let loader = Loader::open(cfg).unwrap();
    let (mut rows, mut packed) = (0, 0);
    for b in loader.epoch(1).unwrap() {
        let b = b.unwrap();
        packed += common::assert_reference_rows(ds, &b);
        rows += b.rows.len();
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

/// Per batch of an epoch (from `state` when given): the ids, the packed `tok` values' bytes
/// and their offsets.
fn packed_epoch(loader: &Loader, state: Option<&LoaderState>) -> Vec<(Vec<i64>, Vec<u8>, Vec<i64>)> {
    let it = match state {
        Some(s) => loader.resume(s).unwrap(),
        None => loader.epoch(0).unwrap(),
    };
    it.map(|b| {
        let b = b.unwrap();
        let c = b.columns.iter().position(|c| c.name == "tok").unwrap();
        let offsets = b.columns[c].layout.offsets().unwrap().to_vec();
        (common::ids(&b), common::bytes(&b, c), offsets)
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
            assert_eq!(common::assert_reference_rows(&ds, &b), 2);
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
        assert_eq!(common::assert_reference_rows(&ds, &b), 5);
        rows += b.rows.len();
    }
    assert_eq!(rows, 80);
    assert!(!loader.skipped().is_empty(), "the corrupt page's rows were skipped");
    let high = loader.memory_stats().high_water;
    assert!(high <= budget, "accounted high-water {high} over the {budget}-byte budget");
}
