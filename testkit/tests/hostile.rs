//! Bounded reads `[ENV-04]`: a store that answers with a 10 GB body (announced or not) costs
//! the reader a bounded number of bytes, and the reader says `limit` (or `io` for a body that
//! disagrees with what the store announced), never reads on.

mod common;

use std::sync::Arc;

use common::{batch, schema, small};
use tessera::{At, Dataset, ErrorClass, Limits, Store, WriteOptions};
use tessera_testkit::hostile::CHUNK;
use tessera_testkit::{Backend, Claim, HostileStore, TestRoot};

const TEN_GB: u64 = 10 << 30;

/// A two-version dataset in memory; returns the root.
fn seeded(name: &str) -> TestRoot {
    let root = TestRoot::new(Backend::Memory, name).expect("memory root");
    let ds = Dataset::create(&root.url, schema(), &WriteOptions::default()).unwrap();
    ds.append(&batch(0, 40), "a", small()).unwrap();
    root
}

fn hostile(root: &TestRoot, key_contains: &str, claim: Claim) -> (HostileStore, Store) {
    let (inner, prefix) = root.object_store(None);
    let h = HostileStore::new(inner, key_contains, TEN_GB, claim);
    let store = root.wrapped(Arc::new(h.clone()), &prefix);
    (h, store)
}

/// Opens the latest version and reads every row through `store`.
fn open_and_read(store: &Store) -> Result<(), tessera::Error> {
    let ds = Dataset::open_at(store, &At::Latest, Limits::default())?;
    ds.read_rows(0..ds.row_count(), None)?;
    Ok(())
}

fn check(key: &str, claim: Claim, allowed: &[ErrorClass], max_pulled: u64) {
    let root = seeded(&format!("hostile-{}-{claim:?}", key.replace(['/', '.'], "-")));
    let (h, store) = hostile(&root, key, claim);
    let err = open_and_read(&store).expect_err("a 10 GB body must not be accepted");
    assert!(allowed.contains(&err.class()), "{key} {claim:?}: class {:?}: {err}", err.class());
    assert!(h.pulled() <= max_pulled, "{key} {claim:?}: pulled {} bytes of the hostile body", h.pulled());
}

#[test]
fn an_announced_10gb_manifest_is_refused_before_its_body_is_read() {
    check("branches/main/00000000000000000002", Claim::Honest, &[ErrorClass::Limit], 0);
}

#[test]
fn a_manifest_body_longer_than_announced_is_cut_at_the_announced_size() {
    check("branches/main/00000000000000000002", Claim::Lies, &[ErrorClass::Limit], 2 * CHUNK);
}

#[test]
fn an_announced_10gb_segment_is_refused_before_its_body_is_read() {
    check("index/", Claim::Honest, &[ErrorClass::Limit], 0);
}

#[test]
fn a_segment_body_longer_than_announced_is_cut() {
    check("index/", Claim::Lies, &[ErrorClass::Limit], 2 * CHUNK);
}

/// Range reads of data files: the store announces the range it was asked for and streams
/// 10 GB. Several ranges may be in flight at once, each stopped after its first chunk.
#[test]
fn data_file_range_bodies_longer_than_the_range_are_cut() {
    check(".tsd", Claim::Lies, &[ErrorClass::Limit], 64 * CHUNK);
}

/// A data file whose size differs from its reference is `invalid` from the tail read's
/// metadata alone; no body byte is needed.
#[test]
fn an_announced_10gb_data_file_is_invalid_without_reading_it() {
    check(".tsd", Claim::Honest, &[ErrorClass::Invalid], 0);
}

#[test]
fn a_tag_body_longer_than_announced_is_cut() {
    let root = seeded("hostile-tag");
    let ds = Dataset::open_at(&root.store(), &At::Latest, Limits::default()).unwrap();
    ds.create_tag("v1", "m", &WriteOptions::default()).unwrap();
    for (claim, max) in [(Claim::Honest, 0), (Claim::Lies, 2 * CHUNK)] {
        let (h, store) = hostile(&root, "tags/", claim);
        let err = Dataset::open_at(&store, &At::Tag("v1".into()), Limits::default()).expect_err("hostile tag");
        assert_eq!(err.class(), ErrorClass::Limit, "{claim:?}: {err}");
        assert!(h.pulled() <= max, "{claim:?}: pulled {}", h.pulled());
    }
}
