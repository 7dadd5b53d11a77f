"""``tessera.ingest``: decode inputs once into a dataset, with the code ``tessera ingest`` runs
(the Rust crate ``tessera-ingest``)."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._native import UsageError

PathLike = Union[str, "os.PathLike[str]"]


def ingest(
    url: PathLike,
    inputs: Union[PathLike, Sequence[PathLike]],
    *,
    format: str = "auto",
    size: Union[int, Tuple[int, int], None] = None,
    filter: str = "triangle",
    channels: int = 3,
    keep_encoded: bool = False,
    keep_original: bool = False,
    image_column: str = "image",
    label_column: str = "label",
    sample_rate: Optional[int] = None,
    mono: bool = False,
    audio_dtype: str = "f32",
    every: Optional[int] = None,
    fps: Optional[float] = None,
    max_frames: Optional[int] = None,
    compress: Optional[Mapping[str, str]] = None,
    ragged: Union[Mapping[str, Any], Sequence[str], None] = None,
    rename: Optional[Mapping[str, str]] = None,
    kinds: Optional[Mapping[str, str]] = None,
    message: Optional[str] = None,
    branch: Optional[str] = None,
    skip_bad: bool = False,
    jobs: Optional[int] = None,
    file_size: Optional[int] = None,
    index: Optional[str] = None,
) -> Dict[str, Any]:
    """Decodes ``inputs`` once into the dataset at ``url`` and commits them as one new version
    (the dataset is created when it does not exist). The same code as ``tessera ingest``: the
    options below are its flags, and the returned dict is its ``--json`` report (``version``,
    ``rows``, ``bytes_stored``, ``skipped``, ...).

    ``inputs``: an image-folder root (``ROOT/<class>/...``; class folders of audio or video
    clips work too and give a ``label`` column); WebDataset ``.tar`` shards or a folder of
    them; ``.npy``/``.npz`` files; ``.jsonl`` files; Parquet or Arrow IPC files; audio files
    (wav, flac, mp3, ogg, m4a) or video files (mp4, mkv, webm, mov, avi), or folders of them.
    ``format`` overrides the detection (``imagefolder``, ``wds``, ``npy``, ``jsonl``,
    ``parquet``, ``arrow``, ``audio``, ``video``).

    Images: ``size`` (``224`` or ``(height, width)``) resizes the shorter side with ``filter``
    and centre-crops; without it images keep their size in a ragged column. ``channels``: 1, 3
    or 4. ``keep_encoded`` stores image files byte for byte (compression ``encoded``);
    ``keep_original`` adds a ``<image>_original`` bytes column. Audio: ``sample_rate`` (Hz)
    resamples, ``mono`` downmixes, ``audio_dtype`` is ``"f32"`` or ``"i16"``. Video: ``every``
    (every k-th frame) or ``fps``, ``max_frames``; frames are sized like images.

    Columns: ``compress`` maps a column (or ``"*"``) to ``none``, ``lz4``, ``zstd``,
    ``zstd:LEVEL`` or ``encoded``; ``ragged`` names dims that vary (``{"tokens": None}``: every
    dim, ``{"img": "?,?,3"}`` or ``{"img": [None, None, 3]}``); otherwise shapes are inferred
    from the first samples. ``rename`` maps input fields to column names, ``kinds`` columns
    (by their new names) to kinds (``"image"``, ``"audio:16000"``, ``"embedding(cosine)"``).

    Every value must fit its column's dtype: a value that does not (out of range, a fraction
    into an integer) makes its input bad. A bad input raises :class:`MalformedError` and
    nothing is committed, unless ``skip_bad``, which skips it and lists it in ``skipped``. A
    sample whose shape does not fit raises :class:`UsageError` naming the ``ragged`` entry that
    fits. A dataset this call created is removed again when it fails.

    ``file_size``: target raw bytes of one data file (64 MiB). ``index``: ``"log"`` or
    ``"tree"`` for a new dataset. ``jobs``: decoding threads (all CPUs). The GIL is released
    while it runs.
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    if isinstance(size, int):
        size = (size, size)
    report = _native.ingest(
        os.fspath(url),
        [os.fspath(p) for p in inputs],
        format=format,
        size=None if size is None else (int(size[0]), int(size[1])),
        filter=filter,
        channels=int(channels),
        keep_encoded=bool(keep_encoded),
        keep_original=bool(keep_original),
        image_column=image_column,
        label_column=label_column,
        sample_rate=sample_rate,
        mono=bool(mono),
        audio_dtype=audio_dtype,
        every=every,
        fps=fps,
        max_frames=max_frames,
        compress=list((compress or {}).items()),
        ragged=_ragged_entries(ragged),
        rename=list((rename or {}).items()),
        kinds=list((kinds or {}).items()),
        message=message,
        branch=branch,
        skip_bad=bool(skip_bad),
        jobs=jobs,
        file_bytes=file_size,
        index=index,
    )
    return json.loads(report)


def _ragged_entries(ragged: Union[Mapping[str, Any], Sequence[str], None]) -> list:
    """``ragged`` in the flag grammar of ``tessera ingest --ragged`` (``tokens``,
    ``img=?,?,3``)."""
    if ragged is None:
        return []
    if isinstance(ragged, str):
        return [ragged]
    if not isinstance(ragged, Mapping):
        return [str(e) for e in ragged]
    out = []
    for name, dims in ragged.items():
        if dims is None:
            out.append(str(name))
        elif isinstance(dims, str):
            out.append(f"{name}={dims}")
        else:
            try:
                spec = ",".join("?" if d is None or d == -1 else str(int(d)) for d in dims)
            except (TypeError, ValueError):
                raise UsageError(f"ragged[{name!r}]: dims are None (varies) or numbers, not {dims!r}") from None
            out.append(f"{name}={spec}")
    return out
