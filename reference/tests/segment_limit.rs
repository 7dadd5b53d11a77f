//! A writer under small configured limits (issue 26): the tier merge must never write a
//! segment over the segment body limit the writer works under `[SEG-10, LIM-05, LIM-14]`, and
//! every version it writes must open under the same limits.

use tessera::dump::{dump, dump_column};
use tessera::{At, Batch, Column, ColumnData, DType, Dataset, ErrorClass, Limits, Schema, Store, WriteOptions};

/// About 28 one-file fragment records of one `i64` column.
const SEGMENT_LIMIT: u64 = 4096;

fn options(limits: Limits) -> WriteOptions {
    WriteOptions { timestamp_ms: Some(1), writer_id: Some([7; 16]), limits, ..WriteOptions::default() }
}

fn one_row(id: i64) -> Batch {
    Batch::new().with("id", ColumnData::from_scalars(&[id])).unwrap()
}

/// Every segment object of the store, by size of its body.
fn segment_bodies(store: &Store) -> Vec<u64> {
    let header = (tessera::envelope::HEADER_LEN + tessera::envelope::TRAILER_LEN) as u64;
    store.list_recursive("index").unwrap().into_iter().map(|(_, size)| size - header).collect()
}

/// Thousands of one-row appends, with a delete every 7th commit, each one commit: every object
/// stays under the configured limit, every version opens under it, and each version's dump is
/// the brute-force expectation.
#[test]
fn thousands_of_appends_stay_under_a_small_segment_limit() {
    let limits = Limits::default().with_max_segment_body(SEGMENT_LIMIT);
    let opts = options(limits.clone());
    let store = Store::open("memory://segment-limit-appends").unwrap();
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let mut ds = Dataset::create_in(&store, schema, &opts).unwrap();
    let mut expected: Vec<Vec<i64>> = vec![Vec::new()]; // per version, from version 1
    let mut rows: Vec<i64> = Vec::new();
    let commits: i64 = 3000;
    for i in 0..commits {
        if i % 7 == 6 && !rows.is_empty() {
            let at = (i as usize * 31) % rows.len();
            ds = ds.delete_rows(&[at as u64], "delete", &opts).unwrap();
            rows.remove(at);
        } else {
            ds = ds.append(&one_row(i), "append", opts.clone()).unwrap();
            rows.push(i);
        }
        expected.push(rows.clone());
    }
    let bodies = segment_bodies(&store);
    let largest = bodies.iter().copied().max().unwrap();
    assert!(largest <= SEGMENT_LIMIT, "a segment body of {largest} bytes is over {SEGMENT_LIMIT}");
    for (v, want) in expected.iter().enumerate() {
        let version = v as u64 + 1;
        let d = Dataset::open_at(&store, &At::BranchVersion("main".into(), version), limits.clone())
            .unwrap_or_else(|e| panic!("version {version} does not open: {e}"));
        // Dumps of every 50th version and of the last (a dump reads every row).
        if v % 50 == 0 || v + 1 == expected.len() {
            let got = dump(&d).unwrap();
            assert_eq!(got["row_count"], want.len() as u64, "version {version}");
            assert_eq!(got["columns"]["id"], dump_column(&ColumnData::from_scalars(want)), "version {version}");
        }
    }
    let last = &ds.manifest().segments;
    let live: u64 = last.iter().map(|s| s.size).sum();
    eprintln!(
        "{commits} commits: {} segments in the last manifest ({live} bytes), {} segment objects, largest body {largest}",
        last.len(),
        bodies.len()
    );
}

/// A version whose segment is over the reader's configured limit is `limit`: the failure the
/// writer above must never cause.
#[test]
fn a_reader_with_a_lower_limit_refuses_a_large_segment() {
    let store = Store::open("memory://segment-limit-reader").unwrap();
    let opts = options(Limits::default());
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let mut ds = Dataset::create_in(&store, schema, &opts).unwrap();
    for i in 0..64 {
        ds = ds.append(&one_row(i), "append", opts.clone()).unwrap();
    }
    let err = Dataset::open_at(&store, &At::Latest, Limits::default().with_max_segment_body(SEGMENT_LIMIT)).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Limit, "{err}");
}
