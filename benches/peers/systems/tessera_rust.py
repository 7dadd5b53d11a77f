"""Tessera from Rust: the tch adapter (`tessera-loader-tch`) through `tessera bench`, which
drains whole epochs into libtorch tensors (the loop of `benches/src/bin/loader_throughput.rs`)
on this harness's dataset."""

from __future__ import annotations

import json
from typing import Any, Dict, List

NAME = "Tessera, Rust/tch (`tessera bench`)"
FORMAT = "tessera"
CHECKED = False  # the same loader core as the Python row, which is checked
REMOTE = True
CONFIG = "as the Python row: global shuffle, 2 loader threads, checksums on; libtorch tensors"
# Built in release by run.py (`cargo build --release -p tessera-cli --features bench`).
BINARY = "target/release/tessera"


# The disk cache's bound from a bucket (MiB).
CACHE_MIB = 8 << 10


def command(path: str, args, shuffle: str = "global") -> List[str]:
    """`tessera bench` runs `--warmup` untimed epochs, then `--epochs` timed ones; from a bucket
    with a disk cache of its own (`--cache-dir`, bound `CACHE_MIB`)."""
    cache = ["--cache-dir", args.cache, "--cache-mib", str(CACHE_MIB)] if args.remote else []
    return [
        BINARY,
        "--json",
        "bench",
        path,
        "--batch-size",
        str(args.batch_size),
        "--shuffle",
        shuffle,
        "--workers",
        str(args.workers),
        "--warmup",
        str(args.warmup),
        "--epochs",
        str(args.epochs),
    ] + cache


def parse(stdout: str, args) -> Dict[str, Any]:
    """`tessera bench --json`'s report; samples/s of distinct rows (its `samples` count the
    last batch's padding too)."""
    report = json.loads(stdout)
    seconds = report["seconds"]
    return {
        "samples_per_sec": args.rows * args.epochs / seconds,
        "samples": args.rows * args.epochs,
        "seconds": seconds,
        "raw_read_samples_per_sec": report.get("raw_read_samples_per_sec"),
        "epoch_seconds": report.get("epoch_seconds"),
        "first_batch_seconds": report.get("first_batch_seconds"),
        # For run.py's summary: the loader's own memory, what it fetched per epoch against
        # what it delivered, and its cache's bound.
        "memory_budget": report.get("memory_budget"),
        "memory_high_water": report.get("memory_high_water"),
        "epoch_storage_bytes": report.get("epoch_storage_bytes"),
        "tensor_bytes_per_epoch": report.get("tensor_bytes_per_epoch"),
        "cache_bound": (CACHE_MIB << 20) if args.remote else None,
    }
