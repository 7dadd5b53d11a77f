"""Shared fixtures: a small dataset with every kind of column, written from Python in three
commits (three fragments), and the values that were written, to compare reads against."""

import numpy as np
import pytest

import tessera

SCHEMA = [
    {"name": "id", "dtype": "i64"},
    {"name": "x", "dtype": "f32", "shape": [3]},
    {"name": "img", "dtype": "u8", "shape": [4, 5], "compression": "lz4"},
    {"name": "half", "dtype": "f16"},
    {"name": "bf", "dtype": "bf16", "shape": [2]},
    {"name": "u", "dtype": "u16"},
    {"name": "flag", "dtype": "bool"},
    {"name": "tokens", "dtype": "i32", "shape": [None], "kind": "tokens", "compression": "zstd"},
    {"name": "mat", "dtype": "i16", "shape": [None, 2]},
    {"name": "caption", "dtype": "utf8", "kind": "text"},
    {"name": "blob", "dtype": "bytes"},
    {"name": "opt", "dtype": "f64", "nullable": True},
]

# Rows per commit: three fragments of different sizes, 100 rows in all.
CHUNKS = [40, 35, 25]


def make_rows(start, n, rng):
    """`n` rows whose values are a function of their global index (so order checks are easy)."""
    ids = np.arange(start, start + n, dtype=np.int64)
    tokens = [np.arange(int(i) % 7, dtype=np.int32) * int(i) for i in ids]
    mat = [np.full((int(i) % 4, 2), int(i), dtype=np.int16) for i in ids]
    # bf16-exact values (a few mantissa bits) so the round trip is exact.
    bf = np.stack([ids * 0.5, -ids * 0.25]).T.astype(np.float32)
    opt = np.ma.MaskedArray(ids * 1.5, mask=(ids % 5 == 0))
    return {
        "id": ids,
        "x": rng.standard_normal((n, 3)).astype(np.float32),
        "img": rng.integers(0, 256, (n, 4, 5), dtype=np.uint8),
        "half": (ids / 8).astype(np.float16),
        "bf": bf,
        "u": (ids * 600 % 65536).astype(np.uint16),
        "flag": ids % 3 == 0,
        "tokens": tokens,
        "mat": mat,
        "caption": [f"row {int(i)} " + "é" * (int(i) % 5) for i in ids],
        "blob": [bytes([int(i) % 256]) * (int(i) % 6) for i in ids],
        "opt": opt,
    }


def concat(parts):
    out = {}
    for k in parts[0]:
        vals = [p[k] for p in parts]
        if isinstance(vals[0], np.ma.MaskedArray):
            out[k] = np.ma.concatenate(vals)
        elif isinstance(vals[0], np.ndarray):
            out[k] = np.concatenate(vals)
        else:
            out[k] = sum(vals, [])
    return out


@pytest.fixture(scope="session")
def written(tmp_path_factory):
    """`(path, values)`: the dataset's location and every column's written values."""
    path = str(tmp_path_factory.mktemp("ds") / "ds")
    ds = tessera.create(path, SCHEMA)
    rng = np.random.default_rng(7)
    parts, start = [], 0
    for i, n in enumerate(CHUNKS):
        rows = make_rows(start, n, rng)
        v = ds.append(rows, message=f"chunk {i}")
        assert v == i + 2
        parts.append(rows)
        start += n
    return path, concat(parts)


@pytest.fixture()
def ds(written):
    return tessera.open(written[0])
