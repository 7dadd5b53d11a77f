"""Zstd blocks (DF-28): exactly one Zstandard frame, checked structurally here, decoded by
the `zstandard` package with a bounded output.

Structural checks done here (RFC 8878 §3.1.1): frame magic, frame header (reserved bit,
dictionary id absent or 0, Frame_Content_Size = raw_len when present, Window_Size ≤ 2^27),
then a walk over the block headers to find the end of the frame (plus its 4-byte checksum
when the header announces one), which must be the end of the stored bytes.
"""

import io

try:
    import zstandard as _zstd
except ImportError:  # pragma: no cover - exercised only without the package
    _zstd = None

MAGIC = b"\x28\xb5\x2f\xfd"
MAX_WINDOW = 1 << 27
BLOCK_MAX = 1 << 17  # Block_Maximum_Size upper bound (128 KiB)


class ZstdError(Exception):
    pass


def available() -> bool:
    return _zstd is not None


def _frame_info(src: bytes, raw_len: int):
    n = len(src)
    if n < 4 or src[:4] != MAGIC:
        raise ZstdError("the block does not start with the zstd frame magic 28 B5 2F FD")
    if n < 5:
        raise ZstdError("truncated frame header")
    fhd = src[4]
    fcs_flag = fhd >> 6
    single = (fhd >> 5) & 1
    reserved = (fhd >> 3) & 1
    checksum = (fhd >> 2) & 1
    did_flag = fhd & 3
    if reserved:
        raise ZstdError("the frame header's reserved bit is set")
    i = 5
    window = None
    if not single:
        if i >= n:
            raise ZstdError("truncated frame header")
        wd = src[i]
        i += 1
        exp, mant = wd >> 3, wd & 7
        base = 1 << (10 + exp)
        window = base + (base // 8) * mant
    did_size = (0, 1, 2, 4)[did_flag]
    if i + did_size > n:
        raise ZstdError("truncated frame header")
    did = int.from_bytes(src[i:i + did_size], "little")
    i += did_size
    if did != 0:
        raise ZstdError(f"the frame needs dictionary {did}")
    fcs_size = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if i + fcs_size > n:
        raise ZstdError("truncated frame header")
    fcs = None
    if fcs_size:
        fcs = int.from_bytes(src[i:i + fcs_size], "little")
        if fcs_size == 2:
            fcs += 256
        i += fcs_size
    if single:
        window = fcs
    if fcs is not None and fcs != raw_len:
        raise ZstdError(f"Frame_Content_Size {fcs} differs from raw_len {raw_len}")
    if window > MAX_WINDOW:
        raise ZstdError(f"Window_Size {window} exceeds 2^27")
    # Walk the blocks to find where the frame ends.
    while True:
        if i + 3 > n:
            raise ZstdError("truncated block header")
        bh = src[i] | (src[i + 1] << 8) | (src[i + 2] << 16)
        i += 3
        last = bh & 1
        btype = (bh >> 1) & 3
        bsize = bh >> 3
        if btype == 3:
            raise ZstdError("reserved block type")
        csize = 1 if btype == 1 else bsize
        if i + csize > n:
            raise ZstdError("a block runs past the end of the stored bytes")
        i += csize
        if last:
            break
    if checksum:
        if i + 4 > n:
            raise ZstdError("the content checksum runs past the end of the stored bytes")
        i += 4
    if i != n:
        raise ZstdError(f"{n - i} bytes follow the frame (a second frame or trailing bytes)")


def decompress(src, raw_len: int) -> bytes:
    if _zstd is None:
        raise RuntimeError("zstandard is not installed")
    src = bytes(src)
    _frame_info(src, raw_len)
    try:
        dctx = _zstd.ZstdDecompressor(max_window_size=MAX_WINDOW)
        with dctx.stream_reader(io.BytesIO(src), read_across_frames=False,
                                read_size=1 << 16) as r:
            out = bytearray()
            # Never more than raw_len + 1 bytes: one byte past raw_len proves "too long".
            while len(out) <= raw_len:
                chunk = r.read(raw_len + 1 - len(out))
                if not chunk:
                    break
                out += chunk
    except _zstd.ZstdError as e:
        raise ZstdError(f"zstd decoding failed: {e}") from None
    if len(out) != raw_len:
        raise ZstdError(f"the frame decodes to {'more than ' if len(out) > raw_len else ''}"
                        f"{len(out)} bytes, raw_len is {raw_len}")
    return bytes(out)
