"""Two Dst groups in flight for an SFPU reduction (tile_render.second_dst_group with a ReducePlan): a one-pass
reduction whose cores each produce one output alternates its input tiles between two groups, so tile t+1 is unpacked
(and a bf16 tile moved to Dst) while the SFPU folds tile t; its bits are the one-group kernel's, its cycles fewer.
Several outputs per core keep one group (a later output's lane combine would overwrite the group's output slot
while the packer still reads it)."""
from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops

from tt_backend.bench.kernels import launch_plan
from tt_backend.lowering.codegen.sources import split
from tt_backend.lowering.families import tile_render
from tt_backend.lowering.select import lower
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.emu.device import EmuDevice

pytestmark = pytest.mark.needs_cc


def reduce_plan(fn, shape, dtype):
    """The one kernel tinygrad schedules for fn on a `shape` input of `dtype`, planned on one core."""
    x = Tensor.empty(*shape, device="CPU", dtype=dtype)
    (call,) = [c for c in fn(x).schedule_linear().src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]
    plan = lower(call.src[0], "red_groups")
    assert plan.reduce is not None, "an SFPU reduction"
    plan.cores = 1
    return plan


def run(plan, x: np.ndarray) -> tuple[bytes, int]:
    """Output bytes and the launch's emulated cycles (slowest core)."""
    dev = EmuDevice()
    (slot,) = [b.slot for k, b in enumerate(plan.buffers) if k != plan.output.buf]
    out, _ = launch_plan(dev, plan, {slot: x}, compile_kernel(*split(plan.render()), plan.name))
    return out, max(dev.stats()["cycles"].values())


@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.bfloat16], ids=str)
def test_one_output_per_core_two_groups_same_bits(dtype, monkeypatch):
    plan = reduce_plan(lambda a: (a.float() * a.float()).sum().sqrt(), (4096,), dtype)
    assert "two Dst groups in flight" in plan.render()["trisc1"]
    rng = np.random.default_rng(3)
    x = rng.standard_normal(4096).astype(np.float32)
    if dtype == dtypes.bfloat16:
        x = (x.view(np.uint32) >> 16).astype(np.uint16)
    two, two_cycles = run(plan, x)
    monkeypatch.setattr(tile_render, "second_dst_group", lambda *a, **k: None)
    assert "one Dst group in flight" in plan.render()["trisc1"]
    one, one_cycles = run(plan, x)
    assert two == one
    assert two_cycles < one_cycles, (two_cycles, one_cycles)


def test_several_outputs_per_core_keep_one_group():
    plan = reduce_plan(lambda a: a.sum(1), (4, 2048), dtypes.float32)
    assert plan.reduce.groups == 4
    assert "one Dst group in flight" in plan.render()["trisc1"]
