"""IEEE special values and extreme arguments on Device TT give what tinygrad's CPU device gives, bit for bit.

The one allowed difference is the SFPU's documented denormal flush (docs/isa.md §3.4): a denormal input is read as
a signed zero and a denormal result is written as one. The cases are the issue's list (sigmoid of +-1000, exp of
+-100, log2 of 0 and of negatives, reciprocal of 0 and inf, sqrt of -1) plus the other specials of each op, every
pair of specials through the binary ops (division by numbers beyond 2**126 included), sin of large arguments, and the
gradient of sigmoid at extreme arguments, which is 0 on the CPU device because tinygrad's codegen rewrites
x * (1/(1+x)) to 1 - 1/(1+x) before any device runs it (the backend runs the same rewrites: lowering/frontend.py).
"""
import numpy as np
import pytest

from tinygrad import Tensor

from tests.support.ulp import flushed, same

pytestmark = pytest.mark.needs_cc

INF, NAN = np.inf, np.nan
CASES = {
    "sigmoid": (Tensor.sigmoid, [1000.0, -1000.0, 400.0, -400.0, INF, -INF, NAN, 0.0]),
    "exp": (Tensor.exp, [100.0, -100.0, 88.8, -87.0, -104.0, INF, -INF, NAN]),
    "log2": (Tensor.log2, [0.0, -0.0, -1.0, -INF, INF, NAN, 1e-45, 1.0]),
    "reciprocal": (Tensor.reciprocal, [0.0, -0.0, INF, -INF, NAN, 1e-45, 3e38]),
    "sqrt": (Tensor.sqrt, [-1.0, -0.0, 0.0, INF, -INF, NAN, 1e-45, -1e-45]),
    "sin": (Tensor.sin, [INF, -INF, NAN, 0.0, -0.0]),
    "pow": (lambda x: x ** 0.5, [-1.0, 0.0, -0.0, INF, -INF, NAN]),
    "div_by_3e38": (lambda x: x / 3e38, [3e38, -3e38, INF, -INF, NAN, 1e30, 0.0]),   # x * (a denormal constant)
}


@pytest.mark.parametrize("op", list(CASES))
def test_specials_match_cpu(target, serial_compile, op):
    fn, vals = CASES[op]
    x = np.array(vals, np.float32)
    got = fn(Tensor(x, device=f"TT:{target}")).numpy()
    want = fn(Tensor(x, device="CPU")).numpy()
    want_flushed = fn(Tensor(flushed(x), device="CPU")).numpy()      # the CPU's answer for the flushed input
    ok = same(got, want) | same(got, flushed(want)) | same(got, flushed(want_flushed))
    assert ok.all(), f"{op}: inputs {x[~ok]} TT {got[~ok]} CPU {want[~ok]}"


def test_binary_specials_match_cpu(target, serial_compile):
    """Every pair of specials (and divisors beyond 2**126, where 1/b alone is denormal) through / * + max <."""
    v = np.array([0.0, -0.0, 1.0, -2.5, 2e-38, 3e38, -3e38, INF, -INF, NAN, 100.0], np.float32)
    a, b = (g.ravel() for g in np.meshgrid(v, v))
    for fn in (lambda x, y: x / y, lambda x, y: x * y + x, lambda x, y: x.maximum(y), lambda x, y: (x < y).where(x, y)):
        got = fn(Tensor(a, device=f"TT:{target}"), Tensor(b, device=f"TT:{target}")).numpy()
        want = fn(Tensor(a, device="CPU"), Tensor(b, device="CPU")).numpy()
        ok = same(got, want) | same(got, flushed(want))
        assert ok.all(), f"a {a[~ok]} b {b[~ok]} TT {got[~ok]} CPU {want[~ok]}"


def test_sin_of_large_arguments(target, serial_compile):
    """Up to 2**22 * pi (1.3e7) the SFPU reduces exactly (a few 2**-24 from the CPU device); beyond, the result only
    stays in [-1, 1] (the CPU device's exact reduction needs pi to ~150 bits)."""
    x = np.array([1e5, -1e6, 4e6, 1.3e7, -1.2e7, 3e7, 1e20, 1e30, -3e38], np.float32)
    got = Tensor(x, device=f"TT:{target}").sin().numpy()
    want = Tensor(x, device="CPU").sin().numpy()
    exact = np.abs(x) < 2 ** 22 * np.pi
    assert np.abs(got[exact] - want[exact]).max() <= 4 * 2.0 ** -24
    assert (np.abs(got) <= 1).all()


@pytest.mark.parametrize("alt", [False, True], ids=["sigmoid", "exp_over_1_plus_exp"])
def test_sigmoid_gradient_at_extremes_is_zero(serial_compile, alt):
    def grad(dev, v):
        x = Tensor([v], device=dev)
        y = x.exp() / (1 + x.exp()) if alt else x.sigmoid()
        return y[0].gradient(x)[0].item()
    for v in (300.0, -300.0, 1000.0, -1000.0):
        assert grad("TT", v) == grad("CPU", v) == 0.0, v
