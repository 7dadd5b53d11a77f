//! The benchmark's HTTP server (nginx, `scripts/benchserver.sh`) serves the loader the same
//! bytes as local files: an epoch read through `http://` equals the epoch read from the folder,
//! batch by batch and byte for byte, with global and block shuffle, on compressed (lz4, zstd)
//! and ragged columns.
//!
//! The test starts its own nginx on a free port (about 10 ms), serving a temporary folder.
//! Without nginx (`scripts/setup.d/60-benchserver.sh` installs it) it is skipped with a notice,
//! except in CI, where it fails.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

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
    let loader = Loader::open(cfg).expect("open");
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
