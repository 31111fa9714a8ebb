"""POW and the integer bit ops (AND/OR/XOR/NOT/SHL/SHR) as tinygrad programs on Device TT against tinygrad's CPU device.

POW is lowered through tinygrad's own decomposition (exp2(e * log2|b|) plus the sign/zero/NaN rules), the same one
tinygrad's codegen applies for the CPU device, so special values (negative base with integer exponent, 0**0, 0**-1,
+-inf, NaN) must match exactly; finite results differ only by the SFPU's exp2/log2 rounding (tolerance below).
The integer ops are bit-exact. Every case runs on each target (`target` fixture: the emulator, ttsim when
TT_SIMULATOR is set), so the SFPSHFT/SFPAND/SFPOR/SFPXOR forms used are also checked against ttsim.
"""
import numpy as np
import pytest

from tinygrad import Tensor, dtypes

pytestmark = pytest.mark.needs_cc

rng = np.random.default_rng(17)


@pytest.fixture
def tt(target, serial_compile):
    return f"TT:{target}"


def both(dev, fn, *arrays, dtype=None):
    """fn on TT and on CPU (numpy results)."""
    return [fn(*[Tensor(a, device=d, dtype=dtype) for a in arrays]).numpy() for d in (dev, "CPU")]


def rand_i32(n):
    v = rng.integers(-2 ** 31, 2 ** 31, n).astype(np.int32)
    v[:6] = [0, 1, -1, 2 ** 31 - 1, -2 ** 31, 0x1337]
    return v


def test_int32_bit_ops(tt):
    a, b = rand_i32(300), rand_i32(300)
    got, want = both(tt, lambda x, y: ((x & y) ^ (x | 0x1337)) | (~y & x), a, b, dtype=dtypes.int32)
    np.testing.assert_array_equal(got, want)


def test_bool_bit_ops(tt):
    a, b = rng.integers(0, 2, 200).astype(bool), rng.integers(0, 2, 200).astype(bool)
    got, want = both(tt, lambda x, y: (x & y) ^ (~x | y), a, b, dtype=dtypes.bool)
    np.testing.assert_array_equal(got, want)


def test_int_constant_wraps_to_int32(tt):
    # tinygrad truncates integer constants to the dtype: 0 | 0xFFFFFFFF is -1 (test_ops int_or)
    assert (Tensor([0, 5], dtype=dtypes.int32, device=tt) | 0xFFFFFFFF).tolist() == [-1, -1]


def test_shifts_by_constant_and_tensor(tt):
    a = rand_i32(256)
    n = rng.integers(0, 32, 256).astype(np.int32)
    n[:4] = [0, 1, 31, 0]
    for fn in (lambda x, s: x << 3, lambda x, s: x >> 5, lambda x, s: x >> 31, lambda x, s: x << s,
               lambda x, s: x >> s, lambda x, s: x % 8, lambda x, s: x % 1):   # floor modulo by 2**k: the low bits
        got, want = both(tt, fn, a, n, dtype=dtypes.int32)
        np.testing.assert_array_equal(got, want)


POW_EDGE_BASES = [-2.0, -2.0, -2.0, -1.5, -0.0, 0.0, 0.0, 0.0, -0.0, 2.0, np.inf, -np.inf, -np.inf, -np.inf, np.nan,
                  1.0, -1.0, 1e-20, 3.0, -8.0]
POW_EDGE_EXPS = [3.0, 2.0, 0.5, 0.0, 0.0, 0.0, -1.0, 0.5, -3.0, -np.inf, -2.0, 3.0, 0.5, -1.0, 0.0, np.nan, np.inf,
                 2.5, 1.3, 1.0 / 3.0]


def test_pow_special_values_match_cpu(tt):
    b, e = np.array(POW_EDGE_BASES, np.float32), np.array(POW_EDGE_EXPS, np.float32)
    got, want = both(tt, lambda x, y: x ** y, b, e)
    # the specials and the exact cases (small integer powers of 2 and 3) agree bit for bit
    exact = ~np.isfinite(want) | (want == 0) | np.isin(b, [2.0, -2.0, -1.5, 1.0, -1.0, -8.0])
    np.testing.assert_array_equal(got[exact].view(np.uint32), want[exact].view(np.uint32))
    np.testing.assert_allclose(got, want, rtol=2e-6)


def test_pow_random(tt):
    # |e * log2|b|| < 48 here, so the SFPU's exp2/log2 errors (<= 2 ulp each) amplify to < 48 * 2**-23 relative
    b = rng.uniform(-6, 6, (3, 90)).astype(np.float32)
    e = rng.uniform(-5, 5, (3, 90)).astype(np.float32)
    e[0] = np.round(e[0])                                  # integer exponents: negative bases give real results
    got, want = both(tt, lambda x, y: x ** y, b, e)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=48 * 2.0 ** -23, atol=1e-30)
    # constant exponents and constant bases (tinygrad folds some of them to mul/sqrt/exp2 before the backend)
    for fn in (lambda x: x ** 5.5, lambda x: x ** -1.5, lambda x: (-5.5) ** x, lambda x: 0.7 ** x):
        got, want = both(tt, fn, e)
        np.testing.assert_allclose(got, want, rtol=48 * 2.0 ** -23, atol=1e-30)
