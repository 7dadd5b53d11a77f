//! End-to-end queries on small datasets: values, pruning, late materialization, top-k ties,
//! errors. Bytes read are counted by a counting store under the dataset.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{Float64Type, Int64Type, UInt64Type};
use tessera::{At, Batch, Column, ColumnData, DType, Dataset, Dim, Kind, Limits, Metric, Schema, Store, WriteOptions};
use tessera_query::{QueryEngine, QueryError, ScanOptions};
use tessera_testkit::CountingStore;

const NAMES: [&str; 3] = ["cat", "dog", "owl"];
const ROWS_PER_FRAGMENT: i64 = 50;
const FRAGMENTS: i64 = 6;

fn schema() -> Schema {
    Schema::new([
        Column::new("ts", DType::I64, &[]),
        Column::new("label", DType::I64, &[]).with_kind(Kind::ClassLabel { names: NAMES.map(String::from).to_vec() }),
        Column::new("caption", DType::Utf8, &[]),
        Column::new("emb", DType::F32, &[Dim::Fixed(4)]).with_kind(Kind::Embedding { metric: Metric::Cosine }),
        Column::new("image", DType::U8, &[Dim::Fixed(16), Dim::Fixed(16), Dim::Fixed(3)]),
    ])
    .unwrap()
}

/// Row `i`: ts = i (sorted), label = i % 3, caption mentions snow every 7th row, a small
/// embedding with many ties, an image of 768 bytes.
fn batch(rows: std::ops::Range<i64>) -> Batch {
    let ts: Vec<i64> = rows.clone().collect();
    let label: Vec<i64> = rows.clone().map(|i| i % 3).collect();
    let caption: Vec<String> =
        rows.clone().map(|i| if i % 7 == 0 { format!("snow {i}") } else { format!("sun {i}") }).collect();
    let emb: Vec<f32> = rows.clone().flat_map(|i| [1.0, (i % 4) as f32, 0.0, 1.0]).collect();
    let n = (rows.end - rows.start) as usize;
    let image = vec![7u8; n * 16 * 16 * 3];
    Batch::new()
        .with("ts", ColumnData::from_scalars(&ts))
        .unwrap()
        .with("label", ColumnData::from_scalars(&label))
        .unwrap()
        .with("caption", ColumnData::from_strings(&caption))
        .unwrap()
        .with("emb", ColumnData::from_fixed(&[4], &emb).unwrap())
        .unwrap()
        .with("image", ColumnData::from_fixed(&[16, 16, 3], &image).unwrap())
        .unwrap()
}

struct Fixture {
    _dir: tempfile::TempDir,
    counter: Arc<CountingStore>,
    store: Store,
}

impl Fixture {
    /// Six fragments of 50 rows; the image column in its own files.
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let fs = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let counter = Arc::new(CountingStore::new(Arc::new(fs)));
        let store = Store::from_object_store(counter.clone(), "", true);
        let options = WriteOptions { column_groups: vec![vec!["image".into()]], ..WriteOptions::default() };
        let mut ds = Dataset::create_in(&store, schema(), &options).unwrap();
        for f in 0..FRAGMENTS {
            ds =
                ds.append(&batch(f * ROWS_PER_FRAGMENT..(f + 1) * ROWS_PER_FRAGMENT), "rows", options.clone()).unwrap();
        }
        Self { _dir: dir, counter, store }
    }

    fn engine(&self, options: ScanOptions) -> QueryEngine {
        let ds = Dataset::open_at(&self.store, &At::Latest, Limits::default()).unwrap();
        QueryEngine::with_options(ds, options).unwrap()
    }

    fn bytes_read(&self) -> u64 {
        self.counter.counts.get_bytes.load(Ordering::Relaxed)
    }
}

fn u64s(batches: &[RecordBatch], col: usize) -> Vec<u64> {
    batches.iter().flat_map(|b| b.column(col).as_primitive::<UInt64Type>().values().to_vec()).collect()
}

#[test]
fn values_class_names_and_row_ids() {
    let fx = Fixture::new();
    let q = fx.engine(ScanOptions::default());
    let a = q
        .sql("SELECT _rowid, ts, label, label_name, caption, emb, image FROM ds WHERE ts IN (3, 149) ORDER BY ts")
        .unwrap();
    assert_eq!(a.num_rows(), 2);
    let b = &a.batches.concat_rows();
    assert_eq!(b.column(0).as_primitive::<UInt64Type>().values().to_vec(), vec![3, 149]);
    assert_eq!(b.column(2).as_primitive::<Int64Type>().values().to_vec(), vec![0, 2]);
    let names = b.column(3).as_string_view();
    assert_eq!((names.value(0), names.value(1)), ("cat", "owl"));
    assert_eq!(b.column(4).as_string_view().value(1), "sun 149");
    let emb = b.column(5).as_fixed_size_list();
    assert_eq!(emb.value_length(), 4);
    let first: Vec<f32> = emb.value(0).as_primitive::<datafusion::arrow::datatypes::Float32Type>().values().to_vec();
    assert_eq!(first, vec![1.0, 3.0, 0.0, 1.0]);
    assert_eq!(b.column(6).as_fixed_size_list().value_length(), 768);
}

trait Concat {
    fn concat_rows(&self) -> RecordBatch;
}

impl Concat for Vec<RecordBatch> {
    fn concat_rows(&self) -> RecordBatch {
        datafusion::arrow::compute::concat_batches(&self[0].schema(), self).unwrap()
    }
}

#[test]
fn a_range_filter_on_a_sorted_column_reads_one_fragment() {
    let fx = Fixture::new();
    let sql = "SELECT count(*) FROM ds WHERE ts >= 120 AND ts < 130";
    let q = fx.engine(ScanOptions::default());
    let before = fx.bytes_read();
    let a = q.sql(sql).unwrap();
    let pruned_bytes = fx.bytes_read() - before;
    assert_eq!(a.batches[0].column(0).as_primitive::<Int64Type>().value(0), 10);
    let stats = q.scan_stats();
    assert_eq!((stats.fragments, stats.pruned), (FRAGMENTS as u64, FRAGMENTS as u64 - 1));

    let q = fx.engine(ScanOptions { prune: false, ..ScanOptions::default() });
    let before = fx.bytes_read();
    let a = q.sql(sql).unwrap();
    let all_bytes = fx.bytes_read() - before;
    assert_eq!(a.batches[0].column(0).as_primitive::<Int64Type>().value(0), 10);
    assert_eq!(q.scan_stats().pruned, 0);
    assert!(pruned_bytes * 3 < all_bytes, "pruned read {pruned_bytes} bytes, unpruned {all_bytes}");
}

#[test]
fn a_filter_on_label_does_not_read_images_of_rows_that_fail_it() {
    let fx = Fixture::new();
    // No row matches: every fragment's filter columns are read, no image is.
    let sql = "SELECT image FROM ds WHERE label = 1 AND caption LIKE 'none%'";
    let lazy = fx.engine(ScanOptions { prune: false, ..ScanOptions::default() });
    let before = fx.bytes_read();
    assert_eq!(lazy.sql(sql).unwrap().num_rows(), 0);
    let lazy_bytes = fx.bytes_read() - before;
    assert_eq!(lazy.scan_stats().no_match, FRAGMENTS as u64);

    let eager = fx.engine(ScanOptions { prune: false, late_materialize: false, ..ScanOptions::default() });
    let before = fx.bytes_read();
    assert_eq!(eager.sql(sql).unwrap().num_rows(), 0);
    let eager_bytes = fx.bytes_read() - before;
    let image_bytes = (FRAGMENTS * ROWS_PER_FRAGMENT * 768) as u64;
    assert!(lazy_bytes < image_bytes / 4, "lazy scan read {lazy_bytes} bytes");
    assert!(eager_bytes > image_bytes, "eager scan read {eager_bytes} bytes");

    // Matching rows still come back whole.
    let a = lazy.sql("SELECT _rowid, image FROM ds WHERE caption = 'snow 147'").unwrap();
    assert_eq!(u64s(&a.batches, 0), vec![147]);
    assert_eq!(a.batches.concat_rows().column(1).as_fixed_size_list().value(0).len(), 768);
}

#[test]
fn deleted_rows_are_not_returned_and_row_ids_shift() {
    let fx = Fixture::new();
    let ds = Dataset::open_at(&fx.store, &At::Latest, Limits::default()).unwrap();
    let ds = ds.delete_rows(&[0, 1, 60], "drop three", &WriteOptions::default()).unwrap();
    let q = QueryEngine::new(ds).unwrap();
    let a = q.sql("SELECT _rowid, ts FROM ds WHERE ts < 3 OR ts BETWEEN 59 AND 61 ORDER BY _rowid").unwrap();
    let b = a.batches.concat_rows();
    assert_eq!(u64s(&a.batches, 0), vec![0, 57, 58]);
    assert_eq!(b.column(1).as_primitive::<Int64Type>().values().to_vec(), vec![2, 59, 61]);
}

#[test]
fn top_k_ties_come_out_in_row_order() {
    let fx = Fixture::new();
    let q = fx.engine(ScanOptions::default());
    // Embeddings repeat every 4 rows: each distance is shared by 75 rows.
    let a = q.sql("SELECT _rowid, cosine_distance(emb, [1, 3, 0, 1]) AS d FROM ds ORDER BY d LIMIT 5").unwrap();
    assert_eq!(u64s(&a.batches, 0), vec![3, 7, 11, 15, 19]);
    let d = a.batches.concat_rows();
    assert!(d.column(1).as_primitive::<Float64Type>().values().iter().all(|&x| x.abs() < 1e-3));
    // Descending similarity, ties still by row.
    let a =
        q.sql("SELECT _rowid FROM ds WHERE label = 2 ORDER BY inner_product(emb, [0, 1, 0, 0]) DESC LIMIT 3").unwrap();
    assert_eq!(u64s(&a.batches, 0), vec![11, 23, 35]);
    let a = q.sql("SELECT _rowid, l2_distance(emb, [1, 0, 0, 1]) AS d FROM ds ORDER BY d, ts DESC LIMIT 2").unwrap();
    assert_eq!(u64s(&a.batches, 0), vec![296, 292]);
}

#[test]
fn row_ids_for_views_follow_the_answer_order() {
    let fx = Fixture::new();
    let q = fx.engine(ScanOptions::default());
    let ids = q.row_ids("SELECT ts FROM ds WHERE caption LIKE 'snow%' ORDER BY ts DESC LIMIT 3").unwrap();
    assert_eq!(ids, vec![294, 287, 280]);
    assert!(matches!(q.row_ids("SELECT count(*) FROM ds"), Err(QueryError::Usage(_))));
    // As a view stores them (SPEC.md VIEW-12): an ordered answer stays a list; a range of rows
    // in row order becomes one run, whatever its length.
    let list = q.view_rows("SELECT ts FROM ds WHERE caption LIKE 'snow%' ORDER BY ts DESC LIMIT 3").unwrap();
    assert_eq!(list, tessera::ViewRows::List(vec![294, 287, 280]));
    let range = q.view_rows("SELECT _rowid FROM ds WHERE _rowid >= 10 AND _rowid < 250 ORDER BY _rowid").unwrap();
    let tessera::ViewRows::Runs(runs) = &range else { panic!("expected runs, got {range:?}") };
    assert_eq!(runs.runs(), &[tessera::Run { start: 10, len: 240 }]);
    assert!(matches!(q.view_rows("SELECT count(*) FROM ds"), Err(QueryError::Usage(_))));
}

/// `rows_where` (the CLI's `delete/update --where`): one SQL expression, nothing after it.
#[test]
fn a_predicate_selects_rows_and_nothing_but_an_expression_is_accepted() {
    let fx = Fixture::new();
    let q = fx.engine(ScanOptions::default());
    let snow: Vec<u64> = (0..300).filter(|i| i % 7 == 0).collect();
    assert_eq!(q.rows_where("caption LIKE 'snow%'").unwrap(), snow);
    assert_eq!(q.rows_where("label_name = 'dog' AND ts < 10").unwrap(), vec![1, 4, 7]);
    assert_eq!(q.rows_where("label == 2 and _rowid BETWEEN 290 AND 299").unwrap(), vec![290, 293, 296, 299]);
    assert_eq!(q.rows_where("label_name = 'zebra'").unwrap(), Vec::<u64>::new());
    for text in
        ["ts < 3 ORDER BY ts", "ts < 3; DROP TABLE ds", "ts < 3) OR (1 = 1", "true UNION SELECT _rowid FROM ds", ""]
    {
        let e = q.rows_where(text).unwrap_err();
        assert!(matches!(e, QueryError::Usage(_)), "{text:?}: {e:?}");
    }
    let e = q.rows_where("ts < 3 LIMIT 1").unwrap_err().to_string();
    assert!(e.contains("line 1, column 8: Expected: the end of the expression, found: LIMIT"), "{e}");
    let e = q.rows_where(r#"caption = "snow 7""#).unwrap_err().to_string();
    assert!(e.contains("unknown column \"snow 7\" (SQL writes text in 'single quotes'"), "{e}");
    assert!(e.contains("the columns are: ts, label"), "{e}");
    assert!(!e.contains("line 1"), "positions in the composed statement are left out: {e}");
}

#[test]
fn errors_point_at_the_position_and_list_columns() {
    let fx = Fixture::new();
    let q = fx.engine(ScanOptions::default());
    let e = q.sql("SELECT ts FROM ds WHERE").unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, QueryError::Usage(_)), "{e:?}");
    assert!(text.contains("line 1, column"), "{text}");
    assert!(text.contains("line 1, column 24"), "{text}");
    assert!(text.ends_with("\n  SELECT ts FROM ds WHERE\n                         ^"), "{text}");
    let e = q.sql("SELECT ts FROM ds WHERE ts >> 'x' LIMT 3").unwrap_err();
    assert!(e.to_string().contains("line 1, column 35: Expected: end of statement, found: LIMT\n"), "{e}");

    let e = q.sql("SELECT tss FROM ds").unwrap_err();
    assert_eq!(e.class(), tessera::ErrorClass::Usage);
    let text = e.to_string();
    assert!(text.contains("unknown column \"tss\""), "{text}");
    assert!(text.contains("ts, label, caption, emb, image, label_name, _rowid"), "{text}");

    // Values the query's own expressions cannot compute are its fault, not the engine's.
    for sql in ["SELECT ts FROM ds WHERE ts = 'x'", "SELECT ts FROM ds WHERE caption < 3", "SELECT ts / 0 FROM ds"] {
        let e = q.sql(sql).unwrap_err();
        assert_eq!(e.class(), tessera::ErrorClass::Usage, "{sql}: {e:?}");
    }

    let e = q.sql("SELECT cosine_distance(caption, [1, 2]) FROM ds").unwrap_err();
    assert!(e.to_string().contains("float vectors"), "{e}");
    let e = q.sql("SELECT cosine_distance(emb, [1, 2]) FROM ds").unwrap_err();
    assert!(e.to_string().contains("4 and 2 elements"), "{e}");
}

#[test]
fn statistics_never_prune_nan_or_negative_zero_rows() {
    let dir = tempfile::tempdir().unwrap();
    let schema = Schema::new([Column::new("y", DType::F32, &[])]).unwrap();
    let mut ds = Dataset::create(dir.path().to_str().unwrap(), schema, &WriteOptions::default()).unwrap();
    // Statistics skip NaN and see -0.0 as 0.0; Arrow orders NaN above all and -0.0 below 0.0.
    for values in [[1.0f32, f32::NAN], [0.0, -0.0], [5.0, 6.0]] {
        let batch = Batch::new().with("y", ColumnData::from_scalars(&values)).unwrap();
        ds = ds.append(&batch, "rows", WriteOptions::default()).unwrap();
    }
    let q = QueryEngine::new(ds).unwrap();
    let ids = |sql: &str| u64s(&q.sql(sql).unwrap().batches, 0);
    assert_eq!(ids("SELECT _rowid FROM ds WHERE y > 5.5 ORDER BY _rowid"), vec![1, 5]);
    assert_eq!(ids("SELECT _rowid FROM ds WHERE y < 0 ORDER BY _rowid"), vec![3]);
    assert_eq!(ids("SELECT _rowid FROM ds WHERE y > 10"), vec![1]);
    assert_eq!(ids("SELECT _rowid FROM ds WHERE y < -1"), Vec::<u64>::new());
    // The fragment of 5 and 6 is pruned by `y < -1`, and that one only.
    assert!(q.scan_stats().pruned >= 1);
}

#[test]
fn async_queries_run_on_the_callers_runtime_and_blocking_ones_refuse_inside_it() {
    let fx = Fixture::new();
    let q = Arc::new(fx.engine(ScanOptions::default()));
    let queries = [
        "SELECT _rowid, caption FROM ds WHERE caption LIKE '%snow%' AND ts > 40 ORDER BY ts",
        "SELECT _rowid, cosine_distance(emb, [1, 3, 0, 1]) AS d FROM ds ORDER BY d LIMIT 5",
        "SELECT label_name, count(*) FROM ds GROUP BY label_name ORDER BY label_name",
    ];
    let blocking: Vec<RecordBatch> = queries.iter().map(|s| q.sql(s).unwrap().batches.concat_rows()).collect();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    for (sql, want) in queries.iter().zip(&blocking) {
        // Spawned: the future is `Send`, and the scans run as tasks of this runtime.
        let (q, text) = (q.clone(), sql.to_string());
        let got = rt.block_on(rt.spawn(async move { q.sql_async(&text).await })).unwrap().unwrap();
        assert_eq!(&got.batches.concat_rows(), want, "{sql}");
    }
    // An async answer's row ids, where it selected them; a usage error where it did not.
    let ids =
        rt.block_on(q.sql_async("SELECT _rowid FROM ds WHERE ts > 40 ORDER BY _rowid")).unwrap().row_ids().unwrap();
    assert_eq!(ids, q.row_ids("SELECT _rowid FROM ds WHERE ts > 40 ORDER BY _rowid").unwrap());
    assert!(!ids.is_empty());
    let no_ids = rt.block_on(q.sql_async("SELECT ts FROM ds")).unwrap().row_ids();
    assert!(matches!(no_ids, Err(QueryError::Usage(ref m)) if m.contains("_rowid")), "{no_ids:?}");
    let inside = rt.block_on(async { q.sql(queries[0]) });
    assert!(matches!(inside, Err(QueryError::Usage(ref m)) if m.contains("sql_async")), "{inside:?}");
}

#[test]
fn blocking_queries_run_on_a_runtime_with_timers_and_io() {
    // A store that waits on tokio's timer for every GET (as a network store waits on its
    // sockets): the engine's own runtime must drive it. (Its runtime had neither driver, so
    // a blocking query of an S3, GCS, Azure or HTTP dataset panicked in the client.)
    use std::time::Duration;
    use tessera_testkit::{FaultConfig, FaultyStore, Latency};
    let memory: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let write = tessera::Store::from_object_store(memory.clone(), "", true);
    let schema = tessera::Schema::new([tessera::Column::new("y", tessera::DType::I64, &[])]).unwrap();
    let ids: Vec<i64> = (0..100).collect();
    let batch = Batch::new().with("y", ColumnData::from_scalars(&ids)).unwrap();
    tessera::Dataset::create_in(&write, schema, &WriteOptions::default())
        .unwrap()
        .append(&batch, "rows", WriteOptions::default())
        .unwrap();
    let latency = Latency::new(Duration::from_millis(1), Duration::ZERO);
    let slow = Arc::new(FaultyStore::new(memory, FaultConfig { get_latency: latency, ..FaultConfig::seeded(1) }));
    let store = tessera::Store::from_object_store(slow, "", true);
    let ds = tessera::Dataset::open_at(&store, &tessera::At::Latest, tessera::Limits::default()).unwrap();
    let q = QueryEngine::new(ds).unwrap();
    assert_eq!(u64s(&q.sql("SELECT _rowid FROM ds WHERE y >= 98 ORDER BY _rowid").unwrap().batches, 0), vec![98, 99]);
}

#[test]
fn engines_that_ran_blocking_queries_can_be_dropped_inside_a_runtime() {
    let fx = Fixture::new();
    let engines: Vec<QueryEngine> = (0..3).map(|_| fx.engine(ScanOptions::default())).collect();
    for q in &engines {
        assert_eq!(q.sql("SELECT count(*) FROM ds").unwrap().batches.concat_rows().num_rows(), 1);
    }
    // The engines' blocking calls ran on the crate's one runtime: an engine dropped inside
    // an async runtime drops no runtime of its own (which panics there, as it did when each
    // engine started one).
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async move { drop(engines) });
}
