"""The Tensix coprocessor of one tile: three threads' frontends (frontend.py), the sync unit (sync.py), the config unit
and ThCon (config.py), the FPU (tensix_fpu.py), unpackers / packers (unpack_pack.py) and the SFPU behind its issue
logic (tensix_sfpu.py, sfpu.py), composed here with the thread controller that decodes and dispatches.

Execution model (ttsim-like, see docs/ARCHITECTURE.md): each thread is in order; an instruction executes completely
when it passes the Wait Gate, so every "unit busy" STALLWAIT condition is satisfied at once. What really blocks is
data dependent: SEMWAIT / STALLWAIT latches with unmet semaphore or SrcA/SrcB ownership conditions, UNPACR waiting
for a free bank, FPU instructions waiting for valid banks. A blocked instruction stays at the head of its thread's
queue without side effects and is retried by `step()` after other threads progressed.

Time (cycles.py): every issued instruction also gets an issue cycle from `self.tm` (TensixTiming): one per cycle per
thread, frontend rates and penalties (MOP / REPLAY), SFPU auto-stalls, FPU Dst latency, Src bank readiness, unpack /
pack costs, and Wait Gate releases (unit-busy conditions hold until the unit's busy-until cycle). `push(thread, word,
t)` takes the pushing core's cycle and returns when the FIFO accepted the word.

SFPU speed (accel/): batched MOP row steps (mop_batch.py) and deferred word-by-word bodies (deferral.py), both
provably equal to the reference path of the units above (tests/emu/test_emu_speed.py).

Handlers are methods named after the instruction (`def SEMPOST(self, t, f)`), found through `self._handlers`.
A handler returns None when the instruction executed, or a string (the blocked reason) when it cannot issue yet;
in that case it must not have changed any state.
"""
from __future__ import annotations

import os

import numpy as np

from tt_backend.chip.errors import EmuUndefined, EmuUnimplemented, EmuUnspecified
from tt_backend.chip.isa import INSTRUCTIONS, OPCODES
from tt_backend.chip.numerics.dst import Dst
from tt_backend.runtime.emu.accel.deferral import DeferralMixin
from tt_backend.runtime.emu.accel.direct_issue import DirectIssueMixin
from tt_backend.runtime.emu.accel import fpu_batch, sfpu_issue_native
from tt_backend.runtime.emu.accel.fpu_batch import FpuBatchMixin
from tt_backend.runtime.emu.accel.mop_batch import MopBatchMixin
from tt_backend.runtime.emu.config import ConfigMixin
from tt_backend.runtime.emu.cycles import K_FPU, K_SFPU, K_UNPACK, K_WAIT, TensixTiming, instr_kind
from tt_backend.runtime.emu.frontend import NOP_BLOCK, FrontendMixin, block_bits
from tt_backend.runtime.emu.sfpu import SFPU
from tt_backend.runtime.emu.sync import SyncMixin
from tt_backend.runtime.emu.tensix_fpu import FpuMixin
from tt_backend.runtime.emu.tensix_sfpu import SfpuIssueMixin
from tt_backend.runtime.emu.thread_state import ThreadState
from tt_backend.runtime.emu.unpack_pack import UnpackPackMixin

RETRY_ON_BANK_CHANGE = True    # drain() skips a thread blocked on unchanged Src banks; tests turn it off to compare
# decode()'s per-word part that no instance changes (name, fields, Wait Gate class, reserved bits, timing kind and info)
# kept for every Tensix: a fresh one (each bench row, each test) decoded its words again, ~2.7 us each (sfpu_long: 152
# words, 3 % of a launch). TT_EMU_SHARED_DECODE=0: each instance decodes its own words.
SHARED_DECODE = os.environ.get("TT_EMU_SHARED_DECODE", "1") != "0"
_STATIC_DECODE: dict[int, tuple] = {}


def _static_decode(w: int) -> tuple:
    """(name, fields, Wait Gate block class, reserved bits set, timing kind, timing info) of a word: what decode()
    gives but the instance's handler."""
    ins = OPCODES.get(w >> 24)
    if ins is None:
        raise EmuUndefined(f"Tensix: unknown opcode 0x{w >> 24:02X} in word 0x{w:08X}")
    fields = ins.decode(w)
    kind, info = instr_kind(ins.name, ins.unit, fields)
    return ins.name, fields, block_bits(ins.name), w & ~ins.used_bits() & 0xFFFFFFFF, kind, info


class Tensix(FpuBatchMixin, DeferralMixin, DirectIssueMixin, MopBatchMixin, FrontendMixin, SyncMixin, ConfigMixin,
             SfpuIssueMixin, UnpackPackMixin, FpuMixin):
    # `current` (written for every word issued) is kept in a slot, not the instance dict, so that its writes leave the
    # dict's version tag alone and the C memos validated by it (plain_run's, push_memo.c's) keep hitting; so are
    # pm_done / pm_t (written by every push_many); those and the semaphores and `strict`, which rv32_native.c's bus
    # calls read on every semaphore access, C reads at their offsets (rv32_native.c slot_at); the other attributes
    # stay in the dict (the mixins declare no slots; plain_run's memo reads tm, threads and instructions there)
    __slots__ = ("current", "sem_value", "sem_max", "sem_posts", "strict", "pm_done", "pm_t")

    def __init__(self, l1: np.ndarray, strict: bool = True, dst: Dst | None = None, sfpu=None):
        """`l1`: the tile's L1 (np.uint8, shared, not copied). `dst`/`sfpu` may be injected (tests); by default a
        fresh Dst and the emulator's SFPU over it, timed by this Tensix's cycle model."""
        if l1.dtype != np.uint8 or l1.ndim != 1:
            raise TypeError("Tensix needs L1 as a 1-D np.uint8 array")
        self.l1 = l1
        self.strict = strict
        self.current = (0, 0, "")                  # (thread, word, name) of the instruction being executed
        self.tm = (sfpu_issue_native.tensix_timing_class() or TensixTiming)(self)   # the cycle model (cycles.py)
        dst = Dst() if dst is None else dst
        self._init_deferral(dst)                   # Tensix.dst / .sfpu views over the deferred SFPU work
        self.raw_sfpu = SFPU(dst, self.tm.sfpu, strict=strict) if sfpu is None else sfpu
        self.threads = [ThreadState(i) for i in range(3)]
        self.instructions = self.tm.executed       # instructions executed per thread (the cycle model holds them)
        self._init_config()                        # config words (config.py)
        self._init_sync()                          # semaphores and mutexes (sync.py)
        self._init_src()                           # SrcA/SrcB banks and their ownership (tensix_fpu.py)
        self._init_packer()                        # the packer's output stream state (unpack_pack.py)
        self._init_mop_batch()                     # the MOP batching caches (accel/mop_batch.py)
        self._init_fpu_batch()                     # MVMUL runs (accel/fpu_batch.py)
        self._init_direct_issue()                  # plain words pushed to an empty thread (accel/direct_issue.py)
        self._decoded: dict[int, tuple] = {}
        self._handlers = self._build_handlers()

    @property
    def issue_t(self) -> int:
        """Issue cycle of the instruction being executed: the cycle model holds it (tm.issue_t, a C member where its
        state is in C: the C issue writes it there on every word)."""
        return self.tm.issue_t

    @issue_t.setter
    def issue_t(self, c: int) -> None:
        self.tm.issue_t = c

    # ------------------------------------------------------------------------------------------------ errors
    def where(self) -> str:
        """The instruction being executed, for error messages."""
        t, w, n = self.current
        return f"Tensix T{t}: word 0x{w:08X} ({n})"

    def undefined(self, rule: str) -> EmuUndefined:
        return EmuUndefined(f"{self.where()}: {rule}")

    def unspecified(self, rule: str) -> EmuUnspecified:
        return EmuUnspecified(f"{self.where()}: {rule}")

    def unimpl(self, what: str) -> EmuUnimplemented:
        return EmuUnimplemented(f"{self.where()}: {what} is not modelled by the emulator")

    # ------------------------------------------------------------------------------------------------ controller
    def settle(self) -> None:
        """Let time pass with nothing new issued: SFPLOADMACRO-scheduled instructions counted in cycles run, and
        deferred SFPU work is executed."""
        if self.deferred:
            self.flush_deferred()
        if self.raw_sfpu.scheduled:
            self.raw_sfpu.drain_macros()

    def thread_done(self, thread: int) -> int:
        """Cycle by which everything thread `thread` issued has finished (cycle model)."""
        return self.tm.done(thread)

    def step(self) -> int:
        """Drain all three threads until none can move; returns the instructions executed. (A thread with nothing
        queued has nothing to drain.) The C part runs this loop where it is on (sfpu_issue_native.step_run)."""
        step_run = sfpu_issue_native.step_run()
        if step_run is not None:
            return step_run(self)
        total = 0
        threads = self.threads
        while True:
            self.poll_latches()
            n = 0
            for t in (0, 1, 2):
                th = threads[t]
                if th.fifo or th.mop_out or th.ready:
                    n += self.drain(t)
            if n == 0:
                return total
            total += n

    def decode(self, w: int) -> tuple:
        """(name, fields, handler, Wait Gate block class, reserved bits set, timing kind, timing info) of a word."""
        d = self._decoded.get(w)
        if d is None:
            s = _STATIC_DECODE.get(w) if SHARED_DECODE else None
            if s is None:
                s = _static_decode(w)
                if SHARED_DECODE:
                    _STATIC_DECODE[w] = s
            name, fields, block, reserved, kind, info = s
            d = (name, fields, self._handlers.get(name), block, reserved, kind, info)
            self._decoded[w] = d
        return d

    reference_decode = decode     # what a class-level spy on decode leaves behind (DirectIssueMixin.never_plain_ops)

    def decode_is_shared(self) -> bool:
        """Whether decode's static part comes from the table every Tensix shares (SHARED_DECODE): then the fields
        another Tensix decoded are the same objects here (deferral.py's shared facts rely on it)."""
        return SHARED_DECODE

    def drain(self, t: int) -> int:
        """_drain, recording the data effect of back-to-back MVMULs and executing them at once (accel/fpu_batch.py)
        before any other instruction and when it returns, unless a pushed MVMUL run records already. A thread whose
        head instruction's handler blocked on a Src bank (bank_wait) blocks again while the Src banks are as they were
        then (RETRY_ON_BANK_CHANGE: such a handler waits on them alone, and its checks ahead of that depend on its
        fields alone, so they passed for good): nothing to drain."""
        th = self.threads[t]
        if th.bank_wait and th.blocked is not None and RETRY_ON_BANK_CHANGE and th.bank_state == self.src_bank_state():
            return 0
        if self.mm_record is not None or not fpu_batch.BATCH_MVMUL:
            return self._drain(t)
        self.mm_record = []
        try:
            return self._drain(t)
        finally:
            self.flush_mvmul()

    def _drain(self, t: int) -> int:
        """Issue and execute what thread t can: instructions leave the frontend (next_instruction) in order, wait at
        the Wait Gate while a latch blocks them, and go to their unit's handler. A handler returning a reason
        blocks the thread (the instruction stays at the head, retried by step()). SFPU words go to the speed layer
        first (accel/: batch_sfpu, drain_deferrable, defer), which takes them only where provably equivalent.
        Words of the kinds the C part issues run there while they are at the head (drain_in_c), the rest here.
        Returns the number of instructions executed."""
        th = self.threads[t]
        n = 0
        drain_c = self.drain_in_c()
        facts = self._plain
        while True:
            if drain_c is not None:
                done, more = drain_c(self, t, facts)
                n += done
                if not more:
                    break
            w = self.next_instruction(th)
            if w is None:
                break
            if drain_c is not None:
                if w not in facts:
                    facts[w] = self._plain_facts(w)
                if facts[w] is not None:
                    continue                            # a word the C part takes, at the head now: its turn
            name, fields, handler, block, reserved, kind, info = self.decode(w)
            if self.mm_record and name != "MVMUL":
                self.flush_mvmul(keep=True)             # anything else sees the recorded MVMULs' Dst
            if kind == K_SFPU and len(th.ready) >= 8 and len(th.ready) > th.batch_skip and th.latch is None:
                done = self.batch_sfpu(t, th)
                if done:
                    n += done
                    th.blocked = None
                    continue
                th.batch_skip = len(th.ready)
            if kind == K_SFPU and th.latch is None:
                done = self.drain_deferrable(t, th)
                if done:
                    n += done
                    continue
            if not self.issue_head(t, th, w, name, fields, handler, block, reserved, kind, info):
                break
            n += 1
        self.instructions[t] += n
        return n

    def issue_head(self, t: int, th: ThreadState, w: int, name: str, fields: dict, handler, block: int, reserved: int,
                   kind: int, info) -> bool:
        """Issue and execute word `w` (decoded), the head of thread t's ready queue: the Wait Gate (a latch blocking
        it), the SFPU deferral, the handler, the cycle model. True when it executed (popped from the queue); False
        when it blocks (it stays at the head with th.blocked saying why, nothing else changed)."""
        self.current = (t, w, name)
        was_blocked = th.blocked is not None
        latch = th.latch
        if latch is not None:
            if block == NOP_BLOCK:
                blocked = latch.block == 0x1FF
            else:
                blocked = bool(latch.block & block)
            if blocked:
                why = self.latch_unmet(t, latch)
                if why is not None:
                    self.handler_blocked(th, why, False)
                    return False
                th.latch = None
        if kind == K_SFPU:
            d = self.deferral_of(w, name, fields, handler, reserved)
            if d is not None and self.defer(t, th, w, d, block, info, was_blocked):
                th.ready.popleft()
                th.blocked = None
                return True
        if self.deferred:
            self.flush_deferred()                   # anything else on any thread: deferred work first
        if reserved and self.strict:
            raise self.unspecified(f"reserved bits 0x{reserved:08X} set (not part of any {name} field)")
        if handler is None:
            raise self.unimpl(f"instruction {name}")
        if kind == K_SFPU:       # the SFPU needs its issue cycle (SFPLOADMACRO timing) before it executes
            self.issue_t = self.tm.issue(t, name, kind, info, fields, block, was_blocked)
            handler(t, fields)
        else:
            pre = self.tm.pre(t, kind, name, fields) if kind == K_FPU or kind == K_UNPACK else None
            why = handler(t, fields)
            if why is not None:
                self.handler_blocked(th, why, kind == K_FPU or kind == K_UNPACK)
                return False
            self.issue_t = self.tm.issue(t, name, kind, info, fields, block, was_blocked, pre,
                                         was_blocked and th.bank_wait)
            if kind == K_WAIT and th.latch is not None:
                lt = th.latch
                self.tm.waited(t, self.issue_t, lt.cond if lt.kind == "STALLWAIT" else 0, lt.block)
        th.ready.popleft()
        th.blocked = None
        return True

    def handler_blocked(self, th: ThreadState, why: str, bank_wait: bool) -> None:
        """The head instruction of thread th blocks (`why`): at the Wait Gate, or in its handler waiting on a Src bank
        (bank_wait: the banks' state is kept, see drain())."""
        th.blocked, th.bank_wait = why, bank_wait
        if bank_wait:
            th.bank_state = self.src_bank_state()

    def _build_handlers(self) -> dict:
        handlers = {}
        for name, ins in INSTRUCTIONS.items():
            fn = getattr(self, name, None)
            if fn is not None:
                handlers[name] = fn
            elif ins.unit == "sfpu":
                handlers[name] = self.sfpu_handler(name)
        return handlers

    def NOP(self, t, f):
        pass
