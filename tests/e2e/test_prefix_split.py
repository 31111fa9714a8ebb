"""Prefix reductions split into blocks (lowering/prefix_split.py) run on Device TT and match numpy.

cumsum, cumprod, cummax, cummin and logcumsumexp along a random axis of random shapes (the scanned length 16, 37,
64, 101 or drawn from 18..300: blocks of every fill), forward, and cumsum's gradient (a reversed
cumsum); each case first checks that the split really fired on one of its kernels. The rule's refusals: a plain sum
and a suffix window (sum of x[j] for j >= i) are not prefixes.

Tolerances: the blocked sum and product round in another order than numpy's float64 reference: rtol = 1e-5 with
atol = 1e-5 * the largest |value|; MAX is exact.
"""
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.dtype import Invalid, dtypes
from tinygrad.uop.ops import AxisType, Ops, ParamArg, UOp

from tt_backend.lowering.prefix_split import prefix_form, split_prefix_reductions

pytestmark = pytest.mark.needs_cc

OPS = {
    "cumsum": (lambda t, ax: t.cumsum(ax), lambda a, ax: np.cumsum(a.astype(np.float64), ax)),
    "cumprod": (lambda t, ax: t.cumprod(ax), lambda a, ax: np.cumprod(a.astype(np.float64), ax)),
    "cummax": (lambda t, ax: t.cummax(ax)[0], lambda a, ax: np.maximum.accumulate(a, ax)),
    "cummin": (lambda t, ax: t.cummin(ax)[0], lambda a, ax: np.minimum.accumulate(a, ax)),
    "logcumsumexp": (lambda t, ax: t.logcumsumexp(ax),
                     lambda a, ax: np.logaddexp.accumulate(a.astype(np.float64), ax)),
}


def kernels(t: Tensor) -> list[UOp]:
    return [c.src[0] for c in t.schedule_linear().src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]


def splits(t: Tensor) -> bool:
    return any(split_prefix_reductions(k) is not k for k in kernels(t))


def close(got, ref):
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max()))


def case(seed: int) -> tuple[np.ndarray, int]:
    g = np.random.default_rng(seed)
    k = int(g.choice([16, 37, 64, 101, int(g.integers(18, 301))]))
    shape = [int(n) for n in g.integers(1, 5, int(g.integers(1, 3)))]
    ax = int(g.integers(0, len(shape) + 1))
    shape.insert(ax, k)
    return g.standard_normal(shape).astype(np.float32), ax


@pytest.mark.parametrize("op,seed", [(op, s) for s, op in enumerate(OPS)] + [("cumsum", 7), ("cummax", 8)])
def test_prefix_reduction_matches_numpy(op, seed):
    a, ax = case(seed)
    if op == "cumprod": a = (1 + a / 16).astype(np.float32)     # a product that stays in range
    fn, ref = OPS[op]
    assert splits(fn(Tensor(a, device="CPU"), ax)), (op, a.shape, ax)
    got = fn(Tensor(a), ax).numpy()
    if op in ("cummax", "cummin"): np.testing.assert_array_equal(got, ref(a, ax))
    else: close(got, ref(a, ax))


def test_cumsum_gradient_matches_numpy():
    g = np.random.default_rng(3)
    a, w = g.standard_normal((3, 90)).astype(np.float32), g.standard_normal((3, 90)).astype(np.float32)
    x = Tensor(a)
    x.requires_grad = True
    (x.cumsum(1) * Tensor(w)).sum().backward()
    close(x.grad.numpy(), np.flip(np.cumsum(np.flip(w.astype(np.float64), 1), 1), 1))


def _window_sum(prefix: bool) -> UOp:
    """sum over k of x[i + k - (K-1)] where i + k >= K-1 (a prefix: cumsum) or of x[i + k] where i + k < K (a suffix)."""
    K = 40
    x = UOp(Ops.PARAM, dtypes.float, src=(UOp(Ops.CONST, dtypes.weakint, arg=K),), arg=ParamArg(1, dtypes.float))
    i, k = UOp.range(K, 0), UOp.range(K, 1, AxisType.REDUCE)
    e, valid = (i + k - (K - 1), (i + k < K - 1).logical_not()) if prefix else (i + k, i + k < K)
    load = UOp(Ops.INDEX, dtypes.float, (x, valid.where(e, UOp.const(Invalid, dtypes.weakint))))
    return valid.where(load, 0.0).reduce(k, arg=Ops.ADD), i


def test_only_prefixes_split():
    red, i = _window_sum(prefix=True)
    assert prefix_form(red, 9) is not None and prefix_form(red, 9)[0] is i
    assert prefix_form(_window_sum(prefix=False)[0], 9) is None
    assert not splits(Tensor.ones(4, 40, device="CPU").contiguous().sum(1))


@pytest.mark.ttsim
def test_ttsim_matches_emulator_bit_for_bit(serial_compile):
    a = np.random.default_rng(5).standard_normal((6, 40)).astype(np.float32)
    for fn, _ in (OPS["cumsum"], OPS["cummax"]):
        sim = fn(Tensor(a, device="TT:ttsim"), 1).numpy()
        emu = fn(Tensor(a, device="TT:emu"), 1).numpy()
        assert sim.tobytes() == emu.tobytes()
