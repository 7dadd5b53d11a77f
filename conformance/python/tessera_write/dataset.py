"""Creating a dataset, appending rows and tagging versions of `main` (§14), on a local file
system, with the commit protocol of VER-05.

An append writes its data files first (one fragment per data file, split at about
`file_bytes`), then, in each attempt of the commit loop: opens the latest version as a reader
would (VAL-05 to VAL-07, with the reader of `tessera_py`), gives the new fragments ids from its
`next_fragment_id`, writes one new segment and merges the newest segments while the newest
holds at least half as many fragments as the one before it (SEG-10; merged intermediates are
not stored, VER-14), and creates the next manifest with create-if-absent. "Already exists" is
VER-07: the writer's own object ends the loop, another writer's starts the next attempt on top
of the new latest version (appends rebase over any commit that keeps the schema, VER-08).
An append of zero rows writes a version with the base's segments and no new one (VER-14).

With `WriteOptions.fragment_tree` (off by default), a created dataset sets reader flag
FRAGMENT_TREE (VER-12) and appends index fragments with a fragment tree (`tree.py`); an append
to a version that has a tree always keeps it (TREE-08), and an append with the option to a
version that has a fragment log turns it into a tree.
"""

import hashlib
import os
import time
from dataclasses import dataclass

from tessera_py import model as M
from tessera_py import tree as T
from tessera_py.envelope import (BODY_LIMIT_MANIFEST, BODY_LIMIT_SEGMENT, BODY_LIMIT_TAG,
                                 MAGIC_MANIFEST, MAGIC_SEGMENT, MAGIC_TAG, check_envelope,
                                 envelope_crc)
from tessera_py.errors import NotSupportedHere, TesseraError, invalid
from tessera_py.reader import manifest_key, open_fragments, open_manifest, resolve
from tessera_py.store import U64_MAX, Store
from tessera_py.validate import LIM_META_BYTES, LIM_ROWS, check_manifest, valid_ref_name

from . import datafile
from .encode import manifest_body, seal, segment_body, stored_crc, tag_body
from .fsstore import FsStore
from .rows import check_row, column_stats, stored_bytes, usage, version_stats
from .tree import DEFAULT_NODE_BYTES, TreeBuilder

MAX_ATTEMPTS = 16  # VER-05
DEFAULT_FILE_BYTES = 64 << 20  # §1: data files of about 64 MiB


@dataclass
class WriteOptions:
    """Writer settings. A fixed `timestamp_ms` and `writer_id` give byte-stable output for
    tests (MAN-03 lets a caller fix the id); by default they are the clock and 16 random
    bytes per manifest attempted."""

    page_bytes: int = datafile.DEFAULT_PAGE_BYTES
    file_bytes: int = DEFAULT_FILE_BYTES
    timestamp_ms: int | None = None
    writer_id: bytes | None = None
    fragment_tree: bool = False  # index new datasets, and appends to logs, with a tree
    node_bytes: int = DEFAULT_NODE_BYTES  # a tree's target node body size (TREE-08)


def conflict(msg: str) -> TesseraError:
    return TesseraError("conflict", msg)


def content_key(prefix: str, suffix: str, data: bytes) -> str:
    """LAY-04: the first 16 bytes of the SHA-256 of the object, as 32 lowercase hex digits."""
    return f"{prefix}/{hashlib.sha256(data).hexdigest()[:32]}.{suffix}"


def split_rows(sizes, target: int, max_rows: int):
    """Row ranges `[start, end)` of at most `max_rows` rows each, closed before the row that
    would take a range past `target` bytes; every range holds at least one row."""
    out, start, acc = [], 0, 0
    for i, n in enumerate(sizes):
        if i > start and (acc + n > target or i - start == max_rows):
            out.append((start, i))
            start, acc = i, 0
        acc += n
    if start < len(sizes):
        out.append((start, len(sizes)))
    return out


def merge_segments(a: M.Segment, b: M.Segment) -> M.Segment:
    """SEG-10: `a`'s fragments that `b` does not remove, overlaid by `b`'s; every id either
    removes that the merged list does not list stays removed."""
    removed_b = set(b.removed)
    frags = {f.id: f for f in a.fragments if f.id not in removed_b}
    frags.update((f.id, f) for f in b.fragments)
    removed = sorted((set(a.removed) | removed_b) - frags.keys())
    return M.Segment([frags[k] for k in sorted(frags)], removed)


class Writer:
    """Writes to the dataset rooted at the local directory `root`."""

    def __init__(self, root: str, options: WriteOptions | None = None):
        self.fs = FsStore(root)
        self.store = Store(root)
        self.opts = options or WriteOptions()

    def _now(self) -> int:
        t = self.opts.timestamp_ms
        return int(time.time() * 1000) if t is None else t

    def _writer_id(self) -> bytes:
        return self.opts.writer_id if self.opts.writer_id is not None else os.urandom(16)

    def _upload(self, key: str, data: bytes):
        """VER-09: create-if-absent; an existing object under a content-addressed name is the
        same object when its size matches."""
        if not self.fs.create(key, data) and self.fs.size(key) != len(data):
            raise conflict(f"{key} exists with another size")

    def _create_manifest(self, m: M.Manifest) -> bool:
        """Creates the manifest; True if it is this writer's (VER-07), False if another
        writer won its key."""
        check_manifest(m, m.branch, m.version)  # what a reader checks first (VAL-06)
        obj = seal(MAGIC_MANIFEST, manifest_body(m))
        key = manifest_key(m.branch, m.version)
        if self.fs.create(key, obj):
            return True
        other = self.fs.get(key)
        if other is None:
            raise TesseraError("io", f"{key} exists but cannot be read")
        theirs = M.decode_manifest(check_envelope(other, MAGIC_MANIFEST, BODY_LIMIT_MANIFEST,
                                                  f"manifest {key}"))
        return theirs.writer_id == m.writer_id and envelope_crc(other) == stored_crc(obj)

    # --- create (VER-12) --------------------------------------------------------------------

    def create(self, schema: M.Schema, message: str = "") -> M.Manifest:
        """Writes version 1 of `main`; the schema is validated (MAN-04) before anything is
        written."""
        ids = [c.id for c in schema.columns]
        # VER-12, FLG-08: ENCODED_IMAGES exactly when the schema has an encoded column.
        flags = M.READER_FLAG_ENCODED_IMAGES if any(
            c.compression[0] == M.COMPRESSION_ENCODED for c in schema.columns) else 0
        if self.opts.fragment_tree:  # VER-12, FLG-09
            flags |= M.READER_FLAG_FRAGMENT_TREE
        m = M.Manifest(flags, 0, "main", 1, None, None, None, self._now(), message,
                       self._writer_id(), schema, max(ids) + 1 if ids else 0, 0, 0, [], [], [])
        try:
            check_manifest(m, "main", 1)
        except TesseraError as e:
            raise usage(f"the schema is not valid: {e.message}") from None
        if not self._create_manifest(m):
            raise conflict("the dataset already exists (branches/main/…1.tsm is another "
                           "writer's)")
        return m

    # --- append (VER-05, VER-06) ------------------------------------------------------------

    def _columns(self, schema: M.Schema, rows_by_name: dict) -> tuple:
        """The rows of every schema column, in ascending id order, checked; and the count."""
        names = {c.name for c in schema.columns}
        extra = sorted(set(rows_by_name) - names)
        if extra:
            raise usage(f"rows for columns the schema does not have: {extra}")
        cols = sorted(schema.columns, key=lambda c: c.id)
        for c in cols:
            if c.compression[0] not in (M.CODEC_NONE, M.CODEC_LZ4, M.CODEC_ZSTD,
                                        M.COMPRESSION_ENCODED):
                raise NotSupportedHere(f"column {c.name!r}: this writer does not write "
                                       f"compression {c.compression[0]}")
        missing = [c.name for c in cols if c.name not in rows_by_name]
        if missing:
            raise usage(f"no rows for columns {missing}")
        counts = {len(rows_by_name[c.name]) for c in cols}
        if len(counts) > 1:
            raise usage(f"columns have different numbers of rows: {sorted(counts)}")
        n = counts.pop() if counts else 0
        out = []
        for c in cols:
            rows = rows_by_name[c.name]
            for i, r in enumerate(rows):
                check_row(c, r, f"column {c.name!r} row {i}")
            out.append((c, rows))
        return out, n

    def _write_files(self, columns, n: int) -> list:
        """Writes the data files of `n` new rows: `(row_count, DataFileRef, stats)` each."""
        sizes = [0] * n
        for c, rows in columns:
            for i, r in enumerate(rows):
                sizes[i] += len(stored_bytes(c, r))
        out = []
        for start, end in split_rows(sizes, self.opts.file_bytes, LIM_ROWS):
            part = [(c, rows[start:end]) for c, rows in columns]
            data, footer_crc = datafile.build(part, end - start, self.opts.page_bytes)
            key = content_key("data", "tsd", data)
            self._upload(key, data)
            ref = M.DataFileRef(key, len(data), footer_crc, [c.id for c, _ in columns])
            out.append((end - start, ref, [column_stats(c, r) for c, r in part]))
        return out

    def _load_segment(self, ref: M.SegmentRef) -> M.Segment:
        obj = self.store.get(ref.path, 28 + BODY_LIMIT_SEGMENT)
        if obj is None or len(obj) != ref.size or envelope_crc(obj) != ref.crc32:
            raise invalid(f"segment {ref.path} is missing or does not match its reference")
        return M.decode_segment(check_envelope(obj, MAGIC_SEGMENT, BODY_LIMIT_SEGMENT,
                                               f"segment {ref.path}"))

    def _write_segment(self, seg: M.Segment) -> M.SegmentRef:
        obj = seal(MAGIC_SEGMENT, segment_body(seg))
        key = content_key("index", "tsi", obj)
        self._upload(key, obj)
        return M.SegmentRef(key, len(obj), stored_crc(obj), len(seg.fragments),
                            sum(f.row_count for f in seg.fragments))

    def _segments(self, base: M.Manifest, new: list) -> list:
        """SEG-09 and SEG-10: the base's segments, then one for `new`, merged in tiers."""
        if not new:
            return list(base.segments)
        entries = [(r, None) for r in base.segments] + [(None, M.Segment(new, []))]

        def count(e):
            return max(e[0].fragment_count if e[0] is not None else len(e[1].fragments), 1)

        def load(e):
            return e[1] if e[1] is not None else self._load_segment(e[0])

        while len(entries) >= 2 and count(entries[-1]) * 2 >= count(entries[-2]):
            merged = merge_segments(load(entries[-2]), load(entries[-1]))
            entries[-2:] = [(None, merged)]
        return [r if r is not None else self._write_segment(s) for r, s in entries]

    def _tree(self, base: M.Manifest, fragments: list, new: list) -> list:
        """TREE-08: the new version's `segments`, the root of its fragment tree. A tree base
        gets `new` appended along its rightmost path; a log base is turned into a tree of all
        its fragments. Every node is built before any is uploaded (TREE-09)."""
        if not new:
            return list(base.segments)
        b = TreeBuilder(base.schema, self.opts.node_bytes)
        if base.reader_flags & M.READER_FLAG_FRAGMENT_TREE:
            root = b.build(new, self._rightmost_path(base))
        else:
            root = b.build(fragments + new)
        for key, obj in b.objects.items():
            self._upload(key, obj)
        return [root] if root is not None else []

    def _rightmost_path(self, base: M.Manifest) -> list:
        """The base tree's nodes from its root to its last leaf, each checked as a reader
        checks it (VAL-20); empty for a tree without root."""
        node = T.open_root(self.store, base)
        path = [] if node is None else [node]
        while path and path[-1].level > 0:
            ref = path[-1].children[-1]
            path.append(T.open_child(self.store, base, path[-1], ref, f"node {ref.path}"))
        return path

    def append(self, rows_by_name: dict, message: str = "") -> int:
        """Appends rows (`{column name: [row, ...]}`, rows as in `rows.py`) to `main` as one
        commit; returns the version created."""
        if len(message.encode("utf-8")) > LIM_META_BYTES:  # LIM-04, refused before writing
            raise TesseraError("limit", f"a commit message of over {LIM_META_BYTES} bytes")
        base = open_manifest(self.store, "main")
        schema = base.schema
        columns, n = self._columns(schema, rows_by_name)
        files = self._write_files(columns, n)
        for _ in range(MAX_ATTEMPTS):
            if base.writer_flags:  # FLG-04
                raise TesseraError("unsupported", f"main@{base.version} sets writer_flags "
                                   f"{base.writer_flags:#x}, which this writer does not know")
            if base.schema != schema:  # VER-08
                raise conflict(f"main@{base.version} has another schema; the rows were "
                               f"written for main's schema before it")
            fragments = open_fragments(self.store, base)
            first = base.next_fragment_id
            new = [M.Fragment(first + i, rc, [ref], None, stats)
                   for i, (rc, ref, stats) in enumerate(files)]
            if first + len(new) > U64_MAX:
                raise TesseraError("limit", "fragment ids are exhausted")
            flags = base.reader_flags
            if flags & M.READER_FLAG_FRAGMENT_TREE or (self.opts.fragment_tree and new):
                flags |= M.READER_FLAG_FRAGMENT_TREE  # VER-06: kept, or added by TREE-08
                segments = self._tree(base, fragments, new)
            else:
                segments = self._segments(base, new)
            m = M.Manifest(
                flags, base.writer_flags, "main", base.version + 1,
                M.VersionRef("main", base.version), None, None, self._now(), message,
                self._writer_id(), schema, base.next_column_id, first + len(new),
                base.row_count + n, segments,
                version_stats(schema, fragments + new), list(base.metadata))
            if self._create_manifest(m):
                return m.version
            base = open_manifest(self.store, "main")  # VER-05 step 4: rebase on the latest
        raise conflict(f"no commit after {MAX_ATTEMPTS} attempts")

    # --- tags (REF-05) ----------------------------------------------------------------------

    def tag(self, name: str, version: int, message: str = "") -> M.Tag:
        """Creates tag `name` on version `version` of `main`."""
        if not valid_ref_name(name):
            raise usage(f"tag name {name!r} is not valid (LAY-07)")
        if not 1 <= version <= U64_MAX:
            raise usage(f"version {version} is not in 1..=2^64-1")
        m = resolve(self.store, "main", version)
        t = M.Tag(name, M.VersionRef(m.branch, version), m.envelope_crc, self._now(), message)
        body = tag_body(t)
        if len(body) > BODY_LIMIT_TAG:  # LIM-05 bounds the message (LIM-04, LIM-15)
            raise TesseraError("limit", f"tag {name!r}: a body of {len(body)} bytes is over "
                               f"{BODY_LIMIT_TAG}")
        obj = seal(MAGIC_TAG, body)
        key = f"tags/{name}.tst"
        if not self.fs.create(key, obj) and self.fs.get(key) != obj:
            raise conflict(f"tag {name!r} already exists")
        return t
