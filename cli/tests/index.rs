//! `tessera index create|ls|verify|rm|dedup`, and `tessera query --exact/--nprobe`.

mod common;

use common::*;
use tessera::{Batch, Column, ColumnData, DType, Dataset, Dim, Schema, WriteOptions};

/// 600 rows of 4-d vectors around 6 centres; every 50th row repeats the row before it.
fn dataset(dir: &std::path::Path) -> std::path::PathBuf {
    let root = dir.join("ds");
    let schema =
        Schema::new([Column::new("emb", DType::F32, &[Dim::Fixed(4)]), Column::new("id", DType::I64, &[])]).unwrap();
    let mut v: Vec<f32> = Vec::new();
    for r in 0..600u32 {
        if r % 50 == 49 {
            let prev: Vec<f32> = v[v.len() - 4..].to_vec();
            v.extend(prev);
            continue;
        }
        let c = (r % 6) as f32;
        v.extend([c, 10.0 - c, r as f32 * 0.01, (r % 11) as f32 * 0.05]);
    }
    let ids: Vec<i64> = (0..600).collect();
    let batch = Batch::new()
        .with("emb", ColumnData::from_fixed(&[4], &v).unwrap())
        .unwrap()
        .with("id", ColumnData::from_scalars(&ids))
        .unwrap();
    Dataset::create(s(&root), schema, &WriteOptions::default())
        .unwrap()
        .append(&batch, "rows", WriteOptions::default())
        .unwrap();
    root
}

#[test]
fn create_query_verify_dedup_rm() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path());
    let built = json(&["index", "create", s(&ds), "emb-cos", "--column", "emb", "--lists", "8"]);
    assert_eq!(
        (built["lists"].as_u64(), built["rows"].as_u64(), built["metric"].as_str()),
        (Some(8), Some(600), Some("cosine"))
    );
    assert!(
        ok(&["index", "create", s(&ds), "emb-l2", "--column", "emb", "--metric", "l2"])
            .starts_with("built index emb-l2  main@2  emb (l2)")
    );
    let ls = json(&["index", "ls", s(&ds)]);
    assert_eq!(
        ls.as_array().unwrap().iter().map(|i| i["index"].as_str().unwrap()).collect::<Vec<_>>(),
        ["emb-cos", "emb-l2"]
    );
    assert!(ok(&["index", "verify", s(&ds), "emb-cos"]).starts_with("ok: index emb-cos: 8 lists, 600 rows"));

    // Every list probed: the exact answer; --exact never uses the index.
    let sql = "SELECT _rowid, id FROM ds ORDER BY cosine_distance(emb, [3, 7, 0.2, 0.1]) LIMIT 5";
    let exact = json(&["query", s(&ds), sql, "--exact"]);
    assert_eq!(json(&["query", s(&ds), sql, "--nprobe", "8"]), exact);
    assert_eq!(json(&["query", s(&ds), sql]).as_object().unwrap()["rows"].as_array().unwrap().len(), 5);
    assert_eq!(fails(&["query", s(&ds), sql, "--exact", "--nprobe", "2"]).0, 2);

    // Near-duplicates into a view: rows 49, 99, ... repeat the row before them.
    let dedup =
        json(&["index", "dedup", s(&ds), "emb-cos", "--threshold", "1e-9", "--probe", "8", "--save-view", "unique"]);
    assert_eq!((dedup["dropped"].as_u64(), dedup["rows"].as_u64()), (Some(12), Some(588)), "{dedup}");
    let view = json(&["view", "show", s(&ds), "unique"]);
    assert!(view["query"].as_str().unwrap().starts_with("near-duplicates dropped: index emb-cos"));

    // Damage is a data fault (exit 1) for the index's users; --exact still answers.
    let record = json(&["index", "ls", s(&ds)])[0]["index"].as_str().unwrap().to_string();
    assert_eq!(record, "emb-cos");
    let lists = std::fs::read_dir(ds.join("ann/lists")).unwrap().map(|e| e.unwrap().path()).collect::<Vec<_>>();
    for p in &lists {
        let mut b = std::fs::read(p).unwrap();
        let mid = b.len() / 2;
        b[mid] ^= 0x20;
        std::fs::write(p, b).unwrap();
    }
    let (code, _, err) = fails(&["index", "verify", s(&ds), "emb-cos"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("CRC-32"), "{err}");
    assert_eq!(fails(&["query", s(&ds), sql, "--nprobe", "8"]).0, 1);
    assert_eq!(json(&["query", s(&ds), sql, "--exact"]), exact);

    assert_eq!(ok(&["index", "rm", s(&ds), "emb-cos"]).trim(), "deleted index emb-cos");
    assert_eq!(fails(&["index", "rm", s(&ds), "emb-cos"]).0, 3);
    assert_eq!(fails(&["index", "create", s(&ds), "x", "--column", "id"]).0, 2);
    assert_eq!(fails(&["index", "create", s(&ds), "x", "--column", "emb", "--metric", "dot"]).0, 2);
    assert_eq!(json(&["info", s(&ds)])["rows"], 600, "no version changed");
}
