"""A gated STORE (lowering/frontend.py): the element is written where the gate holds and keeps its old contents
elsewhere, also when the gate reads loaded data (a float comparison, an int8 mask, a float16 buffer read through a
permuted index). Hand-built ASTs on random data against numpy, exactly: the gates and values are computed without
rounding differences (comparisons, integer adds, doubling). The output buffer starts with a sentinel pattern so a point
the gate turns off shows whether its old value survived.
tinygrad itself emits such gates where its simplifier cannot prove a pad's tautology beside a loaded value (random
programs 7788 and 7798 as the generator drew them before int32 matmuls were added): those fold to ungated STOREs.
"""
import numpy as np
import pytest
from tinygrad import dtypes
from tinygrad.dtype import Invalid
from tinygrad.uop.ops import AxisType, KernelInfo, Ops, ParamArg, UOp

from tests.e2e.ast_kernels import run_ast
from tt_backend.chip.errors import UnsupportedOp
from tt_backend.lowering.select import lower

pytestmark = pytest.mark.needs_cc


def const(v, dt=dtypes.weakint) -> UOp: return UOp(Ops.CONST, dt, arg=v)
def param(slot: int, dt, n: int) -> UOp: return UOp(Ops.PARAM, dt, src=(const(n),), arg=ParamArg(slot, dt))
def rng_(k: int, n: int) -> UOp: return UOp(Ops.RANGE, dtypes.weakint, src=(const(n),), arg=(k, AxisType.LOOP))
def load(p: UOp, idx: UOp) -> UOp: return UOp(Ops.INDEX, p.dtype, src=(p, idx))


def gated_store_kernel(out: UOp, idx: UOp, gate: UOp, value: UOp, ranges: list[UOp]) -> UOp:
    target = UOp(Ops.INDEX, out.dtype, src=(out, UOp(Ops.WHERE, dtypes.weakint, src=(gate, idx, const(Invalid, dtypes.bool)))))
    store = UOp(Ops.STORE, dtypes.void, src=(target, value))
    return UOp(Ops.SINK, dtypes.void, src=(UOp(Ops.END, dtypes.void, src=(store, *ranges)),), arg=KernelInfo())


def float_gate(n: int, gen):
    """out[i] = 2 x[i] + 1 where x[i] < y[i] (float32 loads in the gate)."""
    f = dtypes.float
    out, x, y = param(0, f, n), param(1, f, n), param(2, f, n)
    r = rng_(0, n)
    xi = load(x, r)
    ast = gated_store_kernel(out, r, load(x, r) < load(y, r), xi * const(2.0, f) + const(1.0, f), [r])
    a, b = gen.integers(-64, 64, (2, n)).astype(np.float32) / 8
    return ast, [np.full(n, -7.5, np.float32), a, b], np.where(a < b, 2 * a + 1, np.float32(-7.5))


def int8_mask_and_range_gate(n: int, gen):
    """int16 out[i] = a[i] + 3 where m[i] != 0 and i < n - 37 (an int8 buffer and the range in the gate)."""
    out, a, m = param(0, dtypes.int16, n), param(1, dtypes.int16, n), param(2, dtypes.int8, n)
    r = rng_(0, n)
    gate = load(m, r).ne(const(0, dtypes.int8)) & (r < const(n - 37))
    ast = gated_store_kernel(out, r, gate, load(a, r) + const(3, dtypes.int16), [r])
    av, mv = gen.integers(-3000, 3000, n).astype(np.int16), gen.integers(-2, 3, n).astype(np.int8)
    keep = (mv != 0) & (np.arange(n) < n - 37)
    return ast, [np.full(n, 1234, np.int16), av, mv], np.where(keep, av + 3, np.int16(1234)).astype(np.int16)


def float16_permuted_gate(rows: int, cols: int, gen):
    """float16 out[i, j] = h[j, i] * 2 where h[j, i] > 0: a 2-D kernel whose gate reads a float16 buffer through a
    transposed index."""
    h16 = dtypes.half
    out, h = param(0, h16, rows * cols), param(1, h16, rows * cols)
    i, j = rng_(0, rows), rng_(1, cols)
    hv = load(h, j * const(rows) + i)
    ast = gated_store_kernel(out, i * const(cols) + j, const(0.0, h16) < hv, hv * const(2.0, h16), [i, j])
    hd = (gen.integers(-40, 40, (cols, rows)) / 4).astype(np.float16)
    ht = hd.T
    return ast, [np.full(rows * cols, 9.0, np.float16), hd.reshape(-1)], \
        np.where(ht > 0, ht * np.float16(2), np.float16(9.0)).reshape(-1)


def gated_row_sums(n: int, k: int, gen):
    """out[i] = sum_j x[i, j] / 2 where m[i] != 0 (int32 mask): the gate around a reduction (exact: values on a grid
    of 1/8)."""
    f = dtypes.float
    out, x, m = param(0, f, n), param(1, f, n * k), param(2, dtypes.int32, n)
    i, j = rng_(0, n), UOp(Ops.RANGE, dtypes.weakint, src=(const(k),), arg=(1, AxisType.REDUCE))
    total = UOp(Ops.REDUCE, f, src=(load(x, i * const(k) + j), j), arg=(Ops.ADD,))
    ast = gated_store_kernel(out, i, load(m, i).ne(const(0, dtypes.int32)), total * const(0.5, f), [i])
    xv, mv = (gen.integers(-64, 64, n * k) / 8).astype(np.float32), gen.integers(0, 2, n).astype(np.int32)
    return ast, [np.full(n, -3.0, np.float32), xv, mv], np.where(mv != 0, xv.reshape(n, k).sum(1) / 2, np.float32(-3))


CASES = {"float_gate": lambda g: float_gate(3000, g), "int8_mask_and_range": lambda g: int8_mask_and_range_gate(700, g),
         "float16_permuted": lambda g: float16_permuted_gate(40, 33, g), "row_sums": lambda g: gated_row_sums(40, 70, g)}


@pytest.mark.parametrize("case", list(CASES))
def test_gated_store_keeps_the_old_value_where_the_gate_is_off(case, serial_compile):
    ast, arrays, want = CASES[case](np.random.default_rng(list(CASES).index(case)))
    got = run_ast(ast, arrays, "TT")[0]
    np.testing.assert_array_equal(got, want)


def test_gated_store_outside_the_buffer_is_refused():
    """The gate turns off exactly the points whose index leaves the buffer (r < 5 over 8 points, 5 elements):
    read-modify-write would touch them, so the kernel is refused with the reason, not run."""
    f = dtypes.float
    out, x = param(0, f, 5), param(1, f, 8)
    r = rng_(0, 8)
    ast = gated_store_kernel(out, r, r < const(5), load(x, r), [r])
    with pytest.raises(UnsupportedOp, match="gated STORE whose index .* leaves the 5-element buffer"):
        lower(ast, "k")


@pytest.mark.ttsim
@pytest.mark.parametrize("case", list(CASES))
def test_ttsim_matches_emulator_bit_for_bit(case, serial_compile):
    ast, arrays, want = CASES[case](np.random.default_rng(list(CASES).index(case)))
    sim, emu = run_ast(ast, arrays, "TT:ttsim")[0], run_ast(ast, arrays, "TT:emu")[0]
    assert sim.tobytes() == emu.tobytes()
    np.testing.assert_array_equal(sim, want)


def shifted_pad(a, s):
    """Random program 7788 (module doc): tinygrad's STORE gate is a pad's tautology ANDed with (loaded int8 < 0 || tautology)."""
    return a[2:16:3, 3:7:2, 0:3:3].pad(((1, 0), (1, 1), (1, 0)), value=3).clip(0, 127) << s


def picked_rmsnorm(a, b, c):
    """Random program 7798 (module doc): the gate is !(b < c) || tautology (a float32 comparison of loaded values)."""
    x = a.pad(((0, 0), (2, 1))).square().pad(((0, 1), (1, 1)), value=1.5)
    return (b < c).where(x * ((x * x).mean(0, keepdim=True) + 1e-5).rsqrt(), b)


TAUTOLOGIES = {"shifted_pad": (shifted_pad, [((16, 7, 3), np.int8, -100, 100), ((2,), np.int8, 0, 1)]),
               "picked_rmsnorm": (picked_rmsnorm, [((1, 3), np.float32, -4, 4), ((2, 8), np.float32, -3, 3),
                                                   ((8,), np.float32, -3, 3)])}


@pytest.mark.parametrize("name", list(TAUTOLOGIES))
def test_tautology_beside_loaded_data_is_folded(name, serial_compile):
    """The range-only parts of the gate are constant over the kernel's iteration space: folded, the STORE is
    ungated (no kernel reads its own output), and the result is tinygrad's CPU device's (tolerance: rmsnorm's sum
    and rsqrt in another order, a few float32 ulps)."""
    from tinygrad import Tensor
    from tt_backend.lowering.frontend import lower_ast
    fn, specs = TAUTOLOGIES[name]
    gen = np.random.default_rng(7788)
    arrays = [(gen.integers(lo * 8, hi * 8, shape) / 8).astype(dt) if dt == np.float32 else
              gen.integers(lo, hi, shape).astype(dt) for shape, dt, lo, hi in specs]
    sched = fn(*[Tensor(a, device="CPU") for a in arrays]).schedule_linear()
    for k in [c.src[0] for c in sched.src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]:
        lk = lower_ast(k, "k")
        assert all(s.slot != lk.output.slot for s in lk.inputs if s.value is None), "the STORE is still gated"
    got, ref = (fn(*[Tensor(a, device=d) for a in arrays]).numpy() for d in ("TT", "CPU"))
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6 * float(np.abs(ref).max()))
