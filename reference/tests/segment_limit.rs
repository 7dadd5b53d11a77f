//! A writer under small configured limits (issue 26): no segment it writes, new or merged, is
//! over the segment body limit it works under, and no manifest over the manifest body limit
//! `[SEG-09, SEG-10, LIM-05, LIM-14, LIM-15]`.

use tessera::dump::{dump, dump_column};
use tessera::envelope::{self, ObjectKind};
use tessera::manifest::Manifest;
use tessera::{At, Batch, Column, ColumnData, DType, Dataset, ErrorClass, Limits, Schema, Store, WriteOptions};

/// About 28 one-file fragment entries of one `i64` column.
const SEGMENT_LIMIT: u64 = 4096;

fn options(limits: Limits) -> WriteOptions {
    WriteOptions { timestamp_ms: Some(1), writer_id: Some([7; 16]), limits, ..WriteOptions::default() }
}

fn ids(values: &[i64]) -> Batch {
    Batch::new().with("id", ColumnData::from_scalars(values)).unwrap()
}

fn create(location: &str, opts: &WriteOptions) -> (Store, Dataset) {
    let store = Store::open(location).unwrap();
    let schema = Schema::new([Column::new("id", DType::I64, &[])]).unwrap();
    let ds = Dataset::create_in(&store, schema, opts).unwrap();
    (store, ds)
}

/// The body lengths of every segment object in the store, merged intermediates included.
fn segment_bodies(store: &Store) -> Vec<u64> {
    let frame = (envelope::HEADER_LEN + envelope::TRAILER_LEN) as u64;
    store.list_recursive("index").unwrap().into_iter().map(|(_, size)| size - frame).collect()
}

fn open(store: &Store, version: u64, limits: &Limits) -> Dataset {
    Dataset::open_at(store, &At::BranchVersion("main".into(), version), limits.clone())
        .unwrap_or_else(|e| panic!("version {version} does not open: {e}"))
}

fn assert_rows(ds: &Dataset, want: &[i64]) {
    let got = dump(ds).unwrap();
    assert_eq!(got["row_count"], want.len() as u64, "version {}", ds.version());
    assert_eq!(got["columns"]["id"], dump_column(&ColumnData::from_scalars(want)), "version {}", ds.version());
}

/// Thousands of one-row appends, with a delete every 7th commit, one commit each, at a 4 KiB
/// segment limit. Before the fix, the tier merge wrote a 5428-byte segment and the next commit
/// failed with `limit` reading it back. Now every segment object is within the limit, every
/// version's manifest and segment references are (every 20th version and the last 20 are
/// opened in full: opening all would take a minute in a debug build), the dumps equal the
/// brute-force expectation, and the segment list stays short.
#[test]
fn thousands_of_appends_stay_under_a_small_segment_limit() {
    let limits = Limits::default().with_max_segment_body(SEGMENT_LIMIT);
    let opts = options(limits.clone());
    let (store, mut ds) = create("memory://segment-limit-appends", &opts);
    let mut expected: Vec<Vec<i64>> = vec![Vec::new()]; // rows of version v at v - 1
    let mut rows: Vec<i64> = Vec::new();
    let commits: i64 = 2000;
    for i in 0..commits {
        if i % 7 == 6 && !rows.is_empty() {
            let at = (i as usize * 31) % rows.len();
            ds = ds.delete_rows(&[at as u64], "delete", &opts).unwrap();
            rows.remove(at);
        } else {
            ds = ds.append(&ids(&[i]), "append", opts.clone()).unwrap();
            rows.push(i);
        }
        expected.push(rows.clone());
    }
    let bodies = segment_bodies(&store);
    let largest = bodies.iter().copied().max().unwrap();
    assert!(largest <= SEGMENT_LIMIT, "a segment body of {largest} bytes is over {SEGMENT_LIMIT}");
    let versions = expected.len() as u64;
    for (i, want) in expected.iter().enumerate() {
        let version = i as u64 + 1;
        let key = format!("branches/main/{version:020}.tsm");
        let bytes = store.get_bounded(&key, u64::MAX).unwrap();
        let m: Manifest = envelope::open(ObjectKind::Manifest, &bytes, limits.max_manifest_body(), &key).unwrap();
        for s in &m.segments {
            assert!(s.size <= envelope::max_object_len(SEGMENT_LIMIT), "version {version}: {} is {}", s.path, s.size);
        }
        if version.is_multiple_of(20) || version + 20 > versions {
            let d = open(&store, version, &limits);
            if version.is_multiple_of(100) || version == versions {
                assert_rows(&d, want);
            }
        }
    }
    // Bound: segments that could not merge list more than a limit's worth of entries per two
    // neighbours, then tiers (SEG-10).
    let live: u64 = ds.fragments().iter().map(|f| envelope::encode_body(&*f.fragment).unwrap().len() as u64).sum();
    let count = ds.manifest().segments.len() as u64;
    let tiers = u64::from((ds.fragments().len() as u64 + 1).next_power_of_two().trailing_zeros());
    let bound = 2 * live.div_ceil(SEGMENT_LIMIT) + tiers + 2;
    eprintln!(
        "{commits} commits, {} live fragments ({live} bytes of entries): {count} segments (bound {bound}), \
         {} segment objects, largest body {largest}",
        ds.fragments().len(),
        bodies.len()
    );
    assert!(count <= bound, "{count} segments, bound {bound}");
}

/// One commit whose segment would be over the limit is split into several, each within it;
/// applied in order they give the same version `[SEG-09]`.
#[test]
fn a_large_commit_is_split_into_segments_within_the_limit() {
    let limits = Limits::default().with_max_segment_body(SEGMENT_LIMIT);
    let opts = WriteOptions { target_file_bytes: 8, ..options(limits.clone()) };
    let (store, ds) = create("memory://segment-limit-split", &opts);
    let rows: Vec<i64> = (0..300).collect();
    let ds = ds.append(&ids(&rows), "300 fragments", opts.clone()).unwrap();
    assert_eq!(ds.fragments().len(), 300);
    let segments = &ds.manifest().segments;
    assert!(segments.len() > 1, "{} segment(s)", segments.len());
    assert!(segments.iter().all(|s| s.size <= envelope::max_object_len(SEGMENT_LIMIT)));
    assert!(segment_bodies(&store).iter().all(|&b| b <= SEGMENT_LIMIT));
    let d = open(&store, ds.version(), &limits);
    assert_rows(&d, &rows);
    // Deleting one row in each of many fragments replaces their entries, also split.
    let deleted: Vec<u64> = (0..200).map(|i| i * 3 / 2).collect();
    let after = d.delete_rows(&deleted, "delete", &opts).unwrap();
    let want: Vec<i64> = rows.iter().copied().filter(|r| !deleted.contains(&(*r as u64))).collect();
    assert!(segment_bodies(&store).iter().all(|&b| b <= SEGMENT_LIMIT));
    assert_rows(&open(&store, after.version(), &limits), &want);
}

/// A fragment entry that no segment within the limit can hold is `limit`, and no version is
/// written `[LIM-15]`.
#[test]
fn a_fragment_entry_over_the_limit_is_refused() {
    let limits = Limits::default().with_max_segment_body(64);
    let opts = options(limits.clone());
    let (store, ds) = create("memory://segment-limit-entry", &opts);
    let err = ds.append(&ids(&[1]), "one row", opts.clone()).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Limit, "{err}");
    assert_eq!(Dataset::open_at(&store, &At::Latest, limits).unwrap().version(), 1);
    assert!(segment_bodies(&store).is_empty());
}

/// A manifest whose body would be over the manifest limit (its `segments` list grows) is
/// `limit` before it is written; the versions before it open.
#[test]
fn a_manifest_over_the_limit_is_refused() {
    let limits = Limits::default().with_max_segment_body(SEGMENT_LIMIT).with_max_manifest_body(2048);
    let opts = options(limits.clone());
    let (store, mut ds) = create("memory://segment-limit-manifest", &opts);
    let err = loop {
        match ds.append(&ids(&[ds.row_count() as i64]), "append", opts.clone()) {
            Ok(next) => ds = next,
            Err(e) => break e,
        }
        assert!(ds.version() < 1000, "the manifest never reached its limit");
    };
    assert_eq!(err.class(), ErrorClass::Limit, "{err}");
    let latest = Dataset::open_at(&store, &At::Latest, limits).unwrap();
    assert_eq!(latest.version(), ds.version());
}

/// A reader whose limit is lower than the writer's refuses a large segment with `limit`: the
/// failure that a writer under that same limit must never cause.
#[test]
fn a_reader_with_a_lower_limit_refuses_a_large_segment() {
    let opts = options(Limits::default());
    let (store, mut ds) = create("memory://segment-limit-reader", &opts);
    for i in 0..64 {
        ds = ds.append(&ids(&[i]), "append", opts.clone()).unwrap();
    }
    let err =
        Dataset::open_at(&store, &At::Latest, Limits::default().with_max_segment_body(SEGMENT_LIMIT)).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Limit, "{err}");
}
