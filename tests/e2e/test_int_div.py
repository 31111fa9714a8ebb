"""int32 and uint32 division and modulo on Device TT (lowering/codegen/sfpu_ops.py int_divmod), bit-exact against tinygrad's own
definitions (tinygrad.helpers cdiv/cmod/floordiv/floormod, wrapped to int32 like tinygrad's truncate): every pair of
edge values (0, +-1, +-2, INT_MIN, INT_MAX, +-2**30, +-(2**30 + 1): the restoring loop's signed-compare limit) and
random ones, tensor and constant divisors. The CPU device traps on x / 0 and INT_MIN / -1 (SIGFPE), so numbers come
from the helpers: x / 0 = 0, x % 0 = x, INT_MIN / -1 = INT_MIN."""
import numpy as np
import pytest

from tinygrad import Tensor
from tinygrad.helpers import cdiv, cmod, floordiv, floormod


pytestmark = pytest.mark.needs_cc

EDGE = [0, 1, -1, 2, -2, 3, -7, 2**31 - 1, -2**31, 2**30, -2**30, 2**30 + 1, -2**30 - 1, 2**31 - 2, 12345, -99999]
OPS = {"floordiv": (floordiv, lambda x, y: x // y), "floormod": (floormod, lambda x, y: x % y),
       "cdiv": (cdiv, lambda x, y: x.div(y, rounding_mode="trunc")), "cmod": (cmod, lambda x, y: x.fmod(y))}


@pytest.fixture
def tt(target, serial_compile):
    return f"TT:{target}"


def wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def operands(seed: int, n_random: int):
    rng = np.random.default_rng(seed)
    e = np.array(EDGE, np.int32)
    a = np.concatenate([np.repeat(e, len(e)), rng.integers(-2**31, 2**31, n_random),
                        rng.integers(-1000, 1000, n_random)]).astype(np.int32)
    b = np.concatenate([np.tile(e, len(e)), rng.integers(-2**31, 2**31, n_random),
                        rng.integers(-20, 20, n_random)]).astype(np.int32)
    return a, b


@pytest.mark.parametrize("op", OPS)
def test_int32_divmod_bit_exact(tt, op):
    ref_fn, fn = OPS[op]
    a, b = operands(5, 200)
    got = fn(Tensor(a, device=tt), Tensor(b, device=tt)).numpy()
    want = np.array([wrap32(ref_fn(int(x), int(y))) for x, y in zip(a, b)], np.int64)
    bad = np.nonzero(got.astype(np.int64) != want)[0]
    assert got.dtype == np.int32 and not len(bad), [(int(a[i]), int(b[i]), int(got[i]), int(want[i])) for i in bad[:8]]


@pytest.mark.parametrize("k", [3, -5, 7, 8, -16, 2**31 - 1, -2**31])
def test_int32_divmod_by_constant(tt, k):
    # powers of two take the shift / mask path, the others the division loop with a constant divisor
    a, _ = operands(6, 100)
    x = Tensor(a, device=tt)
    got = np.stack([(x // k).numpy(), (x % k).numpy(), x.div(k, rounding_mode="trunc").numpy()])
    want = np.array([[wrap32(f(int(v), k)) for v in a] for f in (floordiv, floormod, cdiv)], np.int64)
    np.testing.assert_array_equal(got, want)


U_EDGE = [0, 1, 2, 3, 7, 2**30, 2**30 + 1, 2**31 - 1, 2**31, 2**31 + 1, 3 * 2**30, 2**32 - 2, 2**32 - 1, 12345]


@pytest.mark.parametrize("op", ["floordiv", "floormod", "cdiv"])
def test_uint32_divmod_bit_exact(tt, op):
    """uint32 (lowering/codegen/sfpu_ops.py uint_divmod): the loop's limit 2**31 on both sides, divisors above it
    (quotient 0 or 1), x / 0 = 0 and x % 0 = x as tinygrad's helpers define them."""
    rng = np.random.default_rng(7)
    e = np.array(U_EDGE, np.uint32)
    a = np.concatenate([np.repeat(e, len(e)), rng.integers(0, 2**32, 200), rng.integers(0, 5000, 100)]).astype(np.uint32)
    b = np.concatenate([np.tile(e, len(e)), rng.integers(0, 2**32, 200), rng.integers(0, 40, 100)]).astype(np.uint32)
    ref_fn, fn = OPS[op]
    got = fn(Tensor(a, device=tt), Tensor(b, device=tt)).numpy()
    want = np.array([ref_fn(int(x), int(y)) for x, y in zip(a, b)], np.int64)
    bad = np.nonzero(got.astype(np.int64) != want)[0]
    assert got.dtype == np.uint32 and not len(bad), [(int(a[i]), int(b[i]), int(got[i]), int(want[i])) for i in bad[:8]]

