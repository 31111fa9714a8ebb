"""The emulator's C part (runtime/emu/accel/native.py) against its reference, fpu_math.mvmul19_batch: the same Dst
bits for random MVMUL runs whose operands and Dst values crowd the edges (zero and tiny exponents, where products
underflow and groups vanish; the largest ones, where the sum overflows to Inf), every fidelity phase, repeated slots."""
import numpy as np
import pytest

from tt_backend.chip.numerics import fpu_math as fm
from tt_backend.runtime.emu.accel import native

pytestmark = pytest.mark.skipif(native.host_compiler() is None, reason="no host C compiler (cc, clang or gcc)")


def _edgy(rng, shape, exp_bits: int, exp_shift: int, top: int) -> np.ndarray:
    """Random words whose exponent field is, per element, zero, tiny, mid-range, near the top or anything."""
    words = rng.integers(0, 1 << top, shape, dtype=np.uint64)
    full = (1 << exp_bits) - 1
    choices = [np.zeros(shape, np.int64), rng.integers(1, 8, shape), rng.integers(110, 140, shape),
               rng.integers(full - 10, full + 1, shape), rng.integers(0, full + 1, shape)]
    exp = np.choose(rng.integers(0, len(choices), shape), choices).astype(np.uint64)
    return (words & ~np.uint64(full << exp_shift)) | (exp << np.uint64(exp_shift))


@pytest.mark.parametrize("seed", range(4))
def test_c_mvmul_runs_match_numpy(seed):
    rng = np.random.default_rng(seed)
    assert native.status().startswith("C ("), native.status()
    for _ in range(40):
        steps, blocks = int(rng.integers(1, 48)), int(rng.integers(1, 5))
        a19 = _edgy(rng, (steps, 16, 16), 8, 10, 19).astype(np.int64)
        b19 = _edgy(rng, (steps, 8, 16), 8, 10, 19).astype(np.int64)
        dst = _edgy(rng, (blocks, 8, 16), 8, 23, 32).astype(np.uint32)
        phases, slots = rng.integers(0, 4, steps), rng.integers(0, blocks, steps)
        want = fm.mvmul19_batch(a19, b19, list(phases), list(slots), dst).astype(np.uint32)
        got = native.mvmul_steps(a19, b19, phases, slots, dst)
        assert np.array_equal(got, want)


def test_c_mvmul_refuses_misshapen_runs():
    z = np.zeros
    with pytest.raises(ValueError, match="do not fit"):
        native.mvmul_steps(z((2, 16, 16)), z((2, 8, 16)), [0, 0], [0, 1], z((1, 8, 16), np.uint32))
