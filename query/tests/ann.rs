//! `ORDER BY <distance> LIMIT k` with a vector index of the version: when the index is used,
//! what it probes, and what a damaged index does. (That a full probe answers exactly what the
//! full sort answers is a property in `topk.rs`.)

use tessera::ann::{IndexSpec, VectorIndex};
use tessera::distance::Distance;
use tessera::{Batch, Column, ColumnData, DType, Dataset, Dim, ErrorClass, Schema, WriteOptions};
use tessera_query::{QueryEngine, ScanOptions};
use tessera_testkit::XorShift;

const DIM: u64 = 8;

/// 2,000 rows around 20 centres, in 4 fragments; `cat` is the row's centre.
fn dataset(dir: &std::path::Path) -> Dataset {
    let schema =
        Schema::new([Column::new("cat", DType::I32, &[]), Column::new("v", DType::F32, &[Dim::Fixed(DIM)])]).unwrap();
    let mut ds = Dataset::create(dir.to_str().unwrap(), schema, &WriteOptions::default()).unwrap();
    let mut rng = XorShift::new(7);
    let centres: Vec<f32> = (0..20 * DIM).map(|_| rng.below(1000) as f32 / 100.0).collect();
    for _ in 0..4 {
        let cat: Vec<i32> = (0..500).map(|_| rng.below(20) as i32).collect();
        let v: Vec<f32> = cat
            .iter()
            .flat_map(|&c| {
                (0..DIM as usize)
                    .map(|j| centres[c as usize * DIM as usize + j] + rng.below(100) as f32 / 200.0)
                    .collect::<Vec<_>>()
            })
            .collect();
        let batch = Batch::new()
            .with("cat", ColumnData::from_scalars(&cat))
            .unwrap()
            .with("v", ColumnData::from_fixed(&[DIM], &v).unwrap())
            .unwrap();
        ds = ds.append(&batch, "rows", WriteOptions::default()).unwrap();
    }
    ds
}

const TOP: &str = "SELECT _rowid FROM ds ORDER BY l2_distance(v, [1, 2, 3, 4, 5, 6, 7, 8]) LIMIT 10";

fn rows(q: &QueryEngine, sql: &str) -> Vec<u64> {
    q.row_ids(sql).unwrap()
}

#[test]
fn the_index_answers_unfiltered_nearest_first_queries_only() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path());
    let exact =
        QueryEngine::with_options(ds.clone(), ScanOptions { vector_index: false, ..ScanOptions::default() }).unwrap();
    let want = rows(&exact, TOP);
    let index: VectorIndex = ds
        .create_vector_index(
            &IndexSpec { lists: Some(40), ..IndexSpec::new("v-l2", "v", Distance::L2) },
            &WriteOptions::default(),
        )
        .unwrap();
    assert_eq!(index.default_nprobe(), 8);

    let q = QueryEngine::new(ds.clone()).unwrap();
    let got = rows(&q, TOP);
    let s = q.scan_stats();
    assert_eq!((s.index_searches, s.index_lists, s.vector_pages), (1, 8, 0));
    assert!(s.index_entries < 2000 / 2, "{s:?}");
    // Clustered data: the nearest lists hold the exact answer.
    assert_eq!(got, want);

    // Not for a filter, another metric, a descending order, or with the index turned off.
    for sql in [
        "SELECT _rowid FROM ds WHERE cat > 3 ORDER BY l2_distance(v, [1, 2, 3, 4, 5, 6, 7, 8]) LIMIT 10",
        "SELECT _rowid FROM ds ORDER BY cosine_distance(v, [1, 2, 3, 4, 5, 6, 7, 8]) LIMIT 10",
        "SELECT _rowid FROM ds ORDER BY l2_distance(v, [1, 2, 3, 4, 5, 6, 7, 8]) DESC LIMIT 10",
    ] {
        let q = QueryEngine::new(ds.clone()).unwrap();
        assert_eq!(rows(&q, sql), rows(&exact, sql), "{sql}");
        assert_eq!(q.scan_stats().index_searches, 0, "{sql}");
    }
    assert_eq!(exact.scan_stats().index_searches, 0);

    // More rows than the probed lists hold: the exact scan answers.
    let q = QueryEngine::new(ds.clone()).unwrap();
    let many = TOP.replace("LIMIT 10", "LIMIT 1999");
    assert_eq!(rows(&q, &many), rows(&exact, &many));

    // A later version has no index.
    let one = Batch::new()
        .with("cat", ColumnData::from_scalars(&[0i32]))
        .unwrap()
        .with("v", ColumnData::from_fixed(&[DIM], &[0f32; DIM as usize]).unwrap())
        .unwrap();
    let next = ds.append(&one, "one more", WriteOptions::default()).unwrap();
    let q = QueryEngine::new(next).unwrap();
    rows(&q, TOP);
    assert_eq!(q.scan_stats().index_searches, 0);
}

#[test]
fn a_damaged_index_fails_the_query_with_its_class() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path());
    let index = ds
        .create_vector_index(
            &IndexSpec { lists: Some(4), ..IndexSpec::new("v", "v", Distance::L2) },
            &WriteOptions::default(),
        )
        .unwrap();
    let path = dir.path().join(&index.data);
    let mut bytes = std::fs::read(&path).unwrap();
    for b in bytes.iter_mut().skip(9).step_by(997) {
        *b ^= 0x10;
    }
    std::fs::write(&path, bytes).unwrap();
    let e = QueryEngine::new(ds.clone()).unwrap().row_ids(TOP).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Malformed, "{e}");
    assert!(e.to_string().contains("list"), "{e}");
    // A reader that ignores the index is unaffected.
    let exact = QueryEngine::with_options(ds, ScanOptions { vector_index: false, ..ScanOptions::default() }).unwrap();
    assert_eq!(exact.row_ids(TOP).unwrap().len(), 10);
}

#[test]
fn a_vector_top_k_runs_as_tasks_of_the_callers_runtime_even_on_one_thread() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path());
    let exact =
        QueryEngine::with_options(ds.clone(), ScanOptions { vector_index: false, ..ScanOptions::default() }).unwrap();
    let want = rows(&exact, TOP);
    let index = ds
        .create_vector_index(
            &IndexSpec { lists: Some(40), ..IndexSpec::new("v-l2", "v", Distance::L2) },
            &WriteOptions::default(),
        )
        .unwrap();
    // One thread, no blocking pool in use: the exact scan's partitions, the index search and
    // its parts must all make progress as tasks of this runtime (a partition that blocked
    // this thread, or a blocking facade called inside it, would hang or fail).
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let indexed = QueryEngine::new(ds.clone()).unwrap();
    let got = rt.block_on(indexed.sql_async(TOP)).unwrap();
    assert_eq!(got.row_ids().unwrap(), want);
    assert_eq!(indexed.scan_stats().index_searches, 1);
    let scanned = rt.block_on(exact.sql_async(TOP)).unwrap();
    assert_eq!(scanned.row_ids().unwrap(), want);

    // The reference's search as a task equals its blocking facade, which refuses inside a
    // runtime.
    let index = std::sync::Arc::new(index);
    let q = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
    let blocking = index.search(ds.store(), &q, 10, 40).unwrap();
    let (ix, store) = (index.clone(), ds.store().clone());
    let multi = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let spawned =
        multi.block_on(multi.spawn(async move { ix.search_async(&store, &q, 10, 40).await })).unwrap().unwrap();
    assert_eq!(spawned, blocking);
    assert_eq!(blocking.0.iter().map(|h| h.row).collect::<Vec<_>>(), want, "every list probed: the exact answer");
    let inside = multi.block_on(async { index.search(ds.store(), &q, 10, 40) });
    assert_eq!(inside.unwrap_err().class(), ErrorClass::Usage);
}
