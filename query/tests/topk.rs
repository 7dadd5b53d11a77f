//! The exact vector top-k computed in the scan (`ORDER BY <distance>(v, [..]) LIMIT k`)
//! answers exactly what the engine's full sort answers: the same rows, order, distances and
//! vectors, for random f32/f16/bf16/f64 vectors with NaN, -0.0, zero vectors, null vectors
//! and many ties, small pages, deletions, filters, one or two partitions, local files
//! (`pread`) and an object store (ranged GETs).

use std::sync::Arc;

use datafusion::arrow::util::pretty::pretty_format_batches;
use proptest::prelude::*;
use tessera::ann::IndexSpec;
use tessera::distance::Distance;
use tessera::{At, Batch, Column, ColumnData, DType, Dataset, Dim, Limits, Store, WriteOptions};
use tessera_query::{QueryEngine, ScanOptions};
use tessera_testkit::XorShift;

/// Vector elements: exact in every float type, with the awkward ones.
const VALUES: [f64; 7] = [-1.5, -0.0, 0.0, 1.0, 2.0, 0.5, f64::NAN];

#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    dtype: DType,
    dim: u64,
    nullable: bool,
    fragments: usize,
    delete: bool,
    page_bytes: u64,
    object_store: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<u64>(),
        prop::sample::select(vec![DType::F32, DType::F16, DType::Bf16, DType::F64]),
        1u64..6,
        any::<bool>(),
        1usize..5,
        any::<bool>(),
        prop::sample::select(vec![64u64, 256, 1 << 16]),
        any::<bool>(),
    )
        .prop_map(|(seed, dtype, dim, nullable, fragments, delete, page_bytes, object_store)| Case {
            seed,
            dtype,
            dim,
            nullable,
            fragments,
            delete,
            page_bytes,
            object_store,
        })
}

fn element(dtype: DType, v: f64) -> Vec<u8> {
    match dtype {
        DType::F16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
        DType::Bf16 => half::bf16::from_f64(v).to_le_bytes().to_vec(),
        DType::F32 => (v as f32).to_le_bytes().to_vec(),
        _ => v.to_le_bytes().to_vec(),
    }
}

/// The case's dataset: `cat` i32 in 0..4, `v` vectors from [`VALUES`] (rarely NaN, often
/// tied), nulls and deletions as the case says.
fn build(case: &Case, dir: &std::path::Path) -> Dataset {
    let schema = tessera::Schema::new([Column::new("cat", DType::I32, &[]), {
        let v = Column::new("v", case.dtype, &[Dim::Fixed(case.dim)]);
        if case.nullable { v.nullable() } else { v }
    }])
    .unwrap();
    let options = WriteOptions { page_bytes: case.page_bytes, ..WriteOptions::default() };
    let mut ds = if case.object_store {
        let store = Store::from_object_store(Arc::new(object_store::memory::InMemory::new()), "", true);
        Dataset::create_in(&store, schema, &options).unwrap()
    } else {
        Dataset::create(dir.to_str().unwrap(), schema, &options).unwrap()
    };
    let mut rng = XorShift::new(case.seed);
    for _ in 0..case.fragments {
        let rows = 1 + rng.below(40) as usize;
        let cat: Vec<i32> = (0..rows).map(|_| rng.below(4) as i32).collect();
        let mut v = ColumnData::empty(case.dtype, &[Dim::Fixed(case.dim)], case.nullable);
        for _ in 0..rows {
            if case.nullable && rng.chance(0.1) {
                v.push_null().unwrap();
                continue;
            }
            let bytes: Vec<u8> = (0..case.dim)
                .flat_map(|_| {
                    let i = if rng.chance(0.03) { 6 } else { rng.below(6) as usize };
                    element(case.dtype, VALUES[i])
                })
                .collect();
            v.push_row(&[case.dim], &bytes).unwrap();
        }
        let batch = Batch::new().with("cat", ColumnData::from_scalars(&cat)).unwrap().with("v", v).unwrap();
        ds = ds.append(&batch, "rows", options.clone()).unwrap();
    }
    if case.delete {
        let doomed: Vec<u64> = (0..ds.row_count()).filter(|_| rng.chance(0.25)).collect();
        if !doomed.is_empty() && doomed.len() as u64 != ds.row_count() {
            ds = ds.delete_rows(&doomed, "delete", &options).unwrap();
        }
    }
    Dataset::open_at(ds.store(), &At::Latest, Limits::default()).unwrap()
}

/// Filters: none, selective, with `_rowid`, and a volatile one the rule must leave alone.
const FILTERS: [&str; 5] =
    ["", "WHERE cat = 1", "WHERE cat < 2 AND _rowid > 5", "WHERE v IS NOT NULL", "WHERE random() < 2"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn scan_top_k_equals_the_full_sort(
        case in case(),
        q in prop::collection::vec(0usize..6, 5),
        k in 1usize..16,
        metric in 0usize..3,
        desc in any::<bool>(),
        filter in 0usize..FILTERS.len(),
        partitions in 1usize..3,
        wide in any::<bool>(),
        lists in prop::option::of(1usize..5),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let ds = build(&case, dir.path());
        // With a vector index probed in full, the answer is the same again (module `ann`).
        if let Some(lists) = lists {
            let metric = [Distance::Cosine, Distance::L2, Distance::InnerProduct][metric];
            let spec = IndexSpec { lists: Some(lists), ..IndexSpec::new("i", "v", metric) };
            // No finite vector, or inner product: no index, and the exact scan answers.
            let _ = ds.create_vector_index(&spec, &WriteOptions::default());
        }
        let qv: Vec<String> = q.iter().take(case.dim as usize).map(|&i| format!("{}", VALUES[i])).collect();
        let f = ["cosine_distance", "l2_distance", "inner_product"][metric];
        let d = format!("{f}(v, [{}])", qv.join(", "));
        let order = if desc { "DESC" } else { "ASC" };
        let sql = if wide {
            format!("SELECT cat, v, {d} AS d, _rowid FROM ds {} ORDER BY d {order} LIMIT {k}", FILTERS[filter])
        } else {
            format!("SELECT _rowid FROM ds {} ORDER BY {d} {order} LIMIT {k}", FILTERS[filter])
        };
        let every_list = ScanOptions { partitions, nprobe: Some(usize::MAX), ..ScanOptions::default() };
        let fast = QueryEngine::with_options(ds.clone(), every_list).unwrap();
        let slow = QueryEngine::with_options(ds, ScanOptions { partitions, vector_top_k: false, ..ScanOptions::default() })
            .unwrap();
        let (a, b) = (fast.sql(&sql).unwrap(), slow.sql(&sql).unwrap());
        let show = |x: &tessera_query::Answer| pretty_format_batches(&x.batches).unwrap().to_string();
        prop_assert_eq!(show(&a), show(&b), "{}", sql);
        let pages = fast.scan_stats().vector_pages;
        let indexed = fast.scan_stats().index_searches > 0;
        // (`v IS NOT NULL` on a non-nullable column is no filter at all.)
        let unfiltered = filter == 0 || (filter == 3 && !case.nullable);
        prop_assert!(!indexed || (lists.is_some() && unfiltered && !desc && metric < 2), "index used for {}", sql);
        if indexed {
            prop_assert_eq!(pages, 0, "the index answered, yet pages were read");
        } else if filter == 4 {
            prop_assert_eq!(pages, 0, "the rule fired under a volatile filter");
        } else if a.num_rows() > 0 {
            prop_assert!(pages > 0, "the scan did not compute the top-k: {}", sql);
        }
        prop_assert_eq!(slow.scan_stats().vector_pages, 0);
    }
}

#[test]
fn a_filtered_top_k_reads_only_pages_with_matching_rows_once() {
    let dir = tempfile::tempdir().unwrap();
    let schema =
        tessera::Schema::new([Column::new("cat", DType::I32, &[]), Column::new("v", DType::F32, &[Dim::Fixed(4)])])
            .unwrap();
    // 16-byte rows, 64-byte pages: 4 rows a page, 100 pages.
    let options = WriteOptions { page_bytes: 64, ..WriteOptions::default() };
    let ds = Dataset::create(dir.path().to_str().unwrap(), schema, &options).unwrap();
    let cat: Vec<i32> = (0..400).map(|i| i32::from(i % 40 == 0 || i % 40 == 1)).collect();
    let v: Vec<f32> = (0..400 * 4).map(|i| (i % 7) as f32).collect();
    let batch = Batch::new()
        .with("cat", ColumnData::from_scalars(&cat))
        .unwrap()
        .with("v", ColumnData::from_fixed(&[4], &v).unwrap())
        .unwrap();
    let ds = ds.append(&batch, "rows", options).unwrap();
    let q = QueryEngine::with_options(ds, ScanOptions { partitions: 1, ..ScanOptions::default() }).unwrap();
    let a = q.sql("SELECT _rowid FROM ds WHERE cat = 1 ORDER BY l2_distance(v, [1, 2, 3, 4]) LIMIT 3").unwrap();
    assert_eq!(a.num_rows(), 3);
    // Rows 40 j and 40 j + 1 match: 20 rows in 10 pages, each read once.
    let stats = q.scan_stats();
    assert_eq!((stats.vector_pages, stats.vector_bytes), (10, 640));
    // Unfiltered, every page is read once.
    q.sql("SELECT _rowid FROM ds ORDER BY l2_distance(v, [1, 2, 3, 4]) LIMIT 3").unwrap();
    assert_eq!(q.scan_stats().vector_pages, 110);
}

#[test]
fn a_corrupt_vector_page_is_a_checksum_error() {
    let dir = tempfile::tempdir().unwrap();
    let schema = tessera::Schema::new([Column::new("v", DType::F32, &[Dim::Fixed(4)])]).unwrap();
    let ds = Dataset::create(dir.path().to_str().unwrap(), schema, &WriteOptions::default()).unwrap();
    let v: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let ds = ds
        .append(
            &Batch::new().with("v", ColumnData::from_fixed(&[4], &v).unwrap()).unwrap(),
            "rows",
            WriteOptions::default(),
        )
        .unwrap();
    let file = &ds.fragments()[0].fragment.files[0];
    let df = ds.data_file(&ds.fragments()[0].fragment, file).unwrap();
    let page = df.chunk(ds.schema().column("v").unwrap().id).unwrap().pages[0].block;
    let path = dir.path().join(&file.path);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[page.offset as usize + 5] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let q = QueryEngine::new(ds).unwrap();
    let e = q.sql("SELECT _rowid FROM ds ORDER BY cosine_distance(v, [1, 0, 0, 0]) LIMIT 2").unwrap_err();
    assert_eq!(e.class(), tessera::ErrorClass::Malformed, "{e}");
    assert!(e.to_string().contains("CRC-32"), "{e}");
}

#[test]
fn zz_explain() {
    let dir = tempfile::tempdir().unwrap();
    let schema =
        tessera::Schema::new([Column::new("cat", DType::I32, &[]), Column::new("v", DType::F32, &[Dim::Fixed(4)])])
            .unwrap();
    let ds = Dataset::create(dir.path().to_str().unwrap(), schema, &WriteOptions::default()).unwrap();
    let batch = Batch::new()
        .with("cat", ColumnData::from_scalars(&[1i32]))
        .unwrap()
        .with("v", ColumnData::from_fixed(&[4], &[1f32, 2., 3., 4.]).unwrap())
        .unwrap();
    let ds = ds.append(&batch, "rows", WriteOptions::default()).unwrap();
    let q = QueryEngine::new(ds).unwrap();
    for s in [
        "EXPLAIN SELECT _rowid FROM ds ORDER BY l2_distance(v, [1, 2, 3, 4]), _rowid LIMIT 3",
        "EXPLAIN SELECT _rowid FROM ds WHERE cat = 1 ORDER BY l2_distance(v, [1, 2, 3, 4]), _rowid LIMIT 3",
    ] {
        println!("{}", pretty_format_batches(&q.sql(s).unwrap().batches).unwrap());
    }
}
