"""Semantic checks on decoded manifests (VAL-06) and shared name/path rules."""

import re

from . import model as M
from .errors import invalid, limit

LIM_COLUMNS = 4096          # LIM-01
LIM_RANK = 8                # LIM-02
LIM_NAME = 256              # LIM-03
LIM_META_ENTRIES = 1024     # LIM-04
LIM_META_BYTES = 65536      # LIM-04 (key, value, message)
LIM_ROW_BYTES = 1 << 28     # LIM-09 (256 MiB, = LIM-07)
LIM_ROWS = 1 << 24          # LIM-10
LIM_PAGES = 1 << 24         # LIM-11
LIM_PATH_BYTES = 1024       # LIM-12
LIM_PATH_SEGMENTS = 8       # LIM-12
LIM_CLASS_NAMES = 1 << 20   # LIM-13
LIM_BLOCK_RAW = 256 << 20   # LIM-07
LIM_RATIO = 65536           # LIM-08
LIM_FOOTER = 64 << 20       # LIM-06

_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}", re.ASCII)
_PATH_SEGMENT = re.compile(r"[A-Za-z0-9._-]+", re.ASCII)


def valid_ref_name(name: str) -> bool:
    """LAY-07 (branch and tag names)."""
    return _NAME.fullmatch(name) is not None


def blen(s: str) -> int:
    return len(s.encode("utf-8"))


def check_path(path: str, what: str):
    """LAY-10: byte length, then segment count (LIM-12, `limit`), then LAY-09 (`invalid`)."""
    n = blen(path)
    if n > LIM_PATH_BYTES:
        raise limit(f"{what}: path is {n} bytes, over {LIM_PATH_BYTES}")
    segs = path.split("/")
    if len(segs) > LIM_PATH_SEGMENTS:
        raise limit(f"{what}: path has {len(segs)} segments, over {LIM_PATH_SEGMENTS}")
    for s in segs:
        if s in (".", "..") or _PATH_SEGMENT.fullmatch(s) is None:
            raise invalid(f"{what}: path {path!r} is not a valid relative path (LAY-09)")


def check_metadata(meta: list, what: str):
    """VAL-06 step 5: count, sizes (LIM-04, `limit`), then strictly ascending keys (MOD-04)."""
    if len(meta) > LIM_META_ENTRIES:
        raise limit(f"{what}: {len(meta)} metadata entries, over {LIM_META_ENTRIES}")
    for k, v in meta:
        if blen(k) > LIM_META_BYTES or blen(v) > LIM_META_BYTES:
            raise limit(f"{what}: a metadata key or value is over {LIM_META_BYTES} bytes")
    prev = None
    for k, _ in meta:
        kb = k.encode("utf-8")
        if prev is not None and not prev < kb:
            raise invalid(f"{what}: metadata keys are not strictly ascending ({k!r})")
        prev = kb


def _has_control(name: str) -> bool:
    return any(ord(c) <= 0x1F or 0x7F <= ord(c) <= 0x9F for c in name)


def fixed_row_bytes(col: M.Column):
    """SHP-04 for a column with no ragged dims and a fixed-size dtype (exact)."""
    n = 1
    for d in col.shape:
        if d == 0:
            return 0
        n *= d
    return n * M.item_size(col.dtype)


def is_fixed(col: M.Column) -> bool:
    return not M.is_var(col.dtype) and all(d is not M.RAGGED for d in col.shape)


IMAGE_DTYPES = {1, 2, 9, 10, 11}  # u8 u16 f16 bf16 f32


def encodable(col: M.Column) -> bool:
    """CMP-05: dtype u8, kind image, layout hw, or hwc with a last dim Fixed(1..=4)."""
    if col.dtype != 1 or M.KIND_NAMES[col.kind.type] != "image":
        return False
    layout = M.IMAGE_LAYOUTS[col.kind.params["layout"]]
    if layout == "hw":
        return len(col.shape) == 2
    return layout == "hwc" and len(col.shape) == 3 and col.shape[2] in (1, 2, 3, 4)


def check_kind(col: M.Column):
    """KND-02 to KND-10 (`invalid`), with LIM-13 (`limit`) after the ClassLabel dtype/rank."""
    k, dt, shape = col.kind, col.dtype, col.shape
    rank = len(shape)
    t = M.KIND_NAMES[k.type]
    where = f"column {col.name!r}: kind {t}"
    if t == "image":
        if dt not in IMAGE_DTYPES:
            raise invalid(f"{where} needs dtype u8, u16, f16, bf16 or f32")
        want = 2 if M.IMAGE_LAYOUTS[k.params["layout"]] == "hw" else 3
        if rank != want:
            raise invalid(f"{where} needs rank {want}, has {rank}")
    elif t == "video":
        if not M.is_numeric(dt) or rank != 4:
            raise invalid(f"{where} needs a numeric dtype and rank 4")
    elif t == "audio":
        if not M.is_numeric(dt) or rank not in (1, 2):
            raise invalid(f"{where} needs a numeric dtype and rank 1 or 2")
        if k.params["sample_rate"] == 0:
            raise invalid(f"{where} has sample_rate 0")
    elif t in ("text", "json"):
        if dt != M.DT_UTF8:
            raise invalid(f"{where} needs dtype utf8")
    elif t == "tokens":
        if not M.is_int(dt) or rank != 1:
            raise invalid(f"{where} needs an integer dtype and rank 1")
    elif t == "embedding":
        if not M.is_float(dt) or rank != 1 or shape[0] is M.RAGGED:
            raise invalid(f"{where} needs a float dtype and one fixed dim")
    elif t == "class_label":
        if not M.is_int(dt) or rank not in (0, 1):
            raise invalid(f"{where} needs an integer dtype and rank 0 or 1")
        names = k.params["names"]
        if len(names) > LIM_CLASS_NAMES:
            raise limit(f"{where} has {len(names)} names, over {LIM_CLASS_NAMES}")
        if len({n.encode("utf-8") for n in names}) != len(names):
            raise invalid(f"{where} has duplicate names")
    elif t == "bbox":
        ok = M.is_numeric(dt) and (shape == [4] or (rank == 2 and shape[1] == 4))
        if not ok:
            raise invalid(f"{where} needs a numeric dtype and shape [4] or [N, 4]")
    elif t == "mask":
        if not (dt == M.DT_BOOL or M.is_int(dt)) or rank not in (2, 3):
            raise invalid(f"{where} needs dtype bool or integer and rank 2 or 3")


def check_version_ref(ref: M.VersionRef, what: str):
    if not valid_ref_name(ref.branch):
        raise invalid(f"{what}: branch {ref.branch!r} is not a valid branch name (LAY-07)")
    if ref.version < 1:
        raise invalid(f"{what}: version 0")


def check_manifest(m: M.Manifest, key_branch: str, key_version: int):
    """VAL-06, in order."""
    # 1. MAN-01
    if m.branch != key_branch or m.version != key_version:
        raise invalid(f"manifest at branches/{key_branch}/{key_version:020d}.tsm says "
                      f"branch {m.branch!r} version {m.version}")
    # 2. LAY-08
    if m.version < 1:
        raise invalid("manifest version is 0")
    # 3. MAN-02
    for name in ("parent", "base", "merged"):
        ref = getattr(m, name)
        if ref is not None:
            check_version_ref(ref, f"manifest {name}")
    if m.base is not None:
        if m.base.version != m.version or m.base.branch == m.branch:
            raise invalid(f"manifest base {m.base.branch}@{m.base.version} must have this "
                          f"version ({m.version}) and another branch")
    elif m.version == 1:
        if m.parent is not None:
            raise invalid("manifest of version 1 without base has a parent")
    else:
        p = m.parent
        if p is None or p.branch != m.branch or p.version != m.version - 1:
            raise invalid(f"manifest parent must be {m.branch}@{m.version - 1}")
    # 4. LIM-04
    if blen(m.message) > LIM_META_BYTES:
        raise limit(f"manifest message is over {LIM_META_BYTES} bytes")
    # 5.
    check_metadata(m.metadata, "manifest")
    # 6. schema
    cols = m.schema.columns
    if len(cols) > LIM_COLUMNS:
        raise limit(f"schema has {len(cols)} columns, over {LIM_COLUMNS}")
    check_metadata(m.schema.metadata, "schema")
    for col in cols:
        where = f"column {col.name!r}"
        if blen(col.name) > LIM_NAME:
            raise limit(f"a column name is {blen(col.name)} bytes, over {LIM_NAME}")
        if not col.name or _has_control(col.name):
            raise invalid(f"{where}: name is empty or has a control character (MOD-03)")
        if len(col.shape) > LIM_RANK:
            raise limit(f"{where}: rank {len(col.shape)}, over {LIM_RANK}")
        if M.is_var(col.dtype) and col.shape:
            raise invalid(f"{where}: a {M.dtype_name(col.dtype)} column must have rank 0")
        codec, level = col.compression
        if codec == M.CODEC_ZSTD and not 1 <= level <= 22:
            raise invalid(f"{where}: zstd level {level} outside 1..=22")
        if codec == M.COMPRESSION_ENCODED and not encodable(col):
            raise invalid(f"{where}: encoded columns must be u8 images, layout hw or hwc with a "
                          f"fixed last dim of 1 to 4 (CMP-05)")
        check_metadata(col.metadata, where)
        if is_fixed(col) and fixed_row_bytes(col) > LIM_ROW_BYTES:
            raise limit(f"{where}: row byte size {fixed_row_bytes(col)} over {LIM_ROW_BYTES}")
        check_kind(col)
    names = [c.name.encode("utf-8") for c in cols]
    if len(set(names)) != len(names):
        raise invalid("duplicate column names (MOD-03)")
    ids = [c.id for c in cols]
    if len(set(ids)) != len(ids):
        raise invalid("duplicate column ids (MOD-02)")
    # 6.6 FLG-08, after the unique names and ids
    if any(c.compression[0] == M.COMPRESSION_ENCODED for c in cols) \
            and not m.reader_flags & M.READER_FLAG_ENCODED_IMAGES:
        raise invalid("an encoded column without the ENCODED_IMAGES reader flag (FLG-08)")
    # 7. MAN-05
    if cols and m.next_column_id <= max(ids):
        raise invalid(f"next_column_id {m.next_column_id} is not above every column id")
    # 8. MAN-07
    for i, s in enumerate(m.segments):
        check_path(s.path, f"segment reference {i}")


def check_fragment_entry(f: M.Fragment, what: str):
    """VAL-07 step 7 for one fragment entry of a segment or a leaf (SEG-04, SEG-05, DEL-02)."""
    fw = f"{what}: fragment {f.id}"
    if f.row_count > LIM_ROWS:  # 7.1
        raise limit(f"{fw}: {f.row_count} rows, over {LIM_ROWS}")
    for fi, ref in enumerate(f.files):  # 7.2
        check_path(ref.path, f"{fw} file {fi}")
        for a, b in zip(ref.column_ids, ref.column_ids[1:]):
            if not a < b:
                raise invalid(f"{fw} file {fi}: column ids are not strictly ascending")
    if f.deletion is not None:  # 7.3
        check_path(f.deletion.path, f"{fw} deletion vector")
        if not 1 <= f.deletion.deleted_count <= f.row_count:
            raise invalid(f"{fw}: deleted_count {f.deletion.deleted_count} outside "
                          f"1..={f.row_count}")


def check_fragment_columns(schema: M.Schema, f: M.Fragment):
    """SEG-06: every schema column in the column_ids of exactly one of the fragment's files
    (ids that are no schema column's are ignored)."""
    count = {c.id: 0 for c in schema.columns}
    for ref in f.files:
        for c in ref.column_ids:
            if c in count:
                count[c] += 1
    for c in schema.columns:
        if count[c.id] != 1:
            raise invalid(f"fragment {f.id}: column {c.id} appears in {count[c.id]} data "
                          f"file references, not exactly one")
