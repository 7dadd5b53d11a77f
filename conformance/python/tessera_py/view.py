"""Views (SPEC.md §22): VAL-18, and the dump of a view's rows in its order.

Written from the spec alone, like the rest of this reader. To dump a view it reads the whole
pinned version (read_rows) and then picks the view's rows; a reader that reads only those rows
conforms too (VAL-01), and the fixtures hold no fault outside a view's rows."""

import hashlib
import struct
from dataclasses import dataclass

from . import model as M
from .bincode import Decoder
from .dump import _Acc, _meta, column_json
from .envelope import BODY_LIMIT_SEGMENT, check_envelope
from .errors import TesseraError, invalid, limit
from .reader import _BOUND_MANIFEST, _caller_name, Version, load_manifest, manifest_key, open_fragments, read_rows
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
    got = {c.id: ([], [], []) for c in m.schema.columns}

    def sink(c, valid, shapes, raw):
        g = got[c.id]
        g[0].extend(valid), g[1].extend(shapes), g[2].extend(raw)

    read_rows(store, version, sink)
    accs = {}
    for c in m.schema.columns:
        valid, shapes, raw = got[c.id]
        accs[c.id] = _Acc(c)
        accs[c.id].add([valid[r] for r in view.rows], [shapes[r] for r in view.rows], [raw[r] for r in view.rows])
    return {
        "dump": "tessera-dump/1",
        "branch": m.branch,
        "version": m.version,
        "row_count": len(view.rows),
        "schema": {"columns": [column_json(c) for c in m.schema.columns], "metadata": _meta(m.schema.metadata)},
        "columns": {c.name: accs[c.id].json() for c in m.schema.columns},
    }
