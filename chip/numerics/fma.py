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
# A float64 formulation of the same datapath, exact for every lane whose inputs are finite normals or zeros, whose
# product exponent pe = e_x + e_y - 127 is in 0..254 (or the product is zero) and whose result is a normal FP32 value
# below 2**127 or zero; if any lane is outside that, the whole vector goes through `_fma_exact`.
# With E = max(pe, ze) (E = ze for a zero product) both terms live on the grid g = 2**(E - 153): the product's
# truncation to 28 bits with sticky, followed by the alignment shift with sticky, is one truncation of the exact
# product (exact in float64) onto g with the sticky OR-ed into the LSB - "round to odd" - except that a term that
# truncates to 0 stays 0 (semi-sticky); the same for z (exact when ze == E). For q = term / g: q if q is an
# integer, else 0 if |q| < 1, else the odd integer 2*floor(q/2) + 1 (= trunc(q) | 1 on the magnitude, either sign).
# Both integers are below 2**29 and add exactly; normalising with an exact sticky and RNE on 3 guard bits is then
# plain RNE of S * g to 24 bits, i.e. the float64 -> float32 conversion, for results in the normal range. Exact
# cancellation gives +0 (BH: z_sign & p_sign with different signs); a zero product gives z, or the IEEE sum of two
# zeros (-0 only if both are -0 = BH's AND of the signs). tests/emu/test_emu_speed.py proves it against `_fma_exact`.


def _fma_fast(xyz: np.ndarray, xa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(result bits, lane ok) for a C-contiguous (3, N) uint32 [x, y, z] without denormal inputs; `xa` = xyz with
    the signs cleared. `ok` is False where the formulation does not apply (those results are meaningless)."""
    f = xyz.view(np.float32)
    e = (xa >> 23).view(np.int32)
    n = xyz.shape[1]
    pz = np.empty((2, n), dtype=np.float64)
    np.multiply(f[0], f[1], out=pz[0], dtype=np.float64)      # exact: 48-bit product
    pz[1] = f[2]
    ze = e[2]
    pe = np.where(pz[0] == 0, ze, e[0] + e[1] - 127)
    sh = 153 - np.maximum(pe, ze)
    q = np.ldexp(pz, sh)
    t = np.trunc(q)
    # |q| < 1 <=> t == 0: multiplying by (t != 0) zeroes those (an exact zero keeps its sign: +-0 * 0 = +-0)
    r = np.where(q == t, t, np.floor(q * 0.5) * 2 + 1) * (t != 0)
    s = np.ldexp(r[0] + r[1], -sh)
    ok = _S_OK[s.view(np.uint64) >> 52]                       # by sign + float64 exponent field
    out = s.astype(np.float32).view(np.uint32)
    pe_bad = pe.view(np.uint32) > 254                          # pe outside 0..254
    if _any(pe_bad) or _any(xa >= 0x7F800000):
        out, ok = _fma_special(xyz, xa, e, pe, out, ok & ~pe_bad)
    return out, ok


# s == 0 or 2**-126 <= |s| < 2**127 (float64 exponent fields 0 and 897..1149), either sign
_S_OK = np.zeros(4096, dtype=bool)
for _sg in (0, 2048):
    _S_OK[_sg] = True
    _S_OK[_sg + 1023 - 126:_sg + 1023 + 127] = True



def _fma_special(xyz, xa, e, pe, out, ok):
    """The rare-case patches of `_fma_exact` (same order, same rules) for inputs without denormals: a product
    underflowing on its own (pe < 0) reads as exactly zero; Inf/NaN inputs and a product overflowing on its own."""
    sign = xyz & np.uint32(0x80000000)
    p_sign, z_sign = sign[0] ^ sign[1], sign[2]
    under = pe < 0
    out = np.where(under, np.where(xa[2] != 0, xyz[2], z_sign & p_sign), out)
    ok = ok | under
    xin, yin, zin = e == 255
    spec = xin | yin | zin | (pe >= 255)
    if _any(spec):
        man = xyz & np.uint32(0x7FFFFF)
        is_nan = ((xin & ((man[0] != 0) | (xa[1] == 0)))       # x NaN, or x Inf times zero
                  | (yin & ((man[1] != 0) | (xa[0] == 0)))     # y NaN, or y Inf times zero
                  | (zin & (man[2] != 0))                      # z NaN
                  | (zin & (xin | yin) & (z_sign != p_sign)))  # Inf - Inf
        val = np.where(is_nan, np.uint32(CANONICAL_NAN), np.where(zin, xyz[2], p_sign | np.uint32(0x7F800000)))
        out = np.where(spec, val, out)
        ok = ok | spec
    return out.astype(np.uint32), ok


def fma_bh_stacked(xyz: np.ndarray) -> np.ndarray:
    """fma_bh on a (3, ...) uint32 array [x, y, z]; the SFPU calls this (one fancy-index gather of 3 LRegs)."""
    if xyz.ndim != 2:
        return fma_bh_stacked(xyz.reshape(3, -1)).reshape(xyz.shape[1:])
    xyz = np.ascontiguousarray(xyz, dtype=np.uint32)
    xa = xyz & 0x7FFFFFFF
    den = (xa - 1) < 0x7FFFFF       # denormal inputs (uint32 wrap makes exact zero fail the test)
    big = xyz.shape[1] > _SUBSET_MIN
    if _any(den):
        if not big:
            return _fma_exact(xyz.astype(_I64))
        den = den.any(axis=0)
    else:
        den = None
    with np.errstate(all="ignore"):
        out, ok = _fma_fast(xyz, xa)
    if den is not None:
        ok &= ~den
    if b"\x00" in ok.tobytes():
        if not big:
            return _fma_exact(xyz.astype(_I64))
        bad = ~ok                   # batched row steps: only the lanes the formulation does not cover
        out[bad] = _fma_exact(xyz[:, bad].astype(_I64))
    return out


_SUBSET_MIN = 64   # wider vectors patch just the uncovered lanes with the exact model; narrower ones redo it all
