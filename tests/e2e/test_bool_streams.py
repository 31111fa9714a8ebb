"""Range predicates in the value part: constant formulas folded (lowering/bool_fold.py), the rest packed into the bits
of one computed stream (lowering/bool_pack.py), and a gated value's Invalid side read as 0 (lowering/frontend.py), on
Device TT against numpy and tinygrad's CPU device.

- masks over random shapes (a band, a residue class, a product threshold, a flipped triangle): each case first checks
  that its kernel really carries a packed stream, then compares exactly (the values are small integers);
- cumprod's gradient (tinygrad's zero-safe product rule through a padded, pooled view: ten predicates of which the
  fold leaves two) along a random axis of random shapes, against tinygrad's CPU device: rtol 1e-4, atol 1e-4 times
  the largest gradient (the sums run in another order);
- a hand-built REDUCE over WHERE(range predicate, load, Invalid): the points off the predicate add 0.
"""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.dtype import Invalid
from tinygrad.uop.ops import AxisType, KernelInfo, Ops, ParamArg, UOp

from tests.e2e.ast_kernels import run_ast
from tt_backend.lowering.frontend import lower_ast

pytestmark = pytest.mark.needs_cc


def kernels(*ts: Tensor) -> list[UOp]:
    return [c.src[0] for c in Tensor.schedule_linear(*ts).src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]


def packed(k: UOp) -> bool:
    return any(s.value is not None and s.dtype == "int32" for s in lower_ast(k, "k").inputs)


def masks(t: Tensor, rows: int, cols: int, seed: int) -> Tensor:
    g = np.random.default_rng(seed)
    a, m, lim = int(g.integers(-3, 4)), int(g.integers(2, 5)), int(g.integers(1, rows * cols // 2))
    i, j = Tensor.arange(rows).to(t.device).reshape(rows, 1), Tensor.arange(cols).to(t.device).reshape(1, cols)
    band = (i - j < a) & (j - i < a + 3)
    residue = ((i + 2 * j) % m) == 1
    return band.where(t, 0) + residue.where(t * 2, 1) + (i * j > lim).where(3, t) + t.flip(0).tril(a)


@pytest.mark.parametrize("seed", range(4))
def test_packed_masks_match_numpy(seed):
    g = np.random.default_rng(seed)
    rows, cols = int(g.integers(3, 70)), int(g.integers(3, 70))
    a = g.integers(-8, 8, (rows, cols)).astype(np.float32)
    assert any(packed(k) for k in kernels(masks(Tensor(a, device="CPU"), rows, cols, seed)))
    got = masks(Tensor(a), rows, cols, seed).numpy()
    np.testing.assert_array_equal(got, masks(Tensor(a, device="CPU"), rows, cols, seed).numpy())


@pytest.mark.parametrize("seed", range(3))
def test_cumprod_gradient_matches_cpu(seed):
    g = np.random.default_rng(seed)
    shape = [int(n) for n in g.integers(2, 5, int(g.integers(1, 3)))]
    ax = int(g.integers(0, len(shape) + 1))
    shape.insert(ax, int(g.integers(12, 33)))
    a = g.uniform(0.5, 1.5, shape).astype(np.float32) * g.choice([-1, 1], shape).astype(np.float32)
    a.flat[int(g.integers(a.size))] = 0.0            # a zero: the gradient's other branch (product of the others)

    def grad(device: str) -> np.ndarray:
        x = Tensor(a, device=device)
        x.requires_grad = True
        return x.cumprod(ax).sum().gradient(x)[0].numpy()
    ref = grad("CPU")
    np.testing.assert_allclose(grad("TT"), ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))


def test_invalid_side_of_a_gated_sum_adds_zero():
    """out[i] = sum_k WHERE((i + k) % 3 != 0, x[i, k], Invalid): tinygrad reads the Invalid side as 0."""
    n, K = 37, 29
    f = dtypes.float
    const = lambda v, dt=dtypes.weakint: UOp(Ops.CONST, dt, arg=v)   # noqa: E731
    out = UOp(Ops.PARAM, f, src=(const(n),), arg=ParamArg(0, f))
    x = UOp(Ops.PARAM, f, src=(const(n * K),), arg=ParamArg(1, f))
    i = UOp(Ops.RANGE, dtypes.weakint, src=(const(n),), arg=(0, AxisType.LOOP))
    k = UOp(Ops.RANGE, dtypes.weakint, src=(const(K),), arg=(1, AxisType.REDUCE))
    keep = ((i + k) % const(3)).ne(const(0))
    gated = UOp(Ops.WHERE, f, (keep, UOp(Ops.INDEX, f, (x, i * const(K) + k)), const(Invalid, dtypes.bool)))
    total = UOp(Ops.REDUCE, f, (gated, k), arg=(Ops.ADD,))
    store = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, f, (out, i)), total))
    ast = UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (store, i)),), arg=KernelInfo())
    xv = (np.random.default_rng(1).integers(-64, 64, (n, K)) / 8).astype(np.float32)
    got = run_ast(ast, [np.zeros(n, np.float32), xv.reshape(-1)], "TT")[0]
    ii, kk = np.meshgrid(np.arange(n), np.arange(K), indexing="ij")
    np.testing.assert_array_equal(got, np.where((ii + kk) % 3 != 0, xv, 0).sum(1))


@pytest.mark.ttsim
def test_ttsim_matches_emulator_bit_for_bit(serial_compile):
    a = np.random.default_rng(4).integers(-8, 8, (19, 23)).astype(np.float32)
    sim = masks(Tensor(a, device="TT:ttsim"), 19, 23, 4).numpy()
    emu = masks(Tensor(a, device="TT:emu"), 19, 23, 4).numpy()
    assert sim.tobytes() == emu.tobytes()
