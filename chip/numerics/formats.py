"""Tensix data formats and the unpacker / packer format conversions, as small pure numpy functions on bit patterns.

Every function takes and returns unsigned integer arrays holding *bit patterns* (np.uint32 unless stated), never
floats, so NaN payloads, signed zeros and denormals survive. `value_*` helpers turn bit patterns into float64 /
int64 for tests. Sources: WH `FloatBitPatterns.md`, `Unpackers/FormatConversion.md`, `Packers/FormatConversion.md`,
`Packers/ReLU.md`, `UNPACR_Regular.md` (functional model) and docs/sfpu_path.md §8; where the docs leave a
Blackhole detail open, the behaviour observed in ttsim (the project's oracle) is used and marked "[ttsim]".

Representation conventions (shared with `unpack_pack.py`):
* Src register datums and Dst32b datums are held in the *fp32 layout*: sign[31], exponent[30:23], mantissa[22:0]
  (the hardware's field shuffles inside Src/Dst are invisible to every instruction modelled here). A 16-bit float
  with a 5-bit exponent (FP16) sits in Src as sign[31], exponent[27:23], mantissa[22:13] - the documented
  WriteSrcFP16 overlay, i.e. its exponent is *not* re-biased.
* L1 FP16 is "Tensix FP16": IEEE layout, but exponent 31 is an ordinary binade (no Inf, no NaN).
* L1 INT32 / INT16 / INT8 are sign-magnitude, UINT8 is plain unsigned.
* BFP8/4/2 ("b" formats, 8-bit shared exponent): datums are sign + magnitude with no implicit 1 (Mag / 2^(bits-2)
  * 2^(Exp-127)); one exponent byte per 16 datums lives in a separate exponent section.
"""
from __future__ import annotations

import numpy as np

# Format codes (the 4-bit In/Out_data_format / Dstacc encoding)
FP32, FP16, BFP8A, BFP4A, TF32, BF16, BFP8, BFP4, INT32, INT16, FP8, BFP2A, INT8, BFP2 = \
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 14, 15
UINT16 = INT16   # ttsim's name for code 9
NAMES = {FP32: "FP32", FP16: "FP16", BFP8A: "BFP8a", BFP4A: "BFP4a", TF32: "TF32", BF16: "BF16", BFP8: "BFP8",
         BFP4: "BFP4", INT32: "INT32", INT16: "INT16", FP8: "FP8", BFP2A: "BFP2a", INT8: "INT8", BFP2: "BFP2"}
BFP_FORMATS = {BFP8A, BFP4A, BFP8, BFP4, BFP2A, BFP2}


def element_bits(fmt: int) -> int:
    """L1 bits per datum: the low two code bits give 32/16/8; BFP4(a) and BFP2(a) are 4 and 2 bits."""
    if fmt in (BFP4, BFP4A):
        return 4
    if fmt in (BFP2, BFP2A):
        return 2
    return (32, 16, 8, None)[fmt & 3]


def _u32(x) -> np.ndarray:
    """x as uint32 words; a uint32 array itself (no copy: every caller derives a new array from it)."""
    return np.asarray(x).astype(np.uint32, copy=False)


_SIGN = np.uint32(0x80000000)
_ABS = np.uint32(0x7FFFFFFF)


# ================================================================================================ values (for tests)
def value_fp32(bits) -> np.ndarray:
    """IEEE interpretation of fp32 bit patterns (float64)."""
    return _u32(bits).view(np.float32).astype(np.float64)


def value_bf16(bits16) -> np.ndarray:
    return value_fp32(_u32(bits16) << 16)


def value_fp16(bits16) -> np.ndarray:
    """Tensix FP16: like IEEE binary16 for exponents 1..30, denormals as IEEE, but exponent 31 is a normal binade
    ((1 + m/1024) * 2^16), so there is no Inf and no NaN (FloatBitPatterns.md, FP16 table)."""
    h = _u32(bits16)
    s = np.where(h & 0x8000, -1.0, 1.0)
    e = (h >> 10 & 31).astype(np.int64)
    m = (h & 0x3FF).astype(np.float64)
    return s * np.where(e == 0, m / 1024.0 * 2.0 ** -14, (1 + m / 1024.0) * np.exp2(e - 15.0))


def value_int32_sm(bits) -> np.ndarray:
    b = _u32(bits)
    mag = (b & _ABS).astype(np.int64)
    return np.where(b & _SIGN, -mag, mag)


def value_int8_sm(bits8) -> np.ndarray:
    b = _u32(bits8)
    mag = (b & 0x7F).astype(np.int64)
    return np.where(b & 0x80, -mag, mag)


def value_bfp(datum, exp, bits: int = 8) -> np.ndarray:
    """BFP8/4/2 datum with its shared 8-bit exponent: (-1)^s * Mag / 2^(bits-2) * 2^(exp-127). Sign with Mag 0
    means -2^128 / -Inf (FloatBitPatterns.md); returned as -inf."""
    d, e = _u32(datum), _u32(exp).astype(np.int64)
    mag = (d & ((1 << (bits - 1)) - 1)).astype(np.float64)
    neg = (d >> (bits - 1)) & 1
    v = mag / 2.0 ** (bits - 2) * np.exp2(e - 127.0)
    return np.where(neg & (mag == 0), -np.inf, np.where(neg, -v, v))


# ================================================================================================ L1 encodings
def int32_to_sm(x) -> np.ndarray:
    """Python/np ints (|x| < 2^31) -> INT32 sign-magnitude bit patterns."""
    x = np.asarray(x, dtype=np.int64)
    return np.where(x < 0, (-x) | 0x80000000, x).astype(np.uint32)


def int8_to_sm(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64)
    return np.where(x < 0, (-x) | 0x80, x).astype(np.uint32)


def fp32_bits(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


# ------------------------------------------------------------------------------------------------ BFP storage
def bfp_datums_to_bytes(datums, bits: int) -> np.ndarray:
    """Pack BFP datums (values < 2^bits) into L1 bytes: datum i occupies bits [bits*i, bits*i + bits) of the
    stream, least significant bits of each byte first (two BFP4 datums per byte, low nibble = earlier datum)."""
    d = _u32(datums).reshape(-1)
    if bits == 8:
        return d.astype(np.uint8)
    per = 8 // bits
    d = d.reshape(-1, per)
    out = np.zeros(d.shape[0], np.uint32)
    for k in range(per):
        out |= (d[:, k] & ((1 << bits) - 1)) << (bits * k)
    return out.astype(np.uint8)


def bfp_bytes_to_datums(raw, bits: int, count: int, first: int = 0) -> np.ndarray:
    """Inverse of `bfp_datums_to_bytes`: `count` datums starting at datum index `first` of the byte stream."""
    raw = np.asarray(raw, dtype=np.uint8).astype(np.uint32)
    i = first + np.arange(count)
    if bits == 8:
        return raw[i]
    per = 8 // bits
    return (raw[i // per] >> ((i % per) * bits)) & ((1 << bits) - 1)


def bfp_exp_section_bytes(n_datums: int) -> int:
    """Size of the exponent section in front of BFP data: one byte per 16 datums, rounded up to 16 bytes."""
    n_exp = (n_datums + 15) // 16
    return (n_exp + 15) // 16 * 16


# ================================================================================================ BFP <-> BF16
def bfp8_to_bf16(datum, exp) -> np.ndarray:
    """The documented BFP8ToBF16 (FloatBitPatterns.md): normalise the 7-bit magnitude (leading 1 becomes the
    implicit bit, exponent drops by the shift, wrapping mod 256 as hardware does); magnitude 0 gives +0 or, with the
    sign set, -Inf (0xFF80). Lossless for every datum whose exponent does not wrap."""
    d, e = _u32(datum) & 0xFF, _u32(exp) & 0xFF
    sign = d >> 7
    mag = (d << 1) & 0xFF
    lz = _clz8(mag)
    m = (mag << lz) & 0xFF
    e2 = (e - lz) & 0xFF
    out = (sign << 15) | (e2 << 7) | (m & 0x7E)
    return np.where(mag == 0, np.where(sign == 1, np.uint32(0xFF80), np.uint32(0)), out).astype(np.uint32)


def _clz8(v: np.ndarray) -> np.ndarray:
    """Leading zeros of 8-bit values (8 for 0)."""
    v = _u32(v) & 0xFF
    lz = np.full(v.shape, 8, np.uint32)
    for k in range(8):                              # highest set bit wins: scan upwards, last hit is the top bit
        lz = np.where((v >> k) & 1, np.uint32(7 - k), lz)
    return lz


def bfp4_to_bf16(datum, exp) -> np.ndarray:
    return bfp8_to_bf16((_u32(datum) & 0xF) << 4, exp)


def bfp2_to_bf16(datum, exp) -> np.ndarray:
    return bfp8_to_bf16((_u32(datum) & 0x3) << 6, exp)


def bfp_to_bf16(datum, exp, bits: int) -> np.ndarray:
    return {8: bfp8_to_bf16, 4: bfp4_to_bf16, 2: bfp2_to_bf16}[bits](datum, exp)


def bf16_to_bfp(bf16, bits: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """The packer's late conversion BF16 (or E8M6) -> BFP8/4/2 for blocks of 16 datums (Packers/FormatConversion.md:
    "round to BFP8 with one shared 8b exponent per 16 datums", then "truncate to BFP4 or BFP2").

    Shared exponent = the largest exponent field of the block (255 counts as an ordinary exponent [ttsim]). Each
    datum's 8-bit significand (implicit 1 unless its exponent is 0) is shifted right by (shared - own + 1) with
    round-to-nearest, ties away from zero; a result of 128 (round-up overflow) saturates to 127 [ttsim]; a shift of
    8 or more gives 0. BFP4/BFP2 keep the top 3/1 bits of that 7-bit magnitude (truncation). A zero magnitude never
    carries the sign bit (sign + 0 would mean -Inf).
    Returns (exponents uint32 (n,), datums uint32 (n*16,))."""
    v = _u32(bf16).reshape(-1, 16) & 0xFFFF
    e = v >> 7 & 0xFF
    shared = e.max(axis=1)
    sig = (v & 0x7F) | np.where(e != 0, np.uint32(0x80), np.uint32(0))
    shift = shared[:, None] - e
    sh = np.minimum(shift, 7)
    mag = (sig + (np.uint32(1) << sh)) >> (sh + 1)
    mag = np.where(shift >= 8, np.uint32(0), np.minimum(mag, np.uint32(127)))
    mag = mag >> (8 - bits)
    sign = (v >> 15) & 1
    d = np.where(mag != 0, mag | (sign << (bits - 1)), np.uint32(0))
    return shared.astype(np.uint32), d.reshape(-1).astype(np.uint32)


# ================================================================================================ unpacker
# Each returns the Src/Dst datum in the fp32 layout (see module docstring).
def unp_fp32_to_tf32(x) -> np.ndarray:
    """FP32 -> TF32 into SrcA/SrcB: drop the low 13 mantissa bits (truncation, no rounding; denormals and NaN kept
    as their truncated patterns). Into Dst, "TF32" means FP32 (identity) - see unp_fp32_to_dst."""
    return _u32(x) & np.uint32(0xFFFFE000)


def unp_fp32_to_bf16(x) -> np.ndarray:
    """FP32 -> BF16 into Src: denormals (exponent 0) flushed to zero of the same sign, then truncate to 16 bits."""
    x = _u32(x)
    x = np.where((x & np.uint32(0x7F800000)) == 0, x & _SIGN, x)
    return x & np.uint32(0xFFFF0000)


def unp_fp32_to_fp16(x) -> np.ndarray:
    """FP32 -> FP16 into Src (FP16 overlay, exponent not re-biased in the fp32 layout): exponent narrowing
    saturates (anything at or above 2^17, including Inf/NaN, becomes exponent 31 with mantissa 1023, the largest
    FP16), values below 2^-15 become zero of the same sign, the mantissa is truncated to 10 bits [ttsim; the
    docs name the conversion FP32ToFP16 without spelling it out]."""
    return fp16_to_src(fp32_to_fp16_sat_trunc(x))


def fp32_to_fp16_sat_trunc(x) -> np.ndarray:
    """FP32 bits -> FP16 bits (uint32 < 2^16): exponent e-112 saturated to [0, 31] (below 0: signed zero; above
    31: 0x7FFF with sign), mantissa truncated. FP32 exponent 112 maps to FP16 exponent 0 with the truncated mantissa
    (the "mishandled" 2^-15 <= |x| < 2^-14 range of the docs)."""
    x = _u32(x)
    s = (x >> 16) & 0x8000
    e = (x >> 23 & 0xFF).astype(np.int64) - 112
    m = (x >> 13) & 0x3FF
    out = np.where(e < 0, s, np.where(e > 31, s | 0x7FFF, s | (np.clip(e, 0, 31).astype(np.uint32) << 10) | m))
    return out.astype(np.uint32)


def fp16_to_src(h) -> np.ndarray:
    """L1 FP16 -> Src (WriteSrcFP16 overlay in the fp32 layout): sign to bit 31, exponent+mantissa to [27:13]."""
    h = _u32(h)
    return ((h & 0x8000) << 16) | ((h & 0x7FFF) << 13)


def bf16_to_src(b) -> np.ndarray:
    return _u32(b) << np.uint32(16)             # (the bits above 15 leave the 32-bit word)


def bfp_to_src(datum, exp, bits: int) -> np.ndarray:
    """BFP8/4/2 -> BF16 (lossless, documented routine) -> Src."""
    return bf16_to_src(bfp_to_bf16(datum, exp, bits))


def fp8_to_src(b, exp_4b: bool = False) -> np.ndarray:
    """L1 FP8 -> Src. E5M2 (default): the byte is the top half of an FP16 (docs: DatumBits <<= 8); on Blackhole
    the all-ones exponent+mantissa pattern 0x7F/0xFF also fills the low FP16 byte with ones [ttsim]. With
    Unp_LF8_4b_exp (E4M3, Blackhole only [ttsim]): exponent e (bias 7) -> FP16 exponent e+8 (0 stays 0), mantissa
    to FP16 bits [9:7], and 0x7F/0xFF become the largest FP16 magnitude."""
    b = _u32(b) & 0xFF
    if exp_4b:
        s, e, m = b & 0x80, (b >> 3) & 15, b & 7
        pad = np.where((e == 15) & (m == 7), np.uint32(0x7F), np.uint32(0))
        e16 = np.where(e != 0, e + 8, np.uint32(0))
        h = (s << 8) | (e16 << 10) | (m << 7) | pad
    else:
        h = np.where((b & 0x7F) == 0x7F, (b << 8) | 0xFF, b << 8)
    return fp16_to_src(h)


def int8_to_src(b, unsigned: bool) -> np.ndarray:
    """INT8 (sign-magnitude) or UINT8 -> "Integer 8" overlaid on FP16 (docs): magnitude in the mantissa, a dummy
    exponent 16 when the magnitude is non-zero, sign (signed only) in the FP16 sign bit."""
    b = _u32(b) & 0xFF
    sign = np.uint32(0) if unsigned else (b & 0x80)
    mag = b - sign
    h = np.where(mag != 0, mag | (16 << 10), mag) | (sign << 8)
    return fp16_to_src(h)


def unshuffle_bf16_fields(h) -> np.ndarray:
    """Sign,Man(7),Exp(8) -> Sign,Exp,Man: the inverse of Dst's BF16 field order (of the low 16 bits of h)."""
    h = _u32(h)
    return (h & 0x8000) | ((h & 0xFF) << 7) | ((h >> 8) & 0x7F)


def shuffle_bf16_fields(h) -> np.ndarray:
    """Sign,Exp(8),Man(7) -> Sign,Man(7),Exp(8): the field order Dst stores BF16 (and the high half of FP32) in (of
    the low 16 bits of h)."""
    h = _u32(h)
    return (h & 0x8000) | ((h & 0x7F) << 8) | ((h >> 7) & 0xFF)


# The two field orders as tables of every 16-bit pattern: one gather instead of five array operations (the packer
# shuffles every datum it reads as INT16). The *_fields functions above are their definition and their test's reference.
_UNSHUFFLE_BF16 = unshuffle_bf16_fields(np.arange(1 << 16, dtype=np.uint32))
_SHUFFLE_BF16 = shuffle_bf16_fields(np.arange(1 << 16, dtype=np.uint32))


def unshuffle_bf16(h) -> np.ndarray:
    return _UNSHUFFLE_BF16[_u32(h) & np.uint32(0xFFFF)]


def shuffle_bf16(h) -> np.ndarray:
    return _SHUFFLE_BF16[_u32(h) & np.uint32(0xFFFF)]


def int16_to_src(h) -> np.ndarray:
    """INT16 (opaque) -> Src: the 16 bits are placed so that a later move to a 16-bit Dst row stores them
    unchanged (the documented ((x & 0xff00) << 3) | (x & 0xff) in Src's own shuffled layout)."""
    return unshuffle_bf16(h) << 16


# ================================================================================================ packer early
def _nan_to_inf(x: np.ndarray) -> np.ndarray:
    return np.where((x & _ABS) > np.uint32(0x7F800000), (x & _SIGN) | np.uint32(0x7F800000), x)


def _round_away(x: np.ndarray, drop: int, rand: np.ndarray | None) -> np.ndarray:
    """Drop `drop` low bits of the magnitude pattern, rounding to nearest with ties away from zero (add half, then
    truncate), or stochastically when `rand` (uniform integers in [0, 2^drop)) is given: add rand, truncate. The
    carry ripples into the exponent, so overflow becomes Inf naturally. (Hardware's stochastic rounding has a
    slight bias the docs do not quantify; the unbiased form is modelled.)"""
    add = np.uint64(1 << (drop - 1)) if rand is None else np.asarray(rand, np.uint64)
    return ((x.astype(np.uint64) + add) >> np.uint64(drop)).astype(np.uint32)


def early_fp32_to_bf16(x, rand=None) -> np.ndarray:
    """Packer early conversion FP32 -> BF16 by rounding (Read_raw=0): NaN -> Inf of the same sign, round to 7
    mantissa bits (ties away from zero), then any exponent-0 result (denormal, either zero) -> +0. Returns 16 bits.
    Facts: docs/sfpu_path.md §8 (0x3F808000 -> 0x3F81, 0x7F7FFFFF -> 0x7F80, 0x007FFFFF -> 0x0080, 0x80000000
    -> 0)."""
    r = _round_away(_nan_to_inf(_u32(x)), 16, rand)
    return np.where((r & 0x7FFF) < 0x80, np.uint32(0), r).astype(np.uint32)


def early_fp32_to_bf16_trunc(x) -> np.ndarray:
    """FP32 -> BF16 by truncation (Read_raw=1): the top 16 bits; denormals/NaN become whatever truncation gives."""
    return _u32(x) >> 16


def early_fp32_to_e8m6(x, rand=None) -> np.ndarray:
    """FP32 -> E8M6 (IntermediateFormat BFP8, Read_raw=0): as early_fp32_to_bf16 but to 6 mantissa bits; kept in
    BF16 layout with mantissa bit 0 clear. Only the first dropped bit (fp32 bit 16) decides the rounding [ttsim],
    which is exactly ties-away rounding."""
    x = _nan_to_inf(_u32(x))
    if rand is None:
        r = (((x >> 16) + 1) & ~np.uint32(1)).astype(np.uint32)
    else:
        r = _round_away(x, 17, rand) << 1
    return np.where((r & 0x7FFF) < 0x80, np.uint32(0), r).astype(np.uint32)


def early_fp32_to_tf32(x, rand=None) -> np.ndarray:
    """FP32 -> TF32 by rounding: NaN -> Inf, ties-away to 10 mantissa bits, exponent-0 results -> +0. Returns the
    19-bit TF32 pattern sign[18] exp[17:10] man[9:0]."""
    r = _round_away(_nan_to_inf(_u32(x)), 13, rand)
    return np.where((r & 0x3FFFF) < 0x400, np.uint32(0), r).astype(np.uint32)


def early_int32_to_int8(x, unsigned: bool, shift: int = 0) -> np.ndarray:
    """INT32 (sign-magnitude) -> INT8 / UINT8 with Read_raw=0: shift the magnitude right (rounding on the shifted-out
    bits, ties away), then saturate: signed keeps the sign and clamps the magnitude to 127; unsigned maps negatives
    to 0 and clamps to 255."""
    x = _u32(x)
    mag = (x & _ABS).astype(np.uint64)
    if shift:
        mag = (mag + (1 << (shift - 1))) >> shift
    neg = (x >> 31).astype(bool)
    if unsigned:
        return np.where(neg, 0, np.minimum(mag, 255)).astype(np.uint32)
    return (np.where(neg, np.uint32(0x80), np.uint32(0)) | np.minimum(mag, 127).astype(np.uint32)).astype(np.uint32)


def early_int32_to_int8_raw(x, unsigned: bool) -> np.ndarray:
    """Read_raw=1: signed keeps the sign bit and the low 7 magnitude bits; unsigned keeps the low 8 bits."""
    x = _u32(x)
    return (x & 0xFF) if unsigned else ((x >> 24) & 0x80) | (x & 0x7F)


# ================================================================================================ packer late
def late_to_fp32_from16(b) -> np.ndarray:
    """BF16/E8M6 -> FP32: widen the mantissa with zeros."""
    return (_u32(b) & 0xFFFF) << 16


def late_tf32_to_fp16(t) -> np.ndarray:
    """TF32 (19-bit) -> FP16: exponent narrowing saturates (exp-112 > 31 -> 0x7FFF with sign; < 0 -> signed
    zero), the 10-bit mantissa fits."""
    t = _u32(t)
    s = (t >> 18 & 1) << 15
    e = (t >> 10 & 0xFF).astype(np.int64) - 112
    m = t & 0x3FF
    return np.where(e < 0, s, np.where(e > 31, s | 0x7FFF, s | (np.clip(e, 0, 31).astype(np.uint32) << 10) | m)
                    ).astype(np.uint32)


def late_fp32_to_bf16_for_bfp(x) -> np.ndarray:
    """FP32 -> BF16 ahead of a BFP late conversion: truncate to 16 bits; exponent-0 results -> +0 (mantissa
    narrowing flushes denormals)."""
    b = _u32(x) >> 16
    return np.where((b & 0x7FFF) < 0x80, np.uint32(0), b).astype(np.uint32)


def late_fp16_to_fp8(h, exp_4b: bool) -> np.ndarray:
    """FP16 -> FP8. E5M2: saturation is never needed, truncate the mantissa (top byte). E4M3 (Pac_LF8_4b_exp,
    [ttsim]): FP16 exponent e -> e-8; e <= 8 gives signed zero, e >= 24 saturates to 0x7F with sign, mantissa
    truncated to 3 bits."""
    h = _u32(h)
    if not exp_4b:
        return (h >> 8) & 0xFF
    s = (h >> 15 & 1) << 7
    e = (h >> 10 & 31).astype(np.int64)
    m = (h & 0x3FF) >> 7
    return np.where(e <= 8, s, np.where(e >= 24, s | 0x7F, s | (np.clip(e - 8, 0, 15).astype(np.uint32) << 3) | m)
                    ).astype(np.uint32)


# ================================================================================================ packer ReLU
def relu(v, fmt_kind: str, mode: int, threshold: int) -> np.ndarray:
    """Packers/ReLU.md on the intermediate value. `fmt_kind`: "fp32" (32-bit pattern, threshold = BF16 << 16),
    "b16" (BF16/E8M6 16-bit pattern, BF16 threshold), "tf32" (19-bit, threshold << 3), "int32" (sign-magnitude).
    Mode 1: x <= 0 -> 0. Mode 2: x <= T -> 0. Mode 3: x <= 0 -> 0, x > T -> T. Comparisons of non-negative
    patterns are integer comparisons (monotonic for sign-magnitude floats). For FP32 in mode 3 only the top 19 bits
    take part in "x > T" [ttsim] (the hardware compares at TF32 precision)."""
    v = _u32(v)
    if mode == 0:
        return v
    if fmt_kind == "int32":
        if mode != 1:
            raise ValueError("int32 ReLU supports mode 1 only")
        return np.where(v >> 31, np.uint32(0), v)
    sign_bit, thr = {"fp32": (31, threshold << 16), "b16": (15, threshold), "tf32": (18, threshold << 3)}[fmt_kind]
    thr = np.uint32(thr)
    v = np.where((v >> sign_bit) & 1, np.uint32(0), v)
    if mode == 2:
        v = np.where(v <= thr, np.uint32(0), v)
    elif mode == 3:
        big = (v >> 13) > (thr >> 13) if fmt_kind == "fp32" else v > thr
        v = np.where(big, thr, v)
    return v.astype(np.uint32)


# ================================================================================================ L1 accumulation
def _daz32(x: np.ndarray) -> np.ndarray:
    return np.where((x & _ABS) < np.uint32(0x800000), x & _SIGN, x)


def l1_acc_fp32(old, new) -> np.ndarray:
    """Pack_L1_Acc with FP32 output: denormal inputs read as signed zero, IEEE single add (round to nearest even),
    any NaN result -> 0x7FC00000, denormal results -> signed zero [ttsim]."""
    a, b = _daz32(_u32(old)), _daz32(_u32(new))
    with np.errstate(all="ignore"):
        r = (a.view(np.float32) + b.view(np.float32)).view(np.uint32)
    r = np.where((r & _ABS) > np.uint32(0x7F800000), np.uint32(0x7FC00000), r)
    return _daz32(r).astype(np.uint32)


def _f64_to_bf16_rne(r: np.ndarray) -> np.ndarray:
    u = r.view(np.uint64)
    s = (u >> np.uint64(63)).astype(np.uint32) << 15
    e = ((u >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64) - 1023 + 127
    m = u & np.uint64((1 << 52) - 1)
    lsb = (m >> np.uint64(45)) & np.uint64(1)
    mr = ((m + np.uint64((1 << 44) - 1) + lsb) >> np.uint64(45)).astype(np.int64)
    body = (np.clip(e, 0, 255) << 7) + mr
    return np.where(e <= 0, s, np.where(e >= 255, s | 0x7F80, s | body.astype(np.uint32))).astype(np.uint32)


def l1_acc_bf16(old, new) -> np.ndarray:
    """Pack_L1_Acc with BF16 output [ttsim]: +Inf + -Inf -> 0x7FC0; denormal inputs -> signed zero; a NaN input is
    read as a huge finite number (so NaN + x gives Inf); the exact sum is rounded to nearest even, exponent <= 0 ->
    signed zero, >= 255 -> Inf."""
    a, b = _u32(old) & 0xFFFF, _u32(new) & 0xFFFF
    infs = ((a == 0x7F80) & (b == 0xFF80)) | ((a == 0xFF80) & (b == 0x7F80))
    a = np.where((a & 0x7FFF) < 0x80, a & 0x8000, a)
    b = np.where((b & 0x7FFF) < 0x80, b & 0x8000, b)
    with np.errstate(all="ignore"):
        fa = (a << 16).view(np.float32).astype(np.float64)
        fb = (b << 16).view(np.float32).astype(np.float64)
    # NaN operands: the accumulator side reads as the largest float64 normal, the new side as 2^128 * 1.mant
    big_a = np.where(a & 0x8000, -1.0, 1.0) * np.finfo(np.float64).max
    big_b = np.where(b & 0x8000, -1.0, 1.0) * (1 + (b & 0x7F) / 128.0) * 2.0 ** 128
    fa = np.where((a & 0x7FFF) > 0x7F80, big_a, fa)
    fb = np.where((b & 0x7FFF) > 0x7F80, big_b, fb)
    with np.errstate(all="ignore"):
        r = np.asarray(fa + fb, np.float64)
    return np.where(infs, np.uint32(0x7FC0), _f64_to_bf16_rne(r)).astype(np.uint32)


def l1_acc_fp16(old, new) -> np.ndarray:
    """Pack_L1_Acc with FP16 output [ttsim]: inputs with a non-zero exponent are normals (no Inf/NaN), exponent-0
    inputs are signed zeros; the sum (IEEE single) is rounded to nearest even into FP16, saturating at 0x7FFF,
    results below the normal range -> signed zero (exponent field 0) or, if the exponent underflows further,
    0x7FFF with sign; an exact cancellation gives signed zero, or 0x7FFF with sign when the accumulator's exponent
    is 30 or 31 (a quirk of the modelled hardware path)."""
    a, b = _u32(old) & 0xFFFF, _u32(new) & 0xFFFF

    def widen(h):
        s = (h & 0x8000) << 16
        return np.where((h & 0x7FFF) >= 0x400, s | (((h & 0x7FFF) << 13) + (112 << 23)), s).astype(np.uint32)
    with np.errstate(all="ignore"):
        r = (widen(a).view(np.float32) + widen(b).view(np.float32)).view(np.uint32)
    sign = (r >> 16) & 0x8000
    zero = (r & _ABS) == 0
    e = (r >> 23 & 0xFF).astype(np.int64) - 112
    m = r & 0x7FFFFF
    lsb = (m >> 13) & 1
    packed = (np.clip(e, 0, None).astype(np.uint32) << 10) + ((m + (1 << 12) - 1 + lsb) >> 13)
    norm = np.where(packed < 0x8000, packed, np.uint32(0x7FFF))
    out = np.where(e <= 0, np.where(e < 0, np.uint32(0x7FFF), np.uint32(0)), norm)
    out = np.where(zero, np.where((a >> 10 & 31) >= 30, np.uint32(0x7FFF), np.uint32(0)), out)
    return (sign | out).astype(np.uint32)


# ================================================================================================ 16-bit Dst reads
# Dst16b holds BF16 as Sign,Man(7),Exp(8) and FP16 as Sign,Man(10),Exp(5) (WH UNPACR_Regular.md WriteDstBF16 /
# WriteDstFP16); the packer undoes that order before its early conversion.
def dst16_to_fp16(h) -> np.ndarray:
    h = _u32(h)
    return (h & 0x8000) | ((h & 0x1F) << 10) | ((h >> 5) & 0x3FF)


def fp16_to_dst16(h) -> np.ndarray:
    h = _u32(h)
    return (h & 0x8000) | ((h & 0x3FF) << 5) | ((h >> 10) & 0x1F)


def early_fp16(h, read_raw: bool = False) -> np.ndarray:
    """FP16 -> FP16 early conversion: "rounding" flushes exponent-0 values (denormals, -0) to +0; Read_raw keeps
    them (identity)."""
    h = _u32(h)
    return h if read_raw else np.where((h & 0x7FFF) < 0x400, np.uint32(0), h).astype(np.uint32)


def early_fp16_to_e5m6(h) -> np.ndarray:
    """FP16 -> E5M6 (IntermediateFormat BFP8a, Read_raw=0): round 10 -> 6 mantissa bits ties away, saturating at the
    largest E5M6 magnitude (0x7FF0), then exponent-0 results -> +0 [ttsim for the saturation point]."""
    h = _u32(h)
    h = np.where((h & 0x7FFF) > 0x7FF7, (h & 0x8000) | 0x7FF0, h)
    h = (h + 8) & ~np.uint32(15)
    return np.where((h & 0x7FFF) < 0x400, np.uint32(0), h).astype(np.uint32)


def early_bf16_to_fp16(b) -> np.ndarray:
    """BF16 -> FP16 early conversion on Blackhole (Round_10b_mant with an FP16 intermediate): exponent re-biased
    (e - 112), below 0 -> signed zero, above 31 -> 0x7FFF with sign, mantissa widened with zeros [ttsim]."""
    b = _u32(b)
    s = b & 0x8000
    e = (b >> 7 & 0xFF).astype(np.int64) - 112
    m = (b & 0x7F) << 3
    return np.where(e < 0, s, np.where(e > 31, s | 0x7FFF, s | (np.clip(e, 0, 31).astype(np.uint32) << 10) | m)
                    ).astype(np.uint32)


def early_bf16(b, e8m6: bool = False, read_raw: bool = False) -> np.ndarray:
    """BF16 -> BF16 (or E8M6) early conversion. Rounding (Read_raw=0): NaN -> Inf, exponent 0 -> +0, and for E8M6
    mantissa bit 0 rounds away ((b + 1) & ~1). Read_raw=1: identity (E8M6 by truncation)."""
    b = _u32(b)
    if read_raw:
        return (b & ~np.uint32(1)) if e8m6 else b
    b = np.where((b & 0x7FFF) > 0x7F80, (b & 0x8000) | 0x7F80, b)
    b = np.where((b & 0x7FFF) < 0x80, np.uint32(0), b)
    if e8m6:
        b = (b + 1) & ~np.uint32(1)
    return b.astype(np.uint32)


def late_fp16_to_fp32(h) -> np.ndarray:
    """FP16 -> FP32 (late, exponent widens): re-bias by 112; an exponent-0 input only has its mantissa widened
    (no re-bias), producing an FP32 zero/denormal - the "denormals mishandled" case of the docs."""
    h = _u32(h)
    s = (h & 0x8000) << 16
    return np.where(h & 0x7C00, s | (((h & 0x7FFF) + (112 << 10)) << 13), s | ((h & 0x3FF) << 13)).astype(np.uint32)


def late_fp16_to_bf16(h) -> np.ndarray:
    """FP16 (or E5M6) -> BF16 (late; also ahead of BFP8): exponent re-biased, mantissa truncated to 7 bits,
    exponent-0 inputs -> +0."""
    h = _u32(h)
    e = (h >> 10) & 0x1F
    return np.where(e == 0, np.uint32(0), (h & 0x8000) | ((e + 112) << 7) | ((h & 0x3FF) >> 3)).astype(np.uint32)
