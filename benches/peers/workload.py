"""The mm224 workload made from real photographs, and the batch form every system must deliver.

A row is a random square crop (30–100 % of the photo's short side, anywhere in it) of one of
the colour photographs scikit-image ships in its wheel, resized to 224×224 (bilinear) and
flipped left-right half of the time; an i64 ``label`` (the row's index, so the harness can
check that each row is seen once per epoch); ``tokens``, i32 ids of a random length in
16..=256; a unit f32 ``embedding`` of 512. Rows are a pure function of (seed, index), so each
system's writer regenerates them and every format holds the same bytes.

A batch, whatever the system, is a dict of torch tensors: ``image`` uint8 [B, 224, 224, 3],
``label`` int64 [B], ``tokens`` int32 [B, L] zero padded to the longest row, ``tokens.lengths``
[B] and ``embedding`` float32 [B, 512] (Tessera's loader output; the peers' collate functions
build the same).
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any, Dict, List, Sequence

import numpy as np

SIDE = 224
EMBED = 512
VOCAB = 50_000
SEED = 2026
# The colour photographs in scikit-image's wheel (skimage/data/), read with Pillow; nothing
# is downloaded.
PHOTOS = (
    "astronaut.png",
    "chelsea.png",
    "coffee.png",
    "hubble_deep_field.jpg",
    "ihc.png",
    "motorcycle_left.png",
    "motorcycle_right.png",
    "retina.jpg",
    "rocket.jpg",
)


@functools.lru_cache(maxsize=None)
def photos() -> tuple:
    """The source photographs as RGB Pillow images (loaded once per process)."""
    from PIL import Image

    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("scikit-image is not installed (scripts/setup.d/50-peers.sh installs it)")
    data = os.path.join(list(spec.submodule_search_locations)[0], "data")
    out = []
    for name in PHOTOS:
        with Image.open(os.path.join(data, name)) as im:
            out.append(im.convert("RGB"))
    return tuple(out)


def row(i: int, seed: int = SEED) -> Dict[str, Any]:
    """Row ``i`` of the workload: ``image``, ``label``, ``tokens``, ``embedding``."""
    from PIL import Image

    rng = np.random.default_rng([seed, i])
    pics = photos()
    pic = pics[int(rng.integers(len(pics)))]
    w, h = pic.size
    side = max(16, int(min(w, h) * rng.uniform(0.3, 1.0)))
    x, y = int(rng.integers(0, w - side + 1)), int(rng.integers(0, h - side + 1))
    image = np.asarray(pic.resize((SIDE, SIDE), Image.BILINEAR, box=(x, y, x + side, y + side)))
    if rng.random() < 0.5:
        image = image[:, ::-1]
    tokens = rng.integers(0, VOCAB, int(rng.integers(16, 257)), dtype=np.int32)
    emb = rng.standard_normal(EMBED, dtype=np.float32)
    emb /= np.linalg.norm(emb)
    return {"image": np.ascontiguousarray(image), "label": np.int64(i), "tokens": tokens, "embedding": emb}


def rows(start: int, n: int) -> Dict[str, Any]:
    """Rows ``start..start+n`` as columns: stacked arrays, ``tokens`` a list of arrays."""
    rs = [row(i) for i in range(start, start + n)]
    return {
        "image": np.stack([r["image"] for r in rs]),
        "label": np.array([r["label"] for r in rs], dtype=np.int64),
        "tokens": [r["tokens"] for r in rs],
        "embedding": np.stack([r["embedding"] for r in rs]),
    }


def chunks(total: int, size: int = 500):
    """(start, n) pairs covering ``0..total`` in pieces of at most ``size`` rows."""
    for start in range(0, total, size):
        yield start, min(size, total - start)


# -- the batch form ---------------------------------------------------------------------------


def pad_flat(values: np.ndarray, offsets: np.ndarray):
    """Ragged rows given as concatenated ``values`` and ``offsets`` (B+1) → a zero-padded
    int32 [B, L] array and the lengths (int64 [B])."""
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    width = int(lengths.max()) if len(lengths) else 0
    out = np.zeros((len(lengths), width), dtype=np.int32)
    out[np.arange(width) < lengths[:, None]] = values[offsets[0] : offsets[-1]]
    return out, lengths


def collate(samples: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Per-sample dicts of numpy values → the batch form (what the peers' DataLoaders run)."""
    import torch

    toks: List[np.ndarray] = [np.asarray(s["tokens"], dtype=np.int32) for s in samples]
    offsets = np.zeros(len(toks) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in toks], out=offsets[1:])
    padded, lengths = pad_flat(np.concatenate(toks), offsets)
    return {
        "image": torch.from_numpy(np.stack([np.asarray(s["image"]) for s in samples])),
        "label": torch.tensor([int(s["label"]) for s in samples], dtype=torch.int64),
        "tokens": torch.from_numpy(padded),
        "tokens.lengths": torch.from_numpy(lengths),
        "embedding": torch.from_numpy(np.stack([np.asarray(s["embedding"]) for s in samples])),
    }


class BadBatch(Exception):
    """A system delivered a batch of the wrong form or content, or the wrong rows."""


def check_batch(batch: Dict[str, Any], batch_size: int) -> int:
    """Checks the form of one batch (keys, dtypes, shapes); returns its row count."""
    import torch

    want = {"image": torch.uint8, "label": torch.int64, "tokens": torch.int32, "embedding": torch.float32}
    for name, dtype in want.items():
        t = batch.get(name)
        if not isinstance(t, torch.Tensor):
            raise BadBatch(f"column {name!r}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dtype != dtype:
            raise BadBatch(f"column {name!r}: dtype {t.dtype}, expected {dtype}")
    n = batch["label"].shape[0]
    if not 0 < n <= batch_size:
        raise BadBatch(f"a batch of {n} rows (batch size {batch_size})")
    lengths = batch.get("tokens.lengths")
    if not isinstance(lengths, torch.Tensor) or lengths.shape != (n,) or lengths.dtype.is_floating_point:
        raise BadBatch("tokens.lengths: expected an integer tensor [B]")
    shapes = {
        "image": (n, SIDE, SIDE, 3),
        "label": (n,),
        "tokens": (n, int(lengths.max())),
        "embedding": (n, EMBED),
    }
    for name, shape in shapes.items():
        if tuple(batch[name].shape) != shape:
            raise BadBatch(f"column {name!r}: shape {tuple(batch[name].shape)}, expected {shape}")
    return n


def check_values(batch: Dict[str, Any], positions: Sequence[int] = (0, -1)) -> None:
    """Compares some rows of a batch with the workload's rows (found by their label)."""
    n = batch["label"].shape[0]
    for p in positions:
        p = p % n
        i = int(batch["label"][p])
        want = row(i)
        length = int(batch["tokens.lengths"][p])
        got = {
            "image": batch["image"][p].numpy(),
            "tokens": batch["tokens"][p, :length].numpy(),
            "embedding": batch["embedding"][p].numpy(),
        }
        for name, value in got.items():
            if not np.array_equal(value, want[name]):
                raise BadBatch(f"row {i}: column {name!r} differs from the workload's row")
        if batch["tokens"][p, length:].any():
            raise BadBatch(f"row {i}: tokens padding is not zero")


def check_epoch(labels: List[np.ndarray], total: int, batch_size: int, pads: bool = False) -> None:
    """Every row seen exactly once in an epoch (labels are row indices, in delivery order).

    With ``pads`` the last batch may be filled up to ``batch_size`` with rows already
    delivered (Tessera's loader does, so that every batch and every rank's shard is full):
    the first ``total`` rows must then be each row once and the rest fewer than a batch.
    """
    seen = np.concatenate(labels) if labels else np.zeros(0, dtype=np.int64)
    extra = len(seen) - total
    if pads and 0 < extra < batch_size and len(seen) % batch_size == 0:
        seen = seen[:total]
    seen = np.sort(seen)
    if len(seen) != total or not np.array_equal(seen, np.arange(total)):
        dup = len(seen) - len(np.unique(seen))
        raise BadBatch(f"an epoch delivered {len(seen)} rows ({dup} repeated); expected each of {total} once")
