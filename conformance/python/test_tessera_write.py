#!/usr/bin/env python3
"""Unit tests for tessera_write, the Python writer: SPEC.md Appendix A reproduced byte for
byte, encode(decode(x)) == x, pages, codecs and CMP-02, segment merging (SEG-10), the commit
loop's rebase (VER-05, VER-07), create-if-absent and temporary files (VER-11), tags (REF-05),
and inputs a writer must refuse. Run with `python test_tessera_write.py`."""

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
from tessera_write.encode import footer_bytes, manifest_body, segment_body  # noqa: E402
from test_tessera_py import appendix_objects  # noqa: E402

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


if __name__ == "__main__":
    unittest.main()
