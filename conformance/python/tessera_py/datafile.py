"""Data files (SPEC.md §7): VAL-09 to VAL-11 on open, VAL-12 when a column is decoded."""

import struct

from . import image, lz4, model as M, zstd_codec
from .envelope import MAGIC_DATA, MAGIC_TRAILER, crc32
from .errors import NotSupportedHere, TesseraError, invalid, limit, malformed
from .validate import (LIM_BLOCK_RAW, LIM_FOOTER, LIM_PAGES, LIM_RATIO, LIM_ROW_BYTES,
                       LIM_ROWS, fixed_row_bytes, is_fixed)


class DataFile:
    """A data file that passed VAL-09 to VAL-11 for the columns its reference lists."""

    def __init__(self, data: bytes, footer: M.Footer, chunks: dict, path: str):
        self.data = data
        self.footer = footer
        self.chunks = chunks  # column_id -> ColumnChunk
        self.path = path


def open_data_file(store, ref: M.DataFileRef, frag: M.Fragment, schema_cols: dict) -> DataFile:
    what = f"data file {ref.path}"
    # VAL-09 1-2
    size = store.size(ref.path)
    if size is None:
        raise invalid(f"{what} does not exist")
    if size != ref.size:
        raise invalid(f"{what} is {size} bytes; its reference says {ref.size}")
    data = store.get(ref.path)
    if data is None:
        raise TesseraError("io", f"{what} disappeared while reading")
    if len(data) != ref.size:
        raise TesseraError("io", f"{what} changed size while reading")
    # 3. header
    if len(data) < 32 or data[:8] != MAGIC_DATA:
        raise malformed(f"{what}: shorter than 32 bytes or bad header magic")
    major = struct.unpack_from("<H", data, 8)[0]
    if major != 1:  # 4.
        raise TesseraError("unsupported", f"{what}: format major version {major}")
    if any(data[12:28]):  # 5.
        raise malformed(f"{what}: header reserved bytes are not zero")
    if struct.unpack_from("<I", data, 28)[0] != crc32(data[:28]):  # 6.
        raise malformed(f"{what}: header CRC mismatch")
    if size < 88:  # 7.
        raise malformed(f"{what}: {size} bytes, shorter than 88")
    if data[size - 8:] != MAGIC_TRAILER:  # 8.
        raise malformed(f"{what}: bad trailer magic")
    footer_len, footer_crc, trailer_crc = struct.unpack_from("<QII", data, size - 24)
    if trailer_crc != crc32(data[size - 24:size - 12]):  # 9.
        raise malformed(f"{what}: trailer CRC mismatch")
    if footer_len > LIM_FOOTER:  # 10.
        raise limit(f"{what}: footer_len {footer_len} over {LIM_FOOTER}")
    if footer_len > size - 24:  # 11.
        raise malformed(f"{what}: footer_len {footer_len} does not fit in the file")
    footer_offset = size - 24 - footer_len
    if footer_offset < 64 or footer_offset % 64:
        raise malformed(f"{what}: footer offset {footer_offset} is below 64 or not a "
                        f"multiple of 64")
    # VAL-10
    fbytes = memoryview(data)[footer_offset:size - 24]
    if crc32(fbytes) != footer_crc:
        raise malformed(f"{what}: footer CRC mismatch")
    if footer_crc != ref.footer_crc32:
        raise invalid(f"{what}: footer CRC {footer_crc:#010x} differs from the reference's "
                      f"{ref.footer_crc32:#010x}")
    footer = M.decode_footer(data, footer_offset, size - 24)
    # VAL-11
    if footer.row_count > LIM_ROWS:
        raise limit(f"{what}: {footer.row_count} rows, over {LIM_ROWS}")
    if footer.row_count != frag.row_count:
        raise invalid(f"{what}: {footer.row_count} rows; fragment {frag.id} has "
                      f"{frag.row_count}")
    for a, b in zip(footer.columns, footer.columns[1:]):
        if not a.column_id < b.column_id:
            raise invalid(f"{what}: chunk column ids are not strictly ascending")
    blocks = []
    for ch in footer.columns:
        for kind, blk in _chunk_blocks(ch):
            _check_block(blk, footer_offset, f"{what}: column {ch.column_id} {kind}")
            blocks.append(blk)
    chunks = {ch.column_id: ch for ch in footer.columns}
    rows = footer.row_count
    for cid in ref.column_ids:  # strictly ascending (SEG-05)
        col = schema_cols.get(cid)
        if col is None:
            continue
        w = f"{what}: column {cid}"
        ch = chunks.get(cid)
        if ch is None:
            raise invalid(f"{w}: the footer has no chunk for it")
        if ch.dtype != col.dtype:
            raise invalid(f"{w}: dtype {M.dtype_name(ch.dtype)}; the schema says "
                          f"{M.dtype_name(col.dtype)}")
        if ch.ragged_dims != col.ragged_dims:
            raise invalid(f"{w}: ragged_dims {ch.ragged_dims}; the schema implies "
                          f"{col.ragged_dims}")
        if (ch.validity is not None) != col.nullable:
            raise invalid(f"{w}: validity block presence does not match nullable")
        if (ch.shapes is not None) != (ch.ragged_dims > 0):
            raise invalid(f"{w}: shapes block presence does not match ragged_dims")
        if ch.validity is not None:
            v = ch.validity
            if v.codec != M.CODEC_NONE or v.raw_len != (rows + 7) // 8:
                raise invalid(f"{w}: validity block must be codec none with raw_len "
                              f"{(rows + 7) // 8}")
        if ch.shapes is not None:
            s = ch.shapes
            if s.codec != M.CODEC_NONE or s.raw_len != rows * ch.ragged_dims * 8:
                raise invalid(f"{w}: shapes block must be codec none with raw_len "
                              f"{rows * ch.ragged_dims * 8}")
        if len(ch.pages) > LIM_PAGES:
            raise limit(f"{w}: {len(ch.pages)} pages, over {LIM_PAGES}")
        fixed = is_fixed(col)
        rb = fixed_row_bytes(col) if fixed else None
        total = 0
        for i, p in enumerate(ch.pages):
            if p.row_count < 1:
                raise invalid(f"{w}: page {i} has 0 rows")
            if image.is_image(p.block.codec) and (col.compression[0] != M.COMPRESSION_ENCODED
                                                  or p.row_count != 1):
                raise invalid(f"{w}: page {i} is an image page: only one row of an encoded "
                              f"column can be (CMP-06)")
            if fixed and p.block.raw_len != p.row_count * rb:
                raise invalid(f"{w}: page {i} raw_len {p.block.raw_len}, expected "
                              f"{p.row_count} rows x {rb} bytes")
            total += p.row_count
        if total != rows:
            raise invalid(f"{w}: pages hold {total} rows; the file has {rows}")
    # 6. DF-24 (ties broken by end, so an empty block never overlaps one at its offset)
    blocks.sort(key=lambda b: (b.offset, b.offset + b.stored_len))
    for a, b in zip(blocks, blocks[1:]):
        if b.offset < a.offset + a.stored_len:
            raise invalid(f"{what}: blocks at {a.offset} and {b.offset} overlap")
    return DataFile(data, footer, chunks, ref.path)


def _chunk_blocks(ch: M.ColumnChunk):
    if ch.validity is not None:
        yield "validity block", ch.validity
    if ch.shapes is not None:
        yield "shapes block", ch.shapes
    for i, p in enumerate(ch.pages):
        yield f"page {i}", p.block


def _check_block(b: M.Block, footer_offset: int, w: str):
    """VAL-11 step 4 for one block."""
    if b.offset % 64 or b.offset < 64 or b.offset + b.stored_len > footer_offset:
        raise invalid(f"{w}: block [{b.offset}, +{b.stored_len}) is misaligned or out of "
                      f"bounds (footer at {footer_offset})")
    if b.raw_len == 0 and (b.codec != M.CODEC_NONE or b.stored_len != 0):
        raise invalid(f"{w}: empty block must have codec none and stored_len 0")
    if b.raw_len > LIM_BLOCK_RAW:
        raise limit(f"{w}: raw_len {b.raw_len} over {LIM_BLOCK_RAW}")
    if b.codec == M.CODEC_NONE:
        if b.stored_len != b.raw_len:
            raise invalid(f"{w}: codec none with stored_len {b.stored_len} != raw_len "
                          f"{b.raw_len}")
    elif b.raw_len > b.stored_len * LIM_RATIO:
        raise limit(f"{w}: raw_len {b.raw_len} over {LIM_RATIO} x stored_len {b.stored_len}")


def _stored(df: DataFile, b: M.Block, w: str):
    raw = memoryview(df.data)[b.offset:b.offset + b.stored_len]
    if crc32(raw) != b.crc32:
        raise malformed(f"{w}: block CRC mismatch")
    return raw


def _decode(raw, b: M.Block, w: str) -> bytes:
    if b.codec == M.CODEC_NONE:
        return raw
    if b.codec == M.CODEC_LZ4:
        if not lz4.available():
            raise NotSupportedHere("lz4 blocks need the `lz4` Python package")
        try:
            return lz4.decompress(raw, b.raw_len)
        except lz4.Lz4Error as e:
            raise malformed(f"{w}: lz4: {e}") from None
    if not zstd_codec.available():
        raise NotSupportedHere("zstd blocks need the `zstandard` Python package")
    try:
        return zstd_codec.decompress(raw, b.raw_len)
    except zstd_codec.ZstdError as e:
        raise malformed(f"{w}: zstd: {e}") from None


class ColumnRows:
    """The physical rows of one column of one data file: for row i, `valid[i]`,
    `shapes[i]` (the row shape, SHP-02) and `raw[i]` (its bytes)."""

    __slots__ = ("valid", "shapes", "raw")

    def __init__(self):
        self.valid, self.shapes, self.raw = [], [], []


def read_column(df: DataFile, col: M.Column, live, want=None) -> ColumnRows:
    """VAL-12 for one schema column read from `df`. With `want` None, over every page and
    every physical row (VAL-16): bool and utf8 checks apply to deleted and null rows too. With
    `want` a set of physical rows (a partial read, VAL-19), only the pages holding one of them
    are read, and steps 3.1 to 3.4 cover all of such a page's rows but 3.5 only the wanted
    ones; rows of pages not read come back as None. `live` is unused and kept for callers."""
    w0 = f"data file {df.path}: column {col.id}"
    ch = df.chunks[col.id]
    rows = df.footer.row_count
    # 1. validity
    valid = None
    if ch.validity is not None:
        vraw = bytes(_stored(df, ch.validity, f"{w0} validity block"))
        if rows % 8 and vraw[-1] >> (rows % 8):
            raise invalid(f"{w0}: validity bits beyond row {rows} are set")
        valid = [bool(vraw[i >> 3] >> (i & 7) & 1) for i in range(rows)]
    # 2. shapes
    shp = None
    rd = ch.ragged_dims
    if ch.shapes is not None:
        sraw = _stored(df, ch.shapes, f"{w0} shapes block")
        flat = struct.unpack(f"<{rows * rd}Q", sraw)
        shp = [flat[i * rd:(i + 1) * rd] for i in range(rows)]
    var = M.is_var(col.dtype)
    isz = M.item_size(col.dtype)
    fixed = is_fixed(col)
    fixed_shape = tuple(col.shape) if fixed else None
    fixed_rb = fixed_row_bytes(col) if fixed else None
    out = ColumnRows()
    r = 0
    for pi, page in enumerate(ch.pages):
        w = f"{w0} page {pi}"
        n = page.row_count
        b = page.block
        if want is not None and not any(i in want for i in range(r, r + n)):
            out.valid.extend([None] * n)
            out.shapes.extend([None] * n)
            out.raw.extend([None] * n)
            r += n
            continue
        # 3.1 row byte sizes and null rows' shapes
        sizes, shapes = [], []
        for i in range(r, r + n):
            if fixed:
                rshape, nbytes = fixed_shape, fixed_rb
            else:
                vals = shp[i]
                if var:
                    rshape, nbytes = (vals[0],), vals[0]
                else:
                    it = iter(vals)
                    rshape = tuple(next(it) if d is M.RAGGED else d for d in col.shape)
                    cnt = 1
                    for d in rshape:
                        if d == 0:
                            cnt = 0
                            break
                        cnt *= d
                    nbytes = cnt * isz
                if nbytes > LIM_ROW_BYTES:
                    raise limit(f"{w}: row {i} is {nbytes} bytes, over {LIM_ROW_BYTES}")
                if valid is not None and not valid[i] and any(vals):
                    raise invalid(f"{w}: null row {i} has non-zero shapes values")
            sizes.append(nbytes)
            shapes.append(rshape)
        # 3.2
        if not fixed and sum(sizes) != b.raw_len:
            raise invalid(f"{w}: raw_len {b.raw_len} differs from the rows' {sum(sizes)} "
                          f"bytes")
        # 3.3, 3.4
        raw = _stored(df, b, w)
        if image.is_image(b.codec):  # one row (CMP-06): its shape is checked first (CMP-07)
            dec = memoryview(image.decode(b.codec, raw, shapes[0], b.raw_len, w))
        else:
            dec = memoryview(_decode(raw, b, w))
        # 3.5 and split into rows
        off = 0
        for k in range(n):
            i = r + k
            nb = sizes[k]
            rb = dec[off:off + nb]
            off += nb
            ok = True if valid is None else valid[i]
            # VAL-16: every row of every page, deleted and null rows included; VAL-19: the
            # wanted rows only
            checked = want is None or i in want
            if checked and col.dtype == M.DT_BOOL and nb and bytes(rb).translate(None, b"\x00\x01"):
                raise invalid(f"{w}: row {i} has a bool element other than 00/01")
            if checked and col.dtype == M.DT_UTF8:
                try:
                    str(rb, "utf-8")
                except UnicodeDecodeError:
                    raise invalid(f"{w}: row {i} is not valid UTF-8") from None
            out.valid.append(ok)
            out.shapes.append(shapes[k])
            out.raw.append(rb)
        r += n
    return out
