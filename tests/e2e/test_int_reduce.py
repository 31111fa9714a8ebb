"""Reductions over bool, int32 and uint32 on Device TT against numpy: all/any (bool MUL/ADD), int32 sum/prod/max/min
(sums and products wrap modulo 2**32 like the CPU device's int32 arithmetic), uint32 sum/max/min. All bit-exact."""
import numpy as np
import pytest

from tinygrad import Tensor

pytestmark = pytest.mark.needs_cc

rng = np.random.default_rng(23)


@pytest.fixture
def tt(target, serial_compile):
    return f"TT:{target}"


def test_all_any(tt):
    b = rng.random((3, 4, 5, 6)) < 0.93
    b[1, 2] = True                                   # some (1, 2) groups all true, so all() varies
    x = Tensor(b, device=tt)
    assert x.all().item() == b.all() and x.any().item() == b.any()
    np.testing.assert_array_equal(x.all(axis=(1, 2)).numpy(), b.all(axis=(1, 2)))
    np.testing.assert_array_equal(x.all(axis=3).numpy(), b.all(axis=3))
    np.testing.assert_array_equal(x.any(axis=0).numpy(), b.any(axis=0))


def test_all_over_many_elements(tt):
    assert Tensor.ones(2**15, device=tt).bool().all().item() is True
    z = np.ones(5000, bool)
    z[4321] = False
    assert Tensor(z, device=tt).all().item() is False


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.bool_])
def test_all_any_of_an_expanded_tensor(tt, dtype):
    """x.expand(8, n).all(): tinygrad folds the product over the repeated axis into a power typed weakint, stored into
    the bool buffer (the frontend converts it; found by the random programs)."""
    v = rng.integers(0, 3, (1, 16)).astype(dtype)
    for vals in (v, np.ones_like(v)):
        x = Tensor(vals, device=tt).expand(8, 16)
        assert x.all().item() == vals.astype(bool).all() and x.any().item() == vals.astype(bool).any()


def test_int32_sum_prod_wrap(tt):
    i = rng.integers(-2**31, 2**31, (37, 45)).astype(np.int32)
    x = Tensor(i, device=tt)
    np.testing.assert_array_equal(x.sum(axis=1).numpy(), i.astype(np.int64).sum(axis=1).astype(np.int32))
    np.testing.assert_array_equal(x.prod(axis=0).numpy(), np.prod(i.astype(np.int64), axis=0).astype(np.int32))
    small = rng.integers(-3, 4, (6, 10)).astype(np.int32)
    np.testing.assert_array_equal(Tensor(small, device=tt).prod(axis=1).numpy(), np.prod(small, axis=1))


def test_int32_max_min_edges(tt):
    i = rng.integers(-2**31, 2**31, (20, 33)).astype(np.int32)
    i[0, :] = -2**31
    i[1, 5] = 2**31 - 1
    x = Tensor(i, device=tt)
    np.testing.assert_array_equal(x.max(axis=1).numpy(), i.max(axis=1))
    np.testing.assert_array_equal(x.min(axis=1).numpy(), i.min(axis=1))
    assert Tensor(np.array([0, -2**31], np.int32), device=tt).min().item() == -2**31


def test_uint32_sum_max_min(tt):
    u = rng.integers(0, 2**32, (9, 70), dtype=np.uint32)
    u[0, :] = [0, 2**32 - 1] * 35
    u[1, :] = 2**31 - 1
    u[1, 3] = 2**31
    x = Tensor(u, device=tt)
    np.testing.assert_array_equal(x.sum(axis=1).numpy(), u.sum(axis=1, dtype=np.uint32))   # wraps
    np.testing.assert_array_equal(x.max(axis=1).numpy(), u.max(axis=1))
    np.testing.assert_array_equal(x.min(axis=1).numpy(), u.min(axis=1))
