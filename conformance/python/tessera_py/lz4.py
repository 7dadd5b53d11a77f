"""LZ4 blocks (DF-27), decoded by liblz4 through the standard `lz4` package (`lz4.block`).

DF-27 asks for LZ4 *block format* data (no frame, no size prefix, no checksum) that decodes
by consuming exactly `stored_len` bytes into exactly `raw_len` bytes, never writing beyond
`raw_len`, whose last sequence is literals only and whose matches keep LZ4's end-of-block rules
(a match starts at least 12 bytes before the end of the block and ends at least 5 bytes before
it). What liblz4 (`LZ4_decompress_safe`, behind `lz4.block.decompress(src, uncompressed_size=n)`)
checks, and what this module adds around it:

| DF-27 rule | who checks it |
|---|---|
| output never beyond `raw_len` | liblz4: the destination buffer is exactly `raw_len` bytes |
| all `stored_len` input bytes consumed | liblz4: the last literal run must end exactly at the input's end |
| last sequence literals only | liblz4 |
| end-of-block rules (12 / 5 bytes) | liblz4 (1.9.x `LZ4_decompress_safe`) |
| output of exactly `raw_len` bytes | **here**: liblz4 returns a shorter output without complaint when the stream ends early, so the length is compared after decoding |
| `raw_len` 0 | **here**: liblz4 rejects an empty input; an empty block is codec `None` anyway (CMP-04), so this path only serves callers of this function |

The unit tests (`test_tessera_py.py`, `Lz4Tests`) pin each rule, so a liblz4 that stopped
enforcing one would fail them.
"""

try:
    import lz4.block as _block
except ImportError:  # pragma: no cover - exercised only without the package
    _block = None


class Lz4Error(Exception):
    pass


def available() -> bool:
    return _block is not None


def decompress(src, raw_len: int) -> bytes:
    """Decodes one LZ4 block to exactly `raw_len` bytes, or raises `Lz4Error`."""
    if _block is None:
        raise RuntimeError("the lz4 package is not installed")
    src = bytes(src)
    if raw_len == 0:
        # liblz4 refuses a zero-sized destination; the only valid encodings of nothing are an
        # empty input and a lone literal-only token with no literals.
        if src in (b"", b"\x00"):
            return b""
        raise Lz4Error("input left over after 0 bytes of output")
    if not src:
        raise Lz4Error("empty input")
    try:
        out = _block.decompress(src, uncompressed_size=raw_len)
    except _block.LZ4BlockError as e:
        raise Lz4Error(f"liblz4: {e}") from None
    if len(out) != raw_len:
        raise Lz4Error(f"decoded {len(out)} bytes, raw_len is {raw_len}")
    return out


def compress(raw) -> bytes:
    """Encodes `raw` as one LZ4 block (no size prefix) with liblz4's default compressor, which
    keeps the end-of-block rules of DF-27."""
    if _block is None:
        raise RuntimeError("the lz4 package is not installed")
    return _block.compress(bytes(raw), mode="default", store_size=False)
