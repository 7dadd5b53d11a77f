//! The benchmarks' servers serve the loader the same bytes as local files: an epoch read
//! through them equals the epoch read from the folder, batch by batch and byte for byte, with
//! global and block shuffle, on compressed (lz4, zstd) and ragged columns.
//!
//! - HTTP (nginx, `scripts/benchserver.sh`): the test starts its own nginx on a free port
//!   (about 10 ms), serving a temporary folder. Without nginx (`scripts/setup.d/60-benchserver.sh`
//!   installs it) it is skipped with a notice, except in CI, where it fails.
//! - S3 (`scripts/benchbucket.sh`: bench-s3 behind the delay proxy): the script builds bench-s3
//!   on first use (about 2 minutes), then the epochs run through a 20 ms round trip, with and
//!   without the loader's disk cache.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera::store::Store;
use tessera::{Batch, Column, ColumnData, Compression, DType, Dataset, Dim, Schema, WriteOptions};
use tessera_loader_tch::{Loader, LoaderConfig, ShuffleMode};
use tessera_testkit::servers::in_ci;

const ROWS: usize = 300;

/// A running nginx serving a folder; stopped on drop.
struct Server {
    script: PathBuf,
    port: u16,
    run: PathBuf,
}

impl Server {
    fn script(&self, verb: &str, dir: Option<&Path>) -> std::process::Output {
        let mut cmd = Command::new("bash");
        cmd.arg(&self.script).arg(verb);
        if let Some(d) = dir {
            cmd.arg(d);
        }
        cmd.env("TESSERA_BENCH_PORT", self.port.to_string()).env("TESSERA_BENCH_RUN", &self.run);
        cmd.output().expect("bash runs")
    }

    /// Starts nginx on `dir`, or `None` (outside CI) when nginx is not installed.
    fn start(dir: &Path, run: PathBuf) -> Option<Self> {
        let installed = Path::new("/usr/lib/nginx/modules/ngx_http_dav_ext_module.so").is_file()
            && Command::new("nginx").arg("-v").output().is_ok_and(|o| o.status.success());
        if !installed {
            let msg = "nginx with the WebDAV module is not installed (scripts/setup.d/60-benchserver.sh)";
            assert!(!in_ci(), "{msg}; in CI this test is never skipped");
            eprintln!("SKIPPED: {msg}");
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/benchserver.sh");
        let server = Self { script, port, run };
        let out = server.script("start", Some(dir));
        assert!(out.status.success(), "benchserver start: {}", String::from_utf8_lossy(&out.stderr));
        Some(server)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.script("stop", None);
    }
}

/// A dataset with an lz4 image-like column, a zstd ragged column and plain scalars, in
/// several data files.
fn write_dataset(dir: &Path) {
    let schema = Schema::new([
        Column::new("img", DType::U8, &[Dim::Fixed(24), Dim::Fixed(24), Dim::Fixed(3)])
            .with_compression(Compression::Lz4),
        Column::new("tok", DType::I32, &[Dim::Ragged]).with_compression(Compression::Zstd { level: 3 }),
        Column::new("id", DType::I64, &[]),
    ])
    .expect("schema");
    let ds = Dataset::create(dir.to_str().expect("utf-8"), schema, &WriteOptions::default()).expect("create");
    for start in (0..ROWS).step_by(100) {
        let mut w = ds.writer(WriteOptions::default());
        let ids: Vec<i64> = (start as i64..(start + 100) as i64).collect();
        // Smooth with a little noise: lz4 finds matches but not everywhere.
        let img: Vec<u8> =
            ids.iter().flat_map(|&id| (0..24 * 24 * 3i64).map(move |k| (k / 7 + id * 3 + k * 31 % 5) as u8)).collect();
        let tok: Vec<Vec<i32>> =
            ids.iter().map(|&id| (0..(id % 17) as i32).map(|t| t * 5 + id as i32).collect()).collect();
        let tok_rows: Vec<&[i32]> = tok.iter().map(Vec::as_slice).collect();
        let batch = Batch::new()
            .with("img", ColumnData::from_fixed(&[24, 24, 3], &img).expect("img"))
            .and_then(|b| b.with("tok", ColumnData::from_sequences(&tok_rows)))
            .and_then(|b| b.with("id", ColumnData::from_scalars(&ids)))
            .expect("batch");
        w.append(&batch).expect("append");
        w.commit("rows").expect("commit");
    }
}

/// One tensor of a batch: name (`column.part`), element kind, shape and bytes.
type Tensor = (String, String, Vec<i64>, Vec<u8>);

/// Every tensor of every batch of `epoch`, in order.
fn epoch(cfg: LoaderConfig, epoch: u64) -> Vec<Vec<Tensor>> {
    drain(&Loader::open(cfg).expect("open"), epoch)
}

/// Every tensor of every batch of `epoch` of `loader`, in order.
fn drain(loader: &Loader, epoch: u64) -> Vec<Vec<Tensor>> {
    let mut out = Vec::new();
    for batch in loader.epoch(epoch).expect("epoch") {
        let batch = batch.expect("batch");
        let mut tensors = Vec::new();
        for name in batch.names() {
            let c = batch.column(name).expect("column");
            let parts = [
                ("values", Some(&c.values)),
                ("lengths", c.lengths.as_ref()),
                ("offsets", c.offsets.as_ref()),
                ("valid", c.valid.as_ref()),
            ];
            for (part, t) in parts {
                let Some(t) = t else { continue };
                let t = t.contiguous();
                let bytes = t.numel() * t.kind().elt_size_in_bytes();
                let mut buf = vec![0u8; bytes];
                t.copy_data_u8(&mut buf, t.numel());
                tensors.push((format!("{name}.{part}"), format!("{:?}", t.kind()), t.size(), buf));
            }
        }
        out.push(tensors);
    }
    out
}

#[test]
fn an_epoch_over_http_equals_the_local_epoch() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("served");
    let ds = data.join("ds");
    write_dataset(&ds);
    let Some(server) = Server::start(&data, tmp.path().join("run")) else { return };
    let url = format!("http://127.0.0.1:{}/ds", server.port);
    for shuffle in [ShuffleMode::Global, ShuffleMode::Block { window_fragments: 2 }] {
        let cfg =
            |loc: &str| LoaderConfig::new(loc).with_batch_size(16).with_seed(5).with_workers(2).with_shuffle(shuffle);
        for e in [0, 1] {
            let local = epoch(cfg(ds.to_str().expect("utf-8")), e);
            let remote = epoch(cfg(&url), e);
            assert_eq!(local.len(), ROWS.div_ceil(16), "{shuffle:?}: batches per epoch");
            assert_eq!(remote.len(), local.len(), "{shuffle:?} epoch {e}: batch count over HTTP");
            for (i, (l, r)) in local.iter().zip(&remote).enumerate() {
                assert!(l == r, "{shuffle:?} epoch {e}: batch {i} differs over HTTP");
            }
        }
    }
    drop(server);
}

/// A running bench-s3 behind the delay proxy (`scripts/benchbucket.sh`) serving a folder;
/// stopped on drop.
struct Bucket {
    script: PathBuf,
    port: u16,
    run: PathBuf,
}

impl Bucket {
    fn script(&self, args: &[&str]) -> std::process::Output {
        let mut cmd = Command::new("bash");
        cmd.arg(&self.script).args(args);
        cmd.env("TESSERA_BUCKET_PORT", self.port.to_string())
            .env("TESSERA_BUCKET_RUN", &self.run)
            .env("TESSERA_BUCKET_PROXY", env!("CARGO_BIN_EXE_delay_proxy"));
        cmd.output().expect("bash runs")
    }

    /// Two free neighbouring ports: the server's and the proxy's.
    fn ports() -> u16 {
        for _ in 0..50 {
            let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
            if port < u16::MAX && TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
                return port;
            }
        }
        panic!("no two free neighbouring ports");
    }

    fn start(dir: &Path, run: PathBuf, rtt_ms: u32) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/benchbucket.sh");
        let bucket = Self { script, port: Self::ports(), run };
        let out = bucket.script(&["start", dir.to_str().expect("utf-8"), &rtt_ms.to_string()]);
        assert!(out.status.success(), "benchbucket start: {}", String::from_utf8_lossy(&out.stderr));
        bucket
    }

    /// An S3 store of `bucket` with the settings `benchbucket.sh env` prints (the loader's own
    /// `s3://` path reads them from the environment, which a test should not change).
    fn store(&self, bucket: &str, prefix: &str) -> Store {
        let out = self.script(&["env"]);
        let line = String::from_utf8(out.stdout).expect("utf-8");
        let var = |name: &str| {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(name).and_then(|r| r.strip_prefix('=')))
                .unwrap_or_else(|| panic!("{name} in {line}"))
                .to_string()
        };
        tessera::store::install_crypto_provider();
        let s3 = object_store::aws::AmazonS3Builder::new()
            .with_endpoint(var("AWS_ENDPOINT"))
            .with_allow_http(true)
            .with_region(var("AWS_REGION"))
            .with_access_key_id(var("AWS_ACCESS_KEY_ID"))
            .with_secret_access_key(var("AWS_SECRET_ACCESS_KEY"))
            .with_bucket_name(bucket)
            .build()
            .expect("s3 store");
        Store::from_object_store(Arc::new(s3), prefix, true)
    }
}

impl Drop for Bucket {
    fn drop(&mut self) {
        let _ = self.script(&["stop"]);
    }
}

/// Every tensor of every batch of `epoch`, read through `store`.
fn store_epoch(store: &Store, cfg: LoaderConfig, epoch: u64) -> Vec<Vec<Tensor>> {
    drain(&Loader::open_store(store, cfg).expect("open through the bucket"), epoch)
}

#[test]
fn an_epoch_from_the_bench_bucket_equals_the_local_epoch() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("served");
    let ds = data.join("bucket1").join("ds");
    write_dataset(&ds);
    let bucket = Bucket::start(&data, tmp.path().join("run"), 20);
    let store = bucket.store("bucket1", "ds");
    let cache = tmp.path().join("cache");
    for (shuffle, cached) in [(ShuffleMode::Global, false), (ShuffleMode::Block { window_fragments: 2 }, true)] {
        let cfg = |c: bool| {
            let cfg = LoaderConfig::new(ds.to_str().expect("utf-8"))
                .with_batch_size(16)
                .with_seed(5)
                .with_workers(2)
                .with_shuffle(shuffle);
            if c { cfg.with_cache_dir(&cache, 64 << 20) } else { cfg }
        };
        let local = epoch(cfg(false), 1);
        let t = Instant::now();
        let remote = store_epoch(&store, cfg(cached), 1);
        assert!(t.elapsed() >= Duration::from_millis(40), "{shuffle:?}: no round trip took the delay");
        assert_eq!(remote.len(), local.len(), "{shuffle:?}: batch count from the bucket");
        for (i, (l, r)) in local.iter().zip(&remote).enumerate() {
            assert!(l == r, "{shuffle:?}: batch {i} differs from the bucket");
        }
    }
    let cached = std::fs::read_dir(&cache).map_or(0, Iterator::count);
    assert!(cached > 0, "the cached epoch left entries in {}", cache.display());
    // `stop` leaves nothing behind: no process on either port, no pid file, no probe
    // namespace.
    let out = bucket.script(&["stop"]);
    assert!(out.status.success(), "benchbucket stop: {}", String::from_utf8_lossy(&out.stderr));
    for port in [bucket.port, bucket.port + 1] {
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "something still answers on {port}");
    }
    let left: Vec<PathBuf> = std::fs::read_dir(&bucket.run)
        .expect("run dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pid") || p.ends_with("endpoint"))
        .collect();
    assert!(left.is_empty(), "benchbucket stop left {left:?}");
    let status = String::from_utf8(bucket.script(&["status"]).stdout).expect("utf-8");
    assert!(status.contains("stopped"), "status after stop: {status}");
    if let Ok(ns) = Command::new("ip").args(["netns", "list"]).output() {
        let ns = String::from_utf8_lossy(&ns.stdout);
        assert!(!ns.contains("tessera-probe"), "a probe namespace was left: {ns}");
    }
}
