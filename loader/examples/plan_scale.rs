//! Epoch plans at scale (issue 26): what building a [`Plan`] and computing a rank's first batch
//! cost as the row count grows, now that G is evaluated on demand.
//!
//! ```text
//! cargo run --release -p tessera-loader --example plan_scale -j1 [-- --fisher-yates ROWS]
//! ```
//! For N = 10^6, 10^8, 10^9 and 10^10 rows in fragments of 1 Mi rows, world size 64, batch
//! 1024, rank 0, shuffles Global and Block (8 fragments per window): the time of `Plan::new`,
//! the time of rank 0's first batch, the time per row over its first 1000 batches, the plan's
//! heap bytes, and the process's peak resident set so far (`VmHWM`, which only grows).
//!
//! `--fisher-yates ROWS` instead measures what order v1 did per rank and epoch: allocate all
//! ROWS positions and shuffle them with Fisher–Yates over xoshiro256\*\* (8·ROWS bytes).

use std::time::Instant;

use tessera_loader::sampler::{Xoshiro256StarStar, seed_for};
use tessera_loader::{Plan, PlanConfig, ShuffleMode};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Rows per fragment.
const FRAGMENT_ROWS: u64 = 1 << 20;

/// The process's peak resident set in MiB (`VmHWM`), or 0 where /proc is unavailable.
fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024)
}

fn config(rows: u64, shuffle: ShuffleMode) -> PlanConfig {
    PlanConfig {
        rows,
        fragments: rows.div_ceil(FRAGMENT_ROWS),
        dataset_id: 0x7E55_E7A0,
        seed: 42,
        shuffle,
        batch_size: 1024,
        world_size: 64,
        rank: 0,
        drop_last: false,
    }
}

fn fisher_yates(rows: u64) {
    let start = Instant::now();
    let mut order: Vec<u64> = (0..rows).collect();
    Xoshiro256StarStar::new(seed_for(1, 2, 3, 0)).shuffle(&mut order);
    let took = start.elapsed();
    println!(
        "Fisher-Yates (order v1) of {rows} rows: {:.2} s, peak RSS {} MiB (first row {})",
        took.as_secs_f64(),
        peak_rss_mib(),
        order.first().copied().unwrap_or(0)
    );
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, rows] = &args[..]
        && flag == "--fisher-yates"
    {
        fisher_yates(rows.parse()?);
        return Ok(());
    }
    println!(
        "fragments of {FRAGMENT_ROWS} rows, world 64, batch 1024, rank 0; peak RSS before: {} MiB",
        peak_rss_mib()
    );
    println!(
        "{:>14} {:<9} {:>10} {:>12} {:>14} {:>11} {:>13}",
        "rows", "shuffle", "fragments", "Plan::new", "first batch", "ns/row", "peak RSS"
    );
    let mut batch = Vec::new();
    for rows in [1_000_000u64, 100_000_000, 1_000_000_000, 10_000_000_000] {
        for (name, shuffle) in
            [("global", ShuffleMode::Global), ("block(8)", ShuffleMode::Block { window_fragments: 8 })]
        {
            let cfg = config(rows, shuffle);
            let fragments = cfg.fragments;
            let start = Instant::now();
            let plan = Plan::new(cfg, 1)?;
            let built = start.elapsed();
            let start = Instant::now();
            plan.batch_into(0, &mut batch);
            let first = start.elapsed();
            // Steady state: rank 0's next 1000 batches (1,024,000 rows) with a reused buffer.
            let count = plan.batches_per_rank().min(1001);
            let start = Instant::now();
            let mut sum = 0u64;
            for i in 1..count {
                plan.batch_into(i, &mut batch);
                sum = sum.wrapping_add(batch[0]);
            }
            #[allow(clippy::cast_precision_loss)]
            let per_row = start.elapsed().as_nanos() as f64 / ((count.max(2) - 1) * 1024) as f64;
            println!(
                "{rows:>14} {name:<9} {fragments:>10} {:>9.3} ms {:>11.3} ms {per_row:>11.1} {:>9} MiB   (plan heap {} B, {sum:x})",
                built.as_secs_f64() * 1e3,
                first.as_secs_f64() * 1e3,
                peak_rss_mib(),
                plan.heap_bytes(),
            );
        }
    }
    Ok(())
}
