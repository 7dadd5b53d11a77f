"""Writing one data file (§7): header, blocks in canonical order (DF-25), footer, trailer.

Pages are split at about `page_bytes` of raw bytes (DF-20: a page closes before the row that
would take it past the target, and holds at least one row). A page is compressed with its
column's codec (CMP-02) unless that does not make it smaller or would break LIM-08, and then
stored with codec `None`. Validity and shapes blocks are always `None` (DF-16, DF-17).
"""

import struct

from tessera_py import lz4, model as M
from tessera_py.envelope import MAGIC_DATA, MAGIC_TRAILER
from tessera_py.errors import NotSupportedHere
from tessera_py.validate import LIM_RATIO

from .encode import crc32, footer_bytes
from .rows import shapes_values, stored_bytes

try:
    import zstandard as _zstd
except ImportError:  # pragma: no cover - exercised only without the package
    _zstd = None

DEFAULT_PAGE_BYTES = 256 << 10  # DF-20
ZSTD_MAX_WINDOW_LOG = 27  # DF-28: windows of at most 2^27


def align64(x: int) -> int:
    return (x + 63) // 64 * 64


def compress(raw: bytes, compression: tuple):
    """`(codec, stored bytes)` for a page of a column compressed as `compression`."""
    codec, level = compression
    if codec == M.COMPRESSION_ENCODED:
        # Rows of an encoded column arrive as pixels; they are stored losslessly in plain pages
        # (CMP-10), here uncompressed: `Compression::Encoded` names no block codec (CMP-02).
        return M.CODEC_NONE, raw
    if codec not in (M.CODEC_NONE, M.CODEC_LZ4, M.CODEC_ZSTD):
        raise NotSupportedHere(f"this writer does not write compression {codec}")
    if codec == M.CODEC_NONE or not raw:
        return M.CODEC_NONE, raw
    if codec == M.CODEC_LZ4:
        if not lz4.available():
            raise NotSupportedHere("lz4 pages need the `lz4` Python package")
        stored = lz4.compress(raw)
    else:
        if _zstd is None:
            raise NotSupportedHere("zstd pages need the `zstandard` Python package")
        z = _zstd
        params = z.ZstdCompressionParameters.from_level(level, source_size=len(raw),
                                                        write_content_size=True)
        if params.window_log > ZSTD_MAX_WINDOW_LOG:  # the DF-28 note's recipe
            params = z.ZstdCompressionParameters.from_level(
                level, source_size=len(raw), write_content_size=True,
                window_log=ZSTD_MAX_WINDOW_LOG)
        stored = z.ZstdCompressor(compression_params=params).compress(raw)
    # CMP-02: `None` when compression does not help (SHOULD) or would break LIM-08 (MUST).
    if len(stored) >= len(raw) or len(raw) > len(stored) * LIM_RATIO:
        return M.CODEC_NONE, raw
    return codec, stored


def split_pages(sizes, page_bytes: int):
    """Row ranges `[start, end)` of the pages of a chunk whose rows take `sizes` bytes."""
    pages, start, acc = [], 0, 0
    for i, n in enumerate(sizes):
        if i > start and acc + n > page_bytes:
            pages.append((start, i))
            start, acc = i, 0
        acc += n
    if start < len(sizes):
        pages.append((start, len(sizes)))
    return pages


class _File:
    """The bytes of a data file being laid out, block by block."""

    def __init__(self):
        head = MAGIC_DATA + struct.pack("<HHIQI", 1, 0, 0, 0, 0)
        self.buf = bytearray(head + struct.pack("<I", crc32(head)) + bytes(32))

    def place(self, stored: bytes, raw_len: int, codec: int) -> M.Block:
        """Appends a block at the next multiple of 64 (DF-21, DF-25), zero-padded (DF-05)."""
        offset = align64(len(self.buf))
        self.buf += bytes(offset - len(self.buf))
        self.buf += stored
        return M.Block(offset, len(stored), raw_len, codec, crc32(stored))


def build(columns, row_count: int, page_bytes: int = DEFAULT_PAGE_BYTES):
    """The bytes of a data file holding `row_count` rows of `columns`, a list of
    `(Column, rows)` in ascending column id order; returns `(bytes, footer_crc32)`."""
    f = _File()
    chunks = []
    for col, rows in columns:
        validity = shapes = None
        if col.nullable:
            bits = bytearray((row_count + 7) // 8)
            for i, r in enumerate(rows):
                if r is not None:
                    bits[i >> 3] |= 1 << (i & 7)
            validity = f.place(bytes(bits), len(bits), M.CODEC_NONE)
        rd = col.ragged_dims
        if rd:
            flat = [v for r in rows for v in shapes_values(col, r)]
            raw = struct.pack(f"<{len(flat)}Q", *flat)
            shapes = f.place(raw, len(raw), M.CODEC_NONE)
        data = [stored_bytes(col, r) for r in rows]
        pages = []
        for start, end in split_pages([len(b) for b in data], page_bytes):
            raw = b"".join(data[start:end])
            codec, stored = compress(raw, col.compression)
            pages.append(M.Page(end - start, f.place(stored, len(raw), codec)))
        chunks.append(M.ColumnChunk(col.id, col.dtype, rd, validity, shapes, pages))
    footer_offset = align64(max(len(f.buf), 64))
    f.buf += bytes(footer_offset - len(f.buf))
    footer = footer_bytes(M.Footer(row_count, chunks))
    footer_crc = crc32(footer)
    f.buf += footer
    lens = struct.pack("<QI", len(footer), footer_crc)
    f.buf += lens + struct.pack("<I", crc32(lens)) + MAGIC_TRAILER
    return bytes(f.buf), footer_crc
