//! The sampler: the epoch permutation and the plan every rank builds at each epoch start.
//!
//! Before its first batch, every rank of every epoch builds a [`Plan`]: a few numbers from
//! which the global order G is evaluated position by position (a keyed Feistel bijection for
//! `Global`, per-window bijections over permuted blocks of rows for `Block`). Building it runs
//! on the training process's critical path (and again on resume), and evaluating G runs in the
//! filling threads, so both must stay far below the time of a batch.
//!
//! Groups (epochs of 1 M rows, throughput in rows):
//! * `permutation/xoshiro256ss_1M`: `Xoshiro256StarStar::shuffle` of 1 M `u64` in place, the
//!   Fisher–Yates shuffle of order v1, for comparison;
//! * `permutation/plan_global_1M`: `Plan::new` with `ShuffleMode::Global` and
//!   `Plan::collect_global_order`: every position of G evaluated once;
//! * `plan_build/{none,global,block-16,block-256}`: `Plan::new` for 20 000 fragments of 50
//!   rows, batch 256 on 8 ranks;
//! * `plan_rank_epoch/{global,block-16}`: every batch of rank 0 through `Plan::batch_into`
//!   with a reused buffer, an eighth of the rows (throughput in those rows): what the filling
//!   threads and the block window's schedule evaluate over an epoch.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_main};
use tessera_loader::sampler::{Xoshiro256StarStar, seed_for};
use tessera_loader::{Plan, PlanConfig, ShuffleMode};

/// Rows of every planned epoch.
const ROWS: u64 = 1_000_000;
/// Fragments of the many-fragment dataset (of `ROWS / FRAGMENTS` rows each).
const FRAGMENTS: u64 = 20_000;

fn config(rows: u64, fragments: u64, shuffle: ShuffleMode) -> PlanConfig {
    PlanConfig {
        rows,
        fragments,
        dataset_id: 0x7E55_E7A0,
        seed: 42,
        shuffle,
        batch_size: 256,
        world_size: 8,
        rank: 0,
        drop_last: false,
    }
}

fn permutation(c: &mut Criterion) {
    let mut group = c.benchmark_group("permutation");
    group.throughput(Throughput::Elements(ROWS));
    let rows: Vec<u64> = (0..ROWS).collect();
    group.bench_function("xoshiro256ss_1M", |b| {
        b.iter_batched_ref(
            || rows.clone(),
            |order| Xoshiro256StarStar::new(seed_for(1, 2, 3, 0)).shuffle(order),
            BatchSize::LargeInput,
        );
    });
    let global = config(ROWS, 1, ShuffleMode::Global);
    Plan::new(global.clone(), 0).expect("global plan builds");
    group.bench_function("plan_global_1M", |b| {
        b.iter_batched(
            || global.clone(),
            |cfg| Plan::new(cfg, black_box(0)).map(|p| p.collect_global_order()),
            BatchSize::LargeInput,
        );
    });
    group.finish();
}

fn plan(c: &mut Criterion) {
    let modes = [
        ("none", ShuffleMode::None),
        ("global", ShuffleMode::Global),
        ("block-16", ShuffleMode::Block { window_fragments: 16 }),
        ("block-256", ShuffleMode::Block { window_fragments: 256 }),
    ];
    let mut group = c.benchmark_group("plan_build");
    group.throughput(Throughput::Elements(ROWS));
    for (name, shuffle) in modes {
        let cfg = config(ROWS, FRAGMENTS, shuffle);
        Plan::new(cfg.clone(), 0).expect("plan builds");
        group.bench_function(name, |b| {
            b.iter_batched(|| cfg.clone(), |cfg| Plan::new(cfg, black_box(0)), BatchSize::LargeInput);
        });
    }
    group.finish();

    let mut group = c.benchmark_group("plan_rank_epoch");
    for (name, shuffle) in [modes[1], modes[2]] {
        let plan = Plan::new(config(ROWS, FRAGMENTS, shuffle), 0).expect("plan builds");
        // Rank 0's rows: an eighth of the epoch.
        group.throughput(Throughput::Elements(plan.batches().map(|b| b.len()).sum::<usize>() as u64));
        let mut batch = Vec::new();
        group.bench_function(name, |b| {
            b.iter(|| {
                let plan = black_box(&plan);
                (0..plan.batches_per_rank()).map(|i| u64::from(plan.batch_into(i, &mut batch))).sum::<u64>()
            });
        });
    }
    group.finish();
}

/// Runs this file's groups with a short default configuration (a few seconds per benchmark);
/// command-line options (`--quick`, `--measurement-time`, a name filter) override it.
fn benches() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    permutation(&mut c);
    plan(&mut c);
}

criterion_main!(benches);
