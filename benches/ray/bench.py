"""Ray ingest throughput against single-process `tessera ingest`, and the commit time of 1,000
fragment records. Run through benches/ray/run.sh (release builds); prints Markdown tables.

The input is the same for every contender: .npy files (`id` i64, `emb` f32 [512]) that
`tessera ingest` reads directly and Ray tasks read by row slices (memory-mapped). Every
column is stored zstd-compressed at --level, so the work per row is the writer's encoding,
which `tessera ingest` does on one thread and a Ray job spreads over its workers.

Contenders, run in interleaved rounds (--repeat), each in a fresh process:

* `tessera ingest`, as shipped (decoder threads = CPUs; the writer encodes on one thread) and
  with `--jobs 1`;
* two `tessera ingest --jobs 1` processes at once, each on one half of the rows: what this
  machine gives two processes doing the same work with no framework (the ceiling for Ray);
* a Ray job (`ray.init(num_cpus=W)`, W = 1, 2), `--blocks` tasks, one commit, with Ray Data's
  defaults and with its operator resource reservation off
  (`DataContext.op_resource_reservation_enabled = False`).

For a Ray job it reports the job's seconds (from `write_datasink` to its return: planning,
tasks, commit; Ray itself already started, its workers warm, as on a long-lived cluster). The
same Ray instance first runs the job on half the rows: the difference between the two is the
steady-state cost of the other half, and the fixed part is the full job less its rows at that
rate (planning, Ray Data's ramp-up to all workers, the last task's tail, the commit). It also
says when two tasks first ran at once. `ray.init` is timed apart.
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
    """`id.npy`, `emb.npy` of `rows` rows in `folder`, and the same rows split in two halves
    under `folder/half0`, `folder/half1`."""
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    ids = np.arange(rows, dtype=np.int64)
    # Smooth values (a random walk, rounded) so zstd has something to find, as in real features.
    emb = np.cumsum(rng.standard_normal((rows, 512)).astype(np.float32), axis=1).round(2).astype(np.float32)
    np.save(os.path.join(folder, "id.npy"), ids)
    np.save(os.path.join(folder, "emb.npy"), emb)
    for h, part in enumerate((slice(0, rows // 2), slice(rows // 2, rows))):
        os.makedirs(os.path.join(folder, f"half{h}"), exist_ok=True)
        np.save(os.path.join(folder, f"half{h}", "id.npy"), ids[part])
        np.save(os.path.join(folder, f"half{h}", "emb.npy"), emb[part])


def schema(level):
    c = f"zstd:{level}"
    return [{"name": "id", "dtype": "i64", "compression": c}, {"name": "emb", "dtype": "f32", "shape": [512], "compression": c}]


def ray_ingest(args):
    """One Ray job (ray.init(num_cpus=args.cpus)): `blocks` tasks each read a slice of the
    .npy files and write it through tessera.ray.Sink; one commit. Prints a JSON line."""
    import ray

    import tessera
    import tessera.ray

    class TimedSink(tessera.ray.Sink):
        """The Sink, with each write task's own start, end and rows returned ahead of its
        records (a bench-only probe; the records reach the commit unchanged)."""

        def write(self, blocks, ctx):
            start = time.time()
            records = super().write(blocks, ctx)
            rows = sum(json.loads(r)["row_count"] for r in records)
            return [json.dumps({"start": start, "end": time.time(), "rows": rows, "pid": os.getpid()})] + records

        def on_write_complete(self, write_result):
            self.timings = [json.loads(task.pop(0)) for task in write_result.write_returns]
            super().on_write_complete(write_result)

    t = time.perf_counter()
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
    init_s = time.perf_counter() - t
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.op_resource_reservation_enabled = not args.no_reservation
    inp = args.input

    def load(batch):
        ids = np.load(os.path.join(inp, "id.npy"), mmap_mode="r")
        emb = np.load(os.path.join(inp, "emb.npy"), mmap_mode="r")
        lo, hi = int(batch["id"][0]), int(batch["id"][-1]) + 1
        return {"id": np.asarray(ids[lo:hi]), "emb": np.asarray(emb[lo:hi])}

    rows = len(np.load(os.path.join(inp, "id.npy"), mmap_mode="r"))
    # Warm the workers (process start, imports) outside the timed jobs, as a long-lived
    # cluster would be.
    ray.data.range(args.cpus * 2, override_num_blocks=args.cpus * 2).map_batches(lambda b: b).materialize()

    def job(n, name):
        sink = TimedSink(os.path.join(args.dataset, name), schema=schema(args.level))
        t = time.time()
        ray.data.range(n, override_num_blocks=args.blocks).map_batches(load, batch_size=None).write_datasink(sink)
        took = time.time() - t
        ds = tessera.open(os.path.join(args.dataset, name))
        assert len(ds) == n and sink.tasks == args.blocks, (len(ds), sink.tasks)
        return took, sink.timings, t

    # The same job on half the rows, then on all of them: the difference is the marginal
    # (steady-state) cost of rows // 2 rows, the rest is fixed.
    half_s, _, _ = job(rows // 2, "half")
    full_s, timings, t0 = job(rows, "full")
    steady = (rows - rows // 2) / (full_s - half_s)
    print(json.dumps({
        "seconds": full_s,
        "half_s": half_s,
        "steady_rows_s": steady,
        "fixed_s": full_s - rows / steady,
        "first_task_s": min(x["start"] for x in timings) - t0,
        "both_busy_s": _both_busy(timings, t0),
        "workers_used": len({x["pid"] for x in timings}),
        "init_s": init_s,
        "rows": rows,
    }))


def _both_busy(timings, t0):
    """Seconds after the job's start at which two tasks first ran at once (None if never)."""
    spans = sorted((x["start"], x["end"]) for x in timings)
    for i, (s, _) in enumerate(spans):
        if any(e > s for _, e in spans[:i]):
            return s - t0
    return None


def commit_bench(args):
    """Commit time of 1,000 fragment records (each one data file of 10 rows)."""
    import tessera

    url = os.path.join(args.work, "commit")
    shutil.rmtree(url, ignore_errors=True)
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


def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--level", type=int, default=9)
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--tessera", default="target/release/tessera")
    p.add_argument("--repeat", type=int, default=2, help="interleaved rounds of every contender")
    p.add_argument("--work", default=None)
    p.add_argument("--no-reservation", action="store_true", help=argparse.SUPPRESS)
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
    comp = f"*=zstd:{args.level}"

    def ingest(folder, ds, jobs):
        cmd = [args.tessera, "ingest", ds, os.path.join(folder, "id.npy"), os.path.join(folder, "emb.npy"),
               "--compress", comp, "-q"]
        return subprocess.Popen(cmd + (["--jobs", str(jobs)] if jobs else []), stdout=subprocess.DEVNULL)

    def timed(fn):
        def run(i):
            shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
            os.makedirs(os.path.join(work, "out"))
            t = time.perf_counter()
            extra = fn(os.path.join(work, "out"))
            return dict(seconds=time.perf_counter() - t, **(extra or {}))
        return run

    def one(jobs):
        def fn(out):
            assert ingest(inp, os.path.join(out, "ds"), jobs).wait() == 0
        return fn

    def two_halves(out):
        procs = [ingest(os.path.join(inp, f"half{h}"), os.path.join(out, f"ds{h}"), 1) for h in (0, 1)]
        assert all(p.wait() == 0 for p in procs)

    def ray_job(cpus, reservation):
        def fn(out):
            cmd = [sys.executable, __file__, "--level", str(args.level), "--blocks", str(args.blocks)]
            cmd += [] if reservation else ["--no-reservation"]
            res = subprocess.run(cmd + ["ray", inp, os.path.join(out, "ds"), "--cpus", str(cpus)],
                                 check=True, capture_output=True, text=True)
            got = json.loads(res.stdout.strip().splitlines()[-1])
            got["job_s"] = got.pop("seconds")
            return got
        return fn

    contenders = {
        "`tessera ingest` (one process)": timed(one(None)),
        "`tessera ingest --jobs 1`": timed(one(1)),
        "2 × `tessera ingest --jobs 1` at once, half the rows each": timed(two_halves),
    }
    for cpus in (1, 2):
        for reservation in (True, False):
            name = f"Ray, {cpus} worker{'s' if cpus > 1 else ''}" + ("" if reservation else ", reservation off")
            contenders[name] = timed(ray_job(cpus, reservation))
    results = {name: [] for name in contenders}
    for i in range(args.repeat):
        for name, run in contenders.items():
            before = load1()
            got = run(i)
            got["load"] = max(before, load1())
            results[name].append(got)
            print(f"round {i + 1}: {name}: {json.dumps(got)}", file=sys.stderr)
    shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
    out = subprocess.run([sys.executable, __file__, "--repeat", "3", "--work", work, "commit"],
                         check=True, capture_output=True, text=True)
    commit = json.loads(out.stdout.strip().splitlines()[-1])

    def job_s(r):
        return r.get("job_s", r["seconds"])

    base = min(job_s(r) for r in results["`tessera ingest` (one process)"])
    rate = args.rows / base
    print(f"{args.rows} rows, {raw / 2**20:.0f} MiB raw (id i64, emb f32[512]), zstd:{args.level}, "
          f"{args.blocks} Ray blocks, best (worst) of {args.repeat} interleaved rounds; "
          f"1-min load average {min(r['load'] for rs in results.values() for r in rs):.1f} to "
          f"{max(r['load'] for rs in results.values() for r in rs):.1f}")
    print()
    print("| ingest | seconds (best, worst) | MiB/s (raw) | vs `tessera ingest` | steady state vs `tessera ingest` "
          "| fixed seconds | 2 tasks at once after |")
    print("|---|---|---|---|---|---|---|")
    for name, rs in results.items():
        s = sorted(job_s(r) for r in rs)
        row = f"| {name} | {s[0]:.2f} ({s[-1]:.2f}) | {raw / 2**20 / s[0]:.0f} | {base / s[0]:.2f}× |"
        if "steady_rows_s" in rs[0]:
            steady = sorted(r["steady_rows_s"] / rate for r in rs)
            fixed = sorted(r["fixed_s"] for r in rs)
            busy = sorted(r["both_busy_s"] for r in rs if r["both_busy_s"] is not None)
            row += f" {steady[-1]:.2f}× ({steady[0]:.2f}×) | {fixed[0]:.2f} ({fixed[-1]:.2f}) |"
            row += f" {busy[0]:.2f} s ({busy[-1]:.2f} s) |" if busy else " never |"
        else:
            row += " | | |"
        print(row)
    inits = [r["init_s"] for rs in results.values() for r in rs if "init_s" in r]
    if inits:
        print(f"\n`ray.init` (a fresh local Ray, not in the figures above): {min(inits):.1f} to {max(inits):.1f} s")
    print(f"\ncommit of 1,000 fragment records (validation of 1,000 data files included): "
          f"{commit['seconds'] * 1e3:.0f} ms (median of {', '.join(f'{t * 1e3:.0f}' for t in commit['all'])} ms)")
    if not work_given:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
