"""A stored WHERE on a range bound split into one STORE per part (lowering/store_split.py): where it fires (a reduction
on one side: cumprod's gradient, masked row sums and maxima in both bound forms) the kernel runs as two stages and
matches numpy (exactly: the values are on a grid of 1/8 and the sums short); where it must not (no reduction, a bound
that does not cut the range, a condition that is no bound) the kernel is left as it is."""
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.uop.ops import Ops

from tt_backend.lowering.store_split import split_stored_where

pytestmark = pytest.mark.needs_cc


def kernels(t: Tensor) -> list:
    return [c.src[0] for c in t.schedule_linear().src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]


def row_index(rows: int, device: str) -> Tensor:
    return Tensor.arange(rows).to(device).reshape(rows, 1)


PROGRAMS = {   # name -> (tinygrad program of (x, rows, a), numpy reference)
    "zero below a, sums after": (lambda x, n, a: (row_index(n, x.device) < a).where(0.0, x.sum(1, keepdim=True)),
                                 lambda v, a: np.where(np.arange(len(v))[:, None] < a, 0, v.sum(1, keepdims=True))),
    "maxima after a, -1 before": (lambda x, n, a: (row_index(n, x.device) > a).where(x.max(1, keepdim=True), -1.0),
                                  lambda v, a: np.where(np.arange(len(v))[:, None] > a, v.max(1, keepdims=True), -1)),
}


@pytest.mark.parametrize("name,seed", [(n, s) for n in PROGRAMS for s in range(2)])
def test_split_kernels_match_numpy(name, seed):
    g = np.random.default_rng(seed)
    rows, cols = int(g.integers(5, 80)), int(g.integers(3, 50))
    a = int(g.integers(1, rows - 2))
    v = (g.integers(-64, 64, (rows, cols)) / 8).astype(np.float32)
    fn, ref = PROGRAMS[name]
    (k,) = kernels(fn(Tensor(v, device="CPU"), rows, a))
    split = split_stored_where(k)
    assert split is not k and len(split.src) == 2
    np.testing.assert_array_equal(fn(Tensor(v), rows, a).numpy(), ref(v, a))


def test_only_bounds_that_cut_a_range_around_a_reduction_split():
    x = Tensor.empty(12, 7, device="CPU")
    i = row_index(12, "CPU")
    no_reduction = (i < 5).where(0.0, x * 2)
    outside = (i < 12).where(x.sum(1, keepdim=True), 0.0)
    not_a_bound = ((i % 3) < 1).where(x.sum(1, keepdim=True), 0.0)
    for t in (no_reduction, outside, not_a_bound):
        for k in kernels(t): assert split_stored_where(k) is k


@pytest.mark.ttsim
def test_ttsim_matches_emulator_bit_for_bit(serial_compile):
    v = np.random.default_rng(6).standard_normal((21, 13)).astype(np.float32)
    fn, _ = PROGRAMS["zero below a, sums after"]
    sim = fn(Tensor(v, device="TT:ttsim"), 21, 8).numpy()
    emu = fn(Tensor(v, device="TT:emu"), 21, 8).numpy()
    assert sim.tobytes() == emu.tobytes()
