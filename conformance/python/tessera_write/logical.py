"""The logical description `tessera-logical/1` (conformance/README.md, "Logical JSON"): what
the adapter's `write` is asked to write, parsed into a schema, commits and tags.

The schema is the canonical dump's schema (DUMP-02 to DUMP-04) without ids: columns get ids
0, 1, 2, … in order. Version 1 of `main` is the created dataset; commit `k` (from 1) is an
append that becomes version `k + 1`, even with zero rows. Rows are in dump notation (DUMP-08,
DUMP-09). Unknown members are refused everywhere; every fault is `usage`.
"""

import json
from dataclasses import dataclass, field

from tessera_py import model as M
from tessera_py.errors import NotSupportedHere

from .dataset import WriteOptions, Writer
from .rows import element_count, usage

FORMAT = "tessera-logical/1"
_DTYPES = {name: code for code, (name, _, _) in enumerate(M.DTYPES)}
# The column compressions this writer implements (§3.6); others are not supported here.
_CODECS = {"none": M.CODEC_NONE, "lz4": M.CODEC_LZ4, "zstd": M.CODEC_ZSTD,
           "encoded": M.COMPRESSION_ENCODED}


@dataclass
class Commit:
    message: str
    rows: dict  # column name -> [None | (shape, raw)]


@dataclass
class Logical:
    schema: M.Schema
    commits: list
    tags: list = field(default_factory=list)  # (name, version, message)


def _obj(v, what: str, keys, optional=()) -> dict:
    if not isinstance(v, dict):
        raise usage(f"{what}: expected an object")
    for k in v:
        if k not in keys and k not in optional:
            raise usage(f"{what}: unknown member {k!r}")
    for k in keys:
        if k not in v:
            raise usage(f"{what}: missing member {k!r}")
    return v


def _str(v, what: str) -> str:
    if not isinstance(v, str):
        raise usage(f"{what}: expected a string")
    return v


def _uint(v, what: str, bits: int = 64) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << bits:
        raise usage(f"{what}: expected an integer in [0, 2^{bits})")
    return v


def _pick(v, what: str, options) -> int:
    s = _str(v, what)
    if s not in options:
        raise usage(f"{what}: {s!r} is not one of {list(options)}")
    return list(options).index(s)


def _metadata(v, what: str) -> list:
    if not isinstance(v, dict):
        raise usage(f"{what}: expected an object of strings")
    items = [(k, _str(x, f"{what}[{k!r}]")) for k, x in v.items()]
    return sorted(items, key=lambda kv: kv[0].encode("utf-8"))  # MOD-04: byte order


def _kind(v, what: str) -> M.Kind:
    t = _str(_obj(v, what, ["type"], ["layout", "fps_milli", "sample_rate", "vocab_size",
                                      "metric", "names", "format", "normalized"])["type"], what)
    if t not in M.KIND_NAMES:
        raise usage(f"{what}.type: unknown kind {t!r}")
    params = {
        "image": ["layout"], "video": ["fps_milli"], "audio": ["sample_rate"],
        "tokens": ["vocab_size"], "embedding": ["metric"], "class_label": ["names"],
        "bbox": ["format", "normalized"],
    }.get(t, [])
    _obj(v, what, ["type"] + params)
    p = {}
    if t == "image":
        p["layout"] = _pick(v["layout"], f"{what}.layout", M.IMAGE_LAYOUTS)
    elif t in ("video", "audio"):
        key = params[0]
        p[key] = _uint(v[key], f"{what}.{key}", 32)
    elif t == "tokens":
        vs = v["vocab_size"]
        p["vocab_size"] = None if vs is None else _uint(vs, f"{what}.vocab_size")
    elif t == "embedding":
        p["metric"] = _pick(v["metric"], f"{what}.metric", M.METRICS)
    elif t == "class_label":
        if not isinstance(v["names"], list):
            raise usage(f"{what}.names: expected an array")
        p["names"] = [_str(n, f"{what}.names[]") for n in v["names"]]
    elif t == "bbox":
        p["format"] = _pick(v["format"], f"{what}.format", M.BBOX_FORMATS)
        if not isinstance(v["normalized"], bool):
            raise usage(f"{what}.normalized: expected a boolean")
        p["normalized"] = v["normalized"]
    return M.Kind(M.KIND_NAMES.index(t), p)


def _column(v, cid: int, what: str) -> M.Column:
    _obj(v, what, ["name", "dtype", "shape", "kind", "compression", "nullable", "metadata"])
    dtype = _DTYPES.get(_str(v["dtype"], f"{what}.dtype"))
    if dtype is None:
        raise usage(f"{what}.dtype: unknown dtype {v['dtype']!r}")
    if not isinstance(v["shape"], list):
        raise usage(f"{what}.shape: expected an array")
    shape = [M.RAGGED if d is None else _uint(d, f"{what}.shape[]") for d in v["shape"]]
    comp = v["compression"]
    if isinstance(comp, dict) and comp.get("codec") not in _CODECS:
        raise NotSupportedHere(f"{what}.compression: this writer writes codecs "
                               f"{list(_CODECS)}, not {comp.get('codec')!r}")
    comp = _obj(comp, f"{what}.compression", ["codec"], ["level"])
    codec = _CODECS[_str(comp["codec"], f"{what}.compression.codec")]
    if (codec == M.CODEC_ZSTD) != ("level" in comp):
        raise usage(f"{what}.compression: a level goes with zstd, and only with zstd")
    level = None
    if codec == M.CODEC_ZSTD:
        level = comp["level"]
        if isinstance(level, bool) or not isinstance(level, int) or not -2**31 <= level < 2**31:
            raise usage(f"{what}.compression.level: expected an i32")
    if not isinstance(v["nullable"], bool):
        raise usage(f"{what}.nullable: expected a boolean")
    return M.Column(cid, _str(v["name"], f"{what}.name"), dtype, shape,
                    _kind(v["kind"], f"{what}.kind"), (codec, level), v["nullable"],
                    _metadata(v["metadata"], f"{what}.metadata"))


def _element(dtype: int, v, what: str) -> bytes:
    """One element in dump notation (DUMP-09), strictly."""
    size = M.item_size(dtype)
    if dtype == M.DT_BOOL:
        if not isinstance(v, bool):
            raise usage(f"{what}: expected true or false")
        return b"\x01" if v else b"\x00"
    s = _str(v, what)
    if M.is_float(dtype):
        digits = s[2:]
        if not s.startswith("0x") or len(digits) != 2 * size or digits.strip(
                "0123456789abcdef"):
            raise usage(f"{what}: {s!r} is not 0x and {2 * size} lowercase hex digits")
        return int(digits, 16).to_bytes(size, "little")
    body = s[1:] if s.startswith("-") else s
    if not body.isascii() or not body.isdigit() or (body != "0" and body.startswith("0")) \
            or s == "-0":
        raise usage(f"{what}: {s!r} is not a canonical decimal integer")
    x = int(s)
    signed = dtype in M.SIGNED
    lo, hi = (-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1) if signed else \
        (0, (1 << (8 * size)) - 1)
    if not lo <= x <= hi:
        raise usage(f"{what}: {s} is out of range for {M.dtype_name(dtype)}")
    return x.to_bytes(size, "little", signed=signed)


def _row(col: M.Column, v, what: str):
    if v is None:
        return None
    _obj(v, what, ["shape", "values"])
    if not isinstance(v["shape"], list):
        raise usage(f"{what}.shape: expected an array")
    shape = tuple(_uint(d, f"{what}.shape[]") for d in v["shape"])
    values = v["values"]
    if M.is_var(col.dtype):
        s = _str(values, f"{what}.values")
        if col.dtype == M.DT_UTF8:
            raw = s.encode("utf-8")
        else:
            if len(s) % 2 or s.strip("0123456789abcdef"):
                raise usage(f"{what}.values: not lowercase hex")
            raw = bytes.fromhex(s)
        return shape, raw
    if not isinstance(values, list):
        raise usage(f"{what}.values: expected an array")
    if len(values) != element_count(shape):
        raise usage(f"{what}: shape {list(shape)} needs {element_count(shape)} values, "
                    f"not {len(values)}")
    return shape, b"".join(_element(col.dtype, e, f"{what}.values[]") for e in values)


def parse(doc) -> Logical:
    top = _obj(doc, "$", ["logical", "schema", "commits"], ["tags"])
    if top["logical"] != FORMAT:
        raise usage(f"$.logical: expected {FORMAT!r}")
    sv = _obj(top["schema"], "$.schema", ["columns", "metadata"])
    if not isinstance(sv["columns"], list):
        raise usage("$.schema.columns: expected an array")
    cols = [_column(c, i, f"$.schema.columns[{i}]") for i, c in enumerate(sv["columns"])]
    schema = M.Schema(cols, _metadata(sv["metadata"], "$.schema.metadata"))
    if not isinstance(top["commits"], list):
        raise usage("$.commits: expected an array")
    by_name = {c.name: c for c in cols}
    commits = []
    for k, c in enumerate(top["commits"]):
        what = f"$.commits[{k}]"
        _obj(c, what, ["message", "rows"])
        rows = c["rows"]
        if not isinstance(rows, dict):
            raise usage(f"{what}.rows: expected an object")
        parsed = {}
        for name, lst in rows.items():
            col = by_name.get(name)
            if col is None:
                raise usage(f"{what}.rows: no column named {name!r}")
            if not isinstance(lst, list):
                raise usage(f"{what}.rows[{name!r}]: expected an array")
            parsed[name] = [_row(col, r, f"{what}.rows[{name!r}][{i}]")
                            for i, r in enumerate(lst)]
        commits.append(Commit(_str(c["message"], f"{what}.message"), parsed))
    tags = []
    tv = top.get("tags", [])
    if not isinstance(tv, list):
        raise usage("$.tags: expected an array")
    for i, t in enumerate(tv):
        what = f"$.tags[{i}]"
        _obj(t, what, ["name", "version"], ["message"])
        tags.append((_str(t["name"], f"{what}.name"), _uint(t["version"], f"{what}.version"),
                     _str(t.get("message", ""), f"{what}.message")))
    return Logical(schema, commits, tags)


def write(logical: Logical, root: str, options: WriteOptions | None = None):
    """Writes the description as a dataset rooted at the existing directory `root`:
    create, one append per commit, then the tags."""
    w = Writer(root, options)
    w.create(logical.schema)
    for c in logical.commits:
        w.append(c.rows, c.message)
    for name, version, message in logical.tags:
        w.tag(name, version, message)


def write_file(path: str, root: str, options: WriteOptions | None = None):
    """Reads `tessera-logical/1` JSON from `path` and writes it to `root`."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise usage(f"cannot read the logical description {path}: {e}") from None
    write(parse(doc), root, options)
