"""One rank of the multi-node recipe (python/tests/test_torchrun.py runs it under torchrun).

Joins the gloo process group that torchrun's environment describes, reads its shard of the
dataset with `ds.pytorch()` (rank and world size from RANK / WORLD_SIZE), and reports through
the process group: rank 0 gathers every rank's batches (the global rows of each) and resume
state, and writes them as JSON.

usage: torchrun ... torchrun_worker.py URL OUT.json BATCH_SIZE [--stop-after N]
       [--resume STATE.json] [--then-epochs K]
"""

import argparse
import json

import torch
import torch.distributed as dist

import tessera


def main():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("out")
    p.add_argument("batch_size", type=int)
    p.add_argument("--stop-after", type=int, default=None, help="save the state after N batches and stop")
    p.add_argument("--resume", default=None, help="a state saved by a run with the same global batch")
    p.add_argument("--then-epochs", type=int, default=0, help="full epochs to run after the first")
    a = p.parse_args()

    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    loader = tessera.open(a.url).pytorch(
        batch_size=a.batch_size, shuffle="global", seed=7, drop_last=True, columns=["id"]
    )
    assert (loader.rank, loader.world_size) == (rank, world), "the loader reads RANK / WORLD_SIZE"
    if a.resume:
        with open(a.resume) as f:
            loader.load_state_dict(json.load(f))

    epochs = []
    for _ in range(1 + a.then_epochs):
        it = iter(loader)
        batches = []
        for batch in it:
            assert isinstance(batch["id"], torch.Tensor)
            assert batch["id"].tolist() == it.last_rows.tolist(), "ids are the global rows"
            batches.append(batch["id"].tolist())
            if a.stop_after is not None and len(batches) == a.stop_after:
                break
        epochs.append({"epoch": it.epoch, "batches": batches})
        if a.stop_after is not None:
            break
    state = loader.state_dict()

    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "epochs": epochs, "state": state})
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump({"world_size": world, "ranks": gathered}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
