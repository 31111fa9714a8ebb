"""One Blackhole Tensix tile: L1, local RAMs, five RISC-V cores, the Tensix coprocessor, two NIUs, DRAM, a clock.

The Tile is the `Bus` of every `RV32Core`: the cores reach L1 and their own local RAM directly through memoryviews and
call `mmio_load/mmio_store` for everything else, which is routed through a table of (address range, handler).
Anything not in the table is an EmuError naming the core and address (the scheduler adds the pc); like ttsim, MMIO
takes only aligned 32-bit accesses (local RAM, its slow alias window and the Dst window excepted).

RISC-V views beside config, semaphores and the push windows: the TRISCs' direct Dst window 0xFFBD8000 (Dst.md "RISCV
access to Dst", format per RISC_DEST_ACCESS_CTRL_SEC[thread] in config word 3; riscv_dst.RiscvDstAccess), the 16 B/T0/T1/T2
mailboxes at 0xFFEC0000 (mailbox.py: blocking pop, +4 query, 4 values per writer, discarded when the writer enters
reset), and the GPRs at REGFILE_BASE (BRISC: GPRs[3][64]; TRISC i: GPRs[i], repeated every 256 bytes). A blocked
mailbox read or write ends the core's quantum with a wait reason, like TTSync and a full instruction FIFO.

Scheduling: `run(budget)` gives each released, unparked core a quantum in turn, the least advanced (in cycles) first,
and drains the Tensix after each quantum; a parked core and an idle Tensix cost nothing. A polling core costs almost
nothing either: rv32 stops its run once a store-free loop comes back to the same registers (nothing can change until
another agent writes). A loop that reads only L1 freezes its core until a word it read changes; the core then resumes
at the cycle that word's 16-byte line was written (`l1_stamp`: RISC-V stores and NoC writes stamp their lines;
`_freeze` / `_thaw`; a Tensix semaphore it reads is watched too). Not stamped, so a core thawed by them resumes at
its own cycle: NoC read data landing in the reader's L1, an atomic's return word, host writes and packer writes; and
a line keeps its last stamp, not the latest cycle. Causal loads (CAUSAL_LOADS, docs/ARCHITECTURE.md): a core's
aligned L1 load reads the word as it was at the core's cycle (`l1_at`, from the log of RISC-V stores `l1_log`), a
frozen core whose words are unchanged at its cycle resumes at the first later logged store to one of them. A loop
polling an NIU response counter keeps its own time (those reads wait for what they show); any other spinner's time
is carried along with the cores that progressed (`_catch_up`), after polling once more at its own cycle when its
probe found no turn back (what it polls was written after its last read but not after its cycle: `_freeze`). A
round in which only such spinners ran ends run() early without a deadlock error, since they may be waiting for the
host.
Time comes from the cycle model (cycles.py): a core's cycle count is its instret plus the cycles it stalled (Tensix
FIFO full / TTSync until the thread's work is done, slow MMIO loads), counted from the tile clock at its release;
Tensix threads carry their own issue cycles. `clock` (and WALL_CLOCK as the host sees it) is the latest cycle any
core or thread reached. When nothing can progress and no core is held in reset (so the host cannot release a
helper), run() raises EmuDeadlock naming every core's and thread's wait.
"""
from __future__ import annotations

import bisect
import os
from typing import Callable

import numpy as np

from tt_backend.chip import layout
from tt_backend.chip.errors import EmuDeadlock, EmuError, EmuUndefined, EmuUnimplemented, EmuUnspecified

from .chip import Chip
from .dram import as_bytes
from .frontend import FrontendMixin
from .cycles import FPU_DST_READ_LATENCY, TensixTiming, riscv_mmio_extra
from .riscv_dst import RISCV_BASE as DST_RISCV_BASE, RISCV_ELEM as DST_RISCV_ELEM, RISCV_SIZE as DST_RISCV_SIZE, \
    RiscvDstAccess
from . import mailbox as mb
from . import timeline as tl
from .noc import (ATOMIC_RESP_RECEIVED, CMD_CTRL as NIU_CMD_CTRL, COUNTER_BASE as NIU_COUNTER_BASE,
                  DRAM_BANK_BYTES_PER_CYCLE, INITIATOR_STRIDE as NIU_INITIATOR_STRIDE, RD_RESP_RECEIVED,
                  WINDOW_SIZE as NIU_WINDOW, WR_ACK_RECEIVED, Niu)
from .cycles import DRAM_LATENCY, NOC_BYTES_PER_CYCLE, NOC_HOP_LATENCY, NOC_NIU_LATENCY
from .rv32 import STAMP_SHIFT, RV32Core, Stall
from .accel import noc_native, rv32_native
from .sync import SyncMixin
from .tensix import Tensix

QUANTUM = 2000
# The causal-load rule (Tile.l1_at): a core's L1 load reads the word as it was at the core's cycle, though a core the
# host ran first may have written it since, so that the cycles do not depend on the host's schedule
# (docs/ARCHITECTURE.md); "0" keeps the old behaviour (loads see the host-order state), for comparison only
CAUSAL_LOADS = os.environ.get("TT_EMU_CAUSAL_LOADS", "1") != "0"
# A frozen core's L1 words read in C (_peek_words; rv32_native.c peek_words) with the causal-load rule's C lookups;
# False (or TT_EMU_PEEK_NATIVE=0) reads each through _peek_word, the reference (the C thaw below reads the words it
# tests itself: THAW_NATIVE off as well gives the Python path whole)
PEEK_NATIVE = os.environ.get("TT_EMU_PEEK_NATIVE", "1") != "0"
# A frozen core's thaw test (_thaw: has a word its wait loop reads changed, and from which cycle does it run again) in
# one C call (rv32_native.c thaw; a semaphore read through peek); False (or TT_EMU_THAW_NATIVE=0) keeps _thaw_in_python,
# the reference
THAW_NATIVE = os.environ.get("TT_EMU_THAW_NATIVE", "1") != "0"
# The C thaw test and spin probe read a TRISC's semaphores from the Tensix's values themselves (reg_peek's table;
# rv32_native.c reg_peek) instead of calling peek for each; False (or TT_EMU_SEM_PEEK_NATIVE=0, read when a tile is
# built) hands them peek, the reference
SEM_PEEK_NATIVE = os.environ.get("TT_EMU_SEM_PEEK_NATIVE", "1") != "0"
# run()'s rounds (each core's thaw, quantum and probe, the Tensix's idle test and step, the catch-up and the clock) in
# one C call (rv32_native.c run_rounds), which asks this tile's methods for what it does not decide itself; False (or
# TT_EMU_ROUND_NATIVE=0) keeps run's loop and _round, the reference (read at each run())
ROUND_NATIVE = os.environ.get("TT_EMU_ROUND_NATIVE", "1") != "0"
WRITE_LOG = 1024        # the RISC-V stores to L1 a tile remembers for that rule (l1_log); rv32_native.c LOG_SIZE
RESPONSE_COUNTERS = (RD_RESP_RECEIVED, WR_ACK_RECEIVED, ATOMIC_RESP_RECEIVED)   # counted when a request completes
CORE_BITS = {c: 1 << b for c, b in layout.SOFT_RESET_BIT.items()}
WRITABLE_RESET_BITS = layout.ALL_CORES_RESET | (1 << 31)   # bit 31 (set by UMD) is accepted and ignored
# Which Tensix thread a core's own push window / sync / GPR / semaphores talk to; NCRISC has none.
THREAD_OF = {"brisc": 0, "trisc0": 0, "trisc1": 1, "trisc2": 2}
TRISC_THREAD = {"trisc0": 0, "trisc1": 1, "trisc2": 2}
# Slow-path aliases of the local RAMs (BabyRISCV/README.md): 8 KiB slots; a TRISC's 4 KiB appears twice in its slot.
ALIAS_BASE = 0xFFB14000
ALIAS_SLOTS = ("brisc", "ncrisc", "trisc0", "trisc1", "trisc2")
ALIAS_END = ALIAS_BASE + 0x2000 * len(ALIAS_SLOTS)
PUSH_WINDOW = 0x10000          # INSTRN_BUF_BASE + n * PUSH_WINDOW: window n (0: the core's own thread; BRISC: 1, 2)
CTRL_BASE = 0xFFB12000
DISABLE_RESET = 0xFFB12224
SPINNING = "spinning (polling memory/MMIO nobody has changed yet)"   # a core's wait after rv32 spin detection
GPR_COUNT = 64
GPR_ALIAS = 4 * GPR_COUNT      # a TRISC's 64 GPRs repeat every 256 bytes of REGFILE_BASE (MemoryOrdering.md)
CFG_RISC_DEST_ACCESS_CTRL = 3  # config word of RISC_DEST_ACCESS_CTRL_SEC0..2 (bits 14+5*t: no_swizzle,
#                                unsigned_int, fmt[3]; ttsim, data/bh/tensix_regs.json)
CFG_DEST_ACCESS_CFG = 220      # bit 0 swizzle_32b, bit 1 remap_addrs
N_SEMAPHORES = 8
HOST = "host"
FIFO_FULL = "Tensix thread {} instruction FIFO full"   # a pusher's wait reason (_pusher, _multi_pusher, _direct_push)
TTSYNC_WAIT = "TTSync: waiting for Tensix thread {} to go idle"   # a TTSync load's (_pcbuf_load, _direct_push)
# the methods a TTSync load asks, which rv32_native.c answers itself while they are the Tensix's and its cycle model's
# (_direct_push; taken at import: a method replaced later is called)
TTSYNC_METHODS = (FrontendMixin.thread_idle, Tensix.thread_done, TensixTiming.done)


class Tile:
    # what rv32_native.c's round loop reads on every round, as members at fixed offsets (rv32_native.c slot_at)
    __slots__ = ("soft_reset", "clock", "__dict__", "__weakref__")

    def __init__(self, tensix_factory: Callable[[np.ndarray], object] | None = None, quantum: int | None = None,
                 chip: Chip | None = None, xy: tuple[int, int] = layout.TILE_XY):
        """A tile at translated `xy` of `chip` (runtime/emu/chip.py); without one, the tile builds an unharvested
        chip around itself whose other tiles it creates alike when they are addressed."""
        self.quantum = QUANTUM if quantum is None else quantum        # (QUANTUM read here: tests patch it)
        self.xy = tuple(xy)
        if chip is None:
            chip = Chip(lambda c, at: Tile(tensix_factory, quantum, chip=c, xy=at))
        self.chip = chip
        self.l1_array = np.zeros(layout.L1_SIZE, np.uint8)
        self.l1 = memoryview(self.l1_array)                  # the cores' fast path (Bus contract)
        self.local = {c: np.zeros(layout.LOCAL_RAM_SIZE[c], np.uint8) for c in layout.CORES}
        self._local_mv = {c: memoryview(a) for c, a in self.local.items()}
        self.dram = chip.bank(*layout.DRAM_XY)               # the bank device programs that address one bank use
        self.soft_reset = layout.ALL_CORES_RESET             # power-on: all five held
        self.trisc_reset_pc = [0, 0, 0]
        self.trisc_override = 0
        self.ncrisc_reset_pc = 0
        self.ncrisc_override = 0
        self.clock = 0
        self.tensix = (tensix_factory or Tensix)(self.l1_array)
        self._timed = hasattr(self.tensix, "tm")             # the real Tensix model carries the cycle model
        self.nius = [Niu(i, self, chip.peer, self.xy) for i in (0, 1)]
        self.cores = {c: RV32Core(c, self, layout.DEFAULT_RESET_PC[c]) for c in layout.CORES}
        self.tensix_pushes = [0, 0, 0]
        self._wait = {c: "" for c in layout.CORES}           # why the core's last quantum ended in a Stall
        self._fault = {c: "" for c in layout.CORES}          # the error that stopped the core (until re-released)
        self._tbase = {c: 0 for c in layout.CORES}           # cycle model: core time = tbase + instret + stall
        self._stall = {c: 0 for c in layout.CORES}
        # the cores whose MMIO latencies and NoC waits the cycle model charges: all of them, or none in the
        # functional mode (set_timed)
        self._latency_of: dict[str, int] = self._stall
        self._niu_busy = [0, 0]                              # cycle model: when each NIU's requests are complete
        # cycle model: per NIU, per response counter, the completion cycles of the requests it counted that a core
        # polling it has not seen yet (sorted); the counter reads lower by their number until their cycle
        self._niu_due: list[dict[int, list[int]]] = [{}, {}]
        self._niu_seen: list[dict[int, int]] = [{}, {}]     # the count each counter last showed
        # a send with its time in C (noc_native.issue; _niu_store's timed part is the reference): the function, its
        # capsule for the C cores, and per NIU what it reads and updates (noc_native.c TIMING_FIELDS)
        self._issue = noc_native.issue()
        fabric = chip.fabric
        self._issue_timing = [(fabric, fabric._paths, i, self.xy, chip.tiles, self._niu_due[i], self._niu_busy,
                               (NOC_BYTES_PER_CYCLE, DRAM_BANK_BYTES_PER_CYCLE, NOC_NIU_LATENCY, NOC_HOP_LATENCY,
                                DRAM_LATENCY, STAMP_SHIFT)) for i in (0, 1)]
        # cycle model: per 16-byte L1 line the cycle of its last write by a RISC-V store or a NoC write / atomic
        # (rv32.py set_stamper, _niu_store), and per core stopped in a wait loop on L1 words (and semaphores) what it
        # read there (_freeze): such a core resumes when a word changes, at the cycle of that write
        self.l1_stamp = np.zeros(layout.L1_SIZE >> STAMP_SHIFT, np.uint64)
        # cycle model, causal loads: the last WRITE_LOG RISC-V stores to L1 as (line, cycle, word address, the word
        # before the store) in a ring, and their count: what a word held at a given cycle (l1_at)
        self.l1_log = np.zeros(4 * WRITE_LOG, np.uint64)
        self.l1_log_n = np.zeros(1, np.uint64)
        # the log's index by line for the C lookups (causal_log.h log_index: per line 1 + the number of its newest
        # logged store, per ring slot 1 + the number of the line's store before it; 0: none)
        self.l1_log_head = np.zeros(layout.L1_SIZE >> STAMP_SHIFT, np.uint64)
        self.l1_log_prev = np.zeros(WRITE_LOG, np.uint64)
        self._write_log = (self.l1_log, self.l1_log_n, self.l1_log_head, self.l1_log_prev)
        # the same answers in C (causal_log.h; kept referenced: it holds the addresses C reads); the methods stay the
        # reference
        self._log_lookups = rv32_native.log_lookups(self.l1_array, self.l1_stamp, *self._write_log) \
            if CAUSAL_LOADS else None
        if self._log_lookups is not None:
            self.l1_at, self.first_write_after = self._log_lookups.l1_at, self._log_lookups.first_write_after
        self._frozen: dict[str, tuple[list[tuple[int, int]], list[bytes | int | None]]] = {}
        # causal loads: per frozen core, the write log's count and its words as they are, when _thaw last found it
        # must stay frozen: the same again means nothing was written since (_thaw's quick answer; C's thaw keeps the
        # two in one bytes object)
        self._thaw_key: dict[str, tuple[int, list[bytes | int | None]] | bytes] = {}
        self._self_timed: set[str] = set()                  # spinning on an NIU response counter (_freeze)
        self._poll_again: dict[str, int] = {}               # per core, the wait loop (pc) it polls once more (_freeze)
        self._reg_peeks = {c: self._reg_peek(c) for c in self.cores}    # what C's thaw and probe read registers by
        self._stamp_bases: dict[str, Callable[[], int]] = {}  # each core's cycle as _stamper gives it its stamp base
        self.rec = None                                      # a timeline.TimelineRecorder (timeline_begin/_end)
        self.mailboxes = mb.Mailboxes()                      # the 16 B/T0/T1/T2 mailboxes (mailbox.py)
        self._mb_full = {c: False for c in mb.ENDS}           # the core's last mailbox write found no room
        dst = getattr(self.tensix, "dst", None)
        self._dst_view = RiscvDstAccess(dst) if dst is not None else None
        self._build_mmio_table()
        chip.adopt(self.xy, self)
        self._many_pushers: dict[str, tuple] = {}            # per core, its PUSHM pusher and push_many (_multi_pusher)
        for c, core in self.cores.items():                   # `.ttinsn` pushes: one closure per core (_pusher)
            if THREAD_OF.get(c) is not None:
                core.set_pusher("PUSHP", self._pusher(c))
                core.set_pusher("PUSHM", self._multi_pusher(c))
        for c, core in self.cores.items():
            if CAUSAL_LOADS:
                core.set_stamper(*self._stamper(c), self._write_log)
                core.set_stamp_wait(*self._past_loader(c))
            else:
                core.set_stamper(*self._stamper(c))
        niu_registers = [(n.base, n.regs) for n in self.nius]
        for c, core in self.cores.items():                   # run() in C between MMIO and pushes, where built
            # a TRISC's store to its own push window is what its `.ttinsn` push is (_push_store -> _push, whose
            # timeline naming of the pusher is the TRISC's own anyway): the C part's runner calls the pusher for it
            window = (layout.INSTRN_BUF_BASE, PUSH_WINDOW, self._pusher(c)) if c in TRISC_THREAD else None
            rv32_native.attach(core, niu_registers, window, self._direct_push(c), self._niu_loads(), self._niu_sends())
        self.set_timed(chip.timed)

    def _stamper(self, who: str) -> tuple[Callable[[int, int], None], np.ndarray, Callable[[], int]]:
        """RV32Core.set_stamper's arguments for `who`: its L1 stores stamp their line with now()."""
        core, stamps, tbase, stall = self.cores[who], self.l1_stamp, self._tbase, self._stall

        log_write = self._log_write

        def stamp(addr: int, pos: int) -> None:
            stamps[addr >> STAMP_SHIFT] = tbase[who] + core.instret + stall[who] + pos

        def stamp_logged(addr: int, pos: int) -> None:       # (called before the store: the log keeps the old word)
            t = stamps[addr >> STAMP_SHIFT] = tbase[who] + core.instret + stall[who] + pos
            log_write(addr, t)
        base = self._stamp_bases[who] = lambda: tbase[who] + core.instret + stall[who]    # (the C round's own)
        return stamp_logged if CAUSAL_LOADS else stamp, stamps, base

    def _log_write(self, addr: int, cycle: int) -> None:
        """Log a RISC-V store to L1 `addr` at `cycle`, before it lands (rv32_native.c log_write likewise)."""
        n = int(self.l1_log_n[0])
        i = 4 * (n % WRITE_LOG)
        word, line = addr & ~3, addr >> STAMP_SHIFT
        self.l1_log[i:i + 4] = (line, cycle, word, int(self.l1_array[word:word + 4].view(np.uint32)[0]))
        self.l1_log_n[0] = n + 1
        self.l1_log_prev[n % WRITE_LOG] = self.l1_log_head[line]       # (the index; causal_log.h log_index)
        self.l1_log_head[line] = n + 1

    def l1_at(self, addr: int, n: int, cycle: int) -> bytes | None:
        """The n bytes at L1 `addr` (inside one aligned word) as they were at `cycle`: the stores logged after it
        undone, newest first, down to the newest store at or before it. None when that is not known: the line's last
        write is not a logged RISC-V store (a NoC transfer, whose data the log does not keep) and came after
        `cycle`, or the ring no longer holds every later store."""
        word, line = addr & ~3, addr >> STAMP_SHIFT
        if int(self.l1_stamp[line]) <= cycle:                 # (no later write, as the poll of a frozen core finds)
            return self.l1_array[addr:addr + n].tobytes()
        count = int(self.l1_log_n[0])
        log = self.l1_log.reshape(WRITE_LOG, 4)
        hits = np.flatnonzero(log[:min(count, WRITE_LOG), 0] == line)
        head = count % WRITE_LOG                              # ring positions below it are the newest
        order = np.concatenate((hits[hits < head][::-1], hits[hits >= head][::-1]))     # newest first
        value = int(self.l1_array[word:word + 4].view(np.uint32)[0])
        logged_last = 0
        complete = count <= WRITE_LOG
        for _, t, w, old in log[order].tolist():
            logged_last = max(logged_last, t)
            if t <= cycle:
                complete = True
                break
            if w == word:
                value = old
        if int(self.l1_stamp[line]) > max(logged_last, cycle) or not complete:
            return None
        return value.to_bytes(4, "little")[addr - word:addr - word + n]

    def first_write_after(self, addr: int, cycle: int) -> int | None:
        """The cycle of the earliest logged store to the word at L1 `addr` after `cycle`, None if there is none."""
        log = self.l1_log.reshape(WRITE_LOG, 4)[:min(int(self.l1_log_n[0]), WRITE_LOG)]
        later = log[(log[:, 2] == addr & ~3) & (log[:, 1] > cycle), 1]
        return int(later.min()) if later.size else None

    def _past_loader(self, who: str) -> tuple[Callable[..., int], Callable[[int, int], None]]:
        """RV32Core.set_stamp_wait's arguments for `who` (the causal-load rule, timed mode only): an aligned load
        reads the word as it was at the core's cycle (l1_at); where that is not known, and for an atomic or a
        misaligned load, the core waits until the line's last write instead (its stamp)."""
        core, tbase, stall, l1 = self.cores[who], self._tbase, self._stall, self.l1_array

        def wait(addr: int, pos: int) -> None:
            t = tbase[who] + core.instret + stall[who] + pos
            written = int(self.l1_stamp[addr >> STAMP_SHIFT])
            if written > t and self._latency_of:
                stall[who] += written - t
                if self.rec is not None:
                    self.rec.core_stall(who, t, written, tl.LOAD_WAIT)

        def past(addr: int, size: int, signed: bool, pos: int, waits: bool = True) -> int:
            raw = self.l1_at(addr, size, tbase[who] + core.instret + stall[who] + pos) if self._latency_of else None
            if raw is None:
                if waits:
                    wait(addr, pos)
                raw = l1[addr:addr + size].tobytes()
            value = int.from_bytes(raw, "little", signed=signed)
            return value & 0xFFFFFFFF

        return past, wait

    def _pusher(self, who: str):
        """push(pos, word): push_tensix(who, word) specialised for one core, called by rv32's generated code with the
        position of the push inside the running quantum (what core.pos would hold): _push with now() and
        _wait_until inlined, same effects and errors."""
        thread = THREAD_OF[who]
        core = self.cores[who]
        stall, tbase, pushes, waits = self._stall, self._tbase, self.tensix_pushes, self._wait
        tpush = self.tensix.push
        if not self._timed:                                   # no cycle model (a stand-in Tensix): nothing to inline
            return lambda _pos, word: self._push(who, thread, word)

        def push(pos: int, word: int) -> None:
            t = tbase[who] + core.instret + stall[who] + pos
            try:
                a = tpush(thread, word, t)
            except Stall:
                waits[who] = FIFO_FULL.format(thread)
                raise
            if a > t:                                         # FIFO full in modelled time: the core waits
                stall[who] += a - t
            pushes[thread] += 1
        return push

    def _direct_push(self, who: str) -> tuple | None:
        """rv32_native.attach's direct_push for `who`: the C core hands its `.ttinsn` runs to the Tensix's plain_run
        itself, doing _multi_pusher's accounting, where the Tensix's push_run would call plain_run
        (DirectIssueMixin.c_push_entry, whose switches are read here, when the tile is built); None for a core without a
        thread or a Tensix without that path. The words plain_run leaves C hands to the Tensix's push_many where the
        core's PUSHM is still _multi_pusher's pusher, doing its accounting too. With it C also serves the core's
        semaphore loads, TTSync loads and stores and semaphore stores (_pcbuf_load's and _pcbuf_store's, the
        reference)."""
        thread = THREAD_OF.get(who)
        entry = getattr(self.tensix, "c_push_entry", None) if self._timed else None
        entry = entry() if thread is not None and entry is not None else None
        if entry is None:
            return None
        capsule, facts, progress, allowed = entry
        # the PC buffer accesses C may serve, a TRISC's, with the window's one MMIO latency: the semaphore loads
        # (rv32_native.c sem_load), the TTSync loads and stores and the semaphore stores (ttsync_load, pcbuf_store)
        extra = {riscv_mmio_extra(a) for a in (layout.TENSIX_SYNC, *range(layout.SEMAPHORE_BASE, layout.SEMAPHORE_BASE
                                                                            + 4 * N_SEMAPHORES, 4))}
        loads, stores = rv32_native.SEM_LOADS_NATIVE, rv32_native.PCBUF_NATIVE
        # (and the TTSync load's thread_idle and thread_done answered there while they are these methods)
        refs = TTSYNC_METHODS if rv32_native.TTSYNC_NATIVE else None
        sems = (self, layout.SEMAPHORE_BASE, N_SEMAPHORES, *extra, loads, layout.TENSIX_SYNC if stores else 0,
                TTSYNC_WAIT.format(thread), rv32_native.SEM_STORES_NATIVE, refs) \
            if (loads or stores) and who in TRISC_THREAD and len(extra) == 1 else None
        # while the core's PUSHM is this tile's pusher, C calls the push_many it calls itself, with its accounting
        # (rv32_native.c direct_many)
        many = self._many_pushers.get(who, (None, None)) if rv32_native.DIRECT_MANY_NATIVE else (None, None)
        # the opcodes whose words never have plain_run's facts: C skips their look-up (rv32_native.c plain_takes)
        never = self.tensix.never_plain_ops() if rv32_native.NEVER_PLAIN_NATIVE else None
        runs = {} if rv32_native.KEPT_RUNS_NATIVE else None   # the core's runs' word tuples by pc (C's run_words)
        return (capsule, self.tensix, thread, facts, progress, self._stall, self.tensix_pushes, self._wait,
                FIFO_FULL.format(thread), allowed, sems, *many, never, runs)

    def _niu_loads(self) -> tuple | None:
        """rv32_native.attach's niu_loads: what the C core needs to serve its loads of the NIUs' response counters and
        NOC_CMD_CTRL as mmio_load -> _niu_load do (rv32_native.NIU_LOADS_NATIVE, read when the tile is built), or
        None."""
        extra = {riscv_mmio_extra(n.base + NIU_COUNTER_BASE + 4 * c) for n in self.nius for c in RESPONSE_COUNTERS}
        if not rv32_native.NIU_LOADS_NATIVE or len(extra) != 1:
            return None
        return (self, self._stall, *extra, *(v for n, due, seen in zip(self.nius, self._niu_due, self._niu_seen)
                                             for v in (n.base, n.counters, due, seen)))

    def _niu_sends(self) -> tuple | None:
        """rv32_native.attach's niu_sends: what the C core needs to make its sends with their time as mmio_store ->
        _niu_store do (noc_native.issue, read when the tile is built), or None."""
        if self._issue is None:
            return None
        return (self._issue[1], self, self._stall, *(v for n, timing in zip(self.nius, self._issue_timing)
                                                    for v in (n.base, n._c_context, timing)))

    def _multi_pusher(self, who: str):
        """push(pos, words): the _pusher calls for a run of consecutive `.ttinsn` words at positions pos, pos + 1, ...
        in one call (Tensix.push_many when the model has it). If word j raises, words 0..j-1 took full effect (stall
        included) and `core.sub = j` tells rv32's block which instruction to resume at / blame."""
        thread = THREAD_OF[who]
        core = self.cores[who]
        stall, tbase, pushes, waits = self._stall, self._tbase, self.tensix_pushes, self._wait
        tx = self.tensix
        many = getattr(tx, "push_many", None) if self._timed else None
        if many is None:
            single = self._pusher(who)

            def push(pos: int, words: tuple) -> None:
                j = 0
                try:
                    for word in words:
                        single(pos + j, word)
                        j += 1
                except BaseException:
                    core.sub = j
                    raise
            return push

        def push(pos: int, words: tuple) -> None:
            t0 = tbase[who] + core.instret + stall[who] + pos     # t_j = t0 + j + stall gained since word 0
            try:
                t = many(thread, words, t0)
            except BaseException as e:
                j = core.sub = tx.pm_done
                stall[who] += tx.pm_t - t0 - j
                pushes[thread] += j
                if isinstance(e, Stall):
                    waits[who] = FIFO_FULL.format(thread)
                raise
            stall[who] += t - t0 - len(words)
            pushes[thread] += len(words)
        self._many_pushers[who] = push, many                 # (what C may call in push's place: _direct_push)
        return push

    # ------------------------------------------------------------------ MMIO routing

    def _build_mmio_table(self) -> None:
        # (start, end, name, load, store, any_size); any_size marks RAM-like ranges that accept 8/16-bit accesses
        table = [
            (layout.MEM_LOCAL_BASE, layout.MEM_LOCAL_BASE + 0x2000, "local RAM", self._local_load, self._local_store,
             True),
            (CTRL_BASE, CTRL_BASE + 0x1000, "tile control", self._ctrl_load, self._ctrl_store, False),
            (ALIAS_BASE, ALIAS_END, "local RAM alias", self._alias_load, self._alias_store, True),
            (layout.NOC_BASE[0], layout.NOC_BASE[0] + NIU_WINDOW, "NoC0 NIU",
             lambda who, a: self._niu_load(0, who, a), lambda who, a, v: self._niu_store(0, who, a, v), False),
            (layout.NOC_BASE[1], layout.NOC_BASE[1] + NIU_WINDOW, "NoC1 NIU",
             lambda who, a: self._niu_load(1, who, a), lambda who, a, v: self._niu_store(1, who, a, v), False),
            (layout.MOP_CFG_BASE, layout.MOP_CFG_BASE + 4 * layout.MOP_CFG_WORDS, "MOP config", None, self._mop_store, False),
            (layout.REGFILE_BASE, layout.REGFILE_BASE + 0x1000, "Tensix GPRs", self._gpr_load, self._gpr_store, False),
            (layout.INSTRN_BUF_BASE, layout.INSTRN_BUF_BASE + 0x30000, "instruction push", None, self._push_store,
             False),
            (layout.PC_BUF_BASE, layout.PC_BUF_BASE + 0x10000, "PC buffer / TTSync / semaphores", self._pcbuf_load,
             self._pcbuf_store, False),
            (layout.TENSIX_CFG_BASE, layout.TENSIX_CFG_BASE + 0x10000, "Tensix config", self._cfg_load,
             self._cfg_store, False),
            (DST_RISCV_BASE, DST_RISCV_BASE + DST_RISCV_SIZE, "Dst (RISC-V view)", self._dst_load, self._dst_store,
             True),
            (mb.BASE, mb.BASE + mb.SIZE, "mailboxes", self._mailbox_load, self._mailbox_store, False),
        ]
        table.sort()
        self._mmio = table
        self._mmio_starts = [t[0] for t in table]
        # (who, addr, size, store) -> a store's handler, a load's (handler, latency); only valid routes cached
        self._routes: dict[tuple, Callable | tuple[Callable, int]] = {}

    def _route(self, who: str, addr: int, size: int, store: bool):
        i = bisect.bisect_right(self._mmio_starts, addr) - 1
        if i >= 0:
            start, end, name, load, st, any_size = self._mmio[i]
            if addr < end:
                handler = st if store else load
                if handler is None:
                    raise EmuUndefined(f"{who}: {name} at 0x{addr:08X} is {'read' if store else 'write'}-only")
                if not any_size and size != 4:
                    raise EmuUndefined(f"{who}: {8 * size}-bit MMIO {'write' if store else 'read'} at 0x{addr:08X} "
                                       f"({name}): only 32-bit accesses are allowed")
                if addr % size:
                    raise EmuUnspecified(f"{who}: unaligned {size}-byte access at 0x{addr:08X} ({name})")
                # RAM-like handlers take the access size as a last argument
                return (lambda *a: handler(*a, size)) if any_size else handler
        kind = "write" if store else "read"
        if layout.L1_SIZE <= addr < layout.MEM_LOCAL_BASE:
            raise EmuUndefined(f"{who}: {kind} at 0x{addr:08X} is beyond L1 (0x{layout.L1_SIZE:X})")
        raise EmuUnimplemented(f"{who}: {size}-byte {kind} at 0x{addr:08X}: address not mapped in the emulator")

    # Bus contract (called by RV32Core)
    def local_ram(self, core: str) -> memoryview:
        return self._local_mv[core]

    def mmio_load(self, core: str, addr: int, size: int) -> int:
        key = (core, addr, size, False)
        route = self._routes.get(key)
        if route is None:       # (the handler, the address's load latency: BabyRISCV/README.md)
            extra = riscv_mmio_extra(addr)
            try:
                route = self._routes[key] = self._route(core, addr, size, False), extra
            except EmuError:
                if core in self._latency_of:
                    self._stall[core] += extra         # a faulting load is charged its latency too
                raise
        handler, extra = route
        if core not in self._latency_of:
            return handler(core, addr)
        self._stall[core] += extra
        if not extra or self.rec is None:
            return handler(core, addr)
        t0 = self.now(core) - extra                            # the timeline's stall starts before the latency
        value = handler(core, addr)      # recorded once the load returns: a blocked mailbox read takes it back
        self.rec.core_stall(core, t0, t0 + extra, tl.MMIO_LATENCY)
        return value

    def mmio_store(self, core: str, addr: int, size: int, value: int) -> None:
        key = (core, addr, size, True)
        handler = self._routes.get(key)
        if handler is None:
            handler = self._routes[key] = self._route(core, addr, size, True)
        handler(core, addr, value)

    def push_tensix(self, core: str, word: int) -> None:
        """A `.ttinsn` (or store to the core's own push window): enqueue `word` on the core's Tensix thread."""
        self._push(core, THREAD_OF.get(core), word)

    # ------------------------------------------------------------------ handlers

    def _ctrl_load(self, who: str, addr: int) -> int:
        if addr == layout.SOFT_RESET_0:
            return self.soft_reset
        if addr in layout.TRISC_RESET_PC:
            return self.trisc_reset_pc[layout.TRISC_RESET_PC.index(addr)]
        if addr == layout.TRISC_RESET_PC_OVERRIDE:
            return self.trisc_override
        if addr == layout.WALL_CLOCK_LO:
            return self.now(who) & 0xFFFFFFFF
        if addr == layout.WALL_CLOCK_HI:
            return (self.now(who) >> 32) & 0xFFFFFFFF
        if addr in (layout.NCRISC_RESET_PC, layout.NCRISC_RESET_PC_OVERRIDE):
            raise EmuUndefined(f"{who}: NCRISC_RESET_PC(_OVERRIDE) at 0x{addr:08X} is write-only (ttsim: fatal read)")
        raise EmuUnimplemented(f"{who}: read of tile control register 0x{addr:08X} is not modelled")

    def _ctrl_store(self, who: str, addr: int, value: int) -> None:
        if addr == layout.SOFT_RESET_0:
            self._write_soft_reset(who, value)
        elif addr in layout.TRISC_RESET_PC:
            self.trisc_reset_pc[layout.TRISC_RESET_PC.index(addr)] = value
        elif addr == layout.TRISC_RESET_PC_OVERRIDE:
            self.trisc_override = value & 7
        elif addr == layout.NCRISC_RESET_PC:
            self.ncrisc_reset_pc = value
        elif addr == layout.NCRISC_RESET_PC_OVERRIDE:
            self.ncrisc_override = value & 1
        elif addr == DISABLE_RESET:
            raise EmuUnimplemented(f"{who}: writing DISABLE_RESET is not supported (ttsim: UnsupportedFunctionality)")
        else:
            raise EmuUnimplemented(f"{who}: write of tile control register 0x{addr:08X} (value 0x{value:X}) is not "
                                   f"modelled")

    def reset_pc(self, core: str) -> int:
        if core in TRISC_THREAD:
            i = TRISC_THREAD[core]
            return self.trisc_reset_pc[i] if self.trisc_override >> i & 1 else layout.DEFAULT_RESET_PC[core]
        if core == "ncrisc":
            return self.ncrisc_reset_pc if self.ncrisc_override else layout.DEFAULT_RESET_PC[core]
        return layout.DEFAULT_RESET_PC[core]

    def _write_soft_reset(self, who: str, value: int) -> None:
        if value & ~WRITABLE_RESET_BITS:
            raise EmuUnimplemented(f"{who}: SOFT_RESET_0=0x{value:x}: only the RISC-V bits "
                                   f"0x{layout.ALL_CORES_RESET:X} may be written (coprocessor reset bits are fatal in "
                                   f"ttsim)")
        new = value & layout.ALL_CORES_RESET
        old, self.soft_reset = self.soft_reset, new
        if old == layout.ALL_CORES_RESET != new and all(t.soft_reset == layout.ALL_CORES_RESET
                                                        for t in self.chip.tiles.values() if t is not self):
            # the first release of a launch: every core starts at the chip's clock or later, so do its transfers
            self.chip.fabric.forget_before(self.chip.clock)
        for core, bit in CORE_BITS.items():
            if new & bit and not old & bit:               # SoftReset.md: entering reset discards its mailboxes
                self.mailboxes.discard_writable(core)
                if core in self._mb_full:
                    self._mb_full[core] = False
            if old & bit and not new & bit:               # release is edge-triggered: 1 -> 0 starts at the reset PC
                self.clock = max(self.clock, self.chip.clock)   # at the chip's time (its tiles share one time base)
                if CAUSAL_LOADS and who in self.cores:        # and not before the releasing store: the released
                    self.clock = max(self.clock, self.now(who))   # core reads what its releaser wrote before it
                self.cores[core].reset(self.reset_pc(core))
                self._tbase[core] = self.clock - self.cores[core].instret
                self._stall[core] = 0
                self._frozen.pop(core, None)
                self._self_timed.discard(core)
                self._poll_again.pop(core, None)
                if self.rec is not None:
                    self.rec.released[core] = self.clock
                self._wait[core] = self._fault[core] = ""
        if who in CORE_BITS and new & CORE_BITS[who]:
            # a core that asserts its own reset stops at once: end its quantum; the retried store is dropped because
            # release restarts it at the reset PC
            raise Stall()

    def _local_slot(self, who: str, addr: int, size: int) -> tuple[np.ndarray, int]:
        # the cores reach their own RAM directly; this path only sees the host and out-of-range accesses
        if who not in self.local:
            raise EmuUndefined(f"{who}: local RAM at 0x{addr:08X} is private to each core (use the 0xFFB14000 alias)")
        ram, off = self.local[who], addr - layout.MEM_LOCAL_BASE
        if off + size > ram.size:
            raise EmuUndefined(f"{who}: 0x{addr:08X} is beyond its {ram.size // 1024} KiB local RAM")
        return ram, off

    def _local_load(self, who: str, addr: int, size: int) -> int:
        ram, off = self._local_slot(who, addr, size)
        return int.from_bytes(ram[off:off + size].tobytes(), "little")

    def _local_store(self, who: str, addr: int, value: int, size: int) -> None:
        ram, off = self._local_slot(who, addr, size)
        ram[off:off + size] = np.frombuffer((value & ((1 << 8 * size) - 1)).to_bytes(size, "little"), np.uint8)

    def _alias_slot(self, who: str, addr: int, size: int) -> tuple[np.ndarray, int]:
        slot, off = divmod(addr - ALIAS_BASE, 0x2000)
        ram = self.local[ALIAS_SLOTS[slot]]
        off %= ram.size                                   # a TRISC's 4 KiB repeats in the upper half of its slot
        if addr % size:
            raise EmuUnspecified(f"{who}: unaligned {size}-byte access at 0x{addr:08X} (local RAM alias)")
        return ram, off

    def _alias_load(self, who: str, addr: int, size: int) -> int:
        ram, off = self._alias_slot(who, addr, size)
        return int.from_bytes(ram[off:off + size].tobytes(), "little")

    def _alias_store(self, who: str, addr: int, value: int, size: int) -> None:
        ram, off = self._alias_slot(who, addr, size)
        ram[off:off + size] = np.frombuffer((value & ((1 << 8 * size) - 1)).to_bytes(size, "little"), np.uint8)

    def _thread(self, who: str, what: str, cores=THREAD_OF) -> int:
        if who not in cores:
            raise EmuUndefined(f"{who}: {what} is not mapped for {who}")
        return cores[who]

    def _mop_store(self, who: str, addr: int, value: int) -> None:
        t = self._thread(who, "MOP config (0xFFB80000)", TRISC_THREAD)
        self.tensix.mop_cfg_write(t, (addr - layout.MOP_CFG_BASE) >> 2, value)

    def _gpr_index(self, who: str, addr: int) -> tuple[int, int]:
        off = addr - layout.REGFILE_BASE
        if who == "brisc":
            # ScalarUnit.md "RISCV access to GPRs": RISCV B sees the whole GPRs[3][64] array at REGFILE_BASE
            t, i = divmod(off >> 2, GPR_COUNT)
            if t >= 3:
                raise EmuUndefined(f"{who}: GPR address 0x{addr:08X} is beyond GPRs[3][64] (REGFILE_BASE + 0x300); "
                                   f"what BRISC sees there is not documented")
            return t, i
        t = self._thread(who, "Tensix GPR access", TRISC_THREAD)
        # RISCV T_i sees GPRs[i]; MemoryOrdering.md ("Aliasing of underlying storage"): each GPR appears several
        # times, at X and X + 256, so the 4 KiB range repeats the 64 GPRs
        return t, (off % GPR_ALIAS) >> 2

    def _gpr_load(self, who: str, addr: int) -> int:
        return self.tensix.gpr_read(*self._gpr_index(who, addr))

    def _gpr_store(self, who: str, addr: int, value: int) -> None:
        t, i = self._gpr_index(who, addr)
        self.tensix.gpr_write(t, i, value)

    def _push_store(self, who: str, addr: int, value: int) -> None:
        window = (addr - layout.INSTRN_BUF_BASE) // PUSH_WINDOW   # 0: own thread, 1/2: BRISC into T1/T2
        if window == 0:
            self._push(who, THREAD_OF.get(who), value)
        elif who == "brisc":
            self._push(who, window, value)
        else:
            raise EmuDeadlock(f"{who}: store to INSTRN{window}_BUF (0x{addr:08X}): only BRISC may push there (a TRISC "
                              f"hangs on hardware)")

    def _push(self, who: str, thread: int | None, word: int) -> None:
        if thread is None:
            raise EmuUndefined(f"{who}: cannot push Tensix instructions (no instruction buffer); word 0x{word:08X}")
        try:
            if self._timed:
                t = self.now(who)
                if self.rec is not None:                  # a FIFO-full wait is recorded by the cycle model's accept
                    self.rec.pusher[thread] = who
                self._wait_until(who, self.tensix.push(thread, word, t))   # FIFO full in modelled time
                if self.rec is not None:
                    self.rec.pusher[thread] = f"trisc{thread}"
            else:
                self.tensix.push(thread, word)
        except Stall:
            self._wait[who] = FIFO_FULL.format(thread)
            raise
        self.tensix_pushes[thread] += 1

    def _pcbuf_load(self, who: str, addr: int) -> int:
        off = addr - layout.PC_BUF_BASE
        if off == layout.TENSIX_SYNC - layout.PC_BUF_BASE:
            t = self._thread(who, "TTSync (0xFFE80004)")
            if not self.tensix.thread_idle(t):
                self._wait[who] = TTSYNC_WAIT.format(t)
                raise Stall()
            if self._timed:
                self._wait_until(who, self.tensix.thread_done(t), tl.TTSYNC)
            return 0
        i = self._sem_index(who, addr)
        value = self.tensix.sem_read(i)
        if value and self._timed:
            self._wait_until(who, self.tensix.sem_posted_at(i), tl.SEM_WAIT)   # a post seen only from its cycle
        return value

    def _pcbuf_store(self, who: str, addr: int, value: int) -> None:
        if addr == layout.TENSIX_SYNC:
            # ManualTTSync.md: a store to CoprocessorDoneCheck is discarded; software issues it so that the following
            # load cannot overtake older instruction pushes. Nothing to model beyond accepting it.
            self._thread(who, "TTSync (0xFFE80004)")
            return
        if self._timed:
            self.tensix.sem_mmio_write(self._sem_index(who, addr), value, self.now(who))
        else:
            self.tensix.sem_mmio_write(self._sem_index(who, addr), value)

    def _sem_index(self, who: str, addr: int) -> int:
        i = (addr - layout.SEMAPHORE_BASE) >> 2
        if not 0 <= i < N_SEMAPHORES:
            raise EmuUnimplemented(f"{who}: PC buffer / TTSync register 0x{addr:08X} is not modelled")
        self._thread(who, "the Tensix semaphores", TRISC_THREAD)
        return i

    def _cfg_load(self, who: str, addr: int) -> int:
        if who == "ncrisc":
            raise EmuUndefined(f"{who}: Tensix config (0x{addr:08X}) is not mapped for ncrisc")
        return self.tensix.cfg_read((addr - layout.TENSIX_CFG_BASE) >> 2)

    def _cfg_store(self, who: str, addr: int, value: int) -> None:
        if who == "ncrisc":
            raise EmuUndefined(f"{who}: Tensix config (0x{addr:08X}) is not mapped for ncrisc")
        self.tensix.cfg_write((addr - layout.TENSIX_CFG_BASE) >> 2, value)

    # ---- Dst, RISC-V view (Dst.md "RISCV access to Dst")
    def _dst_ctrl(self, who: str, addr: int) -> tuple[int, tuple[int, int, int]]:
        t = self._thread(who, f"the Dst window (0x{addr:08X}; Dst.md: RISCV T0/T1/T2 only)", TRISC_THREAD)
        if self._dst_view is None:
            raise EmuUnimplemented(f"{who}: Dst window at 0x{addr:08X}: this Tensix model has no Dst")
        tx = self.tensix
        if tx.thread_cfg(t, 0) & 1:
            raise EmuUnimplemented(f"{who}: Dst access with CFG_STATE_ID_StateID=1 (config state bank 1)")
        if tx.cfg_read(CFG_DEST_ACCESS_CFG) & 3:
            raise EmuUnimplemented(f"{who}: Dst access with DEST_ACCESS_CFG remap_addrs/swizzle_32b = "
                                   f"{tx.cfg_read(CFG_DEST_ACCESS_CFG) & 3} (Adj16/Adj32 remapping)")
        ctrl = tx.cfg_read(CFG_RISC_DEST_ACCESS_CTRL) >> (14 + 5 * t)
        return t, ((ctrl >> 2) & 7, ctrl & 1, (ctrl >> 1) & 1)      # fmt, no_swizzle, unsigned_int

    def _dst_race(self, who: str, t: int, addr: int, size: int, elem: int) -> None:
        """Strict + cycle model: the emulator executes Tensix instructions when they are pushed, silicon later. A
        RISC-V Dst access while, in modelled time, this TRISC's own thread has instructions not yet issued, an FPU
        write to the same 8-row block has not landed (Dst.md: 4 cycles), or SFPU macro work is pending, would see
        a different Dst than silicon does: an EmuError naming the rule (wait with TTSync / a semaphore first)."""
        tx = self.tensix
        if not self._timed or not getattr(tx, "strict", False):
            return
        now = self.now(who)
        where = f"{who}: RISC-V Dst access at 0x{addr:08X}"
        if tx.tm.first[t] is not None and tx.tm.clock[t] >= now:
            raise EmuUndefined(f"{where} at cycle {now} while Tensix thread {t} still issues instructions this core "
                               f"pushed (last issue at cycle {tx.tm.clock[t]}): RISC-V and Tensix execution are "
                               f"asynchronous (ScalarUnit.md); read TTSync (0xFFE80004) before touching Dst")
        sfpu = getattr(tx, "raw_sfpu", None)
        if sfpu is not None and sfpu.scheduled:
            raise EmuUndefined(f"{where}: SFPLOADMACRO-scheduled SFPU work is still pending; the access would race it")
        for r in self._dst_view.rows32_of(addr - DST_RISCV_BASE, size, elem):
            w = tx.tm.dst_fpu_write.get(r >> 3)
            if w is not None and now < w + FPU_DST_READ_LATENCY:
                raise EmuUndefined(f"{where} at cycle {now}: Dst32b row {r} was written by the FPU at cycle {w} "
                                   f"(Dst.md: a written 8x16 block cannot be read for 4 cycles; the RISC-V access "
                                   f"is not interlocked)")

    def _dst_load(self, who: str, addr: int, size: int) -> int:
        t, ctrl = self._dst_ctrl(who, addr)
        if ctrl[0] in DST_RISCV_ELEM:                        # (a reserved fmt is reported by the view)
            self._dst_race(who, t, addr, size, DST_RISCV_ELEM[ctrl[0]])
        return self._dst_view.load(who, addr - DST_RISCV_BASE, size, ctrl, who == "trisc2",
                                   getattr(self.tensix, "strict", True))

    def _dst_store(self, who: str, addr: int, value: int, size: int) -> None:
        t, ctrl = self._dst_ctrl(who, addr)
        if ctrl[0] in DST_RISCV_ELEM:
            self._dst_race(who, t, addr, size, DST_RISCV_ELEM[ctrl[0]])
        self._dst_view.store(who, addr - DST_RISCV_BASE, size, value, ctrl, who == "trisc2")

    # ---- mailboxes (mailbox.py)
    def _mailbox_load(self, who: str, addr: int) -> int:
        value, push_t, why, writer = self.mailboxes.read(who, addr)
        if value is None:
            if who in self._latency_of:
                self._stall[who] -= riscv_mmio_extra(addr)     # the retried load is charged once, when it returns
            self._wait[who] = why
            raise Stall()
        if addr & 4 == 0 and who in self._stall:
            self._wait_until(who, push_t, tl.MAILBOX_WAIT)     # a blocked pop returns once the value is there
            self.mailboxes.note_freed(writer, self.now(who))
        return value

    def _mailbox_store(self, who: str, addr: int, value: int) -> None:
        why = self.mailboxes.write(who, addr, value, self.now(who))
        if why is not None:
            self._mb_full[who] = True
            self._wait[who] = f"mailbox write: {why}"
            raise Stall()
        if self._mb_full.get(who):
            self._mb_full[who] = False
            self._wait_until(who, self.mailboxes.freed_at[who], tl.MAILBOX_WAIT)

    # an NIU (this tile's or another tile's) reaches the registers as the host would (4-byte NoC transfers to MMIO)
    def noc_mmio_read32(self, addr: int) -> int:
        return self._route("noc", addr, 4, False)("noc", addr)

    def noc_mmio_write32(self, addr: int, value: int) -> None:
        self._route("noc", addr, 4, True)("noc", addr, value)

    # ------------------------------------------------------------------ host access (as through a TLB window)

    def _l1_range(self, addr: int, n: int) -> None:
        if addr < 0 or addr + n > layout.L1_SIZE:
            raise EmuUndefined(f"host: L1 access 0x{addr:X}+{n} is beyond L1 (0x{layout.L1_SIZE:X})")

    def write_l1(self, addr: int, data) -> None:
        src = as_bytes(data)
        self._l1_range(addr, src.size)
        self.l1_array[addr:addr + src.size] = src

    def read_l1(self, addr: int, n: int) -> bytes:
        self._l1_range(addr, n)
        return self.l1_array[addr:addr + n].tobytes()

    def write32(self, addr: int, value: int) -> None:
        if addr % 4:
            raise EmuUnspecified(f"host: unaligned 32-bit write at 0x{addr:08X}")
        value &= 0xFFFFFFFF
        if addr < layout.L1_SIZE:
            self.l1_array[addr:addr + 4] = np.frombuffer(value.to_bytes(4, "little"), np.uint8)
        else:
            self._check_host_mmio(addr)
            self._route(HOST, addr, 4, True)(HOST, addr, value)

    def read32(self, addr: int) -> int:
        if addr % 4:
            raise EmuUnspecified(f"host: unaligned 32-bit read at 0x{addr:08X}")
        if addr < layout.L1_SIZE:
            return int.from_bytes(self.l1_array[addr:addr + 4].tobytes(), "little")
        self._check_host_mmio(addr)
        return self._route(HOST, addr, 4, False)(HOST, addr)

    def _check_host_mmio(self, addr: int) -> None:
        # registers that belong to "the core doing the access" have no meaning for the host
        own = (layout.MOP_CFG_BASE, layout.REGFILE_BASE, layout.INSTRN_BUF_BASE, layout.PC_BUF_BASE)
        for start, end, name, *_ in self._mmio:
            if start <= addr < end and start in own:
                raise EmuUndefined(f"host: {name} at 0x{addr:08X} is only reachable from a RISC-V core")

    # ------------------------------------------------------------------ scheduler

    @property
    def instructions(self) -> dict[str, int]:
        """RISC-V instructions retired per core, kept across launches."""
        return {c: core.instret for c, core in self.cores.items()}

    def running(self, core: str) -> bool:
        return not self.soft_reset & CORE_BITS[core] and not self.cores[core].parked and not self._fault[core]

    def active(self) -> bool:
        """Something here can still run: a released core that is neither parked nor faulted, or Tensix work."""
        return any(self.running(c) for c in self.cores) or self._tensix_busy()

    def _tensix_busy(self) -> bool:
        idle = self.tensix.thread_idle          # (asked after every quantum: no generator)
        return not (idle(0) and idle(1) and idle(2))

    def run(self, max_instructions: int) -> int:
        """Run until every released core is parked (and the Tensix has nothing it can do), or about
        `max_instructions` RISC-V + Tensix instructions have retired, or nothing can make progress (all waiting).
        Returns the instructions retired (RISC-V + Tensix)."""
        native = self._native_rounds()
        if native is not None:
            return native(max_instructions)
        total = 0
        tensix, busy = self.tensix, self._tensix_busy
        while total < max_instructions:
            before = list(tensix.instructions)     # pushes execute inside push(), so count by difference
            riscv, progress, spinners = self._round(max_instructions - total)
            if busy():
                tensix.step()
            per_thread = [a - b for a, b in zip(tensix.instructions, before)]
            total += riscv + sum(per_thread)
            self._catch_up(spinners)
            self._advance_clock()
            if progress == 0 and not any(per_thread):   # everyone parked, spinning, in reset or blocked
                self._nothing_progressed(spinners)
                break
        return total

    def _nothing_progressed(self, spinners: list[str]) -> None:
        """The end of run() after a round in which no core and no Tensix thread progressed: a deadlock unless a core
        spins (it may wait for the host); with nothing left to issue, scheduled SFPU work runs out."""
        if not spinners:
            self._check_deadlock()
        if not self._tensix_busy() and hasattr(self.tensix, "settle"):
            self.tensix.settle()
            self._advance_clock()

    def _round(self, left: int) -> tuple[int, int, list[str]]:
        """One round of run(): each released core a quantum in turn (of at most `left` RISC-V instructions in all),
        the Tensix stepped after each. Returns (RISC-V instructions retired, those of cores that did not end
        spinning, the cores that spin or stay frozen). The reference of rv32_native.c run_rounds (ROUND_NATIVE)."""
        riscv = progress = 0
        spinners = []
        tensix, cores, frozen, fault = self.tensix, self.cores, self._frozen, self._fault
        busy, wait, self_timed, pops_of = self._tensix_busy, self._wait, self._self_timed, self.mailboxes.pops
        # least advanced core first: the caller's budget may end the round after one core's quantum (Chip.run's
        # slices are one quantum), and a core that always ran first would race ahead in emulated time while the
        # others wait their turn; its L1 stores (a CB counter) would then be seen by cores still far behind it
        for name in sorted(cores, key=self.cycles):
            core = cores[name]
            if self.soft_reset & CORE_BITS[name] or core.parked or fault[name]:     # (not self.running(name))
                continue
            if name in frozen and not self._thaw(name):
                spinners.append(name)     # what its wait loop reads is unchanged: it would spin again
                continue
            wait[name] = ""
            self_timed.discard(name)
            pops = pops_of.get(name)
            try:     # (core.run: the native runner's when the core has one)
                n = (core.native or core).run(min(self.quantum, left - riscv))
            except EmuError as e:
                self._core_failed(name, e)
            riscv += n
            if core.spinning and pops != pops_of.get(name):
                core.spinning = False      # a store-free loop that pops a mailbox changes state: not a spin
            if core.spinning and self._freeze(name):
                spinners.append(name)
                wait[name] = SPINNING
            else:
                progress += n
                if self._poll_again and not core.spinning:
                    self._poll_again.pop(name, None)      # it left the loop it polled once more
            if busy():
                tensix.step()
            if riscv >= left:
                break
        return riscv, progress, spinners

    def _core_failed(self, name: str, e: EmuError) -> None:
        """Core `name`'s quantum raised `e`: the core stays stopped at the culprit until its next release (the tile
        stays usable); raises e again, naming the core and its pc."""
        self._fault[name] = str(e)
        raise type(e)(f"{e} [{name} pc=0x{self.cores[name].pc:08X}]") from e

    def _native_rounds(self):
        """run(max_instructions) in C for this call (rv32_native.c run_rounds: the same rounds and decisions as _round
        and run's loop, asking this tile's methods where it does not make them itself), or None: ROUND_NATIVE off,
        no C part, or a timeline recording (whose stalls and waits the Python path records)."""
        fn = rv32_native.rounds_fn() if ROUND_NATIVE and self.rec is None else None
        if fn is None:
            return None
        lookups, tensix = self._log_lookups, self.tensix
        names = tuple(self.cores)
        # the thaw (_thaw's C call) and the probe (_freeze's) made in C where the Python path would make them so
        thaw_log = lookups.arg if CAUSAL_LOADS and THAW_NATIVE and lookups is not None else None
        probe_at = PEEK_NATIVE and lookups is not None
        plain_idle = getattr(type(tensix), "thread_idle", None) is FrontendMixin.thread_idle
        ctx = (self, names, tuple(self.cores.values()), tuple(CORE_BITS[c] for c in names), self._frozen,
               self._fault, self._wait, self._self_timed, self.mailboxes.pops, self._stall, self._tbase,
               self._poll_again, self._thaw_key, self._reg_peeks, thaw_log, probe_at, bool(self._latency_of),
               tensix if plain_idle else None, tensix, self.quantum, SPINNING, EmuError,
               rv32_native.MMIO_EXITS, rv32_native.DIRECT_PUSH, rv32_native.PROBE_NATIVE,
               rv32_native.JOINED_RUNS_NATIVE,
               tuple(self._native_runner(c) for c in names))
        return lambda max_instructions: fn(ctx, max_instructions)

    def _native_runner(self, who: str) -> tuple | None:
        """What the C round reads of core `who`'s runner once per run() (rv32_native.c RN_*: no core's quantum changes
        them), or None for a core without the C part: the runner, the core's registers, namespace and stamp base
        (and whether it is this tile's own, _stamper's, which C then computes itself), the runner's stamps, state
        address, C function, direct push, NIU load and send contexts."""
        core = self.cores[who]
        native = core.native
        if native is None:
            return None
        return (native, core.x, core._ns, core.stamp_base, core.stamp_base is self._stamp_bases.get(who),
                native.stamps, native.arg, native.fn, native.direct_push, native.niu_loads, native.niu_sends)

    def _freeze(self, who: str) -> bool:
        """`who` stopped in a wait loop (rv32 spin detection). A loop reading only L1 (and local RAM) and Tensix
        semaphores (peek) is frozen: the core keeps its cycle and is not run again until one of the words it read
        changes (_thaw). A loop reading an NIU response counter is timed by that read (_times_its_reads): the core
        keeps its cycle too but polls again each round. Any other loop's core moves with the other cores
        (_catch_up). False (not a spinner this round) for a loop whose probe finds no turn back to it the first time
        there: a word it polls may have been written before its cycle by a core emulated after it in this round (the
        start-up handshake's ready word), so it leaves the loop at its own cycle if run once more; spinning again in
        that loop, it is carried as before until it leaves it."""
        if not self._latency_of:
            return True
        core = self.cores[who]
        t = self.cycles(who)
        # the C probe reads the words at t itself (in _peek_words' place) where _peek_words would ask C
        probe = core.spin_reads(t if PEEK_NATIVE and self._log_lookups is not None else None)
        if probe is None:
            if self._poll_again.get(who) != core.pc:
                self._poll_again[who] = core.pc
                return False
            return True
        self._poll_again.pop(who, None)
        reads, other = probe[:2]
        if other is None:
            self._frozen[who] = (reads, probe[2] if len(probe) == 3 else self._peek_words(who, reads, t))
            self._thaw_key.pop(who, None)
        elif self._times_its_reads(other):
            self._self_timed.add(who)
        return True

    def peek(self, who: str, addr: int) -> int | None:
        """A register `who` may read without effect, as spin_reads' probe reads it: a Tensix semaphore (its value;
        the real read then waits for the post's cycle, _pcbuf_load). None for every other address."""
        if layout.SEMAPHORE_BASE <= addr < layout.SEMAPHORE_BASE + 4 * N_SEMAPHORES and who in TRISC_THREAD:
            return self.tensix.sem_read((addr - layout.SEMAPHORE_BASE) >> 2)
        return None

    def reg_peek(self, who: str):
        """What C reads `who`'s registers by where peek would (rv32_native.c reg_peek): this tile's peek."""
        return self._reg_peeks[who]

    def _reg_peek(self, who: str):
        """peek's answers for `who` as a table C reads without a call (SEM_PEEK_NATIVE: the semaphore window's base,
        its count of words and the Tensix's list of their values; None instead of the list for a core that may peek
        none), or the method itself (the reference; a Tensix that keeps its semaphores otherwise)."""
        values = getattr(self.tensix, "sem_value", None)
        if not SEM_PEEK_NATIVE or not isinstance(values, list) \
                or getattr(type(self.tensix), "sem_read", None) is not SyncMixin.sem_read:
            return self.peek
        return layout.SEMAPHORE_BASE, N_SEMAPHORES, values if who in TRISC_THREAD else None

    def _peek_word(self, who: str, addr: int, n: int, cycle: int | None = None) -> bytes | int | None:
        """What `who` reads at `addr` at `cycle` (as of that cycle under the causal-load rule, where known; as it is
        now without a cycle)."""
        if addr >= layout.L1_SIZE:
            return self.peek(who, addr)
        past = self.l1_at(addr, n, cycle) if CAUSAL_LOADS and cycle is not None else None
        return self.l1_array[addr:addr + n].tobytes() if past is None else past

    def _peek_words(self, who: str, reads: list[tuple[int, int]], cycle: int | None = None) -> list:
        """[_peek_word(who, a, n, cycle) for a, n in reads]: the L1 words in one C call (rv32_native.LogLookups, with
        the causal-load rule; PEEK_NATIVE), the registers through peek."""
        if self._log_lookups is None or not PEEK_NATIVE:
            return [self._peek_word(who, a, n, cycle) for a, n in reads]
        words = self._log_lookups.peek_words(reads, cycle)
        return [self.peek(who, a) if w is None else w for (a, _), w in zip(reads, words)]

    @staticmethod
    def _times_its_reads(addr: int) -> bool:
        """An NIU response counter: a request counts from its completion (_niu_load), so a loop polling one is timed
        by its reads and need not be carried with the other cores (whose lead is no measure of when the counter
        changes; a loop whose registers are the same at each turn is seen as spinning even while its reads wait for
        one response after another)."""
        for base in layout.NOC_BASE:
            if 0 <= addr - base < NIU_WINDOW:
                return (addr - base) % NIU_INITIATOR_STRIDE - NIU_COUNTER_BASE >> 2 in RESPONSE_COUNTERS
        return False

    def _thaw(self, who: str) -> bool:
        """Whether frozen `who` runs again: one of the words its wait loop read has changed. It then resumes at the
        latest cycle a changed L1 word's line was written (RISC-V store, NoC write or atomic), if that is later than
        its own: on silicon it polled until then (a semaphore's read waits for its post itself). Under the causal-load
        rule the words are compared as of the core's cycle, and words unchanged then resume it at the first logged
        store to one of them after it. A core whose run() ends where it is may stay frozen (False). In C
        (THAW_NATIVE), which asks peek for the registers read, else _thaw_in_python."""
        if CAUSAL_LOADS and THAW_NATIVE and self._log_lookups is not None:
            reads, seen = self._frozen[who]
            t = self.cycles(who)
            answer = self._log_lookups.thaw(reads, seen, t, self._thaw_key.get(who), self._reg_peeks[who], who)
            if answer is not NotImplemented:
                self._thaw_key[who], resume = answer
                if resume is None:
                    return False
                del self._frozen[who]
                if resume > t:          # (no earlier: _wait_until would not move it)
                    self._wait_until(who, resume, tl.SPIN_WRITE)
                return True
        return self._thaw_in_python(who)

    def _thaw_in_python(self, who: str) -> bool:
        """_thaw's reference: the same decision through _peek_words, l1_at and first_write_after."""
        reads, seen = self._frozen[who]
        if CAUSAL_LOADS:
            key = (int(self.l1_log_n[0]), self._peek_words(who, reads))
            if self._thaw_key.get(who) == key:
                return False
            self._thaw_key[who] = key
        t = self.cycles(who)
        changed = [read for read, old, new in zip(reads, seen, self._peek_words(who, reads, t)) if new != old]
        if changed:
            # a change the log places at or before the core's cycle resumes it at once; one it cannot place (a NoC
            # write, a host write; every change without the causal-load rule) at the line's last write
            written = [int(self.l1_stamp[a >> STAMP_SHIFT]) for a, n in changed
                       if a < layout.L1_SIZE and (not CAUSAL_LOADS or self.l1_at(a, n, t) is None)]
        elif CAUSAL_LOADS:    # unchanged at its cycle: it polls until the first later store to a word it reads
            written = [c for a, _ in reads if a < layout.L1_SIZE and (c := self.first_write_after(a, t)) is not None]
            if not written:
                return False
            written = [min(written)]
        else:
            return False
        del self._frozen[who]
        self._wait_until(who, max(written, default=0), tl.SPIN_WRITE)
        return True

    def _catch_up(self, spinners: list[str]) -> None:
        """A spinning core stopped after a loop iteration or two (rv32 spin detection) instead of polling through its
        quantum; on silicon it would have kept polling while the others worked. One frozen on the words it reads
        (_thaw moves it) or polling an NIU response counter keeps its time; any other moves with the others': to the
        latest cycle a core that did progress has reached (the tile clock if none did)."""
        if not spinners or not self._latency_of:
            return
        timed = self._frozen.keys() | self._self_timed
        spinners = [c for c in spinners if c not in timed]
        if not spinners:
            return
        busy = [self.cycles(c) for c in self.cores if c not in spinners and c not in timed
                and not self.soft_reset & CORE_BITS[c] and not self.cores[c].parked and not self._fault[c]]
        target = max(busy) if busy else self.clock
        for c in spinners:
            self._wait_until(c, target, tl.SPIN)

    # ------------------------------------------------------------------ cycle model

    def set_timed(self, timed: bool) -> None:
        """The tile-level cycle model on (the default) or off (the functional mode: Chip.timed). Off, a core is
        charged no MMIO load latency, no NoC transfer time (no link or bank reservation: a response counter shows a
        request complete at once, as its data has landed inside the store) and no catch-up while it spins; what the
        cores compute is the same, their and the Tensix's cycle counts are not the timed path's. The Tensix keeps its
        own cycle model, which SFPLOADMACRO's scheduling and strict mode's hazard checks need. Responses still due
        when the mode changes are complete in the functional mode's view, so they are forgotten."""
        self._latency_of = self._stall if timed else {}
        for due in self._niu_due:
            due.clear()
        for core in self.cores.values():      # past() reads the write log only when timed: C may then do it itself
            if core.native is not None:
                core.native.answer_past_loads(timed)

    def now(self, who: str) -> int:
        """The cycle `who` has reached: for a core, its time at the instruction being executed (`core.pos` is the
        position of the bus access inside the running quantum; 0 outside run())."""
        core = self.cores.get(who)
        if core is None:
            return self.clock
        return self._tbase[who] + core.instret + self._stall[who] + core.pos

    def _niu_store(self, i: int, who: str, addr: int, value: int) -> None:
        niu = self.nius[i]
        if who not in self._latency_of:
            niu.store(addr - layout.NOC_BASE[i], value)
            niu.sent.clear()
            return
        offset = addr - layout.NOC_BASE[i]
        if self._issue is not None and value == 1 and offset % NIU_INITIATOR_STRIDE == NIU_CMD_CTRL \
                and self.rec is None:      # the send and its time below in one C call, where it can
            if self._issue[0](niu._c_context, offset // NIU_INITIATOR_STRIDE, self._issue_timing[i],
                              self.now(who)) is not NotImplemented:
                return
        counters = niu.counters
        before = [counters.get(c, 0) for c in RESPONSE_COUNTERS]
        niu.store(offset, value)
        if not niu.sent:
            return
        # transfers complete inside the store (noc.py); their time (the chip's NoC model, noc.Fabric) is charged to
        # whoever later polls this NIU's response counters for their completion
        start, fabric, due = self.now(who), self.chip.fabric, self._niu_due[i]
        for kind, peer, n, bank, dst in niu.sent:
            multicast = kind == "multicast"
            done = (fabric.multicast(i, self.xy, peer, n, start) if multicast else
                    fabric.transfer(i, kind, self.xy, peer, n, start, bank))
            if dst is not None:       # the peers' lines written at the transfer's completion (_thaw)
                for xy in (peer if multicast else (peer,)):
                    self.chip.tiles[xy].stamp_l1(dst, n, done)
            for c, was in zip(RESPONSE_COUNTERS, before):
                # one completion per request; a multicast's write acks, one per receiver, all at `done`
                count = (counters.get(c, 0) - was) & 0xFFFFFFFF
                for _ in range(count if multicast else min(count, 1)):
                    bisect.insort(due.setdefault(c, []), done)
            busy_from = max(start, self._niu_busy[i])       # the timeline's NoC lane: busy until the last
            if done > busy_from:                              # outstanding transfer completes
                self._niu_busy[i] = done
                if self.rec is not None:
                    self.rec.busy(f"noc{i}", busy_from, done)
        niu.sent.clear()

    def _niu_load(self, i: int, who: str, addr: int) -> int:
        """An NIU register read. A response counter (reads, write acks, atomics) shows only the requests complete at
        the reading core's cycle; a read that would show the same count as the previous one while requests are still
        due waits for the next completion instead (a core polling for its k-th response resumes when that one is in,
        not when the last one issued is: several requests in flight, and no poll that cannot progress). The other
        registers answer at once (a request leaves the initiator inside its send: NOC_CMD_CTRL reads 0)."""
        offset = addr - layout.NOC_BASE[i]
        value = self.nius[i].load(offset)
        counter = (offset % NIU_INITIATOR_STRIDE - NIU_COUNTER_BASE) >> 2
        due = self._niu_due[i].get(counter) if who in self._latency_of else None
        if due:
            del due[:bisect.bisect_right(due, self.now(who))]
            seen = self._niu_seen[i]
            if due and (value - len(due)) & 0xFFFFFFFF == seen.get(counter):
                self._wait_until(who, due[0], tl.NOC_WAIT)
                del due[:bisect.bisect_right(due, self.now(who))]
            value = (value - len(due)) & 0xFFFFFFFF
            seen[counter] = value
        return value

    def stamp_l1(self, addr: int, n: int, cycle: int) -> None:
        """[addr, + n) of L1 was written at `cycle` by a NoC transfer (its completion: the data lands a little
        earlier, by up to the acknowledgement's way back)."""
        lines = self.l1_stamp[addr >> STAMP_SHIFT:(addr + n - 1 >> STAMP_SHIFT) + 1]
        np.maximum(lines, cycle, out=lines)

    def _wait_until(self, who: str, cycle: int, why: str | None = None) -> None:
        """A core that waited for something finishing at `cycle` resumes then (`why`: the timeline's stall reason;
        None when the cycle model recorded the wait itself)."""
        t = self.now(who)
        if cycle > t:
            self._stall[who] += cycle - t
            if why is not None and self.rec is not None:
                self.rec.core_stall(who, t, cycle, why)

    def cycles(self, core: str) -> int:
        return self._tbase[core] + self.cores[core].instret + self._stall[core]

    def _advance_clock(self) -> None:
        c, tbase, stall, held = self.clock, self._tbase, self._stall, self.soft_reset
        for name, core in self.cores.items():     # (cycles() inline: called after every round)
            if not held & CORE_BITS[name]:
                t = tbase[name] + core.instret + stall[name]
                if t > c:
                    c = t
        tm = getattr(self.tensix, "tm", None)
        if tm is not None:
            c = max(c, *tm.clock)
        self.clock = c

    def _check_deadlock(self) -> None:
        """Nothing progressed. If some released core or Tensix thread is still waiting and no core is held in reset
        (the host could release one that provides what is missing), nobody can ever provide it: raise."""
        if self.soft_reset & layout.ALL_CORES_RESET:
            return
        waiting = [c for c in self.cores if self.running(c)]
        blocked = [t for t in range(3) if not self.tensix.thread_idle(t)] if self._timed else []
        if not waiting and not blocked:
            return
        lines = [f"{k}: {v}" for k, v in self.state().items()]
        raise EmuDeadlock("deadlock: every released core and Tensix thread is waiting on something no core or thread "
                          "can provide:\n  " + "\n  ".join(lines))

    def spinning(self, core: str) -> bool:
        """Whether `core` ended its last turn in a wait loop (rv32 spin detection) and has not run on since."""
        return self._wait[core] == SPINNING

    def state(self) -> dict[str, str]:
        out = {}
        for name, core in self.cores.items():
            if self.soft_reset & CORE_BITS[name]:
                s = f"in reset (pc=0x{core.pc:08X})"
            elif self._fault[name]:
                s = f"faulted at pc=0x{core.pc:08X}: {self._fault[name]}"
            elif core.parked:
                s = f"parked at pc=0x{core.pc:08X}"
            elif self._wait[name]:
                s = f"waiting at pc=0x{core.pc:08X}: {self._wait[name]}"
            else:
                s = f"running at pc=0x{core.pc:08X}"
            out[name] = s + f", {self.instructions[name]} instructions"
        for t in range(3):
            if self.tensix.thread_idle(t):
                out[f"tensix{t}"] = "idle"
            else:
                out[f"tensix{t}"] = f"blocked: {self.tensix.blocked_reason(t)}" if self.tensix.blocked_reason(t) \
                    else "busy"
        return out

    # ------------------------------------------------------------------ timelines (timeline.py)

    def timeline_begin(self) -> None:
        """Record per-lane timelines from now on (cores, Tensix threads, units) until timeline_end()."""
        tm = getattr(self.tensix, "tm", None)
        self.rec = tl.TimelineRecorder(self.clock, tm)
        if tm is not None:
            tm.rec = tm.sfpu.rec = self.rec

    def timeline_end(self) -> dict | None:
        """Stop recording: {"cycles": window length, "spans": [timeline.Span]} with cycles relative to
        timeline_begin's tile clock, or None when nothing was recording."""
        rec, self.rec = self.rec, None
        tm = getattr(self.tensix, "tm", None)
        if tm is not None:
            tm.rec = tm.sfpu.rec = None
        if rec is None:
            return None
        self._advance_clock()
        return {"cycles": self.clock - rec.start,
                "spans": rec.spans(self.clock, {c: self.cycles(c) for c in self.cores})}

    def stats(self) -> dict:
        tm = getattr(self.tensix, "tm", None)
        return {"clock": self.clock, "timed": self.chip.timed, "instructions": dict(self.instructions),
                "cycles": {c: self.cycles(c) - self._tbase[c] for c in self.cores},
                "stall_cycles": dict(self._stall),
                "tensix_cycles": tm.stats() if tm is not None else None,
                "tensix_instructions": list(self.tensix.instructions), "tensix_pushes": list(self.tensix_pushes),
                "noc": [n.stats() for n in self.nius]}
