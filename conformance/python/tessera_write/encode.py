"""The §6 binary encoding, written (ENC-01), and the §5 envelope (ENV-01, ENV-08).

Values are the dataclasses of the reader (`tessera_py.model`), so what the writer encodes is
exactly what the reader decodes; `test_tessera_write.py` checks encode(decode(x)) == x on the
objects of SPEC.md Appendix A.
"""

import struct
import zlib

from tessera_py import model as M

_U16, _U32, _I32 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<i")
_U64, _I64 = struct.Struct("<Q"), struct.Struct("<q")


def crc32(data) -> int:
    """CRC-32/ISO-HDLC (GEN-06): zlib's."""
    return zlib.crc32(data) & 0xFFFFFFFF


class Encoder:
    """Appends §6 values to a byte buffer."""

    __slots__ = ("buf",)

    def __init__(self):
        self.buf = bytearray()

    def u8(self, v: int):
        self.buf.append(v)

    def u32(self, v: int):
        self.buf += _U32.pack(v)

    def i32(self, v: int):
        self.buf += _I32.pack(v)

    def u64(self, v: int):
        self.buf += _U64.pack(v)

    def i64(self, v: int):
        self.buf += _I64.pack(v)

    def boolean(self, v: bool):
        self.buf.append(1 if v else 0)

    def raw(self, b: bytes):
        self.buf += b

    def string(self, s: str):
        b = s.encode("utf-8")
        self.u64(len(b))
        self.buf += b

    def vec(self, items, elem):
        self.u64(len(items))
        for x in items:
            elem(self, x)

    def option(self, v, elem):
        if v is None:
            self.u8(0)
        else:
            self.u8(1)
            elem(self, v)


# --- structs (field order of SPEC.md §7.4, §8, §8.3, §9, §10.1, §11, §12) -------------------

def _metadata(e: Encoder, meta):
    e.vec(meta, lambda e, kv: (e.string(kv[0]), e.string(kv[1])))


def _version_ref(e: Encoder, r: M.VersionRef):
    e.string(r.branch)
    e.u64(r.version)


def _dim(e: Encoder, d):
    if d is M.RAGGED:
        e.u32(1)
    else:
        e.u32(0)
        e.u64(d)


def _kind(e: Encoder, k: M.Kind):
    e.u32(k.type)
    t, p = M.KIND_NAMES[k.type], k.params
    if t == "image":
        e.u32(p["layout"])
    elif t == "video":
        e.u32(p["fps_milli"])
    elif t == "audio":
        e.u32(p["sample_rate"])
    elif t == "tokens":
        e.option(p["vocab_size"], lambda e, v: e.u64(v))
    elif t == "embedding":
        e.u32(p["metric"])
    elif t == "class_label":
        e.vec(p["names"], lambda e, n: e.string(n))
    elif t == "bbox":
        e.u32(p["format"])
        e.boolean(p["normalized"])


def _column(e: Encoder, c: M.Column):
    e.u32(c.id)
    e.string(c.name)
    e.u32(c.dtype)
    e.vec(c.shape, _dim)
    _kind(e, c.kind)
    codec, level = c.compression
    e.u32(codec)
    if codec == M.CODEC_ZSTD:
        e.i32(level)
    e.boolean(c.nullable)
    _metadata(e, c.metadata)


def _schema(e: Encoder, s: M.Schema):
    e.vec(s.columns, _column)
    _metadata(e, s.metadata)


_SCALAR = {"bool": 0, "int": 1, "uint": 2, "float": 3}


def _scalar(e: Encoder, s):
    """A `Scalar` in the reader's form: ("bool", b), ("int", i), ("uint", u), ("float", bits)."""
    kind, v = s
    e.u32(_SCALAR[kind])
    if kind == "bool":
        e.boolean(v)
    elif kind == "int":
        e.i64(v)
    else:
        e.u64(v)  # uint, or the f64 bit pattern


def _column_stats(e: Encoder, s):
    column_id, null_count, lo, hi = s
    e.u32(column_id)
    e.u64(null_count)
    e.option(lo, _scalar)
    e.option(hi, _scalar)


def _segment_ref(e: Encoder, r: M.SegmentRef):
    e.string(r.path)
    e.u64(r.size)
    e.u32(r.crc32)
    e.u64(r.fragment_count)
    e.u64(r.row_count)


def manifest_body(m: M.Manifest) -> bytes:
    e = Encoder()
    e.u64(m.reader_flags)
    e.u64(m.writer_flags)
    e.string(m.branch)
    e.u64(m.version)
    for ref in (m.parent, m.base, m.merged):
        e.option(ref, _version_ref)
    e.u64(m.timestamp_ms)
    e.string(m.message)
    e.raw(m.writer_id)
    _schema(e, m.schema)
    e.u32(m.next_column_id)
    e.u64(m.next_fragment_id)
    e.u64(m.row_count)
    e.vec(m.segments, _segment_ref)
    e.vec(m.stats, _column_stats)
    _metadata(e, m.metadata)
    return bytes(e.buf)


def _data_file_ref(e: Encoder, r: M.DataFileRef):
    e.string(r.path)
    e.u64(r.size)
    e.u32(r.footer_crc32)
    e.vec(r.column_ids, lambda e, c: e.u32(c))


def _deletion_ref(e: Encoder, r: M.DeletionRef):
    e.string(r.path)
    e.u64(r.size)
    e.u32(r.crc32)
    e.u64(r.deleted_count)


def _fragment(e: Encoder, f: M.Fragment):
    e.u64(f.id)
    e.u64(f.row_count)
    e.vec(f.files, _data_file_ref)
    e.option(f.deletion, _deletion_ref)
    e.vec(f.stats, _column_stats)


def segment_body(s: M.Segment) -> bytes:
    e = Encoder()
    e.vec(s.fragments, _fragment)
    e.vec(s.removed, lambda e, x: e.u64(x))
    return bytes(e.buf)


def fragment_size(f: M.Fragment) -> int:
    """The encoded size of one fragment entry."""
    e = Encoder()
    _fragment(e, f)
    return len(e.buf)


def _node_ref(e: Encoder, r: M.NodeRef):
    e.string(r.path)
    e.u64(r.size)
    e.u32(r.crc32)
    e.u64(r.first_id)
    e.u64(r.last_id)
    e.u64(r.fragment_count)
    e.u64(r.row_count)
    e.u64(r.live_row_count)
    e.vec(r.stats, _column_stats)


def node_ref_size(r: M.NodeRef) -> int:
    """The encoded size of one `NodeRef`."""
    e = Encoder()
    _node_ref(e, r)
    return len(e.buf)


NODE_OVERHEAD = 4 + 8 + 8  # IndexNode: level, and the two Vec counts


def index_node_body(n: M.IndexNode) -> bytes:
    e = Encoder()
    e.u32(n.level)
    e.vec(n.fragments, _fragment)
    e.vec(n.children, _node_ref)
    return bytes(e.buf)


def tag_body(t: M.Tag) -> bytes:
    e = Encoder()
    e.string(t.name)
    _version_ref(e, t.target)
    e.u32(t.manifest_crc32)
    e.u64(t.timestamp_ms)
    e.string(t.message)
    return bytes(e.buf)


def _block(e: Encoder, b: M.Block):
    e.u64(b.offset)
    e.u64(b.stored_len)
    e.u64(b.raw_len)
    e.u32(b.codec)
    e.u32(b.crc32)


def _page(e: Encoder, p: M.Page):
    e.u64(p.row_count)
    _block(e, p.block)


def _chunk(e: Encoder, c: M.ColumnChunk):
    e.u32(c.column_id)
    e.u32(c.dtype)
    e.u32(c.ragged_dims)
    e.option(c.validity, _block)
    e.option(c.shapes, _block)
    e.vec(c.pages, _page)


def footer_bytes(f: M.Footer) -> bytes:
    e = Encoder()
    e.u64(f.row_count)
    e.vec(f.columns, _chunk)
    return bytes(e.buf)


# --- envelope (§5) --------------------------------------------------------------------------

def seal(magic: bytes, body: bytes) -> bytes:
    """The enveloped object: magic, major 1, minor 0, reserved 0, body_len, body, CRC-32 of
    everything before it (ENV-01, ENV-06, ENV-08)."""
    head = magic + _U16.pack(1) + _U16.pack(0) + _U32.pack(0) + _U64.pack(len(body))
    obj = head + body
    return obj + _U32.pack(crc32(obj))


def stored_crc(obj: bytes) -> int:
    """The envelope CRC of a sealed object (ENV-09): its last four bytes."""
    return _U32.unpack_from(obj, len(obj) - 4)[0]
