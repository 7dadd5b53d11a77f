"""The limit: `read()` of the Tessera dataset's data files, whole, into one reused 1 MiB
buffer (what any loader of these bytes must at least do). From a bucket, the link's limit:
`bucket_read`, every data file in 8 MiB range GETs with 32 in flight."""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any, Dict

NAME = "`read()` of the same bytes (limit)"
FORMAT = "tessera"
CHECKED = False
REMOTE = True
CONFIG = "one thread, `readinto` of every data file into a reused 1 MiB buffer; no tensors"


def run(path: str, total: int, args) -> Dict[str, Any]:
    if path.startswith("s3://"):
        return run_remote(path, total, args)
    data = os.path.join(path, "data")
    files = sorted(os.path.join(data, f) for f in os.listdir(data))
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    elapsed, nbytes = 0.0, 0
    for e in range(args.warmup + args.epochs):
        t = time.perf_counter()
        got = 0
        for f in files:
            with open(f, "rb", buffering=0) as fh:
                while n := fh.readinto(view):
                    got += n
        if e >= args.warmup:
            elapsed += time.perf_counter() - t
            nbytes += got
    return {"samples_per_sec": total * args.epochs / elapsed, "samples": total * args.epochs, "seconds": elapsed,
            "mb_per_sec": nbytes / 1e6 / elapsed}


def run_remote(url: str, total: int, args) -> Dict[str, Any]:
    binary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "target", "release", "bucket_read")
    out = subprocess.run([binary, f"{url}/data", "32", str(args.epochs)], check=True, capture_output=True, text=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    seconds = [got["bytes"] / 1e6 / r for r in got["mb_per_sec"]]
    return {"samples_per_sec": total * len(seconds) / sum(seconds), "samples": total * len(seconds),
            "seconds": sum(seconds), "epoch_seconds": seconds, "first_batch_seconds": None,
            "mb_per_sec": got["mb_per_sec"]}
