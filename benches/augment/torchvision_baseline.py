"""torchvision.transforms.v2 baselines of loader/examples/augment_bench.rs, and the PSNR of
Tessera's resize against torchvision's.

    .venv-peers/bin/python benches/augment/torchvision_baseline.py DIR WORKERS BATCH

DIR holds the JPEG files. The pipeline is the bench's: RandomResizedCrop(224, antialias)
+ RandomHorizontalFlip + ToDtype(float32, scale) + Normalize(ImageNet) + float16, CHW, in a
shuffled DataLoader with WORKERS worker processes, batch BATCH; from the JPEG files (PIL
decode) and from the decoded arrays held in memory (uint8 CHW tensors). One warm-up epoch,
three timed epochs each (persistent workers); and Grain's MapDataset (shuffle, random_map of the same pipeline, batch,
``mp_prefetch`` with WORKERS processes, the second of two epochs through one iterator) over
the decoded arrays, when grain is installed. PSNR: for 64 images, a fixed crop resized to 224 × 224 as uint8 by
Tessera's loader (Resize on the pre-cut crop, through the tessera package) and by
torchvision's `resize(antialias=True)`. Prints one JSON line."""

import json
import math
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
PIPELINE = v2.Compose(
    [
        v2.RandomResizedCrop(224, antialias=True),
        v2.RandomHorizontalFlip(),
        v2.ToDtype(torch.float32, scale=True),
        v2.Normalize(MEAN, STD),
        v2.ToDtype(torch.float16),
    ]
)


class Jpegs(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with Image.open(self.paths[i]) as im:
            return PIPELINE(v2.functional.pil_to_tensor(im.convert("RGB")))


class Arrays(Dataset):
    def __init__(self, arrays):
        self.arrays = arrays

    def __len__(self):
        return len(self.arrays)

    def __getitem__(self, i):
        return PIPELINE(self.arrays[i])


def rate(dataset, workers, batch):
    loader = DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers, persistent_workers=workers > 0)
    for _ in loader:
        pass
    n, t = 0, time.perf_counter()
    for _ in range(3):
        for b in loader:
            n += b.shape[0]
    return n / (time.perf_counter() - t)


def _augment_np(x, rng):
    """Grain's per-element random map: the same torchvision pipeline on one CHW array."""
    torch.set_num_threads(1)
    return PIPELINE(torch.from_numpy(x)).numpy()


def grain_rate(arrays, workers, batch):
    """Grain (``MapDataset``: shuffle, random_map, batch; ``mp_prefetch`` with WORKERS worker
    processes) over the decoded arrays; ``None`` when grain is not installed."""
    try:
        import grain
        from absl import flags
    except ImportError:
        return None
    flags.FLAGS.mark_as_parsed()  # grain reads absl flags; this script has none of its own
    source = [a.numpy() for a in arrays]
    ds = grain.MapDataset.source(source).seed(0).shuffle().random_map(_augment_np).batch(batch)
    per_epoch = len(ds)
    # Two epochs through one iterator: the workers start (and receive the arrays) once; the
    # second epoch is timed.
    it = ds.repeat(2).to_iter_dataset().mp_prefetch(grain.MultiprocessingOptions(num_workers=workers))
    n, t = 0, None
    for i, b in enumerate(it):
        if i == per_epoch:
            t = time.perf_counter()
        if t is not None:
            n += b.shape[0]
    return n / (time.perf_counter() - t) if t is not None and n else None


def psnr(paths):
    """Tessera's Resize(224, 224) of a crop against torchvision's antialiased resize (uint8)."""
    # The tessera package of this checkout (python/, built by scripts/python.sh).
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    try:
        import tessera
        from tessera import transforms as T
    except ImportError:
        return None
    crops = []
    for p in paths[:64]:
        with Image.open(p) as im:
            a = np.asarray(im.convert("RGB"))
        h, w, _ = a.shape
        crops.append(np.ascontiguousarray(a[h // 8 : h - h // 5, w // 6 : w - w // 9]))
    with tempfile.TemporaryDirectory() as d:
        ds = tessera.create(os.path.join(d, "c"), [{"name": "image", "dtype": "u8", "shape": [None, None, 3]}])
        ds.append({"image": crops})
        ours = [b["image"] for b in ds.numpy(batch_size=len(crops), shuffle=None, transforms={"image": [T.Resize((224, 224))]})]
        ours = np.concatenate(ours)
    err = 0.0
    for c, o in zip(crops, ours):
        ref = v2.functional.resize(torch.from_numpy(c).permute(2, 0, 1), [224, 224], antialias=True).permute(1, 2, 0)
        err += float(((o.astype(np.float64) - ref.numpy().astype(np.float64)) ** 2).mean())
    mse = err / len(crops)
    return 99.0 if mse == 0 else 10 * math.log10(255.0**2 / mse)


def main():
    root, workers, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(1)
    paths = sorted(os.path.join(root, f) for f in os.listdir(root))
    arrays = []
    for p in paths:
        with Image.open(p) as im:
            arrays.append(torch.from_numpy(np.asarray(im.convert("RGB")).copy()).permute(2, 0, 1).contiguous())
    out = {
        "pil_jpeg_img_s": rate(Jpegs(paths), workers, batch),
        "decoded_arrays_img_s": rate(Arrays(arrays), workers, batch),
        "grain_arrays_img_s": grain_rate(arrays, workers, batch),
        "resize_psnr_db": psnr(paths),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
