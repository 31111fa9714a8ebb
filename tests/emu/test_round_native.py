"""tile.py Tile.run's rounds in C (rv32_native.c run_rounds, tile.ROUND_NATIVE) against run's loop and Tile._round, the
reference: tiles of
hand-assembled programs (cores polling L1 words other cores write, dense hand-backs that send a core to the Python
blocks, a faulting core, semaphore waits and a TTSync stall) run in steps of random budgets with small quanta, so
that rounds end after any core, give the same instructions, registers, pcs, waits, stalls, frozen and polled state,
faults and stats() after every step; compiled kernels (elementwise, a matmul on a 2x2 grid) give the same output
bytes and the same cycles of every core and Tensix thread (EmuDevice.stats())."""
from __future__ import annotations

import random

import pytest

from tt_backend.bench.kernels import launch_plan
from tt_backend.chip import layout
from tt_backend.chip.errors import EmuError
from tt_backend.lowering.codegen.sources import split
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.emu import bench, tile as tile_module
from tt_backend.runtime.emu.accel import native, rv32_native
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.emu.tensix import Tensix
from tt_backend.runtime.emu.tile import Tile

from tests.emu.test_rv32_native import _pcbuf_program
from tests.support.kernel_cases import KERNEL_CASES, kernel_case

pytestmark = pytest.mark.skipif(native.host_compiler() is None, reason="no host C compiler (cc, clang or gcc)")

FLAG, FLAG2 = 0x6000, 0x6010
CSR_READ = bench.i_type(0xC00, 0, 2, 7, op=0x73)          # rdcycle x7: handed back to Python by the C part
ILLEGAL = 0xFFFFFFFF                                       # opcode 0x7F: no instruction
MAILBOX_TO_BRISC = layout.MAILBOX_BASE                   # TRISC0 writing here pushes onto T0 -> B
MAILBOX_FROM_TRISC0 = layout.MAILBOX_BASE + 0x1000       # BRISC reading here pops T0 -> B
WIDE, WIDE_READS = 0x6100, 70                              # more words than C's thaw compares (THAW_MAX_READS)
ZEROS = 6                                                 # more than a mailbox holds: TRISC0 waits for BRISC's pops
HARTID = bench.i_type(0xF14, 0, 2, 10, op=0x73)           # csrr x10, mhartid: a constant, which no probe reads


def _lw(rd: int, rs1: int) -> int:
    return bench.i_type(0, rs1, 2, rd, op=0x03)


def _delay(reg: int, n: int) -> list[int]:
    """reg = n; do reg -= 1 while reg != 0"""
    return bench.li(reg, n) + [bench.i_type(-1, reg, 0, reg, 0x13), bench.b_type(-4, 0, reg, 1)]


def _flag_program(rng: random.Random) -> dict[str, list[int]]:
    """TRISC0 works a while, sets FLAG to 1, reads a CSR in a tight loop (hand-backs: its next quanta run on the
    Python blocks), sets FLAG to 2, sends BRISC zeros and then a one by mailbox and parks. TRISC1 polls FLAG (frozen
    until it changes), copies it to FLAG2, polls until FLAG is 2, sets FLAG2 to 3 and parks. BRISC polls FLAG2 in a
    loop that also reads WIDE_READS other words (frozen, and thawed by _thaw_in_python: C's thaw compares fewer),
    then pops its mailbox until the one (a loop without a store whose registers repeat, but whose pops change the
    mailboxes: no spin) and parks. NCRISC works, then polls until FLAG2 is 3 in a loop that reads a CSR (a loop no
    probe can follow: it polls once more, then moves with the others), and parks. TRISC2 works, then runs into an
    illegal word (a fault: the core stays stopped, the tile usable)."""
    t0 = _delay(5, rng.randrange(200, 600)) + bench.li(6, FLAG) + bench.li(7, 1) + [bench.sw(7, 6, 0)]
    t0 += bench.li(8, rng.randrange(20, 60)) + [CSR_READ, bench.i_type(-1, 8, 0, 8, 0x13), bench.b_type(-8, 0, 8, 1)]
    t0 += bench.li(7, 2) + [bench.sw(7, 6, 0)] + bench.li(11, MAILBOX_TO_BRISC) + [bench.sw(0, 11, 0)] * ZEROS
    t0 += bench.li(7, 1) + [bench.sw(7, 11, 0), bench.J_SELF]
    t1 = bench.li(6, FLAG) + [_lw(7, 6), bench.b_type(-4, 0, 7, 0)] + bench.li(9, FLAG2) + [bench.sw(7, 9, 0)]
    t1 += [_lw(7, 6), bench.i_type(-2, 7, 0, 8, 0x13), bench.b_type(-8, 0, 8, 1)]
    t1 += bench.li(7, 3) + [bench.sw(7, 9, 0), bench.J_SELF]
    wide = [bench.i_type(4 * i, 12, 2, 13, op=0x03) for i in range(WIDE_READS)]      # lw x13, 4i(x12)
    br = bench.li(6, FLAG2) + bench.li(12, WIDE) + wide + [_lw(7, 6), bench.b_type(-4 * (WIDE_READS + 1), 0, 7, 0)]
    br += bench.li(11, MAILBOX_FROM_TRISC0) + [_lw(7, 11), bench.b_type(-4, 0, 7, 0), bench.J_SELF]
    nc = _delay(5, rng.randrange(5, 20)) + bench.li(6, FLAG2)
    nc += [_lw(7, 6), HARTID, bench.i_type(-3, 7, 0, 8, 0x13), bench.b_type(-12, 0, 8, 1), bench.J_SELF]
    t2 = _delay(5, rng.randrange(10, 300)) + [ILLEGAL, bench.J_SELF]
    return {"trisc0": t0, "trisc1": t1, "brisc": br, "ncrisc": nc, "trisc2": t2}


class _AskedTensix(Tensix):
    """A Tensix whose thread_idle is its own (the round then asks it instead of reading the threads)."""
    asked = 0

    def thread_idle(self, thread: int) -> bool:
        _AskedTensix.asked += 1
        return super().thread_idle(thread)


def _state(tile: Tile) -> tuple:
    cores = {k: (c.pc, c.instret, list(c.x), c.parked, c.spinning) for k, c in tile.cores.items()}
    return (cores, dict(tile._wait), dict(tile._stall), dict(tile._fault), dict(tile._frozen), dict(tile._thaw_key),
            dict(tile._poll_again), sorted(tile._self_timed), tile.clock, tile.stats())


def _trace(programs: dict, quantum: int, seed: int, factory=None, based=None) -> list:
    """tile.run in steps of random budgets until every core is parked or faulted (NCRISC held in reset for the first
    steps): each step's return (or error) and the tile's state after it. `based`: a list that counts the calls of
    TRISC1's stamp base, which is then not the tile's own (the C round calls it instead of reading the cycle)."""
    rng = random.Random(seed)
    tile = Tile(factory, quantum=quantum)
    bench.launch_words(tile, programs)
    if based is not None:
        core, own = tile.cores["trisc1"], tile.cores["trisc1"].stamp_base
        core.stamp_base = lambda: based.append(1) or own()
    tile.write32(layout.SOFT_RESET_0, tile_module.CORE_BITS["ncrisc"])     # NCRISC held in reset a few steps
    trace = []
    for step in range(3000):
        if step == 4:
            tile.write32(layout.SOFT_RESET_0, 0)
        try:
            out = tile.run(rng.choice((1, 7, 40, 130)))
        except EmuError as e:
            out = (type(e).__name__, str(e), str(e.__cause__))
        trace.append((out, _state(tile)))
        if not any(tile.running(k) for k in layout.CORES):
            break
    return trace


def _both(monkeypatch, run) -> tuple:
    """run() with the rounds in C, then with run's loop and _round (the reference), counting the calls each made."""
    counts, out = {}, {}
    c_rounds, py_round = rv32_native.rounds_fn(), Tile._round
    assert c_rounds is not None

    def counted_c(ctx, left):
        counts[on]["c"] += 1
        return c_rounds(ctx, left)

    def counted_py(self, left):
        counts[on]["python"] += 1
        return py_round(self, left)
    monkeypatch.setattr(rv32_native, "rounds_fn", lambda: counted_c)
    monkeypatch.setattr(Tile, "_round", counted_py)
    for on in (True, False):
        monkeypatch.setattr(tile_module, "ROUND_NATIVE", on)
        counts[on] = {"c": 0, "python": 0}
        out[on] = run()
    assert counts[True]["python"] == 0 and counts[True]["c"] > 0, counts
    assert counts[False]["c"] == 0 and counts[False]["python"] >= counts[True]["c"], counts
    return out[True], out[False]


@pytest.mark.needs_cc
@pytest.mark.parametrize("seed", range(4))
def test_round_steps_match_python(seed, monkeypatch):
    """The flag program (frozen pollers and their thaw, a poll of a loop left at once, hand-backs and the Python
    blocks, a fault) and the semaphore / TTSync program, each run in random steps with a small quantum: the same
    trace on both paths, and the trace went through what it is meant to."""
    rng = random.Random(seed)
    programs = _flag_program(rng)
    quantum = rng.choice((13, 40, 150))
    handed_back, thawed_in_python = [], []
    resume, thaw_in_python = rv32_native.NativeRun.resume, Tile._thaw_in_python
    monkeypatch.setattr(rv32_native.NativeRun, "resume",
                        lambda self, why: handed_back.append(why) or resume(self, why))
    monkeypatch.setattr(Tile, "_thaw_in_python",
                        lambda self, who: thawed_in_python.append(who) or thaw_in_python(self, who))
    c, py = _both(monkeypatch, lambda: _trace(programs, quantum, seed))
    assert c == py
    states = [s for _, s in c]
    assert any(s[4] for s in states) and any(s[1]["trisc1"] for s in states)           # frozen, spinning waits
    assert any(s[6] for s in states) and not states[-1][6]                              # polled once more, left
    assert any(isinstance(out, tuple) and "trisc2" in out[1] for out, _ in c)           # the fault, named
    assert states[-1][3]["trisc2"] and states[-1][0]["trisc1"][3]                       # faulted; TRISC1 parked
    assert rv32_native.RV_PYTHON in handed_back                                         # resume after a hand-back
    assert "brisc" in thawed_in_python or quantum < 2 * WIDE_READS     # the wide loop (where a quantum sees it spin)
    c, py = _both(monkeypatch, lambda: _trace(_pcbuf_program(), 40, seed))
    assert c == py and any("TTSync" in s[1]["trisc1"] for _, s in c)


@pytest.mark.needs_cc
def test_round_asks_an_own_thread_idle_and_stamp_base(monkeypatch):
    """A Tensix whose thread_idle is not frontend.py's and a core whose stamp base is not the tile's: the C round asks
    them (as _round does) and both agree."""
    def run():
        _AskedTensix.asked, based = 0, []
        trace = _trace(_pcbuf_program(), 40, 5, _AskedTensix, based)
        return trace, _AskedTensix.asked, len(based)
    c, py = _both(monkeypatch, run)
    assert c == py and c[1] > 100 and c[2] > 10


@pytest.mark.needs_cc
@pytest.mark.parametrize("which", KERNEL_CASES)
def test_round_kernels_identical(which, monkeypatch):
    """Compiled kernels launched twice on a device (warm relaunch too): the same output bytes and stats() (every core's
    and Tensix thread's cycles and instructions, the NoC's) with the round in C and in Python."""
    plan, arrays = kernel_case(which, 3)
    elfs = compile_kernel(*split(plan.render()), plan.name)

    def run():
        dev = EmuDevice()
        out = [launch_plan(dev, plan, arrays, elfs)[0] for _ in range(2)]
        return out, dev.stats()
    c, py = _both(monkeypatch, run)
    assert c == py
