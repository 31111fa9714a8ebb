"""Quotients and remainders of affine indices made affine where one case survives (lowering/quotient_split.py), and
load gates an enclosing WHERE tests dropped (lowering/implied_gates.py): conv_transpose's input gradient (tinygrad's
pooling repeat, summed back) on random shapes matches tinygrad's CPU device exactly (values on a grid of 1/8, short
sums), its kernels lose their divisions; where two quotient cases survive the body is left as it is."""
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import AxisType, Ops, UOp

from tt_backend.lowering.implied_gates import drop_implied_gates
from tt_backend.lowering.quotient_split import quotient_parts, split_quotient, split_quotients

pytestmark = pytest.mark.needs_cc


def kernels(t: Tensor) -> list:
    return [c.src[0] for c in t.schedule_linear().src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]


def divisions(u: UOp) -> int:
    return sum(x.op in (Ops.FLOORDIV, Ops.FLOORMOD) for x in u.toposort())


def grid_values(g, shape) -> np.ndarray:
    return (g.integers(-16, 16, shape) / 8).astype(np.float32)


@pytest.mark.parametrize("seed", range(3))
def test_conv_transpose_gradients_match_cpu(seed):
    g = np.random.default_rng(seed)
    cin, cout, k = int(g.integers(1, 4)), int(g.integers(1, 4)), int(g.integers(2, 4))
    x = grid_values(g, (int(g.integers(1, 3)), cin, *g.integers(3, 7, 2)))
    w = grid_values(g, (cin, cout, k, k))

    def grads(device: str):
        xt, wt = Tensor(x, device=device), Tensor(w, device=device)
        return xt.conv_transpose2d(wt).sum().gradient(xt, wt)
    split = [k for k in kernels(grads("CPU")[0]) if split_quotients(k) is not k]   # (schedule_linear: never run)
    assert split and all(divisions(split_quotients(k)) < divisions(k) for k in split)
    for got, want in zip(grads("TT"), grads("CPU")): np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_quotient_parts_are_affine_with_a_narrow_remainder():
    r = UOp.range(4, 1, AxisType.REDUCE, dtype=dtypes.weakint)
    a = UOp.range(13, 2, AxisType.LOOP, dtype=dtypes.weakint)
    q, m = quotient_parts(r * 13 + a, 14)
    for rv in range(4):
        for av in range(13):
            env = {r: rv, a: av}
            qv, mv = (int(u.substitute({k: k.const_like(v) for k, v in env.items()}).simplify().arg) for u in (q, m))
            assert 14 * qv + mv == 13 * rv + av and -3 <= mv <= 12


def test_two_surviving_cases_leave_the_body():
    r = UOp.range(4, 1, AxisType.REDUCE, dtype=dtypes.weakint)
    a = UOp.range(13, 2, AxisType.LOOP, dtype=dtypes.weakint)
    x = r * 13 + a
    body = (x // 14).cast(dtypes.float)          # no gate: quotient r - 1 where a < r, r elsewhere
    assert split_quotient(body, x, 14, body.const_like(0.0)) is None
    gated = (x % 14 < 11).where(body, 0.0)       # the gate rules out a < r (remainder a - r + 14 >= 11)
    assert divisions(split_quotient(gated, x, 14, gated.const_like(0.0))) == 0


def test_a_gate_is_dropped_only_where_a_reduction_under_the_where_loses_a_range():
    buf = UOp.param(0, dtypes.float, (32,))
    i = UOp.range(20, 1, AxisType.LOOP, dtype=dtypes.weakint)
    gate = i % 3 < 1

    def window_sum(n: int) -> tuple[UOp, UOp]:
        """the load of buf[j] gated on i, and its sum over j in [0, n)"""
        j = UOp.range(n, 2, AxisType.REDUCE, dtype=dtypes.weakint)
        load = buf.index(j.valid(gate))
        return load, UOp(Ops.REDUCE, load.dtype, (load, j), (Ops.ADD, 0))
    load, total = window_sum(4)
    assert drop_implied_gates(load + 1.0).src[0] is load                          # no enclosing WHERE: kept
    assert drop_implied_gates(gate.where(load, 0.0)).src[1] is load               # the WHERE's own value: kept
    regated = drop_implied_gates(gate.where(total, 0.0)).src[1]
    assert regated.src[0].src[1].op is Ops.RANGE                                  # in bounds: no test left
    _, total = window_sum(40)
    index = drop_implied_gates(gate.where(total, 0.0)).src[1].src[0].src[1]
    assert index.op is Ops.WHERE and index.src[0].op is Ops.CMPLT and index.src[0].src[1].arg == 32   # j < 32


@pytest.mark.ttsim
def test_ttsim_matches_emulator_bit_for_bit(serial_compile):
    g = np.random.default_rng(7)
    x, w = grid_values(g, (1, 2, 4, 5)), g.standard_normal((2, 3, 3, 3)).astype(np.float32)

    def input_gradient(device: str) -> bytes:
        xt, wt = Tensor(x, device=device), Tensor(w, device=device)
        return xt.conv_transpose2d(wt).sum().gradient(xt)[0].numpy().tobytes()
    assert input_gradient("TT:ttsim") == input_gradient("TT:emu")
