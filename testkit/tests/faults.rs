//! Fault injection: reads under GET failures and truncated bodies, commits interrupted by a
//! failing PUT, and real HTTP stores behind a loopback proxy that adds latency and resets.
//!
//! Datasets are written through the clean store and then read or extended through a
//! [`FaultyStore`] over the same underlying object store.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{batch, check_rows, ids, schema, small};
use tessera::{At, Dataset, ErrorClass, Limits, Store, WriteOptions};
use tessera_testkit::servers::s3_server_addr;
use tessera_testkit::{Backend, FaultConfig, FaultyStore, Latency, LatencyProxy, ProxyConfig, TestRoot, XorShift};

/// A dataset of 120 rows in many small fragments; returns the root and the clean store.
fn seeded(backend: Backend, name: &str) -> Option<(TestRoot, Store)> {
    let root = TestRoot::new(backend, name)?;
    let ds = Dataset::create(&root.url, schema(), &WriteOptions::default()).unwrap();
    let ds = ds.append(&batch(0, 80), "a", small()).unwrap();
    ds.append(&batch(80, 40), "b", small()).unwrap();
    let store = root.store();
    Some((root, store))
}

fn faulty(root: &TestRoot, config: FaultConfig) -> (FaultyStore, Store) {
    let (inner, prefix) = root.object_store(None);
    let f = FaultyStore::new(inner, config);
    let store = root.wrapped(Arc::new(f.clone()), &prefix);
    (f, store)
}

#[derive(Debug, Default)]
struct Outcomes {
    ok: u32,
    io: u32,
    other: Vec<String>,
}

/// Opens and reads random row ranges `trials` times; every result is checked: correct data,
/// or an error whose class is in `allowed`. A panic fails the test with the trial number.
fn read_trials(store: &Store, trials: u32, seed: u64) -> Outcomes {
    let mut rng = XorShift::new(seed);
    let mut out = Outcomes::default();
    for t in 0..trials {
        let start = rng.below(120);
        let end = start + 1 + rng.below(120 - start);
        let cols: &[&str] = match rng.below(3) {
            0 => &["id"],
            1 => &["id", "tokens"],
            _ => &["id", "name", "vec", "tokens"],
        };
        let r = catch_unwind(AssertUnwindSafe(|| {
            let ds = Dataset::open_at(store, &At::Latest, Limits::default())?;
            let b = ds.read_rows(start..end, Some(cols))?;
            Ok::<_, tessera::Error>(b)
        }));
        match r {
            Err(p) => {
                let msg =
                    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(ToString::to_string));
                panic!("trial {t}: reading rows {start}..{end} panicked: {msg:?}");
            }
            Ok(Ok(b)) => {
                let got = b.get("id").unwrap().to_vec::<i64>().unwrap();
                assert_eq!(got, (start as i64..end as i64).collect::<Vec<_>>(), "trial {t}: wrong rows");
                check_rows(&b).unwrap_or_else(|e| panic!("trial {t}: wrong data: {e}"));
                out.ok += 1;
            }
            Ok(Err(e)) if e.class() == ErrorClass::Io => out.io += 1,
            Ok(Err(e)) => out.other.push(format!("{}: {e}", e.class())),
        }
    }
    out
}

/// 10% of GETs fail: every read either returns the right rows or fails with class `io`.
fn get_errors(backend: Backend) {
    let Some((root, _)) = seeded(backend, "get-errors") else { return };
    let (f, store) = faulty(&root, FaultConfig { seed: 11, get_error_rate: 0.10, ..FaultConfig::default() });
    let t = Instant::now();
    let out = read_trials(&store, 150, 1);
    eprintln!("{backend:?}: {out:?}; {}; {:.2}s", f.counts, t.elapsed().as_secs_f64());
    assert!(out.other.is_empty(), "errors of other classes: {:?}", out.other);
    assert!(out.ok > 0 && out.io > 0, "{out:?}");
    assert!(f.counts.get_errors.load(Ordering::Relaxed) > 0);
}

/// Range GETs cut short: never wrong data, never a panic; the error is reported (its class is
/// printed: `io` would be the ideal, `malformed` is what a CRC or length check gives).
fn truncated_bodies(backend: Backend) {
    let Some((root, _)) = seeded(backend, "truncated") else { return };
    let (f, store) = faulty(&root, FaultConfig { seed: 12, truncate_rate: 0.3, ..FaultConfig::default() });
    let out = read_trials(&store, 150, 2);
    eprintln!("{backend:?}: {out:?}; {}", f.counts);
    assert!(f.counts.truncated.load(Ordering::Relaxed) > 0);
    assert!(out.ok > 0, "{out:?}");
    for e in &out.other {
        assert!(e.starts_with("malformed") || e.starts_with("invalid"), "unexpected error class: {e}");
    }
}

/// Latency with jitter and bodies trickling in small chunks: reads are slower, never wrong.
fn slow_reads(backend: Backend) {
    let Some((root, _)) = seeded(backend, "slow") else { return };
    let config = FaultConfig {
        seed: 13,
        get_latency: Latency::new(Duration::from_millis(1), Duration::from_millis(3)),
        slow_stream_chunk: Some(97),
        slow_stream_pause: Duration::from_micros(200),
        ..FaultConfig::default()
    };
    let (f, store) = faulty(&root, config);
    let out = read_trials(&store, 20, 3);
    assert_eq!((out.ok, out.io), (20, 0), "{out:?}");
    assert!(f.counts.delayed.load(Ordering::Relaxed) > 0 && f.counts.slow_streams.load(Ordering::Relaxed) > 0);
}

/// A commit whose PUT of `key` fails leaves no visible partial version: the dataset opens at
/// the previous version and verifies; retrying the append succeeds and lands its rows once.
fn interrupted_commit(backend: Backend, key: &str) {
    let Some((root, clean)) = seeded(backend, &format!("interrupted-{}", key.trim_end_matches('/'))) else { return };
    let (f, store) = faulty(&root, FaultConfig::seeded(14));
    let before = Dataset::open_at(&clean, &At::Latest, Limits::default()).unwrap();
    f.fail_puts(key, 1, false);
    let base = Dataset::open_at(&store, &At::Latest, Limits::default()).unwrap();
    let e = base.append(&batch(500, 7), "interrupted", small()).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Io, "{e}");
    assert!(f.pending_put_faults().is_empty(), "the armed fault was used: {:?}", f.pending_put_faults());
    let after = Dataset::open_at(&clean, &At::Latest, Limits::default()).unwrap();
    assert_eq!((after.version(), after.manifest_crc32()), (before.version(), before.manifest_crc32()));
    assert_eq!(after.verify().unwrap().rows, 120);
    // Retry through the same (now healthy) store.
    let v = base.append(&batch(500, 7), "retried", small()).unwrap();
    assert_eq!(v.version(), before.version() + 1);
    let reopened = Dataset::open_at(&clean, &At::Latest, Limits::default()).unwrap();
    assert_eq!(ids(&reopened), (0..120).chain(500..507).collect::<Vec<_>>());
    reopened.verify().unwrap();
}

/// The manifest PUT lands but its response is lost: the committer looks before failing, finds
/// its own manifest (same writer id) and reports success, so a caller never retries — and
/// duplicates — a commit that happened.
fn lost_manifest_response(backend: Backend) {
    let Some((root, clean)) = seeded(backend, "lost-response") else { return };
    let (f, store) = faulty(&root, FaultConfig::seeded(15));
    let before = Dataset::open_at(&clean, &At::Latest, Limits::default()).unwrap().version();
    f.fail_puts("branches/", 1, true);
    let base = Dataset::open_at(&store, &At::Latest, Limits::default()).unwrap();
    let v = base.append(&batch(700, 2), "lost response", small()).unwrap();
    assert_eq!(v.version(), before + 1);
    assert_eq!(f.counts.put_errors_after_write.load(Ordering::Relaxed), 1);
    let after = Dataset::open_at(&clean, &At::Latest, Limits::default()).unwrap();
    assert_eq!(after.version(), before + 1, "the version landed whole");
    assert_eq!(after.verify().unwrap().rows, 122);
    assert_eq!(ids(&after)[120..], [700, 701]);
}

/// Random PUT failures (20%) over 30 appends: each append is all or nothing.
fn random_put_errors(backend: Backend) {
    let Some((root, clean)) = seeded(backend, "put-errors") else { return };
    let (f, store) = faulty(&root, FaultConfig { seed: 16, put_error_rate: 0.2, ..FaultConfig::default() });
    let mut want: Vec<i64> = (0..120).collect();
    let (mut ok, mut failed) = (0, 0);
    for i in 0..30 {
        let base = Dataset::open_at(&store, &At::Latest, Limits::default()).unwrap();
        let rows = batch(10_000 + i * 10, 2);
        match base.append(&rows, "maybe", small()) {
            Ok(_) => {
                ok += 1;
                want.extend([10_000 + i * 10, 10_001 + i * 10]);
            }
            Err(e) => {
                assert_eq!(e.class(), ErrorClass::Io, "{e}");
                failed += 1;
            }
        }
        let now = Dataset::open_at(&clean, &At::Latest, Limits::default()).unwrap();
        assert_eq!(ids(&now), want, "after append {i}");
    }
    eprintln!("{backend:?}: {ok} appends landed, {failed} failed; {}", f.counts);
    assert!(ok > 0 && failed > 0);
    Dataset::open_at(&clean, &At::Latest, Limits::default()).unwrap().verify().unwrap();
}

macro_rules! per_backend {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[test]
            fn local() {
                ($body)(Backend::Local)
            }
            #[test]
            fn memory() {
                ($body)(Backend::Memory)
            }
            #[test]
            fn s3() {
                ($body)(Backend::S3)
            }
        }
    };
}

per_backend!(get_errors_are_io_or_correct, get_errors);
// Regression (was reference bug R2): a range body shorter than asked made object_store's
// default `get_ranges` panic; the reference now coalesces itself and checks every length.
per_backend!(truncated_range_bodies_never_give_wrong_data, truncated_bodies);
per_backend!(latency_and_slow_streams_read_correctly, slow_reads);
per_backend!(failed_manifest_put_leaves_previous_version, |b| interrupted_commit(b, "branches/"));
per_backend!(failed_data_file_put_leaves_previous_version, |b| interrupted_commit(b, "data/"));
per_backend!(failed_index_segment_put_leaves_previous_version, |b| interrupted_commit(b, "index/"));
per_backend!(lost_manifest_put_response_lands_whole, lost_manifest_response);
per_backend!(random_put_errors_are_all_or_nothing, random_put_errors);

/// S3 through a proxy adding 2 ms ± 2 ms per request and 5 ms per connection: the full
/// write/commit/read path works and every request went through the proxy.
#[test]
fn s3_through_latency_proxy() {
    let Some(root) = TestRoot::new(Backend::S3, "proxy") else { return };
    let target = s3_server_addr().expect("S3 server address");
    let proxy = LatencyProxy::start(
        target,
        ProxyConfig {
            per_connection: Duration::from_millis(5),
            per_request: Latency::new(Duration::from_millis(2), Duration::from_millis(2)),
            ..ProxyConfig::default()
        },
    )
    .unwrap();
    let (inner, prefix) = root.object_store(Some(&proxy.endpoint()));
    let store = root.wrapped(inner, &prefix);
    let t = Instant::now();
    let ds = Dataset::create_in(&store, schema(), &WriteOptions::default()).unwrap();
    let ds = ds.append(&batch(0, 50), "via proxy", small()).unwrap();
    let back = Dataset::open_at(&store, &At::Latest, Limits::default()).unwrap();
    check_rows(&back.read_rows(0..50, None).unwrap()).unwrap();
    back.verify().unwrap();
    let requests = proxy.stats.requests.load(Ordering::Relaxed);
    eprintln!(
        "proxy: {requests} requests on {} connections in {:.2}s",
        proxy.stats.connections.load(Ordering::Relaxed),
        t.elapsed().as_secs_f64()
    );
    assert!(requests > 10 && ds.version() == 2);
}

/// S3 GETs whose connection the proxy closes (10%) are retried by `object_store`'s HTTP client:
/// every read returns correct data.
#[test]
fn s3_connection_resets_on_get_are_retried() {
    let Some((root, _)) = seeded(Backend::S3, "resets") else { return };
    let target = s3_server_addr().expect("S3 server address");
    let proxy =
        LatencyProxy::start(target, ProxyConfig { reset_get_rate: 0.1, seed: 5, ..ProxyConfig::default() }).unwrap();
    let (inner, prefix) = root.object_store(Some(&proxy.endpoint()));
    let store = root.wrapped(inner, &prefix);
    let out = read_trials(&store, 40, 4);
    let resets = proxy.stats.resets.load(Ordering::Relaxed);
    eprintln!("resets {resets}: {out:?}");
    assert!(resets > 0, "some connections were reset");
    assert_eq!((out.ok, out.io, out.other.len()), (40, 0, 0), "object_store retried every reset GET");
}

/// A commit on a fragment tree seals every node on its paths first and then stores them
/// together: an append to a tree of three or more levels, with 20 ms per PUT, has as many node
/// PUTs in flight at once as it writes levels (one round trip, not one per level), and every
/// version reads back whole.
#[test]
fn a_tree_commit_stores_its_nodes_in_one_round_trip() {
    let Some(root) = TestRoot::new(Backend::Memory, "tree-node-puts") else { return };
    let opts = WriteOptions { index: tessera::IndexLayout::Tree { node_bytes: 512 }, ..small() };
    let ds = Dataset::create(&root.url, schema(), &opts).unwrap();
    ds.append(&batch(0, 400), "many fragments", opts.clone()).unwrap();
    let config =
        FaultConfig { put_latency: Latency::new(Duration::from_millis(20), Duration::ZERO), ..FaultConfig::seeded(5) };
    let (f, store) = faulty(&root, config);
    let (base, tree) = Dataset::open_lazy(&store, &At::Latest, Limits::default()).unwrap();
    let depth = tree.expect("a tree version").depth();
    assert!(depth >= 3, "the test needs a deep tree, got {depth} levels");
    let after = base.append(&batch(400, 1), "one more", opts).unwrap();
    let most = f.counts.most_puts_in_flight.load(Ordering::Relaxed);
    assert!(most >= u64::from(depth), "{most} PUTs in flight at most for a {depth}-level tree");
    let reopened = Dataset::open_at(&root.store(), &At::Latest, Limits::default()).unwrap();
    assert_eq!(reopened.version(), after.version());
    assert_eq!(ids(&reopened), (0..401).collect::<Vec<i64>>());
    assert_eq!(check_rows(&reopened.read_rows(0..401, None).unwrap()), Ok(401));
}

/// A filled data file uploads while the writer goes on to the next rows: an append returns
/// with its last file not stored yet (each PUT takes a second here), one small file uploads
/// at a time (the bound is one target file's bytes), the commit waits for every upload and
/// lands every row, and a writer dropped uncommitted waits for its uploads, so nothing is
/// written after it is gone.
#[test]
fn data_files_upload_while_the_writer_goes_on() {
    let Some((root, clean)) = seeded(Backend::Memory, "uploads") else { return };
    let config =
        FaultConfig { put_latency: Latency::new(Duration::from_secs(1), Duration::ZERO), ..FaultConfig::seeded(6) };
    let (f, store) = faulty(&root, config);
    let data_files = || clean.list_recursive("data").unwrap().len();
    let seeded_files = data_files();
    let base = Dataset::open_at(&store, &At::Latest, Limits::default()).unwrap();
    let mut w = base.writer(small());
    w.append(&batch(1000, 30)).unwrap();
    let stored_at_return = data_files();
    let v = w.commit("uploaded while appending").unwrap();
    let committed = data_files();
    assert!(committed > seeded_files + 1, "the append wrote several files ({seeded_files} -> {committed})");
    assert!(stored_at_return < committed, "the last file was still uploading when append returned");
    assert_eq!(f.counts.most_puts_in_flight.load(Ordering::Relaxed), 1, "one small file uploads at a time");
    let reopened = Dataset::open_at(&clean, &At::Latest, Limits::default()).unwrap();
    assert_eq!(reopened.version(), v.version());
    assert_eq!(ids(&reopened), (0..120).chain(1000..1030).collect::<Vec<_>>());
    assert_eq!(check_rows(&reopened.read_rows(0..150, None).unwrap()), Ok(150));
    let mut w = v.writer(small());
    w.append(&batch(2000, 30)).unwrap();
    drop(w);
    let after_drop = data_files();
    assert!(after_drop > committed, "the dropped writer's flushed files were stored before it was gone");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(data_files(), after_drop, "nothing was stored after the writer was dropped");
    assert_eq!(Dataset::open_at(&clean, &At::Latest, Limits::default()).unwrap().version(), v.version());
}
