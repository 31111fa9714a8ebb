"""Two-pass reductions (lowering/families/sfpu_reduce.py plan_two_pass): one reduction's pre-op reads another's finished
value, in one kernel. tinygrad fuses these for reductions with no axis (x.argmax(), x.logsumexp(),
(x - x.max()).exp().sum(), (x - x.mean()).abs().sum()); with an axis it makes two kernels. Pass 1 reduces, broadcasts each
output's result to all of its lanes and row steps of a Dst slot; pass 2 streams the same tiles again with that slot as
an input.

Tolerances: argmax/argmin and max-based results exact; float sums |tt - cpu| <= 2 * eps32 * sqrt(K) * sum|terms|
(as tests/e2e/test_reduce.py), logs/exps relative 1e-6 (a few ulp of the SFPU sequences on top of the sum).
"""

import json

import numpy as np
import pytest

from tt_backend.lowering.dag import ValueDAG
from tt_backend.lowering.frontend import LoweredKernel, StreamIndex
from tt_backend.lowering.families.sfpu_reduce import ACC, TWO_PASS_LANES, choose_layout, finish_words, plan_reduce
from tt_backend.lowering.families.tile_plan import allocate_l1, reduce_out_datum
from tt_backend.lowering.index import IndexExpr
from tt_backend.lowering.plan import Buffer
from tt_backend.chip.numerics.dst import Dst
from tt_backend.chip.numerics.sfpu.functional import FunctionalSFPU as SFPU
from tt_backend.chip.errors import UnsupportedOp
from tt_backend.chip.isa import decode, encode

from tests.support import ttsim_path

EPS32 = 2.0 ** -23
rng = np.random.default_rng(4)


# ------------------------------------------------------------------------------------------ the broadcast finish

@pytest.mark.parametrize("lanes", [1, 8, 32])
@pytest.mark.parametrize("op,dtype", [("ADD", "float32"), ("MAX", "float32"), ("MAX", "int32"), ("MUL", "float32")])
def test_broadcast_finish_on_sfpu_model(lanes, op, dtype):
    """finish_words(broadcast=True): every lane of every row step of the slot holds its output's result, bit for bit
    the value of the result lane (which the one-pass finish stores): float sums in a rotation tree differ per lane in
    the last bit, so the broadcast copies the result lane rather than trusting the other lanes."""
    sfpu = SFPU(Dst())
    sfpu.execute(*decode(encode("SFPENCC", imm12_math=3, lreg_dest=0, instr_mod1=10)), 0)
    if dtype == "float32":
        x = (rng.standard_normal(32) * np.exp(rng.uniform(-8, 8, 32))).astype(np.float32)
    else:
        x = rng.integers(-2**31, 2**31, 32, dtype=np.int64).astype(np.int32)
    sfpu.lreg[ACC] = x.view(np.uint32)
    for w in finish_words([(op, dtype)], lanes, 2, broadcast=True):
        sfpu.execute(*decode(w), 0)
    assert sfpu.lane_flags.all() and sfpu.stack_depth == 0
    tile = sfpu.dst.rows32[128:192].reshape(1024)
    # one-pass finish on the same accumulator: the reference result per output
    one = SFPU(Dst())
    one.execute(*decode(encode("SFPENCC", imm12_math=3, lreg_dest=0, instr_mod1=10)), 0)
    one.lreg[ACC] = x.view(np.uint32)
    for w in finish_words([(op, dtype)], lanes, 2):
        one.execute(*decode(w), 0)
    ref = one.dst.rows32[128:192].reshape(1024)
    for j in range(32 // lanes):
        want = ref[reduce_out_datum(lanes, j)]
        for step in range(32):
            for lane in range(j * lanes, (j + 1) * lanes):
                datum = 64 * (step >> 1) + 16 * (lane >> 3) + 2 * (lane & 7) + (step & 1)
                assert tile[datum] == want, (j, step, lane)


def test_two_pass_layouts():
    assert choose_layout(1, 400, TWO_PASS_LANES) == (32, 32)
    assert choose_layout(1, 50, TWO_PASS_LANES) == (8, 32)     # 2/4 lanes are not whole 8-lane rows: not used
    assert choose_layout(40, 5, TWO_PASS_LANES) == (1, 16)


# ------------------------------------------------------------------------------------------ tinygrad programs on TT

from tinygrad import Tensor  # noqa: E402

pytestmark = pytest.mark.usefixtures("serial_compile")     # tests/e2e/conftest.py


def run_both(fn, a, dtype=None):
    def mk(dev):
        t = Tensor(a, device=dev)
        return t if dtype is None else t.cast(dtype)
    tt, cpu = fn(mk("TT")).numpy(), fn(mk("CPU")).numpy()
    assert tt.shape == cpu.shape and tt.dtype == cpu.dtype
    return tt, cpu


# 1-D..3-D, sizes not multiples of 32 or 1024: 1 lane (K <= 32), 8 lanes (K <= 256), 32 lanes (1 and 2 tiles)
SHAPES = [(7,), (50,), (300,), (1000,), (1100,), (8, 50), (3, 5, 7), (4, 9, 37)]


@pytest.mark.needs_cc
def test_two_pass_launch_is_predicted(monkeypatch, tmp_path):
    """The launch model of a two-pass reduction (SfpuReducePlan.launch_cycles: both passes' programs, the computed
    index stream's nested walk) within 25 % of the emulated cycles."""
    monkeypatch.setenv("TT_DUMP", str(tmp_path))
    x = rng.standard_normal(333).astype(np.float32)     # a size no other test compiles (program cache)
    assert Tensor(x, device="TT:emu").argmax().item() == x.argmax()    # (emulated cycles: the emulator by name)
    (report,) = [json.loads(p.read_text()) for p in tmp_path.glob("*/report.json")]
    assert abs(report["predicted_launch_cycles"]["total"] / report["emulated_cycles"] - 1) <= 0.25


@pytest.mark.needs_cc
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_argmax_argmin_no_axis(shape):
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    n = flat.size
    hi, lo = [int(i) for i in rng.choice(n, 2, replace=False)]
    flat[hi], flat[lo] = 7.0, -7.0
    for fn, want in ((lambda t: t.argmax(), flat.argmax()), (lambda t: t.argmin(), flat.argmin())):
        tt, cpu = run_both(fn, x)
        assert tt == cpu == want
    # ties: the first index wins, also when the copies are in different lanes/tiles/passes' pads
    for pos in ([0, n - 1], [n - 1, n // 2], [n // 3, n // 2, n - 1]):
        y = flat.copy()
        y[pos] = 9.0
        tt, cpu = run_both(lambda t: t.argmax(), y.reshape(shape))
        assert tt == cpu == min(pos)
        y[pos] = -9.0
        tt, cpu = run_both(lambda t: t.argmin(), y.reshape(shape))
        assert tt == cpu == min(pos)


@pytest.mark.needs_cc
def test_argmax_special_inputs():
    c = np.full((3, 41), 2.5, np.float32)                    # all equal: index 0
    assert run_both(lambda t: t.argmax(), c)[0] == 0
    z = np.zeros(70, np.float32)
    z[[5, 60]] = -0.0                                       # -0 == +0: the first zero wins
    tt, cpu = run_both(lambda t: t.argmax(), z)
    assert tt == cpu == 0
    i = rng.integers(-1000, 1000, (6, 45)).astype(np.int32)  # int32 max in pass 1
    i.reshape(-1)[[17, 200]] = 5000
    tt, cpu = run_both(lambda t: t.argmax(), i)
    assert tt == cpu == 17


@pytest.mark.needs_cc
@pytest.mark.parametrize("shape", [(7,), (50,), (8, 50), (3, 5, 7), (2100,)], ids=str)
def test_max_then_sum(shape):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    tt, cpu = run_both(lambda t: (t - t.max()).exp().sum(), x)
    terms = np.exp(x.astype(np.float64) - x.max())
    assert abs(float(tt) - float(cpu)) <= 2 * EPS32 * np.sqrt(x.size) * terms.sum() + 4e-7 * terms.sum()
    tt, cpu = run_both(lambda t: t.logsumexp(), x)
    np.testing.assert_allclose(tt, cpu, rtol=1e-6, atol=1e-6)


@pytest.mark.needs_cc
@pytest.mark.parametrize("shape", [(7,), (50,), (8, 50), (2100,)], ids=str)
def test_sum_then_sum_and_max(shape):
    """A float sum in pass 1 (the mean): every lane of pass 2 must see the same bits of it."""
    x = rng.uniform(-4, 4, shape).astype(np.float32)
    tt, cpu = run_both(lambda t: (t - t.mean()).abs().sum(), x)
    terms = np.abs(x.astype(np.float64) - x.mean())
    assert abs(float(tt) - float(cpu)) <= 2 * EPS32 * np.sqrt(x.size) * (terms.sum() + np.abs(x).sum())
    tt, cpu = run_both(lambda t: (t / t.sum()).max(), np.abs(x) + 0.5)
    np.testing.assert_allclose(tt, cpu, rtol=2 * EPS32 * np.sqrt(x.size) + 2 * EPS32)


# ------------------------------------------------------------------------------------------ hand-built kernels
# tinygrad makes a reduction with an axis two kernels; the two-pass layouts with several outputs per tile (1 lane,
# 8 lanes, short step groups, several groups) are exercised with hand-built kernels: rows of a (O, K) matrix.

LOG2E, LN2 = 1.4426950408889634, 0.6931471805599453


def row_kernel(kind: str, O: int, K: int) -> LoweredKernel:
    """ranges (O, K), x[o*K + k]; lse: max, then sum exp(x - max), log + max; argmax: max, then max of
    (x == max) * (K - k) (a computed stream), K - that; mad: sum, then sum |x - sum/K|."""
    r0, r1 = IndexExpr.range_var(0), IndexExpr.range_var(1)
    x = StreamIndex(1, "float32", r0 * K + r1, None, True, ranges=frozenset({0, 1}), coef=(K, 1, 0))
    out = StreamIndex(0, "int32" if kind == "argmax" else "float32", r0, None, False, ranges=frozenset({0}),
                      coef=(1, 0, 0))
    d, inputs = ValueDAG(), [x]
    ld = d.add("LOAD", "float32", (), 0)
    c = lambda dt, v: d.add("CONST", dt, (), v)   # noqa: E731
    if kind == "lse":
        m = d.add("REDUCE", "float32", (ld,), ("MAX", (1,)))
        e = d.add("EXP2", "float32", (d.add("MUL", "float32", (d.add("SUB", "float32", (ld, m)), c("float32", LOG2E))),))
        s = d.add("REDUCE", "float32", (e,), ("ADD", (1,)))
        d.out = d.add("ADD", "float32", (d.add("MUL", "float32", (d.add("LOG2", "float32", (s,)), c("float32", LN2))), m))
    elif kind == "argmax":
        inputs.append(StreamIndex(0, "int32", IndexExpr.const(0), None, False, ranges=frozenset({1}),
                                  value=r1 * -1 + K))
        m = d.add("REDUCE", "float32", (ld,), ("MAX", (1,)))
        eq = d.add("CMPNE", "bool", (d.add("CMPNE", "bool", (ld, m)), c("bool", True)))
        v = d.add("MUL", "int32", (d.add("CAST", "int32", (eq,)), d.add("LOAD", "int32", (), 1)))
        r = d.add("REDUCE", "int32", (v,), ("MAX", (1,)))
        d.out = d.add("ADD", "int32", (c("int32", K), d.add("MUL", "int32", (r, c("int32", -1)))))
    else:
        s = d.add("REDUCE", "float32", (ld,), ("ADD", (1,)))
        dev = d.add("SUB", "float32", (ld, d.add("MUL", "float32", (s, c("float32", 1.0 / K)))))
        d.out = d.add("REDUCE", "float32", (d.add("MAX", "float32", (dev, d.add("NEG", "float32", (dev,)))),),
                      ("ADD", (1,)))
    return LoweredKernel(f"two_pass_{kind}_{O}_{K}", (O, K), [Buffer(0, out.dtype, O * 4), Buffer(1, "float32", O * K * 4)],
                         inputs, out, d)


def run_plan(plan, x, device=None):
    from tt_backend.lowering.codegen.sources import split
    from tt_backend.runtime import compile as C
    from tt_backend.runtime import driver
    if device is None:
        from tt_backend.runtime.emu.device import EmuDevice
        device = EmuDevice()
    addrs = [0x40000, 0x40000 + ((plan.buffers[0].nbytes + 0xFFF) & ~0xFFF)]
    device.write_dram(addrs[1], x.astype(np.float32).tobytes())
    sources, headers = split(plan.render())
    res = driver.launch(device, C.compile_kernel(sources, headers, plan.name), plan.arg_words(addrs), timeout_s=300)
    assert all(c.done == res.generation and c.error == 0 for c in res.cores.values())
    assert {c.progress for c in res.cores.values()} >= {plan.n_tiles}
    return np.frombuffer(device.read_dram(addrs[0], plan.buffers[0].nbytes),
                         np.int32 if plan.output.dtype == "int32" else np.float32)


ROWS = [(40, 5), (300, 3), (33, 12), (5, 70), (70, 33), (3, 250), (2, 1100)]


@pytest.mark.needs_cc
@pytest.mark.parametrize("kind", ["argmax", "lse", "mad"])
@pytest.mark.parametrize("O,K", ROWS, ids=str)
def test_hand_built_rows(kind, O, K):
    x = rng.standard_normal((O, K)).astype(np.float32)
    x[1, K // 2] = x[1, K - 1] = 9.0                          # a tie in row 1
    x[O - 1, 0] = x[O - 1, K - 1] = 9.0
    plan = allocate_l1(plan_reduce(row_kernel(kind, O, K)))
    rp = plan.reduce
    assert rp.passes == 2 and rp.lanes in TWO_PASS_LANES and plan.n_tiles == 2 * rp.groups * rp.tiles_per_group
    got = run_plan(plan, x)
    x64 = x.astype(np.float64)
    if kind == "argmax":
        np.testing.assert_array_equal(got, x.argmax(1))
    elif kind == "lse":
        m = x.max(1)
        terms = np.exp(x64 - m[:, None])
        np.testing.assert_allclose(got, np.log(terms.sum(1)) + m, rtol=1e-6, atol=2 * EPS32 * np.sqrt(K) * 4)
    else:
        mean = (x64.sum(1) / K)[:, None]
        bound = 2 * EPS32 * np.sqrt(K) * (np.abs(x64 - mean).sum(1) + np.abs(x64).sum(1))
        assert (np.abs(got - np.abs(x64 - mean).sum(1)) <= bound).all()


# ------------------------------------------------------------------------------------------ frontend

def lowered_kernels(t):
    from tt_backend.lowering.frontend import lower_ast
    return [lower_ast(c.src[0], f"k{i}") for i, c in enumerate(t.schedule_linear().src)
            if c.op.name == "CALL" and c.src[0].op.name == "SINK"]


def test_frontend_aliases_the_dependent_reduction():
    """x.argmax() is one kernel: the second reduction's range aliases the first's (one range of K), the two loads of x
    are one contiguous stream after dedupe, and a merged REDUCE(op, REDUCE(op, ...)) is not aliased."""
    from tt_backend.lowering.families.sfpu_reduce import dedupe_streams, reduce_deps
    x = rng.standard_normal((8, 50)).astype(np.float32)
    (lk,) = [k for k in lowered_kernels(Tensor(x, device="CPU").argmax()) if len(k.ranges) == 1]
    reds = [n for n in lk.dag.nodes if n.op == "REDUCE"]
    assert lk.ranges == (400,) and len(reds) == 2 and reds[0].arg[1] == reds[1].arg[1] == (0,)
    assert reduce_deps(lk.dag, reds[1]) == {reds[0].id}
    dd = dedupe_streams(lk)
    assert len(dd.inputs) == 2 and dd.inputs[0].contiguous and dd.inputs[1].value_c is not None
    # a max over everything feeding per-row sums: other elements, the ranges stay apart
    ks = lowered_kernels((lambda t: (t - t.max()).exp().sum(1))(Tensor(x[:4], device="CPU")))
    assert any(len({n.arg[1] for n in k.dag.nodes if n.op == "REDUCE"}) == 2 for k in ks)


# ------------------------------------------------------------------------------------------ refusals

def test_three_passes_refused():
    lk = row_kernel("lse", 4, 40)
    d = lk.dag
    s = next(n for n in d.nodes if n.op == "REDUCE" and n.arg[0] == "ADD")
    ld = next(n for n in d.nodes if n.op == "LOAD")
    r3 = d.add("REDUCE", "float32", (d.add("SUB", "float32", (ld.id, s.id)),), ("MAX", (1,)))
    d.out = d.add("ADD", "float32", (d.out, r3))
    with pytest.raises(UnsupportedOp, match="three passes"):
        plan_reduce(lk)


# ------------------------------------------------------------------------------------------ ttsim oracle

@pytest.mark.needs_cc
@pytest.mark.ttsim
def test_ttsim_matches_emulator_bit_for_bit():
    x = rng.standard_normal((8, 50)).astype(np.float32)
    v = rng.standard_normal(2100).astype(np.float32)
    for fn, a in ((lambda t: t.argmax(), x), (lambda t: t.logsumexp(), v), (lambda t: (t - t.mean()).abs().sum(), x)):
        sim = fn(Tensor(a, device="TT:ttsim")).numpy()
        emu = fn(Tensor(a, device="TT:emu")).numpy()
        assert sim.tobytes() == emu.tobytes()
    # hand-built ones with several outputs: 8 lanes and a float sum in pass 1, short step groups, 32 lanes x 2 tiles
    from tt_backend.runtime.ttsim_device import TtsimDevice
    for kind, O, K in (("mad", 5, 70), ("argmax", 40, 5), ("lse", 2, 1100)):
        plan = allocate_l1(plan_reduce(row_kernel(kind, O, K)))
        xs = rng.standard_normal((O, K)).astype(np.float32)
        sim = TtsimDevice(ttsim_path())
        try:
            assert run_plan(plan, xs, sim).tobytes() == run_plan(plan, xs).tobytes(), (kind, O, K)
        finally:
            sim.close()
