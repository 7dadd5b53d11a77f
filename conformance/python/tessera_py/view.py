"""Views (SPEC.md §22): VAL-18, and the dump of a view's rows in its order.

Written from the spec alone, like the rest of this reader. To dump a view it reads only what
VAL-19 names: for each fragment holding a view row, its deletion vector and the data files of
the schema columns, and in them only the pages that hold a view row. A fault elsewhere in the
version is not reported; with a fragment tree, that includes the nodes that lead to no view
row (TREE-07), which are not read."""

import hashlib
import struct
from bisect import bisect_right
from dataclasses import dataclass

from . import model as M
from .bincode import Decoder
from .dump import _Acc, _meta, column_json
from .envelope import BODY_LIMIT_SEGMENT, check_envelope
from .errors import TesseraError, invalid, limit
from .datafile import open_data_file, read_column
from .reader import (_BOUND_MANIFEST, _caller_name, Version, fragments_holding, live_rows,
                     load_deletions, load_manifest, manifest_key, open_for_rows)
from .validate import valid_ref_name

MAGIC_VIEW = b"\x89TSV\r\n\x1a\n"
BODY_LIMIT_VIEW = BODY_LIMIT_SEGMENT  # VIEW-03
MAX_VIEW_ROWS = 1 << 24  # VIEW-03, a list view (major 1)
MAX_VIEW_RUN_ROWS = 1 << 40  # VIEW-03, a runs view (major 2)
MAX_QUERY_BYTES = 65536  # VIEW-03


@dataclass
class View:
    name: str
    target: M.VersionRef
    manifest_sha256: bytes
    timestamp_ms: int
    query: str
    rows_sha256: bytes
    rows: list = None  # major 1: the row ids in answer order
    row_count: int = 0  # major 2: the declared number of rows
    runs: list = None  # major 2: (start, len) pairs

    def count(self) -> int:
        return len(self.rows) if self.runs is None else self.row_count

    def row_ids(self):
        """The rows in the view's order (a runs view expands here only, to be dumped)."""
        if self.runs is None:
            return iter(self.rows)
        return (r for start, n in self.runs for r in range(start, start + n))


def decode_view(body, major: int) -> View:
    """VAL-18 step 4: major 1 is `View`, major 2 `RunsView` (VIEW-11)."""
    d = Decoder(body, "view body")
    head = (d.string("View.name"), M._version_ref(d), d.fixed_bytes(32, "View.manifest_sha256"),
            d.u64("View.timestamp_ms"), d.string("View.query"))
    if major == 1:
        v = View(*head, d.fixed_bytes(32, "View.rows_sha256"), rows=d.vec_u64("View.rows"))
    else:
        row_count = d.u64("RunsView.row_count")
        digest = d.fixed_bytes(32, "RunsView.rows_sha256")
        n = d.count("RunsView.runs")
        p = d._take(16 * n, "RunsView.runs")
        flat = struct.unpack_from(f"<{2 * n}Q", d.buf, p)
        v = View(*head, digest, row_count=row_count, runs=list(zip(flat[0::2], flat[1::2])))
    d.finish()
    return v


def check_runs(name: str, runs, row_count: int, version_rows: int):
    """VAL-18 step 12 for runs, in order, in O(runs): no empty run; each run starts more than
    one past the previous one's end (ascending, neither overlapping nor adjacent); the lengths
    sum to row_count; the last run ends at or below the version's row count (VIEW-11, VIEW-06)."""
    for i, (_, n) in enumerate(runs):
        if n == 0:
            raise invalid(f"view {name!r}: run {i} is empty")
    for i in range(1, len(runs)):
        if runs[i][0] <= runs[i - 1][0] + runs[i - 1][1]:
            raise invalid(f"view {name!r}: run {i} starts at {runs[i][0]}, not after row "
                          f"{runs[i - 1][0] + runs[i - 1][1]}")
    total = sum(n for _, n in runs)
    if total != row_count:
        raise invalid(f"view {name!r}: the runs hold {total} rows, row_count says {row_count}")
    if runs and runs[-1][0] + runs[-1][1] > version_rows:
        raise invalid(f"view {name!r}: the last run ends at row {runs[-1][0] + runs[-1][1] - 1}, "
                      f"not below row_count {version_rows}")


def open_view(store, name: str):
    """VAL-18, in order; returns (the pinned Version, the view)."""
    _caller_name(name, "view")  # 1.
    key = f"views/{name}.tsview"
    obj = store.get(key, 28 + BODY_LIMIT_VIEW)  # 2.
    if obj is None:
        raise TesseraError("not_found", f"view {name!r} does not exist")
    body = check_envelope(obj, MAGIC_VIEW, BODY_LIMIT_VIEW, f"view {key}", majors=(1, 2))  # 3.
    v = decode_view(body, struct.unpack_from("<H", obj, 8)[0])  # 4.
    if v.name != name:  # 5.
        raise invalid(f"the view record at {key} names view {v.name!r}")
    if not valid_ref_name(v.target.branch) or v.target.version < 1:  # 6.
        raise invalid(f"view {name!r}: target {v.target.branch!r}@{v.target.version} is not a valid branch and version")
    if len(v.query.encode("utf-8")) > MAX_QUERY_BYTES:  # 7.
        raise limit(f"view {name!r}: query of {len(v.query.encode('utf-8'))} bytes")
    if v.runs is None and len(v.rows) > MAX_VIEW_ROWS:
        raise limit(f"view {name!r}: {len(v.rows)} rows")
    if v.runs is not None and v.row_count > MAX_VIEW_RUN_ROWS:
        raise limit(f"view {name!r}: row_count {v.row_count}")
    if v.runs is None:
        digest = hashlib.sha256(struct.pack(f"<{len(v.rows)}Q", *v.rows)).digest()
    else:  # VIEW-04: over the runs, start then len, as stored
        digest = hashlib.sha256(struct.pack(f"<{2 * len(v.runs)}Q", *(x for r in v.runs for x in r))).digest()
    if digest != bytes(v.rows_sha256):  # 8.
        raise invalid(f"view {name!r}: rows_sha256 does not match its rows")
    mkey = manifest_key(v.target.branch, v.target.version)
    mobj = store.get(mkey, _BOUND_MANIFEST)  # 9.
    if mobj is None:
        raise invalid(f"view {name!r}: target {mkey} does not exist")
    m = load_manifest(mobj, v.target.branch, v.target.version)  # 10.
    if hashlib.sha256(mobj).digest() != bytes(v.manifest_sha256):  # 11.
        raise invalid(f"view {name!r}: {mkey} is not the manifest the view was saved from")
    if v.runs is not None:  # 12.
        check_runs(name, v.runs, v.row_count, m.row_count)
        return open_for_rows(store, m), v
    for r in v.rows:
        if r >= m.row_count:
            raise invalid(f"view {name!r}: row {r} is not below row_count {m.row_count}")
    if len(set(v.rows)) != len(v.rows):
        raise invalid(f"view {name!r}: a row id is listed twice")
    return open_for_rows(store, m), v


def dump_view(store, version: Version, view: View) -> dict:
    """The dump of a version holding exactly the view's rows, in the view's order."""
    m = version.manifest
    cols = m.schema.columns
    by_id = {c.id: c for c in cols}
    # global live row -> (fragment, its live index), fragments in row order (MAN-09); with a
    # fragment tree only the nodes on the way to the view's rows are read (TREE-07)
    held = fragments_holding(store, version, sorted(set(view.row_ids())))
    firsts = [first for first, _ in held]
    wanted = {}  # index in `held` -> set of live indices
    where = []
    for g in view.row_ids():
        k = bisect_right(firsts, g) - 1
        wanted.setdefault(k, set()).add(g - firsts[k])
        where.append((k, g - firsts[k]))
    # VAL-19 per fragment holding a view row: deletion vector, the files of the schema columns,
    # the pages holding a view row
    got = {}  # (fragment index, live index) -> {column id: (valid, shape, raw)}
    for k in sorted(wanted):
        f = held[k][1]
        deleted = load_deletions(store, f)
        physical = [i for i in range(f.row_count) if i not in deleted]
        want = {physical[j] for j in wanted[k]}
        rows = {}
        for ref in f.files:
            ids = [c for c in ref.column_ids if c in by_id]
            if not ids:
                continue
            df = open_data_file(store, ref, f, by_id)
            for cid in ids:
                rows[cid] = read_column(df, by_id[cid], None, want)
        for j in wanted[k]:
            p = physical[j]
            got[(k, j)] = {cid: (r.valid[p], r.shapes[p], r.raw[p]) for cid, r in rows.items()}
    accs = {}
    for c in cols:
        accs[c.id] = _Acc(c)
        picked = [got[w][c.id] for w in where]
        accs[c.id].add([x[0] for x in picked], [x[1] for x in picked], [x[2] for x in picked])
    return {
        "dump": "tessera-dump/1",
        "branch": m.branch,
        "version": m.version,
        "row_count": view.count(),
        "schema": {"columns": [column_json(c) for c in m.schema.columns], "metadata": _meta(m.schema.metadata)},
        "columns": {c.name: accs[c.id].json() for c in m.schema.columns},
    }
