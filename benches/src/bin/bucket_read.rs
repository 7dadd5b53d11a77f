//! The limit of a link to a bucket: every object under a prefix fetched whole, in 8 MiB
//! range GETs with a fixed number in flight, through `object_store` (the loader's client),
//! bodies dropped. What a loader of the same bytes through the same server and link can at
//! most deliver; `benches/peers/run.py --remote` reports it beside each system.
//!
//! `cargo run --release -p tessera-benches --bin bucket_read -- s3://BUCKET/PREFIX [IN_FLIGHT] [EPOCHS]`
//! (S3 settings from the environment, as `scripts/benchbucket.sh env` prints them); prints one
//! JSON line: bytes per pass and MB/s of each pass.

use std::sync::Arc;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The size of one range GET.
const RANGE: u64 = 8 << 20;

fn main() -> BenchResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(url) = args.first() else {
        eprintln!("usage: bucket_read s3://BUCKET/PREFIX [IN_FLIGHT] [EPOCHS]");
        std::process::exit(2);
    };
    let in_flight: usize = args.get(1).map_or(Ok(32), |s| s.parse())?;
    let epochs: usize = args.get(2).map_or(Ok(2), |s| s.parse())?;
    tessera::store::install_crypto_provider();
    let parsed = url::Url::parse(url)?;
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::aws::AmazonS3Builder::from_env().with_url(url).build()?);
    let prefix = Path::from_url_path(parsed.path())?;
    let rt = tessera::blocking::runtime();
    let objects: Vec<_> = rt.block_on(store.list(Some(&prefix)).try_collect::<Vec<_>>())?;
    let ranges: Vec<(Path, std::ops::Range<u64>)> = objects
        .iter()
        .flat_map(|o| {
            (0..o.size.div_ceil(RANGE)).map(|i| (o.location.clone(), i * RANGE..((i + 1) * RANGE).min(o.size)))
        })
        .collect();
    let total: u64 = objects.iter().map(|o| o.size).sum();
    let mut rates = Vec::new();
    for _ in 0..epochs {
        let t = Instant::now();
        let got: u64 = rt.block_on(
            futures::stream::iter(ranges.iter().cloned().map(|(path, r)| {
                let store = store.clone();
                async move { store.get_range(&path, r).await.map(|b| b.len() as u64) }
            }))
            .buffer_unordered(in_flight.max(1))
            .try_fold(0u64, |acc, n| async move { Ok(acc + n) }),
        )?;
        if got != total {
            return Err(format!("read {got} bytes of {total}").into());
        }
        rates.push(total as f64 / 1e6 / t.elapsed().as_secs_f64());
    }
    println!(
        "{}",
        serde_json::json!({
            "url": url, "objects": objects.len(), "bytes": total, "in_flight": in_flight,
            "range_bytes": RANGE, "mb_per_sec": rates,
        })
    );
    Ok(())
}
