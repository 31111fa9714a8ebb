"""tinygrad's RNG on Device TT: THREEFRY (lowering/threefry.py) over uint32 words, then the bit tricks tinygrad turns
the random bits into floats with. Tensor.rand and Tensor.randint must give exactly the CPU device's bits for the same
seed; randn goes through cos/log/sqrt, whose SFPU sequences round differently from the CPU's, so it is compared with
a tolerance (and its underlying uniforms are bit-exact)."""
import numpy as np
import pytest

from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context

from tt_backend.chip.errors import UnsupportedOp

pytestmark = pytest.mark.needs_cc


@pytest.fixture
def tt(target, serial_compile):
    return f"TT:{target}"


def seeded(dev, seed, fn):
    Tensor.manual_seed(seed)
    return fn(dev).numpy()


@pytest.mark.parametrize("seed", [0, 7, 1234567])
def test_rand_bits_equal_cpu(tt, seed):
    # 40 x 50: an element count that is not a multiple of a tile, and two THREEFRY calls (key, then counters)
    got = seeded(tt, seed, lambda d: Tensor.rand(40, 50, device=d))
    want = seeded("CPU", seed, lambda d: Tensor.rand(40, 50, device=d))
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert 0 <= got.min() and got.max() < 1 and abs(got.mean() - 0.5) < 0.05


@pytest.mark.parametrize("seed", [0, 7, 1234567])
def test_randint_and_dropout_equal_cpu(tt, seed):
    got = seeded(tt, seed, lambda d: Tensor.randint(300, low=-5, high=17, device=d))
    want = seeded("CPU", seed, lambda d: Tensor.randint(300, low=-5, high=17, device=d))
    np.testing.assert_array_equal(got, want)
    x = np.arange(1, 257, dtype=np.float32)
    def drop(d):
        with Context(TRAINING=1):
            return Tensor(x, device=d).dropout(0.25)
    np.testing.assert_array_equal(seeded(tt, seed, drop), seeded("CPU", seed, drop))


def test_randn_close_to_cpu(tt):
    got = seeded(tt, 3, lambda d: Tensor.randn(16, 32, device=d))
    want = seeded("CPU", 3, lambda d: Tensor.randn(16, 32, device=d))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_rand_successive_calls_advance_the_counter(tt):
    Tensor.manual_seed(11)
    a, b = Tensor.rand(64, device=tt).numpy(), Tensor.rand(64, device=tt).numpy()
    Tensor.manual_seed(11)
    c, d = Tensor.rand(64, device="CPU").numpy(), Tensor.rand(64, device="CPU").numpy()
    np.testing.assert_array_equal(np.stack([a, b]).view(np.uint32), np.stack([c, d]).view(np.uint32))
    assert (a != b).any()


def test_uint64_arithmetic_is_refused_by_name(tt):
    with pytest.raises(Exception) as e:
        (Tensor([1, 2], dtype=dtypes.uint64, device=tt) + 3).numpy()
    assert isinstance(e.value, UnsupportedOp) or isinstance(e.value.__cause__, UnsupportedOp)
