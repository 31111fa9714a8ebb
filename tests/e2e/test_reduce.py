"""Reductions (lowering/families/sfpu_reduce.py): the SFPU lane combine on the SFPU model, the layout/padding rules, and
tinygrad programs with REDUCE on Device TT (emulator) against tinygrad's CPU device.

Tolerances, stated per case:
  * float32 sums: |tt - cpu| <= 2 * eps32 * sqrt(K) * sum|x| (both accumulate in fp32 in different orders; measured
    max |tt - ref64| / sum|x| is 2.4e-7 for K <= 65536, so this is loose by design but scales right); a sum of terms
    of either sign is compensated on the SFPU: within one rounding of the exact (float64) sum plus
    (K/lanes + log2(lanes))^2 eps^2 sum|x| (test_cancelling_sums_are_correctly_rounded);
  * max / min / int sums / bool any: exact;
  * post-ops (mean, sqrt, RMSNorm, softmax): relative error vs CPU as noted (each SFPU op is within 1-2 ulp).
"""

import numpy as np
import pytest

from tt_backend.lowering.codegen import sfpu_ops as so
from tt_backend.lowering.dag import ValueDAG
from tt_backend.lowering.families.sfpu_reduce import (ACC, COMP, choose_layout, finish_words, non_negative,
                                                      zero_preserving)
from tt_backend.lowering.families.tile_plan import reduce_out_datum
from tt_backend.chip.numerics.dst import Dst
from tt_backend.chip.numerics.sfpu.functional import FunctionalSFPU as SFPU
from tt_backend.chip.isa import decode, encode

EPS32 = 2.0 ** -23
rng = np.random.default_rng(0)


# ------------------------------------------------------------------------------------------ the SFPU lane combine

def run_finish(op, dtype, lanes, acc_bits, acc_slot=1, comp_bits=None):
    """LReg ACC := acc_bits, run the finish words (lane combine + store at row step 0 of acc_slot) on the SFPU
    model, return the 32 // lanes results from their output datums."""
    sfpu = SFPU(Dst())
    sfpu.execute(*decode(encode("SFPENCC", imm12_math=3, lreg_dest=0, instr_mod1=10)), 0)   # base predication
    sfpu.lreg[ACC] = acc_bits
    if comp_bits is not None:
        sfpu.lreg[COMP] = comp_bits
    for w in finish_words([(op, dtype)], lanes, acc_slot, comp=comp_bits is not None):
        sfpu.execute(*decode(w), 0)
    assert sfpu.lane_flags.all() and sfpu.stack_depth == 0
    tile = sfpu.dst.rows32[64 * acc_slot: 64 * acc_slot + 64].reshape(1024)
    return np.array([tile[reduce_out_datum(lanes, j)] for j in range(32 // lanes)], dtype=np.uint32)


@pytest.mark.parametrize("lanes", [1, 2, 4, 8, 32])
@pytest.mark.parametrize("op,dtype", [("ADD", "float32"), ("MAX", "float32"), ("MUL", "float32"),
                                      ("ADD", "int32"), ("MAX", "int32")])
def test_lane_combine_on_sfpu_model(lanes, op, dtype):
    if dtype == "float32":
        x = rng.standard_normal(32).astype(np.float32) * (1 if op != "MUL" else 1.5)
        x[3] = -0.0
    else:
        x = rng.integers(-2**31, 2**31, 32, dtype=np.int64).astype(np.int32)
    got = run_finish(op, dtype, lanes, x.view(np.uint32))
    groups = x.reshape(32 // lanes, lanes)
    if dtype == "int32":
        ref = (groups.astype(np.int64).sum(1).astype(np.int32) if op == "ADD" else groups.max(1))   # sums wrap
        np.testing.assert_array_equal(got.view(np.int32), ref)
    elif op == "MAX":
        np.testing.assert_array_equal(got.view(np.float32), groups.max(1))
    else:
        g64 = groups.astype(np.float64)
        ref = g64.sum(1) if op == "ADD" else g64.prod(1)
        scale = np.abs(g64).sum(1) if op == "ADD" else np.abs(ref)
        # a tree of log2(lanes) fp32 roundings
        assert (np.abs(got.view(np.float32) - ref) <= (np.log2(lanes) + 1) * EPS32 * scale).all()


@pytest.mark.parametrize("lanes", [1, 2, 4, 8, 32])
def test_compensated_lane_combine_on_sfpu_model(lanes):
    """Lane partial sums (s, c) that cancel (+-v pairs in neighbouring lanes plus 1e-4 residuals; c of the size of
    s's rounding errors) combine to the exact sum of all s and c within one rounding of it, plus the plain sum of the
    c (log2(lanes) + 1 roundings of sum|c|): what a plain tree (two roundings of |v| ~ 1 per level) cannot do."""
    for seed in range(5):
        r = np.random.default_rng(seed)
        v = r.standard_normal(16)
        s = (np.stack([v, -v], 1).reshape(32) + 1e-4 * r.standard_normal(32)).astype(np.float32)
        c = (s * 2.0 ** -25 * r.standard_normal(32)).astype(np.float32)
        got = run_finish("ADD", "float32", lanes, s.view(np.uint32), comp_bits=c.view(np.uint32)).view(np.float32)
        exact = (s.astype(np.float64) + c).reshape(32 // lanes, lanes).sum(1)
        sum_c = np.abs(c.astype(np.float64)).reshape(32 // lanes, lanes).sum(1)
        levels = {1: 0, 2: 1, 4: 2, 8: 3, 32: 5}[lanes]
        assert (np.abs(got - exact) <= EPS32 / 2 * np.abs(exact) + (levels + 1) * EPS32 * sum_c).all(), (got, exact)


def test_lane_combine_uses_rotations_and_transpose():
    names = [decode(w)[0] for w in finish_words([("ADD", "float32")], 32, 1)]
    assert names.count("SFPSHFT2") == 7 and names.count("SFPTRANSP") == 1 and names.count("SFPADD") == 6
    names = [decode(w)[0] for w in finish_words([("ADD", "float32")], 1, 1)]
    assert "SFPSHFT2" not in names and names.count("SFPSTORE") == 1


# ------------------------------------------------------------------------------------------ layout and pads

def test_choose_layout():
    assert choose_layout(1, 2048) == (32, 32)     # RMSNorm: K across all lanes, 2 tiles
    assert choose_layout(64, 128) == (1, 32)      # 2 groups x 4 tiles, every datum used
    assert choose_layout(5, 33) == (2, 32)        # one tile: 16 outputs x 64 reduce indices
    assert choose_layout(1024, 4) == (1, 4)       # short: 8 step groups x 32 lanes = 256 outputs per tile
    assert choose_layout(33, 5) == (1, 16)
    assert choose_layout(8, 100) == (4, 32) and choose_layout(4, 200) == (8, 32)


def test_zero_preserving():
    d = ValueDAG()
    x = d.add("LOAD", "float32", (), 0)
    w = d.add("LOAD", "float32", (), 1)
    d.out = d.add("MUL", "float32", (d.add("MUL", "float32", (x, x)), w))
    assert zero_preserving(d, {0}) and zero_preserving(d, {1})   # x*x*w is 0 when either x or w is padded
    assert not zero_preserving(d, set())
    d.out = d.add("EXP2", "float32", (x,))
    assert not zero_preserving(d, {0})            # exp2(0) = 1: pads need the validity mask
    d.out = d.add("MUL", "float32", (x, d.add("RECIPROCAL", "float32", (w,))))
    assert not zero_preserving(d, {0, 1})         # 0 * (1/0) is NaN: a layer norm's scale gathered at pads


def test_non_negative():
    """Which sums accumulate plainly (their terms cannot cancel) and which compensated."""
    d = ValueDAG()
    x = d.add("LOAD", "float32", (), 0)
    w = d.add("LOAD", "float32", (), 1)
    sq = d.add("MUL", "float32", (x, x))
    ex = d.add("EXP2", "float32", (x,))
    for out, nn in ((x, False), (sq, True), (ex, True), (d.add("MUL", "float32", (sq, ex)), True),
                    (d.add("MUL", "float32", (x, w)), False), (d.add("MUL", "float32", (sq, w)), False),
                    (d.add("ADD", "float32", (sq, d.add("CONST", "float32", (), 1e-6))), True),
                    (d.add("ADD", "float32", (sq, d.add("CONST", "float32", (), -1.0))), False),
                    (d.add("CAST", "float32", (d.add("CMPLT", "bool", (x, w)),)), True),
                    (d.add("MAX", "float32", (x, ex)), True), (d.add("NEG", "float32", (sq,)), False)):
        d.out = out
        assert non_negative(d) is nn, d.nodes[out]


# ------------------------------------------------------------------------------------------ end to end

from tinygrad import Tensor, dtypes  # noqa: E402

pytestmark = pytest.mark.usefixtures("serial_compile")     # tests/e2e/conftest.py


def run_both(fn, *arrays, dtype=None):
    def mk(a, dev):
        t = Tensor(a, device=dev)
        return t if dtype is None else t.cast(dtype)
    tt = fn(*[mk(a, "TT") for a in arrays]).numpy()
    cpu = fn(*[mk(a, "CPU") for a in arrays]).numpy()
    assert tt.shape == cpu.shape and tt.dtype == cpu.dtype, (tt.shape, cpu.shape, tt.dtype, cpu.dtype)
    return tt, cpu


def reduced_size(shape, axis) -> int:
    axes = range(len(shape)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    return int(np.prod([shape[a] for a in axes]))


def assert_sum_close(tt, cpu, x, axis, keepdim=False):
    k = reduced_size(x.shape, axis)
    scale = np.abs(x.astype(np.float64)).sum(axis=axis, keepdims=keepdim)
    err = np.abs(tt.astype(np.float64) - cpu)
    assert (err <= 2 * EPS32 * np.sqrt(k) * scale).all(), f"max err {err.max()} K={k}"


# every axis of 1-D..4-D shapes (sizes not multiples of 32), some axis pairs, all axes
AXES = [((37,), 0), ((5, 33), 0), ((5, 33), 1), ((3, 4, 50), 0), ((3, 4, 50), 1), ((3, 4, 50), 2),
        ((3, 4, 50), (0, 2)), ((2, 3, 5, 7), 0), ((2, 3, 5, 7), 1), ((2, 3, 5, 7), 2), ((2, 3, 5, 7), 3),
        ((2, 3, 5, 7), (1, 3)), ((2, 3, 5, 7), None), ((8, 100), 1), ((4, 200), 1)]   # the last two: 4 and 8 lanes


@pytest.mark.needs_cc
@pytest.mark.parametrize("shape,axis", AXES, ids=str)
def test_sum_every_axis(shape, axis):
    x = rng.uniform(-4, 4, shape).astype(np.float32)
    keep = isinstance(axis, int) and axis % 2 == 1
    tt, cpu = run_both(lambda a: a.sum(axis, keepdim=keep), x)
    assert_sum_close(tt, cpu, x, axis, keep)


@pytest.mark.needs_cc
@pytest.mark.parametrize("shape,axis", AXES[::2] + AXES[-1:], ids=str)
def test_max_every_axis(shape, axis):
    x = rng.uniform(-4, 4, shape).astype(np.float32)
    tt, cpu = run_both(lambda a: a.max(axis, keepdim=True), x)
    np.testing.assert_array_equal(tt, cpu)


@pytest.mark.needs_cc
@pytest.mark.parametrize("shape,axis", [((5, 33), 1), ((3, 4, 50), (0, 2)), ((64, 128), 0)], ids=str)
def test_mean(shape, axis):
    x = rng.uniform(-4, 4, shape).astype(np.float32)
    tt, cpu = run_both(lambda a: a.mean(axis), x)
    # sum bound, then one multiply by 1/K (<= 1/2 ulp more)
    k = reduced_size(shape, axis)
    scale = np.abs(x.astype(np.float64)).mean(axis=axis)
    assert (np.abs(tt - cpu) <= (2 * np.sqrt(k) + 1) * EPS32 * scale).all()


@pytest.mark.needs_cc
def test_long_sum_and_min():
    x = rng.standard_normal((3, 3000)).astype(np.float32) + 0.25
    tt, cpu = run_both(lambda a: a.sum(1), x)
    assert_sum_close(tt, cpu, x, 1)
    tt, cpu = run_both(lambda a: a.min(0), x)                # min = -max(-x): NEG before and after
    np.testing.assert_array_equal(tt, cpu)
    # 32 lanes and rows of 1552 * 4 bytes (a multiple of 64): each tile is one NoC read; pads 0 (sum) / datum 0 (max)
    x = rng.standard_normal((2, 1552)).astype(np.float32)
    tt, cpu = run_both(lambda a: a.sum(1), x)
    assert_sum_close(tt, cpu, x, 1)
    tt, cpu = run_both(lambda a: (a - 10).max(1), x)
    np.testing.assert_array_equal(tt, cpu)


@pytest.mark.needs_cc
def test_pre_and_post_ops():
    x = rng.uniform(-2, 2, (6, 45)).astype(np.float32)
    tt, cpu = run_both(lambda a: (a * a).sum(1), x)                         # zero-preserving pre-op
    assert_sum_close(tt, cpu, x * x, 1)
    tt, cpu = run_both(lambda a: a.exp().sum(1), x)                         # exp(0) = 1: masked pads
    np.testing.assert_allclose(tt, cpu, rtol=2e-6)
    tt, cpu = run_both(lambda a: ((a * a).sum(1) / 45 + 1e-5).sqrt(), x)    # sqrt(sum/n + eps) after the reduce
    np.testing.assert_allclose(tt, cpu, rtol=2e-6)
    tt, cpu = run_both(lambda a: a.sum(1) + a[:, 0], x)                     # another input after the reduce
    np.testing.assert_allclose(tt, cpu, rtol=1e-6, atol=1e-5)


@pytest.mark.needs_cc
def test_softmax_and_std():
    x = rng.standard_normal((4, 37)).astype(np.float32)
    tt, cpu = run_both(lambda a: a.softmax(-1), x)                          # max, exp-sum with a k-free input, div
    np.testing.assert_allclose(tt, cpu, rtol=1e-5, atol=1e-7)
    tt, cpu = run_both(lambda a: a.std(0), x)
    np.testing.assert_allclose(tt, cpu, rtol=1e-5)
    # cross-entropy: its last kernel is REDUCE(ADD, REDUCE(ADD, f, k), b), merged into one sum over (b, k)
    y = np.array([1, 30, 0, 36], np.int32)
    tt = Tensor(x, device="TT").sparse_categorical_crossentropy(Tensor(y, device="TT")).numpy()
    cpu = Tensor(x, device="CPU").sparse_categorical_crossentropy(Tensor(y, device="CPU")).numpy()
    np.testing.assert_allclose(tt, cpu, rtol=1e-5)


@pytest.mark.needs_cc
def test_short_reductions_step_groups():
    """K <= 16: several outputs per lane (step groups), results at row step steps*group; with a masked pre-op, an
    input read after the reduce, sibling reductions, int32 and argmax."""
    x = rng.standard_normal((70, 5)).astype(np.float32)
    tt, cpu = run_both(lambda a: a.exp().sum(1) + a[:, 0] * a.max(1), x)
    np.testing.assert_allclose(tt, cpu, rtol=4e-6, atol=1e-6)
    tt, cpu = run_both(lambda a: (a * 100).int().sum(1) + a.argmax(1), x)
    np.testing.assert_array_equal(tt, cpu)


@pytest.mark.needs_cc
def pairs(rng_, shape) -> np.ndarray:
    """+-v in neighbouring elements of the last axis plus 1e-4 residuals: row sums cancel to ~1e-4 of their terms."""
    v = rng_.standard_normal(shape[:-1] + (shape[-1] // 2,))
    return (np.stack([v, -v], -1).reshape(shape) + 1e-4 * rng_.standard_normal(shape)).astype(np.float32)


@pytest.mark.needs_cc
def test_cancelling_sums_are_correctly_rounded():
    """Compensated float32 sums (32 lanes of one output, 4 lanes of 8 outputs, short step groups, the two passes of
    (x - mean).sum) against the exact float64 sum: within one rounding of it plus (K/lanes + log2(lanes))^2 eps^2
    sum|x| (at most 2^-40 sum|x| here); tinygrad's CPU float32 sum of the same data is printed for contrast (about
    1e-4 of the result off)."""
    r = np.random.default_rng(3)
    for fn, x, axis in ((lambda a: a.sum(), pairs(r, (2048,)), None), (lambda a: a.sum(1), pairs(r, (8, 512)), 1),
                        (lambda a: a.sum(1), pairs(r, (40, 12)), 1)):
        tt, cpu = run_both(fn, x)
        exact = x.astype(np.float64).sum(axis)
        bound = EPS32 / 2 * np.abs(exact) + 2.0 ** -40 * np.abs(x.astype(np.float64)).sum(axis)
        assert (np.abs(tt - exact) <= bound).all(), (x.shape, tt, exact)
        print(f"sum of {x.shape}: TT max rel err {np.max(np.abs(tt - exact) / np.abs(exact)):.1e}, "
              f"CPU float32 {np.max(np.abs(cpu - exact) / np.abs(exact)):.1e}")
    x = pairs(r, (4, 300)) + np.float32(3.0)
    tt, _ = run_both(lambda a: (a - a.mean(1, keepdim=True)).sum(1), x)
    # the kernel's float32 mean (the correctly rounded sum times float32(1/300)) and differences; the sum of those is
    # what pass 2 computes (the result moves by 300 ulp of the mean with a one-ulp change of the mean)
    mean32 = x.astype(np.float64).sum(1, keepdims=True).astype(np.float32) * np.float32(1 / 300)
    d = (x - mean32).astype(np.float64)
    exact = d.sum(1)
    assert (np.abs(tt - exact) <= EPS32 / 2 * np.abs(exact) + 2.0 ** -40 * np.abs(d).sum(1)).all(), (tt, exact)


def test_sibling_reductions_share_one_pass():
    """x.sum(1) + x.max(1) is one kernel with two REDUCEs over the same axis: one accumulator each."""
    x = rng.standard_normal((5, 70)).astype(np.float32)
    tt, cpu = run_both(lambda a: a.sum(1) + a.max(1) * (a * a).sum(1), x)
    np.testing.assert_allclose(tt, cpu, rtol=2e-6, atol=1e-5)


@pytest.mark.needs_cc
def test_int_and_bool_reductions():
    x = rng.integers(-1000, 1000, (7, 40)).astype(np.int32)
    tt, cpu = run_both(lambda a: a.sum(1), x)
    np.testing.assert_array_equal(tt, cpu)
    tt, cpu = run_both(lambda a: a.max(0), x)
    np.testing.assert_array_equal(tt, cpu)
    tt, cpu = run_both(lambda a: (a > 900).any(1), x)
    np.testing.assert_array_equal(tt, cpu)


@pytest.mark.needs_cc
def test_bf16_input():
    x = rng.uniform(-4, 4, (7, 45)).astype(np.float32)
    xb = x.astype(np.float32).view(np.uint32)
    xb = ((xb + 0x7FFF + ((xb >> 16) & 1)) & 0xFFFF0000).view(np.float32)   # the bf16 values tinygrad sees
    tt, cpu = run_both(lambda a: a.float().sum(0), x, dtype=dtypes.bfloat16)
    assert_sum_close(tt, cpu, xb, 0)
    tt, cpu = run_both(lambda a: a.sum(1).float(), x, dtype=dtypes.bfloat16)   # fp32 accumulator, bf16 result
    assert (np.abs(tt - cpu) <= 2.0 ** -7 * np.abs(cpu)).all()            # at most one bf16 rounding apart
    # bf16 max: tinygrad's CPU device cannot compile bf16 compares here, so compare with numpy (max is exact)
    tt = Tensor(x, device="TT").cast(dtypes.bfloat16).max(1).float().numpy()
    np.testing.assert_array_equal(tt, xb.max(1))


def rms_norm(x, w):
    """The usual bf16 RMSNorm: tinygrad makes it two kernels (sum of squares + sqrt; then x * (1/r) * w)."""
    xf = x.float()
    return xf * (xf.square().mean(-1, keepdim=True) + 1e-5).rsqrt() * w.float()


@pytest.mark.needs_cc
@pytest.mark.parametrize("weight", ["ones", "random"])
def test_rmsnorm_2048_bf16(weight):
    x = rng.standard_normal(2048).astype(np.float32)
    w = np.ones(2048, np.float32) if weight == "ones" else rng.standard_normal(2048).astype(np.float32)
    tt, cpu = run_both(rms_norm, x, w, dtype=dtypes.bfloat16)
    # sum of squares (K = 2048) + sqrt + reciprocal + two products: a few ulps relative to the largest output
    assert np.abs(tt - cpu).max() <= 1e-5 * np.abs(cpu).max()


@pytest.mark.needs_cc
def test_argmax_prod_and_computed_streams():
    """argmax = max, then a max over (x == max) * (K - k): the reversed index is index math in the value part, which
    the reader computes per element (a computed stream); prod is a REDUCE MUL with masked pads (identity 1)."""
    x = rng.standard_normal((6, 50)).astype(np.float32)
    x[2, 7] = x[2, 30] = 5.0                                  # ties: the first index wins
    tt, cpu = run_both(lambda a: a.argmax(1), x)
    np.testing.assert_array_equal(tt, cpu)
    tt, cpu = run_both(lambda a: a.argmin(0), x)
    np.testing.assert_array_equal(tt, cpu)
    tt, cpu = run_both(lambda a: (a * 0.25 + 1).prod(1), x)
    np.testing.assert_allclose(tt, cpu, rtol=50 * EPS32)       # 50 products, each rounded once
    tt, cpu = run_both(lambda a: a.tril() + a.pad(((0, 0), (1, 0)), value=3.0)[:, :50], x)   # range conditions
    np.testing.assert_array_equal(tt, cpu)


@pytest.mark.needs_cc
@pytest.mark.parametrize("dtype", [None, dtypes.bfloat16])
def test_softmax_over_rows_read_a_tile_per_noc_request(dtype):
    """Rows of 1024 (64-byte multiples): the launch model takes the 32-lane layout, x read one tile per NoC request,
    the row max replicated over the tile by word fills (read_gather.c.j2 cell_const); fp32 and bf16 tiles."""
    x = rng.standard_normal((6, 1024)).astype(np.float32)
    if dtype is None:
        tt, cpu = run_both(lambda a: a.softmax(-1), x)
        np.testing.assert_allclose(tt, cpu, rtol=1e-5, atol=1e-7)
        return
    # bf16 (tinygrad's CPU device cannot compile bf16 here): float64 softmax of the bf16-rounded input, within bf16's
    # rounding of the max, the exponentials and the result (a few bf16 ulps)
    xb = (x.view(np.uint32) & 0xFFFF0000).view(np.float32).astype(np.float64)
    ref = np.exp(xb - xb.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    tt = Tensor(x, device="TT").cast(dtype).softmax(-1).float().numpy()
    np.testing.assert_allclose(tt, ref, rtol=3e-2, atol=1e-6)


@pytest.mark.needs_cc
@pytest.mark.ttsim
def test_ttsim_matches_emulator_bit_for_bit():
    """The same ELFs on Tenstorrent's simulator: every reduction layout (1 and 32 lanes with SFPSHFT2 + SFPTRANSP,
    short step groups with INCRWC, SFPSWAP max, int32 max, computed streams, compensated sums) gives identical
    bits."""
    x = rng.standard_normal((5, 70)).astype(np.float32)
    xs = rng.standard_normal((70, 5)).astype(np.float32)
    v = rng.standard_normal(2048).astype(np.float32)
    cases = [(lambda a: a.sum(1), x), (lambda a: (a * a).sum().sqrt(), v), (lambda a: a.exp().sum(1) + a.max(1), xs),
             (lambda a: a.argmax(1), x), (lambda a: (a * 100).int().max(1), x),
             (lambda a: (a - 10).max(1) + a.sum(1), rng.standard_normal((2, 1552)).astype(np.float32)),
             # compensated sums: 32 lanes, 4 lanes, short step groups, both passes of a two-pass reduction
             (lambda a: a.sum(), pairs(rng, (2048,))), (lambda a: a.sum(1), pairs(rng, (8, 512))),
             (lambda a: a.sum(1), pairs(rng, (40, 12))),
             (lambda a: (a - a.mean(1, keepdim=True)).sum(1), pairs(rng, (4, 300))),
             # 32 lanes read a tile per NoC request, the row max filled over the tile
             (lambda a: a.softmax(-1), rng.standard_normal((3, 1024)).astype(np.float32))]
    for fn, a in cases:
        sim = fn(Tensor(a, device="TT:ttsim")).numpy()
        emu = fn(Tensor(a, device="TT:emu")).numpy()
        np.testing.assert_array_equal(sim.view(np.uint32) if sim.dtype == np.float32 else sim,
                                      emu.view(np.uint32) if emu.dtype == np.float32 else emu)


def test_sum_over_gathered_layernorm_has_no_nan_from_pads():
    """Random program 5251: a layer norm gathered by loaded indices, then summed over 5 (pads in the reduction tile).
    The pads read 0 into the norm's reciprocal scale, 0 * inf is NaN, so the sum needs the validity mask
    (sfpu_reduce.zero_preserving); every output was NaN."""
    rng = np.random.default_rng(1)
    x = rng.uniform(-3, 3, (7, 1, 5)).astype(np.float32)
    idx = rng.integers(0, 6, (31, 1, 5)).astype(np.int32)
    fn = lambda dev: Tensor(x, device=dev).layernorm(axis=-1).gather(0, Tensor(idx, device=dev)).sum(-1).numpy()
    np.testing.assert_allclose(fn("TT"), fn("CPU"), rtol=1e-5, atol=1e-5)
