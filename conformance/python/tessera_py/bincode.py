"""The §6 binary encoding (bincode 2.x, standard config, little endian, fixed-width ints).

Every read is bounds-checked (ENC-02) and every length or count is compared with the
unread bytes before anything is allocated for it (ENC-04). All failures are `malformed`.
"""

import struct

from .errors import malformed

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")


class Decoder:
    """Reads §6 values from `buf[pos:end]`. `what` names the object in messages."""

    __slots__ = ("buf", "pos", "end", "what")

    def __init__(self, buf, what: str = "body", start: int = 0, end: int | None = None):
        self.buf = memoryview(buf)
        self.pos = start
        self.end = len(buf) if end is None else end
        self.what = what

    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int, field: str):
        if n > self.end - self.pos:
            raise malformed(f"{self.what}: {field} runs past the end of the {self.what} "
                            f"(needs {n} bytes at offset {self.pos}, {self.end - self.pos} left)")
        p = self.pos
        self.pos = p + n
        return p

    # --- primitives -------------------------------------------------------------------
    def u8(self, field="u8") -> int:
        p = self._take(1, field)
        return self.buf[p]

    def u16(self, field="u16") -> int:
        return _U16.unpack_from(self.buf, self._take(2, field))[0]

    def u32(self, field="u32") -> int:
        return _U32.unpack_from(self.buf, self._take(4, field))[0]

    def i32(self, field="i32") -> int:
        return _I32.unpack_from(self.buf, self._take(4, field))[0]

    def u64(self, field="u64") -> int:
        return _U64.unpack_from(self.buf, self._take(8, field))[0]

    def i64(self, field="i64") -> int:
        return _I64.unpack_from(self.buf, self._take(8, field))[0]

    def f64_bits(self, field="f64") -> int:
        """An f64, returned as its bit pattern (exactness: DT-03)."""
        return self.u64(field)

    def boolean(self, field="bool") -> bool:
        b = self.u8(field)
        if b > 1:
            raise malformed(f"{self.what}: {field}: bool byte {b:#04x} is neither 00 nor 01")
        return b == 1

    def fixed_bytes(self, n: int, field="bytes") -> bytes:
        p = self._take(n, field)
        return bytes(self.buf[p:p + n])

    def string(self, field="String") -> str:
        n = self.u64(field + " length")
        if n > self.remaining():  # ENC-04: check before allocating
            raise malformed(f"{self.what}: {field}: declared length {n} exceeds the "
                            f"{self.remaining()} unread bytes")
        p = self._take(n, field)
        try:
            return str(self.buf[p:p + n], "utf-8")
        except UnicodeDecodeError:
            raise malformed(f"{self.what}: {field} is not valid UTF-8") from None

    def count(self, field="Vec") -> int:
        """A Vec's element count, checked against the unread bytes (ENC-04)."""
        n = self.u64(field + " count")
        if n > self.remaining():
            raise malformed(f"{self.what}: {field}: declared count {n} exceeds the "
                            f"{self.remaining()} unread bytes")
        return n

    def vec(self, elem, field="Vec") -> list:
        n = self.count(field)
        return [elem(self) for _ in range(n)]

    def vec_u32(self, field="Vec<u32>") -> list:
        n = self.count(field)
        p = self._take(4 * n, field)
        return list(struct.unpack_from(f"<{n}I", self.buf, p))

    def vec_u64(self, field="Vec<u64>") -> list:
        n = self.count(field)
        p = self._take(8 * n, field)
        return list(struct.unpack_from(f"<{n}Q", self.buf, p))

    def option(self, elem, field="Option"):
        tag = self.u8(field + " tag")
        if tag == 0:
            return None
        if tag == 1:
            return elem(self)
        raise malformed(f"{self.what}: {field}: Option tag {tag:#04x} is neither 00 nor 01")

    def variant(self, n_variants: int, field="enum") -> int:
        v = self.u32(field + " variant")
        if v >= n_variants:
            raise malformed(f"{self.what}: {field}: variant index {v} is not defined")
        return v

    def finish(self):
        """ENC-03: the value must consume every byte."""
        if self.pos != self.end:
            raise malformed(f"{self.what}: {self.end - self.pos} trailing bytes after the "
                            f"encoded value")
