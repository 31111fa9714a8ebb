"""Pure per-lane functions of the Vector Unit's functional models (tt-isa-documentation, BlackholeA0 VectorUnit.md and
the SFP* instruction pages) on numpy arrays of bit patterns: the ApproxRecip / ApproxExp tables of SFPARECIP, the LUT
coefficient formats of SFPLUT / SFPLUTFP32, sign-magnitude ordering, the flag stack's BooleanOp, bit-field helpers."""
from __future__ import annotations

import numpy as np

U32 = np.uint32
I64 = np.int64
ONE_F32 = 0x3F800000
SIGN = 0x80000000


def sext(v: int, bits: int) -> int:
    """Sign-extend the `bits`-bit field value v."""
    return v - (1 << bits) if v & (1 << (bits - 1)) else v


def smag_key(v: np.ndarray) -> np.ndarray:
    """Map sign-magnitude (or FP32) bit patterns to int64 keys in the total order -NaN < -Inf < ... < -0 < +0 <
    ... < +Inf < +NaN, so SignMagIsSmaller(C, D) == key(C) < key(D)."""
    v = v.astype(I64)
    return np.where(v >= SIGN, SIGN - 1 - v, v)  # -0 (0x80000000) -> -1, most negative -> -2**31


def boolean_op(mod1: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """BooleanOp of SFPPUSHC.md / SFPPOPC.md."""
    return {1: lambda: b, 2: lambda: ~b, 3: lambda: a & b, 4: lambda: a | b, 5: lambda: a & ~b,
            6: lambda: a | ~b, 7: lambda: ~a & b, 8: lambda: ~a | b, 9: lambda: ~a & ~b, 10: lambda: ~a | ~b,
            11: lambda: a != b, 12: lambda: a == b}[mod1]()


def bitwise(mod1: int, old: np.ndarray, value: np.ndarray) -> np.ndarray:
    """SFPCONFIG's update of a configuration word: replace, OR, AND or XOR (Mod1 bits 2:1)."""
    op = mod1 & 6
    return value if op == 0 else old | value if op == 2 else old & value if op == 4 else old ^ value


def clz32(v: np.ndarray) -> np.ndarray:
    """Leading zeros of 32-bit values (32 for 0)."""
    return 32 - np.frexp(v.astype(np.float64))[1].astype(I64)


def unshuffle_fp32(x: np.ndarray) -> np.ndarray:
    """Dst's stored FP32 layout (Sign,Man7,Exp8 in the high half) back to IEEE bits."""
    h = x >> 16
    return (((h & 0x8000) | ((h & 0xFF) << 7) | ((h >> 8) & 0x7F)) << 16) | (x & 0xFFFF)


RECIP_LUT = bytes.fromhex(
    "7f7d7b7977757472706e6d6b696866646361605e5d5b5a585755545351504f4d4c4b4a48474645444241403f3e3d3c3b3a39383736353433"
    "3231302f2e2d2c2b2a2928282726252423232221201f1f1e1d1c1c1b1a1919181717161515141313121111100f0f0e0e0d0c0c0b0b0a0909"
    "08080707060505040403030202010100"
)
EXP_LUT = bytes.fromhex(
    "0202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202"
    "0202020202020303030303030303030303030303030303030303030303030303030303030303030303030303030303030303030303030303"
    "0303030303030303030303030304040404040404040404040404040404040404040404040404040404040404040505050505050505050505"
    "0505050505050505050505050505050505050505060606060606060606060606060606060606060606060606060606060606060707070707"
    "0707070707070707070707070707070707070707070707070708080808080808080808080808080808080808090909090909090909090909"
    "0909090a0a0a0a0a0a0a0a0a0a0a0a0a0a0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0d0d0d0d0d0d0d0d0d"
    "0d0d0d0d0d0e0e0e0e0e0e0e0e0e0e0e0e0e0e0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f10101010101010101010101010101111111111111112"
    "1212121212121313131313131314141414141414151515151515151616161616161617171717171718181818181818191919191919191a1a"
    "1a1a1a1a1b1b1b1b1b1b1b1c1c1c1c1c1c1c1d1d1d1d1d1d1e1e1e1e1e1e1e1f1f1f1f1f1f20202020202021212121212121222222222222"
    "23232323232324242424242525252626262727272828282929292a2a2a2b2b2b2c2c2c2d2d2d2e2e2e2f2f2f303031313132323233333334"
    "343435353536363637373838383939393a3a3a3b3b3c3c3c3d3d3d3e3e3f3f3f404040414142424243434344444545454646474747484848"
    "49494a4a4a4b4b4c4c4c4d4d4e4e4e4f4f505050515152525353545556575858595a5b5c5d5e5e5f60616263646565666768696a6b6c6d6e"
    "6f70717172737475767778797a7b7c7d7e7f000001010202030304040505060607080809090a0a0b0b0c0c0d0d0e0f0f1010111112131314"
    "1415151617171818191a1a1b1b1c1d1d1e1f1f202021222223242425262627272829292a2b2b2c2d2d2f303233343637393a3c3d3f404243"
    "454648494b4c4e5051535556585a5b5d5f61626466686a6b6d6f71737577797b7d7f808182838485868788898b8c8d8e8f90919293959697"
    "98999b9c9d9e9fa1a2a3a5a6a7a8aaabacaeafb1b2b3b5b6b8b9bbbcbdbfc0c2c4c5c7c8cacbcdcfd0d2d3d5d7d8dadcdedfe1e3e5e6e8ea"
)

_RECIP_ARR = np.frombuffer(RECIP_LUT, dtype=np.uint8).astype(I64)
_EXP_ARR = np.frombuffer(EXP_LUT, dtype=np.uint8).astype(I64)


def approx_recip(x: np.ndarray) -> np.ndarray:
    """ApproxRecip of SFPARECIP.md on sign-cleared FP32 bits (int64 in, int64 out)."""
    mid = ((253 - (x >> 23)) << 23) | (_RECIP_ARR[(x >> 16) & 0x7F] << 16)
    return np.where(x < 0x00800000, 0x7F800000, np.where(x < 0x7E800000, mid, 0))


def approx_exp(x: np.ndarray) -> np.ndarray:
    """ApproxExp of SFPARECIP.md on sign-cleared FP32 bits (int64 in, int64 out)."""
    lo = x & 0xFFFF
    lut = _EXP_ARR[np.clip((x >> 16) - 0x3C80, 0, len(_EXP_ARR) - 1)] << 16
    return np.select([x < 0x00800000, x < 0x3C800000, x < 0x3F320000, x < 0x40000000],
                     [0x3F800000, 0x3F810000 | lo, 0x3F800000 | lut | lo, 0x40000000 | lut | lo],
                     0x40800000 | lo)


def lut8_to_fp32(x: np.ndarray) -> np.ndarray:
    """Lut8ToFp32 of SFPLUT.md (int64 bytes in, FP32 bits out)."""
    v = ((x >> 7) << 31) | ((127 - ((x >> 4) & 7)) << 23) | ((x & 0xF) << 19)
    return np.where(x == 0xFF, 0, v)


def lut16_to_fp32(x: np.ndarray) -> np.ndarray:
    """Lut16ToFp32 of SFPLUTFP32.md: FP16-like, exponent 31 means zero, exponent 0 is not denormal."""
    e = (x >> 10) & 0x1F
    return ((x >> 15) << 31) | (np.where(e == 0x1F, 0, 112 + e) << 23) | ((x & 0x3FF) << 13)
