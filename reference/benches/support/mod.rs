//! Set-up shared by the `metadata` and `commit` benchmarks: a small training-style schema,
//! batches of it, and datasets with many fragments or a long history in a `memory://` store
//! (no fsync, so the figures are the format's cost, not the disk's).

use tessera::{Batch, Column, ColumnData, DType, Dataset, Dim, Kind, Schema, WriteOptions};

/// Rows in each fragment the set-ups write.
pub(crate) const ROWS_PER_FRAGMENT: u64 = 32;
/// Tokens per row of the `tokens` column.
const TOKENS: usize = 4;

/// Raw bytes of one row: `label` (i64), `score` (f32) and `tokens` (4 × i32).
const ROW_BYTES: u64 = 8 + 4 + 4 * TOKENS as u64;

/// A label, a score and a ragged token column: three columns with statistics.
pub(crate) fn schema() -> Schema {
    Schema::new([
        Column::new("label", DType::I64, &[])
            .with_kind(Kind::ClassLabel { names: (0..10).map(|i| format!("class-{i}")).collect() }),
        Column::new("score", DType::F32, &[]),
        Column::new("tokens", DType::I32, &[Dim::Ragged]),
    ])
    .expect("bench schema is valid")
}

/// `fragments × ROWS_PER_FRAGMENT` rows starting at row `first`.
pub(crate) fn rows(first: u64, fragments: u64) -> Batch {
    let n = fragments * ROWS_PER_FRAGMENT;
    let labels: Vec<i64> = (first..first + n).map(|r| (r % 10) as i64).collect();
    let scores: Vec<f32> = (first..first + n).map(|r| (r % 1000) as f32 / 1000.0).collect();
    let tokens: Vec<[i32; TOKENS]> = (first..first + n).map(|r| [r as i32, 1, 2, 3]).collect();
    let token_rows: Vec<&[i32]> = tokens.iter().map(<[i32; TOKENS]>::as_slice).collect();
    Batch::new()
        .with("label", ColumnData::from_scalars(&labels))
        .and_then(|b| b.with("score", ColumnData::from_scalars(&scores)))
        .and_then(|b| b.with("tokens", ColumnData::from_sequences(&token_rows)))
        .expect("bench batch fits the schema")
}

/// Write options that cut every `ROWS_PER_FRAGMENT` rows into a fragment of their own.
pub(crate) fn options() -> WriteOptions {
    WriteOptions { target_file_bytes: ROWS_PER_FRAGMENT * ROW_BYTES, ..WriteOptions::default() }
}

/// A new dataset at `url` (a `memory://` URL unique to the caller).
pub(crate) fn create(url: &str) -> Dataset {
    Dataset::create(url, schema(), &options()).expect("bench dataset is created")
}

/// A dataset at `url` whose `main` has `versions` versions: the creation, then one append
/// commit of one fragment per version.
pub(crate) fn history(url: &str, versions: u64) -> Dataset {
    let mut ds = create(url);
    for v in 1..versions {
        ds = ds.append(&rows((v - 1) * ROWS_PER_FRAGMENT, 1), "one fragment", options()).expect("set-up commit");
    }
    assert_eq!(ds.version(), versions);
    ds
}
