"""Tessera against its peers on the mm224 workload, in one run on one machine.

    .venv-peers/bin/python benches/peers/run.py [--rows 10000] [--epochs 3] [--systems a,b]

Makes the workload (``workload.py``: crops of real photographs, labels, ragged tokens,
embeddings) in each system's own format under ``target/peers/mm224-ROWS/`` (once; a
``.complete`` marker says a format is whole), builds Tessera's release binaries, then
measures each system (``systems/``) in its own subprocess: one untimed warm-up epoch (which
also warms the page cache), then ``--epochs`` timed ones, batch 64, shuffled, every batch
delivered as torch tensors. The parent samples the memory of the subprocess and its
children (DataLoader workers) every 50 ms: the peak of the summed RSS and of the summed PSS
(shared pages split between the processes that map them).

Every batch is checked (columns, dtypes, shapes), two rows of the first batch are compared
with the workload's rows, and for the systems where it is checkable every epoch must deliver
each row exactly once; a system that fails a check fails the run (exit status 1).
Prints a Markdown table; ``--json FILE`` also writes the figures.

From a bucket (``--remote s3://BUCKET[/PREFIX]``): the same datasets, made locally as above,
are read by every system through its own S3 client from ``s3://BUCKET/PREFIX/mm224-ROWS/FORMAT``
(``scripts/benchbucket.sh start target [RTT_MS]`` serves ``target/`` with ``peers`` as a
bucket; export its ``env`` first). Each system starts with an empty cache folder of its own;
no warm-up epoch; epoch 1 (cold) and epoch 2 (from each system's cache, where it has one)
are timed apart, with the time from opening to the first batch. The first row is the link's
limit: ``bucket_read``, every Tessera data file in 8 MiB range GETs, 32 in flight. Tessera Rust
also runs with block shuffle over the link, and on the local files (the reference for its
cached epochs); the last line is one JSON object, ``{"summary": …}``, with the ratios.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import workload  # noqa: E402
from systems import ORDER  # noqa: E402

# Bumped whenever workload.py changes what it generates: stale datasets are rewritten.
WORKLOAD_VERSION = 1
PAGE = os.sysconf("SC_PAGE_SIZE")


def system(name: str):
    return importlib.import_module(f"systems.{name}")


def writer_of(fmt: str) -> str:
    for name in ORDER:
        mod = system(name)
        if mod.FORMAT == fmt and hasattr(mod, "write"):
            return name
    raise KeyError(fmt)


# -- memory of a process tree -----------------------------------------------------------------


def tree(pid: int) -> List[int]:
    """``pid`` and its descendants (through /proc/PID/task/TID/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def memory(pids: List[int]):
    """(summed RSS, summed PSS) of ``pids``, in bytes."""
    rss = pss = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/statm") as f:
                rss += int(f.read().split()[1]) * PAGE
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1]) << 10
                        break
        except (OSError, ValueError, IndexError):
            pass  # the process ended between the listing and the read
    return rss, pss


class Poller(threading.Thread):
    """Samples the memory of a process tree until ``stop()``; keeps the peaks."""

    def __init__(self, pid: int, every: float = 0.05):
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.peak_rss = self.peak_pss = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            rss, pss = memory(tree(self.pid))
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
            self._done.wait(self.every)

    def stop(self) -> None:
        self._done.set()
        self.join()


def run_measured(cmd: List[str], env: Dict[str, str]) -> Dict[str, Any]:
    """Runs ``cmd``, sampling its process tree's memory; its stdout's last line is JSON."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    poller = Poller(proc.pid)
    poller.start()
    out, _ = proc.communicate()
    poller.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with status {proc.returncode}")
    return {"stdout": out, "peak_rss": poller.peak_rss, "peak_pss": poller.peak_pss}


# -- the child: one system ---------------------------------------------------------------------


def measure_one(name: str, path: str, args) -> Dict[str, Any]:
    """Runs the warm-up and timed epochs of one system in this process."""
    mod = system(name)
    if hasattr(mod, "run"):
        return mod.run(path, args.rows, args)
    # The first batch is timed from the open, not from the imports (torch's takes a second).
    for m in ("torch",) + tuple(getattr(mod, "IMPORTS", ())):
        importlib.import_module(m)
    start = time.perf_counter()
    reader = mod.open(path, args)
    samples, elapsed, epoch_seconds, first_batch = 0, 0.0, [], None
    try:
        for e in range(args.warmup + args.epochs):
            labels = []
            t = time.perf_counter()
            for b, batch in enumerate(reader.epoch(e)):
                if first_batch is None:
                    first_batch = time.perf_counter() - start
                workload.check_batch(batch, args.batch_size)
                labels.append(batch["label"].numpy().copy())
                if e == 0 and b == 0:
                    workload.check_values(batch)
            if e >= args.warmup:
                epoch_seconds.append(time.perf_counter() - t)
                elapsed += epoch_seconds[-1]
                # Distinct rows only: a loader that pads its last batch gets no credit for it.
                samples += min(sum(len(x) for x in labels), args.rows)
            if mod.CHECKED:
                workload.check_epoch(labels, args.rows, args.batch_size, pads=getattr(mod, "PADS", False))
            del labels
    finally:
        reader.close()
    return {"samples_per_sec": samples / elapsed, "samples": samples, "seconds": elapsed,
            "epoch_seconds": epoch_seconds, "first_batch_seconds": first_batch}


# -- the parent ----------------------------------------------------------------------------------


def child_env() -> Dict[str, str]:
    env = dict(os.environ)
    paths = [HERE, os.path.join(ROOT, "target", "peers", "py")]
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("LITDATA_DISABLE_VERSION_CHECK", "1")
    return env


def build() -> None:
    """Tessera's release binaries: the CLI with `tessera bench`, and the Python extension
    (installed with its pure-Python package under target/peers/py, ahead of any other)."""
    cargo = ["cargo", "build", "--release", "--locked", "-q"]
    subprocess.run(cargo + ["-p", "tessera-cli", "--features", "bench", "--bin", "tessera"], cwd=ROOT, check=True)
    subprocess.run(cargo + ["-p", "tessera-benches", "--bin", "bucket_read"], cwd=ROOT, check=True)
    subprocess.run(cargo + ["-p", "tessera-python"], cwd=ROOT, check=True)
    dest = os.path.join(ROOT, "target", "peers", "py", "tessera")
    os.makedirs(dest, exist_ok=True)
    src = os.path.join(ROOT, "python", "tessera")
    for f in os.listdir(src):
        if f.endswith((".py", ".pyi", ".typed")):
            shutil.copy2(os.path.join(src, f), dest)
    shutil.copy2(os.path.join(ROOT, "target", "release", "lib_native.so"), os.path.join(dest, "_native.tmp.so"))
    os.replace(os.path.join(dest, "_native.tmp.so"), os.path.join(dest, "_native.abi3.so"))


def du(path: str) -> int:
    total = 0
    for d, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(d, f)) for f in files)
    return total


def ensure_dataset(root: str, fmt: str, rows: int) -> str:
    path = os.path.join(root, fmt)
    marker = os.path.join(path, ".complete")
    want = json.dumps({"rows": rows, "workload": WORKLOAD_VERSION})
    if os.path.exists(marker) and open(marker).read() == want:
        return path
    shutil.rmtree(path, ignore_errors=True)
    writer = writer_of(fmt)
    print(f"peers: writing {rows} rows as {fmt} ({writer})", file=sys.stderr, flush=True)
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, __file__, "--write", writer, "--rows", str(rows), "--path", path],
        cwd=ROOT,
        env=child_env(),
        check=True,
    )
    with open(marker, "w") as f:
        f.write(want)
    print(f"peers: {fmt} written in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    return path


def fmt_mib(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB"


def table(results: List[Dict[str, Any]], limit: Optional[float]) -> str:
    lines = [
        "| system | samples/s | of `read()` | peak RSS (Σ processes) | peak PSS | on disk | each row once per epoch |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        share = f"{100 * r['samples_per_sec'] / limit:.0f}%" if limit else "–"
        lines.append(
            f"| {r['name']} | {r['samples_per_sec']:,.0f} | {share} | {fmt_mib(r['peak_rss'])} | "
            f"{fmt_mib(r['peak_pss'])} | {r['disk'] / 1e9:.2f} GB | {r['checked']} |"
        )
    return "\n".join(lines)


def remote_table(results: List[Dict[str, Any]], rows: int) -> str:
    lines = [
        "| system | epoch 1 samples/s | of the link | epoch 2 samples/s | first batch | peak RSS (Σ processes) | each row once per epoch |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    limit = next((r for r in results if r["system"] == "read_limit"), None)
    for r in results:
        e1, e2 = (rows / s for s in r["epoch_seconds"][:2])
        share = f"{100 * e1 / (rows / limit['epoch_seconds'][0]):.0f}%" if limit else "–"
        fb = None if r is limit else r.get("first_batch_seconds")
        name = "the link's limit (`bucket_read`, 32 × 8 MiB in flight)" if r is limit else r["name"]
        lines.append(
            f"| {name} | {e1:,.0f} | {share} | {e2:,.0f} | {'–' if fb is None else f'{fb:.2f} s'} | "
            f"{fmt_mib(r['peak_rss'])} | {r['checked']} |"
        )
    return "\n".join(lines)


def median(xs: List[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def local_reference(runs: Dict[str, List[Dict[str, Any]]], paths: Dict[str, str], args) -> List[float]:
    """Tessera Rust on the local copy of the dataset, once per round, for the cached epochs'
    "of local files": one warm-up epoch (the page cache), then the same timed epochs."""
    mod = system("tessera_rust")
    local = argparse.Namespace(**{**vars(args), "remote": None, "cache": None, "warmup": 1})
    rates = []
    for _ in runs["tessera_rust"]:
        got = run_measured(mod.command(paths[mod.FORMAT], local), child_env())
        rates.append(mod.parse(got["stdout"], local)["samples_per_sec"])
    return rates


def remote_summary(results: List[Dict[str, Any]], local: List[float], rows: int) -> Optional[Dict[str, Any]]:
    """Issue 28's ratios, from the median round of each system: Tessera Rust's epoch 1 (cold)
    against the link's limit and the best peer's epoch 1, its epoch 2 (from the disk cache)
    against local files and the best peer's epoch 2, block against global shuffle over the
    link, the first batch, memory over the loader's budget, the cache's bytes against its
    bound, and bytes fetched per byte delivered in each epoch."""
    by = {r["system"]: r for r in results}
    rust, limit = by.get("tessera_rust"), by.get("read_limit")
    if rust is None:
        return None

    def rate(r: Dict[str, Any], epoch: int) -> float:
        return rows / r["epoch_seconds"][epoch]

    def the_median_run(r: Dict[str, Any]) -> Dict[str, Any]:
        return next(x for x in r["runs"] if x.get("epoch_seconds") == r["epoch_seconds"])

    peers = [r for r in results if not r["system"].startswith(("tessera", "read_limit"))]
    best1 = max(peers, key=lambda r: rate(r, 0), default=None)
    best2 = max(peers, key=lambda r: rate(r, 1), default=None)
    run = the_median_run(rust)
    delivered = run.get("tensor_bytes_per_epoch") or 0
    out: Dict[str, Any] = {
        "rows": rows,
        "link_samples_per_sec": limit and round(rate(limit, 0)),
        "epoch1_samples_per_sec": round(rate(rust, 0)),
        "epoch2_samples_per_sec": round(rate(rust, 1)),
        "epoch1_of_link": limit and round(rate(rust, 0) / rate(limit, 0), 3),
        "best_peer_epoch1": best1 and best1["system"],
        "epoch1_vs_best_peer": best1 and round(rate(rust, 0) / rate(best1, 0), 2),
        "local_samples_per_sec": round(median(local)) if local else None,
        "epoch2_of_local": round(rate(rust, 1) / median(local), 3) if local else None,
        "best_peer_epoch2": best2 and best2["system"],
        "epoch2_vs_best_peer": best2 and round(rate(rust, 1) / rate(best2, 1), 2),
        "first_batch_seconds": rust.get("first_batch_seconds"),
        "fetched_per_delivered": [round(b / delivered, 3) for b in run.get("epoch_storage_bytes") or []]
        if delivered else None,
        "cache_disk_bytes": run.get("cache_disk_bytes"),
        "cache_bound": run.get("cache_bound"),
    }
    if "tessera_rust_block" in by:
        out["block_of_global_epoch1"] = round(rate(by["tessera_rust_block"], 0) / rate(rust, 0), 3)
    for name in ("tessera_rust", "tessera_rust_block"):
        r = by.get(name)
        if r and the_median_run(r).get("memory_budget"):
            out[f"{name}_rss_over_budget_mib"] = round((r["peak_rss"] - the_median_run(r)["memory_budget"]) / (1 << 20))
    return out


def load_average() -> float:
    return os.getloadavg()[0]


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs, after --warmup untimed ones")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2, help="loader threads / DataLoader worker processes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--systems", default=",".join(ORDER), help=f"comma-separated subset of {','.join(ORDER)}")
    ap.add_argument("--data", default=os.path.join(ROOT, "target", "peers"), help="where the datasets are made")
    ap.add_argument("--no-build", action="store_true", help="use the release binaries as they are")
    ap.add_argument("--repeat", type=int, default=1, help="rounds over all systems; the table shows medians")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--prepare", action="store_true", help="only build and make the datasets")
    ap.add_argument("--remote", help="read from s3://BUCKET[/PREFIX]/mm224-ROWS/FORMAT (see the module docs)")
    ap.add_argument("--cache", help=argparse.SUPPRESS)  # child: its own cache folder (remote)
    ap.add_argument("--write", help=argparse.SUPPRESS)  # child: write one format
    ap.add_argument("--one", help=argparse.SUPPRESS)  # child: measure one system
    ap.add_argument("--path", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.write:
        system(args.write).write(args.path, args.rows)
        return 0
    if args.one:
        print(json.dumps(measure_one(args.one, args.path, args)))
        return 0

    names = [n.strip() for n in args.systems.split(",") if n.strip()]
    unknown = [n for n in names if n not in ORDER]
    if unknown:
        ap.error(f"unknown system(s) {unknown}; known: {', '.join(ORDER)}")
    if args.remote:
        if not args.remote.startswith("s3://"):
            ap.error("--remote takes an s3:// URL")
        if "AWS_ENDPOINT" not in os.environ:
            ap.error('--remote: export the bucket\'s settings first: eval "$(bash scripts/benchbucket.sh env)"')
        args.warmup, args.epochs = 0, max(args.epochs, 2)
        names = [n for n in names if getattr(system(n), "REMOTE", False)]
    else:
        names = [n for n in names if not getattr(system(n), "REMOTE_ONLY", False)]
    if not args.no_build:
        build()
    root = os.path.join(args.data, f"mm224-{args.rows}")
    os.makedirs(root, exist_ok=True)
    paths = {fmt: ensure_dataset(root, fmt, args.rows) for fmt in sorted({system(n).FORMAT for n in names})}
    if args.prepare:
        return 0

    common = ["--rows", str(args.rows), "--epochs", str(args.epochs), "--warmup", str(args.warmup),
              "--batch-size", str(args.batch_size), "--workers", str(args.workers), "--seed", str(args.seed)]
    runs: Dict[str, List[Dict[str, Any]]] = {n: [] for n in names}
    failed: List[str] = []
    loads = []
    for rnd in range(args.repeat):
        for name in [n for n in names if n not in failed]:
            mod = system(name)
            path = paths[mod.FORMAT]
            if args.remote:
                path = f"{args.remote.rstrip('/')}/mm224-{args.rows}/{mod.FORMAT}"
                args.cache = os.path.join(args.data, "cache", name)
                shutil.rmtree(args.cache, ignore_errors=True)  # each system starts cold
                os.makedirs(args.cache)
            if hasattr(mod, "command"):
                cmd = mod.command(path, args)
            else:
                cmd = [sys.executable, __file__, "--one", name, "--path", path] + common
                if args.remote:
                    cmd += ["--remote", args.remote, "--cache", args.cache]
            loads.append(load_average())
            print(f"peers: round {rnd + 1}/{args.repeat}: {name} (load {loads[-1]:.2f})", file=sys.stderr, flush=True)
            try:
                got = run_measured(cmd, child_env())
            except RuntimeError as e:
                print(f"peers: {name} FAILED: {e}", file=sys.stderr, flush=True)
                failed.append(name)
                continue
            fig = mod.parse(got["stdout"], args) if hasattr(mod, "parse") else json.loads(got["stdout"].strip().splitlines()[-1])
            if args.remote:
                fig["cache_disk_bytes"] = du(args.cache)
            runs[name].append({"peak_rss": got["peak_rss"], "peak_pss": got["peak_pss"], **fig})
    local = local_reference(runs, paths, args) if args.remote and runs.get("tessera_rust") else []
    loads.append(load_average())

    results = []
    for name in names:
        if name in failed or not runs[name]:
            continue
        mod = system(name)
        rates = sorted(r["samples_per_sec"] for r in runs[name])
        results.append({
            "system": name, "name": mod.NAME, "config": mod.CONFIG, "format": mod.FORMAT,
            "checked": "checked" if mod.CHECKED else "–", "disk": du(paths[mod.FORMAT]),
            "samples_per_sec": rates[len(rates) // 2], "rates": rates,
            "peak_rss": max(r["peak_rss"] for r in runs[name]), "peak_pss": max(r["peak_pss"] for r in runs[name]),
            "runs": runs[name],
            # Remote runs: the round whose epoch 1 is the median's.
            "epoch_seconds": sorted((r.get("epoch_seconds") or [0, 0] for r in runs[name]))[len(runs[name]) // 2],
            "first_batch_seconds": sorted(r.get("first_batch_seconds") or 0 for r in runs[name])[len(runs[name]) // 2],
        })

    limit = next((r["samples_per_sec"] for r in results if r["system"] == "read_limit"), None)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    where = f"from {args.remote} at {os.environ.get('AWS_ENDPOINT')}" if args.remote else "local files"
    print(f"mm224 ({args.rows} rows, {where}, batch {args.batch_size}, {args.warmup} warm-up + {args.epochs} timed "
          f"epochs, {args.workers} workers, median of {args.repeat} round(s)); {when}; {platform.machine()}, "
          f"{os.cpu_count()} cores; 1-minute load average from {min(loads):.1f} to {max(loads):.1f}")
    print(remote_table(results, args.rows) if args.remote else table(results, limit))
    print()
    if local:
        print(f"Tessera, Rust/tch on the same dataset's local files in the same run (page cache warm, after "
              f"one warm-up epoch): {median(local):,.0f} samples/s (median of {len(local)}).")
        print()
    for r in results:
        print(f"- **{r['name']}**: {r['config']}.")
    print()
    py, rs = runs.get("tessera_python", []), runs.get("tessera_rust", [])
    if py and rs:
        # Paired by round (the two run back to back), then the median.
        losses = sorted(1 - p["samples_per_sec"] / r["samples_per_sec"] for p, r in zip(py, rs))
        print(f"Tessera from Python vs from Rust: {100 * losses[len(losses) // 2]:+.1f}% throughput lost "
              f"(median of {len(losses)} paired round(s); each: {', '.join(f'{100 * x:+.1f}%' for x in losses)})")
    summary = remote_summary(results, local, args.rows) if args.remote else None
    if summary:
        print(json.dumps({"summary": summary}))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"when": when, "args": vars(args), "load": loads, "results": results, "summary": summary},
                      f, indent=1)
    if failed:
        print(f"peers: FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
