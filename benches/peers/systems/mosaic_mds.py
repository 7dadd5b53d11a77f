"""MosaicML Streaming: MDS shards read by `streaming.StreamingDataset` in a `DataLoader`."""

from __future__ import annotations

import workload

NAME = "MosaicML Streaming (MDS)"
FORMAT = "mds"
CHECKED = True
REMOTE = True
IMPORTS = ("streaming",)  # imported before the clock starts
CONFIG = (
    "`StreamingDataset(local=…, shuffle=True)`: its default `py1e` shuffle, whose block "
    "(262,144 samples) is larger than this dataset, so rows mix across all shards; shards read "
    "in place (no remote, no copy); "
    "`DataLoader(num_workers=2, persistent_workers=True)` with the padding collate; 64 MB "
    "shards, no compression"
)
COLUMNS = {
    "image": f"ndarray:uint8:{workload.SIDE},{workload.SIDE},3",
    "label": "int64",
    "tokens": "ndarray:int32",
    "embedding": f"ndarray:float32:{workload.EMBED}",
}


def write(path: str, total: int) -> None:
    """The workload as MDS shards (`MDSWriter`, default 64 MB shard size, no compression)."""
    from streaming import MDSWriter

    with MDSWriter(out=path, columns=COLUMNS) as out:
        for start, n in workload.chunks(total):
            r = workload.rows(start, n)
            for j in range(n):
                out.write({k: (v[j]) for k, v in r.items()})


class Reader:
    def __init__(self, path: str, args):
        import torch
        from streaming import StreamingDataset
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
        # From a bucket: `remote=` the shards' URL, downloaded to `local=` (its cache), through
        # its boto3 client (S3_ENDPOINT_URL).
        where = {"remote": path, "local": args.cache} if args.remote else {"local": path}
        self.data = StreamingDataset(**where, shuffle=True, shuffle_seed=args.seed, batch_size=args.batch_size)
        self.loader = torch.utils.data.DataLoader(
            self.data,
            batch_size=args.batch_size,
            num_workers=args.workers,
            persistent_workers=args.workers > 0,
            collate_fn=workload.collate,
        )

    def epoch(self, e: int):
        # StreamingDataset advances its own epoch at each iteration.
        return iter(self.loader)

    def close(self) -> None:
        del self.loader


def open(path: str, args) -> Reader:  # noqa: A001
    return Reader(path, args)
