"""Memory stays flat over many epochs: a leak of anything per epoch or per batch (buffers,
tensors, loader threads' state) shows up as RSS growth far above the bound.

The epochs run in a fresh interpreter, so that what other tests left behind (JAX's and Ray's
threads, allocator arenas) cannot move this process's RSS while it is measured."""

import json
import subprocess
import sys

import pytest

pytest.importorskip("torch")

SCRIPT = r"""
import gc, json, sys
import numpy as np
import torch
import tessera

ROW_BYTES, ROWS = 16 << 10, 256  # 4 MiB of rows per epoch

def rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")

url = sys.argv[1]
ds = tessera.create(url, [{"name": "id", "dtype": "i64"}, {"name": "blob", "dtype": "u8", "shape": [ROW_BYTES]}])
rng = np.random.default_rng(0)
for start in range(0, ROWS, 64):  # 4 fragments
    ds.append({"id": np.arange(start, start + 64), "blob": rng.integers(0, 256, (64, ROW_BYTES), dtype=np.uint8)})
loader = ds.pytorch(batch_size=16, shuffle="global", seed=1, workers=2)

def epoch():
    total = 0
    for batch in loader:
        assert isinstance(batch["blob"], torch.Tensor)
        total += int(batch["blob"][:, :8].sum())  # touch every batch
    return total

for _ in range(5):  # warm up: pools, allocator arenas, lazy imports
    epoch()
gc.collect()
before = rss_bytes()
sums = {epoch() for _ in range(45)}
gc.collect()
print(json.dumps({"growth": rss_bytes() - before, "distinct_sums": len(sums)}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_rss_is_flat_over_50_epochs(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "ds")], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["distinct_sums"] == 1, "every epoch reads the same rows"
    # 45 epochs move 180 MiB through the loader; leaking even one batch (256 KiB) per epoch
    # would add 11 MiB, one epoch's rows each time 180 MiB.
    assert r["growth"] < 8 << 20, f"RSS grew by {r['growth'] / 2**20:.1f} MiB over 45 epochs"
