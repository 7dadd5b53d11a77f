//! Manifest and index-segment decode, and opening a dataset: the fixed cost of every open.
//!
//! Every reader (a loader worker, `tessera verify`, a notebook) starts by reading the version's
//! manifest and its index segments: envelope checks, CRC-32, bincode decode and the semantic
//! validation (`[VAL-04]`..`[VAL-07]`). With many fragments or a long history this is what
//! makes "open" slow, and a loader pays it once per process and rank.
//!
//! Two datasets in `memory://` stores (see `support`):
//! * `fragments=2000`: one append commit of 2000 fragments (32 rows each, three columns with
//!   statistics), so one large segment;
//! * `versions=300`: 300 versions of one fragment each, so a manifest that references the
//!   history's segments (as many as the writer's segment merging leaves).
//!
//! Groups (each decode includes the envelope checks and `validate`, as `Dataset::open` does):
//! * `manifest_decode/{fragments=2000,versions=300}`: `envelope::open::<Manifest>` + `Manifest::validate`;
//! * `segment_decode/fragments=2000`: `envelope::open::<Segment>` + `Segment::validate`,
//!   throughput in fragments;
//! * `dataset_open/{fragments=2000,versions=300}`: `Dataset::open_at(store, At::Latest)`, the
//!   whole open (LIST, GETs, decodes, fragment log).

mod support;

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_main};
use tessera::envelope::{self, ObjectKind};
use tessera::manifest::{Manifest, Segment, SegmentRef};
use tessera::{At, Dataset, Limits, paths};

/// Fragments of the wide dataset.
const FRAGMENTS: u64 = 2000;
/// Versions of the long-history dataset.
const VERSIONS: u64 = 300;

/// The stored bytes of `ds`'s manifest.
fn manifest_bytes(ds: &Dataset) -> bytes::Bytes {
    let key = paths::manifest_key(ds.branch(), ds.version());
    ds.store().get_bounded(&key, envelope::max_object_len(ds.limits().max_manifest_body())).expect("manifest is stored")
}

/// What `Dataset::open` does with a manifest's bytes.
fn decode_manifest(bytes: &[u8], branch: &str, version: u64, limits: &Limits) -> tessera::Result<Manifest> {
    let m: Manifest = envelope::open(ObjectKind::Manifest, bytes, limits.max_manifest_body(), "bench manifest")?;
    m.validate(branch, version, "bench manifest")?;
    Ok(m)
}

/// What `Dataset::open` does with a segment's bytes.
fn decode_segment(bytes: &[u8], sref: &SegmentRef, manifest: &Manifest, limits: &Limits) -> tessera::Result<Segment> {
    let s: Segment = envelope::open(ObjectKind::Segment, bytes, limits.max_segment_body(), &sref.path)?;
    s.validate(sref, manifest.next_fragment_id, &sref.path)?;
    for f in &s.fragments {
        f.check_columns(&manifest.schema)?;
    }
    Ok(s)
}

fn metadata(c: &mut Criterion) {
    let wide = support::create("memory://bench-metadata-wide")
        .append(&support::rows(0, FRAGMENTS), "many fragments", support::options())
        .expect("wide dataset is written");
    assert_eq!(wide.fragments().len() as u64, FRAGMENTS);
    let long = support::history("memory://bench-metadata-history", VERSIONS);
    let datasets = [(format!("fragments={FRAGMENTS}"), &wide), (format!("versions={VERSIONS}"), &long)];

    let mut group = c.benchmark_group("manifest_decode");
    for (id, ds) in &datasets {
        let bytes = manifest_bytes(ds);
        let limits = ds.limits().clone();
        let m = decode_manifest(&bytes, ds.branch(), ds.version(), &limits).expect("manifest decodes");
        eprintln!("manifest_decode: {id}: {} bytes, {} segments", bytes.len(), m.segments.len());
        group.bench_function(BenchmarkId::from_parameter(id), |b| {
            b.iter(|| decode_manifest(black_box(&bytes), ds.branch(), ds.version(), &limits));
        });
    }
    group.finish();

    let mut group = c.benchmark_group("segment_decode");
    let manifest = wide.manifest();
    let sref = manifest.segments.iter().max_by_key(|s| s.fragment_count).expect("the wide dataset has a segment");
    let bytes = wide
        .store()
        .get_bounded(&sref.path, envelope::max_object_len(wide.limits().max_segment_body()))
        .expect("segment is stored");
    let limits = wide.limits().clone();
    let seg = decode_segment(&bytes, sref, manifest, &limits).expect("segment decodes");
    eprintln!("segment_decode: {} bytes, {} fragments", bytes.len(), seg.fragments.len());
    group.throughput(Throughput::Elements(sref.fragment_count));
    group.bench_function(BenchmarkId::from_parameter(format!("fragments={}", sref.fragment_count)), |b| {
        b.iter(|| decode_segment(black_box(&bytes), sref, manifest, &limits));
    });
    group.finish();

    let mut group = c.benchmark_group("dataset_open");
    for (id, ds) in &datasets {
        let store = ds.store().clone();
        let limits = ds.limits().clone();
        let opened = Dataset::open_at(&store, &At::Latest, limits.clone()).expect("dataset opens");
        assert_eq!(opened.version(), ds.version());
        group.bench_function(BenchmarkId::from_parameter(id), |b| {
            b.iter(|| Dataset::open_at(&store, &At::Latest, limits.clone()));
        });
    }
    group.finish();
}

/// Runs this file's groups with a short default configuration (a few seconds per benchmark);
/// command-line options (`--quick`, `--measurement-time`, a name filter) override it.
fn benches() {
    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    metadata(&mut c);
}

criterion_main!(benches);
