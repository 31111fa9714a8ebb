"""Targets by name (runtime/targets.py), the hw device on a fake tt_umd (tests/support/fake_tt_umd.py: an emulated
tile behind tt-umd's method names), the target plumbing into the lowering (macro-free schedules for ttsim), the dump
report line and `python -m tt_backend info`."""
from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys

import numpy as np
import pytest

from tt_backend.lowering.families.elementwise import ElementwisePlan
from tt_backend.lowering.families.tile_plan import allocate_l1
from tt_backend.lowering.index import IndexExpr
from tt_backend.lowering.plan import TARGETS, Buffer, SfpuProgram, Stream, for_target
from tt_backend.runtime import driver, targets
from tt_backend.chip import isa, layout
from tt_backend.chip.errors import DeviceTimeout, TTError, UnsupportedOp

from tests.support import REPO_ROOT, fake_tt_umd, harness, programs
from tests.support.harness import DRAM_XY


@pytest.fixture
def no_sim(monkeypatch):
    monkeypatch.delenv("TT_SIMULATOR", raising=False)
    monkeypatch.delenv("TT_METAL_SIMULATOR", raising=False)


@pytest.fixture
def no_umd(monkeypatch):
    monkeypatch.setitem(sys.modules, "tt_umd", None)      # `import tt_umd` raises ImportError


# ----------------------------------------------------------------------------------------------- factory + probe
def test_make_device_by_name(no_sim, no_umd):
    emu = targets.make_device("emu")
    assert emu.name == "emu"
    with pytest.raises(TTError, match="TT_SIMULATOR"):
        targets.make_device("ttsim")
    with pytest.raises(TTError, match="pip install tt-umd"):
        targets.make_device("hw")
    with pytest.raises(TTError, match="unknown target 'gpu'"):
        targets.make_device("gpu")


def test_probe_without_simulator_or_card(no_sim, no_umd, monkeypatch):
    st = {t.name: t for t in targets.available_targets()}
    assert list(st) == ["emu", "ttsim", "umd-sim", "hw"]
    assert st["emu"].available
    assert not st["ttsim"].available and "TT_SIMULATOR" in st["ttsim"].detail
    assert not st["umd-sim"].available and "TT_SIMULATOR" in st["umd-sim"].detail
    assert not st["hw"].available and "pip install tt-umd" in st["hw"].detail
    monkeypatch.setenv("TT_SIMULATOR", "/nonexistent/libttsim.so")
    assert not targets.probe("ttsim").available


def test_probe_hw_with_fake_umd(card):
    st = targets.probe("hw")           # opens card 0: what the open found is part of the answer
    assert st.available and "card(s) 0; card 0: NoC translation on; tile (1, 2) = NOC0 (1, 2)" in st.detail
    fake_tt_umd.reset(arches=(fake_tt_umd.ARCH.WORMHOLE_B0,))
    st = targets.probe("hw")
    assert not st.available and "no Blackhole card" in st.detail


@pytest.mark.ttsim
def test_probe_and_make_ttsim():
    assert targets.probe("ttsim").available
    with targets.make_device("ttsim") as d:
        assert d.name == "ttsim" and d.read32(layout.SOFT_RESET_0) == layout.ALL_CORES_RESET


# ----------------------------------------------------------------------------------------------- hw device
def test_hw_device_opens_the_first_blackhole_card(card):
    fake_tt_umd.reset(arches=(fake_tt_umd.ARCH.WORMHOLE_B0, fake_tt_umd.ARCH.BLACKHOLE))
    d = card()
    assert d.name == "hw" and d.device_number == 1
    assert d.read32(layout.SOFT_RESET_0) == layout.ALL_CORES_RESET
    with pytest.raises(TTError, match="not a Blackhole card"):
        card(0)


def test_hw_device_without_card(card):
    fake_tt_umd.reset(arches=())
    with pytest.raises(TTError, match="no Blackhole card found"):
        card()


def test_hw_roundtrips_and_checks(card):
    d = card()
    d.write_l1(0x20001, b"abcdefg")
    assert d.read_l1(0x20001, 7) == b"abcdefg"
    d.write_dram(0x1234_5600, b"\x01" * 100)
    assert d.read_dram(0x1234_5600, 100) == b"\x01" * 100
    with pytest.raises(TTError, match="outside"):       # a card's bank is 0xFF00_0000 bytes, not 4 GiB
        d.write_bank(layout.DRAM_XY, 0xFF00_0000 - 4, bytes(8))
    with pytest.raises(TTError, match="aligned"):
        d.read32(0x102)
    d.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)
    assert "set_risc_reset_state:0x47800" in fake_tt_umd.calls     # reset goes through tt-umd's reset call


def test_second_process_is_refused_by_the_lock(card):
    d = card()
    with pytest.raises(TTError, match=f"device 0 is in use: pid {os.getpid()} .* holds its lock CHIP_IN_USE_0_PCIe"):
        card()
    d.close()
    card().close()                                    # free again once closed


@pytest.mark.needs_program_cc
def test_hw_runs_kernels_through_the_driver(card):
    d = card()
    d.write_l1(0x20000, bytes(16))
    res = driver.launch(d, {"brisc": programs.compile_prog("device/store_word.c")}, [0x20000, 41], timeout_s=30)
    assert res.cores["brisc"].error == 0
    assert d.read_l1(0x20000, 16) == struct.pack("<IIBxxxHxx", 0xC0FFEE42, 124, 0xA5, 0xBEEF)
    data = bytes(range(256)) * 160
    d.write_bank(layout.DRAM_XY, 0x40_0040, data)
    driver.launch(d, {"ncrisc": programs.compile_prog("device/dram_read.c", "ncrisc")},
                  [0x40_0040, 0x80040, len(data), DRAM_XY])
    assert d.read_l1(0x80040, len(data)) == data


@pytest.mark.needs_program_cc
def test_hw_retires_a_blocked_kernel_by_asking_before_reset(card):
    d = card()
    _start_blocked(d, "wait_stop")                               # blocks until the stop flag
    assert d.unretired_cores() == ["brisc"]
    fake_tt_umd.calls.clear()
    d.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)      # asks first (stop flag), resets once it retired
    calls = fake_tt_umd.calls
    assert calls.index("set_risc_reset_state:0x47800") > calls.index("noc_write32")
    assert d.read32(layout.LAUNCH_STOP) == 1
    assert d.read32(layout.status_addr("brisc", 1)) == 1        # it retired itself: "stopped by the host"
    assert d.unretired_cores() == []
    with pytest.raises(DeviceTimeout):                           # the driver's timeout path asks the same way
        driver.launch(d, {"trisc1": programs.compile_prog("device/wait_stop.c", "trisc1")}, [], timeout_s=0.05)
    assert d.unretired_cores() == []
    res = driver.launch(d, {"brisc": programs.compile_prog("device/store_word.c")}, [0x20000, 2])
    assert res.cores["brisc"].error == 0


@pytest.mark.needs_program_cc
def test_hw_never_resets_a_core_that_does_not_retire(card):
    d = card(retire_timeout_s=0.2)
    _start_blocked(d, "spin")                                     # ignores the stop flag
    with pytest.raises(TTError, match="did not retire"):
        d.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)
    assert not d.read32(layout.SOFT_RESET_0) >> layout.SOFT_RESET_BIT["brisc"] & 1    # still released
    d.close()
    with pytest.raises(TTError, match="not a finished tt_backend kernel"):           # the next opener keeps off
        card()


@pytest.mark.needs_program_cc
def test_hw_takes_a_tile_whose_last_kernel_finished(card):
    d = card()
    driver.launch(d, {"brisc": programs.compile_prog("device/store_word.c")}, [0x20000, 1])
    assert d.unretired_cores() == []            # BRISC is out of reset, parked after done
    d.close()
    card().close()


def _start_blocked(d, prog: str) -> None:
    """Release BRISC on `prog` without waiting for it (generation 9, status cleared)."""
    harness.release_brisc(d, programs.compile_prog(f"device/{prog}.c"), 9)


def _plan(words: list[int]) -> ElementwisePlan:
    body = words + [isa.encode("SFPSTORE", lreg_ind=0, instr_mod0=3, sfpu_addr_mode=1, dest_reg_addr=64)]
    prog = SfpuProgram(setup=[], body=body, dst_slots=2, out_slot=1)
    return allocate_l1(ElementwisePlan("k", (64,), [Buffer(0, "float32", 256), Buffer(1, "float32", 256)],
                                  [Stream(1, "float32", IndexExpr.range_var(0), contiguous=True)],
                                  Stream(0, "float32", IndexExpr.range_var(0), contiguous=True), prog))


def test_macro_free_target_rejects_sfploadmacro():
    load = isa.encode("SFPLOAD", lreg_ind=0, instr_mod0=3, dest_reg_addr=0)
    macro = isa.encode("SFPLOADMACRO", lreg_ind=0, instr_mod0=3, dest_reg_addr=0)
    assert TARGETS["ttsim"].macro_free and not TARGETS["emu"].macro_free and not TARGETS["hw"].macro_free
    assert for_target(_plan([load]), "ttsim").target.schedule == "macro-free schedule (ttsim)"
    assert for_target(_plan([macro]), "emu").target.name == "emu"
    with pytest.raises(UnsupportedOp, match="SFPLOADMACRO"):
        for_target(_plan([macro]), "ttsim")
    assert _plan([load]).target.name == "emu"        # default


def test_renderer_carries_the_target_to_workers(monkeypatch):
    from tinygrad.helpers import Target
    from tt_backend.ops_tt import TTRenderer
    r = TTRenderer(Target(device="TT", arch="ttsim"))
    clone = pickle.loads(pickle.dumps(r))            # how tinygrad ships renderers to compile workers
    assert clone.tt_target == TARGETS["ttsim"] and clone.tt_target.macro_free
    for knob, macro in (("", False), ("0", False), ("1", True)):     # SFPLOADMACRO on request only
        monkeypatch.setenv("TT_SFPU_MACRO", knob)
        for arch in ("emu", "hw"):
            t = TTRenderer(Target(device="TT", arch=arch)).tt_target
            assert t.name == arch and t.macro_free != macro and (t == TARGETS[arch]) == macro


def test_device_string_names_the_target():
    from tt_backend import knobs
    assert knobs.parse_device("TT:ttsim") == ("ttsim", None) and knobs.parse_device("TT:HW") == ("hw", None)
    assert knobs.parse_device("TT") == (None, None) and knobs.parse_device("TT:1") == (None, 1)
    assert knobs.parse_device("TT:ttsim:3") == ("ttsim", 3) and knobs.parse_device("TT:emu:12") == ("emu", 12)
    for bad in ("TT:sim", "TT:1:2", "TT:emu:x", "TT:emu:1:2"):
        with pytest.raises(TTError, match="TT:<target>:<n>"):
            knobs.parse_device(bad)


def test_dump_report_names_the_schedule():
    from tt_backend import dump
    text = dump.report_text(dump.report(for_target(_plan([]), "ttsim"), {}))
    assert "target ttsim: macro-free schedule (ttsim)" in text
    assert "target emu: SFPLOADMACRO allowed" in dump.report_text(dump.report(for_target(_plan([]), "emu"), {}))
    # a plan rendered without for_target (bench rows, tests) gets the plugin's default: macro-free
    assert "target emu: macro-free schedule (emu)" in dump.report_text(dump.report(_plan([]), {}))


@pytest.mark.needs_cc
def test_tinygrad_on_the_hw_target_with_a_fake_card(card):
    from tinygrad import Tensor
    a = np.arange(100, dtype=np.float32)
    out = (Tensor(a, device="TT:hw") * 2 + 1).numpy()
    np.testing.assert_array_equal(out, a * 2 + 1)


def test_info_lists_targets(no_sim):
    env = {k: v for k, v in os.environ.items() if k not in ("TT_SIMULATOR", "TT_METAL_SIMULATOR")}
    out = subprocess.run([sys.executable, "-m", "tt_backend", "info"], capture_output=True, text=True, env=env,
                         cwd=REPO_ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = {ln.split("  ")[0].strip(): ln for ln in out.stdout.splitlines()}
    assert "available: the project's emulator" in lines["target emu"]
    assert "unavailable" in lines["target ttsim"] and "TT_SIMULATOR" in lines["target ttsim"]
    assert "target hw" in lines and "RISC-V compiler" in lines and "tinygrad" in lines
