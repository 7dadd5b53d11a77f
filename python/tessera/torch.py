"""PyTorch integration: :class:`TesseraIterable`, a ``torch.utils.data.IterableDataset``.

Importing this module imports torch; ``import tessera`` alone does not.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator

import torch.utils.data

from . import Dataset, Loader


class TesseraIterable(torch.utils.data.IterableDataset):
    """Batches of a Tessera dataset as an ``IterableDataset``, for code that expects a
    ``torch.utils.data.DataLoader``.

    Each item is a whole batch (a dict of tensors), so wrap it with
    ``DataLoader(it, batch_size=None, num_workers=0)``:

    * ``batch_size=None``: the loader already batches (and shuffles, shards and pads).
    * ``num_workers=0`` is right: the Rust side is already parallel. Its worker threads
      fetch, decode and assemble batches in this process and release the GIL while the
      training loop waits, so there is nothing for worker *processes* to add. They would only
      cost: each would open its own loader (reading the same shard, so every batch would be
      seen ``num_workers`` times), and every batch would be pickled through shared memory
      instead of being handed over as zero-copy views of the loader's buffers.

    Iterating runs one epoch; ``set_epoch``, ``state_dict`` and ``load_state_dict`` are the
    underlying :class:`tessera.Loader`'s.
    """

    def __init__(self, dataset: Dataset, **loader_options: Any):
        super().__init__()
        self.loader: Loader = dataset.pytorch(**loader_options)

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        if torch.utils.data.get_worker_info() is not None:
            raise RuntimeError(
                "TesseraIterable must run with DataLoader(num_workers=0): the Rust loader is already "
                "parallel; worker processes would each yield the whole shard, and a loader opened "
                "before a fork does not work in the forked process"
            )
        return iter(self.loader)

    def __len__(self) -> int:
        return len(self.loader)

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration runs."""
        self.loader.set_epoch(epoch)

    def state_dict(self) -> Dict[str, Any]:
        """The loader's resume state."""
        return self.loader.state_dict()

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from a state returned by ``state_dict``."""
        self.loader.load_state_dict(state)
