"""The multi-node recipe, tested on one machine: `torchrun --nnodes 2 --nproc-per-node 2`
simulated by two torchrun node groups that meet through c10d rendezvous on loopback (gloo,
CPU). Four ranks get disjoint, equal shards that together are the global batches; a run
stopped mid-epoch resumes exactly on two ranks with the same global batch (16 rows)."""

import json
import os
import pathlib
import socket
import subprocess
import sys
import uuid

import pytest

import tessera

torch = pytest.importorskip("torch")

WORKER = str(pathlib.Path(__file__).with_name("torchrun_worker.py"))
TORCHRUN = str(pathlib.Path(sys.executable).with_name("torchrun"))
GLOBAL_BATCH = 16


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(nnodes, nproc, args, tmp_path):
    """Runs the worker under `nnodes` torchrun processes of `nproc` ranks each, rendezvous'd
    with c10d on loopback; returns rank 0's report."""
    out = tmp_path / f"report-{uuid.uuid4().hex}.json"
    port, run_id = free_port(), uuid.uuid4().hex
    cmd = [
        TORCHRUN, f"--nnodes={nnodes}", f"--nproc-per-node={nproc}", "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={run_id}", "--max-restarts=0",
        WORKER, args[0], str(out), *map(str, args[1:]),
    ]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    nodes = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(nnodes)
    ]
    logs = [n.communicate(timeout=240)[0] for n in nodes]
    for n, log in zip(nodes, logs):
        assert n.returncode == 0, log[-4000:]
    report = json.loads(out.read_text())
    assert report["world_size"] == nnodes * nproc
    return report


def global_batches(url, epoch):
    """The global batches of an epoch: what one rank with the whole global batch reads."""
    one = tessera.open(url).numpy(
        batch_size=GLOBAL_BATCH, shuffle="global", seed=7, drop_last=True, rank=0, world_size=1
    )
    return one.plan_rows(epoch)


def check_shards(report, batches_of, global_rows, start=0):
    """Rank r's batch i is block r of global batch start + i; shards are disjoint and equal."""
    world = report["world_size"]
    per = GLOBAL_BATCH // world
    shards = [batches_of(r) for r in report["ranks"]]
    assert len({len(s) for s in shards}) == 1, "equal shards"
    for r, shard in enumerate(shards):
        for i, batch in enumerate(shard):
            assert batch == global_rows[start + i][r * per : (r + 1) * per], (r, i)
    rows = [x for s in shards for b in s for x in b]
    assert len(rows) == len(set(rows)), "disjoint"
    return rows


def test_two_nodes_of_two_ranks_then_resume_on_two_ranks(written, tmp_path):
    url = written[0]
    epoch0 = global_batches(url, 0)
    assert len(epoch0) == 6  # 100 rows, global batch 16, drop_last

    # 2 nodes x 2 ranks, batch 4 per rank: the whole of epoch 0.
    full = torchrun(2, 2, [url, GLOBAL_BATCH // 4], tmp_path)
    rows = check_shards(full, lambda r: r["epochs"][0]["batches"], epoch0)
    assert sorted(rows) == sorted(x for b in epoch0 for x in b)

    # Stop after 2 batches on 4 ranks; every rank's state is the same global position.
    stopped = torchrun(2, 2, [url, GLOBAL_BATCH // 4, "--stop-after", 2], tmp_path)
    first = check_shards(stopped, lambda r: r["epochs"][0]["batches"], epoch0)
    states = [r["state"] for r in stopped["ranks"]]
    assert all(s == states[0] for s in states)
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps(states[0]))

    # Resume on 1 node x 2 ranks with batch 8 (global batch unchanged), then run epoch 1.
    resumed = torchrun(1, 2, [url, GLOBAL_BATCH // 2, "--resume", state_file, "--then-epochs", 1], tmp_path)
    rest = check_shards(resumed, lambda r: r["epochs"][0]["batches"], epoch0, start=2)
    assert [r["epochs"][0]["epoch"] for r in resumed["ranks"]] == [0, 0]
    assert sorted(first + rest) == sorted(x for b in epoch0 for x in b), "every row of the epoch exactly once"
    # Epoch 1 on two gloo ranks: disjoint, equal shards of the global batches (issue 13).
    epoch1 = global_batches(url, 1)
    assert epoch1 != epoch0
    assert [r["epochs"][1]["epoch"] for r in resumed["ranks"]] == [1, 1]
    check_shards(resumed, lambda r: r["epochs"][1]["batches"], epoch1)
