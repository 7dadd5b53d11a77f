"""PIL decoding in a PyTorch DataLoader: the baseline of loader/examples/encoded_bench.rs.

    .venv/bin/python benches/encoded/pil_loader.py DIR WORKERS BATCH

Reads every file of DIR (JPEGs) with `PIL.Image.open` + `np.asarray` in a Dataset, batched by
a DataLoader with WORKERS worker processes, shuffled, uint8 [B, H, W, 3] tensors. One warm-up
epoch (worker start-up, page cache), then one timed epoch; prints one JSON line."""

import json
import os
import sys
import time

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset


class Files(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with Image.open(self.paths[i]) as im:
            return torch.from_numpy(np.asarray(im))


def main():
    root, workers, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    paths = sorted(os.path.join(root, f) for f in os.listdir(root))
    loader = DataLoader(Files(paths), batch_size=batch, shuffle=True, num_workers=workers,
                        persistent_workers=workers > 0)
    for _ in loader:
        pass
    n, t = 0, time.perf_counter()
    for b in loader:
        n += b.shape[0]
    dt = time.perf_counter() - t
    print(json.dumps({"samples": n, "seconds": dt, "samples_per_s": n / dt,
                      "pillow": Image.__version__, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
