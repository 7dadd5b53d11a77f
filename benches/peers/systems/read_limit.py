"""The limit: `read()` of the Tessera dataset's data files, whole, into one reused 1 MiB
buffer (what any loader of these bytes must at least do)."""

from __future__ import annotations

import os
import time
from typing import Any, Dict

NAME = "`read()` of the same bytes (limit)"
FORMAT = "tessera"
CHECKED = False
CONFIG = "one thread, `readinto` of every data file into a reused 1 MiB buffer; no tensors"


def run(path: str, total: int, args) -> Dict[str, Any]:
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
