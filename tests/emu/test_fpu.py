"""Matrix Unit (FPU): the bit model in chip/numerics/fpu_math.py against the facts of docs/fpu_path.md (§9, 10:
closed forms per fidelity, Dst accumulate rounding, MVMUL group-of-8 alignment, ELWMUL special values, measured error
bounds, instruction words) and the Tensix handlers of runtime/emu/tensix_fpu.py driven directly (no RISC-V)."""
from __future__ import annotations

import numpy as np
import pytest

from tt_backend.chip.numerics import dst as dst_mod
from tt_backend.chip.numerics import fpu_math as fm
from tt_backend.runtime.emu.tensix import Tensix
from tt_backend.chip.errors import EmuError, EmuUnimplemented
from tt_backend.chip.isa import encode

from tests.support import fpu_scripts as fs

HIFI = fm.PHASES_OF


def f32(x) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


def val(bits) -> np.ndarray:
    return np.asarray(bits, np.uint32).view(np.float32)


def bf(x) -> np.ndarray:
    """float -> bf16 in a Src word (truncated)."""
    return f32(x) & 0xFFFF0000


def elw(a, b, fid, fmt=fm.BF16, dst=0):
    return fm.fidelity_product(np.asarray(a, np.uint32), np.asarray(b, np.uint32), np.uint32(dst), HIFI[fid],
                               "elwmul", fmt)


def normals(rng, n, lo=-8, hi=8, tf32=False):
    sign = rng.integers(0, 2, n, dtype=np.uint32) << 31
    exp = rng.integers(127 + lo, 127 + hi + 1, n).astype(np.uint32) << 23
    man = rng.integers(0, 1 << 23, n, dtype=np.uint32) & (0x7FE000 if tf32 else 0x7F0000)
    return (sign | exp | man).astype(np.uint32)


# ------------------------------------------------------------------------------------------- fpu_math: ELWMUL
def test_phase_slices_of_one_times_one():
    """docs/fpu_path.md §10.1: 1.0 x 1.0 in phase 0 is the integer 16 * 64 = 1024; later phases see 0-slices of 1.0."""
    one = bf(1.0) >> 13
    s, e, m = fm.product_terms(one, one, 0)
    assert (int(s), int(e), int(m)) == (0, 127, 1024)
    assert [int(fm.product_terms(one, one, p)[2]) for p in (1, 2, 3)] == [0, 0, 0]


@pytest.mark.parametrize("fmt", [fm.BF16, fm.TF32])
def test_elwmul_closed_forms(fmt):
    """docs/fpu_path.md §10: LoFi = A5*B7, HiFi2 = A10*B7, HiFi3 = A10*B7 + A5*Blo, HiFi4 = A10*B (exact, zeroed FP32 Dst)."""
    rng = np.random.default_rng(1)
    a = normals(rng, 4096, tf32=fmt == fm.TF32)
    b = normals(rng, 4096, tf32=fmt == fm.TF32)
    av, bv = val(a).astype(np.float64), val(b).astype(np.float64)
    a5, b7 = val(a & 0xFFF80000).astype(np.float64), val(b & 0xFFFE0000).astype(np.float64)
    a10 = val(a & 0xFFFFC000).astype(np.float64)
    want = {"LoFi": a5 * b7, "HiFi2": a10 * b7, "HiFi3": a10 * b7 + a5 * (bv - b7), "HiFi4": a10 * bv}
    for fid, w in want.items():
        assert np.array_equal(val(elw(a, b, fid, fmt)), w.astype(np.float32)), fid


def test_elwmul_hifi4_bf16_is_ieee():
    """docs/fpu_path.md §10.5: ELWMUL HiFi4 on bf16 x bf16 equals the IEEE fp32 product for normal-range data."""
    rng = np.random.default_rng(2)
    a, b = normals(rng, 16384), normals(rng, 16384)
    assert np.array_equal(elw(a, b, "HiFi4"), f32(val(a) * val(b)))


@pytest.mark.parametrize("fmt,fid,max_rel", [
    (fm.BF16, "LoFi", 5.920e-2), (fm.BF16, "HiFi2", 7.752e-3), (fm.BF16, "HiFi3", 4.020e-4), (fm.BF16, "HiFi4", 0),
    (fm.TF32, "LoFi", 7.156e-2), (fm.TF32, "HiFi2", 1.540e-2), (fm.TF32, "HiFi3", 1.743e-3),
    (fm.TF32, "HiFi4", 9.756e-4)])
def test_elwmul_error_per_fidelity(fmt, fid, max_rel):
    """docs/fpu_path.md §10.5 ELWMUL table: the measured worst case bounds every result, errors are one-sided toward zero."""
    rng = np.random.default_rng(3)
    a, b = normals(rng, 16384, tf32=fmt == fm.TF32), normals(rng, 16384, tf32=fmt == fm.TF32)
    exact = val(a).astype(np.float64) * val(b).astype(np.float64)
    got = val(elw(a, b, fid, fmt)).astype(np.float64)
    rel = np.abs(got - exact) / np.abs(exact)
    assert rel.max() <= max_rel * (1 + 1e-3)
    assert rel.max() >= max_rel * 0.5                          # the bound is also nearly reached
    assert np.all(np.abs(got) <= np.abs(exact)) and np.all(np.sign(got) == np.sign(exact))


@pytest.mark.parametrize("a,b,lofi,hifi4", [
    (0x3F80, 0x8000, 0, 0), (0xBF80, 0x0000, 0, 0),                  # zero results are +0
    (0x3F80, 0x0001, 0, 0), (0x3F80, 0x007F, 0, 0),                  # denormal inputs count as 0
    (0x3F00, 0x0080, 0, 0), (0x1F80, 0x1F80, 0, 0),                  # underflow flushes
    (0x2080, 0x1F80, 0x00800000, 0x00800000),                        # 2^-62 x 2^-64 = 2^-126
    (0x7F00, 0x4000, 0x7F800000, 0x7F800000),                        # 2^127 x 2
    (0x7F7F, 0x3F80, 0x7F780000, 0x7F7F0000), (0x7F7F, 0x3F81, 0x7F780000, 0x7F800000),
    (0x7F80, 0x3F80, 0x7F800000, 0x7F800000), (0xFF80, 0x3F80, 0xFF800000, 0xFF800000),
    (0x7F80, 0x0000, 0, 0),                                          # Inf x 0 = +0
    (0x7FC0, 0x3F80, 0x7F800000, 0x7F800000), (0x7F81, 0x3F80, 0x7F800000, 0x7F800000),   # NaN: a huge normal
    (0x7F80, 0x7F80, 0x7F800000, 0),                                 # Inf x Inf: +Inf at LoFi, +0 at HiFi4
    (0x3FFF, 0x3FFF, 0x40761000, 0x407E0100)])
def test_elwmul_special_values(a, b, lofi, hifi4):
    """docs/fpu_path.md §10.4 table (bf16 x bf16 into a zeroed FP32 Dst)."""
    a, b = np.uint32(a << 16), np.uint32(b << 16)
    assert int(elw(a, b, "LoFi")) == lofi
    assert int(elw(a, b, "HiFi4")) == hifi4


# ------------------------------------------------------------------------------------------- fpu_math: accumulate
def _term(x):
    """An exact float as a term (sign, biased exponent, magnitude with the implicit bit at bit 23)."""
    m, e = np.frexp(abs(x))                     # x = m * 2^e, m in [0.5, 1)
    mi = int(m * (1 << 24))                     # implicit bit at bit 23
    return (int(x < 0), int(e) + 126, mi)


@pytest.mark.parametrize("d,t,want", [
    (1.0, 2.0 ** -24, 1 + 2.0 ** -23),          # ties of terms go up
    (1.0, -(2.0 ** -24), 1.0),                  # aligned to the larger exponent first: 1 - 2^-24 -> 1
    (-1.0, -(2.0 ** -24), -1.0),                # a negative term's tie goes toward +inf (magnitude down)
    (1.0, -1.0, 0.0)])                          # exact cancellation -> +0
def test_accumulate_rounding(d, t, want):
    """docs/fpu_path.md §10.2 consequences."""
    got = fm.accumulate([_term(t)], f32(d))
    assert val(got) == np.float32(want) and (want != 0 or int(got) == 0)


def test_accumulate_two_terms_round_separately():
    """1 + 2^-24 (group 0) + 2^-24 (group 1) in one MVMUL gives 1 + 2^-22 (each term rounded separately)."""
    got = fm.accumulate([_term(2.0 ** -24), _term(2.0 ** -24)], f32(1.0))
    assert val(got) == np.float32(1 + 2.0 ** -22)


def test_accumulate_16bit_dst_rounds_away_13_bits():
    """With a 16-bit Dst the 13 low bits of every operand are rounded away (half up) before the sum and the result
    is renormalised to BF16 precision."""
    got = fm.accumulate([_term(2.0 ** -8)], f32(1.0), fp32_acc=False)            # 1 + 2^-8: tie -> up
    assert int(got) == 0x3F810000
    assert int(fm.accumulate([_term(2.0 ** -9)], f32(1.0), fp32_acc=False)) == 0x3F800000   # below half: down
    assert int(fm.accumulate([_term(2.0 ** 127 * 1.5)], f32(2.0 ** 127), fp32_acc=False)) == 0x7F800000


# ------------------------------------------------------------------------------------------- fpu_math: MVMUL
def mv_row(values, phases=HIFI["HiFi4"], dst=0.0):
    """in0 row `values` (SrcB row 0, k = 0..15) @ in1 = ones (SrcA); result of output (0, 0)."""
    b = np.zeros((8, 16), np.uint32)
    b[0, :len(values)] = bf(np.asarray(values, np.float32))
    a = np.full((16, 16), bf(1.0), np.uint32)
    d = np.zeros((8, 16), np.uint32)
    d[0, 0] = f32(dst)
    for p in phases:
        d = fm.mvmul(a, b, d, p)
    return float(val(d[0, 0]))


Z = 0.0


@pytest.mark.parametrize("values,want", [
    ([1, 2 ** -12], 1.0), ([1] + [Z] * 7 + [2 ** -12], 1 + 2 ** -12), ([1, 2 ** -11], 1 + 2 ** -10),
    ([1, -(2 ** -11)], 1 - 2 ** -10), ([1, 3 * 2 ** -12], 1 + 2 ** -10), ([1, 1.5 * 2 ** -10], 1 + 2 ** -9),
    ([1] + [2 ** -12] * 7, 1.0), ([2 ** -12] * 8, 2 ** -9), ([1, -1, 2 ** -12], 0.0),
    ([1, 2 ** -12] + [Z] * 6 + [-1], 0.0), ([2 ** -12] + [Z] * 6 + [1], 1.0), ([1] * 16, 16.0)])
@pytest.mark.parametrize("fid", ["LoFi", "HiFi4"])
def test_mvmul_group_alignment_table(values, want, fid):
    """docs/fpu_path.md §10.3 table (in1 = ones; LoFi and HiFi4 identical for these values)."""
    assert mv_row(values, HIFI[fid]) == np.float32(want)


def test_mvmul_k_faces_via_dst():
    """docs/fpu_path.md §10.3: 1 (k-face 0) + 2^-24 (k-face 1, accumulated through Dst) gives 1 + 2^-23; 3 * 2^-25 too."""
    assert mv_row([2 ** -24], dst=mv_row([1.0])) == np.float32(1 + 2 ** -23)
    assert mv_row([1.5 * 2 ** -24], dst=mv_row([1.0])) == np.float32(1 + 2 ** -23)


def matmul32(a, b, fid, fmt=fm.BF16):
    """C (32x32) = A @ B with 32x32 Src-word matrices, as the 8.5 walk does it (k-face 0 then 1, per phase)."""
    c = np.zeros((32, 32), np.uint32)
    for p in HIFI[fid]:
        for kf in (0, 1):
            for mb in range(4):
                for nf in (0, 1):
                    blk = c[8 * mb:8 * mb + 8, 16 * nf:16 * nf + 16]
                    c[8 * mb:8 * mb + 8, 16 * nf:16 * nf + 16] = fm.mvmul(
                        b[16 * kf:16 * kf + 16, 16 * nf:16 * nf + 16], a[8 * mb:8 * mb + 8, 16 * kf:16 * kf + 16],
                        blk, p, fmt)
    return c


def group_terms_by_the_rule(a, b, phase, fp32_acc, exp8):
    """mvmul19's docstring rule, product by product (the reference for the vectorised _group_terms): per output and
    group of 8 k, the product terms (product_terms) aligned to the group's largest exponent Eg with
    floor((2m + 2^d) / 2^(d+1)), d = min(Eg - e, 30), summed with their signs; Eg <= 0: the group is 0."""
    m, n = b.shape[0], a.shape[1]
    out = [tuple(np.zeros((m, n), np.int64) for _ in range(3)) for _ in range(2)]
    for i in range(m):
        for j in range(n):
            s, e, man = fm.product_terms(a[:, j], b[i, :], phase, fp32_acc, exp8)
            for g in range(2):
                sg, eg, mg = (int(v) for v in s[8 * g:8 * g + 8]), e[8 * g:8 * g + 8], man[8 * g:8 * g + 8]
                top = int(eg.max())
                tot = 0
                for sk, ek, mk in zip(sg, (int(v) for v in eg), (int(v) for v in mg)):
                    d = min(top - ek, 30)
                    tot += (-1 if sk else 1) * ((2 * mk + (1 << d)) >> (d + 1))
                if top > 0:
                    out[g][0][i, j], out[g][1][i, j], out[g][2][i, j] = int(tot < 0), top, abs(tot) << 13
    return out


@pytest.mark.parametrize("kind", ["wide", "normal", "tiny", "sparse"])
def test_group_terms_follow_the_rule(kind):
    """fpu_math._group_terms (int32, operand facts prepared on the small arrays, one einsum for signs and sums) gives
    the group terms of the rule computed product by product, for every phase, 32- and 16-bit Dst, FP16-style exponents
    (a positive zero-term exponent), on operands with wide exponents, zeros, tiny values whose products underflow, and
    mostly zeros (whole groups of zero products)."""
    rng = np.random.default_rng(["wide", "normal", "tiny", "sparse"].index(kind))
    shape = (24, 16)
    if kind == "wide":
        w = rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32)
    else:
        w = f32(rng.standard_normal(shape) * (1e-19 if kind == "tiny" else 1.0))
    w[rng.random(shape) < (0.7 if kind == "sparse" else 0.15)] = 0
    a, b = fm.src19(w[:16], fm.TF32), fm.src19(w[16:], fm.TF32)
    for fp32_acc, exp8 in ((True, True), (False, True), (True, False)):
        for phase in range(4):
            got = fm._group_terms(a, b, phase, fp32_acc, exp8)
            want = group_terms_by_the_rule(a, b, phase, fp32_acc, exp8)
            for g in range(2):
                for x, y in zip(got[g], want[g]):
                    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("m,n,batch", [(5, 16, 1 << 20), (32, 1, 1 << 20), (1, 7, 100)])
def test_mvmul19_steps_equals_the_loop(m, n, batch, monkeypatch):
    """The batched chain (products of many steps at once, accumulation step by step; small BATCH_PRODUCTS: several
    batches) gives the bits of mvmul19 applied step after step, on random operands with wide exponents, zeros and
    mixed signs, mixed phases, 32- and 16-bit Dst."""
    monkeypatch.setattr(fm, "BATCH_PRODUCTS", batch)
    rng = np.random.default_rng(m * 100 + n)
    steps = 12

    def operands(shape):
        w = rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32)
        w[rng.random(shape) < 0.1] = 0
        return fm.src19(w, fm.TF32)

    a, b = operands((steps, 16, n)), operands((steps, m, 16))
    phases = rng.integers(0, 4, steps)
    for fp32_acc, exp8 in ((True, True), (False, True), (True, False)):
        ref = dst0 = rng.integers(0, 1 << 32, (m, n), dtype=np.uint64).astype(np.uint32)
        for s in range(steps):
            ref = fm.mvmul19(a[s], b[s], ref, phases[s], fp32_acc, exp8)
        got = fm.mvmul19_steps(a, b, phases, dst0, fp32_acc, exp8)
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("batch", [1 << 20, 700])
def test_mvmul19_batch_equals_the_loop(batch, monkeypatch):
    """MVMUL runs onto several Dst blocks (fpu_math.mvmul19_batch: products of all steps at once, accumulation in
    waves of distinct blocks; small BATCH_PRODUCTS: several batches) give the bits of mvmul19 applied step after
    step, on random operands with wide exponents, zeros and mixed signs, mixed phases, blocks hit repeatedly and out
    of order, 32- and 16-bit Dst."""
    monkeypatch.setattr(fm, "BATCH_PRODUCTS", batch)
    rng = np.random.default_rng(7)
    steps, blocks = 40, 5
    w = rng.integers(0, 1 << 32, (steps, 24, 16), dtype=np.uint64).astype(np.uint32)
    w[rng.random(w.shape) < 0.1] = 0
    a, b = fm.src19(w[:, :16], fm.TF32), fm.src19(w[:, 16:], fm.TF32)
    phases = rng.integers(0, 4, steps)
    slots = [int(s) for s in rng.integers(0, blocks, steps)]
    for fp32_acc, exp8 in ((True, True), (False, True), (True, False)):
        dst0 = rng.integers(0, 1 << 32, (blocks, 8, 16), dtype=np.uint64).astype(np.uint32)
        ref = dst0.astype(np.int64)
        for s in range(steps):
            ref[slots[s]] = fm.mvmul19(a[s], b[s], ref[slots[s]], phases[s], fp32_acc, exp8)
        np.testing.assert_array_equal(fm.mvmul19_batch(a, b, phases, slots, dst0, fp32_acc, exp8), ref)


def test_mvmul_hifi4_exact_for_equal_exponents():
    """docs/fpu_path.md §10.5: uniform [1, 2) bf16 inputs: HiFi4 MVMUL is exact."""
    rng = np.random.default_rng(5)
    a = bf(rng.uniform(1, 2, (32, 32)))
    b = bf(rng.uniform(1, 2, (32, 32)))
    exact = val(a).astype(np.float64) @ val(b).astype(np.float64)
    assert np.array_equal(val(matmul32(a, b, "HiFi4")).astype(np.float64), exact)


@pytest.mark.parametrize("fmt,fid,max_err", [
    (fm.BF16, "LoFi", 5.57e-2), (fm.BF16, "HiFi2", 7.87e-3), (fm.BF16, "HiFi3", 1.08e-3), (fm.BF16, "HiFi4", 1.28e-3),
    (fm.TF32, "LoFi", 6.19e-2), (fm.TF32, "HiFi2", 1.32e-2), (fm.TF32, "HiFi3", 2.00e-3), (fm.TF32, "HiFi4", 1.32e-3)])
def test_mvmul_error_per_fidelity(fmt, fid, max_err):
    """docs/fpu_path.md §10.5 MVMUL table (err / sum|ab|, mixed signs, exponents in [-8, 8]): same order of magnitude."""
    rng = np.random.default_rng(6)
    tf = fmt == fm.TF32
    errs = []
    for _ in range(2):
        a = normals(rng, 1024, tf32=tf).reshape(32, 32)
        b = normals(rng, 1024, tf32=tf).reshape(32, 32)
        av, bv = val(a).astype(np.float64), val(b).astype(np.float64)
        got = val(matmul32(a, b, fid, fmt)).astype(np.float64)
        errs.append(np.abs(got - av @ bv) / (np.abs(av) @ np.abs(bv)))
    e = np.concatenate(errs)
    assert max_err / 4 <= e.max() <= max_err * 1.5


# ------------------------------------------------------------------------------------------- fpu_math: others
def test_elwadd_alignment_and_sub():
    one, tiny = bf(1.0) >> 13, bf(2.0 ** -11) >> 13
    assert int(fm.elwadd19(one, tiny, 0)) == 0x3F802000        # 11-bit grid: the tie 2^-11 rounds up to 2^-10
    assert int(fm.elwadd(bf(3.0), bf(1.0), np.uint32(0), sub=True)) == f32(2.0)
    assert int(fm.elwadd(bf(1.0), bf(1.0), np.uint32(0), sub=True)) == 0                    # +0
    assert int(fm.elwadd(bf(1.0), bf(2.0), f32(4.0), accumulate_dst=True)) == f32(7.0)


def test_fp16_sources():
    """FP16 operands (5-bit exponent) into an FP32 Dst: rebias so 1.5 * 1.5 = 2.25; into an FP16 Dst stays FP16."""
    h = fm.fp16_to_dst32(np.uint32(0x3E00))               # 1.5
    assert int(fm.fidelity_product(h, h, np.uint32(0), HIFI["HiFi4"], "elwmul", fm.FP16)) == f32(2.25)
    r = fm.fidelity_product(h, h, np.uint32(0), HIFI["HiFi4"], "elwmul", fm.FP16, dst_fp32=False)
    assert int(fm.dst32_to_fp16(r)) == 0x4080                                             # 2.25 in FP16


def test_int8_phases_sum_to_the_product():
    """INT8 math: the four phase masks cover SrcA magnitude bits 7..0 and SrcB 9..0; summed over phases the
    products equal a * b for |a| <= 255, |b| <= 1023."""
    rng = np.random.default_rng(7)
    a = rng.integers(-255, 256, (16, 16))
    b = rng.integers(-1023, 1024, (8, 16))

    def word(v):
        return ((v < 0).astype(np.int64) << 31) | (16 << 23) | (np.abs(v) << 13)
    total = sum(int8_phase(word(a), word(b), p) for p in range(4))
    assert np.array_equal(total, b @ a)


def int8_phase(a, b, p):
    ai, bi = fm.int8_operands(a, b, p)
    return bi @ ai


# ------------------------------------------------------------------------------------------- instruction words
def test_instruction_words_of_fpu_path_9():
    """The words of docs/fpu_path.md §9.2/9.3 come out of the sequence builders."""
    _, w = fs.mvmul_words(4)
    assert w[:8] == [0x26000000, 0x26004008, 0x26000020, 0x26008028, 0x26000010, 0x26004018, 0x26000030, 0x2600C038]
    assert w[15] == w[31] == w[47] == 0x26010038 and w[63] == 0x26C10038 and len(w) == 64
    assert fs.mvmul_words(1)[1][-1] == 0x26C10038
    assert fs.MVMUL_SETUP == [0xB20C0800, 0xB21C0000, 0xB20D1800, 0xB21D0000, 0xB20E1810, 0xB21E0000, 0xB20F2810,
                              0xB21F0000, 0xB2108080, 0xB2202000]
    setup, w = fs.elwmul_words(4)
    assert setup == [0xB20C0000, 0xB21C2000, 0xB20D0808, 0xB21D8008]
    assert w[:4] == [0x27000000] * 3 + [0x27004000] and w[-1] == 0x27C04000 and len(w) == 32
    _, w = fs.elwmul_phases_outer_words(2)
    assert w[:8] == [0x27008000] * 7 + [0x2700C000] and w[-1] == 0x27C10000
    assert encode("ZEROACC", clear_mode=1, use_32_bit_mode=1, addr_mode=7, where=3) == 0x100DC003
    assert encode("ZEROACC", clear_mode=3, use_32_bit_mode=1, addr_mode=7) == 0x101DC000
    assert encode("SETRWC", bit_mask=0xF) == 0x3700000F


# ------------------------------------------------------------------------------------------- Tensix handlers
def make():
    tx = Tensix(np.zeros(1536 * 1024, np.uint8))
    tx.cfg[1] = 0x20AA0000                                   # BF16 Src, FP32 Dst
    return tx


def load_banks(tx, a, b, fmt=5):
    tx.srca[0, :len(a)] = a
    tx.srcb[0, :len(b)] = b
    tx.srca_valid[0] = tx.srcb_valid[0] = True
    tx.srca_format[0] = tx.srcb_format[0] = fmt


def test_mvmul_waits_for_both_banks_then_computes():
    tx = make()
    tx.push(1, encode("MVMUL", clear_dvalid=3))
    assert "SrcA bank 0 not valid" in tx.blocked_reason(1)
    rng = np.random.default_rng(8)
    a = bf(rng.uniform(1, 2, (16, 16)))
    b = bf(rng.uniform(1, 2, (8, 16)))
    load_banks(tx, a, b)
    tx.step()
    assert tx.thread_idle(1) and tx.srca_valid == [False, False] and tx.srca_matrix_bank == 1
    assert np.array_equal(tx.dst.rows32[:8], fm.mvmul(a, b, np.zeros((8, 16), np.uint32), 0))   # one LoFi phase
    exact = val(b).astype(np.float64) @ val(a).astype(np.float64)
    assert np.all(np.abs(val(tx.dst.rows32[:8]) - exact) <= 5.6e-2 * exact)


def test_fidelity_phase_is_counter_plus_base():
    """Phase = (RWC.FidelityPhase + FIDELITY_BASE_Phase) & 3; slot 0 with FidelityIncr steps it."""
    tx = make()
    a = np.full((64, 16), bf(1.9921875), np.uint32)
    load_banks(tx, a, a)
    tx.threads[1].cfg[28] = 0x2000                            # slot 0: phase += 1
    tx.threads[1].cfg[11] = 1                                 # base 1: the phases run 1, 2, 3
    for _ in range(3):
        tx.push(1, encode("ELWMUL", addr_mode=0))
    want = fm.elwmul(a[0, 0], a[0, 0], 0, 1)
    for p in (2, 3):
        want = fm.elwmul(a[0, 0], a[0, 0], want, p)
    assert tx.dst.rows32[0, 0] == want and tx.threads[1].rwc["fid"] == 3


def test_elwmul_bf16_dst_uses_the_16bit_view():
    """Fp32_enabled = 0: ELWMUL rows are Dst16b rows (physical rows, BF16 shuffled); Dst16b row 8 is the low half
    of Dst32b row 0 (Adj32)."""
    tx = make()
    tx.cfg[1] = 0x00AA0000
    a = np.full((64, 16), bf(3.0), np.uint32)
    load_banks(tx, a, a)
    tx.push(1, encode("ELWMUL", dst=8))                        # LoFi 3*3 = 9 into Dst16b rows 8..15
    assert np.all(tx.dst.read16(np.full(16, 8), np.arange(16)) == dst_mod.encode_bf16(0x4110))
    assert np.all(tx.dst.rows32[0] == dst_mod.encode_bf16(0x4110))      # raw bits in the low halves
    assert np.all(tx.dst.rows32[8:] == 0)


def test_zeroacc_modes_mark_rows_undefined():
    tx = make()
    tx.dst.rows32[:] = 0x3F800000
    tx.dst.written[:] = True
    tx.push(1, encode("ZEROACC", clear_mode=1, use_32_bit_mode=1, where=2, addr_mode=0))   # FP32 rows 32..47
    assert np.all(tx.dst.rows32[32:48] == 0) and np.all(tx.dst.rows32[48] == 0x3F800000)
    assert tx.dst.undefined32(np.arange(32, 48)).all() and not tx.dst.undefined32([31, 48]).any()
    tx.push(1, encode("ZEROACC", clear_mode=0, where=5))                                 # one FP32 row
    assert np.all(tx.dst.rows32[5] == 0) and tx.dst.undefined32([5]).all()
    tx.push(1, encode("ZEROACC", clear_mode=2, where=1))                                 # upper half
    assert np.all(tx.dst.rows32[256:] == 0) and np.all(tx.dst.rows32[255] == 0x3F800000)
    tx.push(1, encode("ZEROACC", clear_mode=3))
    assert not tx.dst.rows32.any() and tx.dst.undefined32(np.arange(512)).all()
    with pytest.raises(EmuError, match="clear-all"):
        tx.push(1, encode("ZEROACC", clear_mode=3, where=1))


def test_gmpool_reads_undefined_dst_as_minus_infinity():
    tx = make()
    a = bf(-np.arange(1, 257, dtype=np.float32).reshape(16, 16))
    b = np.full((8, 16), bf(1.0), np.uint32)
    load_banks(tx, a, b)
    tx.dst.rows32[:] = 0x3F800000
    tx.push(1, encode("ZEROACC", clear_mode=3))
    tx.push(1, encode("GMPOOL", dst=4, instr_mod19=1))
    assert np.array_equal(tx.dst.rows32[4], a[0]) and not tx.dst.rows32[5:8].any()
    tx.push(1, encode("GMPOOL", dst=0, instr_mod19=1))        # defined 0 would win over negatives; undefined loses
    assert np.array_equal(tx.dst.rows32[0], a[0])


def test_mova2d_movd2a_movb2a_movb2d():
    tx = make()
    rng = np.random.default_rng(9)
    a = normals(rng, 1024, tf32=True).reshape(64, 16)
    b = normals(rng, 1024, tf32=True).reshape(64, 16)
    load_banks(tx, a, b, fmt=4)
    tx.push(1, encode("MOVA2D", dst=8, src=16, instr_mod=2))          # TF32 -> Dst32b rows 8..15
    assert np.array_equal(tx.dst.rows32[8:16], a[16:24])
    tx.push(1, encode("MOVD2A", dst=8, src=0, instr_mod=2))           # back to SrcA rows 0..3
    assert np.array_equal(tx.srca[0, 0:4], a[16:20])
    tx.push(1, encode("MOVB2A", srca=4, srcb=8, instr_mod=2))
    assert np.array_equal(tx.srca[0, 4:8], b[8:12])
    tx.push(1, encode("MOVB2D", dst=32, src=4, movb2d_instr_mod=5))   # 4 rows, column 0 broadcast
    assert np.array_equal(tx.dst.rows32[32:36], np.repeat(b[4:8, :1], 16, axis=1))
    tx.push(1, encode("MOVD2B", dst=32, src=0, instr_mod=0))          # one row
    assert np.array_equal(tx.srcb[0, 0], np.full(16, b[4, 0]))


def test_trnspsrcb_and_zerosrc():
    tx = make()
    b = np.arange(1024, dtype=np.uint32).reshape(64, 16) << 16
    load_banks(tx, b, b)
    tx.push(1, encode("TRNSPSRCB"))
    assert np.array_equal(tx.srcb[0, 16:32], b[16:32].T) and np.array_equal(tx.srcb[0, :16], b[:16])
    tx.push(1, encode("ZEROSRC", src_mask=1, write_mode=1))
    assert not tx.srca[0].any() and tx.srcb[0].any()


@pytest.mark.parametrize("word,what", [
    (encode("GMPOOL", instr_mod19=0), "GMPOOL instr_mod19=0"),
    (encode("DOTPV", dest_accum_en=1), "DOTPV dest_accum_en=1")])
def test_unmodelled_modes_are_named(word, what):
    """DOTPV, SHIFTXB and GMPOOL ArgMax are modelled (test_fpu_pools.py); bits the pages leave open are not."""
    tx = make()
    load_banks(tx, np.zeros((64, 16), np.uint32), np.zeros((64, 16), np.uint32))
    with pytest.raises(EmuUnimplemented, match=what):
        tx.push(1, word)


def test_mvmul_broadcast_row_follows_the_isa_page():
    """MVMUL.md BroadcastSrcBRow (no oracle: ttsim refuses it): SrcB row RWC.SrcB times SrcA goes to Dst rows
    0, 2, 4, 6 of the block; odd rows keep their value."""
    tx = make()
    rng = np.random.default_rng(10)
    a = bf(rng.uniform(1, 2, (64, 16)))
    b = bf(rng.uniform(1, 2, (64, 16)))
    load_banks(tx, a, b)
    tx.threads[1].rwc["b"] = 5
    tx.dst.rows32[:8] = 0x3F800000
    tx.push(1, encode("MVMUL", instr_mod19=1, dst=8))
    row = fm.mvmul(a[:16], b[5:6], np.zeros((1, 16), np.uint32), 0)[0]
    assert all(np.array_equal(tx.dst.rows32[8 + i], row if i % 2 == 0 else np.zeros(16)) for i in range(8))
    assert np.all(tx.dst.rows32[:8] == 0x3F800000)
