//! Query benchmarks (issue 12): a selective range filter with and without fragment pruning,
//! exact top-100 by cosine distance against numpy, a filtered top-100, and the machine's
//! memory bandwidth measured in the same run.
//!
//! ```text
//! cargo run --release -p tessera-benches --bin query_bench -- [--rows N] [--dim D] [--reps R] [--dir DIR]
//! ```
//! Defaults: 1,000,000 rows, 512-d f32 embeddings, 3 repetitions (medians), a fresh
//! temporary directory (removed afterwards). CI runs it with `--rows 20000`.
//!
//! Synthetic data: `id` i64 = row index (sorted), `cat` i32 = row % 100, `score` f32 and
//! `emb` `f32[D]`, uniform in `[-1, 1)`. Bytes read are counted by a counting store under the
//! dataset (data files, manifests and segments alike); "stored" is the data files' size.
//! numpy runs as `.venv/bin/python` (or `python3`) on the same vectors, written once as raw
//! f32; its time is `X @ q` with the row norms plus `argpartition` and a sort of the top k.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use tessera::{At, Batch, Column, ColumnData, DType, Dataset, Dim, Kind, Limits, Metric, Schema, Store, WriteOptions};
use tessera_query::datafusion::arrow::array::AsArray;
use tessera_query::datafusion::arrow::datatypes::UInt64Type;
use tessera_query::{QueryEngine, ScanOptions};
use tessera_testkit::{CountingStore, XorShift};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const K: usize = 100;
const CHUNK: usize = 10_000;

struct Args {
    rows: usize,
    dim: usize,
    reps: usize,
    dir: Option<PathBuf>,
}

fn args() -> Res<Args> {
    let mut a = Args { rows: 1_000_000, dim: 512, reps: 3, dir: None };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--rows" => a.rows = value()?.parse()?,
            "--dim" => a.dim = value()?.parse()?,
            "--reps" => a.reps = value()?.parse()?,
            "--dir" => a.dir = Some(value()?.into()),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if a.rows < 100 || a.dim == 0 || a.reps == 0 {
        return Err("need --rows >= 100, --dim >= 1, --reps >= 1".into());
    }
    Ok(a)
}

/// Writes the dataset and the same embeddings as raw f32 (`emb.f32`) for numpy.
fn generate(dir: &Path, rows: usize, dim: usize) -> Res<()> {
    let schema = Schema::new([
        Column::new("id", DType::I64, &[]),
        Column::new("cat", DType::I32, &[]),
        Column::new("score", DType::F32, &[]),
        Column::new("emb", DType::F32, &[Dim::Fixed(dim as u64)]).with_kind(Kind::Embedding { metric: Metric::Cosine }),
    ])?;
    let data = dir.join("ds");
    std::fs::create_dir_all(&data)?;
    let ds = Dataset::create(data.to_str().ok_or("path")?, schema, &WriteOptions::default())?;
    let mut writer = ds.writer(WriteOptions::default());
    let mut raw = std::io::BufWriter::new(std::fs::File::create(dir.join("emb.f32"))?);
    let mut rng = XorShift::new(12);
    let mut start = 0usize;
    while start < rows {
        let n = CHUNK.min(rows - start);
        let id: Vec<i64> = (start..start + n).map(|i| i as i64).collect();
        let cat: Vec<i32> = (start..start + n).map(|i| (i % 100) as i32).collect();
        let score: Vec<f32> = (0..n).map(|_| rng.next_f64() as f32).collect();
        let emb: Vec<f32> = (0..n * dim).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
        for v in &emb {
            raw.write_all(&v.to_le_bytes())?;
        }
        let batch = Batch::new()
            .with("id", ColumnData::from_scalars(&id))?
            .with("cat", ColumnData::from_scalars(&cat))?
            .with("score", ColumnData::from_scalars(&score))?
            .with("emb", ColumnData::from_fixed(&[dim as u64], &emb)?)?;
        writer.append(&batch)?;
        start += n;
    }
    raw.flush()?;
    writer.commit("query bench data")?;
    Ok(())
}

/// Median of `reps` runs of `f`, in seconds, and the last result.
fn timed<T>(reps: usize, mut f: impl FnMut() -> Res<T>) -> Res<(f64, T)> {
    let mut times = Vec::with_capacity(reps);
    let mut last = None;
    for _ in 0..reps {
        let t = Instant::now();
        last = Some(f()?);
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], last.ok_or("no run")?))
}

/// Read bandwidth (bytes/s) of summing a 1 GiB buffer with `threads` threads, best of 3.
fn bandwidth(threads: usize) -> f64 {
    let words = (1usize << 30) / 8;
    let buf: Vec<u64> = (0..words as u64).collect();
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        let total: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = buf
                .chunks(words.div_ceil(threads))
                .map(|part| s.spawn(move || part.iter().fold(0u64, |a, &x| a.wrapping_add(x))))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).fold(0u64, u64::wrapping_add)
        });
        std::hint::black_box(total);
        best = best.min(t.elapsed().as_secs_f64());
    }
    (words * 8) as f64 / best
}

/// numpy's exact top-k on the raw vectors: (median ms per query, top-k row ids).
fn numpy(dir: &Path, rows: usize, dim: usize, q: &[f32], reps: usize) -> Res<(f64, Vec<u64>)> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    let python = if venv.exists() { venv } else { PathBuf::from("python3") };
    let qfile = dir.join("q.f32");
    std::fs::write(&qfile, q.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())?;
    let script = r#"
import sys, time, json, numpy as np
path, qpath, rows, dim, k, reps = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
X = np.fromfile(path, dtype=np.float32).reshape(rows, dim)
q = np.fromfile(qpath, dtype=np.float32)
times = []
for _ in range(reps):
    t = time.perf_counter()
    d = 1.0 - (X @ q) / (np.linalg.norm(X, axis=1) * np.linalg.norm(q))
    top = np.argpartition(d, k)[:k]
    top = top[np.argsort(d[top], kind="stable")]
    times.append(time.perf_counter() - t)
times.sort()
print(json.dumps({"ms": times[len(times) // 2] * 1e3, "top": top.tolist()}))
"#;
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(dir.join("emb.f32"))
        .arg(&qfile)
        .args([rows, dim, K, reps].map(|v| v.to_string()))
        .output()?;
    if !out.status.success() {
        return Err(format!("numpy failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let ms = v["ms"].as_f64().ok_or("numpy: no ms")?;
    let top = v["top"].as_array().ok_or("numpy: no top")?.iter().filter_map(serde_json::Value::as_u64).collect();
    Ok((ms, top))
}

fn ids(q: &QueryEngine, sql: &str) -> Res<Vec<u64>> {
    let a = q.sql(sql)?;
    Ok(a.batches.iter().flat_map(|b| b.column(0).as_primitive::<UInt64Type>().values().to_vec()).collect())
}

fn main() -> Res<()> {
    let a = args()?;
    let scratch = tempfile::tempdir()?;
    let dir = a.dir.clone().unwrap_or_else(|| scratch.path().to_path_buf());
    let t = Instant::now();
    if !dir.join("ds").join("branches").exists() {
        generate(&dir, a.rows, a.dim)?;
    }
    println!(
        "data: {} rows, {}-d f32 embeddings, written in {:.1} s ({})",
        a.rows,
        a.dim,
        t.elapsed().as_secs_f64(),
        dir.display()
    );

    let fs = object_store::local::LocalFileSystem::new_with_prefix(std::fs::canonicalize(dir.join("ds"))?)?;
    let counter = Arc::new(CountingStore::new(Arc::new(fs)));
    let store = Store::from_object_store(counter.clone(), "", true);
    let ds = Dataset::open_at(&store, &At::Latest, Limits::default())?;
    let stored: u64 = ds.fragments().iter().flat_map(|f| f.fragment.files.iter().map(|x| x.size)).sum();
    let emb_bytes = (a.rows * a.dim * 4) as f64;
    let read = || counter.counts.get_bytes.load(Ordering::Relaxed);
    println!("stored: {:.1} MB of data files in {} fragments", stored as f64 / 1e6, ds.fragments().len());

    let bw1 = bandwidth(1);
    let threads = std::thread::available_parallelism().map_or(2, usize::from);
    let bwn = bandwidth(threads);
    println!("memory read bandwidth: {:.1} GB/s (1 thread), {:.1} GB/s ({threads} threads)", bw1 / 1e9, bwn / 1e9);
    println!();
    println!("| query | ms (median of {}) | rows/s | bytes read / stored |", a.reps);
    println!("|---|---:|---:|---:|");

    let lo = a.rows / 2;
    let range = format!("SELECT _rowid, score FROM ds WHERE id >= {lo} AND id < {}", lo + a.rows / 100);
    for (label, prune) in [("1% range on sorted `id`, pruning", true), ("1% range on sorted `id`, no pruning", false)] {
        let q = QueryEngine::with_options(ds.clone(), ScanOptions { prune, ..ScanOptions::default() })?;
        let before = read();
        let (secs, n) = timed(a.reps, || Ok(q.sql(&range)?.num_rows()))?;
        let per_query = (read() - before) / a.reps as u64;
        assert_eq!(n, a.rows / 100, "the range query's answer");
        println!(
            "| {label} | {:.1} | {:.2e} | {:.2}% |",
            secs * 1e3,
            a.rows as f64 / secs,
            100.0 * per_query as f64 / stored as f64
        );
    }

    let mut rng = XorShift::new(99);
    let qv: Vec<f32> = (0..a.dim).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
    let lit = qv.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    let q = QueryEngine::new(ds.clone())?;
    let topk = format!("SELECT _rowid FROM ds ORDER BY cosine_distance(emb, [{lit}]) LIMIT {K}");
    let before = read();
    let (secs, ours) = timed(a.reps, || ids(&q, &topk))?;
    let per_query = (read() - before) / a.reps as u64;
    println!(
        "| exact top-{K}, cosine | {:.1} | {:.2e} | {:.1}% |",
        secs * 1e3,
        a.rows as f64 / secs,
        100.0 * per_query as f64 / stored as f64
    );
    let topk_secs = secs;

    let filtered = format!("SELECT _rowid FROM ds WHERE cat = 7 ORDER BY cosine_distance(emb, [{lit}]) LIMIT {K}");
    let before = read();
    let (secs, _) = timed(a.reps, || ids(&q, &filtered))?;
    let per_query = (read() - before) / a.reps as u64;
    println!(
        "| top-{K} where cat = 7 (1%) | {:.1} | {:.2e} | {:.1}% |",
        secs * 1e3,
        a.rows as f64 / secs,
        100.0 * per_query as f64 / stored as f64
    );

    let (np_ms, np_top) = numpy(&dir, a.rows, a.dim, &qv, a.reps)?;
    let overlap = ours.iter().filter(|i| np_top.contains(i)).count();
    println!("| numpy top-{K} (in memory, same vectors) | {np_ms:.1} | {:.2e} | — |", a.rows as f64 / (np_ms / 1e3));
    println!();
    let rate = emb_bytes / topk_secs;
    println!(
        "top-{K}: {:.2} GB/s of embedding bytes = {:.0}% of the {threads}-thread bandwidth ({:.0}% of 1 thread); \
         numpy is {:.2}x our time; answers agree on {overlap}/{K} rows",
        rate / 1e9,
        100.0 * rate / bwn,
        100.0 * rate / bw1,
        np_ms / 1e3 / topk_secs
    );
    Ok(())
}
