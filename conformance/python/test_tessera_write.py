#!/usr/bin/env python3
"""Unit tests for tessera_write, the Python writer: SPEC.md Appendix A reproduced byte for
byte, encode(decode(x)) == x, pages, codecs and CMP-02, segment merging (SEG-10), the commit
loop's rebase (VER-05, VER-07), create-if-absent and temporary files (VER-11), tags (REF-05),
inputs a writer must refuse, and fragment trees (TREE-08, TREE-09). Run with
`python test_tessera_write.py`."""

import os
import random
import struct
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from tessera_py import Store, TesseraError, dump, model as M, open_version  # noqa: E402
from tessera_py.envelope import (BODY_LIMIT_MANIFEST, BODY_LIMIT_SEGMENT,  # noqa: E402
                                 MAGIC_MANIFEST, MAGIC_SEGMENT, check_envelope)
from tessera_py.reader import open_fragments, open_manifest  # noqa: E402
from tessera_write import WriteOptions, Writer  # noqa: E402
from tessera_write import datafile as DF  # noqa: E402
from tessera_write.encode import (footer_bytes, index_node_body, manifest_body,  # noqa: E402
                                  segment_body)
from tessera_write.tree import pack  # noqa: E402
from tessera_py.envelope import MAGIC_NODE  # noqa: E402
from test_tessera_py import appendix_objects, enc_str, seal  # noqa: E402

GENERIC = M.Kind(0, {})
NONE = (M.CODEC_NONE, None)


def col(cid, name, dtype, shape=(), nullable=False, compression=NONE, kind=GENERIC):
    return M.Column(cid, name, dtype, list(shape), kind, compression, nullable, [])


def scalar_rows(dtype_fmt, values):
    return [None if v is None else ((), struct.pack("<" + dtype_fmt, v)) for v in values]


def text_rows(values):
    return [None if v is None else ((len(v.encode()),), v.encode()) for v in values]


def all_files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, fs in os.walk(root) for f in fs)


class AppendixTests(unittest.TestCase):
    def test_reproduces_appendix_a(self):
        want = appendix_objects()
        schema = M.Schema([col(0, "id", 7), col(1, "name", M.DT_UTF8)], [])
        opts = WriteOptions(timestamp_ms=1767225600000, writer_id=b"tessera-vectors!")
        with tempfile.TemporaryDirectory() as root:
            w = Writer(root, opts)
            w.create(schema, "create")
            w.append({"id": scalar_rows("i", [7, -1]), "name": text_rows(["cat", "dog!"])},
                     "two rows")
            self.assertEqual(all_files(root), sorted(want))
            for key, data in want.items():
                with open(os.path.join(root, key), "rb") as f:
                    self.assertEqual(f.read().hex(), data.hex(), key)

    def test_encode_of_decode_is_identity(self):
        for key, data in appendix_objects().items():
            if key.endswith(".tsm"):
                body = check_envelope(data, MAGIC_MANIFEST, BODY_LIMIT_MANIFEST, key)
                self.assertEqual(manifest_body(M.decode_manifest(body)), bytes(body), key)
            elif key.endswith(".tsi"):
                body = check_envelope(data, MAGIC_SEGMENT, BODY_LIMIT_SEGMENT, key)
                self.assertEqual(segment_body(M.decode_segment(body)), bytes(body), key)
            else:
                n = struct.unpack_from("<Q", data, len(data) - 24)[0]
                start, end = len(data) - 24 - n, len(data) - 24
                self.assertEqual(footer_bytes(M.decode_footer(data, start, end)),
                                 data[start:end], key)


class DataFileTests(unittest.TestCase):
    def test_pages_close_before_crossing_the_target(self):
        self.assertEqual(DF.split_pages([4, 4, 4, 4, 4], 8), [(0, 2), (2, 4), (4, 5)])
        self.assertEqual(DF.split_pages([20, 1, 1], 8), [(0, 1), (1, 3)])  # one large row
        self.assertEqual(DF.split_pages([0, 0, 0], 8), [(0, 3)])
        self.assertEqual(DF.split_pages([], 8), [])

    def test_cmp02_incompressible_pages_are_stored_as_none(self):
        rng = random.Random(3)
        noise = bytes(rng.randrange(256) for _ in range(4096))
        for comp in ((M.CODEC_LZ4, None), (M.CODEC_ZSTD, 19)):
            self.assertEqual(DF.compress(noise, comp)[0], M.CODEC_NONE)
            codec, stored = DF.compress(b"\x00" * 4096, comp)
            self.assertEqual(codec, comp[0])
            self.assertLess(len(stored), 4096)

    def test_zstd_frames_record_the_content_size(self):
        codec, stored = DF.compress(b"ab" * 5000, (M.CODEC_ZSTD, 3))
        self.assertEqual(codec, M.CODEC_ZSTD)
        self.assertEqual(stored[:4], b"\x28\xb5\x2f\xfd")
        self.assertTrue(stored[4] >> 6 or stored[4] >> 5 & 1)  # a Frame_Content_Size field


class CommitTests(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.root = self._tmp.name
        self.schema = M.Schema([col(0, "x", 4, nullable=True, compression=(M.CODEC_LZ4, None)),
                                col(1, "v", 11, shape=[None, 2],
                                    compression=(M.CODEC_ZSTD, 3))], [])

    def tearDown(self):
        self._tmp.cleanup()

    def rows(self, n, seed):
        rng = random.Random(seed)
        xs = [None if rng.random() < 0.3 else rng.randrange(1 << 64) for _ in range(n)]
        vs = []
        for _ in range(n):
            k = rng.randrange(4)
            vs.append(((k, 2), bytes(rng.randrange(256) for _ in range(8 * k))))
        return {"x": scalar_rows("Q", xs), "v": vs}

    def test_appends_read_back_and_segments_merge_in_tiers(self):
        w = Writer(self.root, WriteOptions(page_bytes=32, file_bytes=10**9))
        w.create(self.schema)
        written, tiers = [], []
        st = Store(self.root)
        for k in range(5):
            r = self.rows(3 + k, k)
            written.append(r)
            w.append(r, f"commit {k}")
            tiers.append([s.fragment_count for s in open_manifest(st).segments])
        m = open_manifest(st)
        self.assertEqual(m.version, 6)
        # one fragment per append; SEG-10 merges the newest two while the newest holds at
        # least half as many fragments as the one before: [1,1] -> [2]; [2,1] -> [3];
        # [3,1] stays; [3,1,1] -> [3,2] -> [5]
        self.assertEqual(tiers, [[1], [2], [3], [3, 1], [5]])
        d = dump(st, open_version(st))
        xs = [r for c in written for r in c["x"]]
        self.assertEqual(len(d["columns"]["x"]["rows"]), len(xs))
        for got, want in zip(d["columns"]["x"]["rows"], xs):
            self.assertEqual(got, None if want is None else
                             {"shape": [], "values": [str(struct.unpack("<Q", want[1])[0])]})
        # manifest statistics: the sums, least and greatest of the fragments' (STAT-06)
        frags = open_fragments(st, m)
        nulls = sum(1 for r in xs if r is None)
        live = [struct.unpack("<Q", r[1])[0] for r in xs if r is not None]
        self.assertEqual(m.stats[0], (0, nulls, ("uint", min(live)), ("uint", max(live))))
        self.assertEqual(m.stats[1], (1, 0, None, None))  # rank 1: null_count only (STAT-01)
        self.assertEqual(len(frags), 5)
        self.assertFalse([f for f in all_files(self.root) if ".tmp" in f])  # VER-11

    def test_zero_row_append_writes_a_version_without_a_segment(self):
        w = Writer(self.root)
        w.create(self.schema)
        w.append(self.rows(2, 1))
        w.append({"x": [], "v": []}, "nothing")
        st = Store(self.root)
        m2, m3 = open_manifest(st, version=2), open_manifest(st, version=3)
        self.assertEqual(m3.segments, m2.segments)
        self.assertEqual((m3.row_count, m3.next_fragment_id), (2, 1))

    def test_a_lost_race_rebases_on_the_new_latest(self):
        """VER-05 step 4: another writer takes version 2 between this writer's base and its
        manifest; the append lands as version 3 with the next fragment id."""
        w = Writer(self.root)
        w.create(self.schema)
        other = Writer(self.root)
        real = w._create_manifest
        raced = []

        def racing(m):
            if not raced:
                raced.append(True)
                other.append(self.rows(4, 9), "the other writer")
            return real(m)

        w._create_manifest = racing
        self.assertEqual(w.append(self.rows(2, 2), "mine"), 3)
        st = Store(self.root)
        m = open_manifest(st)
        self.assertEqual((m.version, m.row_count, m.next_fragment_id), (3, 6, 2))
        self.assertEqual([f.id for f in open_fragments(st, m)], [0, 1])
        self.assertEqual(open_manifest(st, version=2).message, "the other writer")

    def test_retry_of_the_same_manifest_is_its_own(self):
        """VER-07: the same writer_id and envelope CRC at the key is this writer's object."""
        w = Writer(self.root, WriteOptions(timestamp_ms=1, writer_id=b"0123456789abcdef"))
        m = w.create(self.schema)
        self.assertTrue(w._create_manifest(m))
        other = Writer(self.root, WriteOptions(timestamp_ms=1, writer_id=b"fedcba9876543210"))
        with self.assertRaises(TesseraError) as cm:
            other.create(self.schema)
        self.assertEqual(cm.exception.cls, "conflict")

    def test_no_link_means_no_create_if_absent(self):
        """VER-04: a file system without link(2) cannot commit: `unsupported`, and no
        temporary file is left (VER-11)."""
        import errno
        from unittest import mock
        with mock.patch("os.link", side_effect=OSError(errno.EPERM, "not permitted")):
            with self.assertRaises(TesseraError) as cm:
                Writer(self.root).create(self.schema)
        self.assertEqual(cm.exception.cls, "unsupported")
        self.assertEqual(all_files(self.root), [])

    def test_tags(self):
        w = Writer(self.root, WriteOptions(timestamp_ms=5))
        w.create(self.schema)
        w.append(self.rows(2, 1))
        w.tag("first", 1, "created")
        w.tag("first", 1, "created")  # the same bytes: an earlier attempt landed (REF-05)
        with self.assertRaises(TesseraError) as cm:
            w.tag("first", 2)
        self.assertEqual(cm.exception.cls, "conflict")
        st = Store(self.root)
        self.assertEqual(open_version(st, tag="first").manifest.version, 1)
        for bad in ("", ".hidden", "a/b", "x" * 65):
            with self.assertRaises(TesseraError) as cm:
                w.tag(bad, 1)
            self.assertEqual(cm.exception.cls, "usage", bad)

    def test_refused_inputs_write_nothing(self):
        bad_schema = M.Schema([col(0, "a", 1), col(1, "a", 2)], [])
        with self.assertRaises(TesseraError) as cm:
            Writer(self.root).create(bad_schema)
        self.assertEqual(cm.exception.cls, "usage")
        self.assertEqual(all_files(self.root), [])
        w = Writer(self.root)
        w.create(self.schema)
        before = all_files(self.root)
        for rows in ({"x": [None], "v": [None]},                          # v is not nullable
                     {"x": [None], "v": [((1, 3), bytes(12))]},           # fixed dim is 2
                     {"x": [None], "v": [((1, 2), bytes(7))]},            # byte length
                     {"x": [None, None], "v": [((0, 2), b"")]},           # row counts differ
                     {"x": [None]}):                                      # a missing column
            with self.assertRaises(TesseraError, msg=rows) as cm:
                w.append(rows)
            self.assertEqual(cm.exception.cls, "usage")
        with self.assertRaises(TesseraError) as cm:  # LIM-04 / LIM-15
            w.append(self.rows(1, 1), "m" * 65537)
        self.assertEqual(cm.exception.cls, "limit")
        self.assertEqual(all_files(self.root), before)


class TreeTests(unittest.TestCase):
    """A fragment tree written with `WriteOptions.fragment_tree` (TREE-08, TREE-09)."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.root = self._tmp.name
        self.schema = M.Schema([col(0, "x", 4), col(1, "s", M.DT_UTF8, nullable=True)], [])

    def tearDown(self):
        self._tmp.cleanup()

    def rows(self, start, n):
        return {"x": scalar_rows("Q", range(start, start + n)),
                "s": text_rows([None if i % 3 == 0 else f"r{i}" for i in range(start, start + n)])}

    def nodes(self, m):
        """{key: IndexNode} of every node the version's tree reaches, read raw."""
        out, todo = {}, [m.segments[0].path] if m.segments else []
        while todo:
            key = todo.pop()
            with open(os.path.join(self.root, key), "rb") as f:
                obj = f.read()
            out[key] = n = M.decode_index_node(check_envelope(obj, MAGIC_NODE, BODY_LIMIT_SEGMENT, key))
            todo += [c.path for c in n.children]
        return out

    def test_pack(self):
        self.assertEqual(pack([100] * 5, 20 + 200, False), [(0, 2), (2, 4), (4, 5)])
        # inner nodes: two children at least, the last one too (taken from its neighbour)
        self.assertEqual(pack([300] * 5, 20 + 200, True), [(0, 2), (2, 5)])
        self.assertEqual(pack([100] * 7, 20 + 300, True), [(0, 3), (3, 5), (5, 7)])
        self.assertEqual(pack([100], 10, True), [(0, 1)])

    def test_multi_level_tree_reads_back(self):
        w = Writer(self.root, WriteOptions(fragment_tree=True, node_bytes=400, file_bytes=40))
        m1 = w.create(self.schema)
        self.assertEqual(m1.reader_flags, M.READER_FLAG_FRAGMENT_TREE)  # VER-12
        st = Store(self.root)
        total, prev_nodes = 0, {}
        for k in range(8):
            n = 3 + k
            w.append(self.rows(total, n), f"commit {k}")
            total += n
            m = open_manifest(st)
            self.assertEqual(m.reader_flags, M.READER_FLAG_FRAGMENT_TREE)
            self.assertEqual(len(m.segments), 1)
            nodes = self.nodes(m)
            for key, node in nodes.items():
                self.assertRegex(key, r"^index/[0-9a-f]{32}\.tsn$")  # TREE-01, LAY-04
                self.assertLessEqual(node.level, 15)
                if node.level > 0:  # TREE-09: two children at least while more remain
                    self.assertGreaterEqual(len(node.children), 2, key)
                # split at the target, unless one fragment or the two or three children an
                # inner node needs are over it
                self.assertTrue(len(index_node_body(node)) <= 400 or len(node.fragments) == 1
                                or 2 <= len(node.children) <= 3, key)
            # copy-on-write: a commit writes O(depth) nodes and reuses the others (TREE-08)
            root_level = nodes[m.segments[0].path].level
            fresh = set(nodes) - set(prev_nodes)
            if prev_nodes:
                self.assertLessEqual(len(fresh), 3 * (root_level + 1))
            prev_nodes = nodes
        self.assertGreaterEqual(root_level, 2)  # root, inner nodes, leaves: a multi-level tree
        self.assertGreater(len(open_fragments(st, m)), 16)
        d = dump(st, open_version(st))
        self.assertEqual(d["row_count"], total)
        self.assertEqual([r["values"] for r in d["columns"]["x"]["rows"]],
                         [[str(i)] for i in range(total)])
        self.assertEqual(d["columns"]["s"]["rows"],
                         [None if i % 3 == 0 else {"shape": [len(f"r{i}")], "values": f"r{i}"}
                          for i in range(total)])
        # every earlier version still reads (nodes are immutable and shared)
        for v in range(2, m.version):
            open_version(st, version=v)

    def test_a_view_reads_only_the_nodes_of_its_rows(self):
        """VAL-19, TREE-07: a view over a written tree reads its rows with a leaf that holds
        none of them absent; reading the whole version reports the absent leaf."""
        import hashlib
        from tessera_py.view import MAGIC_VIEW, dump_view, open_view
        w = Writer(self.root, WriteOptions(fragment_tree=True, node_bytes=400, file_bytes=40))
        w.create(self.schema)
        w.append(self.rows(0, 60))
        st = Store(self.root)
        m = open_manifest(st)
        with open(os.path.join(self.root, "branches", "main", f"{m.version:020d}.tsm"), "rb") as f:
            man = f.read()
        rows = [50, 3, 0, 59, 20]
        body = (enc_str("v") + enc_str("main") + struct.pack("<Q", m.version) +
                hashlib.sha256(man).digest() + struct.pack("<Q", 0) + enc_str("q") +
                hashlib.sha256(struct.pack(f"<{len(rows)}Q", *rows)).digest() +
                struct.pack(f"<Q{len(rows)}Q", len(rows), *rows))
        os.makedirs(os.path.join(self.root, "views"))
        with open(os.path.join(self.root, "views", "v.tsview"), "wb") as f:
            f.write(seal(MAGIC_VIEW, body))
        first, spans = 0, {}
        for fr in open_fragments(st, m):
            spans[fr.id] = (first, first + fr.row_count)
            first += fr.row_count
        idle = [k for k, n in self.nodes(m).items() if n.level == 0 and not any(
            spans[fr.id][0] <= r < spans[fr.id][1] for fr in n.fragments for r in rows)]
        os.remove(os.path.join(self.root, idle[len(idle) // 2]))
        d = dump_view(st, *open_view(st, "v"))
        self.assertEqual([r["values"] for r in d["columns"]["x"]["rows"]],
                         [[str(r)] for r in rows])
        with self.assertRaises(TesseraError) as cm:
            open_version(st)
        self.assertEqual(cm.exception.cls, "invalid")

    def test_a_log_is_turned_into_a_tree_and_stays_one(self):
        Writer(self.root).create(self.schema)
        Writer(self.root).append(self.rows(0, 4))
        st = Store(self.root)
        self.assertEqual((open_manifest(st).reader_flags, len(open_manifest(st).segments)), (0, 1))
        Writer(self.root, WriteOptions(fragment_tree=True, node_bytes=300, file_bytes=30)).append(
            self.rows(4, 6))
        Writer(self.root).append(self.rows(10, 2))  # without the option: TREE-08 keeps the tree
        for v, rows in ((3, 10), (4, 12)):
            m = open_manifest(st, version=v)
            self.assertEqual(m.reader_flags, M.READER_FLAG_FRAGMENT_TREE)
            self.assertTrue(m.segments[0].path.endswith(".tsn"))
            d = dump(st, open_version(st, version=v))
            self.assertEqual([r["values"] for r in d["columns"]["x"]["rows"]],
                             [[str(i)] for i in range(rows)])

    def test_append_to_a_reference_tree_drops_a_root_with_one_child(self):
        """v-tree-0005 (written by the reference): a level-3 root with one child. An append
        rewrites the rightmost path, drops that root (TREE-08) and reuses the other nodes."""
        import shutil
        case = os.path.join(os.path.dirname(os.path.dirname(HERE)), "fixtures", "cases", "valid",
                            "tree", "v-tree-0005-root-with-one-child", "input")
        shutil.copytree(case, self.root, dirs_exist_ok=True)
        st = Store(self.root)
        before = open_manifest(st)
        old = self.nodes(before)
        old_root = old[before.segments[0].path]
        self.assertEqual((old_root.level, len(old_root.children)), (3, 1))
        Writer(self.root).append({"id": scalar_rows("q", [80, 81])})
        m = open_manifest(st)
        nodes = self.nodes(m)
        root = nodes[m.segments[0].path]
        self.assertEqual((root.level, len(root.children)), (2, 2))
        self.assertIn(root.children[0].path, old)  # the left subtree is reused by reference
        d = dump(st, open_version(st))
        self.assertEqual([r["values"][0] for r in d["columns"]["id"]["rows"]],
                         ["0", "1", "10", "20", "21", "30", "31", "40", "41", "50", "51", "60",
                          "61", "70", "71", "80", "81"])


if __name__ == "__main__":
    unittest.main()
