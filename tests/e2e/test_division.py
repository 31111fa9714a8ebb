"""Float division on Device TT gives tinygrad's CPU device's bits: the IEEE quotient (lowering/codegen/sfpu_ops.py
`f_div`), so floor division, which turns a 1-ulp error into a whole integer wherever the quotient is an integer,
agrees too, and so does modulo where its product is exact. The one allowed difference is the SFPU's denormal flush (docs/isa.md §3.5)."""
import numpy as np
import pytest

from tinygrad import Tensor

from tests.support.ulp import flushed, same

pytestmark = pytest.mark.needs_cc


def pairs(rng, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact quotients on a coarse grid (random programs' values), random normals of any magnitude, and quotients
    within a hair of the midpoint between two floats."""
    b = (rng.integers(1, 64, n) * rng.choice([-1, 1], n)).astype(np.float32) * np.float32(0.125)
    a = (rng.integers(-64, 64, n).astype(np.float32) * b)
    a[::3] = rng.integers(-400, 400, len(a[::3])).astype(np.float32) * np.float32(0.125)
    x = np.ldexp(rng.uniform(1, 2, (2, n)), rng.integers(-60, 60, (2, n))).astype(np.float32)
    mid = ((rng.integers(1 << 24, 1 << 25, n) | 1) * 2.0 ** -24 * x[1]).astype(np.float32)
    return np.concatenate([a, x[0], mid]), np.concatenate([b, x[1], x[1]])


def on(dev: str, fn, *vals: np.ndarray) -> np.ndarray:
    return fn(*(Tensor(v, device=dev) for v in vals)).numpy()


def test_division_and_floor_division_match_cpu(target, serial_compile):
    """The issue's case (-28.125 // 1.875 = -15 exactly: a*recip(b) was one ulp below, floor gave -16) and random
    pairs through / and //, bit for bit."""
    a, b = pairs(np.random.default_rng(17), 96)
    a[:2], b[:2] = [-28.125, 26.25], [1.875, 1.75]
    for fn in (lambda x, y: x / y, lambda x, y: x // y):
        got, want = on(f"TT:{target}", fn, a, b), on("CPU", fn, a, b)
        ok = same(got, want) | same(got, flushed(want))
        assert ok.all(), f"a {a[~ok]} b {b[~ok]} TT {got[~ok]} CPU {want[~ok]}"


def test_modulo_matches_cpu(serial_compile):
    """a % b = a - floor(a/b)*b: the floor is exact, so the remainder is bit-exact on the coarse grid. Beyond, the CPU
    device contracts the product and the subtraction into an exact fma; the SFPU rounds the product first (or keeps
    only 3 of its bits below fp32 precision: SFPMAD is partially fused, docs/isa.md §3.5), so the remainder is within
    one rounding of the product (its ulp) plus its own."""
    a, b = pairs(np.random.default_rng(19), 96)
    fn = lambda x, y: x % y
    got, want = on("TT:emu", fn, a, b), on("CPU", fn, a, b)
    grid = slice(0, 96)
    assert same(got[grid], want[grid]).all()
    product = np.abs(np.floor(a.astype(np.float64) / b) * b).astype(np.float32)
    assert (np.abs(got.astype(np.float64) - want) <= np.spacing(product) + np.spacing(np.abs(want))).all()


def test_shared_divisor_divides_exactly(serial_compile):
    """x / y and z / y in one kernel share tinygrad's 1/y: each product is still a correctly rounded quotient, as on
    the CPU device (lowering/rewrite.py fuse_divide)."""
    a, b = pairs(np.random.default_rng(18), 64)
    fn = lambda x, y, z: x / y - z / y
    got, want = on("TT:emu", fn, a, b, np.roll(a, 7)), on("CPU", fn, a, b, np.roll(a, 7))
    assert (same(got, want) | same(got, flushed(want))).all()


def test_division_inside_a_compensated_sum(serial_compile):
    """rsqrt (a square root and a division) feeding a matmul's sum: the reduction holds two LRegs (accumulator and
    compensation), so the division borrows one (lowering/codegen/sfpu_codegen.py `_Alloc.take`); random program 6040
    was refused with "an op needs more than 8 registers". Against the CPU device within the sum's rounding."""
    rng = np.random.default_rng(6040)
    x, y = rng.uniform(-3, 3, (31, 2)).astype(np.float32), rng.uniform(-3, 3, (2, 31)).astype(np.float32)
    fn = lambda u, v: (u.abs() + 0.5).rsqrt().T.matmul(v.T)
    got, want = on("TT:emu", fn, x, y), on("CPU", fn, x, y)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("narrow", ["bfloat16", "float16"])
def test_narrow_float_division_and_modulo_match_cpu(narrow, serial_compile):
    """bfloat16 and float16 a / b are one quotient rounded once to the narrow type, as the CPU device computes them
    (lowering/rewrite.py fuse_divide): a * (1/b) with 1/b rounded to bfloat16 first was a bfloat16 step off in about a
    fifth of the quotients, and floor(a/b), a % b then a whole b off (random program 6517). Float32 buffers, the
    narrow values cast inside the kernel: the CPU device then rounds every narrow op, bit for bit comparable."""
    from tinygrad import dtypes
    dt = getattr(dtypes, narrow)
    rng = np.random.default_rng(6517)
    a = rng.integers(-100, 100, 256).astype(np.float32)
    b = (rng.integers(1, 32, 256) * rng.choice([-1, 1], 256) / 8).astype(np.float32)
    for fn in (lambda x, y: x / y, lambda x, y: x % y, lambda x, y: x // y):
        narrow_fn = lambda x, y: fn(x.cast(dt), y.cast(dt)).cast(dtypes.float32)
        got, want = on("TT:emu", narrow_fn, a, b), on("CPU", narrow_fn, a, b)
        assert same(got, want).all(), f"a {a[~same(got, want)]} b {b[~same(got, want)]}"
