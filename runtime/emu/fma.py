"""Bit-exact, vectorised model of the Blackhole FP32 fused multiply-add (SFPMAD family, also BH RISC-V fmadd.s).

Semantics (tt-isa-documentation `SFPMAD.md` + `Miscellaneous/FMA/README.md`, `fma_model_bh`):
  * denormal inputs read as (signed) zero;
  * the product keeps 4 extra bits (1 above, 3 below the FP32 mantissa) plus a sticky bit - it is *not* exact;
  * aligning the smaller operand loses its sticky information if it is shifted out completely ("semi-sticky");
  * one round-to-nearest-even; results that are denormal after rounding become signed zero;
  * x*y alone overflowing (exponent sum) -> Inf even if z would bring it back; x*y alone underflowing -> exactly 0;
  * NaN/Inf per IEEE with the canonical NaN 0x7fc00000.
Everything works on numpy uint32 arrays of bit patterns (any shape, broadcast); the arithmetic is int64 so no
per-element Python runs in the hot path.
"""
from __future__ import annotations

import numpy as np

CANONICAL_NAN = 0x7FC00000
_U32 = np.uint32
_I64 = np.int64


def f32_to_bits(x) -> np.ndarray:
    """float(s) -> uint32 bit patterns (no conversion of the value beyond rounding to float32)."""
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def bits_to_f32(b) -> np.ndarray:
    """uint32 bit pattern(s) -> float32 values (a view, NaN payloads preserved)."""
    return np.asarray(b, dtype=np.uint32).view(np.float32)


def flush_denormal(b) -> np.ndarray:
    """Replace denormal bit patterns by a zero of the same sign (what every Tensix FP32 consumer reads)."""
    b = np.asarray(b, dtype=np.uint32)
    return np.where((b & 0x7F800000) == 0, b & 0x80000000, b).astype(np.uint32)


def _any(mask: np.ndarray) -> bool:
    """mask.any() for small bool arrays, several times cheaper than the numpy reduction."""
    return b"\x01" in mask.tobytes()


def fma_bh(a, b, c) -> np.ndarray:
    """Bit-exact Blackhole `a * b + c` on uint32 FP32 bit patterns; returns uint32 with the broadcast shape."""
    x, y, z = np.broadcast_arrays(np.asarray(a, dtype=np.uint32), np.asarray(b, dtype=np.uint32),
                                  np.asarray(c, dtype=np.uint32))
    v = np.stack([x.reshape(-1), y.reshape(-1), z.reshape(-1)]).astype(_I64)
    return _fma_exact(v).reshape(x.shape)


def _fma_exact(v: np.ndarray) -> np.ndarray:
    """The BH FMA on an int64 (3, N) array of [x, y, z] bit patterns. Written for few numpy calls on N ~ 32 and
    all-int64 arithmetic (bool masks are turned into 0/1 with np.minimum(..., 1): mixing dtypes is slow)."""
    # Unpack; exponent 0 (zero or denormal) reads as a zero mantissa.
    e = (v >> 23) & 255
    m = ((v & 0x7FFFFF) | 0x800000) * np.minimum(e, 1)
    sign = v & 0x80000000
    p_sign, z_sign, ze = sign[0] ^ sign[1], sign[2], e[2]

    # Product: 48 bits exact, 3 guard bits appended, then the low 23 bits collapse into a sticky LSB: the product
    # is kept with 1 extra bit above and 3 below FP32 precision (partial fusion), exponent pe on that grid.
    pm = (m[0] * m[1]) << 3
    pm = (pm >> 23) | np.minimum(pm & 0x7FFFFF, 1)
    pe = e[0] + e[1] - 127
    zm = m[2] << 3

    # Align to the larger exponent. Semi-sticky: a term shifted out completely contributes nothing at all.
    re = np.maximum(pe, ze)
    sp, sz = np.minimum(re - pe, 63), np.minimum(re - ze, 63)
    pa = pm >> sp
    pa |= np.minimum((pa << sp) ^ pm, 1) & np.minimum(pa, 1)
    za = zm >> sz
    za |= np.minimum((za << sz) ^ zm, 1) & np.minimum(za, 1)
    # Magnitude add/subtract; the sign comes from the larger aligned term.
    rm = np.where(p_sign == z_sign, pa + za, np.abs(pa - za))
    r_sign = z_sign ^ ((p_sign ^ z_sign) * (pa >= za))

    # Normalise so the leading one sits at bit 26 (23 mantissa bits + 3 rounding bits below).
    n = np.frexp(rm.astype(np.float64))[1].astype(_I64) - 27   # frexp exponent = bit length (integers < 2**53)
    re = re + n
    # Below the normal range the model shifts just one extra place (as if the exponent were exactly 0), not the
    # full denormal distance; such results are flushed after rounding anyway (barring a round-up to 2**-126).
    ren = np.maximum(re, 0)
    n = n + 1 - np.minimum(ren, 1)
    right = np.maximum(n, 0)
    rm2 = (rm << (right - n)) >> right
    # The sticky of this final right shift only looks at the low (n | 1) bits: that is what the hardware does.
    rm2 |= np.minimum(rm & (right | 1), 1) & np.minimum(right, 1)

    r = (ren << 23) + ((rm2 >> 3) & 0x7FFFFF)
    r += ((rm2 & 7) + (r & 1) + 3) >> 3                  # round to nearest even: up iff guard bits + lsb > 4
    r *= np.minimum(r >> 23, 1)                          # denormal after rounding -> signed zero
    out = r_sign | r

    # Rare cases, patched in only when present (checks are cheap, the patches are not).
    if _any(re >= 255):                                   # overflow (the sum, not the product alone)
        out = np.where(re >= 255, r_sign | 0x7F800000, out)
    if _any(rm == 0):                                     # exact cancellation: IEEE zero-sign rule
        out = np.where(rm == 0, z_sign & p_sign, out)
    p_zero = (pm == 0) | (pe < 0)                         # product zero, or underflowing on its own -> exactly 0
    if _any(p_zero):
        out = np.where(p_zero, np.where(zm != 0, v[2], z_sign & p_sign), out)
    inf_nan = e == 255
    if _any(inf_nan) or _any(pe >= 255):                  # non-finite input, or the product alone overflows
        xin, yin, zin = inf_nan
        xm, ym = m[0], m[1]
        is_nan = ((xin & ((xm != 0x800000) | (ym == 0)))              # x NaN, or x Inf times zero
                  | (yin & ((ym != 0x800000) | (xm == 0)))            # y NaN, or y Inf times zero
                  | (zin & (zm != 0x4000000))                         # z NaN
                  | (zin & (xin | yin) & (z_sign != p_sign)))         # Inf - Inf
        special_val = np.where(is_nan, CANONICAL_NAN, np.where(zin, v[2], p_sign | 0x7F800000))
        out = np.where(xin | yin | zin | (pe >= 255), special_val, out)
    return out.astype(np.uint32)


# --- fast path -------------------------------------------------------------------------------------------------
# When x*y is exactly representable as a normal FP32 value, the BH product carries no sticky bit, and the
# documented "multiply by one / add zero == plain op" property extends to: result = IEEE float32 (p + z) with one
# RNE rounding (only one operand can be inexact after alignment; an operand shifted out completely is below an
# eighth of the other's ulp so cannot change an RNE decision). We therefore compute p exactly in float64, check
# it survives float32 conversion, add in float32, and accept lanes whose inputs are not denormal, whose product is
# comfortably inside the normal range (so the BH overflow/underflow-of-product rules cannot trigger) or exactly
# zero, and whose result is a normal, zero or infinite value (no NaN: BH NaNs are canonical, numpy's are not).
# A zero z also qualifies with an inexact product: then BH rounds the sticky-extended product once, which is the RNE
# of the exact product, i.e. float32(float64 product) (the float64 product of two FP32 values is exact).
# If any lane fails these checks the whole vector goes through the exact integer model. Tests compare both paths.
_TINY_P = 2.0 ** -124
_BIG = 2.0 ** 126  # |p|, |z| below this: the float32 sum cannot overflow
_MIN_NORMAL32 = np.float32(2.0 ** -126)


def fma_bh_stacked(xyz: np.ndarray) -> np.ndarray:
    """fma_bh on a (3, N) uint32 array [x, y, z]; the SFPU calls this (one fancy-index gather of 3 LRegs)."""
    xa = xyz & 0x7FFFFFFF
    if _any((xa - 1) < 0x7FFFFF):   # denormal inputs (uint32 wrap makes exact zero fail the test)
        return _fma_exact(xyz.astype(_I64))
    f = xyz.view(np.float32)
    with np.errstate(all="ignore"):   # Inf/NaN/overflowing lanes are rejected by `ok`, not worth a warning
        p = f[0].astype(np.float64) * f[1]
        pf = p.astype(np.float32)
        ok = (pf == p) | (xa[2] == 0)
        if b"\x00" in ok.tobytes():  # inexact product and non-zero z somewhere: give up early
            return _fma_exact(xyz.astype(_I64))
        ap = np.abs(p)
        ok = (((ap >= _TINY_P) & (ap < _BIG)) | (p == 0)) & (np.abs(f[2]) < _BIG)
        r = pf + f[2]
        ok &= (np.abs(r) >= _MIN_NORMAL32) | (r == 0)
    if b"\x00" in ok.tobytes():  # much cheaper than ok.all() on 32 lanes
        return _fma_exact(xyz.astype(_I64))
    return r.view(np.uint32)
