"""Lance's PyTorch dataset, `lance.torch.data.LanceDataset`, with its shuffling sampler."""

from __future__ import annotations

import warnings

from systems import lance_take

# LanceDataset passes with_row_id=False to every sampler, and this one warns about any value.
warnings.filterwarnings("ignore", message="with_row_id is not supported for ShardedBatchSampler")

NAME = "Lance `LanceDataset` (torch)"
FORMAT = "lance"
CHECKED = True
REMOTE = True  # no cache: epoch 2 reads the bucket again
IMPORTS = ("lance", "lance.torch.data", "lance.sampler")  # imported before the clock starts
CONFIG = (
    "`ShardedBatchSampler(randomize=True)`: contiguous 64-row batches in a shuffled order "
    "(a batch-level shuffle, its only shuffling sampler without a filter), `batch_readahead=16` "
    "Lance threads, `DataLoader(batch_size=None, num_workers=0)`; a `to_tensor_fn` for the "
    "ragged tokens (its default converter takes fixed-size lists and scalars only)"
)


class Reader:
    def __init__(self, path: str, args):
        import lance

        self.ds = lance.dataset(path, storage_options=lance_take.storage_options(path))
        self.args = args

    def epoch(self, e: int):
        import torch
        from lance.sampler import ShardedBatchSampler
        from lance.torch.data import LanceDataset

        sampler = ShardedBatchSampler(rank=0, world_size=1, randomize=True, seed=self.args.seed * 1000 + e)
        data = LanceDataset(
            self.ds,
            batch_size=self.args.batch_size,
            columns=lance_take.COLUMNS,
            sampler=sampler,
            batch_readahead=16,
            to_tensor_fn=lambda batch, **_: lance_take.to_torch(batch),
            auto_detect_rank=False,
        )
        return iter(torch.utils.data.DataLoader(data, batch_size=None, num_workers=0))

    def close(self) -> None:
        pass


def open(path: str, args) -> Reader:  # noqa: A001
    return Reader(path, args)
