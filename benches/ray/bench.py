"""Ray ingest throughput against single-process `tessera ingest`, and the commit time of 1,000
fragment records. Run through benches/ray/run.sh (release builds); prints a Markdown table.

The input is the same for every contender: .npy files (`id` i64, `emb` f32 [512]) that
`tessera ingest` reads directly and Ray tasks read by row slices (memory-mapped). Every
column is stored zstd-compressed at --level, so the work per row is the writer's encoding,
which `tessera ingest` does on one thread and a Ray job spreads over its workers.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np


def make_input(folder, rows, seed=0):
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    np.save(os.path.join(folder, "id.npy"), np.arange(rows, dtype=np.int64))
    # Smooth values (a random walk, rounded) so zstd has something to find, as in real features.
    emb = np.cumsum(rng.standard_normal((rows, 512)).astype(np.float32), axis=1).round(2)
    np.save(os.path.join(folder, "emb.npy"), emb.astype(np.float32))


def schema(level):
    c = f"zstd:{level}"
    return [{"name": "id", "dtype": "i64", "compression": c}, {"name": "emb", "dtype": "f32", "shape": [512], "compression": c}]


def ray_ingest(args):
    """One Ray job (ray.init(num_cpus=args.cpus)): `blocks` tasks each read a slice of the
    .npy files and write it through tessera.ray.Sink; one commit."""
    import ray

    import tessera
    import tessera.ray

    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    inp = args.input

    def load(batch):
        ids = np.load(os.path.join(inp, "id.npy"), mmap_mode="r")
        emb = np.load(os.path.join(inp, "emb.npy"), mmap_mode="r")
        lo, hi = int(batch["id"][0]), int(batch["id"][-1]) + 1
        return {"id": np.asarray(ids[lo:hi]), "emb": np.asarray(emb[lo:hi])}

    rows = len(np.load(os.path.join(inp, "id.npy"), mmap_mode="r"))
    # Warm the workers (process start, imports) outside the timed job, as a long-lived
    # cluster would be.
    ray.data.range(args.cpus * 2, override_num_blocks=args.cpus * 2).map_batches(lambda b: b).materialize()
    t = time.perf_counter()
    sink = tessera.ray.Sink(args.dataset, schema=schema(args.level))
    ray.data.range(rows, override_num_blocks=args.blocks).map_batches(load, batch_size=None).write_datasink(sink)
    dt = time.perf_counter() - t
    ds = tessera.open(args.dataset)
    assert len(ds) == rows and sink.tasks == args.blocks, (len(ds), sink.tasks)
    print(json.dumps({"seconds": dt, "rows": rows, "version": sink.version}))


def commit_bench(args):
    """Commit time of 1,000 fragment records (each one data file of 10 rows)."""
    import tessera

    url = os.path.join(args.work, "commit")
    ds = tessera.create(url, schema(3))
    records = []
    rng = np.random.default_rng(1)
    for i in range(1000):
        rows = {"id": np.arange(i * 10, i * 10 + 10), "emb": rng.standard_normal((10, 512)).astype(np.float32)}
        records += ds.write_fragments(rows)
    assert len(records) == 1000
    times = []
    for _ in range(args.repeat):
        base = tessera.open(url, version=1)
        t = time.perf_counter()
        base.commit_fragments(records, mode="overwrite" if base.version > 1 else "append")
        times.append(time.perf_counter() - t)
        shutil.rmtree(os.path.join(url, "branches", "main"), ignore_errors=True)
        ds = tessera.create(url, schema(3))  # same schema: the records stay valid
    print(json.dumps({"seconds": sorted(times)[len(times) // 2], "all": times}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--level", type=int, default=9)
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--tessera", default="target/release/tessera")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--work", default=None)
    sub = p.add_subparsers(dest="cmd")
    r = sub.add_parser("ray")
    r.add_argument("input")
    r.add_argument("dataset")
    r.add_argument("--cpus", type=int, required=True)
    sub.add_parser("commit")
    args = p.parse_args()
    if args.cmd == "ray":
        return ray_ingest(args)
    work_given = args.work is not None
    work = args.work or tempfile.mkdtemp(prefix="tessera-ray-bench-")
    args.work = work
    if args.cmd == "commit":
        return commit_bench(args)

    inp = os.path.join(work, "input")
    make_input(inp, args.rows)
    raw = os.path.getsize(os.path.join(inp, "emb.npy")) + os.path.getsize(os.path.join(inp, "id.npy"))
    results = {}

    def best(fn):
        return min(fn(i) for i in range(args.repeat))

    def ingest(i):
        ds = os.path.join(work, f"ingest-{i}")
        comp = f"*=zstd:{args.level}"
        t = time.perf_counter()
        subprocess.run([args.tessera, "ingest", ds, os.path.join(inp, "id.npy"), os.path.join(inp, "emb.npy"),
                        "--compress", comp, "-q"], check=True)
        return time.perf_counter() - t

    results["tessera ingest (one process)"] = best(ingest)
    for cpus in (1, 2):
        def ray_run(i, cpus=cpus):
            ds = os.path.join(work, f"ray{cpus}-{i}")
            out = subprocess.run([sys.executable, __file__, "--level", str(args.level), "--blocks", str(args.blocks),
                                  "ray", inp, ds, "--cpus", str(cpus)], check=True, capture_output=True, text=True)
            return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]
        results[f"Ray, {cpus} worker{'s' if cpus > 1 else ''}"] = best(ray_run)
    out = subprocess.run([sys.executable, __file__, "--repeat", str(args.repeat), "--work", work, "commit"],
                         check=True, capture_output=True, text=True)
    commit = json.loads(out.stdout.strip().splitlines()[-1])["seconds"]

    base = results["tessera ingest (one process)"]
    print(f"{args.rows} rows, {raw / 2**20:.0f} MiB raw (id i64, emb f32[512]), zstd:{args.level}, "
          f"{args.blocks} Ray blocks, best of {args.repeat}")
    print("| ingest | seconds | MiB/s (raw) | vs tessera ingest |")
    print("|---|---|---|---|")
    for name, s in results.items():
        print(f"| {name} | {s:.2f} | {raw / 2**20 / s:.0f} | {base / s:.2f}x |")
    print(f"\ncommit of 1,000 fragment records (validation of 1,000 data files included): {commit * 1e3:.0f} ms")
    if not work_given:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
