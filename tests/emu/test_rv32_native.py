"""The RISC-V cores' run() in C (runtime/emu/accel/rv32_native.py + .c) against rv32.py's Python path, the reference:
random programs (every instruction group, loops, spins, MMIO, pushes and runs of them, CSRs, atomics, misaligned and
faulting accesses, illegal words, stalls) run quantum by quantum with the same random budgets give the same return
values, pc, registers, instruction counts, flags, memory, bus traffic in order and errors; whole compiled kernels (a
gather, an elementwise kernel with partial tiles, a matmul on a 2x2 grid) give the same output bytes and the same
cycles of every core and Tensix thread (EmuDevice.stats())."""
from __future__ import annotations

import ctypes
import random
import struct
import sys
from typing import Callable

import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.uop.ops import Ops

from tt_backend.bench.kernels import launch_plan
from tt_backend.chip import isa, layout
from tt_backend.chip.errors import EmuError, EmuUndefined
from tt_backend.chip.isa import ttinsn
from tt_backend.lowering.codegen.sources import split
from tt_backend.lowering.select import lower
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.emu.accel import native, noc_native, rv32_native, sfpu_issue_native
from tt_backend.runtime.emu.accel.direct_issue import DirectIssueMixin
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.emu.noc import INITIATOR_STRIDE as NIU_INITIATOR_STRIDE
from tt_backend.runtime.emu.rv32 import LOCAL_BASE, STAMP_SHIFT, RV32Core
from tt_backend.runtime.emu import bench, rv32, tile as tile_module
from tt_backend.runtime.emu.cycles import TensixTiming
from tt_backend.runtime.emu.tensix import Tensix
from tt_backend.runtime.emu.tile import Tile

from tests.emu.test_rv32 import (CODE, PARK, R_OPS, RecordingBus, b_type, i_type, jal, r_type, s_type, u_type)
from tests.support.kernel_cases import KERNEL_CASES, kernel_case

pytestmark = pytest.mark.skipif(native.host_compiler() is None, reason="no host C compiler (cc, clang or gcc)")

DATA, MMIO, JUMPS = 20, 21, 22          # base registers the programs never write: L1 data, an MMIO page, jump table
L1_DATA = 0x8000
MMIO_PAGE = 0xFFB12000
BASES = (DATA, DATA, 2, MMIO)           # x2 holds the local RAM address (a stack pointer)
SHIFT_I = [(1, 0x00), (5, 0x00), (5, 0x20), (5, 0x30), (5, 0x34)]
UNARY = [(1, 0x600), (1, 0x601), (1, 0x602), (1, 0x604), (1, 0x605), (5, 0x287)]
# a store, a push, CSR writes (csrrw and csrrwi, of x0 and 0 too; csrrs with rs1 != 0), an atomic swap of x0's value
IMPURE = [s_type(0, 5, DATA, 2), ttinsn(0x123), i_type(0x7C1, 5, 1, 0, op=0x73), i_type(0x7C1, 0, 1, 0, op=0x73),
          i_type(0x7C1, 5, 2, 6, op=0x73), i_type(0x7C1, 0, 5, 0, op=0x73),
          (0x01 << 27) | (DATA << 15) | (2 << 12) | 0x2F]
CSRS = [0xC00, 0xC80, 0xB00, 0x7C1, 0x300, 0x7C0, 0x123]
AMO_F5 = [0x00, 0x01, 0x04, 0x0C, 0x08, 0x10, 0x14, 0x18, 0x1C, 0x03]


def _instruction(rng: random.Random, at: int, n_words: int) -> list[int]:
    """One random instruction (or a short idiom) at word index `at` of a program of n_words."""
    rd, rs1, rs2 = rng.randrange(0, 16), rng.randrange(0, 16), rng.randrange(0, 16)
    k = rng.random()
    if k < 0.25:
        f7, f3, _ = rng.choice(list(R_OPS.values()))
        return [r_type(f7, rs2, rs1, f3, rd)]
    if k < 0.40:
        return [i_type(rng.randrange(-2048, 2048), rs1, rng.choice([0, 2, 3, 4, 6, 7]), rd)]
    if k < 0.45:
        f3, f7 = rng.choice(SHIFT_I)
        return [r_type(f7, rng.randrange(32), rs1, f3, rd, op=0x13)]
    if k < 0.48:
        f3, imm = rng.choice(UNARY)
        return [i_type(imm, rs1, f3, rd)]
    if k < 0.60:                        # loads: aligned, misaligned, L1, local RAM, MMIO; a few from anywhere
        f3 = rng.choice([0, 1, 2, 4, 5, 3])
        base = rng.choice(BASES + (rs1,)) if rng.random() < 0.97 else rs1
        return [i_type(rng.randrange(0, 64), base, f3, rd, op=0x03)]
    if k < 0.70:                        # stores only through the base registers (the code is never written)
        return [s_type(rng.randrange(0, 64), rs2, rng.choice(BASES), rng.choice([0, 1, 2, 2, 3]))]
    if k < 0.75:
        return [u_type(rng.getrandbits(20), rd, rng.choice([0x37, 0x17]))]
    if k < 0.83:                        # branches anywhere in the program (loops included)
        off = 4 * (rng.randrange(n_words) - at)
        return [b_type(off, rs2, rs1, rng.choice([0, 1, 4, 5, 6, 7, 2]))]
    if k < 0.85:
        return [jal(rd, 4 * (rng.randrange(n_words) - at))]
    if k < 0.87:                        # jalr into the program (now and then to a misaligned or odd target)
        return [i_type(4 * rng.randrange(n_words) + rng.choice([0, 0, 0, 1, 2]), JUMPS, 0, rd, op=0x67)]
    if k < 0.92:                        # a run of Tensix pushes
        return [ttinsn(rng.getrandbits(30)) for _ in range(rng.choice([1, 2, 3, 7, 70]))]
    if k < 0.935:                       # a spin: poll an MMIO word until it is nonzero
        return [i_type(0, MMIO, 2, 5, op=0x03), b_type(-4, 0, 5, 0)]
    if k < 0.94:                        # no spin: a loop that stores, pushes or writes a CSR with registers unchanged
        return [rng.choice(IMPURE), b_type(-4, 0, 0, 0)]
    if k < 0.96:
        csr, f3 = rng.choice(CSRS), rng.choice([1, 2, 3, 5, 6, 7])
        return [i_type(csr, rng.choice([0, rs1]), f3, rd, op=0x73)]
    if k < 0.97:
        f5 = rng.choice(AMO_F5)
        return [(f5 << 27) | (rs2 << 20) | (DATA << 15) | (2 << 12) | (rd << 7) | 0x2F]
    if k < 0.98:
        return [PARK]
    if k < 0.99:
        # fence, fence.i, ecall, jalr with funct3 7, flw
        return [rng.choice([0x0000000F, 0x0000100F, 0x00000073, i_type(0, 1, 7, 0, op=0x67), 0x00000007])]
    return [rng.getrandbits(32)]


def _program(rng: random.Random) -> list[int]:
    n = rng.randrange(20, 300)
    words: list[int] = []
    while len(words) < n:
        words += _instruction(rng, len(words), n)
    return words[:n] + [PARK]


def _give_pushers(core: RV32Core, bus: RecordingBus) -> None:
    """PUSHP(pos, word) and PUSHM(pos, words) as the Tile gives them; the positions are recorded with the MMIO."""
    def push(pos: int, word: int) -> None:
        bus.push_tensix(core.name, word)
        bus.accesses.append(("push", pos))

    def push_many(pos: int, words: tuple) -> None:
        for j, word in enumerate(words):
            try:
                push(pos + j, word)
            except BaseException:       # (Tile._multi_pusher's contract: core.sub names the word that raised)
                core.sub = j
                raise
    core.set_pusher("PUSHP", push)
    core.set_pusher("PUSHM", push_many)


def _faulty(bus: RecordingBus, core: RV32Core, call, *args):
    """`call` after recording core.pos; an access to the MMIO page's last word, a push of a word ending in 0x55
    raise as an unmapped register or an undecodable word would."""
    bus.accesses.append(("at", core.pos))
    if args[1] == MMIO_PAGE + 0x3C or (len(args) == 2 and args[1] & 0xFF == 0x55):
        raise EmuUndefined(f"{core.name}: bus call {args}")
    return call(*args)


def _core(words, seed: int, on_c: bool) -> tuple[RV32Core, RecordingBus]:
    rng = random.Random(seed)
    bus = RecordingBus(stall_pushes=rng.randrange(3), stall_mmio=rng.randrange(3))
    for call in ("mmio_load", "mmio_store", "push_tensix"):         # each bus call records the core's position too
        setattr(bus, call, lambda *a, f=getattr(bus, call): _faulty(bus, core, f, *a))
    for i, w in enumerate(words):
        struct.pack_into("<I", bus.l1, CODE + 4 * i, w)
    bus.l1[L1_DATA:L1_DATA + 256] = rng.randbytes(256)
    bus.mmio.update({MMIO_PAGE + 4 * i: rng.choice([0, 0, 1, 0xFFFFFFFF]) for i in range(16)})
    core = RV32Core("trisc0", bus, CODE)
    if seed % 2:                        # the Tile's per-core pushers (runs of `.ttinsn` words in one call)
        _give_pushers(core, bus)
    core.x[1:] = [rng.getrandbits(32) if rng.random() < 0.7 else rng.randrange(-3, 70) & 0xFFFFFFFF
                  for _ in range(31)]
    core.x[2], core.x[DATA], core.x[MMIO], core.x[JUMPS] = LOCAL_BASE + 0x800, L1_DATA, MMIO_PAGE, CODE
    # every L1 store stamps its line with the core's cycle, as a Tile's stamper does (its clock: instret here)
    stamps = np.zeros(len(bus.l1) >> STAMP_SHIFT, np.uint64)

    def stamp(addr: int, pos: int) -> None:
        stamps[addr >> STAMP_SHIFT] = core.instret + pos
    core.set_stamper(stamp, stamps, lambda: core.instret)
    if on_c:
        rv32_native.attach(core)
        assert core.native is not None
    return core, bus


def _trace(words, seed: int, on_c: bool) -> list:
    """What a run quantum by quantum shows after each quantum (budgets drawn from `seed`), up to an error."""
    core, bus = _core(words, seed, on_c)
    rng = random.Random(seed + 1)
    out = []
    for _ in range(40):
        seen = len(bus.accesses), len(bus.tensix)
        try:
            n = core.run(rng.choice([1, 2, 5, 63, 64, 65, 200, 2000]))
        except EmuError as e:
            out.append((type(e).__name__, str(e), core.pc, core.instret, list(core.x)))
            break
        out.append((n, core.pc, core.instret, core.parked, core.spinning, list(core.x), core.csr.copy(),
                    bus.accesses[seen[0]:], bus.tensix[seen[1]:], bytes(bus.l1[L1_DATA:L1_DATA + 512]),
                    bytes(bus._local), core.stamps.tobytes()))
        if core.parked:
            break
    return out


@pytest.mark.parametrize("chunk", range(4))
def test_random_programs_match_python(chunk, monkeypatch):
    """On C with MMIO words and pushes served by run()'s exits (rv32_native.MMIO_EXITS) and with them handed back
    through the pieces, as on the Python path."""
    seen = set()
    for seed in range(chunk * 60, chunk * 60 + 60):
        words = _program(random.Random(seed))
        want = _trace(words, seed, False)
        for exits in (True, False):
            monkeypatch.setattr(rv32_native, "MMIO_EXITS", exits)
            assert _trace(words, seed, True) == want, f"seed {seed}, MMIO exits {exits}"
        last = want[-1]
        seen.add("error" if isinstance(last[0], str) else "parked" if last[3] else "running")
        seen.update("spinning" for step in want if isinstance(step[0], int) and step[4])
    assert {"error", "parked", "spinning"} <= seen


def _push_run_program(rng: random.Random) -> list[int]:
    """A loop (1-3 turns) of a few ALU words, so that its run starts anywhere in a block, then a run of 1-300 `.ttinsn`
    words (now and then one that raises: a word ending in 0x55, see _faulty); then a poll of an MMIO word (a spin)."""
    run = [ttinsn(rng.getrandbits(30) & ~0xFF | rng.choice([0x10, 0x24, 0x7F])) for _ in range(rng.randrange(1, 300))]
    if rng.random() < 0.2:
        run[rng.randrange(len(run))] = ttinsn(0x1234055)
    body = [i_type(3, 6, 0, 6)] * rng.randrange(0, 70) + run
    poll = [i_type(4 * rng.randrange(16), MMIO, 2, 7, op=0x03), b_type(-4, 0, 7, 0)]
    return [i_type(rng.randrange(1, 4), 0, 0, 5)] + body + [i_type(-1, 5, 0, 5), b_type(-4 * (len(body) + 1), 0, 5, 1)] \
        + poll + [PARK]


@pytest.mark.parametrize("chunk", range(2))
def test_push_runs_joined_across_block_starts_match_python(chunk, monkeypatch):
    """Runs of `.ttinsn` words longer than what is left of their block, quantum by quantum with budgets that end
    inside, at and after block starts, and pushes that stall or raise at a random word (before and after a block
    start): C joining each run across the block starts it reaches (one PUSHM call; rv32_native.JOINED_RUNS_NATIVE),
    C cutting them where rv32.py's blocks do, and rv32.py (the reference) give the same traces."""
    runs: list[int] = []
    give = _give_pushers

    def counted_pushers(core, bus):
        give(core, bus)
        push_many = core._ns["PUSHM"]
        core.set_pusher("PUSHM", lambda pos, words: runs.append(len(words)) or push_many(pos, words))
    monkeypatch.setattr(sys.modules[__name__], "_give_pushers", counted_pushers)
    longest = {}
    for seed in range(2 * chunk * 40 + 1, 2 * chunk * 40 + 81, 2):      # odd: the tile's pushers (see _core)
        words = _push_run_program(random.Random(seed))
        want = _trace(words, seed, False)
        for joined in (True, False):
            monkeypatch.setattr(rv32_native, "JOINED_RUNS_NATIVE", joined)
            runs.clear()
            assert _trace(words, seed, True) == want, f"seed {seed}, joined {joined}"
            longest[joined] = max(runs + [longest.get(joined, 0)])
    assert longest[True] > rv32.MAX_BLOCK >= longest[False]


@pytest.mark.needs_cc
def test_tile_long_joined_runs_identical(monkeypatch):
    """The tile_long row (a 171-word SFPU body pushed per row step through the Tensix's push_many, TTSync per tile)
    with its runs joined across block starts and cut there: the same cycles, Tensix cycles and instructions, RISC-V
    instructions and Dst checksum; joined, the body goes in one push_many call. The runs are counted where they
    reach the Tensix: C's direct_many (the tile's own pusher stays registered, so C takes that path, as in a real
    launch) or the pusher, where C hands a run to it."""
    results, runs, via = {}, [], {"C": 0, "pusher": 0}
    multi = Tile._multi_pusher

    def counted(self, who):
        push = multi(self, who)
        many = self._many_pushers[who][1]

        def pusher(pos, words):
            via["pusher"] += 1
            runs.append(len(words))
            return push(pos, words)

        def counted_many(thread, words, t):
            via["C"] += 1
            runs.append(len(words))
            return many(thread, words, t)
        self._many_pushers[who] = pusher, counted_many
        return pusher
    monkeypatch.setattr(Tile, "_multi_pusher", counted)
    for joined in (True, False):
        monkeypatch.setattr(rv32_native, "JOINED_RUNS_NATIVE", joined)
        runs.clear()
        r = bench.bench_tile_long(2)
        results[joined] = {k: v for k, v in r.items() if k not in bench.TIMES}
        assert max(runs) == (len(bench.LONG_BODY) if joined else rv32.MAX_BLOCK)
    assert results[True] == results[False]
    assert via["C"] > 0 and via["pusher"] == 0, via


@pytest.mark.parametrize("effect", IMPURE)
def test_loop_with_an_effect_is_no_spin(effect):
    """A loop whose registers never change but that stores, pushes or writes a CSR runs its whole budget."""
    words = [effect, b_type(-4, 0, 0, 0)]
    for seed in (0, 1):
        want = _trace(words, seed, False)
        assert _trace(words, seed, True) == want
        assert not any(step[4] for step in want if isinstance(step[0], int))
    poll = [i_type(0, MMIO, 2, 6, op=0x03), b_type(-4, 0, 0, 0)]                   # a load instead: a spin
    want = _trace(poll, 1, False)
    assert _trace(poll, 1, True) == want and want[-1][4]


def test_pushers_set_between_quanta_take_the_next_pushes():
    """The C runner keeps its bus calls between quanta: a pusher set after one quantum receives the next quantum's
    pushes (set_pusher drops the kept calls), on C as on the Python blocks."""
    words = [ttinsn(0x11), b_type(4, 0, 0, 0), ttinsn(0x22), ttinsn(0x33), PARK]     # the branch ends a block
    for on_c in (False, True):
        bus = RecordingBus()
        for i, w in enumerate(words):
            struct.pack_into("<I", bus.l1, CODE + 4 * i, w)
        core = RV32Core("trisc0", bus, CODE)
        _give_pushers(core, bus)
        if on_c:
            rv32_native.attach(core)
            assert core.native is not None
        assert core.run(1) == 2 and bus.tensix == [0x11]
        later: list = []
        core.set_pusher("PUSHP", lambda pos, word: later.append(word))
        core.set_pusher("PUSHM", lambda pos, run: later.extend(run))
        core.run(100)
        assert core.parked and bus.tensix == [0x11] and later == [0x22, 0x33], (on_c, bus.tensix, later)


@pytest.mark.parametrize("exits", [True, False])
def test_hands_back_only_what_python_models(exits, monkeypatch):
    """A counting loop stays in C; its MMIO loads, pushes and CSR reads come back to Python one instruction (or one
    run of pushes) at a time (here always on C: no quanta sent to the Python blocks): through rv32.py's pieces, or,
    with rv32_native.MMIO_EXITS, only the CSR read (run() serves the load and the pushes itself)."""
    monkeypatch.setattr(rv32_native, "PYTHON_QUANTA", 0)
    monkeypatch.setattr(rv32_native, "MMIO_EXITS", exits)
    words = [i_type(1, 5, 0, 5), i_type(0, MMIO, 2, 6, op=0x03), ttinsn(0x111), ttinsn(0x222),
             i_type(0xC00, 0, 2, 7, op=0x73), b_type(-20, 8, 5, 1), PARK]
    core, bus = _core(words, 1, True)
    core.x[5], core.x[8], bus.stall_pushes, bus.stall_mmio = 0, 1000, 0, 0
    asked = []
    piece = core.piece
    core.piece = lambda pc, n: asked.append((pc - CODE, n)) or piece(pc, n)
    while not core.parked:
        core.run(2000)
    assert core.x[5] == 1000 and len(bus.tensix) == 2000
    assert asked == ([(16, 1)] if exits else [(4, 1), (8, 2), (16, 1)]) * 1000


def test_dense_hand_backs_send_quanta_to_python_blocks():
    """A loop that hands back (a CSR read) every few instructions runs its next quanta on the Python blocks, one that
    computes between hand-backs stays on C, as does one that pushes (C makes the push call itself); all end as the
    Python path does."""
    csr = i_type(0xC00, 0, 2, 7, op=0x73)
    for alu, back, on_python in ((0, csr, True), (40, csr, False), (0, ttinsn(0x111), False)):
        words = [i_type(1, 5, 0, 5)] + [i_type(3, 6, 0, 6)] * alu + [back, b_type(-4 * (alu + 2), 8, 5, 1), PARK]
        done = {}
        for on_c in (True, False):
            core, bus = _core(words, 1, on_c)
            core.x[5], core.x[6], core.x[8], bus.stall_pushes, bus.stall_mmio = 0, 0, 3000, 0, 0
            blocks = []
            run_blocks = core.run_blocks
            core.run_blocks = lambda budget: blocks.append(budget) or run_blocks(budget)
            while not core.parked:
                core.run(2000)
            done[on_c] = (core.x, core.instret, bus.accesses, bus.tensix, bool(blocks))
        assert done[True][:4] == done[False][:4] and done[True][4] == on_python


def _wait_loop(rng: random.Random) -> list[int]:
    """A loop of loads (L1, local RAM, MMIO words a bus may peek), local RAM stores, ALU work and forward branches,
    closed by a branch back on a loaded value; now and then a body longer than a block, or an instruction the C probe
    leaves to rv32.py's (an L1 or MMIO store, a push, a CSR, a misaligned load, an atomic, fence.i)."""
    body: list[int] = []
    for _ in range(rng.choice([1, 3, 8, 20, 70])):
        rd, rs = rng.randrange(5, 16), rng.randrange(5, 16)
        k = rng.random()
        if k < 0.25:
            f3 = rng.choice([0, 1, 2, 4, 5])
            size = {0: 1, 4: 1, 1: 2, 5: 2}.get(f3, 4)
            body.append(i_type(size * rng.randrange(64 // size), DATA, f3, rd, op=0x03))
        elif k < 0.35:
            body.append(i_type(4 * rng.randrange(8), 2, rng.choice([0, 2, 5]), rd, op=0x03))
        elif k < 0.42:
            f3 = rng.choice([0, 1, 2])
            body.append(s_type((1 << f3) * rng.randrange(8), rs, 2, f3))
        elif k < 0.50:
            body.append(i_type(4 * rng.randrange(16), MMIO, 2, rd, op=0x03))
        elif k < 0.85:
            f7, f3, _ = rng.choice(list(R_OPS.values()))
            body.append(r_type(f7, rng.randrange(0, 16), rs, f3, rd) if k < 0.7 else
                        i_type(rng.randrange(-2048, 2048), rs, rng.choice([0, 4, 6, 7]), rd))
        elif k < 0.93:
            body.append(b_type(8, rs, rd, rng.choice([0, 1, 4, 5, 6, 7])))      # over the next instruction
        elif k < 0.95:
            body.append(0x0000000F)                                           # fence
        else:
            body.append(rng.choice(IMPURE[:2] + [s_type(0, 5, DATA, 2), s_type(0, 5, MMIO, 2),
                                                 i_type(1, DATA, 2, 6, op=0x03), 0x0000100F]))
    poll = i_type(4 * rng.randrange(16), rng.choice([DATA, MMIO]), 2, 5, op=0x03)
    return body + [poll, b_type(-4 * (len(body) + 1), 0, 5, rng.choice([0, 1])), PARK]


@pytest.mark.parametrize("chunk", range(2))
def test_spin_probe_matches_python(chunk, monkeypatch):
    """rv32_native.c's probe against rv32.py's spin_reads (the reference) on wait loops, from the state after each
    quantum: the same words read, the same address it stops at, the same local RAM after it; the core untouched.
    Where C leaves the loop to Python it leaves local RAM as it found it."""
    kinds = set()
    for seed in range(chunk * 120, chunk * 120 + 120):
        rng = random.Random(seed)
        core, bus = _core(_wait_loop(rng), seed, True)
        bus.peek = lambda _who, addr: bus.mmio.get(addr) if addr < MMIO_PAGE + 0x20 else None
        for _ in range(5):
            local, state = bytes(bus._local), (core.pc, list(core.x), core.instret)
            answer = core.native.spin_reads(None)
            after = bytes(bus._local)
            assert (core.pc, core.x, core.instret) == state
            bus._local[:] = local
            monkeypatch.setattr(rv32_native, "PROBE_NATIVE", False)
            try:
                want = core.spin_reads()
            except Exception as e:          # (rv32.py's probe can fault, or run into `j .`: C leaves those to it)
                want = type(e)
            monkeypatch.setattr(rv32_native, "PROBE_NATIVE", True)
            if answer is NotImplemented:
                assert after == local
                kinds.add("python")
            else:
                assert (answer, after) == (want, bytes(bus._local)), f"seed {seed}"
                kinds.add("none" if answer is None else "stop" if answer[1] is not None else "back")
                kinds.update(["local"] if after != local else [])
            core.pc = state[0]
            try:
                core.run(rng.choice([1, 3, 17, 64, 200]))
            except EmuError:
                break
            if core.parked:
                break
    assert kinds == {"python", "none", "stop", "local", "back"}


@pytest.mark.needs_cc
def test_spin_probe_on_kernel_matches_python(monkeypatch):
    """Every frozen wait loop of an elementwise kernel and a 2x2 matmul grid (semaphore peeks, CB counters, the
    causal-load rule's past reads as of the core's cycle): C's answer is rv32.py's, and C answers nearly all; the
    words C reads for _freeze (seen_at) are the tile's reference _peek_word's at that cycle."""
    probe = RV32Core.spin_reads
    answers = {"c": 0, "python": 0, "seen": 0}

    def both(core, seen_at=None):
        local = bytes(core._local)
        monkeypatch.setattr(rv32_native, "PROBE_NATIVE", False)
        want = probe(core, seen_at)
        monkeypatch.setattr(rv32_native, "PROBE_NATIVE", True)
        after, core._local[:] = bytes(core._local), local
        answer = core.native.spin_reads(core._probe[0].get("SBASE"), seen_at)
        if answer is not NotImplemented:
            if answer is not None and len(answer) == 3:
                assert seen_at is not None and answer[1] is None
                want = (*want, [core.bus._peek_word(core.name, a, n, seen_at) for a, n in want[0]])
                answers["seen"] += 1
            assert (answer, bytes(core._local)) == (want, after)
        answers["python" if answer is NotImplemented else "c"] += 1
        return want
    monkeypatch.setattr(RV32Core, "spin_reads", both)
    for plan, arrays in (kernel_case(which, 40) for which in KERNEL_CASES):
        elfs = compile_kernel(*split(plan.render()), plan.name)
        launch_plan(EmuDevice(), plan, arrays, elfs)
    assert answers["c"] > 20 * answers["python"] and answers["seen"] > answers["c"] // 2, answers


NIU_BASES = range(23, 31)              # x23..x30: the window of each NIU initiator (2 NoCs x 4), never written
NIU_VALUES = range(5, 12)             # x5..x11: the values stored
TRID = 13                             # x13: a PACKET_TAG value Niu.store accepts (trid bits only), never written


def _niu_program(rng: random.Random) -> list[int]:
    """Stores of random values to the NIUs' command registers, loads back, a loop, ALU work changing the values, and
    in two programs of three one store noc.py refuses or sends (a value outside PACKET_TAG's trid bits, a nonzero
    BRCST_EXCLUDE, NOC_AT_LEN_BE_1, a byte or halfword, a misaligned word, the send, CLEAR_OUTSTANDING)."""
    words: list[int] = []
    while len(words) < 120:
        k, base, value = rng.random(), rng.choice(NIU_BASES), rng.choice(NIU_VALUES)
        if k < 0.55:
            reg = rng.randrange(12)
            offset = 4 * reg if reg != 9 else 0x20                              # (not NOC_AT_LEN_BE_1)
            words.append(s_type(offset, {0x18: TRID, 0x2C: 0}.get(offset, value), base, 2))
        elif k < 0.70:
            words.append(i_type(4 * rng.randrange(12), base, 2, rng.choice(NIU_VALUES), op=0x03))
        elif k < 0.75:
            words += [i_type(-1, 12, 0, 12), s_type(0, 12, base, 2), b_type(-8, 0, 12, 1)]   # x12 times
        else:
            words.append(i_type(rng.randrange(-2048, 2048), value, rng.choice([0, 4, 6, 7]), value))
    if rng.random() < 2 / 3:
        value, base = rng.choice(NIU_VALUES), rng.choice(NIU_BASES)
        refused = rng.choice([s_type(0x18, value, base, 2), s_type(0x2C, value, base, 2), s_type(0x24, 0, base, 2),
                              s_type(4 * rng.randrange(12), value, base, rng.choice([0, 1])),
                              s_type(4 * rng.randrange(12) + 2, value, base, 2), s_type(0x40, value, base, 2),
                              s_type(0x60, value, base, 2), s_type(0x101, value, base, 2)])
        words.insert(rng.randrange(len(words)), refused)
    return words + [PARK]


def _niu_trace(words, seed: int, path: str, monkeypatch) -> list:
    """Quantum by quantum (budgets from `seed`): registers, pc, counts and both NIUs' registers and counters, up to an
    error. path: "python" (rv32.py), "handed back" (C, NIU stores handed back), "C" (C keeps them)."""
    monkeypatch.setattr(rv32_native, "NIU_STORES", path == "C")
    monkeypatch.setenv("TT_RV32_NATIVE", "0" if path == "python" else "1")
    tile = Tile()
    core = tile.cores["brisc"]
    assert (core.native is not None) == (path != "python")
    for i, w in enumerate(words):
        struct.pack_into("<I", tile.l1, CODE + 4 * i, w)
    rng = random.Random(seed)
    core.reset(CODE)
    core.x[1:] = [rng.getrandbits(32) for _ in range(31)]
    for r in NIU_VALUES:
        core.x[r] = rng.choice([core.x[r], 0, 1, 0xFFFF])
    core.x[TRID] = core.x[TRID] & 0x3C00
    core.x[12] = rng.randrange(1, 40)
    for j, r in enumerate(NIU_BASES):
        core.x[r] = layout.NOC_BASE[j // 4] + NIU_INITIATOR_STRIDE * (j % 4)
    out = []
    for _ in range(40):
        try:
            n = core.run(rng.choice([1, 2, 5, 63, 64, 200, 2000]))
        except EmuError as e:
            out.append((type(e).__name__, str(e), core.pc, core.instret, list(core.x)))
            break
        out.append((n, core.pc, core.instret, core.parked, list(core.x),
                    [(niu.regs.tolist(), dict(niu.counters), niu.stats()) for niu in tile.nius]))
        if core.parked:
            break
    return out


@pytest.mark.parametrize("chunk", range(2))
def test_niu_register_stores_match_python(chunk, monkeypatch):
    """Random NIU register traffic from BRISC on a tile: the stores C keeps (rv32_native.NIU_STORES), the same
    stores handed back to noc.py, and rv32.py alone leave the same registers, counters and errors after every
    quantum."""
    kinds = set()
    for seed in range(chunk * 40, chunk * 40 + 40):
        words = _niu_program(random.Random(seed))
        want = _niu_trace(words, seed, "python", monkeypatch)
        assert _niu_trace(words, seed, "handed back", monkeypatch) == want, f"seed {seed}"
        assert _niu_trace(words, seed, "C", monkeypatch) == want, f"seed {seed}"
        kinds.add(want[-1][0] if isinstance(want[-1][0], str) else "parked")
    assert "parked" in kinds and len(kinds) >= 3                  # programs that ran through, refusals of two kinds


@pytest.mark.parametrize("exits", [True, False])
def test_niu_command_registers_stay_in_c(exits, monkeypatch):
    """A loop filling NoC0 initiator 1's command registers hands nothing back; the send (NOC_CMD_CTRL) and a load of
    a register still go to Python (through the piece, or served by run() with rv32_native.MMIO_EXITS), which sees
    what C stored."""
    monkeypatch.setattr(rv32_native, "PYTHON_QUANTA", 0)
    monkeypatch.setattr(rv32_native, "MMIO_EXITS", exits)
    words = [s_type(4 * r, 5, NIU_BASES[1], 2) for r in (0, 1, 3, 4, 7, 8)] + [i_type(1, 5, 0, 5),
                                                                                b_type(-28, 8, 5, 1)]
    words += [i_type(0x20, NIU_BASES[1], 2, 6, op=0x03), PARK]
    tile = Tile()
    core = tile.cores["brisc"]
    for i, w in enumerate(words):
        struct.pack_into("<I", tile.l1, CODE + 4 * i, w)
    core.reset(CODE)
    core.x[5], core.x[8], core.x[NIU_BASES[1]] = 0, 500, layout.NOC_BASE[0] + NIU_INITIATOR_STRIDE
    asked = []
    piece = core.piece
    core.piece = lambda pc, n: asked.append((pc - CODE, n)) or piece(pc, n)
    while not core.parked:
        core.run(2000)
    assert asked == ([] if exits else [(4 * 8, 1)])
    assert tile.nius[0].regs[1].tolist() == [499, 499, 0, 499, 499, 0, 0, 499, 499, 0, 0, 0] and core.x[6] == 499


@pytest.mark.parametrize("entry_c", [True, False])
def test_direct_push_error_mid_run_matches_pushers(entry_c, monkeypatch):
    """A TRISC's run of `.ttinsn` words whose fourth raises (a SEMPOST past the semaphore's maximum), handed to
    plain_run by C itself (rv32_native.DIRECT_PUSH; through plain_run's C entry or its Python-callable:
    sfpu_issue_native.PLAIN_ENTRY_NATIVE) and through the tile's pusher: the same error, pc at the culprit,
    instructions retired, core stall, push counts, Tensix state; C took the run (no pusher call)."""
    run = (isa.encode("SEMINIT", sem_sel=1, init_value=0, max_value=1), isa.encode("SETDMAREG", reg_index_16b=3,
           payload=7), isa.encode("SEMPOST", sem_sel=1), isa.encode("SEMPOST", sem_sel=1), isa.encode("NOP"))
    monkeypatch.setattr(sfpu_issue_native, "PLAIN_ENTRY_NATIVE", entry_c)
    results = []
    for direct in (True, False):
        monkeypatch.setattr(rv32_native, "DIRECT_PUSH", direct)
        tile = Tile()
        capsule = tile._direct_push("trisc0")[0]
        assert ctypes.pythonapi.PyCapsule_IsValid(ctypes.py_object(capsule), b"sfpu_issue.plain_run_c") == entry_c
        core = tile.cores["trisc0"]
        for i, w in enumerate([ttinsn(x) for x in run] + [PARK]):
            struct.pack_into("<I", tile.l1, CODE + 4 * i, w)
        core.reset(CODE)
        for w in run:                   # as push_run records them at a first push (C takes only words with facts)
            tile.tensix._plain[w] = tile.tensix._plain_facts(w)
        pushers, multi = [], core._ns["PUSHM"]
        core.set_pusher("PUSHM", lambda pos, words: pushers.append(words) or multi(pos, words))
        with pytest.raises(EmuError, match="SEMPOST") as e:
            core.run(2000)
        results.append((str(e.value), core.pc - CODE, core.instret, core.sub, tile.tensix.pm_done, tile.tensix.pm_t,
                        tile.stats()))
        assert bool(pushers) != direct
    assert results[0] == results[1] and results[0][1:4] == (12, 3, 3)


def test_write_log_lookups_match_python():
    """The causal-load rule's lookups in C (causal_log.h) against tile.py's numpy ones, the reference: random stores
    from cores at interleaved cycles to a few lines (words and bytes), NoC writes stamping some lines later, the ring
    before and after it wraps; every word size at random cycles."""
    rng = random.Random(12)
    tile = Tile()
    assert tile._log_lookups is not None and tile.l1_at is tile._log_lookups.l1_at      # C answers
    lines = [0x4000 + 16 * i for i in range(6)]
    past, unknown = 0, 0
    for count in (700, 1100, 2600):
        while int(tile.l1_log_n[0]) < count:
            addr, cycle = rng.choice(lines) + rng.randrange(16), rng.randrange(20_000)
            if rng.random() < 0.02:
                tile.stamp_l1(addr & ~15, 16, cycle)                 # a NoC write: not in the log
                continue
            tile.l1_stamp[addr >> STAMP_SHIFT] = cycle
            tile._log_write(addr, cycle)
            tile.l1_array[addr] = rng.randrange(256)
        for _ in range(400):
            n = rng.choice((1, 2, 4))
            addr, cycle = rng.choice(lines) + n * rng.randrange(16 // n), rng.randrange(rng.choice((50, 21_000)))
            expected = Tile.l1_at(tile, addr, n, cycle)
            past += expected is not None and expected != tile.l1_array[addr:addr + n].tobytes()
            unknown += expected is None
            assert tile.l1_at(addr, n, cycle) == expected, (addr, n, cycle)
            assert tile.first_write_after(addr, cycle) == Tile.first_write_after(tile, addr, cycle)
        # a frozen core's words (_peek_words: L1 in C, a semaphore through peek) as _peek_word reads them one by one
        reads = [(rng.choice(lines) + 4 * rng.randrange(4), 4) for _ in range(rng.randrange(1, 6))]
        reads += [(rng.choice(lines) + rng.randrange(16), 1), (layout.SEMAPHORE_BASE + 4 * rng.randrange(8), 4)]
        for cycle in (None, 0, 50, 9_000, 21_000):
            for who in ("trisc1", "brisc"):
                assert tile._peek_words(who, reads, cycle) == [tile._peek_word(who, a, n, cycle) for a, n in reads]
    assert past > 100 and unknown > 10        # past values reconstructed, and the log's unknowns (NoC writes, wraps)



def test_thaw_matches_python(monkeypatch):
    """A frozen core's thaw test in C (Tile._thaw, THAW_NATIVE) against _thaw_in_python, the reference: wait loops of
    1-6 L1 reads (words, halves, bytes) and now and then a Tensix semaphore, frozen at a random cycle, then RISC-V
    stores logged before and after it, NoC writes stamping lines, semaphores changed, the ring wrapping; from each
    state the same answer, resume cycle and frozen set, and a core that stays frozen asked again at once (the key's
    quick answer) stays frozen on both. A register peek answers with something else than an int goes to Python
    (NotImplemented)."""
    rng = random.Random(31)
    tile = Tile()
    assert tile._log_lookups is not None
    lines = [0x6000 + 16 * i for i in range(5)]
    outcomes = {"frozen": 0, "changed": 0, "later store": 0}
    with_semaphore = {False: 0, True: 0}                # loops reading a semaphore: staying frozen, thawed

    def write(lo: int, hi: int) -> None:
        addr, cycle = rng.choice(lines) + rng.randrange(16), rng.randrange(lo, hi)
        if rng.random() < 0.05:
            tile.stamp_l1(addr & ~15, 16, cycle)                     # a NoC write: not in the log
            return
        tile.l1_stamp[addr >> STAMP_SHIFT] = max(int(tile.l1_stamp[addr >> STAMP_SHIFT]), cycle)
        tile._log_write(addr, cycle)
        tile.l1_array[addr] = rng.randrange(4)                      # few values: writes that change nothing too

    def ask(in_c: bool, state: tuple) -> tuple:
        frozen, stall, key = state
        tile._frozen["trisc0"], tile._stall["trisc0"] = frozen, stall
        tile._thaw_key.pop("trisc0", None)
        if key is not None:
            tile._thaw_key["trisc0"] = key
        monkeypatch.setattr(tile_module, "THAW_NATIVE", in_c)
        answers = [tile._thaw("trisc0")]
        if not answers[0]:
            answers.append(tile._thaw("trisc0"))                   # nothing written since: the quick answer
        return answers, tile._stall["trisc0"], "trisc0" in tile._frozen

    for case in range(600):
        now = 5000 + 1000 * case                 # emulated time moves on, as in a run: the cores near each other
        for _ in range(rng.randrange(1, 12)):
            write(max(now - 3000, 0), now + 500)
        reads = []
        for _ in range(rng.randrange(1, 7)):
            n = rng.choice((1, 2, 4))
            reads.append((rng.choice(lines) + n * rng.randrange(16 // n), n))
        if rng.random() < 0.4:
            reads.insert(rng.randrange(len(reads) + 1), (layout.SEMAPHORE_BASE + 4 * rng.randrange(2), 4))
        stall = now - tile.cycles("trisc0") + tile._stall["trisc0"]
        tile._stall["trisc0"] = stall
        frozen = (reads, tile._peek_words("trisc0", reads, tile.cycles("trisc0")))
        for _ in range(rng.randrange(0, 8)):
            write(now - 2500, now + 1000)
        if rng.random() < 0.2:
            tile.tensix.sem_value[rng.randrange(2)] ^= 1
        c, py = ask(True, (frozen, stall, None)), ask(False, (frozen, stall, None))
        assert c == py, (case, reads)
        outcome = "frozen" if c[2] else "changed" if c[1] == stall else "later store"
        outcomes[outcome] += 1
        if any(a >= layout.L1_SIZE for a, _ in reads):
            with_semaphore[outcome != "frozen"] += 1
    assert min(outcomes.values()) > 20, outcomes
    assert min(with_semaphore.values()) > 20, with_semaphore
    reads = [(lines[0], 4), (layout.SEMAPHORE_BASE, 4)]
    assert tile._log_lookups.thaw(reads, [b"", 0], 0, None, lambda who, a: 1.5, "trisc0") is NotImplemented

def test_register_table_reads_as_peek(monkeypatch):
    """C's thaw and spin probe read a TRISC's semaphores from the Tile's table (Tile.reg_peek, SEM_PEEK_NATIVE) as
    Tile.peek answers them: inside the window (an aligned word or not), just outside it, elsewhere in MMIO, for each
    core; the table's semaphores are the Tensix's own list (a post shows at once); a malformed table raises."""
    tile = Tile()
    tile.tensix.sem_value[:] = [3, 0, 7, 1, 15, 2, 0, 9]
    thaw = tile._log_lookups.thaw
    base, end = layout.SEMAPHORE_BASE, layout.SEMAPHORE_BASE + 4 * tile_module.N_SEMAPHORES
    addrs = [base - 4, base, base + 1, base + 4, base + 30, end - 4, end - 1, end, 0xFFB12000, 0xFFFFFFFC]
    tables = 0
    for who in tile.cores:
        table = tile.reg_peek(who)
        tables += isinstance(table, tuple)
        for addr in addrs:
            for seen in (tile.peek(who, addr), 0, None):
                assert thaw([(addr, 4)], [seen], 0, None, table, who) == thaw([(addr, 4)], [seen], 0, None,
                                                                              tile.peek, who), (who, hex(addr))
        tile.tensix.sem_value[0] += 1
        assert thaw([(base, 4)], [tile.peek(who, base)], 0, None, table, who)[1] is None
    assert tables == len(tile.cores)
    for bad in ((base, 8), (base, 9, tile.tensix.sem_value), ("base", 8, None), (base, 8, (0,) * 8)):
        with pytest.raises(TypeError):
            thaw([(base, 4)], [0], 0, None, bad, "trisc0")
    monkeypatch.setattr(tile_module, "SEM_PEEK_NATIVE", False)
    assert Tile().reg_peek("trisc0").__func__ is Tile.peek


def _same_with_and_without_c(plan, arrays, monkeypatch) -> None:
    """The kernel on C making the bus calls, answering causal loads from the write log and pushing to plain_run itself;
    then C making the bus calls, with those loads handed back to tile.py's past() (rv32_native.CAUSAL_NATIVE), every
    push through the tile's pushers (DIRECT_PUSH), frozen loops probed by rv32.py (PROBE_NATIVE), semaphore loads
    through the bus (SEM_LOADS_NATIVE), TTSync loads and stores and semaphore stores too (PCBUF_NATIVE), NIU response
    counter and NOC_CMD_CTRL loads through the bus (NIU_LOADS_NATIVE), sends through the bus and timed in Python
    (noc_native.ISSUE_NATIVE), runs of pushes cut at block starts (JOINED_RUNS_NATIVE) and all given to the pushers
    (DIRECT_MANY_NATIVE), every word's facts looked up (NEVER_PLAIN_NATIVE), each run's tuple built anew
    (KEPT_RUNS_NATIVE), TTSync loads asking the Tensix's thread_idle and thread_done (TTSYNC_NATIVE), the tile's attributes read
    at every load C serves (set_tile_memo(False)), the stamp base after a bus call asked of its lambda
    (set_own_base(False)), every register read from its object (set_regs_memo(False)), the cores', runners' and tile's
    hot attributes by name (set_slots(False)), their tbase and stall read at every read (set_cycles_memo(False)), every word's facts looked up
    (set_takes_memo(False)), frozen cores' words read one by one (tile.PEEK_NATIVE) and their thaw test in Python
    (tile.THAW_NATIVE); C's pieces; Python: the same bytes and cycles. With C answering and pushing, past(), the
    Tensix's push_run (whose plain_run calls C now makes), _pcbuf_load, _niu_load and _niu_store are called less: the
    reference calls them, so the rule, the pushes, the semaphore loads, the NIU polls and the sends are exercised."""
    elfs = compile_kernel(*split(plan.render()), plan.name)
    runs, calls, loader, push_run = {}, {}, Tile._past_loader, DirectIssueMixin.push_run

    def count(what: str) -> None:
        calls[key][what] += 1

    def counted_loader(self, who):
        past, wait = loader(self, who)
        return (lambda *a: count("past") or past(*a)), wait
    monkeypatch.setattr(Tile, "_past_loader", counted_loader)
    monkeypatch.setattr(DirectIssueMixin, "push_run", lambda self, *a: count("push_run") or push_run(self, *a))
    pcbuf = Tile._pcbuf_load
    monkeypatch.setattr(Tile, "_pcbuf_load", lambda self, *a: count("pcbuf") or pcbuf(self, *a))
    niu_load = Tile._niu_load
    monkeypatch.setattr(Tile, "_niu_load", lambda self, *a: count("niu") or niu_load(self, *a))
    niu_store = Tile._niu_store
    monkeypatch.setattr(Tile, "_niu_store", lambda self, *a: count("send") or niu_store(self, *a))
    for key in (("1", True, True), ("1", True, False), ("1", False, False), ("0", False, False)):
        env, exits, in_c = key
        monkeypatch.setenv("TT_RV32_NATIVE", env)
        monkeypatch.setattr(rv32_native, "MMIO_EXITS", exits)
        monkeypatch.setattr(rv32_native, "CAUSAL_NATIVE", in_c)
        monkeypatch.setattr(rv32_native, "DIRECT_PUSH", in_c)
        monkeypatch.setattr(rv32_native, "PROBE_NATIVE", in_c)
        monkeypatch.setattr(rv32_native, "SEM_LOADS_NATIVE", in_c)
        monkeypatch.setattr(rv32_native, "NIU_LOADS_NATIVE", in_c)
        monkeypatch.setattr(rv32_native, "PCBUF_NATIVE", in_c)
        monkeypatch.setattr(rv32_native, "SEM_STORES_NATIVE", in_c)
        monkeypatch.setattr(rv32_native, "JOINED_RUNS_NATIVE", in_c)
        monkeypatch.setattr(rv32_native, "DIRECT_MANY_NATIVE", in_c)
        monkeypatch.setattr(rv32_native, "NEVER_PLAIN_NATIVE", in_c)
        monkeypatch.setattr(rv32_native, "KEPT_RUNS_NATIVE", in_c)
        monkeypatch.setattr(rv32_native, "TTSYNC_NATIVE", in_c)
        rv32_native.set_tile_memo(in_c)
        rv32_native.set_own_base(in_c)
        rv32_native.set_regs_memo(in_c)
        rv32_native.set_slots(in_c)
        rv32_native.set_cycles_memo(in_c)
        rv32_native.set_takes_memo(in_c)
        monkeypatch.setattr(noc_native, "ISSUE_NATIVE", in_c)
        monkeypatch.setattr(tile_module, "PEEK_NATIVE", in_c)
        monkeypatch.setattr(tile_module, "THAW_NATIVE", in_c)
        monkeypatch.setattr(tile_module, "SEM_PEEK_NATIVE", in_c)
        calls[key] = {"past": 0, "push_run": 0, "pcbuf": 0, "niu": 0, "send": 0}
        dev = EmuDevice()
        out = [launch_plan(dev, plan, arrays, elfs)[0] for _ in range(2)]      # a warm device relaunched too
        attached = {core.native is not None for tile in dev.chip.tiles.values() for core in tile.cores.values()}
        assert attached == {env == "1"}
        runs[key] = (out, dev.stats())
    rv32_native.set_tile_memo(True)
    rv32_native.set_own_base(True)
    rv32_native.set_regs_memo(True)
    rv32_native.set_slots(True)
    rv32_native.set_cycles_memo(True)
    rv32_native.set_takes_memo(True)
    first, *rest = runs.values()
    assert all(r == first for r in rest)
    c, reference = calls["1", True, True], calls["1", True, False]
    assert c["past"] < reference["past"] and c["push_run"] < reference["push_run"], calls
    assert c["pcbuf"] < reference["pcbuf"] and c["niu"] < reference["niu"], calls
    assert c["send"] < reference["send"], calls


@pytest.mark.needs_cc
def test_gather_kernel_identical(monkeypatch):
    """x.gather(1, i): the reader fetches each element at a loaded index (per-element NoC reads and index math)."""
    rng = np.random.default_rng(7)
    x = Tensor.empty(6, 50, device="CPU")
    i = Tensor.empty(6, 37, device="CPU", dtype="int32")
    call = [c for c in x.gather(1, i).schedule_linear().src if c.op is Ops.CALL][-1]
    plan = lower(call.src[0], "gather_native")
    arrays = {b.slot: (rng.integers(-60, 60, b.nbytes // 4).astype(np.int32) if b.dtype == "int32" else
                       rng.standard_normal(b.nbytes // 4).astype(np.float32)) for b in plan.buffers}
    _same_with_and_without_c(plan, arrays, monkeypatch)


@pytest.mark.needs_cc
def test_elementwise_kernel_identical(monkeypatch):
    _same_with_and_without_c(*kernel_case("elementwise", 40), monkeypatch)


@pytest.mark.needs_cc
def test_matmul_grid_identical(monkeypatch):
    """bf16 64^3 on a 2x2 grid: semaphores and NoC multicast between tiles, cores polling each other."""
    _same_with_and_without_c(*kernel_case("matmul_grid", 0), monkeypatch)


@pytest.mark.needs_cc
@pytest.mark.parametrize("kernel", KERNEL_CASES)
def test_own_stamp_base_matches_the_lambda(kernel, monkeypatch):
    """The stamp base C's run() computes itself after a bus call (rv32_native.set_own_base: refresh_t0 with the
    round's tbase + instret + stall where the core's stamp base is the tile's own lambda) against calling that lambda
    (the reference): the same output, stats and L1 line stamps of every tile (the stores after a bus call stamp their
    lines with it), and C computed it: the lambdas are called less."""
    plan, arrays = kernel_case(kernel, 41)
    elfs = compile_kernel(*split(plan.render()), plan.name)
    runs, called = {}, {}
    stamper = Tile._stamper

    def counted_stamper(self, who):
        stamp, stamps, base = stamper(self, who)
        counted = self._stamp_bases[who] = lambda: called.__setitem__(on, called[on] + 1) or base()
        return stamp, stamps, counted
    monkeypatch.setattr(Tile, "_stamper", counted_stamper)
    try:
        for on in (True, False):
            rv32_native.set_own_base(on)
            called[on] = 0
            dev = EmuDevice()
            out = [launch_plan(dev, plan, arrays, elfs)[0] for _ in range(2)]
            stamps = {xy: tile.l1_stamp.copy() for xy, tile in dev.chip.tiles.items()}
            runs[on] = (out, dev.stats(), stamps)
    finally:
        rv32_native.set_own_base(True)
    assert runs[True][:2] == runs[False][:2]
    assert runs[True][2].keys() == runs[False][2].keys()
    assert all(np.array_equal(runs[True][2][k], runs[False][2][k]) for k in runs[True][2])
    assert called[False] > called[True], called


def _pcbuf_program() -> dict[str, list[int]]:
    """TRISC1: SEMINIT and SEMWAIT on semaphore 1 and an SFPNOP pushed, a TTSync store and load (the load waits: its
    thread is blocked until the post), a semaphore 1 load, park. TRISC0: a delay loop, RISC-V stores to semaphore 1: a post, a
    SEMGET and a post again, park."""
    r, sem1 = bench.ttinsn, layout.SEMAPHORE_BASE + 4
    t1 = [r(isa.encode("SEMINIT", sem_sel=2, init_value=0, max_value=15)),
          r(isa.encode("SEMWAIT", sem_sel=2, wait_sem_cond=1, stall_res=1 << 8)), r(isa.encode("SFPNOP"))]
    t1 += bench.li(9, layout.TENSIX_SYNC) + [bench.sw(0, 9, 0), bench.i_type(0, 9, 2, 10, 0x03)]
    t1 += bench.li(11, sem1) + [bench.i_type(0, 11, 2, 12, 0x03), bench.J_SELF]
    t0 = bench.li(5, 300) + [bench.i_type(-1, 5, 0, 5, 0x13), bench.b_type(-4, 0, 5, 1)] + bench.li(6, sem1)
    t0 += bench.li(7, 1)
    t0 += [bench.sw(0, 6, 0), bench.sw(7, 6, 0), bench.sw(0, 6, 0), bench.J_SELF]
    return {"trisc1": t1, "trisc0": t0}


@pytest.mark.needs_cc
def test_pcbuf_accesses_in_c_match_the_bus(monkeypatch):
    """A TRISC's TTSync loads and stores and semaphore stores made in C (rv32_native.PCBUF_NATIVE: ttsync_load, with
    its Stall while the thread waits on a semaphore, and pcbuf_store) against the bus calls (_pcbuf_load /
    _pcbuf_store, the reference): the same registers, pcs, instructions, stall cycles, waits and tile.stats() after
    every step of a tile run in small steps, and C made them."""
    calls = {True: 0, False: 0}
    load, store = Tile._pcbuf_load, Tile._pcbuf_store
    monkeypatch.setattr(Tile, "_pcbuf_load", lambda self, *a: calls.__setitem__(on, calls[on] + 1) or load(self, *a))
    monkeypatch.setattr(Tile, "_pcbuf_store", lambda self, *a: calls.__setitem__(on, calls[on] + 1) or store(self, *a))
    traces = []
    for on in (True, False):
        monkeypatch.setattr(rv32_native, "PCBUF_NATIVE", on)
        tile = Tile(quantum=40)
        bench.launch_words(tile, _pcbuf_program())
        trace, waited = [], False
        for _ in range(200):
            n = tile.run(60)
            waited |= "TTSync" in tile._wait["trisc1"]
            trace.append((n, {k: (c.pc, c.instret, list(c.x)) for k, c in tile.cores.items()}, dict(tile._wait),
                          dict(tile._stall), tile.stats()))
            if not any(tile.running(k) for k in layout.CORES):
                break
        assert waited and tile.cores["trisc1"].x[12] == 1 and tile.cores["trisc1"].parked
        traces.append(trace)
    assert traces[0] == traces[1]
    assert calls[False] >= 5 and calls[True] == 0, calls


def _pcbuf_trace(tile: Tile, swaps: dict[int, Callable[[Tile], None]] = {}, program=_pcbuf_program) -> list:
    """program()'s tile run in small steps, swaps[k](tile) made before step k: per step the instructions run, each
    core's pc, instret and registers, the waits, the stalls and tile.stats()."""
    bench.launch_words(tile, program())
    trace = []
    for k in range(200):
        if k in swaps:
            swaps[k](tile)
        n = tile.run(60)
        trace.append((n, {k: (c.pc, c.instret, list(c.x)) for k, c in tile.cores.items()}, dict(tile._wait),
                      dict(tile._stall), tile.stats()))
        if not any(tile.running(k) for k in layout.CORES):
            break
    return trace


@pytest.mark.needs_cc
@pytest.mark.parametrize("state", ["as_run", "macro", "sfpu_late", "work_late"])
def test_ttsync_queries_in_c_match_the_methods(state, monkeypatch):
    """A TTSync load's thread_idle and thread_done answered by C (rv32_native.TTSYNC_NATIVE: ttsync_load ->
    thread_idle from the thread's queues, thread_done from the cycle model's clock, work_done and SFPU busy-until)
    against the Tensix's methods (the reference): the same trace step by step (_pcbuf_trace), the load waiting while
    the thread is blocked. C asks neither method then; methods the Tensix's class overrides (spies) are called by C
    again, with the same trace. Each term of thread_done decides in one `state`: the SFPU's busy-until set late (its
    bound clock + 2 then counts), thread 1's work_done set late, or thread 1 marked as having issued an SFPLOADMACRO
    (its SFPU part then the whole SFPU's busy-until: C leaves thread_done to the method, which asks sfpu_busy as often
    as the reference does)."""
    asked = []
    idle, done, sfpu_busy = Tensix.thread_idle, Tensix.thread_done, TensixTiming.sfpu_busy
    monkeypatch.setattr(TensixTiming, "sfpu_busy", lambda self: asked.append((key, "sfpu_busy")) or sfpu_busy(self))
    traces = {}
    for key in ("reference", "in_c", "spied"):
        monkeypatch.setattr(rv32_native, "TTSYNC_NATIVE", key != "reference")
        spied = key != "in_c"
        monkeypatch.setattr(Tensix, "thread_idle", (lambda self, t: asked.append((key, "idle")) or idle(self, t))
                            if spied else idle)
        monkeypatch.setattr(Tensix, "thread_done", (lambda self, t: asked.append((key, "done")) or done(self, t))
                            if spied else done)
        tile = Tile(quantum=40)
        tm = tile.tensix.tm
        if state == "macro":
            tm.macro_threads = 0b10
        elif state == "sfpu_late":
            tm.sfpu.busy_until = 5000
        elif state == "work_late":
            tm.work_done[1] = 3000
        traces[key] = _pcbuf_trace(tile)
        assert "TTSync" in str([step[2] for step in traces[key]]) and tile.cores["trisc1"].x[12] == 1
    assert traces["in_c"] == traces["reference"] == traces["spied"]
    by = {(k, what): sum(1 for a in asked if a == (k, what)) for k in traces for what in ("idle", "done", "sfpu_busy")}
    assert by["in_c", "idle"] == by["in_c", "done"] == 0, by
    assert by["reference", "idle"] >= 2 and by["reference", "done"] >= 1, by
    assert all(by["spied", w] >= by["reference", w] for w in ("idle", "done")), str(by)   # (the round asks the spy too)
    assert by["in_c", "sfpu_busy"] == by["reference", "sfpu_busy"], by


@pytest.mark.needs_cc
def test_tile_memo_follows_the_tiles_attributes(monkeypatch):
    """The memo of the tile's attributes C's loads read (rv32_native.set_tile_memo: load_timing's rec and _latency_of)
    against reading them at every load: the same trace step by step while _latency_of is swapped mid-run for a dict
    without the cores (the loads then pay no MMIO latency: a trace that differs from one without the swap, so the
    memo must follow it) and back, on a tile of a subclass too; a subclass whose `rec` is a class attribute is read by
    attribute (the memo declines) with the same trace."""
    swaps = {3: lambda t: setattr(t, "_latency_of", {}), 9: lambda t: setattr(t, "_latency_of", t._stall)}

    class Sub(Tile):
        pass

    class ClassRec(Tile):
        rec = None

    traces = {}
    try:
        for memo in (True, False):
            rv32_native.set_tile_memo(memo)
            for cls in (Tile, Sub, ClassRec):
                traces[memo, cls] = _pcbuf_trace(cls(quantum=40), swaps)
        plain = _pcbuf_trace(Tile(quantum=40))
    finally:
        rv32_native.set_tile_memo(True)
    first = traces[False, Tile]
    assert all(t == first for t in traces.values())
    assert plain != first


def _sem_program() -> dict[str, list[int]]:
    """TRISC1: SEMINIT of semaphore 1 (value 3, Max 9), a delay, its value loaded into x12, a longer delay, loaded again
    into x13. TRISC0: a delay, RISC-V stores to semaphore 1: two posts and a SEMGET, each after a delay, park."""
    r, sem1 = bench.ttinsn, layout.SEMAPHORE_BASE + 4
    delay = lambda reg, n: bench.li(reg, n) + [bench.i_type(-1, reg, 0, reg, 0x13), bench.b_type(-4, 0, reg, 1)]  # noqa: E731
    t1 = [r(isa.encode("SEMINIT", sem_sel=2, init_value=3, max_value=9))] + bench.li(11, sem1) + delay(5, 400)
    t1 += [bench.i_type(0, 11, 2, 12, 0x03)] + delay(5, 900) + [bench.i_type(0, 11, 2, 13, 0x03), bench.J_SELF]
    t0 = delay(5, 200) + bench.li(6, sem1) + bench.li(7, 1) + [bench.sw(0, 6, 0)] + delay(5, 100)
    t0 += [bench.sw(0, 6, 0)] + delay(5, 100) + [bench.sw(7, 6, 0), bench.J_SELF]
    return {"trisc1": t1, "trisc0": t0}


_NAMED_READS = [0]      # reads of the counted properties below (C must read those attributes by name)


def _counted(name: str) -> property:
    """A property over the instance dict (key `name_`) whose reads _NAMED_READS counts."""
    key = name + "_"

    def get(self):
        _NAMED_READS[0] += 1
        return self.__dict__[key]

    def put(self, v):
        self.__dict__[key] = v
    return property(get, put)


class _NamedCore(RV32Core):
    """A core whose instret and spinning are properties over its dict, counted: names C must read by name."""
    instret = _counted("instret")
    spinning = _counted("spinning")


class _ClassClockTile(Tile):
    """A tile whose clock is a property over its dict, counted (C must read and write it by name)."""
    clock = _counted("clock")


class _NamedSemTensix(Tensix):
    """A Tensix whose semaphore values are a property over its dict, counted (C must read them by name)."""
    sem_value = _counted("sem_value")


def _named_cores(tile: Tile) -> Tile:
    """tile with its cores made _NamedCore (the same layout: their state carried over)"""
    for core in tile.cores.values():
        was = core.instret, core.spinning
        core.__class__ = _NamedCore
        core.instret, core.spinning = was
    return tile


@pytest.mark.needs_cc
def test_slots_match_attributes_by_name():
    """The hot attributes C reads and writes at their members' offsets (rv32_native.set_slots: slot_at; RV32Core's pc,
    instret, pos, sub, parked, spinning, NativeRun's python_quanta, past_in_c, calls, Tile's soft_reset, clock, the
    Tensix's semaphores, strict, pm_done, pm_t) against PyObject_GetAttr / SetAttr by name (the reference): the same
    trace step by step (_pcbuf_trace: pcs, instret, registers, waits, stalls, stats), with a TTSync load waiting,
    semaphore loads and stores and pushes (_pcbuf_program), and a semaphore whose value and Max differ loaded as RISC-V
    stores post and get it (_sem_program). Where a subclass makes instret and spinning (the cores), clock (the tile)
    or sem_value (the Tensix) properties, C declines the members and goes by name (the properties are read) with the
    same trace, and the plain classes again after that (the memo follows the class)."""
    traces, reads = {}, {}
    try:
        for on in (True, False):
            rv32_native.set_slots(on)
            for kind in ("plain", "named", "class_clock", "named_sems", "plain_again"):
                _NAMED_READS[0] = 0
                tile = (_ClassClockTile(quantum=40) if kind == "class_clock" else
                        Tile(_NamedSemTensix, quantum=40) if kind == "named_sems" else Tile(quantum=40))
                traces[on, kind] = _pcbuf_trace(_named_cores(tile) if kind == "named" else tile)
                reads[on, kind] = _NAMED_READS[0]
                tile = Tile(_NamedSemTensix, quantum=40) if kind == "named_sems" else Tile(quantum=40)
                traces[on, kind, "sems"] = _pcbuf_trace(tile, program=_sem_program)
    finally:
        rv32_native.set_slots(True)
    first, sems = traces[False, "plain"], traces[False, "plain", "sems"]
    assert len(first) > 3 and all(t == first for k, t in traces.items() if len(k) == 2)
    assert all(t == sems for k, t in traces.items() if len(k) == 3)
    x = sems[-1][1]["trisc1"][2]
    assert (x[12], x[13]) == (5, 4), (x[12], x[13])     # (3, two posts, then a get: the value read, not the Max)
    assert reads[True, "named"] > 100 and reads[True, "class_clock"] > 10 and reads[True, "named_sems"] > 2, reads
    assert all(reads[True, k] == reads[False, k] for k in ("named", "class_clock", "named_sems")), reads


@pytest.mark.needs_cc
def test_cycles_memo_follows_the_dicts():
    """The round loop's kept tbase and stall values and the bus calls' last stall (rv32_native.set_cycles_memo:
    cycles_memo and stall_in, by the dicts' version tags) against the dicts read at every read (the reference): the
    same trace step by step (_pcbuf_trace) while
    Python adds stall to TRISC0 and moves TRISC1's tbase between steps (a trace that differs from one without those
    writes, so the memo must follow them), and without such writes."""
    def bump(d: str, core: str, by: int):
        return lambda t: getattr(t, d).__setitem__(core, getattr(t, d)[core] + by)
    swaps = {2: bump("_stall", "trisc0", 70), 4: bump("_tbase", "trisc1", 55), 6: bump("_stall", "trisc1", 30)}
    traces = {}
    try:
        for memo in (True, False):
            rv32_native.set_cycles_memo(memo)
            traces[memo] = _pcbuf_trace(Tile(quantum=40), swaps), _pcbuf_trace(Tile(quantum=40))
    finally:
        rv32_native.set_cycles_memo(True)
    assert traces[True] == traces[False]
    assert traces[True][0] != traces[True][1] and len(traces[True][0]) > 6


def _plain_loop_program() -> dict[str, list[int]]:
    """TRISC1: 200 turns of a loop pushing a SETDMAREG and a NOP (plain words: plain_run takes them), then spin."""
    r = bench.ttinsn
    body = [r(isa.encode("SETDMAREG", reg_index_16b=3, payload=7)), r(isa.encode("NOP"))]
    t1 = bench.li(5, 200) + body + [bench.i_type(-1, 5, 0, 5, 0x13), bench.b_type(-4 * (len(body) + 1), 0, 5, 1)]
    return {"trisc1": t1 + [bench.J_SELF]}


@pytest.mark.needs_cc
def test_takes_memo_follows_the_facts(monkeypatch):
    """plain_takes' kept answers (rv32_native.set_takes_memo: takes_memo, by the words' values and the facts dict's
    version tag) against a look-up of every word (the reference), _plain_loop_program in small steps (_pcbuf_trace): the
    same trace where the facts dict is emptied (the words then go to the pusher, which records them again) or its
    SEMWAIT's facts marked as an MVMUL's between steps, and the pusher called as often."""
    pushed = {}
    pusher = Tile._multi_pusher

    def counted(self, who):
        push = pusher(self, who)
        return lambda *a: pushed.__setitem__(key, pushed[key] + 1) or push(*a)
    monkeypatch.setattr(Tile, "_multi_pusher", counted)

    def mvmul(t: Tile) -> None:
        facts = t.tensix._plain
        for w, rec in list(facts.items()):
            if isinstance(rec, tuple):
                facts[w] = ("MVMUL",) + rec[1:]
    swaps = {2: lambda t: t.tensix._plain.clear(), 4: mvmul, 7: lambda t: t.tensix._plain.clear()}
    traces = {}
    try:
        for key in ((True, True), (False, True), (True, False), (False, False)):
            rv32_native.set_takes_memo(key[0])
            pushed[key] = 0
            traces[key] = _pcbuf_trace(Tile(quantum=40), swaps if key[1] else {}, _plain_loop_program)
    finally:
        rv32_native.set_takes_memo(True)
    assert traces[True, True] == traces[False, True] and traces[True, False] == traces[False, False]
    assert pushed[True, True] == pushed[False, True] and pushed[True, False] == pushed[False, False], pushed
    assert pushed[True, True] != pushed[True, False] and len(traces[True, True]) > 8, pushed


def _sfpu_run_program(bad: bool) -> dict[str, list[int]]:
    """TRISC1: SEMINIT, a SEMWAIT on semaphore 2 that blocks its thread, then a run of 108 SFPU words (12 exp2 rows;
    its FIFO fills while the thread waits: the push Stalls), with `bad` an unknown opcode as its 51st word; a TTSync
    store and load, park. TRISC0: a delay loop, then a RISC-V post to semaphore 2, park."""
    r, sem2 = bench.ttinsn, layout.SEMAPHORE_BASE + 8
    body = bench.exp2_body() * 12
    if bad:
        body[50] = 0xBF000000
    t1 = [r(isa.encode("SEMINIT", sem_sel=4, init_value=0, max_value=15)),
          r(isa.encode("SEMWAIT", sem_sel=4, wait_sem_cond=1, stall_res=1 << 8))] + [r(w) for w in body]
    t1 += bench.li(9, layout.TENSIX_SYNC) + [bench.sw(0, 9, 0), bench.i_type(0, 9, 2, 10, 0x03), bench.J_SELF]
    t0 = bench.li(5, 300) + [bench.i_type(-1, 5, 0, 5, 0x13), bench.b_type(-4, 0, 5, 1)] + bench.li(6, sem2)
    t0 += bench.li(7, 1) + [bench.sw(0, 6, 0), bench.J_SELF]
    return {"trisc1": t1, "trisc0": t0}


@pytest.mark.needs_cc
@pytest.mark.parametrize("bad", [False, True])
def test_direct_many_matches_the_pusher(bad, monkeypatch):
    """The SFPU runs plain_run leaves, handed by C to the Tensix's push_many itself (rv32_native.DIRECT_MANY_NATIVE:
    direct_many) and through the tile's PUSHM pusher (the reference), in small steps: the same registers, pcs,
    instructions, stall cycles, waits (the FIFO-full Stall), Tensix push counts, pm_done / pm_t, tile.stats() after
    every step, and with `bad` the same error at the same word. C called the pusher only with the switch off, or where
    the core's PUSHM was replaced."""
    calls = {}
    multi = Tile._multi_pusher

    def counted(self, who):                  # the tile's own pusher, counted
        push = multi(self, who)

        def pusher(pos, words):
            calls[key] += 1
            return push(pos, words)
        self._many_pushers[who] = pusher, self._many_pushers[who][1]
        return pusher
    monkeypatch.setattr(Tile, "_multi_pusher", counted)
    traces = {}
    for key in ("C", "pusher", "replaced"):
        monkeypatch.setattr(rv32_native, "DIRECT_MANY_NATIVE", key != "pusher")
        calls[key] = 0
        tile = Tile(quantum=40)
        tile.tensix.dst.write_rows32(0, bench.long_inputs())
        bench.launch_words(tile, _sfpu_run_program(bad))
        core = tile.cores["trisc1"]
        if key == "replaced":                # a PUSHM set after the tile was built (calling the pusher): C calls it
            push = core._ns["PUSHM"]
            core.set_pusher("PUSHM", lambda pos, words: push(pos, words))
        trace, waited = [], False
        for _ in range(300):
            try:
                n = tile.run(60)
            except EmuError as e:
                trace.append((type(e).__name__, str(e), core.pc, core.instret, core.sub, dict(tile._stall)))
                break
            waited |= "FIFO" in tile._wait["trisc1"]
            trace.append((n, {k: (c.pc, c.instret, list(c.x)) for k, c in tile.cores.items()}, dict(tile._wait),
                          dict(tile._stall), list(tile.tensix_pushes), tile.stats()))
            if not any(tile.running(k) for k in layout.CORES):
                break
        trace.append((tile.tensix.pm_done, tile.tensix.pm_t, tile.stats()))
        assert waited and (isinstance(trace[-2][0], str) == bad)
        traces[key] = trace
    assert traces["C"] == traces["pusher"] == traces["replaced"]
    assert calls["C"] == 0 and calls["pusher"] >= 2 and calls["replaced"] == calls["pusher"], calls


def _loop_program(body: list[int]) -> dict[str, list[int]]:
    """TRISC1: four turns of a loop pushing `body` as one `.ttinsn` run, STALLWAIT, TTSync store and load, park."""
    r = bench.ttinsn
    t1 = bench.li(5, 4) + [r(w) for w in body] + [bench.i_type(-1, 5, 0, 5, 0x13), bench.b_type(-4 * (len(body) + 1),
                                                                                          0, 5, 1)]
    t1 += [r(w) for w in bench.LONG_EPILOGUE] + bench.li(9, layout.TENSIX_SYNC)
    return {"trisc1": t1 + [bench.sw(0, 9, 0), bench.i_type(0, 9, 2, 10, 0x03), bench.J_SELF]}


@pytest.mark.needs_cc
def test_kept_runs_follow_l1(monkeypatch):
    """A loop's run of SFPU words, its tuple kept by pc (rv32_native.KEPT_RUNS_NATIVE: run_words), then the same tile
    relaunched with other words of the same length at the same pc: the second launch pushes the new words (its Dst
    differs from the first's), and both launches' cycles and Dst are those of building every tuple anew (the
    reference); the kept tuple is the one C pushed last."""
    first = bench.exp2_body() * 3
    second = list(first)
    second[1], second[2] = first[2], first[1]
    results = {}
    for kept in (True, False):
        monkeypatch.setattr(rv32_native, "KEPT_RUNS_NATIVE", kept)
        tile = Tile()
        tile.tensix.dst.write_rows32(0, bench.long_inputs())
        out = []
        for body in (first, second):
            bench.launch_words(tile, _loop_program(body))
            bench.run_tile(tile, 100_000)
            out.append((tile.stats(), tile.tensix.dst.rows32[:64].tobytes()))
            tile.write32(layout.SOFT_RESET_0, 0x47800)
            runs = tile.cores["trisc1"].native.direct_push[-1]
            assert (runs is not None) == kept
            if kept:
                assert [words for _, words in runs.values() if len(words) == len(body)] == [tuple(body)]
        assert out[0][1] != out[1][1]
        results[kept] = out
    assert results[True] == results[False]


def test_never_plain_ops_have_no_facts():
    """The opcodes whose facts look-up C skips (DirectIssueMixin.never_plain_ops) against _plain_facts, the reference:
    no word of such an opcode (random fields, all-zero and all-one fields) has plain_run's facts, while most other
    opcodes' words do (so the table is no blanket); a spied _plain_facts, or decode spied on the class, gives no
    table."""
    tx = Tile().tensix
    never = tx.never_plain_ops()
    assert len(never) == 256
    rng = random.Random(5)
    with_facts = 0
    for op in range(256):
        words = [op << 24, op << 24 | 0xFFFFFF] + [op << 24 | rng.getrandbits(24) for _ in range(40)]
        facts = [tx._plain_facts(w) for w in words]
        if never[op]:
            assert facts == [None] * len(words), hex(op)
        with_facts += any(f is not None for f in facts)
    assert 0 < sum(never) < 256 - 40 and with_facts > 40
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(tx), "decode", lambda self, w: type(tx).reference_decode(self, w))
        assert tx.never_plain_ops() is None
    assert tx.never_plain_ops() == never
    tx._plain_facts = lambda word: None
    assert tx.never_plain_ops() is None


@pytest.mark.needs_cc
@pytest.mark.parametrize("strict", [False, True])
def test_semaphore_stores_in_c_match_sem_mmio_write(strict, monkeypatch):
    """A TRISC's RISC-V stores to its semaphores made by C itself (rv32_native.SEM_STORES_NATIVE: sem_store) against
    the Tensix's sem_mmio_write (the reference): random posts and gets on semaphores with random values, maxima and
    counted posts leave the same values, posts, event cycle, core state and stats; in strict mode the first post at
    Max or get at 0 raises the same error on both. C made the stores it could."""
    rng = random.Random(7 + strict)
    writes = Tile.__dict__["_pcbuf_store"]
    for case in range(6):
        sems = [rng.randrange(8) for _ in range(40)]
        words = []
        for i, k in enumerate(sems):
            words += bench.li(6, layout.SEMAPHORE_BASE + 4 * k) + bench.li(7, rng.choice((0, 1, 2, 3, 0xFFFFFFFE)))
            words += [bench.sw(7, 6, 0)] + bench.li(5, rng.randrange(3)) * (i % 3)
        init = [(rng.randrange(16), rng.choice((3, 8, 15))) for _ in range(8)]
        seen = []
        for in_c in (True, False):
            monkeypatch.setattr(rv32_native, "SEM_STORES_NATIVE", in_c)
            calls = []
            monkeypatch.setattr(Tile, "_pcbuf_store", lambda self, *a: calls.append(a) or writes(self, *a))
            tile = Tile(quantum=rng.choice((7, 50)))
            tx = tile.tensix
            tx.strict = strict
            for i, (v, m) in enumerate(init):
                tx.sem_value[i], tx.sem_max[i] = min(v, m) if strict else v, m
                tx.sem_posts[i].extend(range(10 * i, 10 * i + tx.sem_value[i]))
            bench.launch_words(tile, {"trisc0": words + [bench.J_SELF]})
            error = None
            try:
                for _ in range(100):
                    tile.run(30)
                    if not tile.running("trisc0") or tile.spinning("trisc0"):
                        break
            except EmuError as e:
                error = str(e)
            core = tile.cores["trisc0"]
            seen.append((error, list(tx.sem_value), [list(q) for q in tx.sem_posts], tx.tm.event_t, core.pc,
                         core.instret, dict(tile._stall), tile.stats()))
            if in_c:
                assert tile.cores["trisc0"].native is not None
                made_in_c = len(calls)
        assert seen[0] == seen[1], case
        assert made_in_c <= (1 if seen[0][0] else 0), made_in_c      # (only the culprit's store goes to Python)
        assert (seen[0][0] is not None) == strict, seen[0][0]


@pytest.mark.parametrize("in_c", [True, False])
def test_a_malformed_due_list_raises_a_type_error(in_c, monkeypatch):
    """A response counter's due completions that are not a list (tile._niu_due's contract broken): the poll raises
    TypeError in C (niu_load) as in Python (_niu_load), not a SystemError from an error without an exception."""
    from tt_backend.runtime.emu.noc import COUNTER_BASE, RD_RESP_RECEIVED
    monkeypatch.setattr(rv32_native, "NIU_LOADS_NATIVE", in_c)
    tile = Tile()
    poll = bench.li(1, layout.NOC_BASE[0] + COUNTER_BASE + 4 * RD_RESP_RECEIVED) + [i_type(0, 1, 2, 2, 0x03)]
    tile._niu_due[0][RD_RESP_RECEIVED] = (5,)
    bench.launch_words(tile, {"brisc": poll + [bench.J_SELF]})
    with pytest.raises(TypeError):
        tile.run(1000)


def _registers_in_and_out(seed: int) -> list:
    """begin and end on two cores' register lists, with Python writing the lists between them as a core's blocks or
    a test might (the same value as a new object, another value, one beyond 32 bits, a new list): what the state
    read at each begin, and the lists' values and which of their objects end replaced."""
    mod, rng, seen = rv32_native._built()[0], random.Random(seed), []
    states = [np.zeros(rv32_native.STATE_WORDS, np.uint32) for _ in range(2)]
    xs = [[rng.randrange(1 << 32) for _ in range(32)] for _ in range(2)]
    for _ in range(400):
        k = rng.randrange(2)
        state, x = states[k], xs[k]
        for _ in range(rng.choice([0, 0, 1, 3])):
            i = rng.randrange(32)
            x[i] = rng.choice([int(str(x[i])), rng.randrange(1 << 32), rng.randrange(300), (1 << 32) + x[i]])
        if rng.random() < 0.05:
            x = xs[k] = list(x)
        mod.begin(state.ctypes.data, x, 4 * rng.randrange(64), 1, 0, 0)
        seen.append(state[rv32_native.X:rv32_native.X + 32].tolist())
        for i in rng.sample(range(32), rng.choice([0, 1, 4, 32])):
            state[rv32_native.X + i] = rng.randrange(1 << 32)
        before = [id(o) for o in x]
        mod.end(state.ctypes.data, x)
        seen.append((list(x), [id(o) == b for o, b in zip(x, before)]))
    return seen


@pytest.mark.needs_cc
def test_register_memo_matches_reads(monkeypatch):
    """begin and end with the register lists' objects kept (reg_memo) against every register read from its object:
    the same registers in the state, the same values in the lists and the same objects replaced."""
    if rv32_native._built()[0] is None:
        pytest.skip("no C part")
    runs = []
    for on in (True, False):
        rv32_native.set_regs_memo(on)
        runs.append([_registers_in_and_out(seed) for seed in range(3)])
    rv32_native.set_regs_memo(True)
    assert runs[0] == runs[1]
