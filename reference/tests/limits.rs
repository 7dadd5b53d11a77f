//! Configurable reader limits are enforced where the data is read: rows per file, pages per
//! chunk, bytes per row, footer, tag; a value within the limit reads as before.

use tessera::{At, Batch, Column, ColumnData, DType, Dataset, Dim, ErrorClass, Limits, Schema, Store, WriteOptions};

fn dataset(loc: &str) -> Store {
    let schema =
        Schema::new([Column::new("id", DType::I64, &[]), Column::new("tok", DType::I32, &[Dim::Ragged])]).unwrap();
    let ids: Vec<i64> = (0..40).collect();
    let toks: Vec<Vec<i32>> = (0..40).map(|i| (0..i).collect()).collect();
    let refs: Vec<&[i32]> = toks.iter().map(Vec::as_slice).collect();
    let batch = Batch::new()
        .with("id", ColumnData::from_scalars(&ids))
        .unwrap()
        .with("tok", ColumnData::from_sequences(&refs))
        .unwrap();
    let opts = WriteOptions { page_bytes: 256, ..WriteOptions::default() };
    let ds = Dataset::create(loc, schema, &opts).unwrap();
    let ds = ds.append(&batch, "rows", opts.clone()).unwrap();
    ds.create_tag("t", "a tag", &opts).unwrap();
    Store::open(loc).unwrap()
}

fn read_all(store: &Store, limits: Limits) -> Result<(), tessera::Error> {
    let ds = Dataset::open_at(store, &At::Latest, limits)?;
    ds.read_rows(0..ds.row_count(), None)?;
    Ok(())
}

#[test]
fn each_configured_limit_is_enforced_and_the_defaults_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = dataset(dir.path().to_str().unwrap());
    read_all(&store, Limits::default()).unwrap();
    let cases = [
        ("rows per file", Limits::default().with_max_file_rows(39)),
        ("pages per chunk", Limits::default().with_max_pages(1)),
        ("bytes per row", Limits::default().with_max_row_bytes(4 * 38)),
        ("footer", Limits::default().with_max_footer(16)),
    ];
    for (what, limits) in cases {
        let err = read_all(&store, limits).expect_err(what);
        assert_eq!(err.class(), ErrorClass::Limit, "{what}: {err}");
    }
    // Exactly at the limit is allowed.
    read_all(&store, Limits::default().with_max_file_rows(40).with_max_row_bytes(4 * 39)).unwrap();
    let err = Dataset::open_at(&store, &At::Tag("t".into()), Limits::default().with_max_tag_body(8)).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Limit, "tag: {err}");
    Dataset::open_at(&store, &At::Tag("t".into()), Limits::default()).unwrap();
}
