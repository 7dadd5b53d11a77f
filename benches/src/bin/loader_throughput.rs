//! Loader throughput on the mm224 workload (about 153 KB per sample, batch 64) against the raw
//! `read()` limit of the same files, for each shuffle mode, codec, checksum setting and worker
//! count. Generates the workload under `target/` on first use.
//!
//! `cargo run --release -p tessera-benches --bin loader_throughput -- [ROWS] [EPOCHS]`

use std::path::PathBuf;

use tessera::Compression;
use tessera_benches::mm224;
use tessera_benches::procfs::{peak_rss, reset_peak_rss};
use tessera_loader_tch::throughput::{measure, raw_read_limit};
use tessera_loader_tch::{Loader, LoaderConfig, ShuffleMode};

fn dataset(name: &str, rows: usize, codec: Compression) -> Result<PathBuf, Box<dyn std::error::Error>> {
    let dir = PathBuf::from(format!("target/{name}"));
    let fresh = tessera::Dataset::open(dir.to_str().unwrap_or_default()).is_ok_and(|d| d.row_count() == rows as u64);
    if !fresh {
        mm224::generate(&dir, rows, codec)?;
    }
    Ok(dir)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let rows: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(mm224::ROWS);
    let epochs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(2);
    let none = dataset("mm224-none", rows, Compression::None)?;
    let lz4 = dataset("mm224-lz4", rows, Compression::Lz4)?;
    let zstd = dataset("mm224-zstd3", rows, Compression::Zstd { level: 3 })?;

    let base = |dir: &PathBuf| LoaderConfig::new(dir.to_str().unwrap_or_default()).with_batch_size(64).with_seed(1);
    let (raw_bytes, raw_secs) = raw_read_limit(&Loader::open(base(&none))?, 3)?;
    let raw_rate = rows as f64 / raw_secs.as_secs_f64();
    println!(
        "raw read() of the data files: {:.0} MB/s = {raw_rate:.0} samples/s ({rows} rows, {:.0} MB)",
        raw_bytes as f64 / 1e6 / raw_secs.as_secs_f64(),
        raw_bytes as f64 / 1e6
    );
    println!(
        "{:<8} {:<12} {:<6} {:>7} {:>11} {:>9} {:>8} {:>9} {:>10} {:>12} {:>14}",
        "codec",
        "shuffle",
        "crc",
        "workers",
        "samples/s",
        "MB/s",
        "of raw",
        "requests",
        "MB read",
        "peak memory",
        "peak RSS (+)"
    );
    let shuffles = [
        ("global", ShuffleMode::Global),
        ("block(4)", ShuffleMode::Block { window_fragments: 4 }),
        ("none", ShuffleMode::None),
    ];
    // Generated pictures; `codecs` measures the codecs on real photos.
    for (codec, dir) in [("none", &none), ("lz4", &lz4), ("zstd-3", &zstd)] {
        for (sname, shuffle) in shuffles {
            for verify in [true, false] {
                if codec != "none" && !verify {
                    continue; // compressed pages are read whole either way
                }
                for workers in [1, 2] {
                    let mut cfg = base(dir).with_shuffle(shuffle).with_workers(workers);
                    cfg.verify_checksums = verify;
                    reset_peak_rss();
                    let base_rss = peak_rss();
                    let loader = Loader::open(cfg)?;
                    let t = measure(&loader, 1, epochs)?;
                    let rss = peak_rss().saturating_sub(base_rss);
                    drop(loader);
                    println!(
                        "{codec:<8} {sname:<12} {:<6} {workers:>7} {:>11.0} {:>9.0} {:>7.0}% {:>9} {:>10.0} {:>8.1} MiB {:>10.1} MiB",
                        if verify { "on" } else { "off" },
                        t.samples_per_sec(),
                        t.tensor_mb_per_sec(),
                        100.0 * t.samples_per_sec() / raw_rate,
                        t.requests / epochs,
                        t.storage_bytes as f64 / 1e6 / epochs as f64,
                        t.memory.high_water as f64 / f64::from(1 << 20),
                        rss as f64 / f64::from(1 << 20),
                    );
                }
            }
        }
    }
    println!("(requests and MB read are per epoch; peak memory is the loader's accounted high-water mark, budget");
    println!(" 1024 MiB; peak RSS (+) is the process's resident high-water mark above its level before the loader)");
    Ok(())
}
