"""Threefry-2x32 (20 rounds) as uint32 value-DAG operations: tinygrad's Ops.THREEFRY, the core of its counter-based
RNG (Tensor.rand/randn/randint, dropout).

tinygrad 0.14 defines THREEFRY(x, key) on uint64 values: x = (x1 << 32) | x0 and key = (k1 << 32) | k0 are each two
uint32 words, the result is (y1 << 32) | y0. The words follow the Threefry-2x32 cipher (Salmon et al., "Parallel random
numbers: as easy as 1, 2, 3", SC'11) as tinygrad parameterises it: key schedule (k1, k0 ^ k1 ^ 0x1BD11BDA, k0), the
first injection adds word 2 to x0 and word 0 to x1, then five groups of four mix rounds (rotation constants
13 15 26 6 / 17 29 16 24 alternating); after group i, x0 += word i % 3 and x1 += word (i + 1) % 3 + i + 1. One mix
round: x0 += x1; x1 = rotl(x1, r) ^ x0. Every addition wraps modulo 2**32.
"""
from __future__ import annotations

from typing import Callable

ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
KEY_PARITY = 0x1BD11BDA
GROUPS = 5


def threefry2x32(op: Callable[[str, int, int], int], const: Callable[[int], int],
                 x: tuple[int, int], key: tuple[int, int]) -> tuple[int, int]:
    """(y0, y1) for x = (x0, x1), key = (k0, k1), all value ids; `op(name, a, b)` adds a uint32 ADD/XOR/OR/SHL/SHR of
    two values, `const(v)` a uint32 constant."""
    k0, k1 = key
    ks = (k1, op("XOR", op("XOR", k0, k1), const(KEY_PARITY)), k0)
    x0, x1 = op("ADD", x[0], ks[2]), op("ADD", x[1], ks[0])
    for i in range(GROUPS):
        for r in ROTATIONS[i % 2]:
            x0 = op("ADD", x0, x1)
            rot = op("OR", op("SHL", x1, const(r)), op("SHR", x1, const(32 - r)))
            x1 = op("XOR", x0, rot)
        x0 = op("ADD", x0, ks[i % 3])
        x1 = op("ADD", op("ADD", x1, ks[(i + 1) % 3]), const(i + 1))
    return x0, x1
