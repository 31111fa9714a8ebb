"""The emulator's speed layer on whole compiled kernels: each fast path on and off (its switch), the same output bytes
and the same emulated cycles of every core and Tensix thread (EmuDevice.stats()), and the fast path really taken."""
import numpy as np
import pytest

from tt_backend.bench.kernels import launch_plan, matmul_plan
from tt_backend.chip.numerics import fpu_math as fm
from tt_backend.lowering.codegen.sources import split
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.emu.accel import fpu_batch
from tt_backend.runtime.emu.device import EmuDevice


def _launch(plan, arrays, elfs):
    dev = EmuDevice()
    out = [launch_plan(dev, plan, arrays, elfs)[0] for _ in range(2)]    # a second launch on the warm device too
    return out, dev.stats()


@pytest.mark.needs_cc
@pytest.mark.parametrize("fidelity", ["LoFi", "HiFi4"])
def test_mvmul_runs_identical(fidelity, monkeypatch):
    """bf16 64^3 FPU matmul: MVMUL runs executed at once (accel/fpu_batch.py) against the per-instruction handler."""
    plan = matmul_plan(64, fidelity)
    rng = np.random.default_rng(3)
    bf16 = lambda: (rng.standard_normal((64, 64)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    arrays = {plan.spec.a.slot: bf16(), plan.spec.b.slot: bf16()}
    elfs = compile_kernel(*split(plan.render()), plan.name)
    steps = []
    batch = fm.mvmul19_batch
    monkeypatch.setattr(fm, "mvmul19_batch", lambda *a, **k: steps.append(len(a[3])) or batch(*a, **k))
    fast = _launch(plan, arrays, elfs)
    assert sum(steps) == 2 * 2 * 2 * 2 * 16 * fm.FIDELITY_PHASES[fidelity]    # launches x tiles x K x 16/phase
    assert max(steps) >= 16
    monkeypatch.setattr(fpu_batch, "BATCH_MVMUL", False)
    steps.clear()
    ref = _launch(plan, arrays, elfs)
    assert not steps
    assert fast == ref
