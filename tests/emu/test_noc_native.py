"""The NoC time model's reservation in C (runtime/emu/accel/noc_native.c) against noc.py's Fabric._reserve_in_python
(Busy.free_from and Busy.take), the reference: random busy lists (gaps, touching and nested candidates, intervals
already in the past), resources that repeat in one transfer, offsets and lengths; the same cycle and the same busy
lists after each of a run of reservations. And compiled kernels with the C part on and off: the same bytes and the
same emulated cycles, the C part really taken."""
import copy
import random

import numpy as np
import pytest

from tt_backend.bench.emu import elementwise_inputs, elementwise_plan
from tt_backend.bench.kernels import launch_plan, matmul_arrays, matmul_plan
from tt_backend.lowering.codegen.sources import split
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.emu.accel import noc_native
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.emu.noc import Busy, Fabric

pytestmark = pytest.mark.skipif(noc_native.reserve() is None, reason=noc_native.status())


def _busy(rng: random.Random) -> Busy:
    b, t = Busy(), rng.randrange(0, 50)
    for _ in range(rng.choice([0, 0, 1, 3, 12])):
        s = t + rng.choice([0, 1, 2, 5, 40])            # touching the previous one now and then (merged by take)
        b.take(s, rng.choice([1, 2, 8, 30]))
        t = b.ends[-1]
    return b


def _lists(res) -> list:
    return [(b.starts[:], b.ends[:]) for b, _ in res]


@pytest.mark.parametrize("seed", range(4))
def test_reserve_matches_python(seed):
    rng = random.Random(seed)
    fast, waited, shared = noc_native.reserve(), 0, 0
    for _ in range(300):
        pool = [_busy(rng) for _ in range(rng.randrange(1, 8))]
        res = [(rng.choice(pool), rng.choice([0, 0, 5, 14, 23, 100])) for _ in range(rng.randrange(1, 16))]
        shared += len({id(b) for b, _ in res}) < len(res)
        ref = copy.deepcopy(res)                       # (the copies share Busy objects as res does)
        for _ in range(rng.randrange(1, 6)):
            s0, d = rng.randrange(0, 400), rng.choice([1, 2, 16, 64, 257])
            want = Fabric._reserve_in_python(ref, s0, d)
            assert fast(res, s0, d) == want
            assert _lists(res) == _lists(ref)
            waited += want > s0
    assert waited > 300 and shared > 100


def test_reserve_refuses_what_is_no_busy_list():
    fast = noc_native.reserve()
    with pytest.raises(TypeError):
        fast([(Busy(), 0, 1)], 0, 1)
    with pytest.raises(AttributeError):
        fast([(object(), 0)], 0, 1)


@pytest.mark.needs_cc
def test_kernels_identical(monkeypatch):
    """An elementwise kernel's DRAM reads and writes and a 2x2 matmul grid's multicasts: the same bytes and cycles of
    every core with the C part on and off, and C reserved the transfers."""
    grid = matmul_plan(64, "HiFi2")
    grid.use_cores(4)
    ew = elementwise_plan(40)
    calls = {True: 0, False: 0}
    python = Fabric._reserve_in_python

    def counted(res, s0, d):
        calls[noc_native.NATIVE] += 1
        return python(res, s0, d)
    monkeypatch.setattr(Fabric, "_reserve_in_python", staticmethod(counted))
    for plan, arrays in ((ew, elementwise_inputs(ew, np.random.default_rng(40))), (grid, matmul_arrays(grid))):
        elfs = compile_kernel(*split(plan.render()), plan.name)
        runs = []
        for on in (True, False):
            monkeypatch.setattr(noc_native, "NATIVE", on)
            dev = EmuDevice()
            runs.append(([launch_plan(dev, plan, arrays, elfs)[0] for _ in range(2)], dev.stats()))
        assert runs[0] == runs[1]
    assert calls[True] == 0 and calls[False] > 50, calls
