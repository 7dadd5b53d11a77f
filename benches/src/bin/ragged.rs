//! Variable-shape columns at line rate: the varshape workload (`tessera_benches::varshape`:
//! images of 96–512 px per side, 0.5–10 s of audio, captions, 0–20 boxes per row; about
//! 620 KB per row) read by the loader with batch 32, global shuffle, checksums on and the
//! default 2 workers, in packed (jagged) and padded layout, uncompressed and zstd-3, against
//! `read()` of the uncompressed data files in the same run.
//!
//! Per row: samples/s, the share of the `read()` rate, MB/s of delivered tensors, delivered
//! bytes per stored payload byte (packed is about 1; padded pays the batch maximum of every
//! ragged dim) and the loader's accounted memory high-water mark.
//!
//! `cargo run --release -p tessera-benches --bin ragged -- [ROWS] [--epochs N] [--json]`
//! (ROWS 2,000 by default, about 1.2 GB per codec, written under `target/varshape-*` on first
//! use). `--json` prints one object per row and a last line `{"summary":
//! {"ragged_packed_vs_read": a, "ragged_padded_vs_read": b, "zstd_packed_vs_read": c,
//! "padded_bytes_per_payload": d}}`.

use std::path::PathBuf;

use serde_json::json;
use tessera::Compression;
use tessera_benches::{mm224, varshape};
use tessera_loader_tch::throughput::measure;
use tessera_loader_tch::{Loader, LoaderConfig, RaggedLayout, RaggedOptions, ShuffleMode};

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

fn dataset(rows: usize, codec: Compression, name: &str) -> BenchResult<PathBuf> {
    let dir = PathBuf::from(format!("target/varshape-{name}-{rows}"));
    let fresh = tessera::Dataset::open(dir.to_str().unwrap_or_default()).is_ok_and(|d| d.row_count() == rows as u64);
    if !fresh {
        varshape::generate(&dir, rows, codec)?;
    }
    Ok(dir)
}

fn main() -> BenchResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rows: usize = args.iter().find_map(|s| s.parse().ok()).unwrap_or(varshape::ROWS);
    let epochs: u64 = args
        .iter()
        .position(|a| a == "--epochs")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let as_json = args.iter().any(|a| a == "--json");
    let none = dataset(rows, Compression::None, "none")?;
    let zstd = dataset(rows, Compression::Zstd { level: 3 }, "zstd3")?;
    let (raw_bytes, raw_secs) = mm224::raw_read(&none, 3)?;
    let read_rate = rows as f64 / raw_secs;
    let payload = raw_bytes as f64 / rows as f64;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    if as_json {
        println!(
            "{}",
            json!({"row": "read()", "samples_per_s": read_rate, "mb_per_s": raw_bytes as f64 / 1e6 / raw_secs})
        );
    } else {
        println!(
            "varshape, {rows} rows ({:.0} KB per row stored), batch 32, global shuffle, checksums on, 2 workers; load {}",
            payload / 1e3,
            load.trim()
        );
        println!(
            "read() of the uncompressed data files: {read_rate:.0} samples/s, {:.0} MB/s",
            raw_bytes as f64 / 1e6 / raw_secs
        );
        println!(
            "{:<8} {:<7} {:>10} {:>8} {:>9} {:>11} {:>9}",
            "codec", "layout", "samples/s", "of read", "MB/s out", "out/payload", "acct MiB"
        );
    }
    let mut ratio = std::collections::HashMap::new();
    let mut padded_bytes = f64::NAN;
    for (codec, dir) in [("none", &none), ("zstd-3", &zstd)] {
        for (lname, layout) in [("packed", RaggedLayout::Packed), ("padded", RaggedLayout::Padded)] {
            let mut cfg = LoaderConfig::new(dir.to_str().unwrap_or_default())
                .with_batch_size(32)
                .with_seed(1)
                .with_shuffle(ShuffleMode::Global);
            cfg.ragged = RaggedOptions { layout, ..RaggedOptions::default() };
            let loader = Loader::open(cfg)?;
            let t = measure(&loader, 1, epochs)?;
            let out_per_payload = t.tensor_bytes as f64 / t.samples as f64 / payload;
            let of_read = t.samples_per_sec() / read_rate;
            ratio.insert((codec, lname), of_read);
            if codec == "none" && lname == "padded" {
                padded_bytes = out_per_payload;
            }
            let acct = t.memory.high_water as f64 / f64::from(1 << 20);
            if as_json {
                println!(
                    "{}",
                    json!({"codec": codec, "layout": lname, "samples_per_s": t.samples_per_sec(), "of_read": of_read,
                           "tensor_mb_per_s": t.tensor_mb_per_sec(), "out_per_payload": out_per_payload,
                           "accounted_high_water_mb": acct})
                );
            } else {
                println!(
                    "{codec:<8} {lname:<7} {:>10.0} {:>8.2} {:>9.0} {:>11.2} {:>9.0}",
                    t.samples_per_sec(),
                    of_read,
                    t.tensor_mb_per_sec(),
                    out_per_payload,
                    acct
                );
            }
        }
    }
    let get = |c: &str, l: &str| ratio.get(&(c, l)).copied().unwrap_or(f64::NAN);
    println!(
        "{}",
        json!({"summary": {
            "ragged_packed_vs_read": get("none", "packed"),
            "ragged_padded_vs_read": get("none", "padded"),
            "zstd_packed_vs_read": get("zstd-3", "packed"),
            "padded_bytes_per_payload": padded_bytes,
            "load_average": load.split_whitespace().next().unwrap_or_default(),
        }})
    );
    if !as_json {
        println!("(of read: samples/s over read() of the uncompressed files; out/payload: bytes of the delivered");
        println!(
            " tensors per stored byte of a row; acct: the loader's accounted memory high-water mark, budget 1 GiB)"
        );
    }
    Ok(())
}
