"""Lance: random access with `LanceDataset.take` over a global shuffle."""

from __future__ import annotations

import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict

import numpy as np

import workload

NAME = "Lance `take`"
FORMAT = "lance"
CHECKED = True
REMOTE = True  # no cache: epoch 2 reads the bucket again
IMPORTS = ("lance",)  # imported before the clock starts
CONFIG = (
    "global shuffle (a numpy permutation per epoch), one `take` of 64 rows per batch with the "
    "batch's row ids sorted (3–4× faster here than in shuffled order; the batch holds the same "
    "rows), 2 Python threads keeping 4 batches in flight (Lance's own I/O threads below); "
    "Lance file format 2.2 defaults, one fragment, no compression configured"
)
COLUMNS = ["image", "label", "tokens", "embedding"]
# Tensors over Arrow's read-only buffers (no copy, as Lance's own converter does); nothing
# writes to them.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable")


def schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("image", pa.list_(pa.uint8(), workload.SIDE * workload.SIDE * 3)),
            ("label", pa.int64()),
            ("tokens", pa.list_(pa.int32())),
            ("embedding", pa.list_(pa.float32(), workload.EMBED)),
        ]
    )


def write(path: str, total: int) -> None:
    """The workload as a Lance dataset (fixed-size lists for the tensors, a list for tokens),
    written with `lance.write_dataset` and its default file and row-group sizes."""
    import lance
    import pyarrow as pa

    def batches():
        for start, n in workload.chunks(total):
            r = workload.rows(start, n)
            lengths = np.array([len(t) for t in r["tokens"]], dtype=np.int32)
            offsets = np.zeros(n + 1, dtype=np.int32)
            np.cumsum(lengths, out=offsets[1:])
            yield pa.RecordBatch.from_arrays(
                [
                    pa.FixedSizeListArray.from_arrays(pa.array(r["image"].reshape(-1)), workload.SIDE * workload.SIDE * 3),
                    pa.array(r["label"]),
                    pa.ListArray.from_arrays(pa.array(offsets), pa.array(np.concatenate(r["tokens"]))),
                    pa.FixedSizeListArray.from_arrays(pa.array(r["embedding"].reshape(-1)), workload.EMBED),
                ],
                schema=schema(),
            )

    lance.write_dataset(pa.RecordBatchReader.from_batches(schema(), batches()), path, mode="overwrite")


def storage_options(path: str) -> Dict[str, str]:
    """From a bucket: the endpoint and keys `scripts/benchbucket.sh env` exports, as Lance's
    storage options (its object_store client)."""
    if not path.startswith("s3://"):
        return {}
    env = os.environ
    return {
        "endpoint": env["AWS_ENDPOINT"], "allow_http": "true", "region": env.get("AWS_REGION", "us-east-1"),
        "access_key_id": env["AWS_ACCESS_KEY_ID"], "secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
    }


def to_torch(batch) -> Dict[str, Any]:
    """An Arrow record batch or table of the workload's columns → the batch form."""
    import torch

    def fixed(col, width):
        arr = col.combine_chunks() if hasattr(col, "combine_chunks") else col
        values = arr.values.slice(arr.offset * width, len(arr) * width)
        return values.to_numpy(zero_copy_only=False).reshape(len(arr), width)

    n = batch.num_rows
    image = fixed(batch.column("image"), workload.SIDE * workload.SIDE * 3).reshape(n, workload.SIDE, workload.SIDE, 3)
    tokens = batch.column("tokens")
    tokens = tokens.combine_chunks() if hasattr(tokens, "combine_chunks") else tokens
    padded, lengths = workload.pad_flat(tokens.values.to_numpy(zero_copy_only=False), tokens.offsets.to_numpy())
    return {
        "image": torch.from_numpy(image),
        "label": torch.from_numpy(batch.column("label").to_numpy()),
        "tokens": torch.from_numpy(padded),
        "tokens.lengths": torch.from_numpy(lengths),
        "embedding": torch.from_numpy(fixed(batch.column("embedding"), workload.EMBED)),
    }


class Reader:
    def __init__(self, path: str, args):
        import lance

        self.ds = lance.dataset(path, storage_options=storage_options(path))
        self.rows = self.ds.count_rows()
        self.args = args
        self.pool = ThreadPoolExecutor(max_workers=args.workers)

    def _take(self, ids):
        return to_torch(self.ds.take(np.sort(ids), columns=COLUMNS))

    def epoch(self, e: int):
        perm = np.random.default_rng([self.args.seed, e]).permutation(self.rows)
        bs = self.args.batch_size
        starts = list(range(0, self.rows, bs))
        inflight = []
        depth = 2 * self.args.workers
        for s in starts:
            inflight.append(self.pool.submit(self._take, perm[s : s + bs]))
            if len(inflight) >= depth:
                yield inflight.pop(0).result()
        for f in inflight:
            yield f.result()

    def close(self) -> None:
        self.pool.shutdown()


def open(path: str, args) -> Reader:  # noqa: A001
    return Reader(path, args)
