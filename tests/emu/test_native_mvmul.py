"""The emulator's C part (runtime/emu/accel/native.py) against its reference, fpu_math.mvmul19_batch of the operands'
src19 views: the same Dst bits for random MVMUL runs whose Src words and Dst values crowd the edges (zero and tiny
exponents, where products underflow and groups vanish; the largest ones, where the sum overflows to Inf), BF16 and
TF32 sources (the low mantissa bits dropped or read), every fidelity phase, repeated slots."""
import numpy as np
import pytest

from tt_backend.chip.errors import EmuUndefined, EmuUnimplemented
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
        fa, fb = (int(rng.choice([fm.BF16, fm.TF32, fm.FP32, fm.BFP8_B])) for _ in range(2))
        srca = _edgy(rng, (steps, 16, 16), 8, 23, 32).astype(np.uint32)
        srcb = _edgy(rng, (steps, 8, 16), 8, 23, 32).astype(np.uint32)
        dst = _edgy(rng, (blocks, 8, 16), 8, 23, 32).astype(np.uint32)
        phases, slots = rng.integers(0, 4, steps), rng.integers(0, blocks, steps)
        want = fm.mvmul19_batch(fm.src19(srca, fa), fm.src19(srcb, fb), list(phases), list(slots), dst)
        got = native.mvmul_steps(srca, srcb, fa, fb, phases, slots, dst)
        assert np.array_equal(got, want.astype(np.uint32))


def with_exponents(rng, shape, lo, hi) -> np.ndarray:
    """Random float32 words of `shape` whose biased exponents lie in [lo, hi)."""
    words = rng.integers(0, 1 << 32, shape, dtype=np.uint64) & ~np.uint64(0xFF << 23)
    words |= rng.integers(lo, hi, shape).astype(np.uint64) << np.uint64(23)
    return words.astype(np.uint32)


@pytest.mark.parametrize("seed", range(2))
def test_c_mvmul_crowded_exponents_match_numpy(seed):
    """Operands and Dst values whose exponents lie within a few of each other, so products align by small shifts and
    Dst and the group terms add with carries, ties and cancellations to zero (the vector lanes' rounding paths)."""
    rng = np.random.default_rng(100 + seed)
    for _ in range(20):
        steps = int(rng.integers(1, 24))
        srca, srcb = with_exponents(rng, (steps, 16, 16), 125, 130), with_exponents(rng, (steps, 8, 16), 125, 130)
        srcb[:, :, 8:] = srcb[:, :, :8] ^ np.uint32(1 << 31)     # (group 1: group 0's SrcB negated)
        dst = with_exponents(rng, (2, 8, 16), 120, 134)
        phases, slots = rng.integers(0, 4, steps), rng.integers(0, 2, steps)
        want = fm.mvmul19_batch(fm.src19(srca, fm.BF16), fm.src19(srcb, fm.BF16), list(phases), list(slots), dst)
        got = native.mvmul_steps(srca, srcb, fm.BF16, fm.BF16, phases, slots, dst)
        assert np.array_equal(got, want.astype(np.uint32))


def test_c_mvmul_refuses_what_it_does_not_compute():
    z = np.zeros
    with pytest.raises(EmuUndefined, match="do not fit"):
        native.mvmul_steps(z((2, 16, 16)), z((2, 8, 16)), fm.BF16, fm.BF16, [0, 0], [0, 1], z((1, 8, 16), np.uint32))
    with pytest.raises(EmuUnimplemented, match="8-bit-exponent"):
        native.mvmul_steps(z((1, 16, 16)), z((1, 8, 16)), fm.FP16, fm.FP16, [0], [0], z((1, 8, 16), np.uint32))


@pytest.mark.parametrize("seed", range(2))
def test_c_mvmul_products_at_the_underflow_edge_match_numpy(seed):
    """Operands whose exponents put the products' exponents around 0: mvmul_native.c keeps the test for a product
    with exponent <= 0 only in steps where one can occur (the operands' least exponents sum to at most the phase's
    bias), so steps on both sides of that line, and nonzero products just above and below it, are compared."""
    rng = np.random.default_rng(200 + seed)
    for _ in range(20):
        steps = int(rng.integers(1, 16))
        lo = int(rng.integers(58, 72))
        srca, srcb = with_exponents(rng, (steps, 16, 16), lo, lo + 6), with_exponents(rng, (steps, 8, 16), lo, lo + 6)
        dst = with_exponents(rng, (2, 8, 16), 1, 40)
        phases, slots = rng.integers(0, 4, steps), rng.integers(0, 2, steps)
        want = fm.mvmul19_batch(fm.src19(srca, fm.BF16), fm.src19(srcb, fm.BF16), list(phases), list(slots), dst)
        got = native.mvmul_steps(srca, srcb, fm.BF16, fm.BF16, phases, slots, dst)
        assert np.array_equal(got, want.astype(np.uint32))
