//! Block shuffle against global shuffle on the mm224 workload (about 153 KB per sample,
//! batch 64, checksums on), on local files and on an in-memory object store with 0 and 20 ms
//! added per GET, with the shuffle quality of each mode.
//!
//! Per row: samples/s of the timed (warm) epochs, Block's rate as a share of Global's on the
//! same source **in the same run**, storage requests per sample, bytes read per byte
//! delivered, the loader's accounted memory high-water mark and the process's peak resident
//! set above its level before the loader opened (`VmHWM`, reset per row). The quality lines
//! come from the epoch plans alone (see [`quality`]).
//!
//! `cargo run --release -p tessera-benches --bin block_shuffle -- [ROWS] [EPOCHS] [--local-only] [--block-only]`
//! (ROWS 10000, EPOCHS 2 by default). The dataset is generated under
//! `target/block-shuffle-mm224-ROWS` (or `$BLOCK_SHUFFLE_DIR`) on first use.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::memory::InMemory;
use tessera::{Compression, Store};
use tessera_benches::mm224;
use tessera_benches::procfs::{files_under, peak_rss, reset_peak_rss};
use tessera_loader_tch::sampler::{adjacent_pair_retention, displacement_stats};
use tessera_loader_tch::throughput::{Throughput, measure};
use tessera_loader_tch::{Loader, LoaderConfig, Plan, ShuffleMode};
use tessera_testkit::{FaultConfig, FaultyStore, Latency};

/// Window of the block rows: 4 fragments of about 64 MB.
const BLOCK: ShuffleMode = ShuffleMode::Block { window_fragments: 4 };

/// Shuffle quality of one epoch order, as fractions (see [`quality`]).
struct Quality {
    /// Mean |position − dataset position| / N (1/3 for a uniform permutation).
    displacement: f64,
    /// Share of consecutive output pairs that were consecutive in storage (≈ 1/N uniform).
    adjacent: f64,
    /// Mean distinct fragments per batch, over the fragments a batch could hold at most.
    fragments_per_batch: f64,
}

/// Shuffle quality of an epoch's global order G, three figures (not assertions):
///
/// * **displacement**: mean over rows of |position in G − position in the dataset| / N.
///   A uniform permutation gives ≈ 1/3; sequential order 0. Block moves whole fragments far,
///   so it is also ≈ 1/3 with many fragments: this figure says rows travel, not that
///   neighbours are separated.
/// * **adjacent pairs kept**: the share of consecutive pairs of G that were consecutive in
///   storage (row r followed by r + 1). ≈ 1/N for Global, ≈ 1/W for Block with W rows per
///   window, 1 for sequential order.
/// * **fragments per batch**: the mean number of distinct fragments a batch's rows come from,
///   as a share of the most it could be (min(batch size, fragments)): what block shuffle
///   gives up, since a batch only mixes the fragments of its window.
#[allow(clippy::cast_precision_loss)]
fn quality(plan: &Plan, fragment_rows: &[u64], batch: usize) -> Quality {
    let g = plan.collect_global_order();
    let d = displacement_stats(&g);
    let mut ends = Vec::with_capacity(fragment_rows.len());
    let mut end = 0u64;
    for &r in fragment_rows {
        end += r;
        ends.push(end);
    }
    let cap = batch.min(fragment_rows.iter().filter(|&&r| r > 0).count()).max(1);
    let (mut sum, mut n) = (0usize, 0usize);
    for b in g.chunks(batch) {
        let frags: HashSet<usize> = b.iter().map(|&row| ends.partition_point(|&e| e <= row)).collect();
        sum += frags.len();
        n += 1;
    }
    Quality {
        displacement: d.mean_normalized,
        adjacent: adjacent_pair_retention(&g),
        fragments_per_batch: sum as f64 / n.max(1) as f64 / cap as f64,
    }
}

struct Row {
    source: String,
    shuffle: &'static str,
    t: Throughput,
    rss: u64,
}

fn run(
    source: &str,
    shuffle: &'static str,
    mode: ShuffleMode,
    open: &dyn Fn(LoaderConfig) -> tessera_loader_tch::Result<Loader>,
    cfg: &LoaderConfig,
    epochs: u64,
) -> Result<Row, Box<dyn std::error::Error>> {
    reset_peak_rss();
    let base_rss = peak_rss();
    let loader = open(cfg.clone().with_shuffle(mode))?;
    let t = measure(&loader, 1, epochs)?;
    let rss = peak_rss().saturating_sub(base_rss);
    Ok(Row { source: source.to_string(), shuffle, t, rss })
}

#[allow(clippy::cast_precision_loss)]
fn print(r: &Row, global: Option<f64>) {
    let t = &r.t;
    println!(
        "{:<18} {:<9} {:>10.0} {:>10} {:>9.3} {:>9.3} {:>9.1} MiB {:>9.1} MiB",
        r.source,
        r.shuffle,
        t.samples_per_sec(),
        global.map_or_else(|| "-".to_string(), |g| format!("{:.0}%", 100.0 * t.samples_per_sec() / g)),
        t.requests as f64 / t.samples.max(1) as f64,
        t.storage_bytes as f64 / t.tensor_bytes.max(1) as f64,
        t.memory.high_water as f64 / f64::from(1 << 20),
        r.rss as f64 / f64::from(1 << 20),
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let nums: Vec<u64> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let rows = nums.first().copied().unwrap_or(mm224::ROWS as u64) as usize;
    let epochs = nums.get(1).copied().unwrap_or(2);
    let local_only = args.iter().any(|a| a == "--local-only");
    let block_only = args.iter().any(|a| a == "--block-only");
    let dir = std::env::var_os("BLOCK_SHUFFLE_DIR")
        .map_or_else(|| PathBuf::from(format!("target/block-shuffle-mm224-{rows}")), PathBuf::from);
    let loc = dir.to_str().unwrap_or_default().to_string();
    if tessera::Dataset::open(&loc).map_or(true, |d| d.row_count() != rows as u64) {
        mm224::generate(&dir, rows, Compression::None)?;
    }
    let cfg = LoaderConfig::new(&loc).with_batch_size(64).with_seed(1).with_workers(2);
    println!(
        "mm224, {rows} rows, batch 64, checksums on, 2 workers, budget {} MiB; one untimed epoch, {epochs} timed; load {}",
        cfg.memory_budget >> 20,
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split_whitespace().next().unwrap_or("?")
    );
    {
        let loader = Loader::open(cfg.clone())?;
        let pc = loader.plan_config();
        let fragment_rows: Vec<u64> = loader.dataset().fragments().iter().map(|f| f.fragment.live_rows()).collect();
        for (name, mode) in [("global", ShuffleMode::Global), ("block(4)", BLOCK)] {
            let plan = Plan::new(tessera_loader_tch::PlanConfig { shuffle: mode, ..pc.clone() }, 1)?;
            let q = quality(&plan, &fragment_rows, 64);
            println!(
                "quality {name:<9}: mean displacement {:.3} of N, adjacent pairs kept {:.5}, fragments per batch {:.2} of max ({} fragments)",
                q.displacement,
                q.adjacent,
                q.fragments_per_batch,
                fragment_rows.len()
            );
        }
    }
    println!(
        "{:<18} {:<9} {:>10} {:>10} {:>9} {:>9} {:>13} {:>13}",
        "source", "shuffle", "samples/s", "of global", "req/samp", "read/out", "peak memory", "peak RSS (+)"
    );
    let shuffles: Vec<(&'static str, ShuffleMode)> =
        if block_only { vec![("block(4)", BLOCK)] } else { vec![("global", ShuffleMode::Global), ("block(4)", BLOCK)] };
    let local = |c: LoaderConfig| Loader::open(c);
    let mut global = None;
    for &(name, mode) in &shuffles {
        let r = run("local files", name, mode, &local, &cfg, epochs)?;
        print(&r, if name == "global" { None } else { global });
        if name == "global" {
            global = Some(r.t.samples_per_sec());
        }
    }
    if local_only {
        return Ok(());
    }
    let mem: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let mut files = Vec::new();
    files_under(&dir, &dir, &mut files)?;
    let store = Store::from_object_store(mem.clone(), "", true);
    for (key, path) in &files {
        store.put_if_absent(key, Bytes::from(std::fs::read(path)?))?;
    }
    for ms in [0u64, 20] {
        let latency = Latency::new(Duration::from_millis(ms), Duration::ZERO);
        let faulty =
            Arc::new(FaultyStore::new(mem.clone(), FaultConfig { get_latency: latency, ..FaultConfig::seeded(1) }));
        let store = Store::from_object_store(faulty, "", false);
        let open = |c: LoaderConfig| Loader::open_store(&store, c);
        let mut global = None;
        for &(name, mode) in &shuffles {
            let r = run(&format!("memory +{ms} ms"), name, mode, &open, &cfg, epochs)?;
            print(&r, if name == "global" { None } else { global });
            if name == "global" {
                global = Some(r.t.samples_per_sec());
            }
        }
    }
    println!("(req/samp: storage requests per sample; read/out: bytes read per byte of delivered tensors;");
    println!(" peak memory: the loader's accounted high-water mark; peak RSS (+): the process's resident");
    println!(" high-water mark above its level before the loader opened; of global: same source, same run)");
    Ok(())
}
