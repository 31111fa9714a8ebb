"""Two Dst groups in flight for an SFPU reduction (tile_render.second_dst_group with a ReducePlan): a one-pass
reduction whose cores each produce one output alternates its input tiles between two groups, so tile t+1 is unpacked
(and a bf16 tile moved to Dst) while the SFPU folds tile t; its bits are the one-group kernel's, its cycles fewer.
Several outputs per core keep one group (a later output's lane combine would overwrite the group's output slot
while the packer still reads it). Odd tile counts, on one core and on several, against numpy."""
from __future__ import annotations

import os

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


def reduce_plan(fn, shape, dtype, cores: int = 1):
    """The one kernel tinygrad schedules for fn on a `shape` input of `dtype`, planned on `cores` cores."""
    x = Tensor.empty(*shape, device="CPU", dtype=dtype)
    (call,) = [c for c in fn(x).schedule_linear().src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]
    plan = lower(call.src[0], "red_groups")
    assert plan.reduce is not None, "an SFPU reduction"
    plan.cores = cores
    return plan


def run(plan, x: np.ndarray, dev=None) -> tuple[bytes, int | None]:
    """Output bytes and the launch's emulated cycles (slowest core; None on ttsim)."""
    dev = dev or EmuDevice()
    (slot,) = [b.slot for k, b in enumerate(plan.buffers) if k != plan.output.buf]
    out, _ = launch_plan(dev, plan, {slot: x}, compile_kernel(*split(plan.render()), plan.name))
    return out, max(dev.stats()["cycles"].values()) if isinstance(dev, EmuDevice) else None


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


ODD = pytest.mark.parametrize("shape, cores", [((3 * 1024,), 1), ((3, 5 * 1024), 3)],
                              ids=["3_tiles_1_core", "5_tiles_3_cores"])


def norm_of_rows(shape, cores):
    """sqrt of the sums of squares over the last axis, one output per core."""
    plan = reduce_plan(lambda a: (a * a).sum(-1).sqrt(), shape, dtypes.float32, cores)
    assert "two Dst groups in flight" in plan.render()["trisc1"]
    return plan, np.random.default_rng(11).standard_normal(shape).astype(np.float32)


@ODD
def test_two_groups_match_numpy(shape, cores):
    """float32 sums in another order than numpy's: a few ulps of the sum (rtol 1e-5)."""
    plan, x = norm_of_rows(shape, cores)
    out, _ = run(plan, x)
    ref = np.sqrt((x.astype(np.float64) ** 2).sum(-1))
    np.testing.assert_allclose(np.frombuffer(out, np.float32), np.atleast_1d(ref), rtol=1e-5)


@pytest.mark.ttsim
@ODD
def test_two_groups_on_ttsim(shape, cores):
    from tt_backend.runtime.ttsim_device import TtsimDevice
    lib = os.environ.get("TT_SIMULATOR")
    if not lib:
        pytest.skip("TT_SIMULATOR not set")
    plan, x = norm_of_rows(shape, cores)
    with TtsimDevice(lib) as sim_dev:
        assert run(plan, x, sim_dev)[0] == run(plan, x)[0]
