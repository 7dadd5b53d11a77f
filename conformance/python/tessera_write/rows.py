"""Rows of one column as the writer holds them, their checks, and their statistics (§12).

A row is `None` (null) or `(shape, raw)`: the row shape (SHP-02; `(byte length,)` for `utf8`
and `bytes`) and the row's bytes (SHP-05: elements little-endian, C order).
"""

import json
import math
import struct

from tessera_py import model as M
from tessera_py.errors import TesseraError
from tessera_py.validate import LIM_ROW_BYTES

# struct letters that read one element as its value (f16 with "e": exact widening, STAT-02)
_VALUE_FMT = {1: "B", 2: "H", 3: "I", 4: "Q", 5: "b", 6: "h", 7: "i", 8: "q",
              9: "e", 11: "f", 12: "d"}


def usage(msg: str) -> TesseraError:
    return TesseraError("usage", msg)


def element_count(shape) -> int:
    """SHP-04: the exact product of the dims, 0 as soon as one is 0."""
    n = 1
    for d in shape:
        if d == 0:
            return 0
        n *= d
    return n


def shapes_values(col: M.Column, row) -> list:
    """The values the shapes block holds for a row (DF-17): its ragged dims in schema order,
    or its byte length for a variable dtype; all 0 for a null row (MOD-06)."""
    rd = col.ragged_dims
    if row is None:
        return [0] * rd
    shape, raw = row
    if M.is_var(col.dtype):
        return [len(raw)]
    return [d for d, dim in zip(shape, col.shape) if dim is M.RAGGED]


def stored_bytes(col: M.Column, row) -> bytes:
    """The bytes a row takes in a page (DF-19): a null row of a fully fixed shape is zeros
    (MOD-06), any other null row takes no bytes."""
    if row is not None:
        return row[1]
    if M.is_var(col.dtype) or any(d is M.RAGGED for d in col.shape):
        return b""
    return bytes(element_count(col.shape) * M.item_size(col.dtype))


def check_row(col: M.Column, row, where: str):
    """What a writer must not write (LIM-15: refused before anything is written): a null in a
    non-nullable column, a shape that is not the column's, a wrong byte length, row bytes over
    LIM-09, bool bytes other than 00/01 (DT-02), invalid UTF-8 (DT-05), and the value rules of
    KND-11."""
    if row is None:
        if not col.nullable:
            raise usage(f"{where}: null in the non-nullable column {col.name!r}")
        return
    shape, raw = row
    if M.is_var(col.dtype):
        if tuple(shape) != (len(raw),):
            raise usage(f"{where}: shape {list(shape)} is not [byte length {len(raw)}]")
    else:
        if len(shape) != len(col.shape) or any(
                dim is not M.RAGGED and dim != d for d, dim in zip(shape, col.shape)):
            raise usage(f"{where}: row shape {list(shape)} does not fit the column's shape")
        if len(raw) != element_count(shape) * M.item_size(col.dtype):
            raise usage(f"{where}: {len(raw)} bytes for row shape {list(shape)}")
    if len(raw) > LIM_ROW_BYTES:
        raise TesseraError("limit", f"{where}: a row of {len(raw)} bytes is over LIM-09")
    if col.dtype == M.DT_BOOL and raw.translate(None, b"\x00\x01"):
        raise usage(f"{where}: a bool element is neither 00 nor 01")
    if col.dtype == M.DT_UTF8:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise usage(f"{where}: not valid UTF-8") from None
    kind = M.KIND_NAMES[col.kind.type]
    if kind == "json":
        try:
            json.loads(text)
        except ValueError:
            raise usage(f"{where}: a json column's value is not a JSON text (KND-11)") from None
    elif kind in ("tokens", "class_label"):
        bound = (col.kind.params["vocab_size"] if kind == "tokens"
                 else len(col.kind.params["names"]))
        if bound is not None and any(not 0 <= v < bound for v in _values(col.dtype, raw)):
            raise usage(f"{where}: a {kind} element outside [0, {bound}) (KND-11)")


def _values(dtype: int, raw: bytes):
    """The elements of a numeric or bool row as Python numbers (floats widened exactly)."""
    if dtype == M.DT_BOOL:
        return list(raw)
    size = M.item_size(dtype)
    n = len(raw) // size
    if dtype == 10:  # bf16: the upper 16 bits of a binary32
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0]
                for h in struct.unpack(f"<{n}H", raw)]
    return list(struct.unpack(f"<{n}{_VALUE_FMT[dtype]}", raw))


def eligible(col: M.Column) -> bool:
    """STAT-01: min and max only for rank-0 bool and numeric columns."""
    return not col.shape and (col.dtype == M.DT_BOOL or M.is_numeric(col.dtype))


def _scalar(dtype: int, v):
    """STAT-02: the `Scalar` of a value, in the reader's form."""
    if dtype == M.DT_BOOL:
        return ("bool", bool(v))
    if M.is_float(dtype):
        return ("float", struct.unpack("<Q", struct.pack("<d", v))[0])
    return ("int", v) if dtype in M.SIGNED else ("uint", v)


def scalar_value(s):
    """The number a `Scalar` stands for, for comparisons (`false < true`, `-0.0 = +0.0`)."""
    kind, v = s
    if kind == "float":
        return struct.unpack("<d", struct.pack("<Q", v))[0]
    return int(v)


def column_stats(col: M.Column, rows) -> tuple:
    """One fragment's `ColumnStats` over its physical rows (STAT-03, STAT-04): the exact null
    count, and the exact min and max of the non-null, non-NaN values of an eligible column."""
    nulls = sum(1 for r in rows if r is None)
    lo = hi = None
    if eligible(col):
        values = [v for r in rows if r is not None for v in _values(col.dtype, r[1])
                  if not (isinstance(v, float) and math.isnan(v))]
        if values:
            lo, hi = _scalar(col.dtype, min(values)), _scalar(col.dtype, max(values))
    return (col.id, nulls, lo, hi)


def version_stats(schema: M.Schema, fragments) -> list:
    """A manifest's `stats` (STAT-06): a schema column is included only if every fragment has
    an entry for it (and there is at least one fragment); its null count is their sum, its
    min the least of their mins and its max the greatest of their maxes."""
    if not fragments:
        return []
    out = []
    for col in sorted(schema.columns, key=lambda c: c.id):
        entries = []
        for f in fragments:
            e = next((s for s in f.stats if s[0] == col.id), None)
            if e is None:
                break
            entries.append(e)
        else:
            mins = [e[2] for e in entries if e[2] is not None]
            maxs = [e[3] for e in entries if e[3] is not None]
            out.append((col.id, sum(e[1] for e in entries),
                        min(mins, key=scalar_value) if mins else None,
                        max(maxs, key=scalar_value) if maxs else None))
    return out
