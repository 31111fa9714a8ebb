"""The `umd-sim` target: the card path (runtime/umd_device.py) through the real tt-umd, on its simulation device over
ttsim (runtime/umd_sim_device.py). Skipped unless TT_SIMULATOR points at libttsim.so and tt-umd is installed.

The elementwise, view, cast and reduction programs of tests/e2e/test_e2e.py and tests/diff/test_diff_emu_ttsim.py
run on umd-sim there (against tinygrad's CPU, and kernel by kernel against the emulator), as do the other tests that
take the `target` fixture. Here: what opening found, the hand-written programs of the differential suite
(tests/support/device_diff.py) and the kernel families those suites do not have (matmuls, FPU reductions, two-pass
reductions) bit-identical to the emulator, retire-by-asking, and ttsim dying under tt-umd.
"""
from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version

import numpy as np
import pytest

from tt_backend.chip import layout
from tt_backend.chip.errors import TTError

from tests.support import harness, programs, ttsim_path
from tests.support.device_diff import CASES, diff_run
from tests.support.harness import DRAM_XY

pytestmark = [pytest.mark.ttsim, pytest.mark.needs_tt_umd]
LIB = ttsim_path()
rng = np.random.default_rng(15)


@pytest.fixture(scope="module")
def dev():
    from tt_backend.runtime.umd_sim_device import UmdSimDevice
    d = UmdSimDevice(LIB)
    yield d
    d.close()


def test_open_found_the_simulated_chip(dev):
    from tt_umd import TTSimTTDevice
    assert dev.name == "umd-sim" and isinstance(dev.transport.dev, TTSimTTDevice)    # the real tt-umd device class
    s = dev.survey
    # tt-umd's simulation devices report translation off; logical Tensix (0, 0) is (1, 2), nothing is harvested
    assert not s.translation and dev.tile_xy == s.tile_xy == s.tile_noc0 == (1, 2) and s.harvested_tensix == ()
    assert s.dram_noc0 is None
    assert dev.read32(layout.SOFT_RESET_0) == layout.ALL_CORES_RESET
    data = rng.bytes(70_000)
    dev.write_l1(0x30001, data)
    dev.write_dram(0xFE00_0003, data)
    assert dev.read_l1(0x30001, len(data)) == data and dev.read_dram(0xFE00_0003, len(data)) == data


def test_a_simulator_directory_of_its_own_is_used_as_tt_umd_expects():
    """A soc_descriptor.yaml beside the library (tt-umd's convention) is used as it is; else one is made."""
    import shutil
    import tt_umd
    from tt_backend.runtime.umd_sim_device import UmdSimDevice, simulator_directory
    made, tmp = simulator_directory(tt_umd, os.path.abspath(LIB))
    try:
        assert tmp and os.path.isfile(os.path.join(tmp, "soc_descriptor.yaml"))
        assert simulator_directory(tt_umd, made) == (made, None)
        with UmdSimDevice(made) as d:
            assert d.read32(layout.SOFT_RESET_0) == layout.ALL_CORES_RESET
    finally:
        shutil.rmtree(tmp)


def test_info_shows_what_the_open_found():
    env = dict(os.environ, TT_SIMULATOR=LIB)
    out = subprocess.run([sys.executable, "-m", "tt_backend", "info"], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("target umd-sim"))
    assert f"available: tt-umd {version('tt-umd')} simulation device on {os.path.abspath(LIB)}: " in line
    assert "NoC translation off; tile (1, 2) = NOC0 (1, 2); harvested Tensix columns: none; DRAM banks (17, 12), (17, 15)" in line


@pytest.mark.needs_program_cc
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_diff_programs_bit_identical_to_the_emulator(case, dev):
    diff_run(case, sim=dev)


@pytest.mark.needs_program_cc
def test_kernels_retire_by_asking(dev):
    """Before holding released cores in reset the card path raises the stop flag and waits; a core that does not
    retire is never reset (the rule a card needs), through tt-umd's set_risc_reset_state on the simulator."""
    dev.retire_timeout_s = 0.5
    harness.release_brisc(dev, programs.compile_prog("device/wait_stop.c"), 3)
    assert dev.unretired_cores() == ["brisc"]
    dev.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)
    assert dev.read32(layout.status_addr("brisc", 1)) == 1 and dev.unretired_cores() == []
    harness.release_brisc(dev, programs.compile_prog("device/spin.c"), 4)
    with pytest.raises(TTError, match="did not retire"):
        dev.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)
    assert not dev.read32(layout.SOFT_RESET_0) >> layout.SOFT_RESET_BIT["brisc"] & 1       # still released
    dev.restart()                                # a fresh simulator for the tests after this one


@pytest.mark.needs_program_cc
def test_ttsim_dying_under_a_kernel_is_a_tterror_with_its_message():
    """The kernel's bad NoC request kills ttsim while it is clocked: TtsimDied with ttsim's ERROR line; every tt-umd
    call after that is a UmdError saying the simulator died, and the per-core report survives."""
    from tt_backend.runtime.sim_child import TtsimDied
    from tt_backend.runtime.umd_device import UmdError
    from tt_backend.runtime.umd_sim_device import UmdSimDevice
    d = UmdSimDevice(LIB)
    try:
        with pytest.raises(TtsimDied) as ei:
            harness.run_on(d, {"brisc": programs.compile_prog("device/bad_dram_read.c")}, [DRAM_XY], step=500)
        assert "ERROR: UndefinedBehavior" in ei.value.sim_message and "alignment of src_addr=0x20" in str(ei.value)
        assert not d.alive
        with pytest.raises(UmdError, match=r"(?s)reading register 0x100 at NoC \(1, 2\) failed in tt-umd .* "
                                           "because the simulator died") as ei:
            d.read32(0x100)
        assert "ERROR: UndefinedBehavior" in ei.value.sim_message
        state = d.core_state()
        assert all(s.startswith("unreadable: umd-sim:") and "UndefinedBehavior" in s for s in state.values())
        d.restart()
        r = harness.run_on(d, {"brisc": programs.compile_prog("device/store_word.c")}, [0x20000, 1], step=200)
        assert r.status["brisc"][1] == 0 and d.read32(0x20000) == 0xC0FFEE42
    finally:
        d.close()


def test_ttsim_dying_under_a_tt_umd_call_is_a_tterror_with_its_message():
    """A host access ttsim rejects (a soft-reset bit it does not implement) kills it inside tt-umd's request."""
    from tt_backend.runtime.umd_device import UmdError
    from tt_backend.runtime.umd_sim_device import UmdSimDevice
    with UmdSimDevice(LIB) as d:
        with pytest.raises(UmdError) as ei:
            d.write32(layout.SOFT_RESET_0, 0x47FFF)
        e = ei.value
        assert e.op == "setting the soft reset to 0x47fff" and e.xy == (1, 2) and e.umd_type == "UmdBaseException"
        assert "SOFT_RESET_0=0x47fff" in e.sim_message and "because the simulator died" in str(e)
        assert not d.alive


def test_a_refused_request_keeps_the_simulator(dev):
    """tt-umd's simulation host refusing one access (a coordinate with no core) is a TTError; the chip lives on."""
    from tt_backend.runtime.umd_device import UmdError
    # the reset register as the tests before this one on this worker's simulator left it (a diff program may leave a
    # TRISC released): the refused access changes nothing
    held = dev.read32(layout.SOFT_RESET_0)
    with pytest.raises(UmdError, match=r"reading register 0x0 at NoC \(99, 99\) failed in tt-umd") as ei:
        dev.transport.noc_read32((99, 99), 0)
    assert not ei.value.sim_message and dev.alive and dev.read32(layout.SOFT_RESET_0) == held


# ---------------------------------------------------------------------- kernel families, bit for bit vs the emulator
def _families():
    from tinygrad import dtypes
    x, v = rng.standard_normal((8, 50)).astype(np.float32), rng.standard_normal(2100).astype(np.float32)
    a, b = rng.standard_normal((40, 80)).astype(np.float32), rng.standard_normal((80, 36)).astype(np.float32)
    bf = (lambda s, t: (s.cast(dtypes.bfloat16) @ t.cast(dtypes.bfloat16)).float())
    return [  # (name, fn, inputs, TT_ERR_BUDGET, TT_PLACE)
        ("matmul_fp32_sfpu", lambda s, t: s @ t, (a, b), None, None),
        ("matmul_tf32_fpu", lambda s, t: s @ t, (a, b), "1e-2", None),
        ("matmul_bf16_fpu", bf, (a, b), "2e-3", None),
        ("sum_fpu", lambda s: s.sum(1), (x,), "1e-2", "REDUCE=FPU:HiFi2"),
        ("mean_fpu_lofi", lambda s: s.mean(0), (x,), "1e-2", "REDUCE=FPU:LoFi"),
        ("argmax_two_pass", lambda s: s.argmax(), (x,), None, None),
        ("logsumexp_two_pass", lambda s: s.logsumexp(), (v,), None, None),
        ("softmax_rows", lambda s: s.softmax(1), (x,), None, None),
    ]


FAMILIES = _families()


@pytest.mark.needs_cc
@pytest.mark.parametrize("name,fn,inputs,budget,pin", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_kernel_families_bit_identical_to_the_emulator(name, fn, inputs, budget, pin, monkeypatch):
    import tinygrad.codegen as cg
    from tinygrad import Device, Tensor
    for k, val in (("TT_ERR_BUDGET", budget), ("TT_PLACE", pin), ("TT_BUDGET_SAMPLED", budget and "1")):
        if val is None:
            monkeypatch.delenv(k, raising=False)
        else:
            monkeypatch.setenv(k, val)
    cg.to_program_cache.clear()                  # tinygrad caches programs by AST: the knobs must reach the lowering
    if not Device["TT:umd-sim"].target.alive:
        Device["TT:umd-sim"].target.restart()
    sim = fn(*[Tensor(i, device="TT:umd-sim") for i in inputs]).numpy()
    emu = fn(*[Tensor(i, device="TT:emu") for i in inputs]).numpy()
    assert sim.dtype == emu.dtype and sim.shape == emu.shape
    assert sim.tobytes() == emu.tobytes(), f"{name}: umd-sim and the emulator differ"
    cg.to_program_cache.clear()
