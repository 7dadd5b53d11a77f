"""Tessera through its Python package: ``tessera.open(path).pytorch(...)``."""

from __future__ import annotations

import workload

NAME = "Tessera, Python (`ds.pytorch()`)"
FORMAT = "tessera"
CHECKED = True
PADS = True  # the last batch is filled up to batch_size with rows already delivered
REMOTE = True
IMPORTS = ("tessera",)  # imported before the clock starts
CONFIG = (
    "global shuffle (an exact permutation per epoch), 2 loader threads (Rust), checksums on, "
    "no compression; batches are views of the loader's buffers (no copy)"
)


def write(path: str, total: int) -> None:
    """The workload as a Tessera dataset: one append (one version) per 500 rows."""
    import tessera

    ds = tessera.create(
        path,
        [
            {"name": "image", "dtype": "u8", "shape": [workload.SIDE, workload.SIDE, 3], "kind": "image"},
            {"name": "label", "dtype": "i64"},
            {"name": "tokens", "dtype": "i32", "shape": [None], "kind": "tokens"},
            {"name": "embedding", "dtype": "f32", "shape": [workload.EMBED], "kind": "embedding"},
        ],
    )
    for start, n in workload.chunks(total):
        ds.append(workload.rows(start, n), message=f"rows {start}..{start + n}")


class Reader:
    def __init__(self, path: str, args):
        import tessera

        # From a bucket: the node-local disk cache, in this system's own cache folder.
        cache = {"cache_dir": args.cache, "cache_bytes": 8 << 30} if args.remote else {}
        self.loader = tessera.open(path).pytorch(
            batch_size=args.batch_size, shuffle="global", seed=args.seed, workers=args.workers, **cache
        )

    def epoch(self, e: int):
        self.loader.set_epoch(e)
        return iter(self.loader)

    def close(self) -> None:
        self.loader.close()


def open(path: str, args) -> Reader:  # noqa: A001 (the interface's name)
    return Reader(path, args)
