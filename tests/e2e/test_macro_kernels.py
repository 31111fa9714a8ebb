"""Whole elementwise kernels with the lowering's SFPLOADMACRO schedule (lowering/codegen/sfpu_macro.py): one plan
rendered for emu (macro schedule) and for ttsim (macro-free), both sets of ELFs launched on the emulator (strict mode)
on the same random inputs: the outputs are byte-identical and the macro kernel's math core takes fewer emulated cycles
(the kernel as a whole no more: small kernels are bound by their movers). With
TT_SIMULATOR the macro-free ELFs on ttsim give the macro kernel's bytes too. (The suite's programs check these
kernels' values against tinygrad's CPU device: on the emulator they run with the macro schedule.)"""
from __future__ import annotations

import copy
import os
import subprocess
import sys

import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.uop.ops import Ops

from tt_backend.bench.kernels import launch_plan
from tt_backend.lowering.codegen.sources import split
from tt_backend.lowering.plan import for_target
from tt_backend.lowering.select import lower
from tt_backend.placement_eval import measured_cycles, placer
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.ttsim_device import TtsimDevice

from tests.support import REPO_ROOT

pytestmark = pytest.mark.needs_cc

# name -> (shape, expression of a, b, c)
KERNELS = {
    "a*b+a": ((3, 700), lambda a, b, c: a * b + a),
    "a*b+c": ((64, 96), lambda a, b, c: a * b + c),
    "a-b": ((33, 65), lambda a, b, c: a - b),
    "demo": ((40, 50), lambda a, b, c: (a * b + 1).maximum(0.5) - (a < 0).where(a.exp2(), b.reciprocal())),
}


def _plan(shape, expr):
    ins = [Tensor.empty(*shape, device="CPU") for _ in range(3)]
    calls = [c for c in expr(*ins).schedule_linear().src if c.op is Ops.CALL]
    assert len(calls) == 1
    return lower(calls[0].src[0], "macro_" + "_".join(map(str, shape)), placer())


def _inputs(plan, seed):
    rng = np.random.default_rng(seed)
    return {b.slot: rng.standard_normal(b.nbytes // 4).astype(np.float32) for k, b in enumerate(plan.buffers)
            if k != plan.output.buf}


MATH = "trisc1"      # the core that issues the SFPU program


def _run(plan, target, arrays):
    """(ELFs, output bytes, emulated cycles per core and their "max") of `plan` rendered for `target`, launched on the emulator."""
    plan = for_target(copy.copy(plan), target)
    elfs = compile_kernel(*split(plan.render()), f"{plan.name}_{target.replace('-', '_')}")
    dev = EmuDevice()
    before = dev.stats()
    got, _ = launch_plan(dev, plan, arrays, elfs)
    return elfs, got, measured_cycles((before, dev.stats()))


@pytest.mark.parametrize("name", list(KERNELS))
def test_macro_kernel_same_bytes_fewer_cycles(name):
    shape, expr = KERNELS[name]
    plan = _plan(shape, expr)
    assert plan.sfpu.macro is not None, plan.sfpu.macro_note
    arrays = _inputs(plan, len(name))
    _, macro_out, macro_cycles = _run(plan, "emu", arrays)
    _, free_out, free_cycles = _run(plan, "ttsim", arrays)
    print(f"\n{name} {shape}: {free_cycles} -> {macro_cycles} emulated cycles")
    assert macro_out == free_out
    assert macro_cycles[MATH] < free_cycles[MATH] and macro_cycles["max"] <= free_cycles["max"]


@pytest.mark.parametrize("name", list(KERNELS))
def test_macro_free_on_ttsim_equals_macro_on_emu(name, ttsim_lib):
    shape, expr = KERNELS[name]
    plan = _plan(shape, expr)
    arrays = _inputs(plan, 7 + len(name))
    _, macro_out, _ = _run(plan, "emu", arrays)
    free_elfs = _run(plan, "ttsim", arrays)[0]
    with TtsimDevice(ttsim_lib) as sim:
        assert launch_plan(sim, for_target(copy.copy(plan), "ttsim"), arrays, free_elfs)[0] == macro_out


_PROGRAM = """
import numpy as np
from tinygrad import Tensor
rng = np.random.default_rng(3)
a, b = (rng.standard_normal((5, 300)).astype(np.float32) for _ in range(2))
tt = (Tensor(a, device="TT") * Tensor(b, device="TT") + Tensor(a, device="TT")).numpy()
cpu = (Tensor(a, device="CPU") * Tensor(b, device="CPU") + Tensor(a, device="CPU")).numpy()
assert np.allclose(tt, cpu, rtol=1e-6, atol=1e-6), np.abs(tt - cpu).max()   # TT fuses a*b+a: one rounding
"""


@pytest.mark.parametrize("knob,schedule", [
    ("1", "SFPU schedule: SFPLOADMACRO: SFPMAD + SFPSTORE scheduled"),
    ("0", "SFPU schedule: macro-free: the default on target emu (TT_SFPU_MACRO=1 asks")])
def test_dump_names_the_schedule(tmp_path, knob, schedule):
    """Through tinygrad on TT:emu: the result is the CPU device's (within a rounding), and TT_DUMP's report says which schedule the
    kernel got (TT_SFPU_MACRO=0: the macro-free one)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TT_DUMP": str(tmp_path), "TT_SFPU_MACRO": knob,
           "TT_BACKEND": "emu"}
    env.pop("DEV", None)
    out = subprocess.run([sys.executable, "-c", _PROGRAM], cwd=REPO_ROOT, capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    reports = [p.read_text() for p in tmp_path.glob("*/report.txt")]
    assert len(reports) == 1 and schedule in reports[0], reports
