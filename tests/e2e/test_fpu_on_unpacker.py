"""FPU and SFPU in parallel (tile_render.fpu_on_unpacker, issue #10 item 3): with two Dst groups TRISC0's thread issues
an elementwise kernel's FPU ops right behind their operands' unpacks, so tile t+1's ELWMULs run while TRISC1's thread
issues tile t's SFPU body. RMSNorm's x * (1/r) * w on one core (x*w an ELWMUL at TT_ERR_BUDGET=1e-2), 4 tiles (TRISC0
pops its CB slots one tile late) and 16 (at once): the same bits as the kernel whose math thread issues the ops, in
fewer cycles, and the same bits on ttsim. Odd tile counts, on one core and on several, against numpy."""
from __future__ import annotations

import os

import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops

from tt_backend.bench.kernels import launch_plan
from tt_backend.lowering.codegen.sources import split
from tt_backend.lowering.families import tile_render
from tt_backend.lowering.families.tile_plan import CB_DEPTH
from tt_backend.lowering.plan import TILE_ELEMS
from tt_backend.lowering.select import lower
from tt_backend.placement_eval import placer
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.emu.device import EmuDevice

pytestmark = pytest.mark.needs_cc
SIZES = [4096, 16384]     # 4 tiles on one core: all in the CBs at once (lagged pops); 16: not


def norm_plan(n: int, cores: int = 1):
    """E_N of RMSNorm: x (bf16) * (1/r) (a computed scalar, fp32) * w (fp32), x*w on the FPU, on `cores` cores."""
    x = Tensor.empty(n, device="CPU", dtype=dtypes.bfloat16)
    r, w = Tensor.empty(1, device="CPU"), Tensor.empty(n, device="CPU")
    (call,) = [c for c in (x.float() * r.reciprocal() * w).schedule_linear().src
               if c.op is Ops.CALL and c.src[0].op is Ops.SINK]
    plan = lower(call.src[0], "fpu_on_unpacker", placer(1e-2))
    plan.cores = cores
    return plan


def arrays(plan) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(5)
    out = {}
    for k, b in enumerate(plan.buffers):
        if k == plan.output.buf:
            continue
        n = b.nbytes // (2 if b.dtype == "bfloat16" else 4)
        v = rng.uniform(0.5, 2, n).astype(np.float32)
        out[b.slot] = (v.view(np.uint32) >> 16).astype(np.uint16) if b.dtype == "bfloat16" else v
    return out


def run(dev, plan) -> tuple[bytes, int]:
    out, _ = launch_plan(dev, plan, arrays(plan), compile_kernel(*split(plan.render()), plan.name))
    return out, max(dev.stats()["cycles"].values()) if isinstance(dev, EmuDevice) else 0


@pytest.mark.parametrize("n", SIZES)
def test_fpu_ops_on_the_unpacker_thread_same_bits_fewer_cycles(n, monkeypatch):
    plan = norm_plan(n)
    src = plan.render()
    assert "TTI(0x27" in src["trisc0"] and "this thread issues the FPU ops too" in src["trisc0"]
    assert ("tt_cb_wait_ahead" in src["trisc0"]) == (n <= CB_DEPTH * TILE_ELEMS)     # tile_render lagged_pops
    trisc1 = src["trisc1"]
    math = trisc1[trisc1.index("#elif defined(TRISC_MATH)"):trisc1.index("#elif defined(TRISC_PACK)")]
    assert "two Dst groups in flight" in trisc1 and "TTI(0x27" not in math     # no ELWMUL word on TRISC1
    on, on_cycles = run(EmuDevice(), plan)
    monkeypatch.setattr(tile_render, "fpu_on_unpacker", lambda *a: False)
    assert "this thread issues the FPU ops too" not in plan.render()["trisc0"]
    off, off_cycles = run(EmuDevice(), plan)
    assert on == off
    assert on_cycles < off_cycles, (on_cycles, off_cycles)


# x*w at HiFi3 reads w as tf32 (10 mantissa bits: a relative error up to 2^-10 from truncation); the placement report
# bounds this kernel's elementwise error at 2.72e-3 (`TT_DUMP`), which the tolerance takes
NORM_RTOL = 2.72e-3


@pytest.mark.parametrize("n, cores", [(3 * TILE_ELEMS, 1), (7 * TILE_ELEMS, 3)],
                         ids=["3_tiles_1_core", "7_tiles_3_cores"])
def test_fpu_ops_on_the_unpacker_thread_match_numpy(n, cores):
    plan = norm_plan(n, cores)
    assert "this thread issues the FPU ops too" in plan.render()["trisc0"]
    ins = arrays(plan)
    by_size = {plan.buffers[k].nbytes: plan.buffers[k].slot for k in range(len(plan.buffers)) if k != plan.output.buf}
    x = (ins[by_size[2 * n]].astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    r, w = ins[by_size[4]].astype(np.float64), ins[by_size[4 * n]].astype(np.float64)
    out, _ = run(EmuDevice(), plan)
    np.testing.assert_allclose(np.frombuffer(out, np.float32), x * (1 / r) * w, rtol=NORM_RTOL)


@pytest.mark.ttsim
@pytest.mark.parametrize("n, cores", [(n, 1) for n in SIZES] + [(7 * TILE_ELEMS, 3)])
def test_fpu_ops_on_the_unpacker_thread_on_ttsim(n, cores):
    from tt_backend.runtime.ttsim_device import TtsimDevice
    lib = os.environ.get("TT_SIMULATOR")
    if not lib:
        pytest.skip("TT_SIMULATOR not set")
    plan = norm_plan(n, cores)
    emu, _ = run(EmuDevice(), plan)
    with TtsimDevice(lib) as sim_dev:
        sim, _ = run(sim_dev, plan)
    assert emu == sim
