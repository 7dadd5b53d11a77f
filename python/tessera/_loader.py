"""The training loader's Python face: :class:`Loader` (an iterable, one epoch per ``iter()``)
and :class:`LoaderIterator` (the batches of one epoch). Output: torch tensors, numpy arrays or
JAX arrays (through DLPack).

The Rust core does the work on its own threads (fetch, decode, assemble); Python receives
numpy arrays that are views of the core's batch buffers, and ``torch.from_numpy`` turns them
into tensors without a copy. A buffer is refilled only when no array or tensor over it is
alive any more, so whatever the training loop keeps keeps its values.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from . import _native, transforms
from ._native import UsageError

STATE_FORMAT = "tessera-loader/1"


def open_loader(
    location: str, output: str, device: Optional[str], kwargs: Dict[str, Any], mixture: Optional[str] = None
) -> "Loader":
    """A :class:`Loader` from the native loader's settings (``Dataset`` and ``Mixture`` loaders):
    ``batch_transform`` checked and kept on the Python side, ``transforms`` as the core takes
    them; ``mixture`` is the mixture's JSON, kept in every state."""
    batch_transform = kwargs.pop("batch_transform", None)
    if batch_transform is not None and not callable(batch_transform):
        raise TypeError("batch_transform must be a callable: batch dict -> batch dict")
    kwargs["transforms"] = transforms._specs(kwargs.get("transforms"))
    # numpy arrays keep the stored u16/u32/u64; torch tensors (no unsigned arithmetic), JAX and
    # TensorFlow get them widened to i32/i64.
    kwargs["widen_unsigned"] = output != "numpy"
    native = _native.Loader(location, **kwargs)
    return Loader(native, output=output, device=device, batch_transform=batch_transform, mixture=mixture)


def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


class Loader:
    """Batches of one pinned dataset version (``Dataset.pytorch()`` / ``Dataset.numpy()``).

    Each ``iter(loader)`` runs one epoch: epoch 0 first, then 1, 2, … (``set_epoch`` picks
    the next one). A batch is a dict: column name → tensor/array ``[B, …]``; ragged columns
    are zero padded with ``"<name>.lengths"`` (``[B]``, or ``[B, k]`` for k ragged dims);
    nullable columns add ``"<name>.valid"`` (bool ``[B]``); ``utf8``/``bytes`` columns are
    lists of ``str``/``bytes`` (``None`` for nulls).

    With ``ragged="packed"`` a ragged column is its rows back to back, without padding (one
    copy of the payload): ``[Σ d1, d2, …]`` when only the first dim varies, else flat, with
    ``"<name>.offsets"`` (``[B + 1]``, where each row starts along the first dim) and
    ``"<name>.shapes"`` (``[B, ndim]``). That is the layout of torch's jagged nested tensors:
    ``torch.nested.nested_tensor_from_jagged(batch["tokens"], batch["tokens.offsets"])``.

    Resume (torchdata ``StatefulDataLoader`` convention): ``state_dict()`` at any point, and
    ``load_state_dict(state)`` on a loader of the same dataset version and settings; the next
    ``iter()`` yields exactly the batches that were not consumed yet.
    """

    def __init__(
        self,
        native: Any,
        output: str = "torch",
        device: Optional[str] = None,
        batch_transform: Any = None,
        mixture: Optional[str] = None,
    ):
        if output not in ("torch", "numpy", "jax", "tensorflow"):
            raise UsageError(f"output must be 'torch', 'numpy', 'jax' or 'tensorflow', not {output!r}")
        self._native = native
        self._mixture = mixture
        self._batch_transform = batch_transform
        self._output = output
        self._device = None if device in (None, "cpu") else device
        self._next_epoch = 0
        self._pending: Optional[Dict[str, Any]] = None
        self._current: Optional[LoaderIterator] = None
        self._torch = None
        self._jax = None
        self._tf = None
        self._cuda = False
        if output == "tensorflow":
            import tensorflow as tf  # imported here: the package works without TensorFlow

            self._tf = tf
        if output == "jax":
            import jax  # imported here: the package works without jax

            self._jax = jax
        if output == "torch":
            import torch  # imported here: the package works without torch for numpy()

            self._torch = torch
            if self._device is not None:
                dev = torch.device(self._device)
                if dev.type == "cuda" and not torch.cuda.is_available():
                    raise UsageError(f"device={device!r}, but this torch has no CUDA device")
                self._cuda = dev.type == "cuda"

    # -- facts ------------------------------------------------------------------------------
    @property
    def version(self) -> int:
        """The dataset version read."""
        return self._native.version

    @property
    def columns(self):
        """Projected column names, in output order."""
        return self._native.columns

    @property
    def rank(self) -> int:
        """This process's rank."""
        return self._native.dist[0]

    @property
    def world_size(self) -> int:
        """The number of ranks."""
        return self._native.dist[1]

    def __len__(self) -> int:
        """Batches this rank yields per epoch."""
        return self._native.batches_per_epoch

    def skipped(self):
        """Samples replaced so far because their stored bytes were corrupt (with
        ``skip_bad_samples=True``): dicts with ``epoch``, ``batch``, ``slot``, ``row``,
        ``replacement`` and ``error``."""
        return self._native.skipped()

    def io_stats(self) -> Dict[str, int]:
        """Storage traffic since the loader opened: ``requests``, ``bytes`` and ``retries``
        (what reached the store), ``threads`` (the filling threads the last epoch started),
        and the disk cache's (``cache_dir=``) ``cache_hits`` and
        ``cache_misses`` (1 MiB blocks of data files), ``cache_read_bytes``,
        ``cache_written_bytes``, ``cache_evictions``, ``cache_corrupt`` (entries found
        corrupt, fetched again) and ``cache_errors`` (cache failures served from the store)."""
        return self._native.io_stats()

    def mixture_counts(self, epoch: int):
        """A mixture loader's samples of each source in ``epoch`` (``None`` otherwise)."""
        return self._native.mixture_counts(int(epoch))

    def plan_rows(self, epoch: int):
        """The global rows of this rank's batches of ``epoch``, in order (reads no data)."""
        return self._native.plan_rows(int(epoch))

    def packed(
        self, column: str, context: int, windows: int, split_documents: bool = True, across_epochs: bool = False
    ) -> "PackedLoader":
        """Token packing: this loader's documents (the ragged token column ``column``, read
        with ``ragged="packed"``) back to back in batches of ``windows`` windows of
        ``context`` tokens (see :class:`PackedLoader`). ``across_epochs=True`` packs epoch
        after epoch without padding at epoch ends (one ``iter()`` runs on until the loop
        stops): what a DDP loop that trains by steps wants, every rank always having a batch."""
        return PackedLoader(self, column, int(context), int(windows), bool(split_documents), bool(across_epochs))

    # -- epochs -----------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """The epoch the next ``iter()`` runs (as ``DistributedSampler.set_epoch``)."""
        self._next_epoch = int(epoch)
        self._pending = None

    def __iter__(self) -> "LoaderIterator":
        # The core runs one epoch at a time per loader: stop the previous one first.
        self.close()
        if self._pending is not None:
            state, self._pending = self._pending, None
            epoch = self._native.resume(state["state"])
            if epoch.remaining == 0:  # saved after the last batch: go on with the next epoch
                next_epoch = epoch.epoch + 1
                epoch.close()
                epoch = self._native.epoch(next_epoch)
        else:
            epoch = self._native.epoch(self._next_epoch)
        self._next_epoch = epoch.epoch + 1
        self._current = LoaderIterator(self, epoch)
        return self._current

    def close(self) -> None:
        """Stops the running epoch's worker threads (an unfinished iterator ends)."""
        if self._current is not None:
            self._current._close()
            self._current = None

    # -- resume -----------------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """Where the loader stands: the current iterator's position, else the state loaded
        last, else the start of the next epoch."""
        if self._current is not None:
            return self._current.state_dict()
        if self._pending is not None:
            return dict(self._pending)
        return self._with_mixture(
            {"format": STATE_FORMAT, "version": self.version, "epoch": self._next_epoch, "state": None}
        )

    def _with_mixture(self, state: Dict[str, Any]) -> Dict[str, Any]:
        """A mixture loader's states also carry the mixture and its history (``Mixture.from_state``)."""
        if self._mixture is not None:
            state["mixture"] = self._mixture
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Makes the next ``iter()`` continue from ``state`` (from ``state_dict()``). The
        state is bound to a dataset version: another version raises :class:`UsageError`."""
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise UsageError(f"not a Tessera loader state (format {STATE_FORMAT!r} expected)")
        if state.get("version") != self.version:
            raise UsageError(
                f"the state was saved reading version {state.get('version')}; this loader reads version {self.version}"
            )
        self.close()
        if state.get("state") is None:
            self.set_epoch(int(state.get("epoch", 0)))
        else:
            self._pending = dict(state)

    # -- batches ----------------------------------------------------------------------------
    def _convert(self, pieces) -> Dict[str, Any]:
        if self._jax is not None:
            return self._convert_jax(pieces)
        if self._tf is not None:
            return self._convert_tf(pieces)
        torch = self._torch
        out: Dict[str, Any] = {}

        def move(t):
            if self._device is None:
                return t
            if self._cuda:
                # Through pinned memory, asynchronously: the copy overlaps the step that runs
                # on the GPU, and torch's pinned allocator keeps the staging buffer alive
                # until the copy has finished.
                return t.pin_memory().to(self._device, non_blocking=True)
            return t.to(self._device)

        def side(a):
            if a is None or torch is None:
                return a
            return move(torch.from_numpy(a))

        for name, values, lengths, offsets, shapes, valid, elem in pieces:
            if elem in ("utf8", "bytes"):
                out[name] = values
                continue
            if torch is None:
                out[name] = _bf16_to_f32(values) if elem == "bf16" else values
            else:
                t = torch.from_numpy(values)  # zero-copy: the tensor keeps the array alive
                if elem == "bf16":
                    t = t.view(torch.bfloat16)
                out[name] = move(t)
            if lengths is not None:
                out[name + ".lengths"] = side(lengths)
            if offsets is not None:
                out[name + ".offsets"] = side(offsets)
            if shapes is not None:
                out[name + ".shapes"] = side(shapes)
            if valid is not None:
                out[name + ".valid"] = side(valid)
        return out

    def _convert_jax(self, pieces) -> Dict[str, Any]:
        """Batches as ``jax.Array``s through DLPack: on CPU the arrays share the loader's
        buffers (no copy); the buffer stays alive, unchanged, while any array over it does."""
        jax = self._jax
        out: Dict[str, Any] = {}

        def dl(a):
            return None if a is None else jax.numpy.from_dlpack(a)

        for name, values, lengths, offsets, shapes, valid, elem in pieces:
            if elem in ("utf8", "bytes"):
                out[name] = values
                continue
            arr = dl(values)
            out[name] = jax.lax.bitcast_convert_type(arr, jax.numpy.bfloat16) if elem == "bf16" else arr
            for suffix, side in ((".lengths", lengths), (".offsets", offsets), (".shapes", shapes), (".valid", valid)):
                if side is not None:
                    out[name + suffix] = dl(side)
        return out


    def _convert_tf(self, pieces) -> Dict[str, Any]:
        """Batches as ``tf.Tensor``s: through DLPack without a copy where TensorFlow takes the
        memory as it is (64-byte aligned, as the loader's value buffers are; the tensor then
        keeps the buffer alive and unchanged), copied otherwise (TensorFlow aborts the
        process on an unaligned DLPack import rather than raising)."""
        tf = self._tf
        out: Dict[str, Any] = {}

        def conv(a):
            if a is None:
                return None
            if a.size and a.flags.c_contiguous and a.ctypes.data % 64 == 0:
                return tf.experimental.dlpack.from_dlpack(a.__dlpack__())
            return tf.convert_to_tensor(a)

        for name, values, lengths, offsets, shapes, valid, elem in pieces:
            if elem in ("utf8", "bytes"):
                out[name] = values
                continue
            t = conv(values)
            out[name] = tf.bitcast(t, tf.bfloat16) if elem == "bf16" else t
            for suffix, side in ((".lengths", lengths), (".offsets", offsets), (".shapes", shapes), (".valid", valid)):
                if side is not None:
                    out[name + suffix] = conv(side)
        return out


class LoaderIterator:
    """The batches of one epoch on this rank (``iter(loader)``)."""

    def __init__(self, loader: Loader, epoch: Any):
        self._loader = loader
        self._epoch = epoch
        self._number = epoch.epoch
        self._final_state: Optional[str] = None
        self.last_rows: Optional[np.ndarray] = None
        """The global rows of the batch returned last (of each sample's source's version, for a
        mixture)."""
        self.last_sources: Optional[np.ndarray] = None
        """A mixture's source of each sample of the batch returned last (``None`` for one
        dataset)."""

    @property
    def epoch(self) -> int:
        """The epoch number."""
        return self._number

    def __iter__(self) -> "LoaderIterator":
        return self

    def __len__(self) -> int:
        """Batches left."""
        return 0 if self._epoch is None else self._epoch.remaining

    def __next__(self) -> Dict[str, Any]:
        if self._epoch is None:
            raise StopIteration
        got = self._epoch.next()  # waits with the GIL released
        if got is None:
            self._close()
            raise StopIteration
        pieces, rows, _epoch, _index, sources = got
        self.last_rows = rows
        self.last_sources = sources
        batch = self._loader._convert(pieces)
        if self._loader._batch_transform is not None:
            batch = self._loader._batch_transform(batch)
        return batch

    def state_dict(self) -> Dict[str, Any]:
        """The position after the batches returned so far (bound to the dataset version)."""
        state = self._final_state if self._epoch is None else self._epoch.state()
        return self._loader._with_mixture(
            {"format": STATE_FORMAT, "version": self._loader.version, "epoch": self._number, "state": state}
        )

    def _close(self) -> None:
        if self._epoch is not None:
            self._final_state = self._epoch.state()
            self._epoch.close()
            self._epoch = None

    def close(self) -> None:
        """Stops the epoch early (its worker threads end)."""
        self._close()


PACK_FORMAT = "tessera-packer/1"


class PackedLoader:
    """Packed token windows for language-model pretraining (``loader.packed(...)``).

    Each ``iter()`` packs one epoch of the loader's documents, in the loader's order (any
    shuffle, view or mixture), into dicts of ``"tokens"`` (``[windows, context]``, the column's
    dtype), ``"segment_ids"`` (int32, 1, 2, … per document piece within a window, 0 for
    padding), ``"position_ids"`` (int32, restarting at 0 at every piece: what block-diagonal
    attention needs) and ``"pieces"`` (numpy ``[n, 6]``: window, start, length, row, source,
    offset in the document). With ``split_documents=True`` a document that does not fit
    continues in the next window, so only the epoch's last batch is padded; ``False`` starts
    the next window instead where the document fits a window whole. Every token of every
    document this rank reads appears exactly once per epoch. ``state_dict()`` /
    ``load_state_dict()`` resume exactly, also inside a document. Ranks pack their own
    shards: their batch counts can differ by a few at an epoch's end, unless ``across_epochs``
    makes one ``iter()`` run on from epoch to epoch (then train by steps).
    """

    def __init__(
        self, loader: Loader, column: str, context: int, windows: int, split_documents: bool, across_epochs: bool = False
    ):
        self._loader = loader
        self._args = dict(
            column=column, context=context, windows=windows, split_documents=split_documents, stream=across_epochs
        )
        self._next_epoch = 0
        self._pending: Optional[Dict[str, Any]] = None
        self._current: Optional[Any] = None
        self._epoch_of_current = 0
        self.last_pieces: Optional[np.ndarray] = None
        """The pieces of the batch returned last."""

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next ``iter()`` packs."""
        self._next_epoch = int(epoch)
        self._pending = None

    def __iter__(self):
        self.close()
        self._loader.close()
        if self._pending is not None:
            state, self._pending = self._pending, None
            self._epoch_of_current = int(state["epoch"])
            self._current = self._loader._native.pack(state=(state["state"], int(state["tokens"])), **self._args)
        else:
            self._epoch_of_current = self._next_epoch
            self._current = self._loader._native.pack(epoch=self._next_epoch, **self._args)
        self._next_epoch = self._epoch_of_current + 1
        return self._batches(self._current)

    def _batches(self, packer):
        while True:
            got = packer.next()
            if got is None:
                return
            tokens, segments, positions, pieces, _real, elem = got
            self.last_pieces = pieces
            batch = self._loader._convert(
                [
                    ("tokens", tokens, None, None, None, None, elem),
                    ("segment_ids", segments, None, None, None, None, "<i4"),
                    ("position_ids", positions, None, None, None, None, "<i4"),
                ]
            )
            batch["pieces"] = pieces
            yield batch

    def close(self) -> None:
        """Stops the running epoch's workers."""
        if self._current is not None:
            self._current.close()
            self._current = None

    def state_dict(self) -> Dict[str, Any]:
        """Where packing stands (after the batches yielded so far)."""
        if self._current is not None:
            loader_state, tokens = self._current.state()
            state = {"format": PACK_FORMAT, "epoch": self._epoch_of_current, "state": loader_state, "tokens": tokens}
        elif self._pending is not None:
            return dict(self._pending)
        else:
            state = {"format": PACK_FORMAT, "epoch": self._next_epoch, "state": None}
        state["version"] = self._loader.version
        return self._loader._with_mixture(state)

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Makes the next ``iter()`` continue from ``state`` (from ``state_dict()``)."""
        if not isinstance(state, dict) or state.get("format") != PACK_FORMAT:
            raise UsageError(f"not a Tessera packing state (format {PACK_FORMAT!r} expected)")
        self.close()
        if state.get("state") is None:
            self.set_epoch(int(state.get("epoch", 0)))
        else:
            self._pending = dict(state)
