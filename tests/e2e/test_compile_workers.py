"""At PARALLEL=1 a schedule with TT kernels compiles in the calling process, not in tinygrad's one-process pool
(tt_backend/tinygrad_knobs.py `compile_in_process_at_one_worker`); other PARALLEL values and other devices' schedules
are tinygrad's as before."""
import numpy as np
import pytest

import tinygrad.engine.realize as realize
from tinygrad import Tensor
from tinygrad.helpers import PARALLEL, Context

pytestmark = pytest.mark.needs_cc

_seed = iter(range(1000, 10**6))


class _PoolAsked(Exception):
    pass


@pytest.fixture
def pool_calls(monkeypatch):
    """PARALLEL's value each time lower_and_compile asks tinygrad for its worker pool (at 0 tinygrad answers no pool);
    the kernels compile in process either way."""
    calls = []
    monkeypatch.setattr(realize, "get_worker_pool", lambda: calls.append(PARALLEL.value))
    return calls


def _two_new_kernels(device: str) -> tuple[Tensor, np.ndarray]:
    """A schedule of two kernels no earlier test compiled (new constants: tinygrad's program cache misses)."""
    c = float(next(_seed))
    a = np.arange(64, dtype=np.float32)
    t = Tensor(a, device=device)
    return ((t + c).contiguous() * c).sum(), ((a + np.float32(c)) * np.float32(c)).sum(dtype=np.float32)


@pytest.mark.parametrize("parallel,pool_size", [(1, 0), (2, 2)])
def test_tt_schedule_at_parallel(pool_calls, parallel, pool_size):
    out, ref = _two_new_kernels("TT")
    with Context(PARALLEL=parallel):
        got = out.item()
    assert pool_calls == [pool_size]
    np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_cpu_schedule_at_parallel_1_is_tinygrads(pool_calls):
    out, ref = _two_new_kernels("CPU")
    with Context(PARALLEL=1):
        got = out.item()
    assert pool_calls == [1]
    np.testing.assert_allclose(got, ref, rtol=1e-6)
