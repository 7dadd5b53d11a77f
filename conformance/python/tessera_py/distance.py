"""Vector distances of SPEC.md §23 (DIST-01 to DIST-07), written from the text alone.

Python floats are IEEE 754 binary64 with round-to-nearest-even and never fuse a multiply
and an add, and `math.sqrt` is correctly rounded, so DIST-02's operations map one to one.
Elements are given already widened: an f32 element as the float its bits denote.
"""

import math
import struct

LANES = 16


def f32_from_bits(bits: int) -> float:
    """The binary64 value of an f32 bit pattern (exact widening, DIST-02)."""
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def f64_from_bits(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def f64_bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def lane_sum(terms) -> float:
    """DIST-02: 16 lanes from +0 in increasing index, then the fold w = 8, 4, 2, 1."""
    lanes = [0.0] * LANES
    for i, t in enumerate(terms):
        lanes[i % LANES] = lanes[i % LANES] + t
    w = LANES // 2
    while w > 0:
        for j in range(w):
            lanes[j] = lanes[j] + lanes[j + w]
        w //= 2
    return lanes[0]


def cosine_distance(a, b) -> float:
    """DIST-04."""
    s = lane_sum(x * y for x, y in zip(a, b))
    p = lane_sum(x * x for x in a)
    q = lane_sum(y * y for y in b)
    if not (math.isfinite(s) and math.isfinite(p) and math.isfinite(q)):
        return math.nan
    if p == 0.0 and q == 0.0:
        return 0.0
    if p == 0.0 or q == 0.0:
        return 1.0
    m = p * q
    norm = math.sqrt(m) if (math.isfinite(m) and m >= 2.0 ** -1022) else math.sqrt(p) * math.sqrt(q)
    c = s / norm
    c = -1.0 if c < -1.0 else (1.0 if c > 1.0 else c)
    return 1.0 - c


def l2_distance(a, b) -> float:
    """DIST-05."""
    def term(x, y):
        d = x - y
        return d * d
    return math.sqrt(lane_sum(term(x, y) for x, y in zip(a, b)))


def inner_product(a, b) -> float:
    """DIST-06."""
    return lane_sum(x * y for x, y in zip(a, b))


def canonical(f):
    """DIST-07: every NaN result is the quiet NaN 0x7FF8000000000000."""
    def g(a, b):
        r = f(a, b)
        return f64_from_bits(0x7FF8000000000000) if math.isnan(r) else r
    g.__name__ = f.__name__
    return g


FUNCTIONS = {
    "cosine_distance": canonical(cosine_distance),
    "l2_distance": canonical(l2_distance),
    "inner_product": canonical(inner_product),
}
