"""Tessera: an open on-disk format for deep-learning training data.

Datasets::

    import numpy as np, tessera
    ds = tessera.create("/tmp/ds", [
        {"name": "image", "dtype": "u8", "shape": [32, 32, 3], "kind": "image"},
        {"name": "label", "dtype": "i64"},
        {"name": "caption", "dtype": "utf8"},
        {"name": "tokens", "dtype": "i32", "shape": [None]},        # None: a ragged dim
    ])
    v = ds.append({"image": images, "label": labels, "caption": captions, "tokens": token_lists})
    ds = tessera.open("/tmp/ds", version=v)     # or tag=..., branch=...
    ds.read([0, 5, 9], columns=["label", "caption"])   # {"label": array, "caption": [str, ...]}

Ingest (decode once; image folders, WebDataset, NumPy, JSON Lines, Parquet, audio, video)::

    report = tessera.ingest("/tmp/imagenet", "imagenet/train", size=224)   # report["version"]

Training (numpy needs no torch; torch is imported only by ``pytorch()``)::

    for batch in ds.pytorch(batch_size=64, shuffle="global", seed=0):
        batch["image"]          # torch.uint8 [64, 32, 32, 3], a view of the loader's buffer
        batch["tokens"]         # zero-padded [64, max_len] with batch["tokens.lengths"]
        batch["caption"]        # list of str

Errors are :class:`TesseraError` subclasses named after the format's error classes.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._native import (
    ConflictError,
    InvalidError,
    LimitError,
    MalformedError,
    NotFoundError,
    StorageError,
    TesseraError,
    UnsupportedError,
    UsageError,
)
from . import transforms
from ._ingest import ingest
from ._loader import Loader, LoaderIterator, open_loader
from .mixture import Mixture, mix

__all__ = [
    "open",
    "create",
    "ingest",
    "Dataset",
    "Loader",
    "LoaderIterator",
    "Mixture",
    "mix",
    "transforms",
    "TesseraError",
    "MalformedError",
    "InvalidError",
    "UnsupportedError",
    "LimitError",
    "StorageError",
    "NotFoundError",
    "ConflictError",
    "UsageError",
]

__version__ = _native.__version__

# numpy dtypes of the format's fixed-size dtypes (little-endian, as stored). bf16 has no numpy
# dtype: it is read as float32 (exact) and written from floats, rounded to nearest even.
_NUMPY_DTYPES = {
    "bool": np.dtype(bool),
    "u8": np.dtype("u1"),
    "u16": np.dtype("<u2"),
    "u32": np.dtype("<u4"),
    "u64": np.dtype("<u8"),
    "i8": np.dtype("i1"),
    "i16": np.dtype("<i2"),
    "i32": np.dtype("<i4"),
    "i64": np.dtype("<i8"),
    "f16": np.dtype("<f2"),
    "bf16": np.dtype("<f4"),
    "f32": np.dtype("<f4"),
    "f64": np.dtype("<f8"),
}

RowsLike = Union[int, slice, range, Sequence[int], np.ndarray, None]


def open(
    url: str,
    version: Optional[int] = None,
    tag: Optional[str] = None,
    branch: Optional[str] = None,
) -> "Dataset":
    """Opens a version of the dataset at ``url`` (a local path, ``file://``, ``s3://``,
    ``gs://``, ``az://``, ``http(s)://`` or ``memory://``): the latest version of ``main`` by
    default, or ``version=`` (of ``branch=`` when given), ``tag=``, or the latest of ``branch=``.

    Raises :class:`NotFoundError` when the dataset, version, tag or branch does not exist.
    """
    return Dataset(_native.Dataset.open(str(url), version=version, tag=tag, branch=branch))


def create(url: str, schema: Sequence[Mapping[str, Any]], index: str = "log") -> "Dataset":
    """Creates a dataset (version 1, no rows) at ``url``.

    ``schema`` lists the columns as dicts: ``name`` and ``dtype`` (``bool``, ``u8`` … ``u64``,
    ``i8`` … ``i64``, ``f16``, ``bf16``, ``f32``, ``f64``, ``utf8``, ``bytes``) are required;
    optional ``shape`` (per-row dims, ``None`` for a ragged dim; ``[]`` for scalars),
    ``kind`` (``generic``, ``image``, ``video``, ``audio``, ``text``, ``tokens``,
    ``embedding``, ``class_label``, ``bbox``, ``mask``, ``json``) with ``kind_params``,
    ``nullable``, ``compression`` (``none``, ``lz4``, ``zstd``, ``zstd:LEVEL`` with LEVEL
    1 to 22, or ``encoded`` for u8 images) and ``metadata`` (a dict of str).
    ``Dataset.schema`` returns the same keys.

    ``index`` chooses how versions index their fragments: ``"log"`` (the default, readable by
    every 1.0 reader) or ``"tree"`` (bounded index nodes: opening a version and finding a row
    cost the same at any number of fragments, SPEC.md §8.3; readers before revision 8 of the
    format refuse it). Every later version keeps the choice.

    Raises :class:`ConflictError` when a dataset exists there, :class:`UsageError` for another
    ``index``.
    """
    return Dataset(_native.Dataset.create(str(url), [dict(c) for c in schema], index=index))


def _to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 values → bfloat16 bit patterns (uint16), rounded to nearest even; NaN stays NaN.
    (numpy's unsafe casting for bf16 columns: ``cast="unsafe"``.)"""
    f = np.ascontiguousarray(values, dtype="<f4")
    u = f.view("<u4").astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")
    nan = np.isnan(f)
    if nan.any():
        rounded[nan] = ((u[nan] >> 16) | 0x40).astype("<u2")
    return rounded


_CASTS = ("safe", "unsafe")

# The numpy dtype numbers of each kind travel in to the native rule without loss.
_EXACT_CARRIER = {"b": np.dtype("<u8"), "u": np.dtype("<u8"), "i": np.dtype("<i8"), "f": np.dtype("<f8")}


def _row_bytes(dtype: str, arr: Any, cast: str = "safe") -> np.ndarray:
    """A row (or rows) as a contiguous little-endian array of the column's dtype.

    ``cast="safe"``: a value the column cannot hold (out of range, a fraction or NaN into an
    integer, a finite value that would become infinite) raises ``ValueError`` — the rule of
    the reference's ``tessera::cast``, applied by the native layer to every input numpy
    cannot convert exactly; exact conversions (numpy's "safe" casting) stay here.
    ``cast="unsafe"``: numpy's own casting, wrapping and rounding as it does.
    """
    a = np.asarray(arr)
    if cast == "unsafe":
        if dtype == "bf16":
            return _to_bf16_bits(a.astype(np.float32, casting="unsafe"))
        return np.ascontiguousarray(a.astype(_NUMPY_DTYPES[dtype], casting="unsafe"))
    if dtype != "bf16":
        target = _NUMPY_DTYPES[dtype]
        if a.dtype == target or np.can_cast(a.dtype, target, "safe"):
            return np.ascontiguousarray(a, dtype=target)
    carrier = _EXACT_CARRIER.get(a.dtype.kind)
    if carrier is None:
        raise ValueError(f"values of numpy dtype {a.dtype} cannot go in a {dtype} column")
    flat = np.ascontiguousarray(a.reshape(-1), dtype=carrier)
    out = _native.cast_numbers(dtype, flat)
    return out.view("<u2" if dtype == "bf16" else _NUMPY_DTYPES[dtype]).reshape(a.shape)


def _is_null(x: Any) -> bool:
    return x is None or x is np.ma.masked


def _column_rows(col: Mapping[str, Any], value: Any, cast: str = "safe") -> tuple:
    """One column of ``append`` input as the native layer's ``(name, rows, values, shapes,
    valid)``."""
    name, dtype, shape = col["name"], col["dtype"], list(col["shape"])
    nullable = col["nullable"]
    if dtype in ("utf8", "bytes"):
        items = list(value)
        valid = [not _is_null(x) for x in items]
        chunks = []
        for x in items:
            if _is_null(x):
                chunks.append(b"")
            elif dtype == "utf8":
                if not isinstance(x, str):
                    raise UsageError(f"column {name!r} is utf8: expected str, got {type(x).__name__}")
                chunks.append(x.encode("utf-8"))
            else:
                if not isinstance(x, (bytes, bytearray, memoryview)):
                    raise UsageError(f"column {name!r} is bytes: expected bytes, got {type(x).__name__}")
                chunks.append(bytes(x))
        shapes = [len(c) for c in chunks]
        return (name, len(items), b"".join(chunks), shapes, valid if nullable else None)

    ragged = any(d is None for d in shape)
    if not ragged:
        if isinstance(value, np.ma.MaskedArray):
            mask = np.ma.getmaskarray(value)
            n = len(value)
            nulls = mask.reshape(n, -1).any(axis=1) if n else np.zeros(0, dtype=bool)
            data = np.asarray(value.filled(0))
            valid = [not x for x in nulls.tolist()]
            rows = [data[i] for i in range(n) if valid[i]]
            arr = _row_bytes(dtype, np.stack(rows), cast) if rows else np.zeros([0] + shape, _NUMPY_DTYPES[dtype])
        elif nullable and not isinstance(value, np.ndarray) and any(_is_null(x) for x in value):
            items = list(value)
            n = len(items)
            valid = [not _is_null(x) for x in items]
            rows = [x for x in items if not _is_null(x)]
            arr = _row_bytes(dtype, rows, cast) if rows else np.zeros([0] + shape, _NUMPY_DTYPES[dtype])
        else:
            arr = _row_bytes(dtype, value, cast)
            n = arr.shape[0] if arr.ndim else 0
            valid = None
        if arr.ndim == 0 or tuple(arr.shape[1:]) != tuple(shape):
            raise UsageError(f"column {name!r}: rows of shape {shape} expected, got an array of shape {arr.shape}")
        if nullable and valid is None:
            valid = [True] * n
        # A uint8 view of the (contiguous) rows, not a copy: the native layer reads it once.
        return (name, n, arr.reshape(-1).view(np.uint8), shape * n, valid)

    items = list(value)
    valid = [not _is_null(x) for x in items]
    chunks, shapes = [], []
    for i, x in enumerate(items):
        if _is_null(x):
            shapes.extend([0] * len(shape))
            continue
        a = _row_bytes(dtype, x, cast)
        if a.ndim != len(shape):
            raise UsageError(f"column {name!r} row {i}: rank {a.ndim}, the column has rank {len(shape)}")
        chunks.append(a.tobytes())
        shapes.extend(a.shape)
    return (name, len(items), b"".join(chunks), shapes, valid if nullable else None)


def _assemble(piece: tuple) -> Any:
    """A column read back (native pieces) as the value ``read`` returns."""
    kind = piece[0]
    if kind in ("utf8", "bytes"):
        return piece[1]
    if kind == "fixed":
        _, arr, valid = piece
        if valid is None:
            return arr
        mask = np.broadcast_to((~valid).reshape((-1,) + (1,) * (arr.ndim - 1)), arr.shape)
        return np.ma.MaskedArray(arr, mask=mask.copy())
    _, flat, shapes, valid = piece
    sizes = shapes.prod(axis=1) if shapes.shape[1] else np.ones(len(shapes), dtype=np.int64)
    ends = np.cumsum(sizes)
    out: List[Optional[np.ndarray]] = []
    for i in range(len(shapes)):
        if valid is not None and not valid[i]:
            out.append(None)
            continue
        start = int(ends[i] - sizes[i])
        out.append(flat[start : int(ends[i])].reshape(tuple(int(d) for d in shapes[i])))
    return out


def _row_list(rows: RowsLike, n: int) -> List[int]:
    """Row selectors (int, slice, range, sequence or array of ints, negative from the end) as a
    list of global rows."""
    if rows is None:
        return list(range(n))
    if isinstance(rows, slice):
        return list(range(*rows.indices(n)))
    if isinstance(rows, (int, np.integer)):
        rows = [rows]
    out = []
    for r in np.asarray(rows).reshape(-1).tolist():
        if not isinstance(r, int):
            raise UsageError(f"row indices must be integers, got {r!r}")
        if r < 0:
            r += n
        if not 0 <= r < n:
            raise IndexError(f"row {r} is out of range for a dataset of {n} rows")
        out.append(r)
    return out


class Dataset:
    """One version of a Tessera dataset (``tessera.open`` / ``tessera.create``).

    Writes (``append``) commit a new version and move this object to it; ``version`` says
    which version it reads.
    """

    def __init__(self, native: "_native.Dataset"):
        self._native = native

    # -- identity -------------------------------------------------------------------------
    @property
    def location(self) -> str:
        """The path or URL it was opened from."""
        return self._native.location

    @property
    def version(self) -> int:
        """The version number read."""
        return self._native.version

    @property
    def branch_name(self) -> str:
        """The branch of the version."""
        return self._native.branch

    @property
    def index(self) -> str:
        """How the version indexes its fragments: ``"log"`` or ``"tree"`` (see :func:`create`)."""
        return self._native.index

    @property
    def schema(self) -> List[Dict[str, Any]]:
        """The columns: dicts with ``name``, ``dtype``, ``shape`` (``None`` for ragged dims),
        ``kind``, ``kind_params``, ``nullable``, ``compression``, ``metadata``, ``id``."""
        return self._native.schema

    @property
    def columns(self) -> List[str]:
        """Column names, in schema order."""
        return [c["name"] for c in self._native.schema]

    def __len__(self) -> int:
        return self._native.row_count

    def __repr__(self) -> str:
        return repr(self._native)

    # -- reading --------------------------------------------------------------------------
    def read(self, rows: RowsLike = None, columns: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        """Reads rows (an int, slice, range, or sequence/array of ints; all rows by default)
        of the given columns (all by default).

        Returns a dict: fixed-shape columns as one stacked array ``[n, *shape]`` (a masked
        array for nullable columns), ragged columns as a list of arrays, ``utf8`` as a list
        of ``str``, ``bytes`` as a list of ``bytes`` (``None`` for null rows). ``bf16`` reads
        as float32. Every checksum is verified.
        """
        idx = _row_list(rows, len(self))
        cols = None if columns is None else [str(c) for c in columns]
        pieces = self._native.read(idx, cols)
        return {name: _assemble(p) for name, p in pieces.items()}

    def __getitem__(self, i: Union[int, slice]) -> Dict[str, Any]:
        """``ds[i]``: row ``i`` as a dict of values (array, scalar, str, bytes or None);
        ``ds[a:b]``: as ``read``."""
        if isinstance(i, slice):
            return self.read(i)
        if not isinstance(i, (int, np.integer)):
            raise TypeError(f"dataset indices must be integers or slices, not {type(i).__name__}")
        batch = self.read([int(i)])
        out = {}
        for name, v in batch.items():
            if isinstance(v, np.ma.MaskedArray):
                out[name] = None if np.ma.getmaskarray(v)[0].all() else v.data[0]
            else:
                out[name] = v[0]
        return out

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    # -- writing --------------------------------------------------------------------------
    def append(self, data: Mapping[str, Any], message: str = "", cast: str = "safe") -> int:
        """Appends rows and commits them as a new version; returns the version number.

        ``data`` maps every column to its rows: an array ``[n, *shape]`` (anything numpy
        converts) for fixed shapes (a masked array, or a list with ``None``, for nulls), a
        list of arrays for ragged columns, a list of ``str`` / ``bytes`` for ``utf8`` /
        ``bytes``. Raises :class:`UsageError` for missing or unknown columns, wrong shapes
        or values a column's kind does not allow, :class:`ConflictError` when a concurrent
        writer wins and the retries run out.

        Values must fit the column's dtype (``cast="safe"``, the default): a value out of
        the dtype's range, a fraction, NaN or infinity into an integer column, or a finite
        value that would become infinite in a float column raises :class:`UsageError` and
        commits nothing; float columns store the nearest value. ``cast="unsafe"`` applies
        numpy's casting instead (wrapping integers, truncating fractions).
        """
        self._native = self._native.append(self._native_columns(data, cast), str(message))
        return self.version

    def _native_columns(self, data: Mapping[str, Any], cast: str = "safe") -> List[tuple]:
        """``append`` input as the native layer's column tuples."""
        if cast not in _CASTS:
            raise UsageError(f"cast must be one of {_CASTS}, not {cast!r}")
        schema = {c["name"]: c for c in self._native.schema}
        unknown = [k for k in data if k not in schema]
        if unknown:
            raise UsageError(f"the schema has no column(s) {unknown}; it has {list(schema)}")
        cols = []
        for name, value in data.items():
            try:
                cols.append(_column_rows(schema[name], value, cast))
            except (ValueError, TypeError, OverflowError) as e:  # numpy could not convert the values
                raise UsageError(f"column {name!r}: {e}") from e
        return cols

    def write_fragments(
        self, data: Mapping[str, Any], target_file_bytes: Optional[int] = None, cast: str = "safe"
    ) -> List[str]:
        """Writes rows (as ``append`` takes them) as data files of this version's schema
        *without committing*, and returns one fragment record per fragment written: a short
        JSON string (SPEC.md §15.7) to send to the one process that commits. Nothing is
        visible until :meth:`commit_fragments`; files of records never committed are left
        for ``tessera gc``. ``target_file_bytes`` bounds the raw bytes per data file;
        ``cast`` is as in :meth:`append`.

        Parallel writers: every worker calls this on its own ``tessera.open(url)``.
        """
        return _native.write_fragments(self._native, self._native_columns(data, cast), target_file_bytes)

    def commit_fragments(self, records: Iterable[str], message: str = "", mode: str = "append") -> int:
        """Commits fragment records (from :meth:`write_fragments`, in any process) as one new
        version on top of this one, and moves this object to it; returns the version number.

        ``mode="append"`` adds the records' rows after this version's rows and rebases over
        concurrent appends; ``mode="overwrite"`` makes a version holding exactly the records'
        rows and raises :class:`ConflictError` if anything else was committed meanwhile.
        Every record is checked first: a record naming a missing data file or one of the
        wrong size raises :class:`InvalidError`, a corrupt footer :class:`MalformedError`,
        text that is not a record :class:`UsageError`; nothing is committed then.
        """
        self._native = _native.commit_fragments(self._native, [str(r) for r in records], str(message), str(mode))
        return self.version

    def tag(self, name: str, message: str = "") -> None:
        """Tags this version (tags are immutable: :class:`ConflictError` if it exists)."""
        self._native.tag(name, message)

    def branch(self, name: str) -> "Dataset":
        """Creates a branch at this version and returns it (appends to it stay off ``main``)."""
        return Dataset(self._native.create_branch(name))

    def checkout(
        self, version: Optional[int] = None, tag: Optional[str] = None, branch: Optional[str] = None
    ) -> "Dataset":
        """Another version of the same dataset (as ``tessera.open``)."""
        return Dataset(self._native.checkout(version=version, tag=tag, branch=branch))

    def tags(self) -> List[str]:
        """Tag names, sorted."""
        return self._native.tags()

    def save_view(self, name: str, rows: Sequence[int], query: str = "") -> None:
        """Saves ``rows`` of this version, in this order, as view ``name``: train on it with
        ``pytorch(view=name)``. Later commits do not change it (:class:`ConflictError` if the
        name exists)."""
        self._native.save_view(name, [int(r) for r in rows], query)

    def views(self) -> List[str]:
        """View names, sorted."""
        return self._native.views()

    def create_index(self, name: str, column: str, metric: str = "cosine", lists: Optional[int] = None,
                     sample: Optional[int] = None, iterations: int = 10) -> Dict[str, Any]:
        """Builds a vector index (IVF-Flat, SPEC.md §24) over ``column`` of this version:
        ``metric`` ``"cosine"`` or ``"l2"``, ``lists`` (default √rows). Returns its summary.
        :class:`ConflictError` if the name exists."""
        return self._native.create_index(name, column, metric, lists, sample, iterations)

    def indexes(self) -> List[str]:
        """Vector index names, sorted."""
        return self._native.indexes()

    def index_info(self, name: str) -> Dict[str, Any]:
        """A vector index's summary: version, column, metric, lists, rows, bytes."""
        return self._native.index_info(name)

    def drop_index(self, name: str) -> None:
        """Deletes a vector index; no version changes."""
        self._native.drop_index(name)

    def search(self, index: str, vector: Sequence[float], k: int = 10,
               nprobe: Optional[int] = None) -> List[Tuple[int, float]]:
        """The ``k`` rows nearest ``vector`` with index ``index`` (of this dataset's version):
        ``(row, distance)`` pairs, nearest first, each distance exact (SPEC.md §23). Probes
        ``nprobe`` lists (default 1/64 of them, at least 8; all of them gives the exact answer)."""
        return self._native.search(index, [float(x) for x in vector], k, nprobe)

    def near_duplicates(self, index: str, threshold: float, probe: int = 1) -> List[int]:
        """Rows whose vector lies within ``threshold`` (the index's metric) of a row with a
        smaller id in the same list or the ``probe - 1`` nearest lists, ascending. Save the
        others as a view to train without them::

            dropped = set(ds.near_duplicates("emb-cos", 1e-4))
            ds.save_view("unique", [r for r in range(len(ds)) if r not in dropped])
        """
        return self._native.near_duplicates(index, threshold, probe)

    def branches(self) -> List[str]:
        """Branch names, sorted."""
        return self._native.branches()

    def log(self) -> List[Dict[str, Any]]:
        """This version's history, newest first: dicts with ``version``, ``branch``,
        ``message``, ``timestamp_ms``, ``row_count``, ``parent`` (``(branch, version)``)."""
        return self._native.log()

    def diff(self, other: Union[int, "Dataset"]) -> Dict[str, Any]:
        """What changed from ``other`` (a version of this branch, or a Dataset) to this
        version: ``rows_added``, ``rows_deleted``, ``rows_changed`` (per column),
        ``columns_added``, ``columns_dropped``, ``columns_renamed``."""
        if isinstance(other, Dataset):
            older = other._native
        else:
            older = self._native.checkout(version=int(other), branch=self.branch_name)
        return self._native.diff_from(older)

    def verify(self) -> Dict[str, int]:
        """Reads every byte of this version and checks checksums, sizes and values; raises
        the first fault (:class:`MalformedError`, :class:`InvalidError`, …) or returns what
        was checked (``files``, ``bytes``, ``blocks``, ``rows``)."""
        return self._native.verify()

    # -- training -------------------------------------------------------------------------
    def _loader(self, output: str, device: Optional[str], kwargs: Dict[str, Any]) -> Loader:
        if kwargs.get("view") is None:
            kwargs.update(version=self.version, branch=self.branch_name)
        # A view pins its own version (SPEC.md §"Views"), whichever version this object is.
        return open_loader(self.location, output, device, kwargs)

    def pytorch(
        self,
        batch_size: int = 32,
        columns: Optional[Sequence[str]] = None,
        shuffle: Optional[str] = "global",
        seed: int = 0,
        drop_last: bool = False,
        workers: int = 2,
        memory_budget: Optional[int] = None,
        device: Optional[str] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        view: Optional[str] = None,
        **options: Any,
    ) -> Loader:
        """A loader yielding dicts of ``torch.Tensor`` (see :class:`Loader`) for this version,
        or with ``view=NAME`` for the rows of a saved view (of the version the view pins).

        ``shuffle``: ``"global"`` (an exact uniform permutation), ``"block"`` (blocks of a
        mean fragment's rows permuted, then rows within windows of ``window_fragments``
        blocks), or ``None`` (in order).
        ``rank``/``world_size`` default to torchrun's ``RANK``/``WORLD_SIZE``; ranks get
        disjoint shards of equal batch counts. ``workers`` are Rust threads: results never
        depend on their number. ``device``: ``None``/``"cpu"`` keeps the zero-copy CPU
        tensors, ``"cuda"`` (or ``"cuda:N"``) copies each batch to the GPU through pinned
        memory with ``non_blocking=True`` (the copy overlaps the running step). More options
        (``window_fragments``, ``prefetch_batches``, ``verify_checksums``,
        ``skip_bad_samples``, ``u64_as_i64_bits``, ``ragged_offsets`` for
        ``"<name>.offsets"``, ``ragged="packed"`` for jagged ragged columns, see
        :class:`Loader`) pass through.

        ``transforms={"image": [tessera.transforms.RandomResizedCrop(224), …]}`` augments
        columns on the loader's threads, deterministically (see :mod:`tessera.transforms`);
        ``batch_transform=fn`` calls ``fn(batch)`` on this thread for each batch.

        ``cache_dir=PATH, cache_bytes=N`` (both, or neither) keep the data-file bytes read from
        an object store (``s3://``, ``gs://``, …) in a node-local disk cache of at most ``N``
        bytes (at least 4 MiB; least recently used evicted first), so epoch 2 onwards reads
        local disk. The ranks of a node can share one directory: each 1 MiB block of a file is
        downloaded once, no rank reads a partial entry, and a corrupt entry is fetched again.
        A local dataset directory does not use it. An unusable directory raises
        :class:`UsageError` when the loader is made; ``loader.io_stats()`` reports hits,
        misses and evictions. All of this holds for :meth:`numpy`, :meth:`jax` and
        :meth:`tensorflow` too.

        ``lineage=PATH`` makes rank 0 append the run's lineage record there (its pinned
        sources, order settings and a line per epoch started or resumed, a few hundred bytes
        per epoch): ``tessera lineage PATH --step K`` lists the rows step ``K`` read, and
        ``--row R`` the steps that read row ``R``.
        """
        kwargs = _loader_kwargs(
            batch_size, columns, shuffle, seed, drop_last, workers, memory_budget, rank, world_size, view, options
        )
        return self._loader("torch", device, kwargs)

    def numpy(
        self,
        batch_size: int = 32,
        columns: Optional[Sequence[str]] = None,
        shuffle: Optional[str] = "global",
        seed: int = 0,
        drop_last: bool = False,
        workers: int = 2,
        memory_budget: Optional[int] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        view: Optional[str] = None,
        **options: Any,
    ) -> Loader:
        """As :meth:`pytorch`, yielding dicts of numpy arrays (no torch needed). The arrays
        are views of the loader's buffers; ``bf16`` columns are widened to float32 (a copy),
        and ``u16``/``u32``/``u64`` columns keep their unsigned types (the other outputs widen
        them to ``int32``/``int64``, as torch has no unsigned arithmetic)."""
        kwargs = _loader_kwargs(
            batch_size, columns, shuffle, seed, drop_last, workers, memory_budget, rank, world_size, view, options
        )
        return self._loader("numpy", None, kwargs)

    def jax(
        self,
        batch_size: int = 32,
        columns: Optional[Sequence[str]] = None,
        shuffle: Optional[str] = "global",
        seed: int = 0,
        drop_last: bool = False,
        workers: int = 2,
        memory_budget: Optional[int] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        view: Optional[str] = None,
        **options: Any,
    ) -> Loader:
        """As :meth:`numpy`, yielding dicts of ``jax.Array`` made through DLPack
        (``jax.numpy.from_dlpack``): on the CPU backend they share the loader's buffers, which
        stay unchanged while any array over them is alive. ``bf16`` columns are
        ``jnp.bfloat16``. 64-bit columns stay 64-bit only with ``jax_enable_x64`` (JAX
        otherwise narrows them, which copies). ``jax.device_put`` moves a batch to an
        accelerator."""
        kwargs = _loader_kwargs(
            batch_size, columns, shuffle, seed, drop_last, workers, memory_budget, rank, world_size, view, options
        )
        return self._loader("jax", None, kwargs)

    def tensorflow(
        self,
        batch_size: int = 32,
        columns: Optional[Sequence[str]] = None,
        shuffle: Optional[str] = "global",
        seed: int = 0,
        drop_last: bool = False,
        workers: int = 2,
        memory_budget: Optional[int] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        view: Optional[str] = None,
        **options: Any,
    ) -> Loader:
        """As :meth:`numpy`, yielding dicts of ``tf.Tensor`` (needs ``tensorflow``): the
        value tensors share the loader's buffers through DLPack on the CPU (no copy), small
        side tensors are copied; ``bf16`` columns are ``tf.bfloat16``, ``utf8``/``bytes``
        columns lists as in :meth:`numpy`. Sharding, resume and ``transforms`` as for the
        other loaders. Iterate it directly, or wrap it:
        ``tf.data.Dataset.from_generator(lambda: iter(loader), output_signature=...)``."""
        kwargs = _loader_kwargs(
            batch_size, columns, shuffle, seed, drop_last, workers, memory_budget, rank, world_size, view, options
        )
        return self._loader("tensorflow", None, kwargs)


def _loader_kwargs(
    batch_size: int,
    columns: Optional[Sequence[str]],
    shuffle: Optional[str],
    seed: int,
    drop_last: bool,
    workers: int,
    memory_budget: Optional[int],
    rank: Optional[int],
    world_size: Optional[int],
    view: Optional[str],
    options: Mapping[str, Any],
) -> Dict[str, Any]:
    """The loader settings of :meth:`Dataset.pytorch`, :meth:`Dataset.numpy` and
    :meth:`Dataset.jax`, as the native loader takes them."""
    return dict(
        batch_size=batch_size,
        columns=None if columns is None else list(columns),
        shuffle=shuffle,
        seed=seed,
        drop_last=drop_last,
        workers=workers,
        memory_budget=memory_budget,
        rank=rank,
        world_size=world_size,
        view=view,
        **options,
    )
