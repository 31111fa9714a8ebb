"""bf16 inputs moved into Dst by TRISC0's thread (tile_render.elwadd_on_unpacker, issue #10 item 3): with two Dst
groups and no FPU op, the unpacker's thread issues each face's ELWADD (SrcA + 0) one face behind its unpacks, so tile
t+1's moves run while TRISC1's thread issues tile t's SFPU pass. RMSNorm's square-sum over bf16 x (a reduction, one
output) and a bf16 elementwise, on one core: the same bits as with the moves on TRISC1's thread, in fewer cycles,
the values numpy gives, and the same bits on ttsim."""
from __future__ import annotations

import os

import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops

from tt_backend.bench.kernels import launch_plan
from tt_backend.lowering.codegen.sources import split
from tt_backend.lowering.families import tile_render
from tt_backend.lowering.plan import TILE_ELEMS
from tt_backend.lowering.select import lower
from tt_backend.placement_eval import placer
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.emu.device import EmuDevice

pytestmark = pytest.mark.needs_cc
N = 3 * TILE_ELEMS      # 3 tiles on one core: both Dst groups, and the first again
ON_UNPACKER = "this thread moves the bf16 inputs to Dst too"
KERNELS = {"square_sum": lambda x: x.float().square().sum(), "affine": lambda x: x.float() * 2 + 1}


def plan_of(kind: str):
    x = Tensor.empty(N, device="CPU", dtype=dtypes.bfloat16)
    (call,) = [c for c in KERNELS[kind](x).schedule_linear().src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]
    plan = lower(call.src[0], f"elwadd_{kind}", placer(None))
    plan.cores = 1
    return plan


def x_bits() -> np.ndarray:
    v = np.random.default_rng(7).uniform(-2, 2, N).astype(np.float32)
    return (v.view(np.uint32) >> 16).astype(np.uint16)


def run(dev, plan) -> tuple[np.ndarray, int]:
    (x_buf,) = [b for k, b in enumerate(plan.buffers) if k != plan.output.buf]
    out, _ = launch_plan(dev, plan, {x_buf.slot: x_bits()}, compile_kernel(*split(plan.render()), plan.name))
    cycles = max(dev.stats()["cycles"].values()) if isinstance(dev, EmuDevice) else 0
    return np.frombuffer(out, np.float32), cycles


@pytest.mark.parametrize("kind", sorted(KERNELS))
def test_bf16_moves_on_the_unpacker_thread_same_bits_fewer_cycles(kind, monkeypatch):
    plan = plan_of(kind)
    src = plan.render()
    trisc1 = src["trisc1"]
    math = trisc1[trisc1.index("#elif defined(TRISC_MATH)"):trisc1.index("#elif defined(TRISC_PACK)")]
    assert ON_UNPACKER in src["trisc0"] and "TTI(0x28" in src["trisc0"]
    assert "two Dst groups in flight" in trisc1 and "TTI(0x28" not in math     # no ELWADD word on TRISC1
    on, on_cycles = run(EmuDevice(), plan)
    monkeypatch.setattr(tile_render, "elwadd_on_unpacker", lambda *a: False)
    assert ON_UNPACKER not in plan.render()["trisc0"]
    off, off_cycles = run(EmuDevice(), plan)
    assert on.tobytes() == off.tobytes()
    assert on_cycles < off_cycles, (on_cycles, off_cycles)


def test_bf16_moves_on_the_unpacker_thread_match_numpy():
    x = (x_bits().astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    total, _ = run(EmuDevice(), plan_of("square_sum"))
    np.testing.assert_allclose(total[0], np.sum(x * x), rtol=1e-6)
    affine, _ = run(EmuDevice(), plan_of("affine"))
    np.testing.assert_array_equal(affine, (x * 2 + 1).astype(np.float32))


@pytest.mark.ttsim
@pytest.mark.parametrize("kind", sorted(KERNELS))
def test_bf16_moves_on_the_unpacker_thread_on_ttsim(kind):
    from tt_backend.runtime.ttsim_device import TtsimDevice
    lib = os.environ.get("TT_SIMULATOR")
    if not lib:
        pytest.skip("TT_SIMULATOR not set")
    plan = plan_of(kind)
    emu, _ = run(EmuDevice(), plan)
    with TtsimDevice(lib) as sim_dev:
        sim, _ = run(sim_dev, plan)
    assert emu.tobytes() == sim.tobytes()
