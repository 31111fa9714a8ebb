"""The differential cases of the hand-written device programs (tests/programs/device): the same ELFs on the emulator
and on a simulator device (ttsim, or tt-umd's simulation device on ttsim), raw L1/DRAM result bytes compared bit for
bit. Run by tests/diff/test_diff_emu_ttsim.py (on ttsim) and tests/runtime/test_umd_sim.py (on umd-sim).

To add a kernel: append a `DiffCase` to CASES (ELFs per core, argument block, inputs, regions to compare), or call
`diff_run(case)` from a test with ELFs built elsewhere (e.g. runtime/compile.py output).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

from tt_backend.chip import layout
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.ttsim_device import TtsimDevice

from tests.support import programs, ttsim_path
from tests.support.harness import DRAM_XY, run_on


@dataclass
class DiffCase:
    name: str
    elfs: Callable[[], dict[str, bytes]]                  # built lazily (the compiler may be missing)
    args: list[int] | bytes | None = None
    l1_in: dict[int, bytes] = field(default_factory=dict)     # written before the launch
    dram_in: dict[int, bytes] = field(default_factory=dict)
    l1_out: list[tuple[int, int]] = field(default_factory=list)    # (addr, size) compared after the launch
    dram_out: list[tuple[int, int]] = field(default_factory=list)
    max_clocks: int = 50_000_000
    step: int = 2000


def execute(device, case: DiffCase) -> dict[str, bytes]:
    """Run `case` on `device`; return the raw result regions (and the status words of the launched cores)."""
    for addr, size in case.l1_out:        # results must not depend on what a region held before
        device.write_l1(addr, bytes(size))
    for addr, size in case.dram_out:
        device.write_bank(layout.DRAM_XY, addr, bytes(size))
    for addr, data in case.l1_in.items():
        device.write_l1(addr, data)
    for addr, data in case.dram_in.items():
        device.write_bank(layout.DRAM_XY, addr, data)
    elfs = case.elfs()
    run_on(device, elfs, case.args, step=case.step, max_clocks=case.max_clocks)
    out = {f"L1[{a:#x}+{n:#x}]": device.read_l1(a, n) for a, n in case.l1_out}
    out |= {f"DRAM[{a:#x}+{n:#x}]": device.read_bank(layout.DRAM_XY, a, n) for a, n in case.dram_out}
    out |= {f"status[{c}]": device.read_l1(layout.status_addr(c), 8) for c in elfs}   # done, error
    return out


def first_diffs(a: bytes, b: bytes, limit: int = 8) -> str:
    rows = []
    for off in range(0, max(len(a), len(b)), 4):
        wa, wb = a[off:off + 4], b[off:off + 4]
        if wa != wb:
            rows.append(f"+{off:#x}: emu {wa.hex()} ttsim {wb.hex()}")
            if len(rows) == limit:
                break
    return "; ".join(rows)


def diff_run(case: DiffCase, emu=None, sim=None) -> None:
    """Run `case` on both devices (fresh ones unless given) and assert the result bytes are identical."""
    own = []
    if emu is None:
        emu = EmuDevice()
    if sim is None:
        sim = TtsimDevice(ttsim_path())
        own.append(sim)
    try:
        want = execute(sim, case)
        got = execute(emu, case)
    finally:
        for d in own:
            d.close()
    bad = {k: first_diffs(got[k], want[k]) for k in want if got[k] != want[k]}
    assert not bad, f"{case.name}: emulator differs from ttsim: {bad}"


_rng = random.Random(1234)
_DRAM_BLOB = _rng.randbytes(40 * 1024 + 64)
_COPY_BLOB = _rng.randbytes(20 * 1024)


def _prog(name: str, core: str = "brisc"):
    return lambda: {core: programs.compile_prog(f"device/{name}.c", core)}


CASES = [
    DiffCase("store_word", _prog("store_word"), [0x20000, 41], l1_out=[(0x20000, 64)], step=200),
    DiffCase("compute", _prog("compute"), [0x40000], l1_out=[(0x40000, 0x800), (layout.ARGS_BASE, 8)]),
    DiffCase("dram_read", _prog("dram_read"), [0x40_0040, 0x80040, len(_DRAM_BLOB), DRAM_XY],
             dram_in={0x40_0040: _DRAM_BLOB}, l1_out=[(0x80040, len(_DRAM_BLOB)), (layout.ARGS_BASE, 0x20)]),
    DiffCase("dram_copy", _prog("dram_copy"), [0x100_0000, 0x90000, len(_COPY_BLOB), 0x200_0000, DRAM_XY],
             dram_in={0x100_0000: _COPY_BLOB}, dram_out=[(0x200_0000, len(_COPY_BLOB))],
             l1_out=[(0x90000, len(_COPY_BLOB))]),
    DiffCase("compute@ncrisc", _prog("compute", "ncrisc"), [0x40000], l1_out=[(0x40000, 0x800), (layout.ARGS_BASE, 8)]),
    DiffCase("store_word@trisc1", _prog("store_word", "trisc1"), [0x20000, 5], l1_out=[(0x20000, 64)], step=200),
    DiffCase("dram_read@ncrisc", _prog("dram_read", "ncrisc"), [0x40_0040, 0x80040, len(_DRAM_BLOB), DRAM_XY],
             dram_in={0x40_0040: _DRAM_BLOB}, l1_out=[(0x80040, len(_DRAM_BLOB)), (layout.ARGS_BASE, 0x20)]),
]
