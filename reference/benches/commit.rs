//! One append commit on a dataset with a long history: the latency of a writer's commit.
//!
//! The format promises that "the cost of a commit grows with the change, not with the dataset"
//! (`manifest.rs`): a commit writes its data file, one new index segment (merged with recent
//! ones by the writer's segment log) and a manifest that references the older segments by path.
//! Ingest pipelines commit often (one version per shard or per hour), so a commit whose cost
//! crept up with the number of versions would slow every writer down over a dataset's life.
//!
//! `commit/append/versions=V` appends one 32-row fragment (three columns) to a dataset of `V`
//! versions in a `memory://` store (no fsync: the format's cost, not the disk's) with
//! `Dataset::append`. After each timed commit the new manifest is deleted (untimed), so every
//! iteration commits version `V + 1` on the same history and the figure does not drift as the
//! benchmark runs. `versions=1` (a fresh dataset) is the baseline.

mod support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_main};
use tessera::paths;

/// History lengths to commit on.
const VERSIONS: [u64; 2] = [1, 300];

fn commit(c: &mut Criterion) {
    let mut group = c.benchmark_group("commit");
    for versions in VERSIONS {
        let ds = support::history(&format!("memory://bench-commit-{versions}"), versions);
        let batch = support::rows(versions * support::ROWS_PER_FRAGMENT, 1);
        let next_key = paths::manifest_key(ds.branch(), versions + 1);
        group.bench_function(BenchmarkId::new("append", format!("versions={versions}")), |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let committed = black_box(ds.append(&batch, "bench commit", support::options()));
                    timed += start.elapsed();
                    let version = committed.expect("the bench commit succeeds").version();
                    assert_eq!(version, versions + 1, "each commit lands on the same history");
                    ds.store().delete(&next_key).expect("the bench commit's manifest is deleted");
                }
                timed
            });
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
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    commit(&mut c);
}

criterion_main!(benches);
