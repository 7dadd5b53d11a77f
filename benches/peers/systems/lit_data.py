"""LitData: chunks written by `litdata.optimize`, read by its `StreamingDataset` and
`StreamingDataLoader`."""

from __future__ import annotations

import os

import workload

NAME = "LitData"
FORMAT = "litdata"
CHECKED = True
REMOTE = True
IMPORTS = ("litdata",)  # imported before the clock starts
CONFIG = (
    "`StreamingDataset(input_dir=…, shuffle=True, batch_decode=1)`: chunk order shuffled, then "
    "items within 256-item windows of a chunk (its default); `batch_decode=1`, its setting for "
    "images (its `auto` takes these numpy arrays for small items and decodes 256 at a time, "
    "30× slower here); chunks read in place from the local folder; "
    "`StreamingDataLoader(num_workers=2, persistent_workers=True)` with the padding collate; "
    "64 MB chunks, no compression"
)

os.environ.setdefault("LITDATA_DISABLE_VERSION_CHECK", "1")  # no PyPI request at import


def sample(i: int):
    """`optimize`'s function: one row, as numpy values."""
    r = workload.row(i)
    return {"image": r["image"], "label": int(r["label"]), "tokens": r["tokens"], "embedding": r["embedding"]}


def write(path: str, total: int) -> None:
    """The workload as LitData chunks (`optimize`, 64 MB chunks, no compression)."""
    import litdata

    litdata.optimize(
        fn=sample, inputs=list(range(total)), output_dir=path, chunk_bytes="64MB", num_workers=1, mode="overwrite"
    )


class Reader:
    def __init__(self, path: str, args):
        import litdata

        # From a bucket: chunks downloaded into its cache folder through boto3 (AWS_ENDPOINT_URL).
        where = {"input_dir": litdata.streaming.resolver.Dir(path=args.cache, url=path)} if args.remote else {"input_dir": path}
        self.data = litdata.StreamingDataset(**where, shuffle=True, seed=args.seed, batch_decode=1)
        self.loader = litdata.StreamingDataLoader(
            self.data,
            batch_size=args.batch_size,
            num_workers=args.workers,
            persistent_workers=args.workers > 0,
            collate_fn=workload.collate,
        )

    def epoch(self, e: int):
        # StreamingDataLoader moves the dataset to its next epoch at each iteration.
        return iter(self.loader)

    def close(self) -> None:
        del self.loader


def open(path: str, args) -> Reader:  # noqa: A001
    return Reader(path, args)
