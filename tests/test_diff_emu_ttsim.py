"""Differential tests: the same ELFs on EmuDevice (our emulator) and TtsimDevice (ttsim, the oracle); raw L1/DRAM bytes
of the results must match bit for bit.

Skipped unless TT_SIMULATOR points at libttsim.so AND runtime/emu/device.py provides EmuDevice.
To add a kernel: append a `DiffCase` to CASES (ELFs per core, argument block, inputs, regions to compare), or call
`diff_run(case)` from another test with ELFs built elsewhere (e.g. runtime/compile.py output).
"""
from __future__ import annotations

import os
import random
import struct
import sys
from dataclasses import dataclass, field
from typing import Callable

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ttsim_progs"))

from tt_backend.chip import layout  # noqa: E402

LIB = os.environ.get("TT_SIMULATOR", "")
try:
    from tt_backend.runtime.emu.device import EmuDevice  # noqa: E402
except ImportError:
    EmuDevice = None

pytestmark = [
    pytest.mark.skipif(not (LIB and os.path.isfile(LIB)), reason="TT_SIMULATOR does not point at a libttsim.so"),
    pytest.mark.skipif(EmuDevice is None, reason="runtime/emu/device.py EmuDevice not available yet"),
]

import harness  # noqa: E402
from harness import run_on  # noqa: E402,F401  (re-exported: run_on(device, elfs: dict[core, bytes], args, ...))

DRAM_XY = layout.DRAM_XY[0] | layout.DRAM_XY[1] << 6


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


def make_emu():
    return EmuDevice()


def make_ttsim():
    from tt_backend.runtime.ttsim_device import TtsimDevice
    return TtsimDevice(LIB)


def execute(device, case: DiffCase) -> dict[str, bytes]:
    """Run `case` on `device`; return the raw result regions (and the status words of the launched cores)."""
    for addr, size in case.l1_out:        # results must not depend on what a region held before
        device.write_l1(addr, bytes(size))
    for addr, size in case.dram_out:
        device.write_dram(addr, bytes(size))
    for addr, data in case.l1_in.items():
        device.write_l1(addr, data)
    for addr, data in case.dram_in.items():
        device.write_dram(addr, data)
    elfs = case.elfs()
    run_on(device, elfs, case.args, step=case.step, max_clocks=case.max_clocks)
    out = {f"L1[{a:#x}+{n:#x}]": device.read_l1(a, n) for a, n in case.l1_out}
    out |= {f"DRAM[{a:#x}+{n:#x}]": device.read_dram(a, n) for a, n in case.dram_out}
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
        emu = make_emu()
    if sim is None:
        sim = make_ttsim()
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
    return lambda: {core: harness.compile_prog(name, core)}


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


@pytest.mark.skipif(not harness.have_compiler(), reason=f"{harness.CC} not installed")
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_diff(case):
    diff_run(case)


def test_words_helper():
    assert first_diffs(struct.pack("<2I", 1, 2), struct.pack("<2I", 1, 3)) == "+0x4: emu 02000000 ttsim 03000000"


# ======================================================== every kernel of the end-to-end programs, on both targets
# The tinygrad programs of tests/test_e2e.py and of the frontend tests run on device "TT:ttsim" (and "TT:umd-sim":
# the card path, through the real tt-umd's simulation device on the same ttsim, when tt-umd is installed); every
# kernel launch is recorded (ELFs, argument block, the bytes of all its DRAM buffers before and after) and replayed on
# an EmuDevice with the same DRAM contents; all buffer bytes must be identical. The kernels are the ttsim-lowered ones
# (macro-free), so both targets run the very same ELFs. A kernel ttsim cannot run (a simulator gap:
# UnimplementedFunctionality / UnsupportedFunctionality) is counted and reported, not compared.
import contextlib  # noqa: E402
import copy  # noqa: E402
import time  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402

from tt_backend.chip.errors import UnsupportedOp  # noqa: E402
from test_e2e import BINARY, SHAPES, UNARY  # noqa: E402

_prng = np.random.default_rng(7)


def _r(shape, lo=-4.0, hi=4.0):
    return _prng.uniform(lo, hi, size=shape).astype(np.float32)


def _programs():
    from tinygrad import dtypes
    progs = [(f"{op}{list(s)}", f, (_r(s), _r(s))) for op, f in BINARY.items() for s in SHAPES]
    progs += [(f"{op}{list(s)}", f, (_r(s, lo, hi),)) for op, (f, (lo, hi)) in UNARY.items() for s in SHAPES[:4]]
    ab = (_r((5, 33)), _r((5, 33)))
    ab[1][:, 0] = ab[0][:, 0]
    progs += [("sin", lambda x: x.sin(), (_r((3, 100), -100, 100),)),
              ("lt", lambda x, y: x < y, ab), ("ne", lambda x, y: x != y, ab),
              ("where", lambda x, y: (x < y).where(x, y * 2), ab),
              ("broadcast_permute", lambda x, y, z: x * y + z.T, (_r((64, 1)), _r((1, 50)), _r((50, 64)))),
              ("pad", lambda x: x.pad(((1, 2), (0, 3))) + 1.0, (_r((5, 33)),)),
              ("pad_both_mul", lambda x: x.pad(((2, 1), (3, 4))) * x.pad(((2, 1), (3, 4))).exp2(), (_r((6, 7)),)),
              ("shrink_stride", lambda x: x[1:4, ::2] * 3.0, (_r((7, 40)),)),
              ("flip", lambda x: x.flip(0) + 0.5, (_r((5, 7)),)),
              ("reshape_div_mod", lambda x: x.reshape(2, 3, 10).permute(2, 0, 1).reshape(6, 10).T.reshape(4, 15) + 0.0,
               (_r((6, 10)),)),
              ("bool_logic", lambda x, y: ((x < y) & (x > 0)).where(x, y * 2), ab),
              ("bf16_arith", lambda x, y: (x.cast(dtypes.bfloat16) * y.cast(dtypes.bfloat16) + 1).cast(dtypes.float32),
               (_r((9, 70)), _r((9, 70)))),
              ("sum", lambda x: (x * 3).sum(1), (_r((8, 100)),)), ("max", lambda x: (x * 2).max(0), (_r((9, 40)),)),
              ("readme", lambda a, b: ((a * b + 1).maximum(0.5) - (a < 0).where(a.exp2(), b.reciprocal())),
               (_r((64, 128)), _r((128,))))]
    casts = [(dtypes.float32, dtypes.int32), (dtypes.int32, dtypes.float32), (dtypes.float32, dtypes.bfloat16),
             (dtypes.bfloat16, dtypes.float32), (dtypes.float32, dtypes.bool), (dtypes.bool, dtypes.float32)]
    x = _r((3, 77), -1000, 1000)
    progs += [(f"cast_{s.name}_{d.name}", (lambda s, d: lambda t: t.cast(s).cast(d))(s, d), (x,)) for s, d in casts]
    return progs


PROGRAMS = _programs()
SUMMARY = {"programs": 0, "kernels": 0, "outputs_written": 0, "emu_s": 0.0, "ttsim_s": 0.0, "gaps": [],
           "divergences": [], "kernels_on": {}}      # kernels_on: kernels compared per simulator target
SIM_TARGETS = ["ttsim", "umd-sim"]


@dataclass
class Launch:
    prog: object                 # the TTProgram (ELFs + argument layout)
    bufs: list                   # TTBuffer copies (addresses) in argument order
    arena: object                # the allocator's free list then (bounce buffers for unaligned views)
    before: list[bytes]
    after: list[bytes] | None = None
    ttsim_s: float = 0.0


def _regions(prog, bufs):
    return [(b.addr, d["nbytes"]) for b, d in zip(bufs, prog.meta["buffers"])]


@pytest.fixture
def recorded(monkeypatch):
    """Launches on TT:ttsim / TT:umd-sim, recorded by wrapping TTProgram.__call__."""
    from tt_backend.ops_tt import TTBuffer, TTProgram
    launches: list[Launch] = []
    orig = TTProgram.__call__

    def call(self, *bufs, **kw):
        if getattr(self.dev, "backend", "") not in SIM_TARGETS:
            return orig(self, *bufs, **kw)
        dev = self.dev.target
        rec = Launch(self, [TTBuffer(b.addr, b.size) for b in bufs], copy.deepcopy(self.dev.allocator.arena),
                     [dev.read_dram(a, n) for a, n in _regions(self, bufs)])
        launches.append(rec)
        t0 = time.perf_counter()
        out = orig(self, *bufs, **kw)
        rec.ttsim_s = time.perf_counter() - t0
        rec.after = [dev.read_dram(a, n) for a, n in _regions(self, bufs)]
        return out
    monkeypatch.setattr(TTProgram, "__call__", call)
    yield launches, orig


@pytest.mark.skipif(not harness.have_compiler(), reason=f"{harness.CC} not installed")
@pytest.mark.parametrize("name,fn,arrays", PROGRAMS, ids=[p[0] for p in PROGRAMS])
@pytest.mark.parametrize("sim_target", SIM_TARGETS)
def test_e2e_kernels_bit_identical(sim_target, name, fn, arrays, recorded):
    from tinygrad import Device, Tensor
    if sim_target == "umd-sim":
        pytest.importorskip("tt_umd", reason="tt-umd is not installed (pip install tt-umd)")
    launches, call = recorded
    sim = Device[f"TT:{sim_target}"].target
    if not sim.alive:
        sim.restart()
    SUMMARY["programs"] += 1
    try:
        fn(*[Tensor(a, device=f"TT:{sim_target}") for a in arrays]).numpy()
    except UnsupportedOp as e:
        pytest.skip(f"not lowered for TT yet: {e}")
    except Exception as e:
        msg = getattr(e, "sim_message", "")
        if "UnimplementedFunctionality" in msg or "UnsupportedFunctionality" in msg:
            SUMMARY["gaps"].append(f"{name}/{launches[-1].prog.name}: {msg}")
            launches.pop()
        else:
            raise
    emu = EmuDevice()
    for k, rec in enumerate(launches):
        clone = copy.copy(rec.prog)
        # the replay's stand-in device: this emulator, the recorded arena, no target replacement on failure
        clone.dev = SimpleNamespace(target=emu, allocator=SimpleNamespace(arena=rec.arena),
                                    recovering=lambda what: contextlib.nullcontext())
        for (a, _), data in zip(_regions(rec.prog, rec.bufs), rec.before):
            emu.write_dram(a, data)
        t0 = time.perf_counter()
        call(clone, *rec.bufs)
        SUMMARY["emu_s"] += time.perf_counter() - t0
        SUMMARY["ttsim_s"] += rec.ttsim_s
        SUMMARY["kernels"] += 1
        SUMMARY["kernels_on"][sim_target] = SUMMARY["kernels_on"].get(sim_target, 0) + 1
        out = rec.prog.slots.index(rec.prog.meta["outs"][0])
        SUMMARY["outputs_written"] += rec.after[out] != rec.before[out]     # the comparison is not of untouched bytes
        got = [emu.read_dram(a, n) for a, n in _regions(rec.prog, rec.bufs)]
        bad = {f"buffer slot {rec.prog.slots[j]}": first_diffs(g, w) for j, (g, w) in enumerate(zip(got, rec.after))
               if g != w}
        if bad:
            SUMMARY["divergences"].append(f"{name}/{rec.prog.name}: {bad}")
        assert not bad, f"{name}: kernel {k} ({rec.prog.name}) differs, emu vs ttsim: {bad}"
    if any(g.startswith(name + "/") for g in SUMMARY["gaps"]):
        pytest.xfail(f"ttsim cannot run a kernel of {name}: {SUMMARY['gaps'][-1]}")


def test_e2e_summary():
    """Prints (with -s) how many kernels ran on both targets, how long each took, and every gap/divergence."""
    s = SUMMARY
    if not s["programs"]:
        pytest.skip("no e2e program ran (select the whole module)")
    print(f"\nemu vs ttsim: {s['kernels']} kernels ({s['kernels_on']}) from {s['programs']} programs, "
          f"bit-identical except {len(s['divergences'])} divergence(s); launch time emu {s['emu_s']:.2f} s, ttsim {s['ttsim_s']:.2f} s; "
          f"{len(s['gaps'])} kernel(s) ttsim cannot run; {s['outputs_written']} outputs changed by the kernel")
    for line in s["gaps"] + s["divergences"]:
        print("  " + line)
    assert not s["divergences"]
    assert s["outputs_written"] >= s["kernels"] * 0.9
