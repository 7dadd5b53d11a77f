#!/usr/bin/env python3
"""Unit tests for tessera_py: the LZ4 block decoder, the §6 encoding primitives, the
envelope, and the test vectors of SPEC.md Appendix A. Run with
`python test_tessera_py.py` or `python -m unittest test_tessera_py`."""

import hashlib
import math
import os
import random
import re
import struct
import sys
import tempfile
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
SPEC = os.path.join(os.path.dirname(os.path.dirname(HERE)), "SPEC.md")

from tessera_py import Store, TesseraError, dump, lz4, model as M, open_version  # noqa: E402
from tessera_py import zstd_codec  # noqa: E402
from tessera_py.bincode import Decoder  # noqa: E402
from tessera_py import tree as T  # noqa: E402
from tessera_py.envelope import (MAGIC_MANIFEST, MAGIC_NODE, MAGIC_SEGMENT,  # noqa: E402
                                 check_envelope, crc32, envelope_crc)
from tessera_py.reader import fragments_holding, open_for_rows, open_manifest  # noqa: E402
from tessera_py.validate import check_path  # noqa: E402


def seq(literals: bytes, offset=None, match_len=None, token_lit=None) -> bytes:
    """Encodes one LZ4 sequence (for tests; no end-of-block rules)."""
    lit = len(literals)
    out = bytearray()
    ml = None if match_len is None else match_len - 4
    tok = (min(lit, 15) << 4) | (0 if ml is None else min(ml, 15))
    out.append(tok)
    if lit >= 15:
        r = lit - 15
        while r >= 255:
            out.append(255)
            r -= 255
        out.append(r)
    out += literals
    if offset is not None:
        out += struct.pack("<H", offset)
        if ml >= 15:
            r = ml - 15
            while r >= 255:
                out.append(255)
                r -= 255
            out.append(r)
    return bytes(out)



def write_objects(root, objs):
    """Writes `{key: bytes}` under `root` and returns the store over it."""
    for key, data in objs.items():
        path = os.path.join(root, *key.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return Store(root)

class Lz4Tests(unittest.TestCase):
    def test_literals_only(self):
        self.assertEqual(lz4.decompress(seq(b"hello"), 5), b"hello")

    def test_empty(self):
        self.assertEqual(lz4.decompress(b"", 0), b"")
        self.assertEqual(lz4.decompress(b"\x00", 0), b"")
        with self.assertRaises(lz4.Lz4Error):
            lz4.decompress(b"", 1)

    def test_match_and_overlap(self):
        # "abc" then a 10-byte match at offset 3 -> "abcabcabcabca", then final literals.
        src = seq(b"abc", 3, 10) + seq(b"XYZ12")
        self.assertEqual(lz4.decompress(src, 18), b"abcabcabcabca" + b"XYZ12")
        # run-length: offset 1
        src = seq(b"z", 1, 295) + seq(b"zzzzz")
        self.assertEqual(lz4.decompress(src, 301), b"z" * 301)

    def test_end_of_block_rules(self):
        # DF-27: a match starts >= 12 bytes before the end and ends >= 5 bytes before it.
        self.assertEqual(lz4.decompress(seq(b"a", 1, 7) + seq(b"bbbbb"), 13), b"a" * 8 + b"bbbbb")
        with self.assertRaises(lz4.Lz4Error):  # ends 4 bytes before the end
            lz4.decompress(seq(b"a", 1, 8) + seq(b"bbbb"), 13)
        with self.assertRaises(lz4.Lz4Error):  # starts 11 bytes before the end
            lz4.decompress(seq(b"aa", 1, 4) + seq(b"bbbbbbb"), 13)
        with self.assertRaises(lz4.Lz4Error):  # run-length match up to the very end
            lz4.decompress(seq(b"z", 1, 300) + seq(b""), 301)

    def test_long_lengths(self):
        lit = bytes(range(256)) * 2  # 512 literals: 15 + 255 + 242
        src = seq(lit, 512, 19 + 255 + 4) + seq(b"end!!")
        out = lz4.decompress(src, 512 + 278 + 5)
        self.assertEqual(out[:512], lit)
        self.assertEqual(out[512:790], lit[:278])

    def test_bad_offsets(self):
        with self.assertRaises(lz4.Lz4Error):
            lz4.decompress(seq(b"ab", 0, 4) + seq(b"x"), 7)
        with self.assertRaises(lz4.Lz4Error):
            lz4.decompress(seq(b"ab", 3, 4) + seq(b"x"), 7)
        with self.assertRaises(lz4.Lz4Error):
            lz4.decompress(seq(b"a", 65535, 4) + seq(b"x"), 6)

    def test_length_mismatch(self):
        with self.assertRaises(lz4.Lz4Error):  # short
            lz4.decompress(seq(b"hello"), 6)
        with self.assertRaises(lz4.Lz4Error):  # long: stops at raw_len
            lz4.decompress(seq(b"hello"), 4)
        with self.assertRaises(lz4.Lz4Error):  # a match past raw_len
            lz4.decompress(seq(b"ab", 2, 100) + seq(b""), 50)

    def test_truncated(self):
        full = seq(b"abc", 3, 300) + seq(b"tail")
        for cut in range(1, len(full)):
            try:
                out = lz4.decompress(full[:cut], 307)
            except lz4.Lz4Error:
                continue
            self.fail(f"cut at {cut} decoded to {len(out)} bytes")

    def test_ends_after_match(self):
        with self.assertRaises(lz4.Lz4Error):
            lz4.decompress(seq(b"abc", 3, 4), 7)

    def test_trailing_input(self):
        # DF-27: decoding consumes exactly stored_len bytes; liblz4 refuses leftovers.
        src = seq(b"abc", 3, 10) + seq(b"XYZ12")
        for extra in (b"\x00", b"\x10z", seq(b"more!")):
            with self.assertRaises(lz4.Lz4Error):
                lz4.decompress(src + extra, 18)

    def test_compress_roundtrip(self):
        # liblz4's compressor keeps the end-of-block rules its decoder checks (DF-27).
        rng = random.Random(2)
        for n in (1, 5, 12, 13, 64, 1000, 70000):
            raw = bytes(rng.choice(b"ab") for _ in range(n))
            self.assertEqual(lz4.decompress(lz4.compress(raw), n), raw)

    def test_random_inputs_fail_cleanly(self):
        rng = random.Random(1)
        for _ in range(3000):
            src = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
            raw_len = rng.randrange(200)
            try:
                out = lz4.decompress(src, raw_len)
            except lz4.Lz4Error:
                continue
            self.assertEqual(len(out), raw_len)


class ZstdTests(unittest.TestCase):
    @unittest.skipUnless(zstd_codec.available(), "zstandard not installed")
    def test_roundtrip_and_faults(self):
        import zstandard
        data = b"tessera " * 1000
        frame = zstandard.ZstdCompressor(level=3, write_checksum=True).compress(data)
        self.assertEqual(zstd_codec.decompress(frame, len(data)), data)
        for bad in (frame + b"\0", frame[:-1], b"\0" + frame[1:],
                    frame + zstandard.ZstdCompressor().compress(b"")):
            with self.assertRaises(zstd_codec.ZstdError):
                zstd_codec.decompress(bad, len(data))
        with self.assertRaises(zstd_codec.ZstdError):  # content size
            zstd_codec.decompress(frame, len(data) - 1)
        corrupt = bytearray(frame)
        corrupt[-1] ^= 1  # content checksum
        with self.assertRaises(zstd_codec.ZstdError):
            zstd_codec.decompress(bytes(corrupt), len(data))
        # no content size in the header: the output length still decides
        nofcs = zstandard.ZstdCompressor(write_content_size=False).compress(data)
        self.assertEqual(zstd_codec.decompress(nofcs, len(data)), data)
        with self.assertRaises(zstd_codec.ZstdError):
            zstd_codec.decompress(nofcs, len(data) - 1)
        with self.assertRaises(zstd_codec.ZstdError):
            zstd_codec.decompress(nofcs, len(data) + 1)


class EncodingTests(unittest.TestCase):
    def test_crc(self):
        self.assertEqual(crc32(b"123456789"), 0xCBF43926)  # GEN-06 check value
        self.assertEqual(crc32(b"abc" + struct.pack("<I", crc32(b"abc"))), 0x2144DF1C)

    def test_primitives(self):
        d = Decoder(bytes.fromhex("01") + struct.pack("<HIQiq", 2, 3, 4, -5, -6))
        self.assertEqual((d.boolean(), d.u16(), d.u32(), d.u64(), d.i32(), d.i64()),
                         (True, 2, 3, 4, -5, -6))
        d.finish()

    def assertMalformed(self, fn):
        with self.assertRaises(TesseraError) as cm:
            fn()
        self.assertEqual(cm.exception.cls, "malformed")

    def test_faults(self):
        self.assertMalformed(lambda: Decoder(b"\x02").boolean())
        self.assertMalformed(lambda: Decoder(b"\x02").option(lambda d: d.u8()))
        self.assertMalformed(lambda: Decoder(b"\x01\x00\x00").u32())
        self.assertMalformed(lambda: Decoder(struct.pack("<I", 3)).variant(3))
        self.assertMalformed(lambda: Decoder(struct.pack("<Q", 1) + b"\xff").string())
        self.assertMalformed(lambda: Decoder(struct.pack("<Q", 2) + b"a").string())
        # ENC-04: a huge count fails before anything is allocated
        self.assertMalformed(lambda: Decoder(struct.pack("<Q", 1 << 62) + b"ab").string())
        self.assertMalformed(lambda: Decoder(struct.pack("<Q", 1 << 60) + b"ab").vec(
            lambda d: d.u8()))
        self.assertMalformed(lambda: Decoder(struct.pack("<Q", 3) + b"\0" * 8).vec_u64())
        d = Decoder(b"\x00\x00")
        d.u8()
        self.assertMalformed(d.finish)

    def test_spec_examples(self):
        # §6 example: the 76-byte Column
        col = bytes.fromhex(
            "00000000" "0500000000000000" "6c6162656c" "08000000" "0000000000000000"
            "07000000" "0200000000000000" "0300000000000000" "636174"
            "0300000000000000" "646f67" "00000000" "00" "0000000000000000")
        self.assertEqual(len(col), 76)
        d = Decoder(col)
        c = M._column(d)
        d.finish()
        self.assertEqual((c.id, c.name, M.dtype_name(c.dtype), c.shape, c.kind.type,
                          c.kind.params, c.compression, c.nullable, c.metadata),
                         (0, "label", "i64", [], 7, {"names": ["cat", "dog"]}, (0, None),
                          False, []))
        d = Decoder(bytes.fromhex("0200000000000000" "00000000" "2000000000000000"
                                  "01000000"))
        self.assertEqual(d.vec(M._dim), [32, None])
        d.finish()
        self.assertEqual(M._compression(Decoder(bytes.fromhex("0200000003000000"))), (2, 3))
        self.assertEqual(Decoder(bytes.fromhex("010500000000000000")).option(
            lambda d: d.u64()), 5)

    def test_envelope(self):
        body = b"\0" * 8
        head = MAGIC_MANIFEST + struct.pack("<HHIQ", 1, 7, 0, len(body)) + body
        obj = head + struct.pack("<I", zlib.crc32(head))
        self.assertEqual(bytes(check_envelope(obj, MAGIC_MANIFEST, 100, "t")), body)
        self.assertEqual(envelope_crc(obj), zlib.crc32(head))
        self.assertEqual(envelope_crc(obj[:27]), 0)
        with self.assertRaises(TesseraError) as cm:
            check_envelope(obj, MAGIC_MANIFEST, 7, "t")
        self.assertEqual(cm.exception.cls, "limit")

    def test_paths(self):
        check_path("data/abc.tsd", "p")
        check_path("a/b/c/d/e/f/g/h", "p")
        for bad, cls in (("a/b/c/d/e/f/g/h/i", "limit"), ("a" * 1025, "limit"),
                         ("", "invalid"), ("a//b", "invalid"), ("./a", "invalid"),
                         ("a/..", "invalid"), ("C:/x", "invalid"), ("a\\b", "invalid"),
                         ("/a", "invalid"), ("a/", "invalid"), ("dätä", "invalid")):
            with self.assertRaises(TesseraError, msg=bad) as cm:
                check_path(bad, "p")
            self.assertEqual(cm.exception.cls, cls, bad)


def appendix_objects() -> dict:
    """Rebuilds the objects of SPEC.md Appendix A from their hex listings."""
    with open(SPEC, encoding="utf-8") as f:
        text = f.read()
    text = text[text.index("## Appendix A."):text.index("## Open issues")]
    objs = {}
    for m in re.finditer(r"### A\.\d+ `([^`]+)` \((\d+) bytes\)\n```text\n(.*?)```", text, re.S):
        key, size, listing = m.group(1), int(m.group(2)), m.group(3)
        data = bytearray()
        for line in listing.splitlines():
            lm = re.match(r"\s*(\d+)  ((?:[0-9A-F]{2} )*[0-9A-F]{2})(?:  |\s*$)", line)
            if not lm:
                continue
            assert int(lm.group(1)) == len(data), (key, line)
            data += bytes.fromhex(lm.group(2))
        assert len(data) == size, (key, len(data), size)
        objs[key] = bytes(data)
    return objs


class AppendixTests(unittest.TestCase):
    def test_vectors(self):
        objs = appendix_objects()
        self.assertEqual(len(objs), 4)
        for key, data in objs.items():
            if not key.startswith("branches/"):  # LAY-04 content-addressed names
                self.assertIn(hashlib.sha256(data).hexdigest()[:32], key)
        with tempfile.TemporaryDirectory() as root:
            for key, data in objs.items():
                path = os.path.join(root, *key.split("/"))
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)
            st = Store(root)
            d = dump(st, open_version(st))
            self.assertEqual(d["version"], 2)
            self.assertEqual(d["row_count"], 2)
            self.assertEqual([r["values"] for r in d["columns"]["id"]["rows"]],
                             [["7"], ["-1"]])
            self.assertEqual([r["values"] for r in d["columns"]["name"]["rows"]],
                             ["cat", "dog!"])
            d1 = dump(st, open_version(st, version=1))
            self.assertEqual((d1["row_count"], d1["columns"]["id"].get("rows")), (0, []))
            # DUMP-06 digest of the id column, computed by hand
            h = hashlib.sha256(b"\x01" + struct.pack("<i", 7) + b"\x01" +
                               struct.pack("<i", -1)).hexdigest()
            self.assertEqual(d["columns"]["id"]["sha256"], h)


def seal(magic: bytes, body: bytes) -> bytes:
    head = magic + struct.pack("<HHIQ", 1, 0, 0, len(body)) + body
    return head + struct.pack("<I", zlib.crc32(head))


def enc_str(x: str) -> bytes:
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


class DeletionTests(unittest.TestCase):
    """Appendix A's dataset with row 0 deleted by a deletion vector (no fixture has one)."""

    SEG = "index/a8eb32fae9ff18711acc2c13bbbc71f7.tsi"
    MAN2 = "branches/main/00000000000000000002.tsm"

    def build(self, root, rows=(0,), dv_fragment=0, deleted_count=1, write_dv=True,
              dv_path="deletions/dv.tsx"):
        objs = appendix_objects()
        dv = seal(b"\x89TSX\r\n\x1a\n", struct.pack("<Q", dv_fragment) +
                  struct.pack(f"<Q{len(rows)}Q", len(rows), *rows))
        seg = objs[self.SEG]
        body = bytearray(seg[24:-4])
        assert body[133 - 24] == 0  # fragments[0].deletion: None
        dref = (b"\x01" + enc_str(dv_path) + struct.pack("<QIQ", len(dv), envelope_crc(dv),
                                                          deleted_count))
        body[133 - 24:133 - 24 + 1] = dref
        seg2 = seal(b"\x89TSI\r\n\x1a\n", bytes(body))
        man = bytearray(objs[self.MAN2][24:-4])
        struct.pack_into("<Q", man, 239 - 24, 2 - deleted_count)  # row_count
        struct.pack_into("<QI", man, 305 - 24, len(seg2), envelope_crc(seg2))
        objs[self.SEG] = seg2
        objs[self.MAN2] = seal(MAGIC_MANIFEST, bytes(man))
        if write_dv:
            objs[dv_path] = dv
        return write_objects(root, objs)

    def test_deleted_row_is_skipped(self):
        with tempfile.TemporaryDirectory() as root:
            st = self.build(root)
            d = dump(st, open_version(st))
            self.assertEqual(d["row_count"], 1)
            self.assertEqual(d["columns"]["id"]["rows"], [{"shape": [], "values": ["-1"]}])
            self.assertEqual(d["columns"]["name"]["rows"], [{"shape": [4], "values": "dog!"}])

    def test_faults(self):
        for kw, cls in (({"deleted_count": 0}, "invalid"),
                        ({"dv_fragment": 1}, "invalid"),
                        ({"rows": (2,)}, "invalid"),
                        ({"rows": (0, 1), "deleted_count": 1}, "invalid"),
                        ({"write_dv": False}, "invalid"),
                        ({"dv_path": "deletions/../x.tsx"}, "invalid")):
            with tempfile.TemporaryDirectory() as root:
                st = self.build(root, **kw)
                with self.assertRaises(TesseraError, msg=str(kw)) as cm:
                    dump(st, open_version(st))
                self.assertEqual(cm.exception.cls, cls, kw)


def _node_ref(path, obj, first, last, count, rows, live) -> bytes:
    return (enc_str(path) + struct.pack("<QI", len(obj), envelope_crc(obj)) +
            struct.pack("<QQQQQ", first, last, count, rows, live) + struct.pack("<Q", 0))


def _node(level, fragments=(), children=(), magic=MAGIC_NODE) -> bytes:
    return seal(magic, struct.pack("<IQ", level, len(fragments)) + b"".join(fragments) +
                struct.pack("<Q", len(children)) + b"".join(children))


class TreeTests(unittest.TestCase):
    """Fragment trees (§8.3) over copies of Appendix A's fragment (2 rows), built by hand:
    a root (level 1) over two leaves, fragments 0 and 1, checked as VAL-20 orders."""

    ROOT, LEAF0, LEAF1 = ("index/" + c * 32 + ".tsn" for c in "abc")
    SEG = DeletionTests.SEG

    def fragment(self, fid: int) -> bytes:
        body = appendix_objects()[self.SEG][24:-4]
        return struct.pack("<Q", fid) + body[16:-8]  # Segment: count, fragments, removed

    def build(self, root, leaves=None, root_level=1, refs=None, next_id=2, rows=4, nsegs=1,
              flags=M.READER_FLAG_FRAGMENT_TREE, drop=()):
        objs = appendix_objects()
        del objs[self.SEG]
        if leaves is None:
            leaves = [_node(0, [self.fragment(0)]), _node(0, [self.fragment(1)])]
        if refs is None:
            refs = [(0, 0, 1, 2, 2), (1, 1, 1, 2, 2)]
        children = [_node_ref(p, leaf, *r) for p, leaf, r in zip((self.LEAF0, self.LEAF1), leaves,
                                                                    refs)]
        top = _node(root_level, [], children)
        objs.update({self.ROOT: top, self.LEAF0: leaves[0], self.LEAF1: leaves[1]})
        for key in drop:
            del objs[key]
        man = bytearray(objs[DeletionTests.MAN2][24:-4])
        i = bytes(man).index(self.SEG.encode())
        # the root's path has the segment's length: the SegmentRef's other fields keep their place
        man[i:i + len(self.ROOT)] = self.ROOT.encode()
        struct.pack_into("<QIQQ", man, i + len(self.ROOT), len(top), envelope_crc(top), 2, 4)
        struct.pack_into("<QQQ", man, i - 32, next_id, rows, nsegs)  # next id, row_count, count
        struct.pack_into("<Q", man, 0, flags)
        if nsegs == 2:  # the same reference twice
            ref = bytes(man[i - 8:i + len(self.ROOT) + 28])
            man[i + len(self.ROOT) + 28:i + len(self.ROOT) + 28] = ref
        objs[DeletionTests.MAN2] = seal(MAGIC_MANIFEST, bytes(man))
        return write_objects(root, objs)

    def test_reads_back(self):
        with tempfile.TemporaryDirectory() as root:
            st = self.build(root)
            v = open_version(st)
            self.assertEqual([f.id for f in v.fragments], [0, 1])
            d = dump(st, v)
            self.assertEqual(d["row_count"], 4)
            self.assertEqual([r["values"] for r in d["columns"]["id"]["rows"]],
                             [["7"], ["-1"], ["7"], ["-1"]])

    def test_reading_some_rows_reads_only_their_nodes(self):
        """TREE-07: the second leaf is absent; rows of the first still read, all rows do not."""
        with tempfile.TemporaryDirectory() as root:
            st = self.build(root, drop=[self.LEAF1])
            v = open_for_rows(st, open_manifest(st))
            self.assertIsNone(v.fragments)
            self.assertEqual([(g, f.id) for g, f in fragments_holding(st, v, [0, 1])], [(0, 0)])
            for rows in ([2], [1, 3]):
                with self.assertRaises(TesseraError) as cm:
                    fragments_holding(st, v, rows)
                self.assertEqual(cm.exception.cls, "invalid")
            with self.assertRaises(TesseraError) as cm:
                open_version(st)
            self.assertEqual(cm.exception.cls, "invalid")

    def test_faults(self):
        f0, f1 = self.fragment(0), self.fragment(1)
        leaf0 = _node(0, [f0])
        cases = (
            ({"root_level": 16}, "limit"),                                     # LIM-17
            ({"root_level": 2}, "invalid"),                                    # child level
            ({"root_level": 16, "refs": [(0, 0, 0, 2, 2), (1, 1, 1, 2, 2)]}, "limit"),  # 5 first
            ({"leaves": [leaf0, _node(0, [])]}, "invalid"),                    # empty leaf
            ({"leaves": [leaf0, _node(0, [f1], [_node_ref(self.LEAF0, leaf0, 0, 0, 1, 2, 2)])]},
             "invalid"),                                                       # leaf, child
            ({"leaves": [leaf0, _node(0, [f1], magic=MAGIC_SEGMENT)]}, "malformed"),
            ({"leaves": [_node(0, [self.fragment(1), self.fragment(0)]), _node(0, [f1])]},
             "invalid"),                                                       # ids descend
            ({"refs": [(0, 0, 0, 2, 2), (1, 1, 1, 2, 2)]}, "invalid"),         # count 0
            ({"refs": [(0, 0, 1, 2, 3), (1, 1, 1, 2, 2)]}, "invalid"),         # live > rows
            ({"refs": [(0, 1, 1, 2, 2), (1, 1, 1, 2, 2)]}, "invalid"),         # overlap
            ({"refs": [(0, 0, 1, 2, 1), (1, 1, 1, 2, 2)], "rows": 3}, "invalid"),  # summary
            ({"next_id": 1}, "invalid"),                                       # TREE-04
            ({"rows": 3}, "invalid"),                                          # MAN-06
            ({"nsegs": 2}, "invalid"),                                         # TREE-06
            ({"drop": [self.LEAF0]}, "invalid"),                               # absent
            ({"flags": 4 | M.READER_FLAG_FRAGMENT_TREE}, "unsupported"),       # FLG-03
        )
        for kw, cls in cases:
            with tempfile.TemporaryDirectory() as root:
                st = self.build(root, **kw)
                with self.assertRaises(TesseraError, msg=str(kw)) as cm:
                    dump(st, open_version(st))
                self.assertEqual(cm.exception.cls, cls, (kw, cm.exception.message))
                if os.environ.get("TREE_DEBUG"):
                    print(sorted(kw), cm.exception)

    def test_node_checks(self):
        frag = M.decode_segment(appendix_objects()[self.SEG][24:-4]).fragments[0]
        leaf = M.IndexNode(0, [frag], [])
        self.assertEqual(T.summarize(leaf, 1, "n"), T.Summary(0, 0, 1, 2, 2))
        with self.assertRaises(TesseraError):
            T.summarize(leaf, 0, "n")  # id 0 is not below next_fragment_id 0
        big = M.NodeRef("index/x.tsn", 30, 0, 0, 0, 1, (1 << 64) - 1, 0, [])
        inner = M.IndexNode(1, [], [big, M.NodeRef("index/y.tsn", 30, 0, 1, 1, 1, 1, 0, [])])
        T.check_entries(inner, "n")
        with self.assertRaises(TesseraError) as cm:  # TREE-05: a sum over u64
            T.summarize(inner, 2, "n")
        self.assertEqual(cm.exception.cls, "invalid")
        for ref, ok in (((0, 0, 1), True), ((3, 2, 1), False), ((0, 1, 3), False),
                        ((5, 9, 5), True)):
            r = M.NodeRef("index/x.tsn", 30, 0, ref[0], ref[1], ref[2], 5, 5, [])
            if ok:
                T.check_node_ref(r, "n")
            else:
                with self.assertRaises(TesseraError):
                    T.check_node_ref(r, "n")
        for path, cls in (("../x.tsn", "invalid"), ("a/" * 8 + "x", "limit")):
            n = M.IndexNode(1, [], [M.NodeRef(path, 30, 0, 0, 0, 1, 1, 1, [])])
            with self.assertRaises(TesseraError) as cm:
                T.check_entries(n, "n")
            self.assertEqual(cm.exception.cls, cls)


def empty_manifest(branch, version, parent=None, base=None) -> bytes:
    def vref(r):
        return b"\x00" if r is None else b"\x01" + enc_str(r[0]) + struct.pack("<Q", r[1])
    body = (struct.pack("<QQ", 0, 0) + enc_str(branch) + struct.pack("<Q", version) +
            vref(parent) + vref(base) + vref(None) + struct.pack("<Q", 0) + enc_str("m") +
            b"w" * 16 + struct.pack("<QQ", 0, 0) + struct.pack("<IQQ", 0, 0, 0) +
            struct.pack("<QQQ", 0, 0, 0))
    return seal(MAGIC_MANIFEST, body)


class ResolutionTests(unittest.TestCase):
    def store(self, root, manifests):
        for (b, v), data in manifests.items():
            path = os.path.join(root, "branches", b, f"{v:020d}.tsm")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        return Store(root)

    def cls(self, st, **kw):
        with self.assertRaises(TesseraError) as cm:
            open_version(st, **kw)
        return cm.exception.cls

    def test_resolution(self):
        with tempfile.TemporaryDirectory() as root:
            st = self.store(root, {
                ("main", 1): empty_manifest("main", 1),
                ("main", 2): empty_manifest("main", 2, ("main", 1)),
                ("dev", 2): empty_manifest("dev", 2, ("main", 1), ("main", 2)),
                ("dev", 3): empty_manifest("dev", 3, ("dev", 2)),
                ("gap", 5): empty_manifest("gap", 5, ("main", 4), ("main", 5)),
                ("a", 5): empty_manifest("a", 5, ("b", 4), ("b", 5)),
                ("b", 5): empty_manifest("b", 5, ("a", 4), ("a", 5)),
            })
            for junk in ("00000000000000000000.tsm", "0000000000000000009.tsm",
                         "99999999999999999999.tsm", "x.tmp"):
                open(os.path.join(root, "branches", "main", junk), "wb").close()
            self.assertEqual(open_version(st).manifest.version, 2)  # latest ignores junk
            m = open_version(st, branch="dev", version=1).manifest
            self.assertEqual((m.branch, m.version), ("main", 1))
            self.assertEqual(open_version(st, branch="dev").manifest.version, 3)
            self.assertEqual(self.cls(st, branch="dev", version=4), "not_found")
            self.assertEqual(self.cls(st, branch="nope"), "not_found")
            self.assertEqual(self.cls(st, branch="gap", version=3), "invalid")  # broken base
            self.assertEqual(self.cls(st, branch="a", version=3), "invalid")  # cycle
            self.assertEqual(self.cls(st, branch=".x"), "usage")

    def test_symbolic_links_are_no_objects(self):
        """LAY-11: a linked version key is no version, a linked directory hides its keys."""
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "root")
            st = self.store(root, {
                ("main", 1): empty_manifest("main", 1),
                ("main", 2): empty_manifest("main", 2, ("main", 1)),
                ("dev", 2): empty_manifest("dev", 2, ("main", 1), ("main", 2)),
            })
            v2 = os.path.join(root, "branches", "main", f"{2:020d}.tsm")
            os.rename(v2, os.path.join(tmp, "v2.tsm"))
            os.symlink(os.path.join(tmp, "v2.tsm"), v2)
            self.assertEqual(open_version(st).manifest.version, 1)  # the LIST leaves it out
            self.assertEqual(self.cls(st, version=2), "not_found")  # the GET finds no object
            dev = os.path.join(root, "branches", "dev")
            os.rename(dev, os.path.join(tmp, "dev"))
            os.symlink(os.path.join(tmp, "dev"), dev)
            self.assertEqual(self.cls(st, branch="dev"), "not_found")


class DistanceTests(unittest.TestCase):
    """SPEC.md §23: this implementation's distances equal fixtures/distances.json bit for bit
    (the reference checks the same file on every SIMD level it runs)."""

    def test_golden_file_matches(self):
        import json
        import make_distances
        from tessera_py import distance as D

        with open(make_distances.OUT, encoding="utf-8") as f:
            doc = json.load(f)
        self.assertEqual(doc, json.loads(json.dumps(make_distances.build())))
        # Hand-checkable answers.
        self.assertEqual(D.FUNCTIONS["cosine_distance"]([1.0, 0.0], [1.0, 0.0]), 0.0)
        self.assertEqual(D.FUNCTIONS["l2_distance"]([1.0, 0.0], [4.0, 4.0]), 5.0)
        self.assertEqual(D.lane_sum([2.0 ** 53] + [1.0] * 33), 2.0 ** 53 + 32.0)
        self.assertEqual(D.f64_bits(D.FUNCTIONS["cosine_distance"]([math.inf], [1.0])), 0x7FF8000000000000)


if __name__ == "__main__":
    unittest.main()
