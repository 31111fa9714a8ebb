"""The Tensix coprocessor of one tile: three thread frontends, sync unit, config unit, ThCon (GPRs/ADCs), the FPU
subset and the unpack/pack paths (the last two live in `tensix_fpu.py` and `unpack_pack.py` as mixins).

Execution model (ttsim-like, see docs/ARCHITECTURE.md): each thread is in order; an instruction executes completely
when it passes the Wait Gate, so every "unit busy" STALLWAIT condition is satisfied at once. What really blocks is
data dependent: SEMWAIT / STALLWAIT latches with unmet semaphore or SrcA/SrcB ownership conditions, UNPACR waiting
for a free bank, FPU instructions waiting for valid banks. A blocked instruction stays at the head of its thread's
queue without side effects and is retried by `step()` after other threads progressed.

Time (cycles.py): every issued instruction also gets an issue cycle from `self.tm` (TensixTiming): one per cycle per
thread, frontend rates and penalties (MOP / REPLAY), SFPU auto-stalls, FPU Dst latency, Src bank readiness, unpack /
pack costs, and Wait Gate releases (unit-busy conditions hold until the unit's busy-until cycle). `push(thread, word,
t)` takes the pushing core's cycle and returns when the FIFO accepted the word.

SFPU speed (issue #3): a MOP of identical REPLAYs puts all row steps of a body in the ready queue at once and
_sfpu_batch runs them as one numpy pass per instruction. Bodies pushed word by word (TTI loops) are *deferred*
(_defer): each instruction issues at once (timing, RWCs, strict checks, counters), its data effect is queued and
executed before anything can observe it (`sfpu` / `dst` accesses, any other instruction, settle()), repeated bodies
batched (_dq_flush, SFPU.execute_batch). A thread whose deferred data is still queued counts as idle: its work is
issued in the cycle model, and nothing outside the Tensix can see the difference.
A batch's row-step bookkeeping is closed-form where provably equal (BATCH_CLOSED_FORM): Dst addresses and RWCs when
every address modifier only adds constants (_addr_mod_steps, _batch_addrs), issue cycles once the cycle model is
periodic across repetitions (_timing_periodic / _timing_skip) or replayed from an earlier batch entered in the same
relative state (_timing_key / _timing_memo / _timing_replay). push() and _drain_deferred inline the SFPU issue rule.

Handlers are methods named after the instruction (`def SEMPOST(self, t, f)`), found through `self._handlers`.
A handler returns None when the instruction executed, or a string (the blocked reason) when it cannot issue yet;
in that case it must not have changed any state.
"""
from __future__ import annotations

from collections import deque
from functools import partial
from itertools import islice

import numpy as np

from tt_backend.chip.errors import EmuError, EmuUnimplemented
from tt_backend.chip.isa import INSTRUCTIONS, OPCODES

try:  # the RISC-V side retries a store that raised Stall; use its class so the tile catches one type
    from tt_backend.runtime.emu.rv32 import Stall
except ImportError:  # pragma: no cover - only while rv32.py is being written
    class Stall(Exception):
        pass

from tt_backend.runtime.emu.cycles import FIFO_EFFECTIVE_DEPTH, FPU_TO_SFPLOAD_GAP, K_FPU, K_SFPU, K_UNPACK, K_WAIT, \
    MOP_TRANSITION_PENALTY, TensixTiming, instr_kind
from tt_backend.runtime.emu.tensix_fpu import FpuMixin
from tt_backend.runtime.emu.unpack_pack import UnpackPackMixin

CFG_WORDS = 224          # backend config words per state bank (indices 0..222 named in tensix_regs.json)
THREAD_CFG_WORDS = 68    # ThreadConfig registers per thread (SETC16 indices 0..67)
FIFO_DEPTH = 32          # first instruction FIFO per thread [BH PushTensixInstruction.md]
N_GPR = 64

# ADC counter widths (ttsim: X 18 bits, Y 13, Z 8, W 8)
ADC_MASK = (0x3FFFF, 0x1FFF, 0xFF, 0xFF)
UNP0, UNP1, PACK = 0, 1, 2

# Wait Gate block-mask classes (STALLWAIT.md table): which B bits stop which instruction from starting.
_B0, _B1, _B2, _B3, _B4, _B5, _B6, _B7, _B8 = (1 << i for i in range(9))
_BLOCK_BY_NAME = {
    **{n: _B0 | _B5 for n in ("ADDDMAREG", "ATCAS", "ATINCGET", "ATINCGETPTR", "ATSWAP", "BITWOPDMAREG", "CMPDMAREG",
                              "DMANOP", "FLUSHDMA", "LOADIND", "LOADREG", "MULDMAREG", "REG2FLOP", "SETDMAREG",
                              "SHIFTDMAREG", "STOREIND", "STOREREG", "SUBDMAREG")},
    **{n: _B0 for n in ("ADDRCRXY", "ADDRCRZW", "INCADCXY", "INCADCZW", "RSTDMA", "SETADC", "SETADCXX", "SETADCXY",
                        "SETADCZW", "SETDVALID")},
    **{n: _B1 for n in ("ATGETM", "ATRELM", "SEMGET", "SEMINIT", "SEMPOST")},
    **{n: 0x1FF for n in ("SEMWAIT", "STALLWAIT", "STREAMWAIT")},
    **{n: _B7 for n in ("CFGSHIFTMASK", "RDCFG", "RMWCIB0", "RMWCIB1", "RMWCIB2", "RMWCIB3", "SETC16", "STREAMWRCFG",
                        "WRCFG")},
    **{n: _B0 | _B2 for n in ("PACR", "PACR_SETREG")},
    **{n: _B0 | _B3 for n in ("UNPACR", "UNPACR_NOP")},
    "XMOV": _B0 | _B4,
}
_BLOCK_BY_UNIT = {"sfpu": _B8, "fpu": _B6, "sync": _B1, "config": _B7, "thcon": _B0 | _B5, "pack_unpack": _B0,
                  "frontend": 0}
_NOP_BLOCK = -1  # NOP is blocked only when all nine block bits are set
_SRCB_BF16_LIKE = {0, 4, 5, 6, 7, 15, 8, 9}   # FP32 TF32 BF16 BFP8 BFP4 BFP2 INT32 INT16: MOD0_FMT_SRCB -> BF16


def _block_bits(name: str) -> int:
    if name == "NOP":
        return _NOP_BLOCK
    return _BLOCK_BY_NAME.get(name, _BLOCK_BY_UNIT[INSTRUCTIONS[name].unit])


class _Latch:
    """The Wait Gate's latched wait instruction (STALLWAIT or SEMWAIT)."""
    __slots__ = ("kind", "cond", "sems", "block", "word")

    def __init__(self, kind, cond, sems, block, word):
        self.kind, self.cond, self.sems, self.block, self.word = kind, cond, sems, block, word


class _Thread:
    __slots__ = ("fifo", "mop_out", "ready", "replay_buf", "replay_load", "mask_hi", "mop_cfg", "latch", "blocked",
                 "cfg", "gpr", "adc", "adc_cr", "rwc", "fifo_t", "tid", "batch_skip")

    def __init__(self, tid: int = 0):
        self.tid = tid
        self.fifo: deque[int] = deque()        # words as pushed (before the MOP expander)
        self.fifo_t: deque[int] = deque()      # the cycle each FIFO word was pushed (cycle model)
        self.mop_out: deque[int] = deque()     # MOP expander output not yet taken by the replay expander
        self.ready: deque[int] = deque()       # replay expander output, head = next instruction at the Wait Gate
        self.replay_buf = [0] * 32
        self.replay_load = None                # [next_index, remaining, exec] while a REPLAY load is recording
        self.mask_hi = 0                       # MOP_CFG's upper 16 mask bits
        self.mop_cfg = [0] * 9
        self.latch: _Latch | None = None
        self.blocked: str | None = None
        self.cfg = [0] * THREAD_CFG_WORDS      # ThreadConfig (SETC16), 16-bit values
        self.gpr = [0] * N_GPR
        # ADCs[set][channel][X, Y, Z, W] and the _Cr shadows; sets: unpacker 0, unpacker 1, packer
        self.adc = [[[0, 0, 0, 0], [0, 0, 0, 0]] for _ in range(3)]
        self.adc_cr = [[[0, 0, 0, 0], [0, 0, 0, 0]] for _ in range(3)]
        # RWCs: SrcA, SrcA_Cr, SrcB, SrcB_Cr, Dst, Dst_Cr, FidelityPhase
        self.rwc = {"a": 0, "a_cr": 0, "b": 0, "b_cr": 0, "d": 0, "d_cr": 0, "fid": 0}
        self.batch_skip = 0                    # no batching attempt while len(ready) <= this (_sfpu_batch)


def _opcode(name: str) -> int:
    return INSTRUCTIONS[name].opcode


_OP_MOP, _OP_MOP_CFG, _OP_REPLAY, _OP_NOP = _opcode("MOP"), _opcode("MOP_CFG"), _opcode("REPLAY"), _opcode("NOP")


class Tensix(UnpackPackMixin, FpuMixin):
    def __init__(self, l1: np.ndarray, strict: bool = True, dst=None, sfpu=None):
        """`l1`: the tile's L1 (np.uint8, shared, not copied). `dst`/`sfpu` may be injected (tests); by default the
        real `runtime.emu.dst.Dst` and `runtime.emu.sfpu.SFPU` are used."""
        if l1.dtype != np.uint8 or l1.ndim != 1:
            raise TypeError("Tensix needs L1 as a 1-D np.uint8 array")
        self.l1 = l1
        self.strict = strict
        self._dq: list = []                        # deferred SFPU data work (see _defer), flushed by any observer
        self._dq_flags = None                      # abstract (LaneFlags, UseLaneFlags) after the deferred work
        self._dq_plans: dict[tuple, object] = {}   # (body, entry flag state) -> _dq_plan() result
        self._defer_info: dict[int, tuple | None] = {}
        self._fast: dict[int, tuple | None] = {}   # push()'s fast path: word -> (defer info, block, timing info)
        self._sfpu = self._dst = None
        self._dst_view = _DstView(self)
        if dst is None:
            from tt_backend.runtime.emu.dst import Dst
            dst = Dst()
        self.dst = dst
        if sfpu is None:
            try:
                from tt_backend.runtime.emu.sfpu import SFPU
            except ImportError:  # SFPU instructions then raise EmuUnimplemented when they arrive
                SFPU = None
            sfpu = SFPU(dst, strict=strict) if SFPU is not None else None
        self.sfpu = sfpu
        self.cfg = [0] * CFG_WORDS                 # one state bank (CFG_STATE_ID_StateID must stay 0)
        self.sem_value = [0] * 8                   # ttsim reset state: Value 0, Max 0
        self.sem_max = [0] * 8
        self.mutex_holder: dict[int, int | None] = {0: None, 2: None, 3: None, 4: None}   # BH: 4 mutexes
        self.threads = [_Thread(i) for i in range(3)]
        self.instructions = [0, 0, 0]              # instructions executed per thread
        self._init_src()                           # SrcA/SrcB banks and their ownership (tensix_fpu.py)
        self._init_packer()                        # the packer's output stream state (unpack_pack.py)
        self._decoded: dict[int, tuple] = {}
        self._batch_plans: dict[tuple, object] = {}   # SFPU body -> _batch_plan() result
        self._batch_addr_cache: dict[tuple, object] = {}   # (body, k, start, steps) -> _batch_addrs() result
        self._batch_bodies: dict[tuple, list] = {}     # (body, resolved modes) -> execute_batch's body list
        self._batch_timing: dict[tuple, tuple] = {}    # (body, k, _timing_key) -> _timing_memo() result
        self.tm = TensixTiming(self)               # the cycle model (cycles.py)
        self._issue_t = 0                          # issue cycle of the instruction being executed
        self._handlers = self._build_handlers()
        self._cur = (0, 0, "")                     # (thread, word, name) of the instruction being executed

    # ------------------------------------------------------------------------------------------------ state views
    # Deferred SFPU work (_defer) changes LRegs, lane flags and Dst only when executed; every access to `sfpu` or
    # `dst` from outside the deferral machinery (the other units' handlers, the cycle model's FPU/pack paths, tests,
    # the tile and its RISC-V Dst window) executes it first, so nobody can observe the difference. `dst` is a view
    # (_DstView) that does so on every attribute use, also for whoever keeps the reference.
    @property
    def sfpu(self):
        if self._dq:
            self._dq_flush()
        return self._sfpu

    @sfpu.setter
    def sfpu(self, value) -> None:
        if self._dq:
            self._dq_flush()
        self._sfpu = value
        self._defer_info.clear()
        self._fast.clear()

    @property
    def dst(self):
        return self._dst_view

    @dst.setter
    def dst(self, value) -> None:
        if self._dq:
            self._dq_flush()
        self._dst = value

    # ------------------------------------------------------------------------------------------------ errors
    def _where(self) -> str:
        t, w, n = self._cur
        return f"Tensix T{t}: word 0x{w:08X} ({n})"

    def err(self, rule: str) -> EmuError:
        return EmuError(f"{self._where()}: {rule}")

    def unimpl(self, what: str) -> EmuUnimplemented:
        return EmuUnimplemented(f"{self._where()}: {what} is not modelled by the emulator")

    # ------------------------------------------------------------------------------------------------ frontend
    def push(self, thread: int, word: int, t: int = 0) -> int:
        """Push `word` on a thread's FIFO at cycle `t` (the pushing core's time). Returns the cycle the push is
        accepted: later than `t` when, in modelled time, the FIFO still holds its effective 28 words then."""
        th = self.threads[thread]
        fifo = th.fifo
        word &= 0xFFFFFFFF
        tm = self.tm
        if fifo:
            if len(fifo) >= FIFO_DEPTH:
                raise Stall(f"Tensix T{thread} instruction FIFO full")
        elif not th.ready and not th.mop_out and th.replay_load is None:
            # fast path for a deferrable SFPU word reaching an empty thread: what _drain(_next(...)) would do
            fast = self._fast.get(word, _UNSET)
            if fast is _UNSET:
                fast = self._fast_info(word)
            if fast is not None and (th.latch is None or not th.latch.block & fast[3]):   # not held by the gate
                # TensixTiming.accept_take, inlined (th.batch_skip: reset by _next when ready is empty)
                q = tm.taken[thread]
                if len(q) == FIFO_EFFECTIVE_DEPTH and q[0] > t:
                    t = q[0]
                clock = tm.clock
                last = clock[thread]
                q.append(t if t > last else last)
                fe = tm.fe[thread]
                if tm.after_mop[thread]:
                    fe = max(fe, last + 1) + MOP_TRANSITION_PENALTY
                    tm.after_mop[thread] = False
                if t > fe:
                    fe = t
                tm.fe[thread] = fe
                name, fields, is_mem, block, info, ft, d = fast
                dq = self._dq
                # _defer for an instruction without Dst access, inlined (the hot path of a TTI body; its only
                # possible error, a strict stall-blind read in SfpuTiming.regular, does not use self._cur). The
                # SFPU state _defer checks cannot change while work is queued (only non-deferred SFPU instructions
                # change it, and they execute the queue first): checked when a queue starts.
                if not is_mem and (dq or _sfpu_plain(self._sfpu)):
                    if len(dq) >= DQ_MAX:
                        self._dq_flush()
                        dq = self._dq
                    # TensixTiming.issue for an SFPU word without Dst access, inlined (same rules, same order;
                    # an instance override of tm.issue, e.g. a test's spy, is honoured)
                    if "issue" in tm.__dict__:
                        c = self._issue_t = tm.issue(thread, name, K_SFPU, info, fields, block, th.blocked is not None)
                        if not dq:
                            self._dq_flags = _uniform_flags(self._sfpu)
                        if ft is not None:
                            self._dq_flags = ft(*self._dq_flags)
                        cfg = self.cfg
                        dq.append((word, name, fields, None, 0, c, cfg[0], cfg[1], thread))
                        th.blocked = None
                        self.instructions[thread] += 1
                        return t
                    c = last + 1
                    if fe > c:
                        c = fe
                    mask, until = tm.gate[thread]
                    if until > c and (block & mask if block != -1 else mask == 0x1FF):
                        c = until
                    if th.blocked is not None and tm.event_t + 1 > c:
                        c = tm.event_t + 1
                    st = self._sfpu.timing
                    if c == st.nop_only_cycle or c == st.mad_cycle + 1 or info[5]:
                        c = st.regular(c, info)
                    elif info[4]:                 # SfpuTiming.regular for a MAD meeting no auto-stall
                        st.mad_cycle, st.mad_writes, st.mad_macro = c, info[3], False
                        if c + 2 > st.busy_until:
                            st.busy_until = c + 2
                    elif c >= st.busy_until:      # ... and for a 1-cycle instruction
                        st.busy_until = c + 1
                    if tm.first[thread] is None:
                        tm.first[thread] = c
                    elif c - last > 1:
                        tm.stalls[thread] += c - last - 1
                    clock[thread] = c
                    tm.issued[thread] += 1
                    self._issue_t = c
                    if not dq:
                        self._dq_flags = _uniform_flags(self._sfpu)
                    if ft is not None:
                        self._dq_flags = ft(*self._dq_flags)
                    cfg = self.cfg
                    dq.append((word, name, fields, None, 0, c, cfg[0], cfg[1], thread))
                    th.blocked = None
                    self.instructions[thread] += 1
                    return t
                self._cur = (thread, word, name)
                if self._defer(thread, th, word, d, block, info, th.blocked is not None):
                    th.blocked = None
                    self.instructions[thread] += 1
                    return t
                th.ready.append(word)            # taken from the FIFO already: the handler path issues it
                self._drain(thread)
                return t
        t = tm.accept(thread, t)
        fifo.append(word)
        th.fifo_t.append(t)
        self._drain(thread)
        return t

    def push_many(self, thread: int, words: tuple, t: int) -> int:
        """push() of each word in turn, the next one pushed the cycle after the previous one was accepted (a core
        pushing consecutive `.ttinsn` words): push(thread, words[j], t_j) with t_0 = t, t_{j+1} = accepted_j + 1.
        Returns t_n. If push j raises (Stall, EmuError, ...), words 0..j-1 have been pushed exactly as by the single
        calls and `self.pm_done, self.pm_t` hold (j, t_j) before the exception propagates. The hot case of push()
        (a deferrable SFPU word without Dst access reaching an empty thread) is inlined with its state bound once;
        every other word goes through push() itself."""
        j = 0
        push = self.push
        tm = self.tm
        try:
            if "issue" in tm.__dict__ or self._sfpu is None:   # a spied cycle model / no SFPU: the plain calls
                for word in words:
                    t = push(thread, word, t) + 1
                    j += 1
                return t
            th = self.threads[thread]
            fifo = th.fifo
            fast_get = self._fast.get
            q = tm.taken[thread]
            clock, fes, after_mop, gate = tm.clock, tm.fe, tm.after_mop, tm.gate
            firsts, stalls, issued = tm.first, tm.stalls, tm.issued
            instructions = self.instructions
            cfg = self.cfg
            sfpu = self._sfpu
            st = sfpu.timing
            for word in words:
                # the conditions of push()'s inlined path; anything else: push() itself
                if fifo or th.ready or th.mop_out or th.replay_load is not None:
                    t = push(thread, word, t) + 1
                    j += 1
                    continue
                fast = fast_get(word, _UNSET)
                if fast is _UNSET:
                    fast = self._fast_info(word)
                dq = self._dq
                if (fast is None or fast[2] or (th.latch is not None and th.latch.block & fast[3])
                        or not (dq or _sfpu_plain(sfpu))):
                    t = push(thread, word, t) + 1
                    j += 1
                    continue
                # from here on exactly push()'s path for a non-Dst SFPU word (see the comments there)
                a = q[0] if len(q) == FIFO_EFFECTIVE_DEPTH and q[0] > t else t
                last = clock[thread]
                q.append(a if a > last else last)
                fe = fes[thread]
                if after_mop[thread]:
                    fe = max(fe, last + 1) + MOP_TRANSITION_PENALTY
                    after_mop[thread] = False
                if a > fe:
                    fe = a
                fes[thread] = fe
                name, fields, is_mem, block, info, ft, d = fast
                if len(dq) >= DQ_MAX:
                    self._dq_flush()
                    dq = self._dq
                c = last + 1
                if fe > c:
                    c = fe
                mask, until = gate[thread]
                if until > c and (block & mask if block != -1 else mask == 0x1FF):
                    c = until
                if th.blocked is not None and tm.event_t + 1 > c:
                    c = tm.event_t + 1
                if c == st.nop_only_cycle or c == st.mad_cycle + 1 or info[5]:
                    c = st.regular(c, info)
                elif info[4]:
                    st.mad_cycle, st.mad_writes, st.mad_macro = c, info[3], False
                    if c + 2 > st.busy_until:
                        st.busy_until = c + 2
                elif c >= st.busy_until:
                    st.busy_until = c + 1
                if firsts[thread] is None:
                    firsts[thread] = c
                elif c - last > 1:
                    stalls[thread] += c - last - 1
                clock[thread] = c
                issued[thread] += 1
                self._issue_t = c
                if not dq:
                    self._dq_flags = _uniform_flags(sfpu)
                if ft is not None:
                    self._dq_flags = ft(*self._dq_flags)
                dq.append((word, name, fields, None, 0, c, cfg[0], cfg[1], thread))
                th.blocked = None
                instructions[thread] += 1
                t = a + 1
                j += 1
            return t
        except BaseException:
            self.pm_done, self.pm_t = j, t
            raise

    def settle(self) -> None:
        """Let time pass with nothing new issued: SFPLOADMACRO-scheduled instructions counted in cycles run, and
        deferred SFPU work is executed."""
        if self._dq:
            self._dq_flush()
        if self._sfpu is not None and self._sfpu._pending:
            self._sfpu.drain_macros()

    def thread_done(self, thread: int) -> int:
        """Cycle by which everything thread `thread` issued has finished (cycle model)."""
        return self.tm.done(thread)

    def step(self) -> int:
        total = 0
        while True:
            self._poll_latches()
            n = self._drain(0) + self._drain(1) + self._drain(2)
            if n == 0:
                return total
            total += n

    def thread_idle(self, thread: int) -> bool:
        th = self.threads[thread]
        return not (th.fifo or th.mop_out or th.ready)

    def blocked_reason(self, thread: int) -> str | None:
        th = self.threads[thread]
        if not th.ready and not th.fifo and not th.mop_out:
            return None
        return th.blocked

    def _poll_latches(self) -> None:
        # The Wait Gate re-evaluates its latch every cycle and forgets it once met, even with no instruction waiting.
        for t, th in enumerate(self.threads):
            if th.latch is not None and self._latch_unmet(t, th.latch) is None:
                th.latch = None

    def _next(self, th: _Thread) -> int | None:
        """Head instruction at the Wait Gate after MOP and replay expansion, or None if nothing is queued."""
        ready = th.ready
        tm = self.tm
        if not ready:
            th.batch_skip = 0
        while not ready:
            from_mop = bool(th.mop_out)
            if from_mop:
                w = th.mop_out.popleft()
            elif th.fifo:
                w = th.fifo.popleft()
                op = w >> 24
                tm.take(th.tid, th.fifo_t.popleft(), op == _OP_MOP)
                if op == _OP_MOP:
                    self._expand_mop(th, w)
                    continue
                if op == _OP_MOP_CFG:
                    self._check_reserved_word(w, "MOP_CFG")
                    th.mask_hi = w & 0xFFFF
                    tm.frontend_cycles(th.tid, 1)      # ingested, emits nothing
                    continue
            else:
                return None
            # replay expander
            if th.replay_load is not None:
                idx, remaining, exe = th.replay_load
                th.replay_buf[idx % 32] = w
                th.replay_load = [idx + 1, remaining - 1, exe] if remaining > 1 else None
                if exe:
                    ready.append(w)
                else:
                    tm.frontend_cycles(th.tid, 1)      # REPLAY.md: recorded at one per cycle, nothing emitted
                continue
            if w >> 24 == _OP_REPLAY:
                self._check_reserved_word(w, "REPLAY")
                f = _REPLAY_FIELDS.get(w)
                if f is None:
                    f = _REPLAY_FIELDS[w] = INSTRUCTIONS["REPLAY"].decode(w)
                count = f["len"]
                if count == 0:
                    # WH doc: 0 means 64, but the BH buffer has 32 entries and ttsim refuses it: do not guess
                    raise EmuUnimplemented(f"Tensix: REPLAY word 0x{w:08X} with len=0")
                if f["load_mode"]:
                    th.replay_load = [f["start_idx"], count, f["execute_while_loading"]]
                    tm.frontend_cycles(th.tid, 1)          # the REPLAY word itself is ingested without emitting
                elif f["execute_while_loading"]:
                    raise EmuUnimplemented(f"Tensix: REPLAY word 0x{w:08X}: execute_while_loading without load_mode")
                else:
                    start = f["start_idx"]
                    rb = th.replay_buf
                    seq = rb[start:start + count] if start + count <= 32 else \
                        [rb[(start + i) % 32] for i in range(count)]
                    ready.extend(seq)
                    if from_mop and count >= 2:
                        tm.long_replay_in_mop(th.tid)
                    if from_mop:
                        # Identical REPLAYs right behind in the MOP output expand now too (_sfpu_batch can then
                        # see all row steps). Equivalent: nothing reads mop_out in between, and the only frontend
                        # timing of a MOP-emitted REPLAY is the idempotent long_replay_in_mop above.
                        mo = th.mop_out
                        while mo and mo[0] == w:
                            mo.popleft()
                            ready.extend(seq)
                continue
            ready.append(w)
        return ready[0]

    def _expand_mop(self, th: _Thread, w: int) -> None:
        self._check_reserved_word(w, "MOP")
        f = INSTRUCTIONS["MOP"].decode(w)
        cfg = th.mop_cfg
        out = th.mop_out
        if f["mop_type"] == 0:
            if f["loop_count"] > 31 or cfg[1] > 3:
                # ttsim (the verified model) supports only a 32-bit mask walk and the two flag bits
                raise EmuUnimplemented(f"Tensix: MOP template 0 word 0x{w:08X} with loop_count={f['loop_count']}, "
                                       f"MopCfg[1]=0x{cfg[1]:X}")
            mask = (th.mask_hi << 16) | f["zmask_lo16_or_loop_count"]
            has_b, has_a123 = cfg[1] & 1, cfg[1] & 2
            for _ in range(f["loop_count"] + 1):
                if mask & 1 == 0:
                    out.append(cfg[3])
                    if has_a123:
                        out.extend(cfg[4:7])
                    if has_b:
                        out.append(cfg[2])
                else:
                    out.append(cfg[7])
                    if has_b:
                        out.append(cfg[8])
                mask >>= 1
            return
        outer, inner = cfg[0], cfg[1]
        if f["zmask_lo16_or_loop_count"] or f["loop_count"] or not 1 <= outer <= 32 or not 1 <= inner <= 64:
            # ttsim's supported subset of template 1 (it does not model the OuterCount==1/InnerCount==0 bug)
            raise EmuUnimplemented(f"Tensix: MOP template 1 word 0x{w:08X} with OuterCount={outer}, "
                                   f"InnerCount={inner} (supported: 1..32, 1..64, count/mask fields 0)")
        start, end0, end1, loop, loop1, last0, last1 = cfg[2], cfg[3], cfg[4], cfg[5], cfg[6], cfg[7], cfg[8]

        def is_nop(x):
            return x >> 24 == _OP_NOP

        flip = 0
        if not is_nop(loop1):
            flip = loop ^ loop1
            inner *= 2
        for j in range(outer):
            if not is_nop(start):
                out.append(start)
            for i in range(inner):
                out.append(loop if i != inner - 1 else (last1 if j != outer - 1 else last0))
                loop ^= flip
            if not is_nop(end0):
                out.append(end0)
                if not is_nop(end1):
                    out.append(end1)

    def _check_reserved_word(self, w: int, name: str) -> None:
        if self.strict and w & ~INSTRUCTIONS[name].used_bits() & 0xFFFFFFFF:
            raise EmuError(f"Tensix: word 0x{w:08X} ({name}) sets reserved bits "
                           f"0x{w & ~INSTRUCTIONS[name].used_bits() & 0xFFFFFFFF:08X}")

    def _decode(self, w: int) -> tuple:
        d = self._decoded.get(w)
        if d is None:
            ins = OPCODES.get(w >> 24)
            if ins is None:
                raise EmuError(f"Tensix: unknown opcode 0x{w >> 24:02X} in word 0x{w:08X}")
            reserved = w & ~ins.used_bits() & 0xFFFFFFFF
            fields = ins.decode(w)
            kind, info = instr_kind(ins.name, ins.unit, fields)
            d = (ins.name, fields, self._handlers.get(ins.name), _block_bits(ins.name), reserved, kind, info)
            self._decoded[w] = d
        return d

    def _drain(self, t: int) -> int:
        th = self.threads[t]
        n = 0
        while True:
            w = self._next(th)
            if w is None:
                break
            name, fields, handler, block, reserved, kind, info = self._decode(w)
            if kind == K_SFPU and len(th.ready) >= 8 and len(th.ready) > th.batch_skip and th.latch is None:
                done = self._sfpu_batch(t, th)
                if done:
                    n += done
                    th.blocked = None
                    continue
                th.batch_skip = len(th.ready)
            if kind == K_SFPU and th.latch is None:
                done = self._drain_deferred(t, th)
                if done:
                    n += done
                    continue
            self._cur = (t, w, name)
            was_blocked = th.blocked is not None
            latch = th.latch
            if latch is not None:
                if block == _NOP_BLOCK:
                    blocked = latch.block == 0x1FF
                else:
                    blocked = bool(latch.block & block)
                if blocked:
                    why = self._latch_unmet(t, latch)
                    if why is not None:
                        th.blocked = why
                        break
                    th.latch = None
            if kind == K_SFPU:
                d = self._defer_info.get(w, _UNSET)
                if d is _UNSET:
                    d = self._defer_info[w] = self._defer_static(name, fields, handler, reserved)
                if d is not None and self._defer(t, th, w, d, block, info, was_blocked):
                    th.ready.popleft()
                    th.blocked = None
                    n += 1
                    continue
            if self._dq:
                self._dq_flush()                   # anything else on any thread: deferred work first
            if reserved and self.strict:
                raise self.err(f"reserved bits 0x{reserved:08X} set (not part of any {name} field)")
            if handler is None:
                raise self.unimpl(f"instruction {name}")
            if kind == K_SFPU:       # the SFPU needs its issue cycle (SFPLOADMACRO timing) before it executes
                self._issue_t = self.tm.issue(t, name, kind, info, fields, block, was_blocked)
                why = handler(t, fields)
            else:
                pre = self.tm.pre(t, kind, name, fields) if kind == K_FPU or kind == K_UNPACK else None
                why = handler(t, fields)
                if why is not None:
                    th.blocked = why
                    break
                self._issue_t = self.tm.issue(t, name, kind, info, fields, block, was_blocked, pre)
                if kind == K_WAIT and th.latch is not None:
                    lt = th.latch
                    self.tm.waited(t, self._issue_t, lt.cond if lt.kind == "STALLWAIT" else 0, lt.block)
            th.ready.popleft()
            th.blocked = None
            n += 1
        self.instructions[t] += n
        return n

    def _drain_deferred(self, t: int, th: _Thread) -> int:
        """_drain's loop for a run of deferrable SFPU words at the head of th.ready with no Wait Gate latch: each one
        exactly as _drain would (no batching attempt due, _defer; the non-Dst case inlined as in push()). Stops
        (returns how many ran) at the first word that needs _drain's general path or a batching attempt."""
        ready = th.ready
        fastc = self._fast
        tm = self.tm
        issue = tm.issue
        spied = "issue" in tm.__dict__             # an instance override of tm.issue (a test's spy) is honoured
        clock = tm.clock
        st = self._sfpu.timing if self._sfpu is not None else None
        cfg = self.cfg
        was_blocked = th.blocked is not None
        n = 0
        lim = th.batch_skip if th.batch_skip > 7 else 7
        while ready:
            if n and len(ready) > lim:
                break                              # _drain tries _sfpu_batch here (len >= 8 and > batch_skip)
            w = ready[0]
            fast = fastc.get(w, _UNSET)
            if fast is _UNSET:
                fast = self._fast_info(w)
            if fast is None:
                break
            name, fields, is_mem, block, info, ft, d = fast
            self._cur = (t, w, name)
            dq = self._dq
            if is_mem or not (dq or _sfpu_plain(self._sfpu)):
                if not self._defer(t, th, w, d, block, info, was_blocked):
                    break
            else:
                if len(dq) >= DQ_MAX:
                    self._dq_flush()
                    dq = self._dq
                if spied:
                    c = self._issue_t = issue(t, name, K_SFPU, info, fields, block, was_blocked)
                else:               # TensixTiming.issue for an SFPU word without Dst access, inlined as in push()
                    last = clock[t]
                    c = last + 1
                    fe = tm.fe[t]
                    if fe > c:
                        c = fe
                    mask, until = tm.gate[t]
                    if until > c and (block & mask if block != -1 else mask == 0x1FF):
                        c = until
                    if was_blocked and tm.event_t + 1 > c:
                        c = tm.event_t + 1
                    if c == st.nop_only_cycle or c == st.mad_cycle + 1 or info[5]:
                        c = st.regular(c, info)
                    elif info[4]:
                        st.mad_cycle, st.mad_writes, st.mad_macro = c, info[3], False
                        if c + 2 > st.busy_until:
                            st.busy_until = c + 2
                    elif c >= st.busy_until:
                        st.busy_until = c + 1
                    if tm.first[t] is None:
                        tm.first[t] = c
                    elif c - last > 1:
                        tm.stalls[t] += c - last - 1
                    clock[t] = c
                    tm.issued[t] += 1
                    self._issue_t = c
                if not dq:
                    self._dq_flags = _uniform_flags(self._sfpu)
                if ft is not None:
                    self._dq_flags = ft(*self._dq_flags)
                dq.append((w, name, fields, None, 0, c, cfg[0], cfg[1], t))
            ready.popleft()
            th.blocked = None
            was_blocked = False
            n += 1
        return n

    def _build_handlers(self) -> dict:
        handlers = {}
        for name, ins in INSTRUCTIONS.items():
            fn = getattr(self, name, None)
            if fn is not None:
                handlers[name] = fn
            elif ins.unit == "sfpu":
                handlers[name] = self._make_sfpu_handler(name)
        return handlers

    # ------------------------------------------------------------------------------------------------ MMIO views
    def _cfg_index(self, index: int) -> int:
        if not 0 <= index < CFG_WORDS:
            raise EmuError(f"Tensix config index {index} out of range (0..{CFG_WORDS - 1})")
        return index

    def cfg_read(self, index: int) -> int:
        return self.cfg[self._cfg_index(index)]

    def cfg_write(self, index: int, value: int) -> None:
        # RISC-V stores land in state bank 0 and take effect at once (ttsim); ordering against queued
        # instructions is the kernel's business (in-stream WRCFG or a TENSIX_SYNC read first).
        self.cfg[self._cfg_index(index)] = value & 0xFFFFFFFF

    def gpr_read(self, thread: int, index: int) -> int:
        return self.threads[thread].gpr[index]

    def gpr_write(self, thread: int, index: int, value: int) -> None:
        self.threads[thread].gpr[index] = value & 0xFFFFFFFF

    def sem_read(self, i: int) -> int:
        return self.sem_value[i]

    def sem_mmio_write(self, i: int, value: int, t: int = 0) -> None:
        self.tm.event_t = max(self.tm.event_t, t)
        if value & 1:
            self._sem_get(i, "RISC-V store to semaphore (SEMGET)")
        else:
            self._sem_post(i, "RISC-V store to semaphore (SEMPOST)")

    def mop_cfg_write(self, thread: int, index: int, value: int) -> None:
        if not 0 <= index < 9:
            raise EmuError(f"MOP config index {index} out of range (0..8)")
        self.threads[thread].mop_cfg[index] = value & 0xFFFFFFFF

    def thread_cfg(self, thread: int, index: int) -> int:
        """ThreadConfig register (read-only helper for tests/debugging)."""
        return self.threads[thread].cfg[index]

    # ------------------------------------------------------------------------------------------------ sync unit
    def _sem_post(self, i: int, who: str) -> None:
        v = self.sem_value[i]
        if self.strict and v >= self.sem_max[i]:
            # ttsim: NonContractualBehavior sem_max (pf08); hardware ignores Max here and saturates at 15
            raise EmuError(f"{who}: SEMPOST on semaphore {i} at Value {v} >= Max {self.sem_max[i]}")
        if v < 15:
            self.sem_value[i] = v + 1

    def _sem_get(self, i: int, who: str) -> None:
        v = self.sem_value[i]
        if v == 0:
            if self.strict:
                raise EmuError(f"{who}: SEMGET on semaphore {i} at Value 0")
            return
        self.sem_value[i] = v - 1

    @staticmethod
    def _sem_list(mask: int) -> list[int]:
        return [i for i in range(8) if mask >> i & 1]

    def SEMINIT(self, t, f):
        for i in self._sem_list(f["sem_sel"]):
            self.sem_value[i] = f["init_value"]
            self.sem_max[i] = f["max_value"]

    def SEMPOST(self, t, f):
        for i in self._sem_list(f["sem_sel"]):
            self._sem_post(i, self._where())

    def SEMGET(self, t, f):
        for i in self._sem_list(f["sem_sel"]):
            self._sem_get(i, self._where())

    def SEMWAIT(self, t, f):
        w = self._cur[1]
        if f["wait_sem_cond"]:
            latch = _Latch("SEMWAIT", f["wait_sem_cond"], f["sem_sel"], f["stall_res"] or _B6, w)
        else:  # SEMWAIT.md: no condition = STALLWAIT with the default condition mask
            latch = _Latch("STALLWAIT", 0x0F, 0, f["stall_res"] or _B6, w)
        self.threads[t].latch = latch

    def STALLWAIT(self, t, f):
        self.threads[t].latch = _Latch("STALLWAIT", f["wait_res"] or 0x0F, 0, f["stall_res"] or _B6, self._cur[1])

    def _latch_unmet(self, t: int, latch: _Latch) -> str | None:
        """None if every condition of the latch is met, else why the thread keeps waiting."""
        if latch.kind == "SEMWAIT":
            for i in self._sem_list(latch.sems):
                v, m = self.sem_value[i], self.sem_max[i]
                if latch.cond & 1 and v == 0:
                    return f"SEMWAIT sem{i} (value 0) [word 0x{latch.word:08X}]"
                if latch.cond & 2 and v >= m:
                    return f"SEMWAIT sem{i} (value {v} >= max {m}) [word 0x{latch.word:08X}]"
            return None
        c = latch.cond
        # C0-C4, C9-C12: units and requests finish at issue in this model, so those conditions always hold.
        tail = f"[word 0x{latch.word:08X}]"
        if c & (1 << 5) and self.srca_valid[self.srca_unpack_bank]:
            return f"STALLWAIT C5: SrcA bank {self.srca_unpack_bank} not owned by the unpacker {tail}"
        if c & (1 << 6) and self.srcb_valid[self.srcb_unpack_bank]:
            return f"STALLWAIT C6: SrcB bank {self.srcb_unpack_bank} not owned by the unpacker {tail}"
        if c & (1 << 7) and not self.srca_valid[self.srca_matrix_bank]:
            return f"STALLWAIT C7: SrcA bank {self.srca_matrix_bank} not owned by the FPU {tail}"
        if c & (1 << 8) and not self.srcb_valid[self.srcb_matrix_bank]:
            return f"STALLWAIT C8: SrcB bank {self.srcb_matrix_bank} not owned by the FPU {tail}"
        return None

    def _mutex(self, f) -> int:
        i = f["mutex_index"]
        if i not in self.mutex_holder:
            # ATGETM.md: an invalid index waits forever; report it instead of hanging the tile
            raise self.err(f"mutex index {i} does not exist (BH has 0, 2, 3, 4): the thread would wait forever")
        return i

    def ATGETM(self, t, f):
        i = self._mutex(f)
        holder = self.mutex_holder[i]
        if holder is not None and holder != t:
            return f"ATGETM mutex {i} held by T{holder}"
        self.mutex_holder[i] = t

    def ATRELM(self, t, f):
        i = self._mutex(f)
        if self.mutex_holder[i] == t:      # releasing a mutex held by another thread changes nothing
            self.mutex_holder[i] = None

    def NOP(self, t, f):
        pass

    # ------------------------------------------------------------------------------------------------ config unit
    def _check_state_bank(self, t: int) -> None:
        if self.threads[t].cfg[0] & 1:
            raise self.unimpl("config state bank 1 (CFG_STATE_ID_StateID=1)")

    def SETC16(self, t, f):
        reg = f["setc16_reg"]
        if reg >= THREAD_CFG_WORDS:
            raise self.err(f"SETC16 register {reg} out of range (ThreadConfig has {THREAD_CFG_WORDS})")
        self.threads[t].cfg[reg] = f["setc16_value"]

    def WRCFG(self, t, f):
        self._check_state_bank(t)
        idx, g = f["cfg_reg"], f["gpr_address"]
        gpr = self.threads[t].gpr
        if f["wr128b"]:
            base = idx & ~3
            if base + 4 > CFG_WORDS:
                raise self.err(f"WRCFG 128-bit to config index {idx} out of range")
            self.cfg[base:base + 4] = gpr[g & ~3:(g & ~3) + 4]
        else:
            if idx >= CFG_WORDS:
                raise self.err(f"WRCFG to config index {idx} out of range")
            self.cfg[idx] = gpr[g]

    def RDCFG(self, t, f):
        self._check_state_bank(t)
        idx = f["cfg_reg"]
        if idx >= CFG_WORDS:
            raise self.err(f"RDCFG from config index {idx} out of range")
        self.threads[t].gpr[f["gpr_address"]] = self.cfg[idx]

    def _rmwcib(self, t, f, byte):
        self._check_state_bank(t)
        idx = f["cfg_reg_addr"]
        if idx >= CFG_WORDS:
            raise self.err(f"RMWCIB to config index {idx} out of range")
        old = self.cfg[idx]
        ob = (old >> (8 * byte)) & 0xFF
        nb = (f["data"] & f["mask"]) | (ob & ~f["mask"] & 0xFF)
        self.cfg[idx] = (old & ~(0xFF << (8 * byte))) | (nb << (8 * byte))

    def RMWCIB0(self, t, f):
        self._rmwcib(t, f, 0)

    def RMWCIB1(self, t, f):
        self._rmwcib(t, f, 1)

    def RMWCIB2(self, t, f):
        self._rmwcib(t, f, 2)

    def RMWCIB3(self, t, f):
        self._rmwcib(t, f, 3)

    # ------------------------------------------------------------------------------------------------ ThCon: GPRs
    def SETDMAREG(self, t, f):
        if f["set_signals_mode"]:
            raise self.unimpl("SETDMAREG special (set_signals_mode=1) form")
        r = f["reg_index_16b"]
        gpr = self.threads[t].gpr
        g, hi = r >> 1, r & 1
        if hi:
            gpr[g] = (gpr[g] & 0x0000FFFF) | (f["payload"] << 16)
        else:
            gpr[g] = (gpr[g] & 0xFFFF0000) | f["payload"]

    # ------------------------------------------------------------------------------------------------ ThCon: ADCs
    def _adc_sets(self, t: int, f) -> list[int]:
        m = f["cnt_set_mask"]
        return [s for s in (UNP0, UNP1, PACK) if m >> s & 1]

    def _adc_set_fields(self, t, f, dims):
        # SETADCXY / SETADCZW: bit_mask = {ch0 first dim, ch0 second dim, ch1 first dim, ch1 second dim}
        th = self.threads[t]
        vals = ((0, dims[0], f["ch0_x"]), (0, dims[1], f["ch0_y"]), (1, dims[0], f["ch1_x"]), (1, dims[1], f["ch1_y"]))
        for s in self._adc_sets(t, f):
            for bit, (ch, d, v) in enumerate(vals):
                if f["bit_mask"] >> bit & 1:
                    th.adc[s][ch][d] = th.adc_cr[s][ch][d] = v & ADC_MASK[d]

    def SETADCXY(self, t, f):
        self._adc_set_fields(t, f, (0, 1))

    def SETADCZW(self, t, f):
        self._adc_set_fields(t, f, (2, 3))

    def SETADCXX(self, t, f):
        th = self.threads[t]
        for s in self._adc_sets(t, f):
            th.adc[s][0][0] = th.adc_cr[s][0][0] = f["x_start"]
            th.adc[s][1][0] = th.adc_cr[s][1][0] = f["x_end2"]

    def SETADC(self, t, f):
        v = f["value"]
        if v > 0xFFFF:
            # bits 17:16 are a thread override on Wormhole; ttsim BH accepts only 16-bit values
            raise self.unimpl(f"SETADC value 0x{v:X} > 0xFFFF (thread override)")
        th = self.threads[t]
        d, ch = f["dimension_index"], f["channel_index"]
        for s in self._adc_sets(t, f):
            th.adc[s][ch][d] = th.adc_cr[s][ch][d] = v & ADC_MASK[d]

    def _adc_inc(self, t, f, dims):
        th = self.threads[t]
        incs = ((0, dims[0], f["ch0_x"]), (0, dims[1], f["ch0_y"]), (1, dims[0], f["ch1_x"]), (1, dims[1], f["ch1_y"]))
        for s in self._adc_sets(t, f):
            for ch, d, v in incs:
                th.adc[s][ch][d] = (th.adc[s][ch][d] + v) & ADC_MASK[d]

    def INCADCXY(self, t, f):
        self._adc_inc(t, f, (0, 1))

    def INCADCZW(self, t, f):
        self._adc_inc(t, f, (2, 3))

    def _adc_addrcr(self, t, f, dims):
        th = self.threads[t]
        incs = ((0, dims[0], f["ch0_x"]), (0, dims[1], f["ch0_y"]), (1, dims[0], f["ch1_x"]), (1, dims[1], f["ch1_y"]))
        for s in self._adc_sets(t, f):
            for bit, (ch, d, v) in enumerate(incs):
                if f["bit_mask"] >> bit & 1:
                    th.adc_cr[s][ch][d] = (th.adc_cr[s][ch][d] + v) & ADC_MASK[d]
                    th.adc[s][ch][d] = th.adc_cr[s][ch][d]

    def ADDRCRXY(self, t, f):
        self._adc_addrcr(t, f, (0, 1))

    def ADDRCRZW(self, t, f):
        self._adc_addrcr(t, f, (2, 3))

    # ------------------------------------------------------------------------------------------------ SFPU
    def _make_sfpu_handler(self, name):
        has_addr_mode = "sfpu_addr_mode" in {fl.name for fl in INSTRUCTIONS[name].fields}
        is_load = name in ("SFPLOAD", "SFPLOADMACRO")
        canonical = {"SFPADD": self._check_sfpadd, "SFPMUL": self._check_sfpmul}.get(name)

        def handler(t, f):
            if self.sfpu is None:
                raise self.unimpl(f"SFPU instruction {name} (tt_backend.runtime.emu.sfpu not available)")
            th = self.threads[t]
            dst_base = (th.cfg[1] & 0xFFF) + th.rwc["d"]
            c0, c1 = self.cfg[0], self.cfg[1]
            self.sfpu.sfpu_fp32_enabled = bool(c1 >> 30 & 1)     # ALU_ACC_CTRL_SFPU_Fp32_enabled
            # MOD0_FMT_SRCB resolves by the SrcB format (SFPLOAD.md): the override field wins over REG1_SrcB
            srcb_fmt = (c0 >> 5 & 0xF) if c0 >> 9 & 1 else (c1 >> 21 & 0xF)
            self.sfpu.srcb_is_fp16 = srcb_fmt not in _SRCB_BF16_LIKE
            if is_load and self.strict:
                self._check_dst_written(name, f, dst_base)
            elif canonical is not None and self.strict:
                canonical(f)
            try:
                self.sfpu.execute(name, f, dst_base, self._issue_t)
            except EmuError as e:       # name the thread and word for SFPU-side rules (macros, hazards)
                if str(e).startswith("Tensix T"):
                    raise
                raise self.err(str(e)) from e
            if has_addr_mode:  # SFPLOAD/SFPSTORE/SFPLOADMACRO: RWCs move, the fidelity phase does not
                self.apply_addr_mod(t, f["sfpu_addr_mode"], fidelity=False)
        return handler

    def _check_dst_written(self, name: str, f: dict, dst_base: int) -> None:
        """Dst.md: Dst has no reset value; reading rows no one wrote is undefined (strict mode)."""
        addr = (f["dest_reg_addr"] + dst_base) & 0x3FC
        mod0 = f["instr_mod0"]
        if mod0 in (11, 10):                       # ZERO reads nothing; INT32_ALL is not modelled anyway
            return
        if mod0 == 0:
            mod0 = 3 if self.sfpu.sfpu_fp32_enabled else 2
        if mod0 in (3, 4, 12):
            rows = range(addr & 0x1FF, (addr & 0x1FF) + 4)
        else:                                      # Dst16b row r lives in Dst32b row ((r >> 4) << 3) | (r & 7)
            rows = sorted({((r >> 4) << 3) | (r & 7) for r in range(addr, addr + 4)})
        written = self.dst.written
        for r in rows:
            if not written[r & 511]:
                raise self.err(f"reads Dst row {r} (Dst32b numbering) which was never written since reset "
                               f"(Dst.md: Dst has no reset value)")

    def _check_sfpadd(self, f: dict) -> None:
        """SFPADD.md: SFPMAD computing +-(1.0 * VB) +- VC, i.e. one multiplicand must be LReg[10] (ttsim:
        NonContractualBehavior otherwise)."""
        if f["lreg_src_a"] != 10 and f["lreg_src_b"] != 10:
            raise self.err(f"SFPADD with VA={f['lreg_src_a']} and VB={f['lreg_src_b']}: one of them must be LReg[10] "
                           f"(1.0) - use SFPMAD for a general multiply-add")

    def _check_sfpmul(self, f: dict) -> None:
        """SFPMUL.md: SFPMAD computing +-(VA * VB) +- 0, i.e. VC must be LReg[9] (ttsim: NonContractualBehavior)."""
        if f["lreg_src_c"] != 9:
            raise self.err(f"SFPMUL with VC={f['lreg_src_c']}: the addend must be LReg[9] (0.0) - use SFPMAD")

    # ------------------------------------------------------------------------------------------------ SFPU batches
    def _sfpu_batch(self, t: int, th: _Thread) -> int:
        """Execute K >= BATCH_MIN_REPS back-to-back repetitions of one SFPU body at the head of the ready queue (what a
        MOP of identical REPLAYs emits) with one numpy pass per body instruction over K x 32 lanes. Returns the
        number of instructions executed, or 0 (nothing changed) unless the batch is provably equivalent to running
        them one by one:
        * the body is SFPU only, from a whitelist of lane-wise instructions that neither read nor change lane flags,
          PRNG, LaneConfig or macro state (SFPU.batchable), with no reserved bits and passing the strict SFPADD /
          SFPMUL operand rules; no LReg is read before the body writes it if the body writes it anywhere (no
          loop-carried LReg dependency: every repetition sees the same inputs as the first);
        * all lanes enabled, no LaneConfig bits, no SFPLOADMACRO work pending, no Wait Gate latch;
        * SFPLOAD/SFPSTORE in a 32-bit mode at even addresses below 512, where the RWC walk (the address modifiers
          simulated on a copy) never lets one repetition store to a Dst quad/column set another repetition touches
          (so instruction-major order equals row-major order), and (strict) every load reads written rows.
        Timing is not batched: every instruction gets its issue cycle from the cycle model in the original order
        (identical cycle counts, auto-stalls and hazard errors); only data errors are excluded up front."""
        ready = th.ready
        if self._sfpu is None:
            return 0
        lst = list(islice(ready, BATCH_MAX_WORDS))
        p, k = _find_period(lst)
        if k < BATCH_MIN_REPS:
            return 0
        body = tuple(lst[:p])
        plan = self._batch_plans.get(body)
        if plan is None:
            plan = self._batch_plans[body] = self._batch_plan(body)
        if not plan:
            return 0
        sfpu = self.sfpu                       # executes deferred work (_dq_flush) first
        sfpu.enabled()
        if sfpu._pending or sfpu._flags_after is not None or sfpu._lc_any or not sfpu._en_all:
            return 0
        entries, mems = plan
        c0, c1 = self.cfg[0], self.cfg[1]
        fp32 = bool(c1 >> 30 & 1)
        srcb_fmt = (c0 >> 5 & 0xF) if c0 >> 9 & 1 else (c1 >> 21 & 0xF)
        srcb16 = srcb_fmt not in _SRCB_BF16_LIKE
        resolved = []
        for (i, is_store, imm, amode, vd, mod0) in mems:
            m = mod0 or (3 if fp32 else 1 if srcb16 else 2)
            if m not in (3, 4, 12) or th.cfg[47 + amode]:
                return 0
            resolved.append(m)
        # the Dst addresses of every repetition: the address modifiers applied to a copy of the RWCs (in closed form
        # when every modifier the body uses only adds constants: _addr_mod_steps)
        base_cfg = th.cfg[1] & 0xFFF
        rwc = th.rwc
        steps = _addr_mod_steps(th, [m[3] for m in mems]) if BATCH_CLOSED_FORM else None
        nm = len(mems)
        if steps is not None:
            # closed form: the addresses, the ownership test and the rows strict mode must find written depend
            # only on (body, k, start address, steps): analysed once (_batch_addrs), cached
            akey = (body, k, base_cfg + rwc["d"], tuple(steps))
            an = self._batch_addr_cache.get(akey)
            if an is None:
                if len(self._batch_addr_cache) > 4096:
                    self._batch_addr_cache.clear()
                an = self._batch_addr_cache[akey] = _batch_addrs(mems, steps, k, base_cfg + rwc["d"])
            if an is False:
                return 0
            addrs_np, need_rows, per_rep = an
            if self.strict and need_rows is not None and not self.dst.written[need_rows].all():
                return 0
        else:
            th.rwc = sim = dict(rwc)
            addrs = []
            try:
                for _ in range(k):
                    for (i, is_store, imm, amode, vd, mod0) in mems:
                        addrs.append((imm + base_cfg + sim["d"]) & 0x3FF)
                        self.apply_addr_mod(t, amode, fidelity=False)
            except (EmuError, EmuUnimplemented):
                return 0
            finally:
                th.rwc = rwc
            owner = {}
            store_pos = [m[1] for m in mems]
            for j, a in enumerate(addrs):
                if a & 1 or a >= 512:
                    return 0
                if store_pos[j % nm]:
                    if owner.setdefault(a, j // nm) != j // nm:
                        return 0
            if owner:
                for j, a in enumerate(addrs):
                    if owner.get(a, j // nm) != j // nm:
                        return 0
            if self.strict:
                # strict: every load reads written rows (per Dst quad: a 32-bit load/store covers rows a & ~3 .. +3)
                wq = self.dst.written.reshape(128, 4).all(axis=1).tolist()
                for j, a in enumerate(addrs):
                    q = (a & 0x1FC) >> 2
                    if store_pos[j % nm]:
                        wq[q] = True
                    elif not wq[q]:
                        return 0
            addrs_np = np.array(addrs, dtype=np.int64).reshape(k, nm)
        # commit: timing in the original order, then the data one instruction at a time over all repetitions
        tm = self.tm
        was_blocked = th.blocked is not None
        c = self._issue_t
        st = sfpu.timing
        prev = None
        r = 0
        # a body issued before from the same relative cycle-model state issues the same way again (_timing_key)
        tkey = _timing_key(tm, t, st) if steps is not None and not was_blocked else None
        if tkey is not None:
            tkey = (body, k, tkey)
            memo = self._batch_timing.get(tkey)
            if memo is not None:
                c = _timing_replay(tm, t, st, memo)
                rwc["a"] = (rwc["a"] + k * per_rep[0]) & 0x3F
                rwc["b"] = (rwc["b"] + k * per_rep[1]) & 0x3F
                rwc["d"] = (rwc["d"] + k * per_rep[2]) & 0x3FF
                last = entries[-1]
                self._cur = (t, last[0], last[1])
                r = k
            else:
                entry = (_timing_base(tm, t), st.nop_only_cycle, st.mad_cycle, st.busy_until, tm.stalls[t],
                         tm.issued[t])
        while r < k:
            for (w, name, fields, block, info, amode) in entries:
                self._cur = (t, w, name)
                c = tm.issue(t, name, K_SFPU, info, fields, block, was_blocked)
                was_blocked = False
                if amode is not None:
                    self.apply_addr_mod(t, amode, fidelity=False)
            r += 1
            if steps is None or r >= k:
                continue
            snap = (tm.clock[t], st.nop_only_cycle, st.mad_cycle, st.mad_writes, st.mad_macro, st.busy_until,
                    tm.stalls[t])
            if prev is not None and _timing_periodic(tm, t, prev, snap):
                c = _timing_skip(tm, t, st, prev, snap, k - r, len(entries))
                rem = k - r
                rwc["a"] = (rwc["a"] + rem * per_rep[0]) & 0x3F
                rwc["b"] = (rwc["b"] + rem * per_rep[1]) & 0x3F
                rwc["d"] = (rwc["d"] + rem * per_rep[2]) & 0x3FF
                break
            prev = snap
        if tkey is not None and memo is None:
            memo = _timing_memo(tm, t, st, entry)
            if memo is not None:
                if len(self._batch_timing) > 4096:
                    self._batch_timing.clear()
                self._batch_timing[tkey] = memo
        self._issue_t = c
        sfpu.sfpu_fp32_enabled, sfpu.srcb_is_fp16 = fp32, srcb16
        bkey = (body, tuple(resolved))
        ebody = self._batch_bodies.get(bkey)
        if ebody is None:
            mem_info = {i: (is_store, vd, m) for (i, is_store, imm, amode, vd, mod0), m in zip(mems, resolved)}
            ebody = self._batch_bodies[bkey] = [(e[1], e[2], mem_info.get(i)) for i, e in enumerate(entries)]
        sfpu.execute_batch(ebody, k, addrs_np, c)
        n = k * p
        for _ in range(n):
            ready.popleft()
        return n

    def _batch_plan(self, body: tuple):
        """Static part of _sfpu_batch's equivalence argument for one body (cached per body): (entries, mems) or
        False."""
        from tt_backend.runtime.emu.sfpu import SFPU
        entries, mems = [], []
        written = all_w = 0
        infos = []
        for i, w in enumerate(body):
            try:
                name, fields, handler, block, reserved, kind, info = self._decode(w)
            except (EmuError, EmuUnimplemented):
                return False                      # raised in order by the one-by-one path
            if reserved or kind != K_SFPU or handler is None or not SFPU.batchable(name, fields):
                return False
            if self.strict and name in ("SFPADD", "SFPMUL"):
                try:
                    (self._check_sfpadd if name == "SFPADD" else self._check_sfpmul)(fields)
                except EmuError:
                    return False
            amode = fields["sfpu_addr_mode"] if name in ("SFPLOAD", "SFPSTORE") else None
            entries.append((w, name, fields, block, info, amode))
            if amode is not None:
                mems.append((i, name == "SFPSTORE", fields["dest_reg_addr"], amode, fields["lreg_ind"],
                             fields["instr_mod0"]))
            reads, writes = info[1], info[3]
            if name == "SFPLOADI" and fields["instr_mod0"] in (8, 10):   # keeps half of VD
                reads |= 1 << fields["lreg_ind"]
            infos.append((reads, writes))
            all_w |= writes
        for reads, writes in infos:
            if reads & all_w & ~written:
                return False                      # loop-carried: read before this repetition writes it
            written |= writes
        return entries, mems

    # ------------------------------------------------------------------------------------------------ SFPU deferral
    # SFPU bodies pushed one word at a time (the compute template's TTI loop for bodies longer than the replay
    # buffer) arrive one instruction per push, too late for _sfpu_batch. Such an instruction is *issued* at once as
    # usual - Wait Gate, cycle model (issue cycle, auto-stalls, hazard errors), strict Dst-read check, RWC address
    # modifiers, instruction counts - but its data effect (LRegs, lane flags, Dst) is queued in self._dq with
    # everything it depends on resolved (Dst base, format, issue cycle). The queue is executed (_dq_flush) before
    # anything can observe that state: any use of self.sfpu / self.dst (other SFPU instructions, FPU, unpack-to-Dst,
    # pack, strict checks, tests), settle(), or a full queue. Executing it finds back-to-back repetitions of one
    # body and runs them through SFPU.execute_batch when _dq_plan proves the batch equal to running them one by one;
    # the rest runs one by one, exactly as the handler would have. Only instructions that cannot raise when executed
    # are deferred (SFPU.batchable with flags, 32-bit Dst modes at even addresses below 512, no SFPLOADMACRO work,
    # no LaneConfig), so every error still fires at the instruction that causes it.
    def _defer_static(self, name: str, fields: dict, handler, reserved: int):
        """The per-word part of the deferral decision: None, or the facts _defer and _dq_plan need."""
        from tt_backend.runtime.emu.sfpu import SFPU, _FLAG_WRITERS
        if not DEFER_SFPU or reserved or handler is None or not isinstance(self._sfpu, SFPU) \
                or not SFPU.batchable(name, fields, flags=True):
            return None
        if self.strict and name in ("SFPADD", "SFPMUL"):
            try:
                (self._check_sfpadd if name == "SFPADD" else self._check_sfpmul)(fields)
            except EmuError:
                return None                        # the handler raises it
        is_mem = name in ("SFPLOAD", "SFPSTORE")
        return (name, fields, is_mem, name == "SFPSTORE", fields["dest_reg_addr"] if is_mem else 0,
                fields["sfpu_addr_mode"] if is_mem else 0, fields["lreg_ind"] if is_mem else 0,
                fields["instr_mod0"] if is_mem else 0,
                partial(SFPU.flag_transfer, name, fields) if name in _FLAG_WRITERS else None)

    def _fast_info(self, w: int):
        try:
            name, fields, handler, block, reserved, kind, info = self._decode(w)
        except (EmuError, EmuUnimplemented):
            fast = None                            # raised in order by _drain
        else:
            fast = None
            if kind == K_SFPU:
                d = self._defer_info.get(w, _UNSET)
                if d is _UNSET:
                    d = self._defer_info[w] = self._defer_static(name, fields, handler, reserved)
                if d is not None:
                    fast = (name, fields, d[2], block, info, d[8], d)
        self._fast[w] = fast
        return fast

    def _defer(self, t: int, th: _Thread, w: int, d: tuple, block: int, info, was_blocked: bool) -> bool:
        """Issue the SFPU instruction `w` at the head of thread t now and queue its data effect; False (nothing
        changed) when it must run through its handler instead."""
        sfpu = self._sfpu
        if not self._dq and not _sfpu_plain(sfpu):
            return False
        name, fields, is_mem, is_store, imm, amode, vd, mod0, flagw = d
        dst_base = (th.cfg[1] & 0xFFF) + th.rwc["d"]
        cfg = self.cfg
        c0, c1 = cfg[0], cfg[1]
        dq = self._dq
        if is_mem:
            mode = mod0 or _resolve_mode(c0, c1)
            addr = (imm + dst_base) & 0x3FF
            if mode not in (3, 4, 12) or addr & 1 or addr >= 512:
                return False
            if len(dq) >= DQ_MAX:
                self._dq_flush()
                dq = self._dq
            c = self._issue_t = self.tm.issue(t, name, K_SFPU, info, fields, block, was_blocked)
            r0 = addr & 0x1FC
            if not is_store and self.strict and self._dst.written[r0:r0 + 4].tobytes() != _ALL4:
                # maybe a deferred predicated store wrote the rows: execute the queue, then the handler's exact check
                s = self.sfpu
                s.sfpu_fp32_enabled, s.srcb_is_fp16 = _fmt_flags(c0, c1)
                self._check_dst_written(name, fields, dst_base)
                dq = self._dq
            if not dq:
                self._dq_flags = _uniform_flags(sfpu)
            if is_store:
                lf, use = self._dq_flags
                if use == 0 or (use == 1 and lf == 1):  # every lane enabled: the store marks its rows written
                    self._dst.written[r0:r0 + 4] = True
            dq.append((w, name, fields, (is_store, vd, mode, addr), dst_base, c, c0, c1, t))
            self.apply_addr_mod(t, amode, fidelity=False)
        else:
            if len(dq) >= DQ_MAX:
                self._dq_flush()
                dq = self._dq
            c = self._issue_t = self.tm.issue(t, name, K_SFPU, info, fields, block, was_blocked)
            if not dq:
                self._dq_flags = _uniform_flags(sfpu)
            if flagw is not None:
                self._dq_flags = flagw(*self._dq_flags)
            dq.append((w, name, fields, None, 0, c, c0, c1, t))   # (no Dst access: dst_base unused)
        return True

    def _dq_flush(self) -> None:
        """Execute the deferred SFPU work in order: batched where a body repeats, else one by one."""
        dq = self._dq
        if not dq:
            return
        self._dq = []
        self._dq_flags = None
        cur = self._cur
        sfpu = self._sfpu
        try:
            n = len(dq)
            words = [e[0] for e in dq]
            i = tries = 0
            plain_until = -1          # entries before this index run one by one without another attempt
            while i < n:
                seq = 1
                if i >= plain_until and n - i >= 4:
                    p, k = _dq_period(words, i, n)
                    if k >= 2:
                        done, seq = self._dq_batch(dq, words, i, p, k)
                        if done:
                            i += done
                            tries = 0
                            continue
                        if seq == 1:  # this rotation of the body cannot start a batch here: try the next one,
                            tries += 1    # but after p failures no rotation can, so run the region one by one
                            if tries >= p:
                                plain_until, tries = i + p * k, 0
                for e in dq[i:i + seq]:
                    self._dq_exec(e)
                i += seq
            last = dq[-1]
            sfpu.sfpu_fp32_enabled, sfpu.srcb_is_fp16 = _fmt_flags(last[6], last[7])
        finally:
            self._cur = cur

    def _dq_exec(self, e: tuple) -> None:
        w, name, fields, mem, dst_base, c, c0, c1, t = e
        sfpu = self._sfpu
        sfpu.sfpu_fp32_enabled, sfpu.srcb_is_fp16 = _fmt_flags(c0, c1)
        self._cur = (t, w, name)
        try:
            sfpu.execute(name, fields, dst_base, c)
        except EmuError as err:      # not expected (only non-raising work is deferred); name it like the handler
            if str(err).startswith("Tensix T"):
                raise
            raise self.err(str(err)) from err

    def _dq_batch(self, dq: list, words: list, i: int, p: int, k: int) -> tuple[int, int]:
        """Run the k repetitions of the p-word body at dq[i] as one batch if provably equivalent: (entries done, 0);
        else (0, how many entries to run one by one before trying again)."""
        sfpu = self._sfpu
        lf, use = sfpu.lane_flags, sfpu.use_lane_flags
        s_lf = 1 if lf.all() else 0 if not lf.any() else None
        s_use = 1 if use.all() else 0 if not use.any() else None
        if s_lf is None or s_use is None:
            return 0, 1               # mid-body (flags set by data): step until a point where they are uniform
        key = (tuple(words[i:i + p]), s_lf, s_use)
        plan = self._dq_plans.get(key)
        if plan is None:
            plan = self._dq_plans[key] = self._dq_plan(key[0], s_lf, s_use)
        if not plan:
            return 0, 1               # (a rotation of the real body, entered mid-body, may well be refused)
        entries, mem_pos = plan
        nm = len(mem_pos)
        modes = [dq[i + j][3][2] for j in mem_pos]
        stores = [dq[i + j][3][0] for j in mem_pos]
        addrs = []
        for r in range(k):
            base = i + r * p
            for j, m in zip(mem_pos, modes):
                mem = dq[base + j][3]
                if mem[2] != m:
                    return 0, p
                addrs.append(mem[3])
        # no repetition may store to a Dst quad/column set another repetition loads or stores (then instruction-
        # major order equals row-major order)
        # (the leading repetitions that pass: a Dst RWC reset or wrap-around ends the batch there)
        owner, used = {}, {}
        good = k
        for r in range(k):
            ra = addrs[r * nm:(r + 1) * nm]
            if any(owner.get(a, r) != r or (st and used.get(a, r) != r) for a, st in zip(ra, stores)):
                good = r
                break
            for a, st in zip(ra, stores):
                used.setdefault(a, r)
                if st:
                    owner[a] = r
        if good < 2:
            return 0, p
        k = good
        del addrs[k * nm:]
        body = [(name, fields, None if pos < 0 else (stores[pos], dq[i + j][3][1], modes[pos]))
                for j, (name, fields, pos) in enumerate(entries)]
        last = dq[i + p * k - 1]
        self._cur = (last[8], last[0], last[1])
        sfpu.execute_batch(body, k, np.array(addrs, dtype=np.int64).reshape(k, nm) if nm else
                           np.zeros((k, 0), dtype=np.int64), last[5])
        return p * k, 0

    def _dq_plan(self, body: tuple, lf, use):
        """Static part of _dq_batch's equivalence argument for one body entered with uniform lane flags (lf, use):
        (entries, mem_pos) or False. Every repetition must start from the same state: the body leaves the flag
        state as it found it (tracked abstractly, SFPU.flag_transfer), and no LReg the body writes is read before
        this repetition writes it, where a write on possibly partly enabled lanes also reads the old value."""
        from tt_backend.runtime.emu.sfpu import SFPU
        entries, mem_pos, infos = [], [], []
        state = (lf, use)
        all_w = written = 0
        for w in body:
            name, fields, is_mem, is_store, imm, amode, vd, mod0, flagw = self._defer_info[w]
            reads, writes = SFPU.batch_regs(name, fields)
            if not (use == 0 or (use == 1 and lf == 1)):
                reads |= writes
            infos.append((reads, writes))
            all_w |= writes
            if flagw is not None:
                lf, use = flagw(lf, use)
            entries.append((name, fields, len(mem_pos) if is_mem else -1))
            if is_mem:
                mem_pos.append(len(entries) - 1)
        if (lf, use) != state:
            return False
        for reads, writes in infos:
            if reads & all_w & ~written:
                return False
            written |= writes
        return entries, mem_pos


class _DstView:
    """Tensix.dst: the Tensix's Dst, with the deferred SFPU work executed before any attribute of it is used (so a
    reference kept by someone else, e.g. the tile's RISC-V Dst window, never sees Dst ahead of the SFPU)."""
    __slots__ = ("_tx",)

    def __init__(self, tx: "Tensix") -> None:
        object.__setattr__(self, "_tx", tx)

    def __getattr__(self, name: str):
        tx = self._tx
        if tx._dq:
            tx._dq_flush()
        return getattr(tx._dst, name)

    def __setattr__(self, name: str, value) -> None:
        tx = self._tx
        if tx._dq:
            tx._dq_flush()
        setattr(tx._dst, name, value)


DEFER_SFPU = True         # tests turn the deferral off to compare with one-by-one execution
DQ_MAX = 16384            # deferred instructions before the queue is executed anyway
DQ_MAX_PERIOD = 2048      # longest body _dq_period looks for
_UNSET = object()
_REPLAY_FIELDS: dict[int, dict] = {}      # REPLAY word -> decoded fields (read only)
_ALL4 = b"\x01" * 4      # Dst.written[r0:r0 + 4].tobytes() when all four rows are written


def _fmt_flags(c0: int, c1: int) -> tuple[bool, bool]:
    """(ALU_ACC_CTRL_SFPU_Fp32_enabled, SrcB format is FP16-like) from config words 0 and 1 (as the handler sets
    them on the SFPU)."""
    srcb_fmt = (c0 >> 5 & 0xF) if c0 >> 9 & 1 else (c1 >> 21 & 0xF)
    return bool(c1 >> 30 & 1), srcb_fmt not in _SRCB_BF16_LIKE


def _resolve_mode(c0: int, c1: int) -> int:
    """SFPLOAD/SFPSTORE Mod0 0 (MOD0_FMT_SRCB) resolved as SFPU._resolve_srcb does."""
    fp32, srcb16 = _fmt_flags(c0, c1)
    return 3 if fp32 else 1 if srcb16 else 2


def _sfpu_plain(sfpu) -> bool:
    """No SFPLOADMACRO work scheduled, no same-cycle flag update pending, LaneConfig all zero: the state in which
    deferred instructions run exactly like their handlers and execute_batch applies."""
    return not sfpu._pending and sfpu._flags_after is None and not sfpu._lc_any


def _uniform_flags(sfpu) -> tuple:
    """(LaneFlags, UseLaneFlagsForLaneEnable) as 0 / 1 when equal on all lanes, else None."""
    lf, use = sfpu.lane_flags, sfpu.use_lane_flags
    return (1 if lf.all() else 0 if not lf.any() else None, 1 if use.all() else 0 if not use.any() else None)


def _dq_period(words: list, i: int, n: int) -> tuple[int, int]:
    """(p, k): the body length p whose k >= 2 back-to-back repetitions from words[i] cover most words."""
    w0 = words[i]
    best_p = best_k = 0
    j = i + 1
    lim = min(n, i + DQ_MAX_PERIOD + 1)
    while True:
        try:
            j = words.index(w0, j, lim)
        except ValueError:
            break
        p = j - i
        if i + 2 * p > n:
            break
        head = words[i:j]
        if words[j:j + p] == head:
            k = 2
            while i + (k + 1) * p <= n and words[i + k * p:i + (k + 1) * p] == head:
                k += 1
            if k * p > best_k * best_p:
                best_p, best_k = p, k
                if n - i - k * p < p:
                    break
        j += 1
    return best_p, best_k


BATCH_CLOSED_FORM = True  # tests turn it off: _sfpu_batch then walks the RWCs and the cycle model row step by row step


def _addr_mod_steps(th: _Thread, modes: list) -> list | None:
    """Per address-modifier index in `modes`: its (SrcA, SrcB, Dst) RWC increments when every one of them only adds
    a constant (no Clear, no CR, no DestCToCR, no bias: FpuMixin.apply_addr_mod then is `rwc += incr` masked), else
    None."""
    cfg = th.cfg
    out = []
    for m in modes:
        ab, dm = cfg[12 + m], cfg[28 + m]
        if cfg[47 + m] or ab & 0xC0C0 or dm & 0x1C00:
            return None
        out.append((ab & 0x3F, ab >> 8 & 0x3F, dm & 0x3FF))
    return out


def _batch_addrs(mems: list, steps: list, k: int, start: int):
    """The static Dst analysis of _sfpu_batch for a body whose address modifiers only add constants, entered with
    Dst address base + RWC.Dst = `start`: False if refused (odd or >= 512 address; a repetition storing to a quad /
    column set another repetition touches), else ((k, n_mem) int64 addresses, the Dst32b rows strict mode must find
    written beforehand (int64 array, None if none), per-repetition (SrcA, SrcB, Dst) RWC increments)."""
    offs, off = [], start
    for (i, is_store, imm, amode, vd, mod0), st in zip(mems, steps):
        offs.append(imm + off)
        off += st[2]
    per_d = off - start
    addrs = [(o + r * per_d) & 0x3FF for r in range(k) for o in offs]
    nm = len(mems)
    store_pos = [m[1] for m in mems]
    owner = {}
    for j, a in enumerate(addrs):
        if a & 1 or a >= 512:
            return False
        if store_pos[j % nm]:
            if owner.setdefault(a, j // nm) != j // nm:
                return False
    if owner:
        for j, a in enumerate(addrs):
            if owner.get(a, j // nm) != j // nm:
                return False
    # strict: a load must find its quad written, by an earlier store of the batch or before the batch
    stored, need = set(), []
    for j, a in enumerate(addrs):
        q = (a & 0x1FC) >> 2
        if store_pos[j % nm]:
            stored.add(q)
        elif q not in stored and q not in need:
            need.append(q)
    need_rows = np.array([4 * q + i for q in need for i in range(4)], dtype=np.int64) if need else None
    per_rep = tuple(sum(st[j] for st in steps) for j in range(3))
    return np.array(addrs, dtype=np.int64).reshape(k, nm), need_rows, per_rep


def _timing_key(tm, t: int, st):
    """The SFPU issue state of thread t relative to B = max(clock + 1, frontend time), the earliest cycle its next
    instruction can issue, when nothing absolute can matter any more (the Wait Gate release and FPU Dst writes not
    after B / B - 4, a first issue recorded, nop_only_cycle <= B and mad_cycle <= B - 1 so that any value the body
    sets differs from them): the key under which a batch's timing is memoised (_timing_memo), else None. The
    relevant state is B - clock (stall counting), nop_only_cycle if it can still equal an issue cycle and
    (mad_cycle, mad_writes, mad_macro) if mad_cycle + 1 can (SfpuTiming.regular)."""
    c0 = tm.clock[t]
    b = tm.fe[t]
    if b <= c0:
        b = c0 + 1
    if tm.first[t] is None or tm.gate[t][1] > b:
        return None
    w = tm.dst_fpu_write
    if w and max(w.values()) > b - FPU_TO_SFPLOAD_GAP:
        return None
    nop, mad = st.nop_only_cycle, st.mad_cycle
    if nop > b or mad > b - 1:
        return None
    return (b - c0, nop == b, (st.mad_writes, st.mad_macro) if mad == b - 1 else None)


def _timing_base(tm, t: int) -> int:
    """B of _timing_key."""
    c0, fe = tm.clock[t], tm.fe[t]
    return fe if fe > c0 else c0 + 1


def _timing_memo(tm, t: int, st, entry: tuple):
    """What one batch did to the cycle model, relative to its entry base B (entry = B, nop_only_cycle, mad_cycle,
    busy_until, stalls, issued before it), or None when busy_until did not move (its new value then depends on the
    absolute old one)."""
    b, nop0, mad0, busy0, stalls0, issued0 = entry
    if st.busy_until == busy0:
        return None
    return (tm.clock[t] - b, None if st.nop_only_cycle == nop0 else st.nop_only_cycle - b,
            None if st.mad_cycle == mad0 else (st.mad_cycle - b, st.mad_writes, st.mad_macro),
            st.busy_until - b, tm.stalls[t] - stalls0, tm.issued[t] - issued0)


def _timing_replay(tm, t: int, st, memo: tuple) -> int:
    """Apply a _timing_memo() result at the current base B (state with the same _timing_key): exactly what issuing
    the batch one instruction at a time would do (issue cycles depend only on the state relative to B; busy_until is
    a running maximum of values relative to B). Returns the last issue cycle."""
    d_clock, nop, mad, busy, d_stalls, d_issued = memo
    b = _timing_base(tm, t)
    if nop is not None:
        st.nop_only_cycle = b + nop
    if mad is not None:
        st.mad_cycle, st.mad_writes, st.mad_macro = b + mad[0], mad[1], mad[2]
    if b + busy > st.busy_until:
        st.busy_until = b + busy
    tm.stalls[t] += d_stalls
    tm.issued[t] += d_issued
    tm.clock[t] = b + d_clock
    return b + d_clock


def _timing_periodic(tm, t: int, s1: tuple, s2: tuple) -> bool:
    """Snapshots s1 / s2 of the SFPU issue state after two consecutive repetitions of a batched body (clock,
    nop_only_cycle, mad_cycle, mad_writes, mad_macro, busy_until, stalls): True when every later repetition provably
    issues exactly like the last one shifted by delta = s2.clock - s1.clock. TensixTiming.issue for an SFPU word
    depends on the thread clock, the frontend and Wait Gate times (no effect once in the past), the SFPU hazard
    state (nop_only_cycle, mad_cycle, mad_writes, mad_macro; a time matters only while it is not in the past) and
    the FPU write times of Dst blocks (SFPLOAD hazard check, silent once in the past); busy_until and stalls only
    accumulate. So: the state relative to the clock is the same after both repetitions, and nothing absolute can
    still matter."""
    c1 = s1[0]
    delta = s2[0] - c1
    if s1[3] != s2[3] or s1[4] != s2[4] or s2[5] != s1[5] + delta:
        return False
    if not (s2[1] == s1[1] + delta or (s2[1] == s1[1] and s1[1] <= c1)):
        return False                  # nop_only_cycle: moves with the body, or can never equal a later cycle
    if not (s2[2] == s1[2] + delta or (s2[2] == s1[2] and s1[2] < c1)):
        return False                  # mad_cycle likewise (it matters at mad_cycle + 1)
    if tm.fe[t] > c1 + 1 or tm.gate[t][1] > c1 + 1:
        return False
    w = tm.dst_fpu_write
    if w and max(w.values()) > c1 - FPU_TO_SFPLOAD_GAP + 1:
        return False
    return True


def _timing_skip(tm, t: int, st, s1: tuple, s2: tuple, n: int, p: int) -> int:
    """Advance the cycle model by n more repetitions of a p-word body known periodic (_timing_periodic): exactly the
    state n one-by-one repetitions would leave. Returns the last issue cycle."""
    delta = s2[0] - s1[0]
    shift = n * delta
    if s2[1] != s1[1]:
        st.nop_only_cycle += shift
    if s2[2] != s1[2]:
        st.mad_cycle += shift
    st.busy_until += shift
    tm.stalls[t] += n * (s2[6] - s1[6])
    tm.issued[t] += n * p
    tm.clock[t] += shift
    return tm.clock[t]


BATCH_MIN_REPS = 4        # fewer repetitions are not worth the analysis
BATCH_MAX_WORDS = 4096


def _find_period(lst: list) -> tuple[int, int]:
    """(p, k): the body length p <= 32 whose k leading back-to-back repetitions cover most of `lst`."""
    best_p, best_k = 0, 0
    n = len(lst)
    for p in range(1, min(32, n // 2) + 1):
        head = lst[:p]
        if lst[p:2 * p] != head:
            continue
        k = 2
        while lst[k * p:(k + 1) * p] == head:
            k += 1
        if k * p > best_k * best_p:
            best_p, best_k = p, k
    return best_p, best_k
