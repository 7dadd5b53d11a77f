"""Ray Data integration: write a Ray ``Dataset`` into Tessera in parallel with one commit, and
read a Tessera version into Ray in parallel.

Writing::

    import ray, tessera.ray
    ray_ds = ray.data.range(10_000).map_batches(make_columns)   # dicts of numpy arrays
    sink = tessera.ray.Sink("s3://bucket/ds", schema=[{"name": "id", "dtype": "i64"}, ...])
    ray_ds.write_datasink(sink)      # every write task writes data files; one commit at the end
    sink.version                     # the version the job committed

    ray.data.from_items(rows).write_datasink(tessera.ray.Sink("s3://bucket/new"))  # no schema

``schema`` is optional for a dataset that does not exist yet: the columns are then inferred from
the Arrow schema of the first block the job writes (:func:`_schema_from_arrow`: numbers and
``bool`` keep their dtype, strings become ``utf8``, binary ``bytes``, Ray tensor columns keep
their fixed shape or become ragged, lists become ragged 1-D), like ``tessera ingest`` infers
columns from its first rows. A later block that does not fit (a tensor column whose first block
happened to share one shape, a null in a column that had none) stops the job before anything
is committed, with an error that spells out the ``schema=`` to pass. Ray's own
``on_write_start`` schema is not used for this: Ray 2.60 takes it from the first input bundle
of the write operator, which after operator fusion is the input of the fused
read/``map_batches`` steps (``None`` after a read), not the rows written.

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

Decoding at ingest: files on one machine (image and class folders, WebDataset shards, Parquet,
audio, video) go through :func:`tessera.ingest`, the decoders of ``tessera ingest``; in a Ray
job, decode in a ``map_batches`` step before the sink. Ray fuses the read, ``map_batches`` steps that run as
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

import json
from typing import Any, Collection, Dict, Iterable, List, Mapping, Optional, Sequence

import numpy as np
import pyarrow as pa
from ray.data.block import BlockAccessor, BlockMetadata
from ray.data.datasource import Datasink, Datasource, ReadTask

from . import Dataset, _native, create
from . import open as open_dataset
from ._native import ConflictError, NotFoundError, UsageError

__all__ = ["Sink", "Source"]


class Sink(Datasink):
    """A Ray ``Datasink`` that appends (or overwrites) a Tessera dataset with one commit.

    ``url``: the dataset. If it does not exist, the job creates it: with ``schema`` when given,
    else with the columns inferred from the first block the job writes (see
    :func:`_schema_from_arrow` for the rule; every inferred column is non-nullable unless that
    block holds a null in it, uncompressed, kind ``generic``). An existing dataset must have
    exactly the columns of ``schema`` when ``schema`` is given. ``branch``: the branch to
    commit to (``main`` by default; it must exist). ``mode``: ``"append"`` (rebases over
    concurrent appends, so two jobs appending at once both land) or ``"overwrite"`` (the new
    version holds exactly the job's rows; :class:`tessera.ConflictError` if anything else
    committed meanwhile). ``target_file_bytes`` bounds each data file's raw bytes (64 MiB by
    default).

    When the schema is inferred, the write task that gets there first creates the dataset
    (version 1, no rows) and the others write into it. A block that does not fit it fails the
    job with a :class:`tessera.UsageError` that spells out the ``schema=`` to pass; nothing is
    committed, but the empty dataset stays: delete it before running again with ``schema=``.
    A column whose type cannot be inferred fails the job before anything is created.

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
        # True when the job creates the dataset from the first block it writes.
        self._infer = False

    def _base(self):
        return open_dataset(self.url, version=self.base_version, branch=self.branch)

    def on_write_start(self, schema: Any = None) -> None:
        """On the driver, before any write task: opens (or creates) the dataset and pins the
        version the job commits on top of. With no ``schema`` and no dataset, only notes that
        the write tasks create it from the first block they write. (Ray's ``schema`` argument
        is not used: it is the schema of the write operator's first input bundle, which after
        operator fusion is not the schema of the rows written.)"""
        self._infer, self.base_version = False, None
        try:
            ds = open_dataset(self.url, branch=self.branch)
        except NotFoundError:
            if self.branch is not None:
                raise
            if self.schema is None:
                self._infer = True
                return
            ds = create(self.url, self.schema)
        if self.schema is not None:
            want = [c["name"] for c in self.schema]
            if ds.columns != want:
                raise UsageError(f"the dataset at {self.url} has columns {ds.columns}, the sink's schema {want}")
        self.base_version = ds.version

    def _open_or_create(self, block: pa.Table, nulls: bool):
        """In a write task of a job that creates the dataset: the dataset another task already
        created, or a new one with the columns of ``block`` (nullable where it holds a null,
        when ``nulls`` says its validity is known)."""
        try:
            return open_dataset(self.url)
        except NotFoundError:
            pass
        nullable = [name for name, col in zip(block.column_names, block.columns) if nulls and col.null_count]
        try:
            return create(self.url, _schema_from_arrow(block.schema, nullable=nullable))
        except ConflictError:  # another task created it meanwhile
            return open_dataset(self.url)

    def write(self, blocks: Iterable[Any], ctx: Any) -> List[str]:
        """In a Ray task: writes every block as data files; returns their fragment records."""
        ds = None if self._infer else self._base()
        columns = None if ds is None else {c["name"]: c for c in ds.schema}
        records: List[str] = []
        for block in blocks:
            acc = BlockAccessor.for_block(block)
            if acc.num_rows() == 0:
                continue
            # Arrow validity tells nulls apart only in Arrow blocks (pandas has NaN for both).
            arrow = block if isinstance(block, pa.Table) else None
            if self._infer:
                typed = arrow if arrow is not None else acc.to_arrow()
                if ds is None:
                    ds = self._open_or_create(typed, nulls=arrow is not None)
                    columns = {c["name"]: c for c in ds.schema}
                _check_fits(typed.schema, columns, self.url)
            batch = acc.to_batch_format("numpy")
            data = _from_ray(batch, arrow, columns, self.url, self._infer)
            records.extend(ds.write_fragments(data, target_file_bytes=self.target_file_bytes))
        return records

    def on_write_complete(self, write_result: Any) -> None:
        """On the driver, after every task succeeded: commits all records as one version."""
        returns = write_result.write_returns
        records = [r for task in returns for r in task]
        if self._infer:
            self.base_version = 1  # the version the first write task created
        try:
            ds = self._base()
        except NotFoundError:
            if not self._infer:
                raise
            raise UsageError(
                "tessera.ray.Sink: the job wrote no rows, so there was nothing to infer the columns of the "
                f"new dataset {self.url} from; to create it empty, pass "
                'schema=[{"name": ..., "dtype": ..., "shape": [...]}, ...]'
            ) from None
        self.version = ds.commit_fragments(records, message=self.message, mode=self.mode)
        self.tasks = len(returns)

    def get_name(self) -> str:
        return "Tessera"


_ARROW_NUMBERS = {
    pa.bool_(): "bool",
    pa.int8(): "i8",
    pa.int16(): "i16",
    pa.int32(): "i32",
    pa.int64(): "i64",
    pa.uint8(): "u8",
    pa.uint16(): "u16",
    pa.uint32(): "u32",
    pa.uint64(): "u64",
    pa.float16(): "f16",
    pa.float32(): "f32",
    pa.float64(): "f64",
}


def _tensor_types():
    """Ray's Arrow tensor extension types: (fixed-shape ones, variable-shaped ones)."""
    from ray.data.extensions import ArrowVariableShapedTensorType, get_arrow_extension_tensor_types

    variable = (ArrowVariableShapedTensorType,)
    fixed = tuple(t for t in get_arrow_extension_tensor_types() if not issubclass(t, variable))
    return fixed, variable


def _arrow_column(t: pa.DataType) -> Optional[tuple]:
    """``(dtype, shape)`` of the Tessera column that holds values of Arrow type ``t``, ``None``
    for a type no column holds."""
    fixed, variable = _tensor_types()
    if t in _ARROW_NUMBERS:
        return _ARROW_NUMBERS[t], []
    if pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", bool)(t):
        return "utf8", []
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or getattr(pa.types, "is_binary_view", bool)(t)
    ):
        return "bytes", []
    if isinstance(t, fixed) and t.value_type in _ARROW_NUMBERS:
        return _ARROW_NUMBERS[t.value_type], [int(d) for d in t.shape]
    if isinstance(t, variable) and t.value_type in _ARROW_NUMBERS:
        return _ARROW_NUMBERS[t.value_type], [None] * t.ndim
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and t.value_type in _ARROW_NUMBERS:
        return _ARROW_NUMBERS[t.value_type], [None]
    if pa.types.is_fixed_size_list(t) and t.value_type in _ARROW_NUMBERS:
        return _ARROW_NUMBERS[t.value_type], [t.list_size]
    return None


def _schema_from_arrow(schema: pa.Schema, nullable: Collection[str] = ()) -> List[Dict[str, Any]]:
    """The Tessera schema (``tessera.create``'s list of column dicts) for rows of the Arrow
    ``schema`` of a Ray block, one column per field, in order:

    - ``bool``, ``int8`` … ``int64``, ``uint8`` … ``uint64``, ``float16``/``32``/``64``: a
      scalar column of that dtype (``bool``, ``i8`` … ``u64``, ``f16``, ``f32``, ``f64``);
    - ``string``/``large_string``/``string_view``: ``utf8``; ``binary``/``large_binary``/
      ``binary_view``/``fixed_size_binary``: ``bytes``;
    - a Ray fixed-shape tensor column (``ArrowTensorType``/``V2``, Arrow's
      ``fixed_shape_tensor``) of numbers: that dtype and shape;
    - a Ray variable-shaped tensor column (``ArrowVariableShapedTensorType``, ``ndim`` dims)
      of numbers: that dtype, every dim ragged (``None``);
    - ``list``/``large_list`` of numbers: ragged 1-D (``[None]``); ``fixed_size_list<n>`` of
      numbers: ``[n]``.

    Columns named in ``nullable`` are nullable, the others not: Arrow marks fields nullable
    whether or not they hold a null, so the field's flag says nothing.

    Anything else (struct, map, nested lists, dates and times, decimals, dictionaries, Python
    objects, the ``null`` type of a column whose values are all None) raises
    :class:`tessera.UsageError` naming every such column and its Arrow type, and the
    ``schema=`` to pass instead.
    """
    out: List[Dict[str, Any]] = []
    bad = []
    for field in schema:
        col = _arrow_column(field.type)
        if col is None:
            bad.append(field)
            out.append({"name": field.name, "dtype": ..., "shape": [...]})
            continue
        spec: Dict[str, Any] = {"name": field.name, "dtype": col[0]}
        if col[1]:
            spec["shape"] = col[1]
        if field.name in nullable:
            spec["nullable"] = True
        out.append(spec)
    if bad:
        which = ", ".join(
            f"{f.name!r} (Arrow type {f.type}{': every value None' if pa.types.is_null(f.type) else ''})"
            for f in bad
        )
        raise UsageError(
            f"tessera.ray.Sink cannot infer a Tessera column for {which}: a column holds numbers, bool, "
            "utf8 or bytes, as scalars or tensors (turn other values into those in a map_batches step, "
            f"or leave them out). Pass the schema: tessera.ray.Sink(url, schema={_literal(out)})"
        )
    return out


def _check_fits(schema: pa.Schema, columns: Mapping[str, Dict[str, Any]], url: str) -> None:
    """A block of a job that created the dataset from its first block: raises
    :class:`tessera.UsageError` with the ``schema=`` to pass when a tensor column's shape does
    not fit the inferred one (its first block happened to share one shape)."""
    for field in schema:
        col, arrow = columns.get(field.name), _arrow_column(field.type)
        if col is None or arrow is None:
            continue  # an unknown column or type: the writer's own error says which
        got = arrow[1]
        want = [] if col["dtype"] in ("utf8", "bytes") else col["shape"]
        if len(got) == len(want) and all(w is None or g == w for g, w in zip(got, want)):
            continue
        fix = [w if g == w else None for g, w in zip(got, want)] if len(got) == len(want) else [...]
        shape = ", ".join("varying" if g is None else str(g) for g in got)
        raise UsageError(
            f"tessera.ray.Sink: column {field.name!r}: a block holds rows of shape [{shape}] "
            f"(Arrow type {field.type}), but this job created {url} with shape {want}, inferred from the "
            f"first block it wrote (where every row had that shape). Nothing was committed; delete {url} "
            "(it holds no rows) and pass the schema: "
            f"tessera.ray.Sink(url, schema={_literal(_suggest(columns, field.name, shape=fix))})"
        )


def _suggest(columns: Mapping[str, Dict[str, Any]], name: str, **change: Any) -> List[Dict[str, Any]]:
    """The dataset's columns as short ``schema=`` dicts, with ``change`` applied to ``name``."""
    out = []
    for col in columns.values():
        spec = {"name": col["name"], "dtype": col["dtype"]}
        if col.get("shape"):
            spec["shape"] = col["shape"]
        if col.get("nullable"):
            spec["nullable"] = True
        if col["name"] == name:
            spec.update(change)
        out.append(spec)
    return out


def _literal(v: Any) -> str:
    """``v`` as Python source, strings in double quotes (``...`` for a blank to fill in)."""
    if v is ...:
        return "..."
    if v is None or isinstance(v, (bool, int)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_literal(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_literal(x)}" for k, x in v.items()) + "}"
    return repr(v)


def _from_ray(
    batch: Mapping[str, Any],
    table: Optional[pa.Table],
    columns: Mapping[str, Dict[str, Any]],
    url: str,
    inferred: bool = False,
) -> Dict[str, Any]:
    """A Ray numpy batch as ``write_fragments`` input: object arrays (ragged tensors, strings)
    become lists; everything else stays an array. When ``table`` (the same block as Arrow) is
    given, its nulls, which Ray's numpy conversion turns into NaN, zeros or empty arrays,
    become masked rows or ``None``; in a column that is not nullable they raise
    :class:`tessera.UsageError`."""
    out: Dict[str, Any] = {}
    for name, col in batch.items():
        arr = np.asarray(col) if not isinstance(col, np.ndarray) else col
        nulls = table.column(name).null_count if table is not None and name in table.column_names else 0
        spec = columns.get(name)
        if nulls and spec is not None:
            if not spec["nullable"]:
                raise UsageError(_null_message(name, nulls, columns, url, inferred))
            null = np.asarray(table.column(name).is_null(), dtype=bool)
            if arr.dtype == object:
                arr = arr.copy()
                arr[null] = None
            else:
                mask = np.broadcast_to(null.reshape((-1,) + (1,) * (arr.ndim - 1)), arr.shape)
                arr = np.ma.MaskedArray(arr, mask=mask)
        out[name] = list(arr) if arr.dtype == object else arr
    return out


def _null_message(name: str, nulls: int, columns: Mapping[str, Dict[str, Any]], url: str, inferred: bool) -> str:
    head = f"tessera.ray.Sink: column {name!r} is not nullable, but a block has {nulls} null row(s) in it"
    if not inferred:
        return f"{head}: fill or drop them before the sink, or write to a dataset whose column is nullable"
    return (
        f"{head}. This job created {url} from the first block it wrote, which had no null in {name!r}. "
        f"Nothing was committed; delete {url} (it holds no rows) and pass the schema: "
        f"tessera.ray.Sink(url, schema={_literal(_suggest(columns, name, nullable=True))})"
    )


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
