//! Vector index benchmark (issue 29): recall@10 against the exact top-10, and queries/s of
//! `ORDER BY cosine_distance(emb, [..]) LIMIT 10` through the SQL engine with and without
//! the version's IVF-Flat index, in one run.
//!
//! ```text
//! cargo run --release -p tessera-benches --bin ann_bench -- [--rows N] [--dim D] [--data clustered|uniform]
//!     [--clusters C] [--spread S] [--lists L] [--nprobe P,P,..] [--queries Q] [--exact-queries E] [--dir DIR]
//! ```
//! Defaults: 1,000,000 rows of 512-d f32, `clustered`: 1,000 centres uniform in `[-1, 1)^D`,
//! each row a centre plus Gaussian noise of standard deviation 0.5 per element (the noise's
//! norm, about 11, is over half the typical distance between centres, about 18, so clusters
//! overlap); `uniform`: every element uniform in `[-1, 1)`, no structure at all (the worst
//! case for any partition index). Queries are fresh points of the same distribution. √rows
//! lists; nprobe 1/64 of them, at least 8 (the default), and the others given. Recall@10 is the share of
//! the exact top-10 found, averaged over the first E queries (20), whose exact answers the
//! exact scan computes; queries/s are over Q queries (200) run one after another.
//! With `--dir DIR` the dataset and index are kept and reused (`DIR/ds`); the build time is
//! reported when the index is built.

use std::path::PathBuf;
use std::time::Instant;

use tessera::ann::IndexSpec;
use tessera::distance::Distance;
use tessera::{At, Batch, Column, ColumnData, DType, Dataset, Dim, Limits, Schema, Store, WriteOptions};
use tessera_query::{QueryEngine, ScanOptions};
use tessera_testkit::XorShift;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const K: usize = 10;
const CHUNK: usize = 20_000;
const INDEX: &str = "bench";

#[derive(Clone, Debug)]
struct Args {
    rows: usize,
    dim: usize,
    uniform: bool,
    clusters: usize,
    spread: f64,
    lists: Option<usize>,
    nprobe: Vec<usize>,
    queries: usize,
    exact_queries: usize,
    dir: Option<PathBuf>,
}

fn args() -> Res<Args> {
    let mut a = Args {
        rows: 1_000_000,
        dim: 512,
        uniform: false,
        clusters: 1000,
        spread: 0.5,
        lists: None,
        nprobe: Vec::new(),
        queries: 200,
        exact_queries: 20,
        dir: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--rows" => a.rows = value()?.parse()?,
            "--dim" => a.dim = value()?.parse()?,
            "--data" => a.uniform = value()? == "uniform",
            "--clusters" => a.clusters = value()?.parse()?,
            "--spread" => a.spread = value()?.parse()?,
            "--lists" => a.lists = Some(value()?.parse()?),
            "--nprobe" => a.nprobe = value()?.split(',').map(str::parse).collect::<Result<_, _>>()?,
            "--queries" => a.queries = value()?.parse()?,
            "--exact-queries" => a.exact_queries = value()?.parse()?,
            "--dir" => a.dir = Some(value()?.into()),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if a.rows < 100 || a.dim == 0 || a.clusters == 0 || a.queries == 0 || a.exact_queries == 0 {
        return Err("need --rows >= 100 and --dim, --clusters, --queries, --exact-queries >= 1".into());
    }
    a.exact_queries = a.exact_queries.min(a.queries);
    Ok(a)
}

/// The data's distribution: centres (clustered) or nothing (uniform).
struct Points {
    centres: Vec<f64>,
    args: Args,
}

impl Points {
    fn new(args: &Args) -> Self {
        let mut rng = XorShift::new(1);
        let centres = if args.uniform {
            Vec::new()
        } else {
            (0..args.clusters * args.dim).map(|_| rng.next_f64() * 2.0 - 1.0).collect()
        };
        Self { centres, args: args.clone() }
    }

    /// One point, appended to `out`.
    fn push(&self, rng: &mut XorShift, out: &mut Vec<f32>) {
        let dim = self.args.dim;
        if self.args.uniform {
            out.extend((0..dim).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32));
            return;
        }
        let c = rng.below(self.args.clusters as u64) as usize;
        for j in 0..dim {
            // Box–Muller: one standard normal per pair of uniforms.
            let (u, v) = (rng.next_f64().max(f64::MIN_POSITIVE), rng.next_f64());
            let z = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
            out.push((self.centres[c * dim + j] + self.args.spread * z) as f32);
        }
    }
}

fn generate(root: &str, args: &Args, points: &Points) -> Res<Dataset> {
    let schema = Schema::new([Column::new("emb", DType::F32, &[Dim::Fixed(args.dim as u64)])])?;
    let ds = Dataset::create(root, schema, &WriteOptions::default())?;
    let mut writer = ds.writer(WriteOptions::default());
    let mut rng = XorShift::new(2);
    let mut start = 0;
    while start < args.rows {
        let n = CHUNK.min(args.rows - start);
        let mut emb = Vec::with_capacity(n * args.dim);
        for _ in 0..n {
            points.push(&mut rng, &mut emb);
        }
        writer.append(&Batch::new().with("emb", ColumnData::from_fixed(&[args.dim as u64], &emb)?)?)?;
        start += n;
    }
    Ok(writer.commit("ann bench data")?)
}

/// The query's SQL and its answer's row ids, timed.
fn top(engine: &QueryEngine, q: &[f32]) -> Res<(Vec<u64>, f64)> {
    let lit: Vec<String> = q.iter().map(|x| format!("{x:?}")).collect();
    let sql = format!("SELECT _rowid FROM ds ORDER BY cosine_distance(emb, [{}]) LIMIT {K}", lit.join(","));
    let t = Instant::now();
    let rows = engine.row_ids(&sql)?;
    Ok((rows, t.elapsed().as_secs_f64()))
}

fn main() -> Res<()> {
    let args = args()?;
    let points = Points::new(&args);
    let tmp = tempfile::tempdir()?;
    let root = args.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf()).join("ds");
    let root_s = root.to_str().ok_or("path")?;
    let ds = match Dataset::open_at(&Store::open(root_s)?, &At::Latest, Limits::default()) {
        Ok(ds) if ds.row_count() == args.rows as u64 => ds,
        _ => {
            let t = Instant::now();
            let ds = generate(root_s, &args, &points)?;
            eprintln!("wrote {} rows of {}-d f32 in {:.1} s", args.rows, args.dim, t.elapsed().as_secs_f64());
            ds
        }
    };
    let index = if let Ok(i) = ds.vector_index(INDEX) {
        i
    } else {
        let t = Instant::now();
        let spec = IndexSpec { lists: args.lists, ..IndexSpec::new(INDEX, "emb", Distance::Cosine) };
        let i = ds.create_vector_index(&spec, &WriteOptions::default())?;
        println!(
            "{}",
            serde_json::json!({"build": {"seconds": t.elapsed().as_secs_f64(), "lists": i.nlist(), "rows": i.rows,
                "bytes": i.data_size, "how": i.build}})
        );
        i
    };
    let mut rng = XorShift::new(3);
    let queries: Vec<Vec<f32>> = (0..args.queries)
        .map(|_| {
            let mut q = Vec::with_capacity(args.dim);
            points.push(&mut rng, &mut q);
            q
        })
        .collect();

    let exact = QueryEngine::with_options(ds.clone(), ScanOptions { vector_index: false, ..ScanOptions::default() })?;
    let mut truth = Vec::new();
    let mut exact_s = 0.0;
    for q in &queries[..args.exact_queries] {
        let (rows, s) = top(&exact, q)?;
        truth.push(rows);
        exact_s += s;
    }
    let exact_qps = args.exact_queries as f64 / exact_s;
    println!("{}", serde_json::json!({"exact": {"queries": args.exact_queries, "qps": exact_qps}}));

    let mut probes = vec![index.default_nprobe()];
    probes.extend(args.nprobe.iter().copied().filter(|&p| p != index.default_nprobe()));
    let mut summary = Vec::new();
    for nprobe in probes {
        let engine =
            QueryEngine::with_options(ds.clone(), ScanOptions { nprobe: Some(nprobe), ..ScanOptions::default() })?;
        let mut found = 0usize;
        let mut secs = 0.0;
        for (i, q) in queries.iter().enumerate() {
            let (rows, s) = top(&engine, q)?;
            secs += s;
            if let Some(t) = truth.get(i) {
                found += rows.iter().filter(|r| t.contains(r)).count();
            }
        }
        let stats = engine.scan_stats();
        if stats.index_searches != args.queries as u64 {
            return Err(format!("the index answered {} of {} queries", stats.index_searches, args.queries).into());
        }
        let qps = args.queries as f64 / secs;
        let recall = found as f64 / (K * args.exact_queries) as f64;
        let line = serde_json::json!({"nprobe": nprobe, "lists": index.nlist(), "recall_at_10": recall, "qps": qps,
            "speedup_over_exact": qps / exact_qps, "entries_per_query": stats.index_entries / args.queries as u64,
            "mb_read_per_query": stats.index_bytes as f64 / args.queries as f64 / 1e6});
        println!("{line}");
        summary.push(line);
    }
    println!(
        "{}",
        serde_json::json!({"summary": {"rows": args.rows, "dim": args.dim, "data": if args.uniform { "uniform" } else { "clustered" },
            "exact_qps": exact_qps, "runs": summary}})
    );
    Ok(())
}
