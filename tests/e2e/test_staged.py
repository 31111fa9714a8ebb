"""Staged kernels (lowering/families/staged.py) run on Device TT and match tinygrad's CPU device.

The programs are ones whose fused kernel no one-pass family lowers: a reduction feeding another over other elements,
three chained reductions, a conv2d input gradient, 9 / 16 / 40 distinct inputs in one kernel (tinygrad's own split at
DEVICE_MAX_BUFS lifted with MAX_KERNEL_BUFFERS), several STOREs (a hand-built AST: tinygrad 0.14 schedules one STORE
per kernel). Each case first checks that the kernel really is staged.

Tolerances: every stage computes in float32 on the SFPU; the sums run in another order than the CPU's, so a result
whose terms sum to S may differ by a few float32 ulps of S per reduction level: rtol = 1e-5 with atol = 1e-5 * the
largest |value| of the reference (elementwise-only cases: 1e-6, a couple of roundings of the same operations).
"""
import numpy as np
import pytest
from tinygrad import Device, Tensor, dtypes
from tinygrad.helpers import Context
from tinygrad.uop.ops import AxisType, KernelInfo, Ops, ParamArg, UOp

from tests.e2e.ast_kernels import run_ast
from tt_backend.lowering.families.staged import StagedPlan
from tt_backend.lowering.select import lower

rng = np.random.default_rng(17)
pytestmark = pytest.mark.needs_cc


def kernels(t: Tensor) -> list[UOp]:
    return [c.src[0] for c in t.schedule_linear().src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]


def stage_counts(fn, arrays) -> list[int]:
    """Per kernel of fn on the CPU device's schedule: its number of stages (1: a one-pass plan)."""
    plans = [lower(k, "k") for k in kernels(fn(*[Tensor(a, device="CPU") for a in arrays]))]
    return [len(p.launches) for p in plans]


def close(got, ref, rtol):
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * float(np.abs(ref).max()))


def chain(ts):
    out = ts[0]
    for t in ts[1:]: out = out * 0.75 + t
    return out


PROGRAMS = {   # name: (fn, input shapes, rtol)
    "reduction_of_reduction": (lambda x: (x - x.mean()).square().sum(0), [(8, 40)], 1e-5),
    "three_chained_reductions": (lambda x: ((x - ((x - x.mean()) ** 2).mean()) ** 2).sum(0), [(8, 16)], 1e-5),
    "max_then_row_sums": (lambda x: (x - x.max()).exp().sum(1), [(4, 50)], 1e-5),
    "conv2d_input_grad": (lambda w, x: x.conv2d(w).sum().gradient(x)[0], [(3, 2, 3, 3), (2, 2, 6, 6)], 1e-5),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_fused_reductions(name, serial_compile):
    fn, shapes, rtol = PROGRAMS[name]
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    assert max(stage_counts(fn, arrays)) > 1, "the program has no staged kernel any more: pick another"
    got = fn(*[Tensor(a, device="TT") for a in arrays]).numpy()
    close(got, fn(*[Tensor(a, device="CPU") for a in arrays]).numpy(), rtol)


@pytest.mark.parametrize("n,reduce", [(9, False), (16, True), (40, False)])
def test_many_inputs_in_one_kernel(n, reduce, serial_compile):
    """n distinct input buffers in one fused kernel (chain: x0 * 0.75 + x1 ..., then a row sum when `reduce`)."""
    fn = (lambda *ts: chain(ts).sum(1)) if reduce else (lambda *ts: chain(ts))
    arrays = [rng.standard_normal((4, 24)).astype(np.float32) for _ in range(n)]
    with Context(MAX_KERNEL_BUFFERS=n + 2):
        counts = stage_counts(fn, arrays)
        assert counts == [counts[0]] and counts[0] > 1, counts
        got = fn(*[Tensor(a, device="TT") for a in arrays]).numpy()
    close(got, fn(*[Tensor(a, device="CPU") for a in arrays]).numpy(), 1e-5 if reduce else 1e-6)


def two_store_kernel(n: int) -> UOp:
    """out0[i] = x[i] * 2 and out1[i] = x[i] + 1 in one kernel (slots 0, 1 written; slot 2 read)."""
    f = dtypes.float
    p = [UOp(Ops.PARAM, f, src=(UOp(Ops.CONST, dtypes.weakint, arg=n),), arg=ParamArg(s, f)) for s in range(3)]
    r = UOp(Ops.RANGE, dtypes.weakint, src=(UOp(Ops.CONST, dtypes.weakint, arg=n),), arg=(0, AxisType.LOOP))
    x = UOp(Ops.INDEX, f, src=(p[2], r))
    ends = [UOp(Ops.END, dtypes.void, src=(UOp(Ops.STORE, dtypes.void, src=(UOp(Ops.INDEX, f, src=(p[k], r)), v)), r))
            for k, v in ((0, x * 2.0), (1, x + 1.0))]
    return UOp(Ops.SINK, dtypes.void, src=tuple(ends), arg=KernelInfo())


def test_several_stores(serial_compile):
    n = 96
    x = rng.standard_normal(n).astype(np.float32)
    ast = two_store_kernel(n)
    plan = lower(ast, "k")
    assert isinstance(plan, StagedPlan) and plan.out_slots == [0, 1] and plan.in_slots == [2] and not plan.scratch
    out0, out1, same = run_ast(ast, [np.zeros(n, np.float32), np.zeros(n, np.float32), x], "TT")
    np.testing.assert_array_equal(out0, x * 2)
    np.testing.assert_array_equal(out1, x + 1)
    np.testing.assert_array_equal(same, x)


@pytest.mark.ttsim
def test_ttsim_matches_emulator_bit_for_bit(serial_compile):
    for name in ("reduction_of_reduction", "three_chained_reductions"):
        fn, shapes, _ = PROGRAMS[name]
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        sim = fn(*[Tensor(a, device="TT:ttsim") for a in arrays]).numpy()
        emu = fn(*[Tensor(a, device="TT:emu") for a in arrays]).numpy()
        assert sim.tobytes() == emu.tobytes(), name
    arrays = [rng.standard_normal((4, 24)).astype(np.float32) for _ in range(9)]
    with Context(MAX_KERNEL_BUFFERS=11):
        sim = chain([Tensor(a, device="TT:ttsim") for a in arrays]).numpy()
        emu = chain([Tensor(a, device="TT:emu") for a in arrays]).numpy()
    assert sim.tobytes() == emu.tobytes()
