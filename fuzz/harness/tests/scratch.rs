use tessera::envelope::{self, ObjectKind};
use tessera::manifest::*;
use tessera::*;
use tessera_fuzz_harness::*;

fn seed(target: &str, pred: impl Fn(&[u8]) -> bool) -> Vec<u8> {
    let mut v: Vec<_> = std::fs::read_dir(format!("{}/../corpus/{target}", env!("CARGO_MANIFEST_DIR")))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v.into_iter().map(|p| std::fs::read(p).unwrap()).find(|d| pred(d)).unwrap()
}

#[test]
fn tfz1() {
    let mut m = seed("manifest", |_| true);
    // flags byte, then object: header 24, body: reader u64, writer u64, branch len u64
    let at = 1 + 24 + 16;
    m[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    m.truncate(1 + 24 + 24 + 4); // short body
    std::fs::write("/tmp/fz/tfz1.bin", &m).unwrap();
    eprintln!("tfz1 input {} bytes", m.len());
    manifest(&m);
    eprintln!("tfz1 survived");
}

#[test]
fn tfz2() {
    let col = Column::new("e", DType::U8, &[Dim::Fixed(0)]);
    let mut d = ColumnData::empty(DType::U8, &[Dim::Fixed(0)], false);
    d.push_row(&[0], &[]).unwrap();
    let f = tessera::datafile::DataFileWriter::default().encode(&[&col], &[&d]).unwrap();
    let mut footer = f.footer.clone();
    footer.row_count = 1 << 32;
    footer.columns[0].pages[0].row_count = 1 << 32;
    let body = envelope::encode_body(&footer).unwrap();
    let mut file = f.bytes.clone();
    let n = file.len();
    let flen = u64::from_le_bytes(file[n - 24..n - 16].try_into().unwrap()) as usize;
    assert_eq!(flen, body.len());
    file[n - 24 - flen..n - 24].copy_from_slice(&body);
    let input = encode_data_file_input(1, &[col], &file);
    std::fs::write("/tmp/fz/tfz2.bin", &input).unwrap();
    eprintln!("tfz2 input {} bytes", input.len());
    data_file(&input);
    eprintln!("tfz2 survived");
}

#[test]
fn log_cycle() {
    let data = seed("store_layout", |d| layout::decode(d).objects.len() == 16 && layout::at(d[0]) == At::Version(2));
    let mut l = layout::decode(&data);
    for (k, v) in &mut l.objects {
        if k.ends_with("00000000000000000002.tsm") && k.contains("main") {
            let mut m: Manifest = envelope::open(ObjectKind::Manifest, v, 1 << 20, "x").unwrap();
            m.parent = Some(VersionRef { branch: "main".into(), version: 2 });
            *v = envelope::seal(ObjectKind::Manifest, &m).unwrap();
        }
    }
    let input = layout::encode(&l);
    std::fs::write("/tmp/fz/log_cycle.bin", &input).unwrap();
    store_layout(&input);
    eprintln!("log_cycle survived");
}

#[test]
fn shared_file() {
    let store = known_bugs::memory_store();
    let schema = Schema::new([Column::new("a", DType::U8, &[]), Column::new("b", DType::I32, &[])]).unwrap();
    let o = WriteOptions { timestamp_ms: Some(1), writer_id: Some([1; 16]), ..WriteOptions::default() };
    let ds = Dataset::create_in(&store, schema.clone(), &o).unwrap();
    let batch = Batch::new()
        .with("a", ColumnData::from_scalars(&[1u8, 2]))
        .unwrap()
        .with("b", ColumnData::from_scalars(&[7i32, 8]))
        .unwrap();
    ds.append(&batch, "m", o.clone()).unwrap();
    let mut objs: Vec<(String, Vec<u8>)> = store
        .list_recursive("")
        .unwrap()
        .into_iter()
        .map(|(k, _)| {
            let b = store.get(&k).unwrap().to_vec();
            (k, b)
        })
        .collect();
    objs.sort();
    // A file whose column 1 is a u8 scalar chunk, not utf8.
    let mut bprime = Column::new("b", DType::U8, &[Dim::Fixed(4)]);
    bprime.id = 1;
    let a = schema.columns[0].clone();
    let f = tessera::datafile::DataFileWriter::default()
        .encode(
            &[&a, &bprime],
            &[
                &ColumnData::from_scalars(&[1u8, 2]),
                &ColumnData::from_fixed(&[4], &[1u8, 0, 0, 0, 2, 0, 0, 0]).unwrap(),
            ],
        )
        .unwrap();
    objs.push(("data/p.tsd".into(), f.bytes.clone()));
    for (k, v) in &mut objs {
        if k.ends_with(".tsi") {
            let mut seg: Segment = envelope::open(ObjectKind::Segment, v, 1 << 20, "x").unwrap();
            let fr = &mut seg.fragments[0];
            fr.files = vec![
                DataFileRef { path: "data/p.tsd".into(), size: 0, footer_crc32: 0, column_ids: vec![0] },
                DataFileRef { path: "data/p.tsd".into(), size: 0, footer_crc32: 0, column_ids: vec![1] },
            ];
            *v = envelope::seal(ObjectKind::Segment, &seg).unwrap();
        }
    }
    objs.retain(|(k, _)| !k.starts_with("data/") || k == "data/p.tsd");
    let input = layout::encode(&layout::Layout { flags: 1, objects: objs });
    std::fs::write("/tmp/fz/shared_file.bin", &input).unwrap();
    store_layout(&input);
    eprintln!("shared_file survived");
}
#[test]
fn shared_dbg() {
    let data = std::fs::read("/tmp/fz/shared_file.bin").unwrap();
    let mut l = layout::decode(&data);
    repair::layout(&mut l.objects);
    let store = known_bugs::memory_store();
    for (k, v) in &l.objects {
        eprintln!("{k} {}", v.len());
        store.put_if_absent(k, bytes::Bytes::from(v.clone())).unwrap();
    }
    let ds = Dataset::open_at(&store, &At::Latest, limits());
    match ds {
        Err(e) => eprintln!("open: {e}"),
        Ok(ds) => {
            eprintln!("read: {:?}", ds.read_rows(0..2, None).map(|b| b.get("b").unwrap().to_vec::<i32>()));
            eprintln!("verify: {:?}", ds.verify());
        }
    }
}
#[test]
fn find_tfz3() {
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for len in [8usize, 12, 16, 24, 32, 48, 64] {
        for _ in 0..300 {
            let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let r = std::panic::catch_unwind(|| run("roundtrip", &data));
            if let Err(p) = r {
                let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
                eprintln!("FOUND len {len}: {msg}");
                // shrink: drop bytes from the end / zero bytes while it still panics the same way
                let mut best = data.clone();
                for i in (0..best.len()).rev() {
                    let mut t = best.clone();
                    t.remove(i);
                    if std::panic::catch_unwind(|| run("roundtrip", &t)).is_err() {
                        best = t;
                    }
                }
                for i in 0..best.len() {
                    let mut t = best.clone();
                    t[i] = 0;
                    if std::panic::catch_unwind(|| run("roundtrip", &t)).is_err() {
                        best = t;
                    }
                }
                eprintln!("MIN {:?}", best);
                std::fs::write("/tmp/fz/tfz3.bin", &best).unwrap();
                let u = arbitrary::Unstructured::new(&best);
                eprintln!("{:#?}", <ArbitraryDataset as arbitrary::Arbitrary>::arbitrary_take_rest(u));
                return;
            }
        }
    }
    eprintln!("none found");
}
#[test]
fn min_log_cycle() {
    let data = seed("store_layout", |d| layout::decode(d).objects.len() == 1);
    let mut l = layout::decode(&data);
    let (_, v) = &mut l.objects[0];
    let mut m: Manifest = envelope::open(ObjectKind::Manifest, v, 1 << 20, "x").unwrap();
    m.parent = Some(VersionRef { branch: "main".into(), version: 1 });
    m.schema.columns.truncate(1);
    m.schema.metadata.clear();
    *v = envelope::seal(ObjectKind::Manifest, &m).unwrap();
    l.flags = 0;
    let input = layout::encode(&l);
    std::fs::write("/tmp/fz/log_cycle_min.bin", &input).unwrap();
    eprintln!("{} bytes", input.len());
    store_layout(&input);
    eprintln!("min_log_cycle survived");
}
#[test]
fn regress() {
    let t = std::env::var("T").unwrap();
    let f = std::env::var("F").unwrap();
    let data = std::fs::read(&f).unwrap();
    run(&t, &data);
    eprintln!("{t} {f} survived");
}
