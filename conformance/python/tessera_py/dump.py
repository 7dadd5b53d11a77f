"""The canonical dump (SPEC.md §19)."""

import hashlib
import struct

from . import model as M
from .reader import Version, read_rows

ROWS_THRESHOLD = 4096  # DUMP-07

# struct format letters of each numeric dtype (floats as their unsigned bit patterns)
_FMT = {1: "B", 2: "H", 3: "I", 4: "Q", 5: "b", 6: "h", 7: "i", 8: "q",
        9: "H", 10: "H", 11: "I", 12: "Q"}


def _meta(meta):
    return {k: v for k, v in meta}


def kind_json(k: M.Kind) -> dict:
    t = M.KIND_NAMES[k.type]
    out = {"type": t}
    p = k.params
    if t == "image":
        out["layout"] = M.IMAGE_LAYOUTS[p["layout"]]
    elif t == "video":
        out["fps_milli"] = p["fps_milli"]
    elif t == "audio":
        out["sample_rate"] = p["sample_rate"]
    elif t == "tokens":
        out["vocab_size"] = p["vocab_size"]
    elif t == "embedding":
        out["metric"] = M.METRICS[p["metric"]]
    elif t == "class_label":
        out["names"] = list(p["names"])
    elif t == "bbox":
        out["format"] = M.BBOX_FORMATS[p["format"]]
        out["normalized"] = p["normalized"]
    return out


def column_json(c: M.Column) -> dict:
    codec, level = c.compression
    comp = {"codec": "encoded" if codec == M.COMPRESSION_ENCODED else M.CODECS[codec]}
    if codec == M.CODEC_ZSTD:
        comp["level"] = level
    return {"id": c.id, "name": c.name, "dtype": M.dtype_name(c.dtype),
            "shape": [d for d in c.shape],  # None (Ragged) dumps as null
            "kind": kind_json(c.kind), "compression": comp, "nullable": c.nullable,
            "metadata": _meta(c.metadata)}


def _values(dtype: int, raw) -> list:
    if dtype == M.DT_BOOL:
        return [b == 1 for b in bytes(raw)]
    n = len(raw) // M.item_size(dtype)
    a = struct.unpack(f"<{n}{_FMT[dtype]}", raw)
    if M.is_float(dtype):
        width = 2 * M.item_size(dtype)
        return ["0x%0*x" % (width, x) for x in a]
    return [str(x) for x in a]


class _Acc:
    __slots__ = ("col", "h", "rows", "elements")

    def __init__(self, col):
        self.col = col
        self.h = hashlib.sha256()
        self.rows = []          # dropped (None) once the element count passes the threshold
        self.elements = 0

    def add(self, valid, shapes, raw):
        dt = self.col.dtype
        var = M.is_var(dt)
        isz = M.item_size(dt)
        parts = []
        for ok, shape, rb in zip(valid, shapes, raw):
            if not ok:
                parts.append(b"\x00")
                if self.rows is not None:
                    self.rows.append(None)
                continue
            dshape = (len(rb),) if var else shape
            parts.append(b"\x01")
            if dshape:
                parts.append(struct.pack(f"<{len(dshape)}Q", *dshape))
            parts.append(rb)
            n = len(rb) if var else len(rb) // isz
            self.elements += n
            if self.rows is not None:
                if self.elements > ROWS_THRESHOLD:
                    self.rows = None
                elif dt == M.DT_UTF8:
                    self.rows.append({"shape": [len(rb)], "values": str(rb, "utf-8")})
                elif dt == M.DT_BYTES:
                    self.rows.append({"shape": [len(rb)], "values": bytes(rb).hex()})
                else:
                    self.rows.append({"shape": list(shape), "values": _values(dt, rb)})
        self.h.update(b"".join(parts))

    def json(self) -> dict:
        out = {"sha256": self.h.hexdigest()}
        if self.rows is not None:
            out["rows"] = self.rows
        return out


def dump(store, v: Version) -> dict:
    m = v.manifest
    accs = {c.id: _Acc(c) for c in m.schema.columns}
    read_rows(store, v, lambda c, valid, shapes, raw: accs[c.id].add(valid, shapes, raw))
    return {
        "dump": "tessera-dump/1",
        "branch": m.branch,
        "version": m.version,
        "row_count": m.row_count,
        "schema": {"columns": [column_json(c) for c in m.schema.columns],
                   "metadata": _meta(m.schema.metadata)},
        "columns": {c.name: accs[c.id].json() for c in m.schema.columns},
    }
