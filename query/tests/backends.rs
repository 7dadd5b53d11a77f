//! SQL over a dataset on every storage backend: local files, memory, and the S3 and Azure
//! test servers (`scripts/servers.sh`; in CI a missing server fails the test, elsewhere it is
//! skipped with a notice), through the blocking calls (the engine's own runtime) and through
//! `sql_async` on the caller's runtime, exact and vector top-k scans both.

use tessera::{Batch, Column, ColumnData, DType, Dataset, Dim, Schema, WriteOptions};
use tessera_query::QueryEngine;
use tessera_testkit::{Backend, TestRoot};

const QUERIES: [(&str, &[u64]); 2] = [
    ("SELECT _rowid FROM ds WHERE y >= 57 AND y < 60 ORDER BY _rowid", &[57, 58, 59]),
    ("SELECT _rowid FROM ds ORDER BY l2_distance(v, [10, 20]) LIMIT 3", &[10, 9, 11]),
];

fn queries_on(backend: Backend) {
    let Some(root) = TestRoot::new(backend, "query-backend") else { return };
    let schema =
        Schema::new([Column::new("y", DType::I64, &[]), Column::new("v", DType::F32, &[Dim::Fixed(2)])]).unwrap();
    let mut ds = Dataset::create(&root.url, schema, &WriteOptions::default()).unwrap();
    for part in 0..3i64 {
        let y: Vec<i64> = (part * 30..(part + 1) * 30).collect();
        let v: Vec<f32> = y.iter().flat_map(|&y| [y as f32, 2.0 * y as f32 + 0.1 * (y % 2) as f32]).collect();
        let batch = Batch::new()
            .with("y", ColumnData::from_scalars(&y))
            .unwrap()
            .with("v", ColumnData::from_fixed(&[2], &v).unwrap())
            .unwrap();
        ds = ds.append(&batch, "rows", WriteOptions::default()).unwrap();
    }
    let engine = QueryEngine::new(Dataset::open(&root.url).unwrap()).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    for (sql, want) in QUERIES {
        let blocking = engine.sql(sql).unwrap_or_else(|e| panic!("{backend:?} {sql}: {e}"));
        assert_eq!(blocking.row_ids().unwrap(), want, "{backend:?}, blocking: {sql}");
        let awaited = rt.block_on(engine.sql_async(sql)).unwrap_or_else(|e| panic!("{backend:?} {sql}: {e}"));
        assert_eq!(awaited.row_ids().unwrap(), want, "{backend:?}, async: {sql}");
    }
}

#[test]
fn local() {
    queries_on(Backend::Local);
}

#[test]
fn memory() {
    queries_on(Backend::Memory);
}

#[test]
fn s3() {
    queries_on(Backend::S3);
}

#[test]
fn azure() {
    queries_on(Backend::Azure);
}
