//! A mixture of three sources against one dataset of the same total size, in one run.
//!
//! Sources: two datasets of ROWS rows and a view of ROWS rows (every other row of a dataset
//! of 2 × ROWS); the single source: one dataset of 3 × ROWS rows. Every row is a 64 × 64 × 3
//! u8 image (12 KiB) and an i64 label, in fragments of 1,000 rows; the loader reads both
//! columns, global shuffle, batch 64, checksums on, 2 workers, local files. Epochs alternate
//! between the two loaders (mixture, single, mixture, …) so both see the same machine state.
//!
//! Prints samples/s of each (warm epochs), the mixture's rate as a share of the single
//! source's, and the observed share of each source over an epoch against its weight.
//!
//! `cargo run --release -p tessera-benches --bin mixture -- [ROWS] [EPOCHS] [--no-view]`
//! (10000, 3 by default; `--no-view` makes the third source a dataset of ROWS rows, which
//! separates the cost of a view's sparse rows, whose pages also hold rows outside it, from
//! the mixture's own). The datasets are written under `target/mixture-ROWS` (or `$MIXTURE_DIR`) on
//! first use.

use std::path::{Path, PathBuf};
use std::time::Instant;

use tessera::{Batch, Column, ColumnData, DType, Dataset, Dim, Schema, WriteOptions};
use tessera_loader::{Loader, LoaderConfig, MixSource, Mixture, ShuffleMode};

const SIDE: u64 = 64;
const FRAGMENT: u64 = 1_000;
const WEIGHTS: [f64; 3] = [0.5, 0.3, 0.2];

/// A dataset of `rows` rows at `root` unless it exists: label = `tag × 10^6 + row`, and a
/// deterministic image.
fn dataset(root: &Path, rows: u64, tag: i64) -> Dataset {
    if let Ok(ds) = Dataset::open(root.to_str().expect("utf-8 path")) {
        return ds;
    }
    let schema = Schema::new([
        Column::new("image", DType::U8, &[Dim::Fixed(SIDE), Dim::Fixed(SIDE), Dim::Fixed(3)]),
        Column::new("label", DType::I64, &[]),
    ])
    .expect("schema");
    let mut ds = Dataset::create(root.to_str().expect("utf-8 path"), schema, &WriteOptions::default()).expect("create");
    let per = (SIDE * SIDE * 3) as usize;
    for start in (0..rows).step_by(FRAGMENT as usize) {
        let n = FRAGMENT.min(rows - start);
        let labels: Vec<i64> = (start..start + n).map(|r| tag * 1_000_000 + r as i64).collect();
        let mut pixels = vec![0u8; per * n as usize];
        for (i, px) in pixels.iter_mut().enumerate() {
            *px = (i as u64).wrapping_mul(2_654_435_761).wrapping_add(start) as u8;
        }
        let batch = Batch::new()
            .with("image", ColumnData::from_fixed(&[SIDE, SIDE, 3], &pixels).expect("image"))
            .expect("image")
            .with("label", ColumnData::from_scalars(&labels))
            .expect("label");
        ds = ds.append(&batch, "rows", WriteOptions::default()).expect("append");
    }
    ds
}

fn base(config: LoaderConfig) -> LoaderConfig {
    config.with_batch_size(64).with_shuffle(ShuffleMode::Global).with_workers(2).with_seed(5)
}

/// One epoch: samples/s, and the samples each source delivered (by label) in the epoch's
/// real positions.
fn epoch(loader: &Loader, e: u64, real: usize) -> (f64, [usize; 3]) {
    let t = Instant::now();
    let mut counts = [0usize; 3];
    let mut seen = 0usize;
    let mut samples = 0usize;
    for batch in loader.epoch(e).expect("epoch") {
        let batch = batch.expect("batch");
        samples += batch.rows.len();
        for &s in &batch.sources {
            if seen < real {
                counts[s as usize] += 1;
            }
            seen += 1;
        }
    }
    (samples as f64 / t.elapsed().as_secs_f64(), counts)
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let no_view = args.iter().any(|a| a == "--no-view");
    args.retain(|a| a != "--no-view");
    let rows: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let epochs: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let dir =
        std::env::var_os("MIXTURE_DIR").map_or_else(|| PathBuf::from(format!("target/mixture-{rows}")), PathBuf::from);
    std::fs::create_dir_all(&dir).expect("bench dir");
    let t = Instant::now();
    dataset(&dir.join("a"), rows, 0);
    dataset(&dir.join("b"), rows, 1);
    let c = dataset(&dir.join("c"), 2 * rows, 2);
    if c.view("half").is_err() {
        let picked: Vec<u64> = (0..2 * rows).step_by(2).collect();
        c.save_view("half", &picked, "every other row").expect("view");
    }
    dataset(&dir.join("single"), 3 * rows, 3);
    if no_view {
        dataset(&dir.join("d"), rows, 2);
    }
    eprintln!("datasets ready in {:.1} s under {}", t.elapsed().as_secs_f64(), dir.display());

    let loc = |name: &str| dir.join(name).to_str().expect("utf-8 path").to_string();
    let mix = Mixture::weighted(
        [
            MixSource::new(loc("a")),
            MixSource::new(loc("b")),
            if no_view { MixSource::new(loc("d")) } else { MixSource::new(loc("c")).view("half") },
        ],
        &WEIGHTS,
    );
    let mixed = Loader::open(base(LoaderConfig::for_mixture(mix))).expect("mixture loader");
    let single = Loader::open(base(LoaderConfig::new(loc("single")))).expect("single loader");
    let real = (3 * rows) as usize;
    // Warm-up epoch each (page cache, buffers), then alternate.
    epoch(&mixed, 0, real);
    epoch(&single, 0, real);
    let (mut mix_rates, mut single_rates) = (Vec::new(), Vec::new());
    let mut shares = Vec::new();
    for e in 1..=epochs {
        let (r, counts) = epoch(&mixed, e, real);
        mix_rates.push(r);
        shares.push(counts);
        single_rates.push(epoch(&single, e, real).0);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (m, s) = (mean(&mix_rates), mean(&single_rates));
    println!("rows per source {rows}, {epochs} timed epochs each, alternating; batch 64, global shuffle, 2 workers");
    println!("| loader | samples/s (mean of epochs) | per epoch |");
    println!("|---|---|---|");
    let fmt = |v: &[f64]| v.iter().map(|r| format!("{r:.0}")).collect::<Vec<_>>().join(" / ");
    let third = if no_view { "three datasets" } else { "one a view" };
    println!("| mixture of 3 (0.5 / 0.3 / 0.2, {third}) | {m:.0} | {} |", fmt(&mix_rates));
    println!("| one dataset of {} rows | {s:.0} | {} |", 3 * rows, fmt(&single_rates));
    println!("mixture / single: {:.3}", m / s);
    println!("| source | weight | observed share per epoch | worst error (relative) |");
    println!("|---|---|---|---|");
    for (k, w) in WEIGHTS.iter().enumerate() {
        let obs: Vec<f64> = shares.iter().map(|c| c[k] as f64 / real as f64).collect();
        let worst = obs.iter().map(|o| (o - w).abs() / w).fold(0.0, f64::max);
        let list = obs.iter().map(|o| format!("{o:.4}")).collect::<Vec<_>>().join(" / ");
        println!("| {k} | {w} | {list} | {:.2}% |", 100.0 * worst);
    }
}
