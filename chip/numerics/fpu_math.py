"""Bit-level numerics of the Matrix Unit (FPU): fidelity-phase products, MVMUL's group-of-8 alignment, ELWADD/ELWSUB
and the accumulate-normalise-encode step into Dst. Pure numpy, no emulator state, so the lowering's error model can use
the same numbers as the emulator.

Facts: docs/fpu_path.md §10.1-10.3 (verified on ttsim), docs/isa.md §4, WH ELWMUL.md / MVMUL.md / ELWADD.md.

Value conventions (all arrays of unsigned integers, any shape that broadcasts):
* Src datum ("src32"): the 32-bit fp32-layout word a Src register holds (low 13 bits zero for float data).
  `src19(src32, fmt)` gives the multiplier's 19-bit view sign[18] exp[17:10] man[9:0] for a Src format code.
* Dst value ("dst32"): a *plain* (unshuffled) 32-bit word in fp32 layout. With a 16-bit Dst the caller passes BF16 as
  `bf16 << 16` and FP16 as `fp16_to_dst32(fp16)`, and converts the result back (`dst32_to_fp16`, `>> 16`).
* A "term" is (sign, exp, man): an integer magnitude whose implicit bit sits at bit 23 (products: bits 23/24 of a
  12-bit product << 13), with a biased exponent.
"""
from __future__ import annotations

import numpy as np

I64 = np.int64

# Src format codes (Tensix data format numbering)
FP32, FP16, BFP8, BFP4, TF32, BF16, BFP8_B, BFP4_B = 0, 1, 2, 3, 4, 5, 6, 7
INT32, INT16, FP8, INT8, BFP2_B = 8, 9, 10, 14, 15
# Formats the FPU reads with a 5-bit exponent (FP16 style); TF32 keeps 10 mantissa bits; every other float format is
# read with BF16 precision (docs/fpu_path.md §3, "Src format the multiplier sees").
FMT_5BIT_EXP = frozenset({FP16, FP8})
# Phase sets of tt-metal's MathFidelity (number of phases = LoFi 1, HiFi2 2, HiFi3 3, HiFi4 4)
FIDELITY_PHASES = {"LoFi": 1, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}     # fidelity -> number of multiplier phases
PHASES_OF = {fid: tuple(range(n)) for fid, n in FIDELITY_PHASES.items()}   # fidelity -> the phases it runs, in order

# Per phase: (SrcA slice of the 11-bit significand, SrcB slice, exponent offset) -- docs/isa.md §4, docs/fpu_path.md §10.1.
# Phase bit 0 selects SrcA's low half (mantissa bits 5..1), bit 1 SrcB's low half (mantissa bits 3..0, scaled to 7 bits).
PHASE_EXP_OFFSET = {0: 0, 1: -5, 2: -7, 3: -12}


def _a_slice(man11, phase):
    return np.where(phase & 1, (man11 >> 1) & 31, man11 >> 6)


def _b_slice(man11, phase):
    return np.where(phase & 2, (man11 & 15) << 3, man11 >> 4)


def src19_mask(fmt: int) -> int:
    """The bits of a Src word the multiplier reads: FP16/FP8 lose the 3 high exponent bits of the fp32 layout (they are
    zero for data the unpacker wrote), TF32 is used as is, every other format is truncated to BF16."""
    if fmt in FMT_5BIT_EXP:
        return 0x8FFFE000
    return 0xFFFFFFFF if fmt == TF32 else 0xFFFF0000


def src19(src32, fmt: int) -> np.ndarray:
    """Src word -> the multiplier's 19-bit view (bits 31..13 of the word src19_mask keeps)."""
    return (np.asarray(src32, dtype=I64) & src19_mask(fmt)) >> 13 & 0x7FFFF


def is_zero19(x19) -> np.ndarray:
    """Exponent field 0 (zero or denormal): the FPU treats the operand as zero."""
    return (np.asarray(x19, I64) & 0x3FFFF) < 0x400


def exp_prod_adj(fp32_acc: bool, phase, exp8: bool):
    """Exponent bias of a product term: two biased 8-bit exponents -> one (-127); two FP16 exponents -> FP32 bias into an
    FP32 Dst (+127-30) or FP16 bias into an FP16 Dst (-15); minus the phase's slice offset."""
    base = -127 if exp8 else (127 - 30 if fp32_acc else -15)
    phase = np.asarray(phase, I64)
    return base - np.where(phase & 1, 5, 0) - np.where(phase & 2, 7, 0)


def _clz_shift(man):
    """Left shift that puts the leading one of man (> 0, < 2**31) at bit 23 (negative: a right shift)."""
    bitlen = np.frexp(man.astype(np.float64))[1].astype(I64)      # exact for man < 2**53
    return 24 - bitlen


def _align(man, exp, target, bias):
    """Shift a term right from exp to target, adding half an ulp minus `bias` (terms: the sign, so ties of negative
    terms go toward +inf; Dst: 0, ties away from zero). Shifts of 31 or more give 0."""
    d = target - exp
    # (here and below np.minimum/np.maximum, not np.clip: the same values, without np.clip's per-call dtype checks,
    # measured at a third of accumulate's time in the emulator's MVMUL path)
    ds = np.minimum(np.maximum(d, 1), 30)
    shifted = np.where(d < 31, (man + (np.int64(1) << (ds - 1)) - bias) >> ds, 0)
    return np.where(d > 0, shifted, man)


def accumulate(terms, dst32, fp32_acc: bool = True, exp8: bool = True) -> np.ndarray:
    """Add up to two terms [(sign, exp, man), ...] to a Dst value and renormalise (docs/fpu_path.md §10.2): align everything to
    the largest exponent (E <= 0 -> +0), with a 16-bit Dst round away the 13 low bits of every operand, integer sum
    (0 -> +0), renormalise to 24 bits (16-bit Dst: to 8 or 11 bits) rounding half up, exponent <= 0 -> +0, overflow ->
    Inf (8-bit exponent) or the FP16 maximum. Returns plain fp32-layout words (uint32)."""
    dst = np.asarray(dst32, dtype=I64)
    sign_d = dst >> 31 & 1
    exp_d = dst >> 23 & 0xFF
    man_d = np.where(exp_d == 0, 0, (dst & 0x7FFFFF) | 0x800000)
    terms = [tuple(np.asarray(v, I64) for v in t) for t in terms]
    e = exp_d
    for _, te, _ in terms:
        e = np.maximum(e, te)
    early_zero = e <= 0
    man = _align(man_d, exp_d, e, 0)
    if not fp32_acc:
        man = (man + 4096) & ~0x1FFF
    for ts, te, tm in terms:
        tm = _align(tm, te, e, ts)
        if not fp32_acc:
            tm = (tm + 4096 - ts) & ~0x1FFF
        man = np.where(ts == sign_d, man + tm, man - tm)
    sign = np.where(man < 0, sign_d ^ 1, sign_d)
    man = np.abs(man)
    zero = early_zero | (man == 0)
    man = np.where(zero, 1, man)
    shift = _clz_shift(man)
    e = e - shift
    if not fp32_acc:
        shift = shift - (16 if exp8 else 13)
    rs = np.minimum(np.maximum(-shift, 1), 62)
    man = np.where(shift < 0, (man + (np.int64(1) << (rs - 1))) >> rs, man << np.minimum(np.maximum(shift, 0), 62))
    if not fp32_acc:
        man = man << (16 if exp8 else 13)
    e = np.where(man & 0x1000000, e + 1, e)
    man = man & 0x7FFFFF
    out = (sign << 31) | (np.minimum(np.maximum(e, 0), 255) << 23) | man
    if fp32_acc or exp8:
        out = np.where(e >= 255, (sign << 31) | (0xFF << 23), out)
    else:
        out = np.where(e >= 32, (sign << 31) | (31 << 23) | (0x3FF << 13), out)
    out = np.where(zero | (e <= 0), 0, out)
    return out.astype(np.uint32)


def product_terms(a19, b19, phase, fp32_acc: bool = True, exp8: bool = True, zero_a=None, zero_b=None):
    """One fidelity phase of a * b: (sign, exp, man) with man = sliceA * sliceB (at most 12 bits, 1.0*1.0 in phase 0 is
    16*64 = 1024), exp = ea + eb + exp_prod_adj. A zero operand (or a product exponent <= 0) gives the zero term
    (sign 0, man 0, exp max(adj, 0)): its exponent still takes part in the alignment."""
    a = np.asarray(a19, I64)
    b = np.asarray(b19, I64)
    phase = np.asarray(phase, I64)
    adj = exp_prod_adj(fp32_acc, phase, exp8)
    za = is_zero19(a) if zero_a is None else zero_a
    zb = is_zero19(b) if zero_b is None else zero_b
    exp = (a >> 10 & 0xFF) + (b >> 10 & 0xFF) + adj
    man = _a_slice((a & 0x3FF) | 0x400, phase) * _b_slice((b & 0x3FF) | 0x400, phase)
    sign = (a >> 18 ^ b >> 18) & 1
    zero = za | zb | (exp <= 0)
    zexp = np.maximum(adj, 0)
    return np.where(zero, 0, sign), np.where(zero, zexp, exp), np.where(zero, 0, man)


def elwmul19(a19, b19, dst32, phase, fp32_acc: bool = True, exp8: bool = True, zero_b=None) -> np.ndarray:
    """ELWMUL of 19-bit operands: Dst + one phase's product, one rounding step. `zero_b` overrides SrcB's zero test
    (with ALU_ACC_CTRL_Zero_Flag_disabled_src SrcB denormals are not flushed)."""
    s, e, m = product_terms(a19, b19, phase, fp32_acc, exp8, zero_b=zero_b)
    return accumulate([(s, e, m << 13)], dst32, fp32_acc, exp8)


def mvmul19(a19, b19, dst32, phase, fp32_acc: bool = True, exp8: bool = True) -> np.ndarray:
    """MVMUL of 19-bit operands: a19 is SrcA (16 k x 16 n), b19 SrcB (R m x 16 k), dst32 (R, 16).
    Per output and phase the 16 products form two groups (k 0..7, 8..15); each group is aligned to its largest product
    exponent Eg (magnitude m shifted by d: floor((2m + 2^d) / 2^(d+1)), d <= 30), summed as signed integers into one
    term (Eg <= 0: the group is 0), then both terms and Dst are accumulated with one rounding (docs/fpu_path.md §10.3)."""
    return accumulate(_group_terms(np.asarray(a19, I64), np.asarray(b19, I64), phase, fp32_acc, exp8), dst32,
                      fp32_acc, exp8)


def _group_terms(a, b, phase, fp32_acc: bool, exp8: bool) -> list:
    """MVMUL's two group terms for a (..., k, n) and b (..., m, k): (sign, exp, man) arrays of shape (..., m, n); the
    leading dimensions (and `phase`'s: a scalar or (..., 1, 1, 1)) broadcast, so independent MVMULs are computed at once.
    This is the bulk of an MVMUL's time, so each of the m * 16 * n products is touched as few times as numpy allows,
    in int32 (exponents stay within +-2^13, doubled products below 2^13):
    * operand facts (exponent plus the phase's bias, mantissa slice, sign) are prepared on the small SrcA/SrcB arrays;
      a zero operand gets exponent _ZERO_EXP and slice 0, so its products align to 0 and never raise a group maximum
      above the zero term's exponent max(adj, 0) (clamped in only where that is positive);
    * a product of non-zero operands with exponent <= 0 is zeroed, a pass made only when the operands' smallest
      exponents allow one;
    * the round-half-up shift floor(m / 2^d + 1/2) is ((2m >> d) + 1) >> 1 (numpy's shift gives 0 for d >= 32);
    * the signs and the group sum are one einsum."""
    phase = np.asarray(phase, I64)
    p_small = phase[..., 0] if phase.ndim else phase            # aligned with a (..., k, n) and b (..., m, k)
    adj = exp_prod_adj(fp32_acc, p_small, exp8)
    ea, eb = a >> 10 & 0xFF, b >> 10 & 0xFF
    a_zero, b_zero = ea == 0, eb == 0                           # is_zero19
    a_exp = np.where(a_zero, _ZERO_EXP, ea).astype(np.int32)
    b_exp = (np.where(b_zero, _ZERO_EXP, eb) + adj).astype(np.int32)
    a_man = np.where(a_zero, 0, _a_slice((a & 0x3FF) | 0x400, p_small)).astype(np.int32)
    b_man = np.where(b_zero, 0, _b_slice((b & 0x3FF) | 0x400, p_small)).astype(np.int32)
    a_sgn = (1 - 2 * (a >> 18 & 1)).astype(np.int32)
    b_sgn = (1 - 2 * (b >> 18 & 1)).astype(np.int32)
    k8 = lambda x: x.reshape(x.shape[:-2] + (2, 8) + x.shape[-1:])[..., None, :, :, :]    # (..., 1, g, 8, n)
    g8 = lambda x: x.reshape(x.shape[:-1] + (2, 8))[..., None]                           # (..., m, g, 8, 1)
    exp = k8(a_exp) + g8(b_exp)                                                          # (..., m, g, 8, n)
    # a non-zero a * b underflows (exponent <= 0) only if the smallest exponents can: then such products are zeroed
    live_a, live_b = ea[~a_zero], eb[~b_zero]
    underflow = None
    if live_a.size and live_b.size and live_a.min() + live_b.min() + np.min(adj) <= 0:
        underflow = exp <= 0
    zexp = np.maximum(adj, 0)
    if np.any(zexp > 0):
        np.maximum(exp, (zexp[..., None, None] if zexp.ndim else zexp), out=exp)
    emax = exp.max(axis=-2)                                                              # (..., m, g, n)
    d = np.subtract(emax[..., None, :], exp, out=exp)
    man = k8(a_man << 1) * g8(b_man)                                                    # 2 * product
    if underflow is not None:
        man[underflow] = 0
    man >>= d                     # ((2m >> d) + 1) >> 1 = floor(m / 2^d + 1/2), also for d = 0
    man += 1
    man >>= 1
    tot = np.einsum("...mgkn,...gkn,...mgk->...mgn", man, k8(a_sgn)[..., 0, :, :, :], g8(b_sgn)[..., 0])
    live = emax > 0
    terms = []
    for g in (0, 1):
        lv, t = live[..., g, :], tot[..., g, :].astype(I64)
        terms.append((np.where(lv & (t < 0), 1, 0), np.where(lv, emax[..., g, :], 0).astype(I64),
                      np.where(lv, np.abs(t), 0) << 13))
    return terms


_ZERO_EXP = -(1 << 12)      # _group_terms: a zero operand's exponent (any product with it has exponent <= 0)


BATCH_PRODUCTS = 1 << 20    # products per batch of mvmul19_steps (bounds its int64 temporaries to some 100 MB)


def mvmul19_steps(a19, b19, phases, dst32, fp32_acc: bool = True, exp8: bool = True) -> np.ndarray:
    """S MVMULs in a row into one Dst: step s is mvmul19(a19[s], b19[s], dst, phases[s]) on the previous step's dst
    (a19 (S, 16 k, n), b19 (S, m, 16 k), dst32 (m, n)). The same bits as the loop over mvmul19 (the reference): the
    products and group sums do not depend on Dst, so they are computed for a batch of steps at once and only the
    accumulation runs step by step."""
    a, b = np.asarray(a19, I64), np.asarray(b19, I64)
    phases = np.asarray(phases, I64)
    steps = phases.shape[0]
    per = max(1, BATCH_PRODUCTS // max(1, b.shape[-2] * 16 * a.shape[-1]))
    dst = dst32
    for lo in range(0, steps, per):
        hi = min(lo + per, steps)
        (s0, e0, m0), (s1, e1, m1) = _group_terms(a[lo:hi], b[lo:hi], phases[lo:hi, None, None, None], fp32_acc,
                                                  exp8)
        for i in range(hi - lo):
            dst = accumulate([(s0[i], e0[i], m0[i]), (s1[i], e1[i], m1[i])], dst, fp32_acc, exp8)
    return dst


def mvmul19_batch(a19, b19, phases, slots, dst, fp32_acc: bool = True, exp8: bool = True) -> np.ndarray:
    """S MVMULs applied in order, step s onto dst[slots[s]]: step s is mvmul19(a19[s], b19[s], dst[slots[s]],
    phases[s]) on the value the earlier steps left there (a19 (S, 16 k, n), b19 (S, m, 16 k), dst (U, m, n) plain
    words). Returns the new dst (int64). The same bits as that loop over mvmul19 (the reference): the products and
    group sums do not depend on Dst, so they are computed for all steps at once, and accumulate works element by
    element, so a wave of steps onto distinct slots accumulates in one call."""
    a, b = np.asarray(a19, I64), np.asarray(b19, I64)
    phases = np.asarray(phases, I64)
    dst = np.array(dst, I64)
    steps = len(slots)
    per = max(1, BATCH_PRODUCTS // max(1, b.shape[-2] * 16 * a.shape[-1]))
    for lo in range(0, steps, per):
        hi = min(lo + per, steps)
        (s0, e0, m0), (s1, e1, m1) = _group_terms(a[lo:hi], b[lo:hi], phases[lo:hi, None, None, None], fp32_acc,
                                                  exp8)
        i = lo
        while i < hi:
            j, seen = i, set()
            while j < hi and slots[j] not in seen:     # the longest wave of distinct slots from step i
                seen.add(slots[j])
                j += 1
            idx = np.asarray(slots[i:j])
            w = slice(i - lo, j - lo)
            dst[idx] = accumulate([(s0[w], e0[w], m0[w]), (s1[w], e1[w], m1[w])], dst[idx], fp32_acc, exp8)
            i = j
    return dst


def elwadd19(a19, b19, dst32, fp32_acc: bool = True, exp8: bool = True, accumulate_dst: bool = False,
             zero_a=None, zero_b=None) -> np.ndarray:
    """ELWADD of 19-bit operands (negate b19's sign bit for ELWSUB): the smaller magnitude is aligned to the larger on an
    11-bit significand grid (round half up; 12 or more bits apart -> 0), integer sum, then accumulated into Dst (or into
    0 unless `accumulate_dst`) like every Dst write. No fidelity phases."""
    a = np.asarray(a19, I64)
    b = np.asarray(b19, I64)
    a = np.where(is_zero19(a) if zero_a is None else zero_a, 0, a)
    b = np.where(is_zero19(b) if zero_b is None else zero_b, 0, b)
    swap = (a & 0x3FFFF) < (b & 0x3FFFF)
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    sa, sb = a >> 18 & 1, b >> 18 & 1
    ea, eb = a >> 10 & 0xFF, b >> 10 & 0xFF
    ma = np.where(a != 0, (a & 0x3FF) | 0x400, 0)
    mb = np.where(b != 0, (b & 0x3FF) | 0x400, 0)
    d = ea - eb
    ds = np.minimum(np.maximum(d, 1), 11)
    mb = np.where(d <= 0, mb, np.where(d < 12, (mb + (np.int64(1) << (ds - 1))) >> ds, 0))
    man = np.where(sa == sb, ma + mb, ma - mb) << 13
    exp = ea
    if fp32_acc and not exp8:       # FP16 operands into an FP32 Dst: rebias (a zero sum keeps a clamped exponent)
        exp = np.where(ea != 0, ea + 127 - 15, 127 - 30)
    dst = dst32 if accumulate_dst else np.zeros_like(np.asarray(dst32))
    return accumulate([(sa, exp, man)], dst, fp32_acc, exp8)


# ---------------------------------------------------------------------------------------------- format-level wrappers
def _fmts(src_fmt):
    return (src_fmt, src_fmt) if isinstance(src_fmt, int) else tuple(src_fmt)


def mvmul(srca_bits, srcb_bits, dst_bits, phase: int, src_fmt=BF16, dst_fp32: bool = True) -> np.ndarray:
    """Dst(R x 16) += SrcB(R x 16) @ SrcA(16 x 16) for one fidelity phase. Src words as Src holds them, `src_fmt` one
    code or (SrcA, SrcB); dst_bits/result are plain fp32-layout words (see the module docstring for 16-bit Dst)."""
    fa, fb = _fmts(src_fmt)
    exp8 = fa not in FMT_5BIT_EXP
    return mvmul19(src19(srca_bits, fa), src19(srcb_bits, fb), dst_bits, phase, dst_fp32, exp8)


def elwmul(a, b, dst, phase: int, src_fmt=BF16, dst_fp32: bool = True) -> np.ndarray:
    """Dst += A * B element-wise for one fidelity phase (Src words, plain Dst words)."""
    fa, fb = _fmts(src_fmt)
    return elwmul19(src19(a, fa), src19(b, fb), dst, phase, dst_fp32, fa not in FMT_5BIT_EXP)


def elwadd(a, b, dst, src_fmt=BF16, dst_fp32: bool = True, accumulate_dst: bool = False, sub: bool = False):
    """Dst (+)= A + B (or A - B) element-wise (Src words, plain Dst words)."""
    fa, fb = _fmts(src_fmt)
    b19 = src19(b, fb)
    if sub:
        b19 = b19 ^ (1 << 18)
    return elwadd19(src19(a, fa), b19, dst, dst_fp32, fa not in FMT_5BIT_EXP, accumulate_dst)


def fidelity_product(a, b, dst, phases, kind: str = "elwmul", src_fmt=BF16, dst_fp32: bool = True):
    """Run the phases in order (e.g. PHASES_OF['HiFi4']), each accumulating into Dst: the full FPU result."""
    fn = elwmul if kind == "elwmul" else mvmul
    for p in phases:
        dst = fn(a, b, dst, p, src_fmt, dst_fp32)
    return dst


# ---------------------------------------------------------------------------------------------- 16-bit Dst values
def fp16_to_dst32(h):
    """FP16 bits -> the fp32-layout word the FPU works on (sign[31], 5-bit exponent at [27:23], mantissa [22:13])."""
    h = np.asarray(h, I64)
    return (((h & 0x8000) << 16) | ((h & 0x7FFF) << 13)).astype(np.uint32)


def dst32_to_fp16(x):
    x = np.asarray(x, I64)
    return (((x & 0x80000000) >> 16) | ((x & 0x0FFFE000) >> 13)).astype(np.uint32)


# ---------------------------------------------------------------------------------------------- INT8 math
def src_int8(src32, mask: int) -> np.ndarray:
    """Src INT8 (sign + 10-bit magnitude at fp32 mantissa bits [22:13]) under a fidelity mask -> signed int."""
    x = np.asarray(src32, I64) & mask
    m = (x >> 13) & 0x3FF
    return np.where(x >> 31 & 1, -m, m)


# fidelity masks on the fp32-layout word (WH ELWMUL.md ReadSrcInt8 masks moved to the Src word layout; ttsim BH)
INT8_A_MASK = {0: 0x801C0000, 1: 0x8003E000}     # phase & 1: magnitude bits 4..0, else bits 7..5
INT8_B_MASK = {0: 0x807E0000, 2: 0x8001E000}     # phase & 2: magnitude bits 3..0, else bits 9..4


def int8_operands(srca_bits, srcb_bits, phase: int, flush_b: bool = True):
    a = np.asarray(srca_bits, I64)
    b = np.asarray(srcb_bits, I64)
    a = np.where(a & 0x7F800000, a, 0)              # SrcA exponent-0 data is always zero
    if flush_b:
        b = np.where(b & 0x7F800000, b, 0)
    return src_int8(a, INT8_A_MASK[phase & 1]), src_int8(b, INT8_B_MASK[phase & 2])


def int32_from_dst(x):
    x = np.asarray(x, I64)
    m = x & 0x7FFFFFFF
    return np.where(x >> 31 & 1, -m, m)


def int32_to_dst(v):
    v = np.asarray(v, I64)
    return np.where(v < 0, 0x80000000 | -v, v).astype(np.uint32)


def saturate_add_int32(x, y):
    return np.clip(np.asarray(x, I64) + y, -0x7FFFFFFF, 0x7FFFFFFF)


# ---------------------------------------------------------------------------------------------- GMPOOL (WH GMPOOL.md)
# GMPOOL.md's functional model works on "Datum"s (Sign u1, Exponent u9, MagOrMan u10) read from Src in the page's
# 19-bit layout Sign[18] Man[17:8] Exp[7:0] and from Dst in its *storage* layout (Sign, Man/MagMiddle hi 7 bits,
# Exp/MagHi 8 bits, low 16 bits). The emulator keeps Src words in fp32 layout and Dst32b unshuffled, so the helpers
# below convert at the boundary and otherwise transcribe the page. No ttsim oracle for ArgMax or SrcB scaling
# (ttsim refuses them); ttsim agrees with this model on its subset (scale 1.0, BF16/TF32, no ArgMax).
S_BF16, S_FP16, S_TF32, S_INT8, S_INT32 = "BF16", "FP16", "TF32", "INT8", "INT32"
# SrcA format classes of the page (its BFP8/BFP4/BFP2 are the 8-bit-exponent "_b" codes, BFPxa the 5-bit ones)
POOL_BF16_FMTS = frozenset({FP32, BF16, BFP8_B, BFP4_B, BFP2_B, INT32, INT16})
POOL_FP16_FMTS = frozenset({FP16, FP8, BFP8, BFP4, 11, INT8})        # 11 = BFP2 (5-bit exponent)
GMPOOL_VISIT_ORDER = tuple(i ^ 4 if i < 8 else i for i in range(16))    # rows 4..7, 0..3, 8..15
GMPOOL_INDEX_TRANSFORM = (0, 3, 6, 1, 4, 7, 2, 5)                       # NONLINEAR_I_TRANSFORM of SrcA rows 0..7


def gmpool_styles(srca_fmt: int, int8: bool, fp16a_force: bool, fp32_dst: bool, argmax: bool):
    """(SrcAStyle, DstStyle, UseDst32b) as GMPOOL.md derives them; ValueError for a format code outside its lists."""
    if fp16a_force:
        return S_FP16, S_FP16, False
    if int8:
        return S_INT8, S_INT32, True
    if srca_fmt in POOL_BF16_FMTS:
        return S_BF16, (S_BF16 if argmax and fp32_dst else (S_TF32 if fp32_dst else S_BF16)), fp32_dst
    if srca_fmt in POOL_FP16_FMTS:
        return S_FP16, (S_FP16 if argmax and fp32_dst else (S_TF32 if fp32_dst else S_FP16)), fp32_dst
    if srca_fmt == TF32:
        return S_TF32, (S_INT32 if argmax else (S_TF32 if fp32_dst else S_BF16)), fp32_dst
    raise ValueError(f"SrcA format {srca_fmt} is in none of GMPOOL.md's format lists")


def src_to_doc19(src32) -> np.ndarray:
    """Src word (fp32 layout: sign[31] exp[30:23] man[22:13]) -> the ISA pages' Sign[18] Man[17:8] Exp[7:0]."""
    x = np.asarray(src32, I64)
    return ((x >> 31 & 1) << 18) | (((x >> 13) & 0x3FF) << 8) | ((x >> 23) & 0xFF)


def dst_to_storage(plain32) -> np.ndarray:
    """Unshuffled Dst32b value -> Dst.md storage bits (high half Sign,Exp8,Man7 -> Sign,Man7,Exp8; low half as is).
    Integer "32" uses the same permutation (MagHi = plain bits 30:23, MagMiddle = 22:16)."""
    x = np.asarray(plain32, I64)
    hi = x >> 16 & 0xFFFF
    return ((hi & 0x8000) | ((hi & 0x7F) << 8) | ((hi >> 7) & 0xFF)) << 16 | (x & 0xFFFF)


def dst_from_storage(bits32) -> np.ndarray:
    x = np.asarray(bits32, I64)
    hi = x >> 16 & 0xFFFF
    return ((hi & 0x8000) | ((hi & 0xFF) << 7) | ((hi >> 8) & 0x7F)) << 16 | (x & 0xFFFF)


def pool_read_src(a19, style: str, b19):
    """ReadAndScaleSrc: SrcA datum scaled by the exponent of the SrcB datum (Sign, Exponent, MagOrMan)."""
    a, b = np.asarray(a19, I64), np.asarray(b19, I64)
    ea, eb = a & 0xFF, b & 0xFF
    man = (a >> 8) & 0x3FF
    if style == S_INT8:
        exp, man = np.zeros_like(ea), man
    elif style == S_FP16:
        exp = (ea & 0x1F) + (eb & 0x1F)
    elif style == S_TF32:
        exp = ea + eb
    else:
        exp, man = ea + eb, man & 0x3F8
    sign = a >> 18 & 1
    ninf, zero = eb == 0, ea == 0                      # SrcB exponent 0: -inf (ignored); SrcA exponent 0: +0
    sign = np.where(ninf, 1, np.where(zero, 0, sign))
    exp = np.where(ninf, 0x1FF, np.where(zero, 0, exp)) & 0x1FF
    man = np.where(ninf, 0x3FF, np.where(zero, 0, man)) & 0x3FF
    return sign, exp, man


def pool_read_dst(bits32, style: str):
    """ReadDst: a Dst storage word as a Datum in the scaled domain (float exponents + bias)."""
    v = np.asarray(bits32, I64)
    sign = v >> 31 & 1
    if style == S_INT32:
        man = v & 0x3FF
        exp = ((v >> 10) & 0x3F) + (((v >> 24) & 7) << 6)
    elif style == S_FP16:
        exp = ((v >> 16) & 0x1F) + 15
        man = (v >> 21) & 0x3FF
    else:
        exp = ((v >> 16) & 0xFF) + 127
        man = ((v >> 24) & 0x7F) << 3
        if style == S_TF32:
            man = man + ((v >> 13) & 7)
    return sign, exp & 0x1FF, man & 0x3FF


def pool_write_dst(sign, exp, man, style: str) -> np.ndarray:
    """WriteDst: a Datum back to Dst storage bits (the exponent bias is removed with wraparound, as on the page)."""
    sign, exp, man = (np.asarray(v, I64) for v in (sign, exp, man))
    if style == S_INT32:
        return (sign << 31) | ((exp & 7) << 10) | man
    if style == S_FP16:
        return np.where((exp & 0x3F) == 0, 0, (sign << 31) | (man << 21) | (((exp - 15) & 0x1F) << 16))
    x = (sign << 31) | ((man & 0x3F8) << 21) | (((exp - 127) & 0xFF) << 16)
    if style == S_TF32:
        x = x + ((man & 7) << 13)
    return np.where(exp == 0, 0, x)


def pool_key(sign, exp, man) -> np.ndarray:
    """AsComparable: sign-magnitude order of (Exponent, MagOrMan)."""
    m = (np.asarray(exp, I64) << 10) + np.asarray(man, I64)
    return np.where(np.asarray(sign, I64) == 1, -m, m)


def gmpool(srca_rows, srcb_row, dst_bits, src_style: str, dst_style: str, argmax: bool) -> np.ndarray:
    """GMPOOL.md on one Dst row: srca_rows (16, 16) and srcb_row (16,) Src words (fp32 layout), dst_bits (16,) the
    Dst row's storage bits (undefined: all ones). Returns the new storage bits of that row (uint32 values in int64).
    SrcA row i is scaled by SrcB column i; rows are visited 4..7, 0..3, 8..15 and a later value wins a tie (`>=`);
    the ArgMax index follows rows 0..7 only, through GMPOOL_INDEX_TRANSFORM, plus the Dst row's index phase.
    The page's sequential scan, vectorised: the running max ends at the *last* position holding the largest key, and
    position p updates the index iff its key >= the max of the keys before it."""
    order = np.asarray(GMPOOL_VISIT_ORDER)
    a19 = src_to_doc19(np.asarray(srca_rows)[order])                      # (16, 16) in visit order
    b19 = src_to_doc19(np.asarray(srcb_row)[order])[:, None]
    dv = np.asarray(dst_bits, I64) & 0xFFFFFFFF
    ds, de, dm = pool_read_dst(dv, dst_style)
    xs, xe, xm = pool_read_src(a19, src_style, b19)
    sign = np.vstack([ds[None], xs])                                      # (17, 16): Dst first, then the visit order
    exp = np.vstack([de[None], xe])
    man = np.vstack([dm[None], xm])
    key = pool_key(sign, exp, man)
    cols = np.arange(key.shape[1])
    best = key.shape[0] - 1 - np.argmax(key[::-1], axis=0)               # last position of the largest key
    ms, me, mm = sign[best, cols], exp[best, cols], man[best, cols]
    if not argmax:
        return pool_write_dst(ms, me, mm, dst_style) & 0xFFFFFFFF
    phase = (dv + 0x100) & 0xF00
    prefix = np.maximum.accumulate(key, axis=0)
    upd = key[1:9] >= prefix[0:8]                                         # positions 1..8 = SrcA rows 4..7, 0..3
    last = 7 - np.argmax(upd[::-1], axis=0)
    trans = np.asarray(GMPOOL_INDEX_TRANSFORM)[order[:8]]
    max_index = np.where(upd.any(axis=0), (phase >> 4) + trans[last], dv & 0xFF)
    index = phase | max_index
    if dst_style == S_INT32:
        return index
    return (pool_write_dst(ms, me, mm, dst_style) | index) & 0xFFFFFFFF
