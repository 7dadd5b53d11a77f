"""A bounded decoder for the LZ4 *block* format (DF-27): no frame, no size prefix, no checksum.

A block is a sequence of sequences. Each sequence: a token byte (high nibble: literal length,
low nibble: match length − 4), literal-length extension bytes when the nibble is 15 (each added,
until a byte other than 255), the literals, and, unless the input ends right after the
literals, a 2-byte little-endian match offset (1..=bytes output so far) and match-length
extension bytes when the low nibble is 15.

`decompress(src, raw_len)` returns exactly `raw_len` bytes or raises `Lz4Error`. It never
produces more than `raw_len` bytes: it fails as soon as a literal run or a match would go past
`raw_len`, and it must consume all of `src`. It also checks LZ4's end-of-block rules, which
liblz4 enforces (DF-27): every match starts at least 12 bytes before the end of the block and
ends at least 5 bytes before it.
"""


class Lz4Error(Exception):
    pass


def _ext_length(src, i: int, n: int, base: int, what: str):
    """Reads the 255-continued extension of a length nibble of 15, starting at src[i]."""
    length = base
    while True:
        if i >= n:
            raise Lz4Error(f"{what} length runs past the end of the input")
        b = src[i]
        i += 1
        length += b
        if b != 255:
            return length, i


def decompress(src, raw_len: int) -> bytes:
    src = bytes(src)
    n = len(src)
    out = bytearray()
    i = 0
    if n == 0:
        if raw_len == 0:
            return b""
        raise Lz4Error("empty input")
    while True:
        if i >= n:
            # The input ended right after a match: LZ4 requires the block to end with a
            # literal-only sequence, so there must be one more token.
            raise Lz4Error("input ends after a match, without a final literal sequence")
        token = src[i]
        i += 1
        lit = token >> 4
        if lit == 15:
            lit, i = _ext_length(src, i, n, 15, "literal")
            if len(out) + lit > raw_len:
                raise Lz4Error(f"literals would exceed raw_len {raw_len}")
        if lit > n - i:
            raise Lz4Error("literals run past the end of the input")
        if len(out) + lit > raw_len:
            raise Lz4Error(f"output would exceed raw_len {raw_len}")
        out += src[i:i + lit]
        i += lit
        if i == n:
            break  # the last sequence has literals only
        if n - i < 2:
            raise Lz4Error("match offset runs past the end of the input")
        offset = src[i] | (src[i + 1] << 8)
        i += 2
        if offset == 0 or offset > len(out):
            raise Lz4Error(f"match offset {offset} points before the start of the output "
                           f"({len(out)} bytes decoded)")
        mlen = token & 15
        if mlen == 15:
            mlen, i = _ext_length(src, i, n, 15, "match")
        mlen += 4
        if len(out) + mlen > raw_len:
            raise Lz4Error(f"output would exceed raw_len {raw_len}")
        # DF-27 end-of-block rules (liblz4 enforces them): a match starts at least 12 bytes
        # before the end of the block and ends at least 5 bytes before it.
        if len(out) + 12 > raw_len:
            raise Lz4Error(f"a match starts {raw_len - len(out)} bytes before the end, less than 12")
        if len(out) + mlen + 5 > raw_len:
            raise Lz4Error("a match ends within the last 5 bytes of the block")
        start = len(out) - offset
        if offset >= mlen:
            out += out[start:start + mlen]
        else:
            # Overlapping copy: the match repeats the last `offset` bytes.
            pattern = bytes(out[start:])
            reps, rest = divmod(mlen, offset)
            out += pattern * reps + pattern[:rest]
    if len(out) != raw_len:
        raise Lz4Error(f"decoded {len(out)} bytes, raw_len is {raw_len}")
    return bytes(out)
