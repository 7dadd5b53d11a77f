//! Deterministic datasets written through the reference writer, and what the loader tests of
//! both the core (`loader/tests`) and the tch adapter (`loader-tch/tests`, through `#[path]`)
//! share about them.
#![allow(dead_code, unreachable_pub, missing_docs)]

use tessera::{Batch as Rows, Column, ColumnData, Compression, DType, Dataset, Dim, WriteOptions};
use tessera_loader::{LoaderConfig, MemoryStats};

/// Small files and pages, so a few hundred rows span many fragments and pages.
pub fn small_files() -> WriteOptions {
    WriteOptions { target_file_bytes: 2 << 10, page_bytes: 300, ..WriteOptions::default() }
}

/// The full schema: every layout the loader handles.
pub fn schema(compressed: bool) -> tessera::Schema {
    let c = |x: Compression| if compressed { x } else { Compression::None };
    tessera::Schema::new([
        Column::new("id", DType::I64, &[]),
        Column::new("img", DType::U8, &[Dim::Fixed(4), Dim::Fixed(4), Dim::Fixed(3)])
            .with_compression(c(Compression::Lz4)),
        Column::new("tok", DType::I32, &[Dim::Ragged]).with_compression(c(Compression::Zstd { level: 3 })),
        Column::new("txt", DType::Utf8, &[]).nullable().with_compression(c(Compression::Lz4)),
        Column::new("boxes", DType::F32, &[Dim::Ragged, Dim::Fixed(4)]),
        Column::new("pair", DType::U16, &[Dim::Fixed(2)]),
        Column::new("flag", DType::Bool, &[]),
        Column::new("blob", DType::Bytes, &[]).with_compression(c(Compression::Zstd { level: 1 })),
        Column::new("grid", DType::U8, &[Dim::Fixed(2), Dim::Ragged]),
        // 400-byte rows: one row per 300-byte page (the single-row page path).
        Column::new("big", DType::F32, &[Dim::Fixed(100)]).with_compression(c(Compression::Lz4)),
    ])
    .unwrap()
}

/// Rows `start..start+n` of the full schema; every value is a function of the row id.
pub fn rows(start: usize, n: usize) -> Rows {
    let ids: Vec<i64> = (start..start + n).map(|i| i as i64).collect();
    let img: Vec<u8> = ids.iter().flat_map(|&i| (0..48).map(move |k| (i * 7 + k) as u8)).collect();
    let toks: Vec<Vec<i32>> = ids.iter().map(|&i| (0..i % 7).map(|k| (i * 10 + k) as i32).collect()).collect();
    let tok_refs: Vec<&[i32]> = toks.iter().map(Vec::as_slice).collect();
    let mut txt = ColumnData::empty(DType::Utf8, &[], true);
    for &i in &ids {
        if i % 5 == 3 {
            txt.push_null().unwrap();
        } else {
            let s = format!("row {i}{}", "é".repeat((i % 4) as usize));
            txt.push_row(&[s.len() as u64], s.as_bytes()).unwrap();
        }
    }
    let mut boxes = ColumnData::empty(DType::F32, &[Dim::Ragged, Dim::Fixed(4)], false);
    for &i in &ids {
        let n = (i % 3) as u64;
        let v: Vec<u8> = (0..n * 4).flat_map(|k| (i as f32 + k as f32 / 8.0).to_le_bytes()).collect();
        boxes.push_row(&[n, 4], &v).unwrap();
    }
    let pair: Vec<u16> = ids.iter().flat_map(|&i| [(i % 65536) as u16, 65535 - (i % 1000) as u16]).collect();
    let flag: Vec<u8> = ids.iter().map(|&i| (i % 2) as u8).collect();
    let mut flags = ColumnData::empty(DType::Bool, &[], false);
    for f in flag {
        flags.push_row(&[], &[f]).unwrap();
    }
    let blobs: Vec<Vec<u8>> = ids.iter().map(|&i| (0..i % 5).map(|k| (i + k) as u8).collect()).collect();
    let mut grid = ColumnData::empty(DType::U8, &[Dim::Fixed(2), Dim::Ragged], false);
    for &i in &ids {
        let w = (i % 3) as u64;
        let v: Vec<u8> = (0..2 * w).map(|k| (i as u64 + k) as u8).collect();
        grid.push_row(&[2, w], &v).unwrap();
    }
    let big: Vec<f32> = ids.iter().flat_map(|&i| (0..100).map(move |k| (i * 100 + k) as f32)).collect();
    Rows::new()
        .with("big", ColumnData::from_fixed(&[100], &big).unwrap())
        .unwrap()
        .with("id", ColumnData::from_scalars(&ids))
        .unwrap()
        .with("img", ColumnData::from_fixed(&[4, 4, 3], &img).unwrap())
        .unwrap()
        .with("tok", ColumnData::from_sequences(&tok_refs))
        .unwrap()
        .with("txt", txt)
        .unwrap()
        .with("boxes", boxes)
        .unwrap()
        .with("pair", ColumnData::from_fixed(&[2], &pair).unwrap())
        .unwrap()
        .with("flag", flags)
        .unwrap()
        .with("blob", ColumnData::from_byte_strings(&blobs))
        .unwrap()
        .with("grid", grid)
        .unwrap()
}

/// A dataset of `n` rows (appended in two commits) under `root`; returns the last version.
pub fn dataset(root: &str, n: usize, compressed: bool, opts: &WriteOptions) -> Dataset {
    let ds = Dataset::create(root, schema(compressed), opts).unwrap();
    let half = n / 2;
    let v = ds.append(&rows(0, half), "first half", opts.clone()).unwrap();
    v.append(&rows(half, n - half), "second half", opts.clone()).unwrap()
}

/// A dataset with only an `id` column (fast to write and read), `n` rows.
pub fn id_dataset(root: &str, n: usize, opts: &WriteOptions) -> Dataset {
    let schema = tessera::Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let ds = Dataset::create(root, schema, opts).unwrap();
    let ids: Vec<i64> = (0..n as i64).collect();
    let batch = Rows::new().with("id", ColumnData::from_scalars(&ids)).unwrap();
    ds.append(&batch, "ids", opts.clone()).unwrap()
}

pub fn config(root: &str) -> LoaderConfig {
    LoaderConfig::new(root).with_memory_budget(64 << 20)
}

/// Bytes of one `img` row of [`big_dataset`].
pub const BIG_ROW_BYTES: usize = 4096;

/// `rows` rows of an `id` and a 4 KiB `img` column, in data files of about `file_bytes` with
/// 64 KiB pages, for memory-budget tests; returns the bytes of its data files.
pub fn big_dataset(root: &str, rows: usize, file_bytes: u64) -> u64 {
    let opts = WriteOptions { target_file_bytes: file_bytes, page_bytes: 64 << 10, ..WriteOptions::default() };
    let schema = tessera::Schema::new([
        Column::new("id", DType::I64, &[]),
        Column::new("img", DType::U8, &[Dim::Fixed(32), Dim::Fixed(32), Dim::Fixed(4)]),
    ])
    .unwrap();
    let ds = Dataset::create(root, schema, &opts).unwrap();
    let mut w = ds.writer(opts);
    for start in (0..rows).step_by(1000) {
        let n = 1000.min(rows - start);
        let ids: Vec<i64> = (start..start + n).map(|i| i as i64).collect();
        let img: Vec<u8> = (0..n * BIG_ROW_BYTES).map(|k| (k * 31 + start) as u8).collect();
        let b = Rows::new()
            .with("id", ColumnData::from_scalars(&ids))
            .unwrap()
            .with("img", ColumnData::from_fixed(&[32, 32, 4], &img).unwrap())
            .unwrap();
        w.append(&b).unwrap();
    }
    let ds = w.commit("big").unwrap();
    ds.fragments().iter().flat_map(|f| f.fragment.files.iter().map(|x| x.size)).sum()
}

/// What may stay counted after an epoch: the file indexes the catalog keeps, the window's
/// idle extents, the cached pages and the idle batch and staging buffers, kept for the next
/// epoch, each within its share.
pub fn assert_only_kept_memory_stays(m: &MemoryStats) {
    let kept = m.by_use[3].current + m.window.held_bytes + m.cached_pages + m.idle_buffers + m.staging_buffers;
    assert_eq!(m.current, kept, "only kept indexes, extents, pages and idle buffers stay");
    assert_eq!((m.by_use[2].current, m.by_use[1].current), (m.window.held_bytes, m.cached_pages + m.staging_buffers));
    assert!(m.window.held_bytes <= m.by_use[2].share && m.cached_pages + m.staging_buffers <= m.by_use[1].share);
    assert_eq!(m.by_use[0].current, m.idle_buffers, "no buffer is out after the epoch");
    assert!(m.idle_buffers <= m.by_use[0].share);
}
