//! Compressed image pages at speed, on mm224 made from real photos (when installed; see
//! `tessera_benches::photos`):
//!
//! 1. each codec's own single-core decode rate on image pages (none, lz4, zstd-1, zstd-3),
//!    without and with the CRC-32 check, and its stored/raw ratio;
//! 2. the loader on none, lz4 and zstd-3 image pages against `read()` of the uncompressed data
//!    files, in the same run (2 workers, batch 64, global shuffle, checksums on);
//! 3. the same datasets in a modelled bucket (`tessera_benches::link`): +20 ms per GET and one
//!    shared link of 10 or 25 Gbit/s, where bytes cost time but no CPU: which codec wins when
//!    the bytes have to travel;
//! 4. with `--http`, the same datasets from the benchmark's HTTP server
//!    (`scripts/benchserver.sh start`, `eval "$(scripts/benchserver.sh env)"`), through a
//!    loopback proxy adding 0 and 20 ms per request: which codec wins where every byte travels.
//!
//! `--json` prints one JSON object per row and a last line `{"summary": {"lz4_vs_none": a,
//! "zstd3_vs_none": b, ...}}` (loader rates on local files over the uncompressed rate; the
//! best codec per bucket model and, with `--http`, per delay).
//!
//! `cargo run --release -p tessera-benches --bin codecs -- [ROWS] [--epochs N] [--http] [--json]`

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use tessera::Store;
use tessera_benches::codecs::{self, BenchResult, LOADER_CODECS};
use tessera_benches::link::LinkStore;
use tessera_loader_tch::throughput::measure;
use tessera_loader_tch::{Loader, LoaderConfig, ShuffleMode};
use tessera_testkit::{Latency, LatencyProxy, ProxyConfig};

struct Args {
    rows: usize,
    epochs: u64,
    http: bool,
    json: bool,
}

fn args() -> Args {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let mut a = Args { rows: 4000, epochs: 2, http: false, json: false };
    let mut it = raw.iter();
    while let Some(s) = it.next() {
        match s.as_str() {
            "--http" => a.http = true,
            "--json" => a.json = true,
            "--epochs" => a.epochs = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.epochs),
            n => a.rows = n.parse().unwrap_or(a.rows),
        }
    }
    a
}

fn main() -> BenchResult<()> {
    let a = args();
    let (pictures, source) = codecs::pictures()?;
    let load =
        || std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split(' ').next().unwrap_or("?").to_string();
    if !a.json {
        println!("mm224 image pages from {source}; load average {} at start", load());
        println!("{:<8} {:>7} {:>11} {:>14} {:>18}", "codec", "stored", "compressed", "decode MB/s", "decode+CRC MB/s");
    }
    for r in codecs::decode_rates(&pictures, 256, Duration::from_millis(700))? {
        if a.json {
            println!(
                "{}",
                json!({"row": "decode", "codec": r.codec, "ratio": r.ratio, "compressed_pages": r.compressed_pages,
                       "decode_mb_s": r.decode_mb_s, "verified_mb_s": r.verified_mb_s, "source": source})
            );
        } else {
            println!(
                "{:<8} {:>6.1}% {:>10.0}% {:>14.0} {:>18.0}",
                r.codec,
                100.0 * r.ratio,
                100.0 * r.compressed_pages,
                r.decode_mb_s,
                r.verified_mb_s
            );
        }
    }
    let (read_rate, rates) = codecs::loader_rates(a.rows, a.epochs, 2, 2, &pictures)?;
    let none = rates.iter().find(|r| r.codec == "none").map_or(f64::MIN_POSITIVE, |r| r.samples_per_sec);
    if !a.json {
        println!("\nloader, {} rows, 2 workers, batch 64, global shuffle, checksums on; best of 2", a.rows);
        println!("read() of the uncompressed data files: {read_rate:.0} samples/s");
        println!("{:<8} {:>11} {:>9} {:>9} {:>14}", "codec", "samples/s", "of read", "of none", "MB read/epoch");
    }
    for r in &rates {
        if a.json {
            println!(
                "{}",
                json!({"row": "loader", "codec": r.codec, "rows": a.rows, "samples_per_sec": r.samples_per_sec,
                       "of_read": r.of_read, "vs_none": r.samples_per_sec / none, "read_samples_per_sec": read_rate,
                       "bytes_per_epoch": r.bytes_per_epoch})
            );
        } else {
            println!(
                "{:<8} {:>11.0} {:>8.2}x {:>8.2}x {:>14.0}",
                r.codec,
                r.samples_per_sec,
                r.of_read,
                r.samples_per_sec / none,
                r.bytes_per_epoch as f64 / 1e6
            );
        }
    }
    let mut summary = serde_json::Map::new();
    for r in &rates {
        if r.codec != "none" {
            summary.insert(format!("{}_vs_none", r.codec.replace('-', "")), json!(r.samples_per_sec / none));
        }
    }
    for (ms, gbit) in [(20u64, 10.0f64), (20, 25.0)] {
        let best = bucket_rows(&a, &pictures, ms, gbit)?;
        summary.insert(format!("bucket_{ms}ms_{gbit:.0}gbit_best"), json!(best));
    }
    if a.http {
        let winners = http_rows(&a, &pictures)?;
        for (ms, w) in winners {
            summary.insert(format!("http_{ms}ms_best"), json!(w));
        }
    }
    summary.insert("load_average".into(), json!(load()));
    if a.json {
        println!("{}", json!({"summary": summary}));
    } else {
        println!("load average {} at the end", load());
    }
    Ok(())
}

/// The loader settings of the object-store rows: 8 workers hide the latency.
fn remote_config(location: &str) -> LoaderConfig {
    let mut cfg =
        LoaderConfig::new(location).with_batch_size(64).with_seed(1).with_shuffle(ShuffleMode::Global).with_workers(8);
    cfg.prefetch_batches = cfg.prefetch_batches.max(10);
    cfg
}

/// The loader on each codec's dataset in a modelled bucket: `ms` per GET, one shared link of
/// `gbit` Gbit/s (`tessera_benches::link`); returns the codec with the best rate.
fn bucket_rows(a: &Args, pictures: &[Vec<u8>], ms: u64, gbit: f64) -> BenchResult<&'static str> {
    if !a.json {
        println!(
            "\nmodelled bucket: +{ms} ms per GET, one {gbit:.0} Gbit/s link (bytes cost time, not CPU); 8 workers"
        );
        println!("{:<8} {:>11} {:>9} {:>14} {:>9}", "codec", "samples/s", "of none", "MB read/epoch", "GETs");
    }
    let mut rows: Vec<(&'static str, f64)> = Vec::new();
    for codec in LOADER_CODECS {
        let dir = std::fs::canonicalize(codecs::dataset(codec, a.rows, pictures)?)?;
        let fs: Arc<dyn object_store::ObjectStore> =
            Arc::new(object_store::local::LocalFileSystem::new_with_prefix(&dir)?);
        let link = LinkStore::new(fs, Duration::from_millis(ms), gbit * 1e9 / 8.0);
        let store = Store::from_object_store(Arc::new(link), "", true);
        let loader = Loader::open_store(&store, remote_config(dir.to_str().unwrap_or_default()))?;
        measure(&loader, 1, 0)?;
        let t = measure(&loader, 0, a.epochs)?;
        let none = rows.first().map_or(t.samples_per_sec(), |r| r.1);
        rows.push((codec, t.samples_per_sec()));
        let (mb, gets) = (t.storage_bytes as f64 / 1e6 / a.epochs as f64, t.requests / a.epochs.max(1));
        if a.json {
            println!(
                "{}",
                json!({"row": "bucket", "codec": codec, "added_ms": ms, "link_gbit": gbit,
                       "samples_per_sec": t.samples_per_sec(), "vs_none": t.samples_per_sec() / none,
                       "mb_read_per_epoch": mb, "requests_per_epoch": gets})
            );
        } else {
            println!(
                "{codec:<8} {:>11.0} {:>8.2}x {mb:>14.0} {gets:>9}",
                t.samples_per_sec(),
                t.samples_per_sec() / none
            );
        }
    }
    Ok(rows.iter().max_by(|x, y| x.1.total_cmp(&y.1)).map_or("none", |r| r.0))
}

/// The loader on each codec's dataset from the benchmark's HTTP server, through the latency
/// proxy at 0 and 20 ms; returns the best codec per delay.
fn http_rows(a: &Args, pictures: &[Vec<u8>]) -> BenchResult<Vec<(u64, &'static str)>> {
    let Some(base) = std::env::var("TESSERA_BENCH_HTTP").ok().filter(|s| !s.is_empty()) else {
        eprintln!(
            "--http needs the benchmark server: scripts/benchserver.sh start; eval \"$(scripts/benchserver.sh env)\""
        );
        std::process::exit(2);
    };
    let server = base.trim_start_matches("http://").trim_end_matches('/').parse()?;
    tessera::store::install_crypto_provider();
    if !a.json {
        println!("\nfrom the HTTP server ({base}, nginx) through a loopback proxy; 8 workers");
        println!(
            "{:<8} {:>6} {:>11} {:>9} {:>14} {:>9}",
            "codec", "+ms", "samples/s", "of none", "MB read/epoch", "GETs"
        );
    }
    let mut winners = Vec::new();
    for ms in [0u64, 20] {
        let per_request = Latency::new(Duration::from_millis(ms), Duration::ZERO);
        let proxy = LatencyProxy::start(server, ProxyConfig { per_request, ..ProxyConfig::default() })?;
        let options = object_store::ClientOptions::new().with_allow_http(true);
        let http =
            object_store::http::HttpBuilder::new().with_url(proxy.endpoint()).with_client_options(options).build()?;
        let http: Arc<dyn object_store::ObjectStore> = Arc::new(http);
        let mut rows: Vec<(&'static str, f64)> = Vec::new();
        for codec in LOADER_CODECS {
            let dir = codecs::dataset(codec, a.rows, pictures)?;
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            let store = Store::from_object_store(http.clone(), &name, false);
            let loader = Loader::open_store(&store, remote_config(&format!("{base}/{name}")))?;
            measure(&loader, 1, 0)?;
            let before = proxy.stats.requests.load(Ordering::Relaxed);
            let t = measure(&loader, 0, a.epochs)?;
            let gets = (proxy.stats.requests.load(Ordering::Relaxed) - before) / a.epochs.max(1);
            let none = rows.first().map_or(t.samples_per_sec(), |r| r.1);
            rows.push((codec, t.samples_per_sec()));
            let mb = t.storage_bytes as f64 / 1e6 / a.epochs.max(1) as f64;
            if a.json {
                println!(
                    "{}",
                    json!({"row": "http", "codec": codec, "added_ms": ms, "samples_per_sec": t.samples_per_sec(),
                           "vs_none": t.samples_per_sec() / none, "mb_read_per_epoch": mb, "gets_per_epoch": gets})
                );
            } else {
                println!(
                    "{codec:<8} {ms:>6} {:>11.0} {:>8.2}x {mb:>14.0} {gets:>9}",
                    t.samples_per_sec(),
                    t.samples_per_sec() / none
                );
            }
        }
        let best = rows.iter().max_by(|x, y| x.1.total_cmp(&y.1)).map_or("none", |r| r.0);
        winners.push((ms, best));
    }
    Ok(winners)
}
