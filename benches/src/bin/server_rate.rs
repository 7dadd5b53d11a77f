//! The raw range-GET rate of an object server, through `object_store` (the client the loader
//! uses): MB/s for 1 MB and 8 MB ranges and requests/s for 64 KB ranges, at 1, 8 and 32
//! requests in flight, against `pread` of the same file in the same run.
//!
//! Start a benchmark server first, then name a large file under `target/` (a data file of an
//! mm224 dataset, say):
//! - HTTP (`scripts/benchserver.sh start`, nginx serving `target/`): `URL_BASE` is its
//!   `http://127.0.0.1:PORT`, and the object is `FILE_UNDER_TARGET` below it;
//! - S3 (`scripts/benchbucket.sh start`, an S3 server whose buckets are `target/`'s folders,
//!   with its `env` exported): `URL_BASE` is `s3`, and the object is `s3://FIRST/REST` for
//!   `FILE_UNDER_TARGET` = `FIRST/REST`.
//!
//! `cargo run --release -p tessera-benches --bin server_rate -- URL_BASE FILE_UNDER_TARGET [SECONDS]`

use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Range starts: a fixed pseudo-random walk over the file, aligned to the range size.
fn starts(size: u64, len: u64, n: usize) -> Vec<u64> {
    let slots = (size / len).max(1);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % slots) * len
        })
        .collect()
}

fn main() -> BenchResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(base), Some(rel)) = (args.first(), args.get(1)) else {
        eprintln!("usage: server_rate URL_BASE FILE_UNDER_TARGET [SECONDS]");
        std::process::exit(2);
    };
    let secs: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let local = std::path::Path::new("target").join(rel);
    let size = std::fs::metadata(&local)?.len();
    tessera::store::install_crypto_provider();
    let (store, path): (Arc<dyn ObjectStore>, Path) = if base == "s3" {
        let Some((bucket, key)) = rel.split_once('/') else {
            return Err(format!("{rel}: name a file inside a folder of target/ (its bucket)").into());
        };
        let s3 = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket).build()?;
        (Arc::new(s3), Path::from(key))
    } else {
        let options = object_store::ClientOptions::new().with_allow_http(true);
        let http =
            object_store::http::HttpBuilder::new().with_url(base.as_str()).with_client_options(options).build()?;
        (Arc::new(http), Path::from(rel.as_str()))
    };
    let rt = tessera::blocking::runtime();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("{base}/{rel} ({:.0} MB); load average {}", size as f64 / 1e6, load.split(' ').next().unwrap_or("?"));
    println!("{:<8} {:>9} {:>12} {:>12} {:>14}", "range", "in flight", "server MB/s", "server req/s", "pread MB/s");
    let file = std::fs::File::open(&local)?;
    for len in [64u64 << 10, 1 << 20, 8 << 20] {
        for inflight in [1usize, 8, 32] {
            let t = Instant::now();
            let mut done = 0u64;
            let offsets = starts(size.saturating_sub(len), len, 1 << 20);
            let mut i = 0;
            while t.elapsed() < Duration::from_secs_f64(secs) {
                let batch: Vec<u64> = offsets.iter().cycle().skip(i).take(inflight * 4).copied().collect();
                i += batch.len();
                let results: Vec<_> = rt.block_on(
                    futures::stream::iter(batch.iter().map(|&o| {
                        let (store, path) = (store.clone(), path.clone());
                        async move { store.get_range(&path, o..o + len).await }
                    }))
                    .buffer_unordered(inflight)
                    .collect(),
                );
                for r in results {
                    if r?.len() as u64 != len {
                        return Err("short range body".into());
                    }
                    done += 1;
                }
            }
            let el = t.elapsed().as_secs_f64();
            // pread of the same ranges, one thread, same file (page cache): the local ceiling.
            let mut buf = vec![0u8; len as usize];
            let tp = Instant::now();
            let mut pdone = 0u64;
            for &o in offsets.iter().cycle() {
                file.read_exact_at(&mut buf, o)?;
                pdone += 1;
                if tp.elapsed().as_secs_f64() > secs / 4.0 {
                    break;
                }
            }
            let pel = tp.elapsed().as_secs_f64();
            println!(
                "{:<8} {inflight:>9} {:>12.0} {:>12.0} {:>14.0}",
                format!("{} KB", len >> 10),
                (done * len) as f64 / 1e6 / el,
                done as f64 / el,
                (pdone * len) as f64 / 1e6 / pel
            );
        }
    }
    Ok(())
}
