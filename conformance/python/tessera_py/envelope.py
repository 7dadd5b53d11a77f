"""The metadata envelope of SPEC.md §5 and its checks (VAL-04)."""

import struct
import zlib

from .errors import TesseraError, limit, malformed

MAGIC_MANIFEST = b"\x89TSM\r\n\x1a\n"
MAGIC_SEGMENT = b"\x89TSI\r\n\x1a\n"
MAGIC_NODE = b"\x89TSN\r\n\x1a\n"  # index nodes (§8.3)
MAGIC_DELETION = b"\x89TSX\r\n\x1a\n"
MAGIC_TAG = b"\x89TST\r\n\x1a\n"
MAGIC_DATA = b"\x89TSD\r\n\x1a\n"
MAGIC_TRAILER = b"\x89TSDEND\n"

# LIM-05
BODY_LIMIT_MANIFEST = 64 << 20
BODY_LIMIT_SEGMENT = 256 << 20  # also index nodes (TREE-01) and deletion vectors (DEL-01)
BODY_LIMIT_TAG = 64 << 10

ENVELOPE_OVERHEAD = 28


def crc32(data) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def envelope_crc(obj: bytes) -> int:
    """ENV-09: the u32 in the object's last four bytes, or 0 below 28 bytes."""
    if len(obj) < ENVELOPE_OVERHEAD:
        return 0
    return struct.unpack_from("<I", obj, len(obj) - 4)[0]


def check_envelope(obj: bytes, magic: bytes, body_limit: int, what: str,
                   body_hook=None, majors=(1,)) -> memoryview:
    """Runs the envelope checks of VAL-04 in order and returns the body.

    `body_hook(obj, body_len)` runs after the CRC and before the body is decoded (VAL-05
    inserts the reader_flags check there). `majors` are the accepted major versions: 1, and
    for a view 1 or 2 (VIEW-11)."""
    size = len(obj)
    if size < ENVELOPE_OVERHEAD:  # 1. ENV-05
        raise malformed(f"{what}: object is {size} bytes, shorter than the 28-byte envelope")
    if obj[:8] != magic:  # 2. ENV-02
        raise malformed(f"{what}: bad magic {obj[:8].hex(' ')}, expected {magic.hex(' ')}")
    major, minor, reserved, body_len = struct.unpack_from("<HHIQ", obj, 8)
    if major not in majors:  # 3. FLG-01
        raise TesseraError("unsupported", f"{what}: format major version {major} (this "
                           f"reader implements {' and '.join(map(str, majors))})")
    if reserved != 0:  # 4. ENV-03
        raise malformed(f"{what}: reserved field is {reserved:#x}, not 0")
    if body_len > body_limit:  # 5. ENV-04, LIM-05
        raise limit(f"{what}: body_len {body_len} exceeds the body limit {body_limit}")
    if ENVELOPE_OVERHEAD + body_len != size:  # 6. ENV-05
        raise malformed(f"{what}: object is {size} bytes but 28 + body_len is "
                        f"{ENVELOPE_OVERHEAD + body_len}")
    stored = struct.unpack_from("<I", obj, 24 + body_len)[0]
    actual = crc32(memoryview(obj)[:24 + body_len])
    if stored != actual:  # 7. ENV-06
        raise malformed(f"{what}: envelope CRC {stored:#010x} does not match the computed "
                        f"{actual:#010x}")
    if body_hook is not None:
        body_hook(obj, body_len)
    return memoryview(obj)[24:24 + body_len]
