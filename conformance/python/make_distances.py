#!/usr/bin/env python3
"""Writes fixtures/distances.json, the golden vectors of SPEC.md §23, from this package's
independent implementation (tessera_py/distance.py); `--check` compares instead and exits 1 on
any difference. The reference checks the same file on every SIMD level it runs
(reference/tests/distances.rs), so the two implementations must agree bit for bit.

Elements and results are bit patterns in hex (f32 elements as 8 digits, f64 as 16), so the
file says exactly what every implementation must compute; `approx` is for people."""

import json
import math
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
OUT = os.path.join(os.path.dirname(os.path.dirname(HERE)), "fixtures", "distances.json")

from tessera_py.distance import FUNCTIONS, f32_from_bits, f64_bits, f64_from_bits  # noqa: E402


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def ramp(n: int, seed: int):
    """A deterministic vector in [-1, 1) with cancellation (xorshift32)."""
    x, out = seed, []
    for _ in range(n):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        out.append((x % 20001) / 10000.0 - 1.0)
    return out


INF, NAN = math.inf, math.nan
F32_MIN_SUB = f32_from_bits(1)
F32_MAX = f32_from_bits(0x7F7FFFFF)

# (name, element type, a, b): elements as Python floats, rounded to the element type.
CASES = [
    ("identical unit", "f32", [1.0, 0.0], [1.0, 0.0]),
    ("identical, 7 elements", "f32", [0.1, -2.5, 3.25, 1e-3, 7.0, -0.3, 11.0], [0.1, -2.5, 3.25, 1e-3, 7.0, -0.3, 11.0]),
    ("opposite", "f32", [1.0, 2.0, 3.0], [-1.0, -2.0, -3.0]),
    ("orthogonal", "f32", [1.0, 0.0, 0.0], [0.0, 5.0, 0.0]),
    ("scaled copy", "f32", [0.1, 0.2, 0.3], [0.2, 0.4, 0.6]),
    ("3-4-5", "f32", [1.0, 0.0], [4.0, 4.0]),
    ("tiny magnitudes", "f32", [1e-30, 2e-30, -3e-30], [3e-30, -1e-30, 2e-30]),
    ("huge magnitudes", "f32", [3e38, -3e38, 1e38], [1e38, 2e38, F32_MAX]),
    ("subnormals", "f32", [F32_MIN_SUB, 1e-40, -1e-39], [F32_MIN_SUB, 2e-40, 1e-39]),
    ("identical subnormals", "f32", [F32_MIN_SUB, 1e-40], [F32_MIN_SUB, 1e-40]),
    ("zero and zero", "f32", [0.0, 0.0, 0.0], [0.0, -0.0, 0.0]),
    ("zero and non-zero", "f32", [0.0, 0.0], [1.0, -1.0]),
    ("empty", "f32", [], []),
    ("NaN element", "f32", [NAN, 1.0], [1.0, 1.0]),
    ("infinite element", "f32", [INF, 1.0], [1.0, 1.0]),
    ("opposite infinities", "f32", [INF], [-INF]),
    ("negative zeros", "f32", [-0.0, -0.0], [-0.0, 1.0]),
    ("16 elements: one full lane round", "f32", ramp(16, 7), ramp(16, 11)),
    ("17 elements: lane 0 twice", "f32", ramp(17, 3), ramp(17, 5)),
    ("40 elements", "f32", ramp(40, 13), ramp(40, 17)),
    ("768 elements", "f32", ramp(768, 19), ramp(768, 23)),
    ("768 elements, identical", "f32", ramp(768, 29), ramp(768, 29)),
    ("f64: lane order (2^53 absorbs a 1)", "f64", [2.0 ** 53] + [1.0] * 33, [1.0] * 34),
    ("f64: identical", "f64", [0.1, 0.2, 0.3], [0.1, 0.2, 0.3]),
    ("f64: p*q overflows, p and q do not", "f64", [1e100, 0.0], [1e100, 1e-300]),
    ("f64: squares overflow", "f64", [1e200, 1e200], [1e200, 1e200]),
    ("f64: squares underflow to zero", "f64", [1e-200, 0.0], [1e-200, 0.0]),
    ("f64: p*q below the normal range", "f64", [1e-160, 0.0], [1e-160, 1e-170]),
    ("f64: 100 elements", "f64", ramp(100, 31), ramp(100, 37)),
]


def element_bits(kind: str, x: float) -> str:
    if kind == "f32":
        return "0x%08x" % f32_bits(x)
    return "0x%016x" % f64_bits(x)


def widen(kind: str, bits: str) -> float:
    return f32_from_bits(int(bits, 16)) if kind == "f32" else f64_from_bits(int(bits, 16))


def build():
    cases = []
    for name, kind, a, b in CASES:
        a_bits = [element_bits(kind, x) for x in a]
        b_bits = [element_bits(kind, x) for x in b]
        wa = [widen(kind, x) for x in a_bits]
        wb = [widen(kind, x) for x in b_bits]
        case = {"name": name, "element": kind, "a": a_bits, "b": b_bits}
        approx = {}
        for fname, f in FUNCTIONS.items():
            r = f(wa, wb)
            case[fname] = "0x%016x" % f64_bits(r)
            approx[fname] = repr(r)
        case["approx"] = approx
        cases.append(case)
    return {
        "format": "tessera-distances/1",
        "spec": "SPEC.md §23 (DIST-01 to DIST-07)",
        "note": "Elements and results are IEEE 754 bit patterns in hex (f32: 8 digits, f64: 16). "
        "f16 and bf16 elements widen to f32 exactly, so the f32 cases cover them. "
        "Written by conformance/python/make_distances.py; checked by the reference on every SIMD level.",
        "cases": cases,
    }


def main() -> int:
    text = json.dumps(build(), indent=1, ensure_ascii=False) + "\n"
    if "--check" in sys.argv[1:]:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                print("distances: fixtures/distances.json differs from this implementation's answers")
                return 1
        print("distances: %d golden cases agree" % len(CASES))
        return 0
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print("wrote %s (%d cases)" % (OUT, len(CASES)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
