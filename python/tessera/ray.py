"""Ray Data integration: write a Ray ``Dataset`` into Tessera in parallel with one commit, and
read a Tessera version into Ray in parallel.

Writing::

    import ray, tessera.ray
    ray_ds = ray.data.range(10_000).map_batches(make_columns)   # dicts of numpy arrays
    sink = tessera.ray.Sink("s3://bucket/ds", schema=[{"name": "id", "dtype": "i64"}, ...])
    ray_ds.write_datasink(sink)      # every write task writes data files; one commit at the end
    sink.version                     # the version the job committed

Every write task turns its blocks into data files (``Dataset.write_fragments``) and returns
their fragment records, a few hundred bytes each (SPEC.md §15.7). When all tasks have
succeeded, the driver commits all records as one version (``Dataset.commit_fragments``). If a
task fails, nothing is committed: readers keep seeing the previous version, and the data files
already written are unreferenced objects that ``tessera gc`` removes after the retention period.

Reading::

    ray_ds = ray.data.read_datasource(tessera.ray.Source("s3://bucket/ds", version=3,
                                                         columns=["image", "label"]))

    ray_ds = ray.data.read_datasource(tessera.ray.Source("s3://bucket/ds", view="val-hard"))

Each read task reads a run of whole fragments of one pinned version (or, over a saved view, a
run of the view's rows in the view's order) through the Rust reader (every checksum verified)
and hands Ray an Arrow table: scalar columns as Arrow arrays, fixed-shape and ragged columns as
Ray tensor columns, ``utf8``/``bytes`` as strings/binary; null rows are Arrow nulls in every
column. Ray's row and ``pyarrow`` batch formats show them (``None``, ``is_null``); its
``numpy`` batches of tensor columns do not (Ray's tensor conversion drops Arrow validity: a
null row reads as zeros, or an empty array in a ragged column).

Decoding at ingest: the package has no Python-level image or audio decoders yet; decode in a
``map_batches`` step before the sink. Ray fuses the read, ``map_batches`` steps that run as
tasks (not actors) and the sink's ``write`` into one task per block, so decoded rows go from
the decoding code to the writer inside one worker, never through Ray's object store; fixed-shape columns then reach
the Rust writer without a copy, and it encodes with the GIL released. Everything the Rust
writer checks or encodes per value runs inside the write tasks.

Throughput: a write job's tasks are CPU-bound (compression) and scale with the workers. Ray
Data learns the cluster's size from its autoscaling coordinator about a second after a job
starts; until then its operator resource reservation lets the job run one task at a time (on
2 CPUs measured: two tasks first ran at once 1 to 2 s into the job). For a job of one fused
operator, ``ray.data.DataContext.get_current().op_resource_reservation_enabled = False``
starts every worker at once; ``benches/ray`` measures both.

Credentials for object stores come from the environment of every Ray worker (``AWS_*``,
``GOOGLE_*``, ``AZURE_*``), as for ``tessera.open``.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

import numpy as np
import pyarrow as pa
from ray.data.block import BlockAccessor, BlockMetadata
from ray.data.datasource import Datasink, Datasource, ReadTask

from . import Dataset, _native, create
from . import open as open_dataset
from ._native import NotFoundError, UsageError

__all__ = ["Sink", "Source"]


class Sink(Datasink):
    """A Ray ``Datasink`` that appends (or overwrites) a Tessera dataset with one commit.

    ``url``: the dataset (created with ``schema`` if it does not exist; an existing dataset must
    have exactly the columns of ``schema`` when ``schema`` is given). ``branch``: the branch to
    commit to (``main`` by default). ``mode``: ``"append"`` (rebases over concurrent appends,
    so two jobs appending at once both land) or ``"overwrite"`` (the new version holds exactly
    the job's rows; :class:`tessera.ConflictError` if anything else committed meanwhile).
    ``target_file_bytes`` bounds each data file's raw bytes (64 MiB by default).

    After ``write_datasink`` returns, :attr:`version` is the committed version and
    :attr:`tasks` the number of write tasks whose records it holds.
    """

    def __init__(
        self,
        url: str,
        schema: Optional[Sequence[Mapping[str, Any]]] = None,
        *,
        branch: Optional[str] = None,
        mode: str = "append",
        message: str = "ray ingest",
        target_file_bytes: Optional[int] = None,
    ):
        if mode not in ("append", "overwrite"):
            raise UsageError(f"mode must be 'append' or 'overwrite', not {mode!r}")
        self.url = str(url)
        self.schema = None if schema is None else [dict(c) for c in schema]
        self.branch = branch
        self.mode = mode
        self.message = message
        self.target_file_bytes = target_file_bytes
        self.base_version: Optional[int] = None
        self.version: Optional[int] = None
        self.tasks: Optional[int] = None

    def _base(self):
        return open_dataset(self.url, version=self.base_version, branch=self.branch)

    def on_write_start(self, schema: Any = None) -> None:
        """On the driver, before any write task: opens (or creates) the dataset and pins the
        version the job commits on top of."""
        try:
            ds = open_dataset(self.url, branch=self.branch)
        except NotFoundError:
            if self.schema is None or self.branch is not None:
                raise
            ds = create(self.url, self.schema)
        if self.schema is not None:
            want = [c["name"] for c in self.schema]
            if ds.columns != want:
                raise UsageError(f"the dataset at {self.url} has columns {ds.columns}, the sink's schema {want}")
        self.base_version = ds.version

    def write(self, blocks: Iterable[Any], ctx: Any) -> List[str]:
        """In a Ray task: writes every block as data files; returns their fragment records."""
        ds = self._base()
        records: List[str] = []
        for block in blocks:
            acc = BlockAccessor.for_block(block)
            if acc.num_rows() == 0:
                continue
            batch = acc.to_batch_format("numpy")
            records.extend(ds.write_fragments(_from_ray(batch), target_file_bytes=self.target_file_bytes))
        return records

    def on_write_complete(self, write_result: Any) -> None:
        """On the driver, after every task succeeded: commits all records as one version."""
        returns = write_result.write_returns
        records = [r for task in returns for r in task]
        ds = self._base()
        self.version = ds.commit_fragments(records, message=self.message, mode=self.mode)
        self.tasks = len(returns)

    def get_name(self) -> str:
        return "Tessera"


def _from_ray(batch: Mapping[str, Any]) -> Dict[str, Any]:
    """A Ray numpy batch as ``write_fragments`` input: object arrays (ragged tensors, strings)
    become lists; everything else stays an array."""
    out: Dict[str, Any] = {}
    for name, col in batch.items():
        arr = np.asarray(col) if not isinstance(col, np.ndarray) else col
        out[name] = list(arr) if arr.dtype == object else arr
    return out


class Source(Datasource):
    """A Ray ``Datasource`` over one version of a Tessera dataset, or over a saved view.

    ``version``/``tag``/``branch`` pick the version (as :func:`tessera.open`; the latest of
    ``main`` by default), pinned when the read is planned. ``view`` reads the rows of a saved
    view instead (``Dataset.save_view``), of the version the view pins, in the view's order;
    it excludes ``version``/``tag``/``branch``. ``columns`` projects (all columns by default).
    Read tasks each take a run of whole fragments (or of the view's rows), about equal in rows.
    """

    def __init__(
        self,
        url: str,
        version: Optional[int] = None,
        tag: Optional[str] = None,
        branch: Optional[str] = None,
        columns: Optional[Sequence[str]] = None,
        view: Optional[str] = None,
    ):
        super().__init__()
        self.url = str(url)
        self.view = None if view is None else str(view)
        if self.view is None:
            ds = open_dataset(self.url, version=version, tag=tag, branch=branch)
            self._view_rows: Optional[np.ndarray] = None
        elif (version, tag, branch) != (None, None, None):
            raise UsageError("view= reads the version the view pins: give no version, tag or branch with it")
        else:
            native, self._view_rows = _native.open_view(self.url, self.view)
            ds = Dataset(native)
        self.version = ds.version
        self.branch = ds.branch_name
        self.columns = None if columns is None else [str(c) for c in columns]
        schema = {c["name"]: c for c in ds.schema}
        unknown = [c for c in self.columns or [] if c not in schema]
        if unknown:
            raise UsageError(f"unknown column(s) {unknown}; the dataset has {list(schema)}")
        self._schema = [schema[c] for c in (self.columns or list(schema))]
        self._fragments = _native.fragment_rows(ds._native)
        self._rows = len(ds)

    def estimate_inmemory_data_size(self) -> Optional[int]:
        # Stored bytes: exact for uncompressed columns, low for compressed ones.
        stored = sum(b for _, _, b in self._fragments)
        if self._view_rows is None or self._rows == 0:
            return stored
        return stored * len(self._view_rows) // self._rows

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None, data_context: Any = None):
        parts = max(1, int(parallelism))
        if self._view_rows is None:
            units = [range(start, end) for start, end in _split(self._fragments, parts)]
        else:  # contiguous runs of the view's positions, about equal in rows
            units = [u for u in np.array_split(self._view_rows, min(parts, len(self._view_rows))) if len(u)]
        url, version, branch, columns, schema = self.url, self.version, self.branch, self.columns, self._schema

        def read(rows):
            ds = open_dataset(url, version=version, branch=branch)
            return [_to_arrow(ds.read(rows, columns), schema)]

        tasks = []
        for rows in units:
            meta = BlockMetadata(num_rows=len(rows), size_bytes=None, input_files=None, exec_stats=None)
            tasks.append(ReadTask(lambda r=rows: read(r), meta, per_task_row_limit=per_task_row_limit))
        return tasks

    def get_name(self) -> str:
        return "Tessera"


def _split(fragments: List[tuple], parts: int) -> List[tuple]:
    """Contiguous runs of whole fragments (``(start, end, bytes)``), cut where the running row
    count crosses each ``total * k / parts``: at most ``parts`` runs of about equal rows."""
    total = sum(f[1] - f[0] for f in fragments)
    if total == 0:
        return []
    runs, start, done, k = [], fragments[0][0], 0, 1
    for s, e, _ in fragments:
        done += e - s
        if done * parts >= total * k:
            runs.append((start, e))
            start = e
            while done * parts >= total * k:
                k += 1
    return runs


def _to_arrow(values: Dict[str, Any], schema: List[Dict[str, Any]]) -> pa.Table:
    """``Dataset.read`` output as an Arrow table Ray understands; null rows as Arrow nulls."""
    from ray.data.extensions import ArrowTensorArray

    names, arrays = [], []
    for col in schema:
        name, v = col["name"], values[col["name"]]
        names.append(name)
        if col["dtype"] in ("utf8", "bytes"):
            arrays.append(pa.array(v, type=pa.string() if col["dtype"] == "utf8" else pa.binary()))
            continue
        valid = None
        if isinstance(v, np.ma.MaskedArray):
            mask = np.ma.getmaskarray(v)
            valid = ~(mask.reshape(len(v), -1).all(axis=1) if v.ndim > 1 else mask)
            v = v.filled(0)
        elif isinstance(v, list) and col.get("nullable"):
            valid = np.array([x is not None for x in v], dtype=bool)
            rank = len(col["shape"])
            dtype = next((x.dtype for x in v if x is not None), np.dtype("u1"))
            v = [x if x is not None else np.zeros((0,) * rank, dtype=dtype) for x in v]
        if isinstance(v, np.ndarray) and v.ndim == 1:
            arrays.append(pa.array(v, mask=None if valid is None else ~valid))
        elif not len(v):
            arrays.append(pa.array([], type=pa.null()))
        else:
            tensors = ArrowTensorArray.from_numpy(v)
            arrays.append(tensors if valid is None or valid.all() else _with_nulls(tensors, valid))
    return pa.Table.from_arrays(arrays, names=names)


def _with_nulls(tensors: pa.ExtensionArray, valid: np.ndarray) -> pa.ExtensionArray:
    """A Ray tensor column with Arrow nulls where ``valid`` is false: the same storage (a list
    array for fixed shapes, a struct of values and shapes for ragged ones) with a validity
    bitmap, under the same extension type."""
    st, mask = tensors.storage, pa.array(~valid)
    if pa.types.is_struct(st.type):
        st = pa.StructArray.from_arrays([st.field(i) for i in range(st.type.num_fields)], fields=list(st.type), mask=mask)
    elif pa.types.is_large_list(st.type):
        st = pa.LargeListArray.from_arrays(st.offsets, st.values, mask=mask)
    elif pa.types.is_list(st.type):
        st = pa.ListArray.from_arrays(st.offsets, st.values, mask=mask)
    else:
        raise TypeError(f"tessera.ray: unknown storage {st.type} of Ray tensor type {tensors.type}")
    return pa.ExtensionArray.from_storage(tensors.type, st)
