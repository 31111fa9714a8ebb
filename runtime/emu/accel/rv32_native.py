"""The RISC-V cores' run() in C (rv32_native.c) between the instructions only Python models.

The C part executes what touches only registers, L1 and the core's local RAM, and the stores that fill an NIU's
command registers (kept in noc.py's register file, which the send reads; `NIU_STORES`), with rv32.py's block
boundaries, budget and spin detection. It also makes the one bus call rv32.py's block makes for an aligned 32-bit
MMIO load or store (mmio_load / mmio_store with core.pos at its position; a store to a TRISC's own push window goes
straight to the tile's pusher, which does what that store's handler does) and for a run of `.ttinsn` words (PUSHM /
PUSHP / push_tensix), and carries on (`MMIO_EXITS`): no return to this loop, no generated piece, no slow path's
frames. It returns at the first instruction it leaves to Python (other MMIO, a CSR, an atomic, a misaligned access,
an illegal word, a bad fetch), which runs through rv32.py's own translation of it alone (RV32Core.piece), with the
same `done` position the block would have given it, then the C part resumes. The register file lives in the C state
during run() and in `core.x` between runs.
rv32.py stays the reference: tests/emu/test_rv32_native.py pins registers, memory, bus traffic, NIU registers and
instruction counts of this path to it. One difference, outside both paths' contract: rv32.py executes code as it was
when first translated after a reset, this part as it is in L1 (code that rewrites itself needs fence.i, which neither
supports).

`TT_RV32_NATIVE=0` (read when a core is attached) keeps every core on the Python path; `TT_RV32_MMIO_EXITS=0` hands
the MMIO words and pushes back through the pieces as every other instruction; `TT_RV32_DIRECT_PUSH=0` sends every run of
pushes through the tile's pusher instead of the Tensix's plain_run in C; `TT_EMU_CAUSAL_NATIVE=0` keeps the causal-load
rule's lookups in numpy and hands such loads back; without a host compiler or Python's headers the cores stay on the
Python path too (`python -m tt_backend info` says which runs, and why).
"""
from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from tt_backend.runtime.emu.rv32 import L1_SIZE, RV32Core, Stall

from . import native

SOURCE = Path(__file__).with_name("rv32_native.c")
RV_BUDGET, RV_SPIN, RV_PARKED, RV_PYTHON, RV_STALL = range(5)
NO_SPIN = 0xFFFFFFFF
# A hand-back (a piece: a CSR, an atomic, a misaligned access, MMIO C leaves to Python) costs ~0.3 us more than the
# same instruction in a Python block, C saves ~0.05 us per other instruction (measured on loops of CSR reads and ALU
# work; the MMIO words and pushes C makes the bus call for are no hand-backs: a push loop runs at 0.28 us per
# iteration on C, 0.41 on the blocks): a quantum that handed back more often than once per HANDBACK_SPAN instructions
# makes the next PYTHON_QUANTA quanta run on the Python blocks; either path leaves the same state after a quantum, so
# the choice changes host time only
HANDBACK_SPAN = 16
PYTHON_QUANTA = 16
BUDGET_CAP = 1 << 31        # the C state counts in uint32; a larger budget is cut at a block boundary beyond it anyway
# rv32_native.c's rv_state as uint32 words: the L1 and local RAM pointers (words 0-3), then these fields
# (rv32_native.c begin sets MULTI_PUSH, PC, the counters and CAUSAL from the core at each run(), end copies x back)
LOCAL_SIZE, MULTI_PUSH, PC, DONE, BUDGET, IN_BLOCK, SPIN_PC, CHAIN, EXIT_N, CAUSAL = range(4, 14)
NIU_REGS, NIU_BASE = 14, 18  # two pointers to the NIUs' register files (0: stores there go to Python), their windows
X = 20                      # x[32], then spin_x[32]
STAMP, T0 = X + 64, X + 66  # uint64 each: the L1 store records (rv32.py set_stamper) and the quantum's base cycle
LOG = X + 68                # two pointers: the tile's L1 write log and its count (rv32.py set_stamper)
PUSH_BASE, PUSH_SIZE = X + 72, X + 73   # the push window whose word stores C hands to attach()'s push
LOG_INDEX = X + 74          # two pointers: the write log's index by line (per line, per ring slot)
STATE_WORDS = X + 78
# The stores that fill an NIU's command registers are kept by C in the NIU's register file (rv32_native.c niu_store);
# False hands each of them back to Python's Niu.store (the reference), as without the C part
NIU_STORES = True
# C makes the bus call of an aligned 32-bit MMIO load or store and of a run of `.ttinsn` words itself (rv32_native.c
# bus_calls); False hands them back through the pieces (the reference path) as every other instruction (read at each
# run())
MMIO_EXITS = os.environ.get("TT_RV32_MMIO_EXITS", "1") != "0"
# The causal-load rule's lookups in the tile's write log in C (causal_log.h): tile.py's l1_at / first_write_after, and
# the C core's own loads of lines written after its cycle, which it then no longer hands back; False keeps tile.py's
# numpy lookups (the reference) and the hand-backs (read when a tile is built and when its timed mode is set)
CAUSAL_NATIVE = os.environ.get("TT_EMU_CAUSAL_NATIVE", "1") != "0"
CAUSAL_OFF, CAUSAL_HAND_BACK, CAUSAL_IN_C = range(3)      # rv32_native.c rv_state.causal
# C hands a core's runs of `.ttinsn` words to the Tensix's plain_run itself (sfpu_issue_native.c's C entry, through
# attach()'s direct_push context) and the tile's pusher only the words plain_run leaves; False calls the pusher for
# every run (the reference; read at each run())
DIRECT_PUSH = os.environ.get("TT_RV32_DIRECT_PUSH", "1") != "0"
# A TRISC's loads of its Tensix semaphores served in C with the direct push context (rv32_native.c sem_load: the
# value, and the wait for its post's cycle) instead of the bus's mmio_load -> tile.py _pcbuf_load (the reference; False,
# or TT_EMU_SEM_LOADS_NATIVE=0, read when a tile is built); a wait the tile's timeline records stays Python's
SEM_LOADS_NATIVE = os.environ.get("TT_EMU_SEM_LOADS_NATIVE", "1") != "0"
# An NIU response counter's load (a core polling for its reads' data or its writes' acks) and NOC_CMD_CTRL's (polled
# before each request) served in C with the tile's NIU load context (rv32_native.c niu_load: the latency, the count of
# the requests complete at the core's cycle, the wait for the next completion) instead of the bus's mmio_load ->
# tile.py _niu_load (the reference; False, or TT_EMU_NIU_LOADS_NATIVE=0, read when a tile is built); a tile recording
# a timeline hands them back
NIU_LOADS_NATIVE = os.environ.get("TT_EMU_NIU_LOADS_NATIVE", "1") != "0"
# A TRISC's TTSync loads (the MMIO latency, the Stall while its thread is busy, the wait for thread_done) and stores
# (discarded) and its semaphore stores (the Tensix's sem_mmio_write at the core's cycle) made in C with the direct push
# context (rv32_native.c ttsync_load, pcbuf_store) instead of the bus's mmio_load / mmio_store -> tile.py _pcbuf_load /
# _pcbuf_store (the reference; False, or TT_EMU_PCBUF_NATIVE=0, read when a tile is built); a load the tile's timeline
# records stays Python's
PCBUF_NATIVE = os.environ.get("TT_EMU_PCBUF_NATIVE", "1") != "0"
# Where C makes a semaphore store (PCBUF_NATIVE), the post or get itself (rv32_native.c sem_store) instead of calling
# the Tensix's sem_mmio_write (the reference; False, or TT_EMU_SEM_STORES_NATIVE=0, read when a tile is built); strict
# mode's errors are the method's
SEM_STORES_NATIVE = os.environ.get("TT_EMU_SEM_STORES_NATIVE", "1") != "0"
# Where C makes the bus calls, a run of `.ttinsn` words goes on across the block starts it reaches while the budget
# lasts, in one pusher call (rv32_native.c ttinsn_run: a 171-word SFPU body pushed as one run, not three); False cuts
# the runs where rv32.py's blocks cut them (the reference; False, or TT_EMU_JOINED_RUNS_NATIVE=0, read at each run())
JOINED_RUNS_NATIVE = os.environ.get("TT_EMU_JOINED_RUNS_NATIVE", "1") != "0"
MULTI_OFF, MULTI_BLOCK, MULTI_JOIN = range(3)      # rv32_native.c rv_state.multi_push
# With the direct push context, the runs plain_run leaves (SFPU words, MVMULs, ...) go from C to the Tensix's push_many
# that the tile's PUSHM pusher calls, with the pusher's accounting (rv32_native.c direct_many), while the core's PUSHM
# is that pusher; False calls the pusher (tile.py Tile._multi_pusher, the reference; False, or
# TT_EMU_DIRECT_MANY_NATIVE=0, read when a tile is built)
DIRECT_MANY_NATIVE = os.environ.get("TT_EMU_DIRECT_MANY_NATIVE", "1") != "0"
# With the direct push context, C skips the look-up of plain_run's facts for a word whose opcode never has them (the
# Tensix's never_plain_ops: SFPU words, the expanders'); False looks up every word (the reference; False, or
# TT_EMU_NEVER_PLAIN_NATIVE=0, read when a tile is built)
NEVER_PLAIN_NATIVE = os.environ.get("TT_EMU_NEVER_PLAIN_NATIVE", "1") != "0"
# With the direct push context, the tuple of a run's words is kept by its pc with the run's bytes and given again while
# L1 holds those bytes (rv32_native.c run_words: a loop's body pushed each turn makes no new ints); False builds each
# run's tuple anew (the reference; False, or TT_EMU_KEPT_RUNS_NATIVE=0, read when a tile is built)
KEPT_RUNS_NATIVE = os.environ.get("TT_EMU_KEPT_RUNS_NATIVE", "1") != "0"
# RV32Core.spin_reads (a frozen wait loop's probe) in C where the loop only loads (rv32_native.c probe); False keeps
# rv32.py's probe on translated blocks (the reference; read at each probe)
PROBE_NATIVE = os.environ.get("TT_EMU_SPIN_PROBE_NATIVE", "1") != "0"
# C's TTSync load (PCBUF_NATIVE) answers the Tensix's thread_idle (from the thread's queues) and thread_done (from the
# cycle model's clock, work_done and SFPU busy-until) itself while they are frontend.py's, tensix.py's and cycles.py's
# (rv32_native.c thread_idle, thread_done); False calls the methods (the reference; False, or TT_EMU_TTSYNC_NATIVE=0,
# read when a tile is built)
TTSYNC_NATIVE = os.environ.get("TT_EMU_TTSYNC_NATIVE", "1") != "0"
# The tile's attributes a bus load served in C reads (rec, _latency_of: rv32_native.c load_timing) kept while the
# tile's dict and class are unchanged (their version tags); False reads them at every load (the reference; False, or
# TT_EMU_TILE_MEMO_NATIVE=0, given to the module when it loads: set_tile_memo changes it later)
TILE_MEMO_NATIVE = os.environ.get("TT_EMU_TILE_MEMO_NATIVE", "1") != "0"
# Where a bus call may have stalled the core, C's run() computes the stamp base again itself (tbase + instret + stall,
# as the round does) where it is the tile's own (Tile._stamper's lambda; rv32_native.c refresh_t0); False calls the
# lambda (the reference; False, or TT_EMU_OWN_BASE_NATIVE=0, given to the module when it loads: set_own_base changes it)
OWN_BASE_NATIVE = os.environ.get("TT_EMU_OWN_BASE_NATIVE", "1") != "0"
# A core's register list's int objects kept by C with their values between a quantum's end and the next quantum's
# start or probe, each read again only where Python put another object at its index (rv32_native.c reg_memo); False
# reads all 32 each time (the reference; False, or TT_EMU_REGS_MEMO_NATIVE=0, given to the module when it loads:
# set_regs_memo changes it later)
REGS_MEMO_NATIVE = os.environ.get("TT_EMU_REGS_MEMO_NATIVE", "1") != "0"
# The attributes the round loop and the bus calls read and write every quantum (RV32Core's pc, instret, pos, sub,
# parked, spinning; NativeRun's python_quanta, past_in_c, calls; Tile's soft_reset, clock; Tensix's semaphores,
# strict, pm_done, pm_t: their classes' __slots__)
# read and written by C at their members' offsets while the name resolves to that member (rv32_native.c slot_at);
# False goes by name, PyObject_GetAttr / SetAttr (the reference; False, or TT_EMU_SLOTS_NATIVE=0, given to the module
# when it loads: set_slots changes it later)
SLOTS_NATIVE = os.environ.get("TT_EMU_SLOTS_NATIVE", "1") != "0"
# The round loop's reads of a core's cycle (Tile.cycles: the tile's _tbase and _stall by core name) and the bus calls'
# reads of its stall keep each value with its dict's version tag and give it again while the dict is unchanged
# (rv32_native.c cycles_memo, stall_in); False reads the dicts at every read (the reference; False, or
# TT_EMU_CYCLES_MEMO_NATIVE=0, given to the module when it loads: set_cycles_memo changes it later)
CYCLES_MEMO_NATIVE = os.environ.get("TT_EMU_CYCLES_MEMO_NATIVE", "1") != "0"
# With the direct push context, whether plain_run takes a word (its facts, no MVMUL) is kept by the word's value with
# the facts dict's version tag and given again while the dict is unchanged (rv32_native.c takes_memo); False looks up
# every word (the reference; False, or TT_EMU_TAKES_MEMO_NATIVE=0, given to the module when it loads: set_takes_memo
# changes it later)
TAKES_MEMO_NATIVE = os.environ.get("TT_EMU_TAKES_MEMO_NATIVE", "1") != "0"


# the switches above the C part keeps a copy of: module global -> the C module's setter, given the global when the
# module loads and again by the set_* functions below
C_SWITCHES = {"TILE_MEMO_NATIVE": "tile_memo", "OWN_BASE_NATIVE": "own_base", "REGS_MEMO_NATIVE": "regs_memo",
              "SLOTS_NATIVE": "slots", "CYCLES_MEMO_NATIVE": "cycles_memo",
              "TAKES_MEMO_NATIVE": "takes_memo"}


def enabled() -> bool:
    return os.environ.get("TT_RV32_NATIVE", "1") != "0"


@functools.lru_cache(maxsize=None)
def _built() -> tuple[object | None, str]:
    """(the extension module or None, what `info` says about it)."""
    try:
        mod, path = native.load_extension(SOURCE, "rv32_native")
    except OSError as e:
        return None, f"Python: the C part is unavailable: {e}"
    for flag, setter in C_SWITCHES.items():
        getattr(mod, setter)(globals()[flag])
    return mod, f"C, making the bus calls of MMIO words and pushes ({path})"


def _set_switch(flag: str, on: bool) -> None:
    """The module global `flag` (one of C_SWITCHES) is `on` from now on, and so is the C part's copy, where it is built
    (all but own_base's setter also drop what their memos held)."""
    globals()[flag] = on
    mod = _built()[0]
    if mod is not None:
        getattr(mod, C_SWITCHES[flag])(on)


def set_tile_memo(on: bool) -> None:
    _set_switch("TILE_MEMO_NATIVE", on)


def set_own_base(on: bool) -> None:
    _set_switch("OWN_BASE_NATIVE", on)


def set_regs_memo(on: bool) -> None:
    _set_switch("REGS_MEMO_NATIVE", on)


def set_slots(on: bool) -> None:
    _set_switch("SLOTS_NATIVE", on)


def set_cycles_memo(on: bool) -> None:
    _set_switch("CYCLES_MEMO_NATIVE", on)


def set_takes_memo(on: bool) -> None:
    _set_switch("TAKES_MEMO_NATIVE", on)


def _load() -> tuple[object | None, str]:
    """(the module's run(state address) or None, what `info` says about it)."""
    mod, why = _built()
    return (mod.run if mod is not None else None), why


def rounds_fn():
    """rv32_native.c run_rounds (tile.py Tile.run's rounds in one C call), or None without the C part or with the
    cores kept on the Python path (TT_RV32_NATIVE=0)."""
    mod = _built()[0] if enabled() else None
    return mod.run_rounds if mod is not None else None


def status() -> str:
    """Which path runs the RISC-V cores, for `python -m tt_backend info`."""
    if not enabled():
        return "Python: TT_RV32_NATIVE=0"
    fn, why = _load()
    return why if fn is None or MMIO_EXITS else f"C, MMIO words and pushes handed back (TT_RV32_MMIO_EXITS=0; {why})"


def attach(core: RV32Core, nius: Sequence[tuple[int, np.ndarray]] = (),
           push_window: tuple[int, int, Callable[[int, int], None]] | None = None,
           direct_push: tuple | None = None, niu_loads: tuple | None = None, niu_sends: tuple | None = None) -> None:
    """Hand `core`'s run() to the C part when it is enabled and built; otherwise the core keeps the Python path.
    `nius`: (window base address, uint32 register file) of the NIUs whose command registers C may fill (at most 2).
    `push_window`: (base, size, push(pos, word)): a word store there has exactly push's effects (the bus's mmio_store
    would make the same push), so run() calls push for it.
    `direct_push`: what rv32_native.c needs to hand the core's `.ttinsn` runs to plain_run as the bus's pusher
    would (rv32_native.c direct_from: the capsule, the Tensix, the thread, its facts and progress list, the tile's
    stall dict, push counts, wait reasons, the full FIFO's wait reason, and whether plain_run may run now, asked at
    the first push of each run() call, the tile and semaphore window whose loads C serves, or None, and the tile's
    PUSHM pusher for the core and the push_many it calls, which C calls itself while that is the core's PUSHM, or two
    Nones, per opcode whether its words never have plain_run's facts, or None, and a dict C keeps the core's runs'
    tuples in, or None), or None.
    `niu_loads`: what rv32_native.c niu_load needs to serve the core's loads of the NIUs' response counters and
    NOC_CMD_CTRL (the tile, its stall dict, the NIU windows' MMIO latency, then per NIU its window base, its counters
    and the tile's due completions and last shown counts), or None.
    `niu_sends`: what rv32_native.c niu_send needs to make the core's sends (NOC_CMD_CTRL stores) with their time as
    mmio_store -> tile.py _niu_store do (noc_native's issue capsule, the tile, its stall dict, then per NIU its window
    base, its send context and its timing context), or None."""
    fn = _load()[0] if enabled() else None
    if fn is not None and len(core._l1) == L1_SIZE:
        core.native = NativeRun(core, fn, nius if NIU_STORES else (), push_window, direct_push, niu_loads, niu_sends)


class LogLookups:
    """tile.py Tile.l1_at, first_write_after, the L1 words of _peek_words and _thaw's decision in C (causal_log.h) over
    the tile's L1, line stamps and write log (arrays the tile owns and keeps alive; their addresses are taken once)."""

    def __init__(self, fns, l1: np.ndarray, stamps: np.ndarray, log: np.ndarray, count: np.ndarray, head: np.ndarray,
                 prev: np.ndarray):
        arrays = (stamps, log, count, head, prev)
        assert l1.flags.c_contiguous and all(a.dtype == np.uint64 and a.flags.c_contiguous for a in arrays)
        self._ptrs = np.array([a.ctypes.data for a in (l1, *arrays)], np.uint64)   # rv32_native.c write_log
        self.arg = arg = int(self._ptrs.ctypes.data)    # (rv32_native.c run_rounds' thaw reads it)
        l1_at, first, peek, thaw = fns
        self.l1_at = functools.partial(l1_at, arg)                    # (addr, n, cycle) -> bytes | None
        self.first_write_after = functools.partial(first, arg)        # (addr, cycle) -> int | None
        self.peek_words = functools.partial(peek, arg)                # (reads, cycle | None) -> [bytes | None]
        self.thaw = functools.partial(thaw, arg)    # (reads, seen, cycle, last key, peek, who) -> (key, cycle | None)


def log_lookups(l1: np.ndarray, stamps: np.ndarray, log: np.ndarray, count: np.ndarray, head: np.ndarray,
                prev: np.ndarray) -> LogLookups | None:
    """The C lookups in a tile's write log (ring, count, index by line: causal_log.h), or None
    (TT_EMU_CAUSAL_NATIVE=0 or no C part): tile.py's numpy ones."""
    mod = _built()[0] if CAUSAL_NATIVE else None
    return LogLookups((mod.l1_at, mod.first_write_after, mod.peek_words, mod.thaw), l1, stamps, log, count, head,
                      prev) if mod is not None else None


def _address(mem: memoryview) -> tuple[int, object]:
    """The address of a writable buffer, and the ctypes object that keeps it exported."""
    buf = (ctypes.c_char * len(mem)).from_buffer(mem)
    return ctypes.addressof(buf), buf


class NativeRun:
    """RV32Core.run for one core on the C part; the core's state (pc, x, instret, parked, spinning, pos) is kept as
    rv32.py keeps it."""
    # what rv32_native.c's round loop reads on every quantum, as members at fixed offsets (rv32_native.c slot_at)
    __slots__ = ("python_quanta", "past_in_c", "calls", "__dict__", "__weakref__")

    def __init__(self, core: RV32Core, fn, nius: Sequence[tuple[int, np.ndarray]],
                 push_window: tuple[int, int, Callable[[int, int], None]] | None,
                 direct_push: tuple | None = None, niu_loads: tuple | None = None, niu_sends: tuple | None = None):
        self.core = core
        self.direct_push = direct_push
        self.niu_loads = niu_loads
        self.niu_sends = niu_sends
        self.fn = fn
        mod = _built()[0]
        self.probe, self.begin, self.end = mod.probe, mod.begin, mod.end
        self.state = np.zeros(STATE_WORDS, np.uint32)
        (l1, self._l1_buf), (local, self._local_buf) = _address(core._l1), _address(core._local)
        self.state[:4].view(np.uint64)[:] = (l1, local)
        self.state[LOCAL_SIZE] = core.local_size
        self._nius = [regs for _, regs in nius]            # kept alive while C holds their addresses
        assert len(nius) <= 2                               # rv_state holds two NIU windows
        for i, (base, regs) in enumerate(nius):
            # C indexes them as initiator * 12 + reg / 4, for 4 initiators (rv32_native.c niu_store; noc.py
            # N_INITIATORS x N_PLAIN_REGISTERS)
            assert regs.dtype == np.uint32 and regs.flags.c_contiguous and regs.shape == (4, 12), regs.shape
            self.state[NIU_REGS + 2 * i:NIU_REGS + 2 * i + 2].view(np.uint64)[0] = regs.ctypes.data
            self.state[NIU_BASE + i] = base
        self.push = None
        if push_window is not None:
            self.state[PUSH_BASE], self.state[PUSH_SIZE], self.push = push_window
        self.stamps = core.stamps       # kept referenced while the C state points at it
        if core.stamps is not None:
            self.state[STAMP:STAMP + 2].view(np.uint64)[0] = core.stamps.ctypes.data
        if core.write_log is not None:
            log, count, head, prev = core.write_log
            self.state[LOG:LOG + 4].view(np.uint64)[:] = (log.ctypes.data, count.ctypes.data)
            self.state[LOG_INDEX:LOG_INDEX + 4].view(np.uint64)[:] = (head.ctypes.data, prev.ctypes.data)
        self.t0 = memoryview(self.state[T0:T0 + 2].view(np.uint64))   # (a memoryview: the cheapest item store)
        self.words = memoryview(self.state)
        self.bytes = self.words.cast("B")
        self.arg = self.state.ctypes.data
        self.python_quanta = 0          # quanta left to run on the Python blocks before C is measured again
        self.past_in_c = False          # answer_past_loads
        self.calls: tuple | None = None  # _bus_calls
        self.peek = NotImplemented      # what spin_reads' probe reads registers by, once asked

    def _bus_calls(self) -> tuple:
        """rv32_native.c's bus_calls tuple, built once (its bound methods cost ~0.3 us a quantum to rebuild); the core
        drops it when its pushers or stamper change (rv32.py set_pusher, set_stamper)."""
        core = self.core
        bus, ns = core.bus, core._ns
        self.calls = (core, core.name, bus.mmio_load, bus.mmio_store, self.push, ns.get("PUSHP"), ns.get("PUSHM"),
                      bus.push_tensix, core.stamp_base, Stall)
        return self.calls

    def answer_past_loads(self, on: bool) -> None:
        """Whether C answers the core's loads of L1 lines written after its cycle from the tile's write log itself
        (CAUSAL_NATIVE; the tile's past() would answer them so: its timed mode) instead of handing them back."""
        self.past_in_c = on and CAUSAL_NATIVE and self.core.write_log is not None

    def spin_reads(self, sbase: int | None, seen_at: int | None = None):
        """RV32Core.spin_reads' answer from C (rv32_native.c probe) for a loop that only loads, NotImplemented where
        rv32.py's probe must answer (or PROBE_NATIVE is off); `sbase`: the probe's SBASE (None without the causal-load
        rule, whose reads C answers only where it answers the core's own: past_in_c); `seen_at`: as
        RV32Core.spin_reads'."""
        if not PROBE_NATIVE or (sbase is not None and not self.past_in_c):
            return NotImplemented
        core = self.core
        if self.peek is NotImplemented:     # (a tile's reg_peek: its peek, or a table C reads it by; fixed)
            reg_peek = getattr(core.bus, "reg_peek", None)
            self.peek = reg_peek(core.name) if reg_peek is not None else getattr(core.bus, "peek", None)
        return self.probe(self.arg, core.x, core.pc, core.stamp_base() if sbase is not None else None, sbase,
                          self.peek, core.name, seen_at)

    def run(self, budget: int) -> int:
        core = self.core
        if core.parked:
            return 0
        if self.python_quanta:
            self.python_quanta -= 1
            return core.run_blocks(budget)
        core.spinning = False
        causal = "PAST" in core._ns and self.stamps is not None
        multi = (MULTI_JOIN if JOINED_RUNS_NATIVE else MULTI_BLOCK) if "PUSHM" in core._ns else MULTI_OFF
        self.begin(self.arg, core.x, core.pc, min(max(budget, 0), BUDGET_CAP), multi,
                   (CAUSAL_IN_C if self.past_in_c else CAUSAL_HAND_BACK) if causal else CAUSAL_OFF)
        return self.resume(None)

    def resume(self, why: int | None) -> int:
        """run() from begin() on: the C part's calls, each hand-back's piece, the quantum's end. `why`: what the C
        part's first call returned when a caller made it (rv32_native.c run_rounds: RV_PYTHON), None to make it here."""
        core = self.core
        handbacks = 0
        S, x, fn, arg = self.words, core.x, self.fn, self.arg
        base, t0, ns = core.stamp_base, self.t0, core._ns
        causal = "PAST" in ns and self.stamps is not None
        calls = direct = niu_loads = niu_sends = None
        if MMIO_EXITS:          # rv32_native.c bus_calls
            calls = self.calls or self._bus_calls()
            if base is not None:
                direct = self.direct_push if DIRECT_PUSH else None
                niu_loads, niu_sends = self.niu_loads, self.niu_sends
        try:
            while True:
                if why is not None:
                    if why != RV_PYTHON:
                        break
                    pc, n, done = S[PC], S[EXIT_N], S[DONE]
                    handbacks += 1
                    piece, loaded, dirty = core.piece(pc, n)
                    for r in loaded:
                        x[r] = S[X + r]
                    try:
                        S[PC] = piece(done)
                    except Stall:          # retried by the next run(): the instructions before the culprit retired
                        S[PC], S[DONE] = core.pc, done + ((core.pc - pc) >> 2)
                        break
                    for r in dirty:
                        S[X + r] = x[r]
                    S[DONE], S[IN_BLOCK] = done + n, S[IN_BLOCK] + n
                if base is not None:
                    t0[0] = b = base()  # a piece may have stalled the core: the stores after it are that much later
                    if causal:
                        ns["SBASE"] = b     # a handed-back load's stamp test (rv32.py set_stamp_wait): a lower
                                            # bound of the cycle, also after bus calls C made stalled the core
                try:
                    why = fn(arg, calls, direct, niu_loads, niu_sends)
                except BaseException:
                    core.pc = S[PC]     # a bus call C made raised: pc and done name the culprit
                    raise
        except BaseException:          # core.pc names the culprit (the piece's handler or block_source set it)
            core.instret += S[DONE] + ((core.pc - S[PC]) >> 2)
            core.pos = 0
            self.end(arg, x)
            raise
        self.end(arg, x)
        core.pc = S[PC]
        done = S[DONE]
        core.instret += done
        core.pos = 0
        core.spinning = why == RV_SPIN
        core.parked = why == RV_PARKED
        if handbacks * HANDBACK_SPAN > done:
            self.python_quanta = PYTHON_QUANTA
        return done
