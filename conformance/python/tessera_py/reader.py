"""Opening and reading a version: VER-02/VER-03 resolution, tags (VAL-13), the manifest
(VAL-05, VAL-06), the fragment log (VAL-07) or fragment tree (VAL-20, in `tree`), deletion
vectors (VAL-08) and data files (VAL-09 to VAL-12)."""

import struct
from bisect import bisect_left
from dataclasses import dataclass

from . import image, model as M
from .datafile import ColumnRows, open_data_file, read_column
from .envelope import (BODY_LIMIT_MANIFEST, BODY_LIMIT_SEGMENT, BODY_LIMIT_TAG,
                       MAGIC_DELETION, MAGIC_MANIFEST, MAGIC_SEGMENT, MAGIC_TAG,
                       check_envelope, envelope_crc)
from .errors import NotSupportedHere, TesseraError, invalid
from .store import U64_MAX, Store
from .validate import (check_fragment_columns, check_fragment_entry, check_manifest,
                       valid_ref_name)

# ENV-10: a whole-object GET of an enveloped object reads at most 28 + its type's body limit.
_BOUND_MANIFEST = 28 + BODY_LIMIT_MANIFEST
_BOUND_SEGMENT = 28 + BODY_LIMIT_SEGMENT  # index nodes and deletion vectors too
_BOUND_TAG = 28 + BODY_LIMIT_TAG


def manifest_key(branch: str, version: int) -> str:
    return f"branches/{branch}/{version:020d}.tsm"


def _flags_hook(obj, body_len):
    """VAL-05 step 2: reader_flags before decoding the body (FLG-03)."""
    if body_len >= 8:
        flags = struct.unpack_from("<Q", obj, 24)[0]
        # FLG-08: ENCODED_IMAGES is known when Pillow is there to decode image pages.
        if flags & M.READER_FLAG_ENCODED_IMAGES and not image.available():
            raise NotSupportedHere("ENCODED_IMAGES versions need Pillow (scripts/setup.d/30-encoded.sh)")
        known = M.READER_FLAG_ENCODED_IMAGES | M.READER_FLAG_FRAGMENT_TREE
        if flags & ~known:
            raise TesseraError("unsupported", f"manifest sets reader_flags {flags:#x}; this "
                               f"reader knows bits 0 (ENCODED_IMAGES) and 1 (FRAGMENT_TREE)")


def load_manifest(obj: bytes, branch: str, version: int) -> M.Manifest:
    """VAL-05 and VAL-06 for the manifest object stored at the key (branch, version)."""
    what = f"manifest {manifest_key(branch, version)}"
    body = check_envelope(obj, MAGIC_MANIFEST, BODY_LIMIT_MANIFEST, what, _flags_hook)
    m = M.decode_manifest(body)
    check_manifest(m, branch, version)
    m.envelope_crc = envelope_crc(obj)
    return m


def _caller_name(name: str, what: str):
    if not valid_ref_name(name):
        raise TesseraError("usage", f"{what} name {name!r} is not valid (LAY-07)")


def resolve(store: Store, branch: str, version: int, visited=None) -> M.Manifest:
    """VER-03."""
    visited = set() if visited is None else visited
    if branch in visited:
        raise invalid(f"base resolution visits branch {branch!r} twice")
    visited.add(branch)
    obj = store.get(manifest_key(branch, version), _BOUND_MANIFEST)
    if obj is not None:
        return load_manifest(obj, branch, version)
    versions = store.list_versions(branch)
    if not versions:
        raise TesseraError("not_found", f"branch {branch!r} has no version {version}")
    v0 = min(versions)
    obj0 = store.get(manifest_key(branch, v0), _BOUND_MANIFEST)
    if obj0 is None:
        raise TesseraError("io", f"{manifest_key(branch, v0)} disappeared while reading")
    m0 = load_manifest(obj0, branch, v0)
    if m0.base is not None and version <= m0.base.version:
        try:
            return resolve(store, m0.base.branch, version, visited)
        except TesseraError as e:
            if e.cls == "not_found":
                raise invalid(f"branch {branch!r} promises version {version} through its "
                              f"base {m0.base.branch}@{m0.base.version}, but: {e.message}")
            raise
    raise TesseraError("not_found", f"branch {branch!r} has no version {version}")


def open_manifest(store: Store, branch=None, version=None, tag=None) -> M.Manifest:
    """The manifest named by the caller: a tag, a branch's version, or a branch's latest."""
    if tag is not None:
        return open_tag(store, tag)
    branch = "main" if branch is None else branch  # REF-03
    _caller_name(branch, "branch")
    if version is None:
        versions = store.list_versions(branch)  # VER-02
        if not versions:
            raise TesseraError("not_found", f"branch {branch!r} does not exist")
        version = max(versions)
    elif not 1 <= version <= U64_MAX:
        raise TesseraError("usage", f"version {version} is not in 1..=2^64-1")
    return resolve(store, branch, version)


def open_tag(store: Store, name: str) -> M.Manifest:
    """VAL-13."""
    _caller_name(name, "tag")
    key = f"tags/{name}.tst"
    obj = store.get(key, _BOUND_TAG)
    if obj is None:
        raise TesseraError("not_found", f"tag {name!r} does not exist")
    body = check_envelope(obj, MAGIC_TAG, BODY_LIMIT_TAG, f"tag record {key}")
    t = M.decode_tag(body)
    if t.name != name:
        raise invalid(f"the tag record at {key} names tag {t.name!r}")
    if not valid_ref_name(t.target.branch):
        raise invalid(f"tag {name!r}: target branch {t.target.branch!r} is not valid")
    if t.target.version < 1:
        raise invalid(f"tag {name!r}: target version 0")
    mkey = manifest_key(t.target.branch, t.target.version)
    mobj = store.get(mkey, _BOUND_MANIFEST)
    if mobj is None:
        raise invalid(f"tag {name!r}: target {mkey} does not exist")
    m = load_manifest(mobj, t.target.branch, t.target.version)
    if m.envelope_crc != t.manifest_crc32:
        raise invalid(f"tag {name!r} records manifest CRC {t.manifest_crc32:#010x}; "
                      f"{mkey} has {m.envelope_crc:#010x}")
    return m


def open_fragments(store: Store, m: M.Manifest) -> list:
    """The version's fragments in ascending id order, every index object read and checked:
    the fragment log (VAL-07), or with FRAGMENT_TREE every node of the tree (VAL-20)."""
    if m.reader_flags & M.READER_FLAG_FRAGMENT_TREE:
        from . import tree  # it uses this module's helpers
        return tree.all_fragments(store, m, tree.open_root(store, m))
    return open_log(store, m)


def open_log(store: Store, m: M.Manifest) -> list:
    """VAL-07: reads and applies the fragment log; returns fragments in ascending id order."""
    frags = {}
    for sref in m.segments:
        what = f"segment {sref.path}"
        obj = fetch_referenced(store, sref.path, sref.size, sref.crc32, what)  # 1. 2.
        body = check_envelope(obj, MAGIC_SEGMENT, BODY_LIMIT_SEGMENT, what)  # 3.
        seg = M.decode_segment(body)  # 4.
        if len(seg.fragments) != sref.fragment_count:  # 5. SEG-02
            raise invalid(f"{what}: {len(seg.fragments)} fragments; the reference says "
                          f"{sref.fragment_count}")
        # 6. SEG-03
        ids = [f.id for f in seg.fragments]
        for lst, name in ((ids, "fragment ids"), (seg.removed, "removed ids")):
            for a, b in zip(lst, lst[1:]):
                if not a < b:
                    raise invalid(f"{what}: {name} are not strictly ascending")
            for x in lst:
                if x >= m.next_fragment_id:
                    raise invalid(f"{what}: id {x} is not below next_fragment_id "
                                  f"{m.next_fragment_id}")
        if set(ids) & set(seg.removed):
            raise invalid(f"{what}: an id is both removed and listed")
        for f in seg.fragments:  # 7.
            check_fragment_entry(f, what)
        # 8.
        total = sum(f.row_count for f in seg.fragments)
        if total != sref.row_count:
            raise invalid(f"{what}: fragments hold {total} rows; the reference says "
                          f"{sref.row_count}")
        # 9. SEG-08
        for x in seg.removed:
            frags.pop(x, None)
        for f in seg.fragments:
            frags[f.id] = f
    out = [frags[k] for k in sorted(frags)]
    # SEG-06, on the final fragment map only: entries a later segment replaced are not checked.
    for f in out:
        check_fragment_columns(m.schema, f)
    live = sum(live_rows(f) for f in out)
    if live != m.row_count:  # MAN-06
        raise invalid(f"manifest row_count {m.row_count}; the fragments hold {live} live rows")
    return out


def fetch_referenced(store: Store, path: str, size: int, crc: int, what: str) -> bytes:
    """The first two steps for an object a reference names with its size and envelope CRC
    (VAL-07, VAL-08, VAL-20 steps 1 and 2): the bounded GET (absent: `invalid`), then size and
    envelope CRC against the reference (SEG-01, DEL-03, TREE-02: `invalid`)."""
    obj = store.get(path, _BOUND_SEGMENT)
    if obj is None:
        raise invalid(f"{what} does not exist")
    if len(obj) != size or envelope_crc(obj) != crc:
        raise invalid(f"{what}: size {len(obj)} / envelope CRC {envelope_crc(obj):#010x} "
                      f"differ from the reference's {size} / {crc:#010x}")
    return obj


def live_rows(f: M.Fragment) -> int:
    return f.row_count - (f.deletion.deleted_count if f.deletion else 0)


def load_deletions(store: Store, f: M.Fragment) -> set:
    """VAL-08: the deleted physical rows of fragment f."""
    d = f.deletion
    if d is None:
        return set()
    what = f"deletion vector {d.path}"
    obj = fetch_referenced(store, d.path, d.size, d.crc32, what)
    body = check_envelope(obj, MAGIC_DELETION, BODY_LIMIT_SEGMENT, what)
    dv = M.decode_deletion_vector(body)
    if dv.fragment_id != f.id:
        raise invalid(f"{what}: belongs to fragment {dv.fragment_id}, not {f.id}")
    for a, b in zip(dv.rows, dv.rows[1:]):
        if not a < b:
            raise invalid(f"{what}: rows are not strictly ascending")
    if dv.rows and dv.rows[-1] >= f.row_count:
        raise invalid(f"{what}: row {dv.rows[-1]} is not below row_count {f.row_count}")
    if len(dv.rows) != d.deleted_count:
        raise invalid(f"{what}: {len(dv.rows)} rows; the reference says {d.deleted_count}")
    return set(dv.rows)


@dataclass
class Version:
    """An opened version. `fragments` are all of them, in id order; a version opened for
    reading some rows (`open_for_rows`) with a fragment tree has None there and its root,
    checked, in `root` (None for an empty tree)."""
    manifest: M.Manifest
    fragments: list | None
    root: M.IndexNode | None = None


def open_version(store: Store, branch=None, version=None, tag=None) -> Version:
    """Opens a version to read all of it (VAL-16): every index object is read."""
    m = open_manifest(store, branch, version, tag)
    return Version(m, open_fragments(store, m))


def open_for_rows(store: Store, m: M.Manifest) -> Version:
    """Opens the version of a validated manifest to read some rows (VAL-19): the fragment
    log (VAL-07), or a fragment tree's root only (VAL-20, TREE-07)."""
    if m.reader_flags & M.READER_FLAG_FRAGMENT_TREE:
        from . import tree
        return Version(m, None, tree.open_root(store, m))
    return Version(m, open_log(store, m))


def fragments_holding(store: Store, v: Version, rows: list) -> list:
    """`(first global row, fragment)` for each fragment holding one of `rows` (global live
    rows, ascending, each below the version's row_count), in row order (MAN-09). With a lazily
    opened tree, only the nodes on the way to them are read (TREE-07)."""
    if v.fragments is None:
        from . import tree
        return tree.fragments_holding(store, v.manifest, v.root, rows)
    out = []
    holding(v.fragments, rows, 0, out)
    return out


def holding(fragments, rows, at, out):
    """Appends `(first global row, fragment)` to `out` for each of `fragments` (in row order,
    the first starting at global row `at`) that holds one of `rows` (ascending); returns the
    global row after the last fragment."""
    for f in fragments:
        n = live_rows(f)
        i = bisect_left(rows, at)
        if i < len(rows) and rows[i] < at + n:
            out.append((at, f))
        at += n
    return at


def read_rows(store: Store, v: Version, sink):
    """Reads every live row of every schema column, fragment by fragment in row order,
    calling `sink(column, valid, shapes, raw)` with lists of the fragment's live rows."""
    cols = v.manifest.schema.columns
    by_id = {c.id: c for c in cols}
    for f in v.fragments:
        if live_rows(f) == 0:
            continue
        deleted = load_deletions(store, f)
        live = [i not in deleted for i in range(f.row_count)]
        got = {}
        for ref in f.files:
            wanted = [c for c in ref.column_ids if c in by_id]
            if not wanted:
                continue
            df = open_data_file(store, ref, f, by_id)
            for cid in wanted:
                got[cid] = read_column(df, by_id[cid], live)
        for c in cols:
            rows: ColumnRows = got[c.id]
            if deleted:
                keep = [i for i in range(f.row_count) if live[i]]
                sink(c, [rows.valid[i] for i in keep], [rows.shapes[i] for i in keep],
                     [rows.raw[i] for i in keep])
            else:
                sink(c, rows.valid, rows.shapes, rows.raw)
