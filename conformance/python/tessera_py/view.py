"""Views (SPEC.md §22): VAL-18, and the dump of a view's rows in its order.

Written from the spec alone, like the rest of this reader. To dump a view it reads only what
VAL-19 names: for each fragment holding a view row, its deletion vector and the data files of
the schema columns, and in them only the pages that hold a view row. A fault elsewhere in the
version is not reported."""

import hashlib
import struct
from dataclasses import dataclass

from . import model as M
from .bincode import Decoder
from .dump import _Acc, _meta, column_json
from .envelope import BODY_LIMIT_SEGMENT, check_envelope
from .errors import TesseraError, invalid, limit
from .datafile import open_data_file, read_column
from .reader import (_BOUND_MANIFEST, _caller_name, Version, live_rows, load_deletions, load_manifest,
                     manifest_key, open_fragments)
from .validate import valid_ref_name

MAGIC_VIEW = b"\x89TSV\r\n\x1a\n"
BODY_LIMIT_VIEW = BODY_LIMIT_SEGMENT  # VIEW-03
MAX_VIEW_ROWS = 1 << 24  # VIEW-03
MAX_QUERY_BYTES = 65536  # VIEW-03


@dataclass
class View:
    name: str
    target: M.VersionRef
    manifest_sha256: bytes
    timestamp_ms: int
    query: str
    rows_sha256: bytes
    rows: list


def decode_view(body) -> View:
    d = Decoder(body, "view body")
    v = View(d.string("View.name"), M._version_ref(d), d.fixed_bytes(32, "View.manifest_sha256"),
             d.u64("View.timestamp_ms"), d.string("View.query"), d.fixed_bytes(32, "View.rows_sha256"),
             d.vec_u64("View.rows"))
    d.finish()
    return v


def open_view(store, name: str):
    """VAL-18, in order; returns (the pinned Version, the view)."""
    _caller_name(name, "view")  # 1.
    key = f"views/{name}.tsview"
    obj = store.get(key, 28 + BODY_LIMIT_VIEW)  # 2.
    if obj is None:
        raise TesseraError("not_found", f"view {name!r} does not exist")
    body = check_envelope(obj, MAGIC_VIEW, BODY_LIMIT_VIEW, f"view {key}")  # 3.
    v = decode_view(body)  # 4.
    if v.name != name:  # 5.
        raise invalid(f"the view record at {key} names view {v.name!r}")
    if not valid_ref_name(v.target.branch) or v.target.version < 1:  # 6.
        raise invalid(f"view {name!r}: target {v.target.branch!r}@{v.target.version} is not a valid branch and version")
    if len(v.query.encode("utf-8")) > MAX_QUERY_BYTES:  # 7.
        raise limit(f"view {name!r}: query of {len(v.query.encode('utf-8'))} bytes")
    if len(v.rows) > MAX_VIEW_ROWS:
        raise limit(f"view {name!r}: {len(v.rows)} rows")
    digest = hashlib.sha256(struct.pack(f"<{len(v.rows)}Q", *v.rows)).digest()
    if digest != bytes(v.rows_sha256):  # 8.
        raise invalid(f"view {name!r}: rows_sha256 does not match its rows")
    mkey = manifest_key(v.target.branch, v.target.version)
    mobj = store.get(mkey, _BOUND_MANIFEST)  # 9.
    if mobj is None:
        raise invalid(f"view {name!r}: target {mkey} does not exist")
    m = load_manifest(mobj, v.target.branch, v.target.version)  # 10.
    if hashlib.sha256(mobj).digest() != bytes(v.manifest_sha256):  # 11.
        raise invalid(f"view {name!r}: {mkey} is not the manifest the view was saved from")
    for r in v.rows:  # 12.
        if r >= m.row_count:
            raise invalid(f"view {name!r}: row {r} is not below row_count {m.row_count}")
    if len(set(v.rows)) != len(v.rows):
        raise invalid(f"view {name!r}: a row id is listed twice")
    return Version(m, open_fragments(store, m)), v


def dump_view(store, version: Version, view: View) -> dict:
    """The dump of a version holding exactly the view's rows, in the view's order."""
    m = version.manifest
    cols = m.schema.columns
    by_id = {c.id: c for c in cols}
    # global live row -> (fragment, its live index), fragments in row order (MAN-09)
    firsts, at = [], 0
    for f in version.fragments:
        firsts.append(at)
        at += live_rows(f)
    wanted = {}  # fragment index -> set of live indices
    where = []
    for g in view.rows:
        k = max(i for i, first in enumerate(firsts) if first <= g and live_rows(version.fragments[i]) > g - first)
        wanted.setdefault(k, set()).add(g - firsts[k])
        where.append((k, g - firsts[k]))
    # VAL-19 per fragment holding a view row: deletion vector, the files of the schema columns,
    # the pages holding a view row
    got = {}  # (fragment index, live index) -> {column id: (valid, shape, raw)}
    for k in sorted(wanted):
        f = version.fragments[k]
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
        "row_count": len(view.rows),
        "schema": {"columns": [column_json(c) for c in m.schema.columns], "metadata": _meta(m.schema.metadata)},
        "columns": {c.name: accs[c.id].json() for c in m.schema.columns},
    }
