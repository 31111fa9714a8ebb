"""TtsimDevice against the real ttsim (Tenstorrent's simulator). Skipped unless TT_SIMULATOR points at libttsim.so.

Build: git clone https://github.com/tenstorrent/ttsim && cd ttsim && ./make.py src/_out/release_bh/libttsim.so
Run:   TT_SIMULATOR=/path/to/libttsim.so python -m pytest tests/runtime/test_ttsim_device.py -s
"""
from __future__ import annotations

import random
import struct
import time

import pytest

from tt_backend.chip import layout
from tt_backend.chip.errors import DeviceTimeout, TTError

from tests.support import harness, programs, ttsim_path
from tests.support.harness import DRAM_XY

LIB = ttsim_path()
pytestmark = pytest.mark.ttsim


@pytest.fixture(scope="module")
def dev():
    from tt_backend.runtime.ttsim_device import TtsimDevice
    d = TtsimDevice(LIB)
    yield d
    d.close()


@pytest.fixture(scope="module")
def gen():
    """Fresh launch generation numbers for the shared device."""
    counter = iter(range(1, 1 << 30))
    return lambda: next(counter)


def test_identity_and_reset_state(dev):
    assert dev.read32(layout.SOFT_RESET_0) == layout.ALL_CORES_RESET


def test_l1_roundtrip(dev):
    rng = random.Random(1)
    for addr, size in [(0x20000, 4), (0x20004, 3), (0x20001, 17), (0x30000, 64 * 1024), (layout.L1_SIZE - 64, 64)]:
        data = rng.randbytes(size)
        dev.write_l1(addr, data)
        assert dev.read_l1(addr, size) == data
    whole = rng.randbytes(layout.L1_SIZE - layout.DATA_BASE)   # one 1.4 MiB transfer
    dev.write_l1(layout.DATA_BASE, whole)
    assert dev.read_l1(layout.DATA_BASE, len(whole)) == whole
    dev.write32(0x100, 0x89ABCDEF)
    assert dev.read32(0x100) == 0x89ABCDEF
    assert dev.read_l1(0x100, 4) == struct.pack("<I", 0x89ABCDEF)


def test_dram_roundtrip(dev):
    rng = random.Random(2)
    for addr, size in [(0, 64), (0x1FFFF0, 32), (0x123457, 5 * 1024 * 1024 + 3), (0xFFFFFFC0, 64)]:
        data = rng.randbytes(size)
        dev.write_dram(addr, data)
        assert dev.read_dram(addr, size) == data
    assert dev.read_dram(0x7000_0000, 16) == bytes(16)   # untouched DRAM reads as zero


def test_mmio_words(dev):
    dev.write32(layout.TRISC_RESET_PC[1], 0x9000)
    assert dev.read32(layout.TRISC_RESET_PC[1]) == 0x9000
    dev.write32(layout.NCRISC_RESET_PC, 0x5000)          # write-only on ttsim: answered from the shadow
    assert dev.read32(layout.NCRISC_RESET_PC) == 0x5000
    wall0 = dev.read32(layout.WALL_CLOCK_LO)
    dev.advance(1234)
    assert dev.read32(layout.WALL_CLOCK_LO) - wall0 == 1234


def test_host_side_checks_do_not_kill(dev):
    with pytest.raises(TTError):
        dev.write32(0x102, 1)
    with pytest.raises(TTError):
        dev.read_l1(layout.L1_SIZE - 4, 8)
    with pytest.raises(TTError):
        dev.write_dram(layout.DRAM_BANK_SIZE - 4, bytes(8))
    dev.sync()
    assert dev.alive


@pytest.mark.needs_program_cc
def test_brisc_writes_l1(dev, gen):
    dev.write_l1(0x20000, bytes(16))
    r = harness.run_on(dev, {"brisc": programs.compile_prog("device/store_word.c")}, [0x20000, 41], generation=gen(),
                       step=200)
    assert r.status["brisc"][1] == 0
    assert dev.read_l1(0x20000, 16) == struct.pack("<IIBxxxHxx", 0xC0FFEE42, 124, 0xA5, 0xBEEF)
    assert dev.read32(layout.SOFT_RESET_0) == layout.ALL_CORES_RESET & ~(1 << layout.SOFT_RESET_BIT["brisc"])


@pytest.mark.needs_program_cc
@pytest.mark.parametrize("core", layout.CORES)
def test_each_core_runs_from_its_image_slot(dev, gen, core):
    """Reset PCs / override registers (TRISC, NCRISC) and the BRISC jal, per core."""
    dev.write_l1(0x20000, bytes(16))
    harness.run_on(dev, {core: programs.compile_prog("device/store_word.c", core)}, [0x20000, 7], generation=gen(),
                   step=200)
    assert dev.read_l1(0x20000, 16) == struct.pack("<IIBxxxHxx", 0xC0FFEE42, 22, 0xA5, 0xBEEF)


@pytest.mark.needs_program_cc
def test_brisc_noc_dram_read(dev, gen):
    data = random.Random(3).randbytes(40 * 1024 + 64)      # > 16 KiB: the kernel splits requests
    dev.write_bank(layout.DRAM_XY, 0x40_0040, data)
    dev.write_l1(0x80040, bytes(len(data)))
    harness.run_on(dev, {"brisc": programs.compile_prog("device/dram_read.c")},
                   [0x40_0040, 0x80040, len(data), DRAM_XY], generation=gen(), step=5000)
    assert dev.read_l1(0x80040, len(data)) == data
    assert dev.read32(layout.ARGS_BASE + 16) == sum(struct.unpack(f"<{len(data) // 4}I", data)) & 0xFFFFFFFF


@pytest.mark.needs_program_cc
def test_brisc_dram_copy_both_nocs(dev, gen):
    data = random.Random(4).randbytes(20 * 1024)
    dev.write_bank(layout.DRAM_XY, 0x100_0000, data)
    harness.run_on(dev, {"brisc": programs.compile_prog("device/dram_copy.c")},
                   [0x100_0000, 0x90000, len(data), 0x200_0000, DRAM_XY], generation=gen(), step=5000)
    words = struct.unpack(f"<{len(data) // 4}I", data)
    want = struct.pack(f"<{len(words)}I", *[((w * 2654435761) & 0xFFFFFFFF) ^ (w >> 7) for w in words])
    assert dev.read_bank(layout.DRAM_XY, 0x200_0000, len(data)) == want


@pytest.mark.needs_program_cc
def test_timeout_and_core_state(dev, gen):
    with pytest.raises(DeviceTimeout) as ei:
        harness.run_on(dev, {"brisc": programs.compile_prog("device/spin.c")}, generation=gen(), step=1000,
                       max_clocks=5000)
    assert "not readable on ttsim" in str(ei.value)
    st = dev.core_state()
    assert set(st) == set(layout.CORES) and "released" in st["brisc"] and "in reset" in st["ncrisc"]
    dev.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)  # retire the spinning core
    p = dev.read32(layout.status_addr("brisc", 2))
    dev.advance(1000)
    assert dev.read32(layout.status_addr("brisc", 2)) == p


@pytest.mark.needs_program_cc
def test_fatal_error_becomes_tterror_and_next_device_works():
    from tt_backend.runtime.ttsim_device import TtsimDevice, TtsimDied
    d = TtsimDevice(LIB)
    with pytest.raises(TTError) as ei:
        harness.run_on(d, {"brisc": programs.compile_prog("device/bad_dram_read.c")}, [DRAM_XY], step=500)
    e = ei.value
    assert isinstance(e, TtsimDied)
    assert "ERROR: UndefinedBehavior" in e.sim_message and "alignment of src_addr=0x20" in e.sim_message
    assert "alignment of src_addr=0x20" in str(e)
    assert not d.alive
    with pytest.raises(TTError, match="dead"):
        d.read32(0x100)
    assert "dead" in d.core_state()["brisc"]
    d.restart()                                              # same object, fresh simulator
    assert d.read32(layout.SOFT_RESET_0) == layout.ALL_CORES_RESET
    d.close()
    with TtsimDevice(LIB) as d2:                             # and a new device works
        r = harness.run_on(d2, {"brisc": programs.compile_prog("device/store_word.c")}, [0x20000, 1], step=200)
        assert r.status["brisc"][1] == 0 and d2.read32(0x20000) == 0xC0FFEE42


def test_host_fatal_error_is_caught():
    """A host access ttsim rejects (8-byte MMIO read is impossible here, so: a coprocessor soft-reset bit)."""
    from tt_backend.runtime.ttsim_device import TtsimDevice, TtsimDied
    with TtsimDevice(LIB) as d:
        d.write32(layout.SOFT_RESET_0, 0x47FFF)
        with pytest.raises(TtsimDied, match="SOFT_RESET_0"):
            d.sync()


@pytest.mark.needs_program_cc
def test_speed_report(dev, gen):
    """Measures (prints with -s) launch overhead and simulated clocks/s through the child-process path."""
    elf = programs.compile_prog("device/store_word.c")
    harness.run_on(dev, {"brisc": elf}, [0x20000, 1], generation=gen(), step=100)
    n, t0 = 50, time.perf_counter()
    for _ in range(n):
        r = harness.run_on(dev, {"brisc": elf}, [0x20000, 1], generation=gen(), step=100)
    launch = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for _ in range(200):
        dev.read32(layout.WALL_CLOCK_LO)
    rt = (time.perf_counter() - t0) / 200
    dev.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)
    t0 = time.perf_counter()
    dev.advance(20_000_000)
    dev.sync()
    idle = 20e6 / (time.perf_counter() - t0)
    with pytest.raises(DeviceTimeout):
        harness.run_on(dev, {"brisc": programs.compile_prog("device/spin.c")}, generation=gen(), step=1, max_clocks=1)
    t0 = time.perf_counter()
    dev.advance(20_000_000)
    dev.sync()
    busy = 20e6 / (time.perf_counter() - t0)
    dev.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)
    print(f"\nttsim via child process: launch (load+release+poll, 1 core, {r.clocks} clocks) {launch * 1e6:.0f} us; "
          f"read32 round trip {rt * 1e6:.1f} us; clocks/s idle {idle / 1e6:.2f} M, 1 BRISC busy {busy / 1e6:.2f} M")


def test_tlb_windows_stay_mapped(dev):
    """L1, tile MMIO and a DRAM page each keep a window: alternating between them programs no TLB config word."""
    dev.read_l1(0x100, 4), dev.read32(layout.WALL_CLOCK_LO), dev.read_dram(0x1000, 64)
    before = dev.requests
    for _ in range(10):
        dev.read_l1(0x100, 4), dev.read32(layout.WALL_CLOCK_LO), dev.read_dram(0x1000, 64)
    assert dev.requests - before == 30



@pytest.mark.needs_program_cc
def test_retire_before_reset_is_the_same_code_on_ttsim():
    """The hw device's rule (ask with the stop flag, never reset a core that did not retire) run on ttsim."""
    from tt_backend.runtime.ttsim_device import TtsimDevice
    with TtsimDevice(LIB, retire_before_reset=True) as d:
        d.retire_timeout_s = 0.3
        harness.release_brisc(d, programs.compile_prog("device/wait_stop.c"), 3)
        assert d.unretired_cores() == ["brisc"]
        d.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)
        assert d.read32(layout.status_addr("brisc", 1)) == 1 and d.unretired_cores() == []
        harness.release_brisc(d, programs.compile_prog("device/spin.c"), 4)
        with pytest.raises(TTError, match="did not retire"):
            d.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)
        assert not d.read32(layout.SOFT_RESET_0) >> layout.SOFT_RESET_BIT["brisc"] & 1
