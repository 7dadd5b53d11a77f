"""WebDataset: tar shards of `.npy` members, read by `wds.WebDataset` in a `WebLoader`."""

from __future__ import annotations

import glob
import os
import sys

import workload

NAME = "WebDataset"
FORMAT = "wds"
CHECKED = True
REMOTE = True  # shards streamed from the bucket each epoch (no cache configured)
IMPORTS = ("webdataset",)  # imported before the clock starts
CONFIG = (
    "10 tar shards (`.npy` members, `cls` label), shard order shuffled per epoch and a "
    "1,000-sample shuffle buffer per worker; `WebLoader(num_workers=2, persistent_workers=True)`, "
    "batched in the workers with the padding collate"
)
SHARDS = 10


def write(path: str, total: int) -> None:
    """The workload as `SHARDS` tar shards (`wds.ShardWriter`, `.npy` members)."""
    import webdataset as wds

    os.makedirs(path, exist_ok=True)
    per_shard = -(-total // SHARDS)
    with wds.ShardWriter(os.path.join(path, "shard-%06d.tar"), maxcount=per_shard, verbose=0) as sink:
        for start, n in workload.chunks(total):
            r = workload.rows(start, n)
            for j in range(n):
                i = start + j
                sink.write(
                    {
                        "__key__": f"{i:08d}",
                        "image.npy": r["image"][j],
                        "cls": int(r["label"][j]),
                        "tokens.npy": r["tokens"][j],
                        "embedding.npy": r["embedding"][j],
                    }
                )


def _sample(s):
    return {"image": s["image.npy"], "label": s["cls"], "tokens": s["tokens.npy"], "embedding": s["embedding.npy"]}


class Reader:
    def __init__(self, path: str, args):
        import webdataset as wds

        if args.remote:
            # Its documented way to read a bucket: a pipe per shard from an S3 client to stdout
            # (`pipe:aws s3 cp URL -`); here boto3's streaming GET (`s3cat.py`).
            cat = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "s3cat.py")
            urls = [f"pipe:{sys.executable} {cat} {path}/shard-{i:06d}.tar" for i in range(SHARDS)]
        else:
            urls = sorted(glob.glob(os.path.join(path, "shard-*.tar")))
        data = (
            wds.WebDataset(urls, shardshuffle=len(urls), seed=args.seed, empty_check=False)
            .shuffle(1000)
            .decode()
            .map(_sample)
            .batched(args.batch_size, collation_fn=workload.collate, partial=True)
        )
        self.loader = wds.WebLoader(data, batch_size=None, num_workers=args.workers, persistent_workers=args.workers > 0)

    def epoch(self, e: int):
        return iter(self.loader)

    def close(self) -> None:
        del self.loader


def open(path: str, args) -> Reader:  # noqa: A001
    return Reader(path, args)
