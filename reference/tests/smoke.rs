//! End-to-end smoke test: create, append, read, tag, branch, time travel, verify, dump.

use tessera::*;

#[test]
fn create_append_read_tag_branch() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().to_str().unwrap();
    let schema = Schema::new([
        Column::new("img", DType::U8, &[Dim::Fixed(2), Dim::Fixed(2), Dim::Fixed(3)])
            .with_kind(Kind::Image { layout: ImageLayout::Hwc }),
        Column::new("label", DType::I64, &[]).with_kind(Kind::ClassLabel { names: vec!["a".into(), "b".into()] }),
        Column::new("tok", DType::I32, &[Dim::Ragged]).with_compression(Compression::Zstd { level: 3 }),
        Column::new("txt", DType::Utf8, &[]).with_compression(Compression::Lz4).nullable(),
    ])
    .unwrap();
    let ds = Dataset::create(loc, schema, &WriteOptions::default()).unwrap();
    let n = 10usize;
    let img: Vec<u8> = (0..n * 12).map(|i| i as u8).collect();
    let toks: Vec<Vec<i32>> = (0..n).map(|i| (0..i as i32).collect()).collect();
    let tok_refs: Vec<&[i32]> = toks.iter().map(Vec::as_slice).collect();
    let mut txt = ColumnData::empty(DType::Utf8, &[], true);
    for i in 0..n {
        if i % 3 == 0 { txt.push_null().unwrap() } else { txt.push_row(&[5], format!("row{i:02}").as_bytes()).unwrap() }
    }
    let batch = Batch::new()
        .with("img", ColumnData::from_fixed(&[2, 2, 3], &img).unwrap())
        .unwrap()
        .with("label", ColumnData::from_scalars(&(0..n as i64).map(|i| i % 2).collect::<Vec<_>>()))
        .unwrap()
        .with("tok", ColumnData::from_sequences(&tok_refs))
        .unwrap()
        .with("txt", txt)
        .unwrap();
    let opts = WriteOptions { target_file_bytes: 40, page_bytes: 30, ..WriteOptions::default() };
    let v2 = ds.append(&batch, "first", opts.clone()).unwrap();
    assert_eq!(v2.version(), 2);
    assert_eq!(v2.row_count(), 10);
    assert!(v2.fragments().len() > 1);
    let back = Dataset::open(loc).unwrap();
    let all = back.read_rows(0..10, None).unwrap();
    assert_eq!(all.get("img").unwrap().values(), &img[..]);
    assert_eq!(all.get("tok").unwrap().row_shape(7), vec![7]);
    assert!(!all.get("txt").unwrap().is_valid(3));
    assert_eq!(all.get("txt").unwrap().str_row(4), Some("row04"));
    let part = back.read_rows(3..8, Some(&["tok"])).unwrap();
    assert_eq!(part.get("tok").unwrap().to_vec::<i32>().unwrap().len(), 3 + 4 + 5 + 6 + 7);
    let report = back.verify().unwrap();
    assert_eq!(report.rows, 10);
    back.create_tag("v-one", "first", &opts).unwrap();
    assert_eq!(back.create_tag("v-one", "again", &opts).unwrap_err().class(), ErrorClass::Conflict);
    let dev = back.create_branch("dev", &opts).unwrap();
    let dev3 = dev.append(&batch, "dev append", opts.clone()).unwrap();
    assert_eq!((dev3.branch(), dev3.version(), dev3.row_count()), ("dev", 3, 20));
    let main = Dataset::open(loc).unwrap();
    assert_eq!(main.row_count(), 10);
    let old = main.checkout(&At::BranchVersion("dev".into(), 1)).unwrap();
    assert_eq!(old.row_count(), 0);
    let tagged = Dataset::open_tag(main.store(), "v-one", Limits::default()).unwrap();
    assert_eq!(tagged.version(), 2);
    let d = tessera::dump::dump(&tagged).unwrap();
    assert_eq!(d["row_count"], 10);
    assert_eq!(dev3.log().unwrap().len(), 3);
}
