"""Deferred SFPU work (the speed layer's path for bodies pushed one word at a time).

SFPU bodies pushed word by word (the compute template's TTI loop for bodies longer than the replay buffer) arrive one
instruction per push, too late for mop_batch. Such an instruction is *issued* at once as usual - Wait Gate, cycle model
(issue cycle, auto-stalls, hazard errors), strict Dst-read check, RWC address modifiers, instruction counts - but its
data effect (LRegs, lane flags, Dst) is queued in `deferred` with everything it depends on resolved (Dst base, format,
issue cycle). The queue is executed (flush_deferred) before anything can observe that state: any use of the Tensix's
`sfpu` / `dst` (other SFPU instructions, FPU, unpack-to-Dst, pack, strict checks, tests, the tile's RISC-V Dst window),
settle(), or a full queue. Executing it finds back-to-back repetitions of one body and runs them through
sfpu_batch.execute_batch when _dq_plan proves the batch equal to running them one by one; a body that also carries a
value from one repetition to the next (a running sum over rows: reduction and einsum kernels; a running minimum or
maximum: cummin / cummax) runs batched except for that chain, which then runs repetition by repetition on the batch's
per-repetition values (_dq_chain; in one C call where sfpu_native covers it); the rest runs
one by one, exactly as the handler would have. Only instructions that cannot raise when executed are deferred
(sfpu_batch.batchable with flags, 32-bit Dst modes at even addresses below 512, no SFPLOADMACRO work, no LaneConfig),
so every error still fires at the instruction that causes it. A thread whose deferred data is still queued counts as
idle: its work is issued in the cycle model, and nothing outside the Tensix can see the difference.

The entry points: `push` / `push_many` (a deferrable word reaching an empty thread is issued and queued without the
FIFO round trip) and `drain_deferrable` (a run of them at the head of a thread's ready queue); each does exactly what
the reference path (frontend push -> Tensix.drain -> the SFPU handler) would, issuing through the cycle model's one
SFPU issue rule (TensixTiming.issue_sfpu). Mixed into tensix.Tensix.
"""
from __future__ import annotations

import os
from functools import partial
from itertools import islice
from types import MethodType

import numpy as np

from tt_backend.chip.errors import EmuError, EmuUnspecified
from tt_backend.chip.isa import INSTRUCTIONS
from tt_backend.chip.numerics.sfpu.state import FLAG_WRITERS
from tt_backend.runtime.emu.accel import sfpu_batch, sfpu_issue_native, sfpu_native
from tt_backend.runtime.emu.accel.inline import inline_calls
from tt_backend.runtime.emu.accel.sfpu_issue_native import FLAG_CODE, FLAG_STATES
from tt_backend.runtime.emu.cycles import K_SFPU, TensixTiming
from tt_backend.runtime.emu.frontend import replay_executes
from tt_backend.runtime.emu.sfpu import SFPU
from tt_backend.runtime.emu.tensix_sfpu import resolve_sfpu_mode, sfpu_format_flags
from tt_backend.runtime.emu.thread_state import ThreadState

DEFER_SFPU = True         # tests turn the deferral off to compare with one-by-one execution
DQ_MAX = 16384            # deferred instructions before the queue is executed anyway
DQ_MAX_PERIOD = 2048      # longest body _dq_period looks for
# With the C part (sfpu_native), fewer repetitions than this run one by one in C rather than as a numpy batch: a batch
# costs ~20-50 us of numpy calls per body instruction and ~2 us per repetition, the C part ~0.15 us per instruction and
# repetition (a convolution's 32-row bodies flushed at every SETRWC: 24.4 -> 14.5 CPU s, the same bits). Measured on
# the queue's execution, numpy batch / C: exp2's 9-word body 0.93 / 0.47 ms at k = 128, 1.16 / 0.83 ms at k = 256;
# a 3-word copy 0.60 / 0.20 ms at k = 256; a body that stores cannot repeat more than 256 times between two Dst wraps
# anyway. The MOP batches (mop_batch.py) follow the same rule.
NATIVE_BATCH_MIN = 512
_UNSET = object()
# A word's deferral facts (_fast_info: deferral_of's tuple, the entry points' `fast` tuple, word_facts' C facts) and
# its sfpu_native record (_record) are pure functions of its static decode and a few settings, shared by every
# Tensix (tensix.py's SHARED_DECODE shares the decode): before, each new Tensix derived them again for every word it
# met (bench emu's sfpu_long makes a Tensix a call: its first tile's ~150 words, ~3 M x86 instructions of the call's
# 140 M). Keyed by what they depend on (the class, the methods and functions that derive them, the word, strict,
# whether the SFPU is the plain SFPU, DEFER_SFPU, whether the word has a handler, its reserved bits) and taken only
# where the decode gave the same fields object and the instance overrides none of the methods that derive them.
# TT_EMU_SHARED_FACTS=0: each instance derives its own (a Python cache, hence no `_NATIVE` in its name).
SHARED_FACTS = os.environ.get("TT_EMU_SHARED_FACTS", "1") != "0"
_SHARED_FAST: dict[tuple, tuple] = {}       # key above -> (deferral_of's facts, fast, word_facts)
_SHARED_RECORDS: dict[int, tuple] = {}      # word -> (name, fields, sfpu_native.record, its record of them)
_FACT_METHODS = frozenset(("deferral_of", "_defer_static", "check_sfpu_operands"))
# A new Tensix still passed each word once through _fast_info and, in push_many, through the Python issue loop
# before the C part could take it (a launch's first tile: bench emu's tile_long spent ~0.8 of its ~4.8 ms there, and
# every core of a grid launch, a fresh Tile, pays it again). So, with SHARED_FACTS, a Tensix whose per-word caches are
# still empty takes at its first miss (_adopt_facts) every word's facts and records other Tensixes derived under the
# same setting: _SHARED_TABLES, keyed by _facts_token (the class, the functions that derive facts, records and the
# decode, strict, whether the SFPU is the plain SFPU, DEFER_SFPU and the names that have handlers: what _shared_key
# holds but the word's own parts, which the word's static decode fixes); none where the decode is not shared or the
# instance overrides a deriving method or the decode.
_SHARED_TABLES: dict[tuple, tuple[dict, dict, dict, dict]] = {}   # token -> (_fast, _cword, _defer_info, _records)
# Words a table takes (the first met): a new Tensix copies its tables whole (~60 us a dict at this size), so a process
# that meets ever more words (random test programs, many constants) does not make each new Tensix dearer without bound
TABLE_WORDS = 4096
_TOKEN_METHODS = _FACT_METHODS | {"decode"}


def _derivers(cls) -> tuple:
    """The methods and functions a word's shared facts and records are derived by, part of both keys (_shared_key,
    _facts_token): a test's patch of one of them is followed."""
    return (cls.deferral_of, cls._defer_static, cls.check_sfpu_operands, sfpu_batch.batchable,
            sfpu_batch.flag_transfer, sfpu_issue_native.word_facts, sfpu_native.record, cls.decode)


_OP_REPLAY = INSTRUCTIONS["REPLAY"].opcode
_OP_MOP = INSTRUCTIONS["MOP"].opcode
_ALL4 = b"\x01" * 4      # Dst.written[r0:r0 + 4].tobytes() when all four rows are written


class DeferralMixin:
    def _init_deferral(self, dst) -> None:
        # queued data effects of issued SFPU instructions, in order (a list, or the C part's DeferredQueue: new_queue)
        self.deferred = sfpu_issue_native.new_queue()
        self._dq_flags = None                      # abstract (LaneFlags, UseLaneFlags) after the deferred work
        self._dq_plans: dict[tuple, object] = {}   # (body, entry flag state) -> _dq_plan() result
        self._defer_info: dict[int, tuple | None] = {}
        self._fast: dict[int, tuple | None] = {}   # the entry points' per-word facts: word -> _fast_info()
        self._records: dict[int, tuple | None] = {}  # word -> sfpu_native.record() (None: not the C part's)
        self._cword: dict[int, tuple] = {}         # deferrable word -> sfpu_issue_native.word_facts()
        self._replays: dict[int, tuple | None] = {}  # REPLAY word -> replay_spec() (sfpu_issue_native's replay_push)
        self._c_ctx = None                         # the last _c_timing() (the cycle model's lists, made with it)
        self._facts_adopted = False                # _adopt_facts ran (at the first _fast_info)
        self._dst_view = DstView(self)
        self.dst = dst
        # push() in C where it can be (a class that overrides push keeps its own): one C call per pushed word instead
        # of push()'s Python frame around push_one (sfpu_issue_native.push_entry)
        entry = sfpu_issue_native.push_entry(globals(), DeferralMixin.push_python) \
            if type(self).push is DeferralMixin.push else None
        if entry is not None:
            self.push = MethodType(entry, self)
        # push_many likewise (push_many_entry): its issue_run call for a run's deferrable head in C, else the class's
        many = sfpu_issue_native.push_many_entry(globals(), DeferralMixin.push_python) \
            if type(self).push_many in ISSUE_RUN_FIRST else None
        if many is not None:
            self.push_many = MethodType(many, self)

    # ------------------------------------------------------------------------------------------------ state views
    # Deferred work changes LRegs, lane flags and Dst only when executed; every access to `sfpu` or `dst` from outside
    # the deferral machinery executes it first, so nobody can observe the difference. `dst` is a view (DstView) that
    # does so on every attribute use, also for whoever keeps the reference. `raw_sfpu` is the SFPU as it is.
    @property
    def sfpu(self):
        if self.deferred:
            self.flush_deferred()
        return self.raw_sfpu

    @sfpu.setter
    def sfpu(self, value) -> None:
        if self.deferred:
            self.flush_deferred()
        self.raw_sfpu = value
        self._defer_info.clear()
        self._fast.clear()
        self._cword.clear()

    @property
    def dst(self):
        return self._dst_view

    @dst.setter
    def dst(self, value) -> None:
        if self.deferred:
            self.flush_deferred()
        self._dst = value

    # ------------------------------------------------------------------------------------------------ entry points
    def push(self, thread: int, word: int, t: int = 0) -> int:
        """FrontendMixin.push; a deferrable SFPU word reaching an empty thread is taken from the FIFO, issued and
        queued at once (what drain() -> defer would do), also while a REPLAY load records and executes it. With work
        queued, the case that reaches the C part's push_word runs in C whole (sfpu_issue_native.push_one), as does a
        REPLAY's there (its replay_push); where the C part is built, a Tensix's `push` is its push_entry, which does
        the same in C and calls push_python for the rest (_init_deferral)."""
        push_one = sfpu_issue_native.push_one()
        if push_one is not None:
            r = push_one(self, thread, word, t, DQ_MAX, sfpu_issue_native.REPLAY_NATIVE and
                         sfpu_issue_native.READY_NATIVE)
            if r is not None:
                return r
        return self.push_python(thread, word, t)

    def push_python(self, thread: int, word: int, t: int = 0) -> int:
        """push() where the C part's push_one did not take the word (or is off)."""
        th = self.threads[thread]
        if th.fifo or th.ready or th.mop_out or (th.replay_load is not None and not replay_executes(th, word)):
            return super(DeferralMixin, self).push(thread, word, t)     # (inline_calls recompiles: explicit super)
        word &= 0xFFFFFFFF
        fast = self._fast.get(word, _UNSET)
        if fast is _UNSET:
            fast = self._fast_info(word)
        if fast is None:                          # not deferrable (a REPLAY: push_one's replay_push takes it next time)
            if word >> 24 == _OP_REPLAY and word not in self._replays:
                self._replays[word] = replay_spec(word)
            return super(DeferralMixin, self).push(thread, word, t)
        if th.latch is not None and th.latch.block & fast[3]:          # held by the Wait Gate
            return super(DeferralMixin, self).push(thread, word, t)
        tm = self.tm
        push_word = sfpu_issue_native.push_word()       # (the switch read at each call, as push_many's issue_run)
        if push_word is not None and th.replay_load is None and word in self._cword and tm.rec is None \
                and tm.sfpu.rec is None and "issue" not in tm.__dict__:
            # the C part (push_word: issue_run's rules for a one-word run); None: it did not take the word, nothing
            # changed, the Python path below goes on with it
            dq = self.deferred
            sfpu = self.raw_sfpu
            if dq or sfpu.is_plain():
                cfg = self.cfg
                c0, c1 = cfg[0], cfg[1]
                ctx = self._c_ctx
                if ctx is None or ctx[0] is not tm.clock:    # (a new tm; its lists are never rebound: tm.FIXED)
                    ctx = self._c_timing()
                r = push_word(ctx, word, t, thread, self._cword, dq,
                              FLAG_CODE[self._dq_flags if dq else uniform_flags(sfpu)], c0, c1, thread,
                              th.blocked is not None, tm.event_t, DQ_MAX, 0 if th.latch is None else th.latch.block,
                              self._c_memory(th, c0, c1) if fast[2] else None)
                if r is not None:
                    _, t, self.issue_t, fl, _ = r
                    self._dq_flags = FLAG_STATES[fl]
                    if fast[2]:                   # (defer names the Dst access it takes: error messages)
                        self.current = (thread, word, fast[0])
                    th.blocked = None
                    self.instructions[thread] += 1
                    return t - 1
        t = tm.accept_take(thread, t)
        if th.replay_load is not None:
            self.replay_record(th, word)          # (recorded, and issued below)
        name, fields, is_mem, block, info, ft, d = fast
        dq = self.deferred
        # defer() for an instruction without Dst access, inlined (the hot path of a TTI body; its only possible
        # error, a strict stall-blind read in SfpuTiming.regular, does not use self.current). The SFPU state defer
        # checks cannot change while work is queued (only non-deferred SFPU instructions change it, and they execute
        # the queue first): checked when a queue starts.
        if not is_mem and (dq or self.raw_sfpu.is_plain()):
            if len(dq) >= DQ_MAX:
                self.flush_deferred()
                dq = self.deferred
            if "issue" in tm.__dict__:            # an instance override of tm.issue (a test's spy) is honoured
                c = tm.issue(thread, name, K_SFPU, info, fields, block, th.blocked is not None)
            else:
                c = tm.issue_sfpu(thread, info, fields, block, th.blocked is not None)
            self.issue_t = c
            if not dq:
                self._dq_flags = uniform_flags(self.raw_sfpu)
            if ft is not None:
                self._dq_flags = ft(*self._dq_flags)
            cfg = self.cfg
            dq.append((word, name, fields, None, 0, c, cfg[0], cfg[1], thread))
            th.blocked = None
            self.instructions[thread] += 1
            return t
        self.current = (thread, word, name)
        if self.defer(thread, th, word, d, block, info, th.blocked is not None):
            th.blocked = None
            self.instructions[thread] += 1
            return t
        th.ready.append(word)                # taken from the FIFO already: the handler path issues it
        self.drain(thread)
        return t

    def push_many(self, thread: int, words: tuple, t: int) -> int:
        """FrontendMixin.push_many with push()'s hot case (a deferrable SFPU word without Dst access reaching an
        empty thread) inlined, its state bound once; where the C part is built and no timeline is recorded, runs of
        deferrable words (SFPLOAD / SFPSTORE too) are issued by it (sfpu_issue_native.issue_run) as push() would, and
        runs of the words direct issue takes or a busy thread queues by DirectIssueMixin.push_run; every other word
        goes through push() itself."""
        tm = self.tm
        if "issue" in tm.__dict__:                # a spied cycle model: the plain calls
            return super(DeferralMixin, self).push_many(thread, words, t)
        j = 0
        n = len(words)
        push = self.push
        pass_on = super(DeferralMixin, self).push    # where push() hands a word the deferral does not take
        push_run = self.push_run
        issue_run = sfpu_issue_native.issue_run() if tm.rec is None and tm.sfpu.rec is None else None
        mop_push = sfpu_issue_native.mop_push()
        try:
            th = self.threads[thread]
            fifo = th.fifo
            fast_get = self._fast.get
            instructions = self.instructions
            cfg = self.cfg
            sfpu = self.raw_sfpu
            if issue_run is not None:
                ctx = self._c_timing()
            cword = self._cword
            while j < n:
                # (a word the C part has no facts for, e.g. any non-SFPU word, costs one look-up here)
                if issue_run is not None and words[j] in cword and not (fifo or th.ready or th.mop_out
                                                                        or th.replay_load is not None):
                    dq = self.deferred
                    if dq or sfpu.is_plain():
                        # the same words and state as the Python loop below takes, in C
                        c0, c1 = cfg[0], cfg[1]
                        r = issue_run(ctx, words, j, t, thread, cword, dq,
                                      FLAG_CODE[self._dq_flags if dq else uniform_flags(sfpu)], c0, c1,
                                      thread, th.blocked is not None, tm.event_t, DQ_MAX,
                                      0 if th.latch is None else th.latch.block, self._c_memory(th, c0, c1))
                        if r is not None:
                            i, t, self.issue_t, fl, last_mem = r
                            self._dq_flags = FLAG_STATES[fl]
                            if last_mem >= 0:     # (defer names the Dst access it takes: error messages)
                                self.current = (thread, words[last_mem], cword[words[last_mem]][0])
                            th.blocked = None
                            instructions[thread] += i - j
                            j = i
                            if j == n:
                                break
                word = words[j]
                # the conditions of push()'s inlined path; anything else: push() itself, or for a word that is not
                # the deferral's what push() passes it on to; a run of such words in C where it can (push_run)
                busy = fifo or th.ready or th.mop_out or th.replay_load is not None
                if not busy:
                    fast = fast_get(word, _UNSET)
                    if fast is _UNSET:
                        fast = self._fast_info(word)
                if busy or fast is None:
                    if word >> 24 == _OP_MOP and mop_push is not None and not busy:
                        a = mop_push(self, thread, word, t)     # push()'s path to the batch in C, where it can
                        if a is not None:
                            t = a + 1
                            j += 1
                            continue
                    if word >> 24 == _OP_REPLAY:  # push(): its C part takes a REPLAY (replay_push); push_run never
                        t = push(thread, word, t) + 1
                        j += 1
                        continue
                    try:
                        r = push_run(thread, words, j, t)
                    except BaseException:
                        j, t = self.pm_done, self.pm_t
                        raise
                    if r is not None:
                        j, t = r
                        continue
                    t = (push if busy else pass_on)(thread, word, t) + 1
                    j += 1
                    continue
                dq = self.deferred
                if (fast[2] or (th.latch is not None and th.latch.block & fast[3])
                        or not (dq or sfpu.is_plain())):
                    t = push(thread, word, t) + 1
                    j += 1
                    continue
                # from here on exactly push()'s path for a non-Dst SFPU word
                a = tm.accept_take(thread, t)
                name, fields, is_mem, block, info, ft, d = fast
                if len(dq) >= DQ_MAX:
                    self.flush_deferred()
                    dq = self.deferred
                c = self.issue_t = tm.issue_sfpu(thread, info, fields, block, th.blocked is not None)
                if not dq:
                    self._dq_flags = uniform_flags(sfpu)
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

    def drain_deferrable(self, t: int, th: ThreadState) -> int:
        """drain()'s loop for a run of deferrable SFPU words at the head of th.ready with no Wait Gate latch: each one
        exactly as drain() would (no batching attempt due, defer; the non-Dst case inlined as in push()); runs of
        the words the C part has facts for in C (sfpu_issue_native.ready_run) where it is built and no timeline is
        recorded. Stops (returns how many ran) at the first word that needs drain()'s general path or a batching
        attempt."""
        ready = th.ready
        fastc = self._fast
        tm = self.tm
        spied = "issue" in tm.__dict__             # an instance override of tm.issue (a test's spy) is honoured
        cfg = self.cfg
        was_blocked = th.blocked is not None
        n = 0
        lim = th.batch_skip if th.batch_skip > 7 else 7
        ready_run = sfpu_issue_native.ready_run() if not spied and tm.rec is None and tm.sfpu.rec is None else None
        cword = self._cword
        while ready:
            if n and len(ready) > lim:
                break                              # drain() tries batch_sfpu here (len >= 8 and > batch_skip)
            w = ready[0]
            if ready_run is not None and w in cword:
                i = self._ready_run_c(ready_run, t, th, len(ready) if len(ready) <= lim + (n == 0) else 1,
                                      was_blocked)
                if i:
                    n += i
                    was_blocked = False
                    continue
            fast = fastc.get(w, _UNSET)
            if fast is _UNSET:
                fast = self._fast_info(w)
            if fast is None:
                break
            name, fields, is_mem, block, info, ft, d = fast
            self.current = (t, w, name)
            dq = self.deferred
            if is_mem or not (dq or self.raw_sfpu.is_plain()):
                if not self.defer(t, th, w, d, block, info, was_blocked):
                    break
            else:
                if len(dq) >= DQ_MAX:
                    self.flush_deferred()
                    dq = self.deferred
                if spied:
                    c = self.issue_t = tm.issue(t, name, K_SFPU, info, fields, block, was_blocked)
                else:
                    c = self.issue_t = tm.issue_sfpu(t, info, fields, block, was_blocked)
                if not dq:
                    self._dq_flags = uniform_flags(self.raw_sfpu)
                if ft is not None:
                    self._dq_flags = ft(*self._dq_flags)
                dq.append((w, name, fields, None, 0, c, cfg[0], cfg[1], t))
            ready.popleft()
            th.blocked = None
            was_blocked = False
            n += 1
        return n

    def _c_timing(self) -> tuple:
        """The cycle model's state the C issue runs (issue_run, ready_run) read and write: the per-thread lists and
        the SFPU's timing."""
        tm = self.tm
        self._c_ctx = ctx = (tm.clock, tm.fe, tm.gate, tm.after_mop, tm.first, tm.stalls, tm.issued, tm.taken, tm.sfpu)
        return ctx

    def _c_memory(self, th: ThreadState, c0: int, c1: int) -> tuple:
        """What the C issue runs read and write for SFPLOAD / SFPSTORE: the thread's config and RWCs, Dst's written
        rows, the FPU's Dst writes and the SFPU's Dst access mode (config words 0 and 1)."""
        return th.cfg, th.rwc, self._dst.written, self.tm.dst_fpu_write, resolve_sfpu_mode(c0, c1)

    def _ready_run_c(self, ready_run, t: int, th: ThreadState, most: int, was_blocked: bool) -> int:
        """drain_deferrable's loop for up to `most` words at the head of th.ready in one call of the C part (ready_run):
        how many it issued and queued (popped from th.ready), 0 when it took none (nothing changed)."""
        sfpu = self.raw_sfpu
        dq = self.deferred
        if not (dq or sfpu.is_plain()):
            return 0
        tm = self.tm
        ready = th.ready
        words = tuple(islice(ready, most))
        c0, c1 = self.cfg[0], self.cfg[1]
        r = ready_run(self._c_timing(), words, 0, 0, t, self._cword, dq,
                      FLAG_CODE[self._dq_flags if dq else uniform_flags(sfpu)], c0, c1, t, was_blocked, tm.event_t,
                      DQ_MAX, 0, self._c_memory(th, c0, c1))
        if r is None:
            return 0
        i, _, self.issue_t, fl, _ = r
        self._dq_flags = FLAG_STATES[fl]
        self.current = (t, words[i - 1], self._cword[words[i - 1]][0])
        if i == len(ready):
            ready.clear()
        else:
            for _ in range(i):
                ready.popleft()
        th.blocked = None
        return i

    # ------------------------------------------------------------------------------------------------ the decision
    def deferral_of(self, w: int, name: str, fields: dict, handler, reserved: int):
        """Whether word `w` (decoded) can ever be deferred: None, or the facts defer() and _dq_plan need (cached)."""
        d = self._defer_info.get(w, _UNSET)
        if d is _UNSET:
            d = self._defer_info[w] = self._defer_static(name, fields, handler, reserved)
        return d

    def _defer_static(self, name: str, fields: dict, handler, reserved: int):
        """The per-word part of the deferral decision: None, or the facts defer and _dq_plan need."""
        if not DEFER_SFPU or reserved or handler is None or not isinstance(self.raw_sfpu, SFPU) \
                or not (sfpu_batch.batchable(name, fields, flags=True) or sfpu_batch.queue_only(name, fields)):
            return None
        if self.strict and name in ("SFPADD", "SFPMUL"):
            try:
                self.check_sfpu_operands(name, fields)
            except EmuUnspecified:
                return None                        # the handler raises it
        is_mem = name in ("SFPLOAD", "SFPSTORE")
        return (name, fields, is_mem, name == "SFPSTORE", fields["dest_reg_addr"] if is_mem else 0,
                fields["sfpu_addr_mode"] if is_mem else 0, fields["lreg_ind"] if is_mem else 0,
                fields["instr_mod0"] if is_mem else 0,
                partial(sfpu_batch.flag_transfer, name, fields) if name in FLAG_WRITERS else None)

    def _fast_info(self, w: int):
        if not self._facts_adopted:
            self._adopt_facts()
            fast = self._fast.get(w, _UNSET)
            if fast is not _UNSET:
                return fast
        try:
            name, fields, handler, block, reserved, kind, info = self.decode(w)
        except EmuError:
            fast = None                            # raised in order by drain()
        else:
            fast = None
            if kind == K_SFPU:
                key = self._shared_key(w, handler, reserved)
                shared = _SHARED_FAST.get(key) if key is not None else None
                # (the shared facts hold the first Tensix's decode: taken where this one's decode gave the same)
                if shared is not None and shared[1][1] is fields and shared[1][0] == name \
                        and shared[1][3] == block and shared[1][4] is info:
                    d, fast, cword = shared
                    self._defer_info[w] = d
                else:
                    d = self.deferral_of(w, name, fields, handler, reserved)
                    cword = None
                    if d is not None:
                        fast = (name, fields, d[2], block, info, d[8], d)
                        cword = sfpu_issue_native.word_facts(info, block, d)
                    if key is not None and fast is not None:
                        _SHARED_FAST[key] = (d, fast, cword)
                if fast is not None:
                    self._cword[w] = cword
                if key is not None and (table := self._facts_table()) is not None and len(table[0]) < TABLE_WORDS:
                    table[0][w], table[2][w] = fast, self._defer_info[w]
                    if fast is not None:
                        table[1][w] = cword
        self._fast[w] = fast
        return fast

    def _facts_token(self) -> tuple | None:
        """_SHARED_TABLES' key for this Tensix as it is now (see there), or None where it may not share them."""
        if not (SHARED_FACTS and self.decode_is_shared()) or not self.__dict__.keys().isdisjoint(_TOKEN_METHODS):
            return None
        cls = type(self)
        names = self.__dict__.get("_handler_names")
        if names is None:                               # (_handlers: built in __init__, never changed after)
            names = self._handler_names = frozenset(self._handlers)
        return (cls, _derivers(cls), self.strict, isinstance(self.raw_sfpu, SFPU), DEFER_SFPU, names)

    def _facts_table(self) -> tuple | None:
        """The shared tables new facts of this Tensix join (None: it may not share them)."""
        token = self._facts_token()
        return None if token is None else _SHARED_TABLES.setdefault(token, ({}, {}, {}, {}))

    def _adopt_facts(self) -> None:
        """Take the facts and records Tensixes of this setting derived (_SHARED_TABLES), once, while this one has
        none of its own (a cache entry of its own may come from an instance override since undone)."""
        self._facts_adopted = True
        token = self._facts_token()
        tables = _SHARED_TABLES.get(token) if token is not None else None
        if tables is None or self._fast or self._cword or self._defer_info or self._records:
            return
        for mine, shared in zip((self._fast, self._cword, self._defer_info, self._records), tables):
            mine.update(shared)

    def _shared_key(self, w: int, handler, reserved: int) -> tuple | None:
        """_SHARED_FAST's key for word w on this Tensix, or None where the shared facts may not be used (switched off,
        the word's deferral facts already derived here, or an instance override of a method that derives them)."""
        if not SHARED_FACTS or w in self._defer_info or not self.__dict__.keys().isdisjoint(_FACT_METHODS):
            return None
        cls = type(self)
        return (cls, _derivers(cls), w, self.strict, isinstance(self.raw_sfpu, SFPU), DEFER_SFPU, handler is None,
                reserved)

    def defer(self, t: int, th: ThreadState, w: int, d: tuple, block: int, info, was_blocked: bool) -> bool:
        """Issue the SFPU instruction `w` at the head of thread t now and queue its data effect; False (nothing
        changed) when it must run through its handler instead."""
        sfpu = self.raw_sfpu
        if not self.deferred and not sfpu.is_plain():
            return False
        name, fields, is_mem, is_store, imm, amode, vd, mod0, flagw = d
        dst_base = (th.cfg[1] & 0xFFF) + th.rwc["d"]
        cfg = self.cfg
        c0, c1 = cfg[0], cfg[1]
        dq = self.deferred
        if is_mem:
            mode = mod0 or resolve_sfpu_mode(c0, c1)
            addr = (imm + dst_base) & 0x3FF
            if mode not in sfpu_native.DST32_MODES_OF[is_store] or addr & 1 \
                    or addr >= 512:
                return False
            if len(dq) >= DQ_MAX:
                self.flush_deferred()
                dq = self.deferred
            c = self.issue_t = self.tm.issue(t, name, K_SFPU, info, fields, block, was_blocked)
            r0 = addr & 0x1FC
            if not is_store and self.strict and self._dst.written[r0:r0 + 4].tobytes() != _ALL4:
                # maybe a deferred predicated store wrote the rows: execute the queue, then the handler's exact check
                s = self.sfpu
                s.sfpu_fp32_enabled, s.srcb_is_fp16 = sfpu_format_flags(c0, c1)
                self.check_dst_written(name, fields, dst_base)
                dq = self.deferred
            if not dq:
                self._dq_flags = uniform_flags(sfpu)
            if is_store:
                lf, use = self._dq_flags
                if use == 0 or (use == 1 and lf == 1):  # every lane enabled: the store marks its rows written
                    self._dst.written[r0:r0 + 4] = True
            dq.append((w, name, fields, (is_store, vd, mode, addr), dst_base, c, c0, c1, t))
            self.apply_addr_mod(t, amode, fidelity=False)
        else:
            if len(dq) >= DQ_MAX:
                self.flush_deferred()
                dq = self.deferred
            c = self.issue_t = self.tm.issue(t, name, K_SFPU, info, fields, block, was_blocked)
            if not dq:
                self._dq_flags = uniform_flags(sfpu)
            if flagw is not None:
                self._dq_flags = flagw(*self._dq_flags)
            dq.append((w, name, fields, None, 0, c, c0, c1, t))   # (no Dst access: dst_base unused)
        return True

    # ------------------------------------------------------------------------------------------------ the queue
    def flush_deferred(self) -> None:
        """Execute the deferred SFPU work in order: batched where a body repeats often enough, else one by one."""
        dq = self.deferred
        if not dq:
            return
        self.deferred = sfpu_issue_native.new_queue()
        self._dq_flags = None
        cur = self.current
        sfpu = self.raw_sfpu
        min_k = NATIVE_BATCH_MIN if sfpu_native.available() and sfpu.is_plain() else 2
        try:
            n = len(dq)
            period, body_of = _dq_words(dq)
            i = tries = 0
            plain_until = -1          # entries before this index run one by one without another attempt
            one_by_one = 0            # entries from here to i run one by one, before anything reads the SFPU's state
            while i < n:
                seq = 1
                if i >= plain_until and n - i >= 4:
                    p, k = period(i, n)
                    if 2 <= k < min_k:
                        seq = p * k           # one by one in C: cheaper than a batch this short
                    elif k >= 2:
                        self._dq_exec_run(dq, one_by_one, i)
                        one_by_one = i
                        done, seq = self._dq_batch(dq, body_of, i, p, k)
                        if done:
                            i += done
                            one_by_one = i
                            tries = 0
                            continue
                        if seq == 1:  # this rotation of the body cannot start a batch here: try the next one,
                            tries += 1    # but after p failures no rotation can, so run the region one by one
                            if tries >= p:
                                plain_until, tries = i + p * k, 0
                i += seq
            self._dq_exec_run(dq, one_by_one, n)
            last = dq[-1]
            sfpu.sfpu_fp32_enabled, sfpu.srcb_is_fp16 = sfpu_format_flags(last[6], last[7])
        finally:
            self.current = cur

    def _dq_exec_run(self, entries, i: int, n: int) -> None:
        """Execute queued entries[i:n] (a list or a DeferredQueue) in order, as _dq_exec would one by one: the C part's
        (sfpu_native) in one call per run of them (packed into records by the DeferredQueue, or on a list by
        sfpu_issue_native.pack_records where it is built), the rest (none, while the C part covers every deferrable
        instruction) through _dq_exec."""
        if i >= n:
            return
        sfpu = self.raw_sfpu
        if not sfpu_native.available() or not sfpu.is_plain():
            for e in entries[i:n]:
                self._dq_exec(e)
            return
        if isinstance(entries, list):
            entries, i, n = entries[i:n], 0, n - i
            pack = sfpu_issue_native.pack_records()
        else:
            pack = partial(_pack_queue, n)
        run = []
        while i < n:
            if pack is not None:
                k, prog = pack(entries, i, self._records)
                if k:
                    self._dq_exec_c(run)
                    run = []
                    sfpu.instructions += k
                    sfpu_native.run_at(sfpu, prog, k)
                    i += k
                    if i == n:
                        break
            e = entries[i]
            i += 1
            r = self._record(e)
            if r is None:
                self._dq_exec_c(run)
                run = []
                self._dq_exec(e)
                continue
            mem = e[3]
            run.append(r if mem is None else sfpu_native.at_address(r, mem[2], mem[3]))
        self._dq_exec_c(run)
        sfpu.cycle = entries[n - 1][5]

    def _record(self, e: tuple) -> tuple | None:
        """sfpu_native.record of queued entry e's word (cached per word, and shared: SHARED_FACTS)."""
        r = self._records.get(e[0], _UNSET)
        if r is _UNSET:
            shared = _SHARED_RECORDS.get(e[0]) if SHARED_FACTS else None
            if shared is not None and shared[1] is e[2] and shared[0] == e[1] and shared[2] is sfpu_native.record:
                r = shared[3]
            else:
                r = sfpu_native.record(e[1], e[2])
                if SHARED_FACTS:
                    _SHARED_RECORDS[e[0]] = (e[1], e[2], sfpu_native.record, r)
            self._records[e[0]] = r
            if SHARED_FACTS and (table := self._facts_table()) is not None and len(table[3]) < TABLE_WORDS:
                table[3][e[0]] = r
        return r

    def _dq_exec_c(self, records: list) -> None:
        """The C part's run of records (what SFPU.execute would do for each, in the plain state: count, execute)."""
        if records:
            self.raw_sfpu.instructions += len(records)
            sfpu_native.run(self.raw_sfpu, records)

    def _dq_exec(self, e: tuple) -> None:
        w, name, fields, mem, dst_base, c, c0, c1, t = e
        sfpu = self.raw_sfpu
        sfpu.sfpu_fp32_enabled, sfpu.srcb_is_fp16 = sfpu_format_flags(c0, c1)
        self.current = (t, w, name)
        self.execute_sfpu(name, fields, dst_base, c)   # (only work that cannot raise is deferred)

    def _dq_batch(self, dq, body_of, i: int, p: int, k: int) -> tuple[int, int]:
        """Run the k repetitions of the p-word body at dq[i] as one batch if provably equivalent: (entries done, 0);
        else (0, how many entries to run one by one before trying again). body_of(i, p): the words of dq[i:i + p], a
        tuple."""
        sfpu = self.raw_sfpu
        s_lf, s_use = uniform_flags(sfpu)
        if s_lf is None or s_use is None:
            return 0, 1               # mid-body (flags set by data): step until a point where they are uniform
        key = (body_of(i, p), s_lf, s_use)
        plan = self._dq_plans.get(key)
        if plan is None:
            plan = self._dq_plans[key] = self._dq_plan(key[0], s_lf, s_use)
        if not plan:
            return 0, 1               # (a rotation of the real body, entered mid-body, may well be refused)
        entries, mem_pos, chain, chain_in = plan
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
                for j, name, fields, pos in entries]
        last = dq[i + p * k - 1]
        self.current = (last[8], last[0], last[1])
        regs = sfpu_batch.execute_batch(sfpu, body, k, np.array(addrs, dtype=np.int64).reshape(k, nm) if nm else
                                        np.zeros((k, 0), dtype=np.int64), last[5])
        if chain:
            lreg = sfpu.lreg
            if len(chain) == 1 and sfpu_batch.running_sum(sfpu, *entries_sum(dq[i + chain[0]]), regs):
                lreg[chain_in] = regs[chain_in, -1]
            else:
                # the chain, repetition by repetition, each seeing the batch's values of the LRegs it reads from the rest
                # (its words are the same in every repetition, and none accesses Dst: one C call, where it covers them)
                in_c = sfpu_native.available() and sfpu.is_plain()
                records = [self._record(dq[i + j]) for j in chain] if in_c else []
                if in_c and None not in records:
                    sfpu.instructions += k * len(records)
                    sfpu_native.run_repeated(sfpu, records, regs, chain_in)
                else:
                    for r in range(k):
                        lreg[chain_in] = regs[chain_in, r]
                        base = i + r * p
                        self._dq_exec_run([dq[base + j] for j in chain], 0, len(chain))
            sfpu.sfpu_fp32_enabled, sfpu.srcb_is_fp16 = sfpu_format_flags(last[6], last[7])
            self.current = (last[8], last[0], last[1])
            sfpu.cycle = last[5]
        return p * k, 0

    def _dq_plan(self, body: tuple, lf, use):
        """Static part of _dq_batch's equivalence argument for one body entered with uniform lane flags (lf, use):
        (entries, mem_pos, chain, chain_in) or False. `entries` (body position, name, fields, index into mem_pos or
        -1) run batched, the body positions in `chain` after them one repetition at a time, reading the LRegs listed
        in `chain_in` (an index array) as the batch left them in that repetition.
        Every batched repetition must start from the same state: the body leaves the flag state as it found it
        (tracked abstractly, sfpu_batch.flag_transfer), and no LReg the batched part writes is read before this
        repetition writes it, where a write on possibly partly enabled lanes also reads the old value.
        The chain (_dq_chain) is what reads a value the previous repetition computed - a running sum, a running
        maximum - and what depends on it; it is split off only where every lane is enabled at the body's entry (so
        also at its end) and at each chain instruction, and it writes no lane flags, so that running it after the rest,
        with the flags the body ends with, cannot change the result."""
        infos, flag_writers, partial = [], set(), set()
        state = (lf, use)
        for j, w in enumerate(body):
            name, fields, is_mem, is_store, imm, amode, vd, mod0, flagw = self._defer_info[w]
            if sfpu_batch.queue_only(name, fields):
                return False
            reads, writes = sfpu_batch.batch_regs(name, fields)
            if not (use == 0 or (use == 1 and lf == 1)):
                reads |= writes
                partial.add(j)
            infos.append((reads, writes, is_mem))
            if flagw is not None:
                flag_writers.add(j)
                lf, use = flagw(lf, use)
        if (lf, use) != state:
            return False
        chain = _dq_chain(infos) if 0 not in partial else ()
        if chain is None or flag_writers.intersection(chain) or partial.intersection(chain):
            return False
        batched = [j for j in range(len(body)) if j not in chain]
        all_w = written = 0
        for j in batched:
            all_w |= infos[j][1]
        for j in batched:
            reads, writes, _ = infos[j]
            if reads & all_w & ~written:
                return False
            written |= writes
        entries, mem_pos = [], []
        for j in batched:
            name, fields = self._defer_info[body[j]][:2]
            entries.append((j, name, fields, len(mem_pos) if infos[j][2] else -1))
            if infos[j][2]:
                mem_pos.append(j)
        chain_in = 0
        for j in chain:
            chain_in |= infos[j][0] & all_w
        return entries, mem_pos, chain, np.array([r for r in range(17) if chain_in >> r & 1], dtype=np.int64)


def _dq_chain(infos: list) -> tuple | None:
    """The body positions to run one repetition at a time after the rest of the body ran batched (`infos`: (LRegs
    read, LRegs written, is_mem) per position; a write on lanes that may be disabled counts as a read too): () when
    nothing reads a value of the previous repetition, None when the split is not provably equal to running the
    repetitions in order. The chain starts with every instruction that reads an LReg the body writes before the body
    (re)writes it, and takes in every instruction reading a value the chain computed (_reaching_write) and every one
    reading or writing an LReg the chain writes, unless that LReg is handed over (_handed_over: the rest is done with
    it before the chain writes it); it is sound when it has no Dst access, the rest touches the chain's other LRegs
    neither, and every LReg the chain reads from the rest was written by the rest earlier in the repetition and not
    after (so the batch's final value per repetition is the one the chain would have read). A compensated sum's
    running sum and compensation become the chain, its per-row terms stay in the batch."""
    all_w = written = 0
    for reads, writes, _ in infos:
        all_w |= writes
    chain = set()
    for j, (reads, writes, _) in enumerate(infos):
        if reads & all_w & ~written:
            chain.add(j)
        written |= writes
    if not chain:
        return ()
    grew = True
    while grew:
        grew = False
        for j, (reads, _, _) in enumerate(infos):
            if j not in chain and any((reads & all_w) >> r & 1 and _reaching_write(infos, j, r) in chain
                                      for r in range(17)):
                chain.add(j)
                grew = True
        chain_w = 0
        for j in chain:
            chain_w |= infos[j][1]
        kept = chain_w & ~_handed_over(infos, chain, chain_w)
        for j, (reads, writes, _) in enumerate(infos):
            if j not in chain and (reads | writes) & kept:
                chain.add(j)
                grew = True
    if len(chain) == len(infos) or any(infos[j][2] for j in chain):
        return None
    rest_w = chain_r = 0       # so far in the repetition: LRegs the rest wrote, LRegs the chain read
    for j, (reads, writes, _) in enumerate(infos):
        if j in chain:
            if reads & ~chain_w & all_w & ~rest_w:
                return None
            chain_r |= reads
        elif writes & chain_r:
            return None
        else:
            rest_w |= writes
    return tuple(sorted(chain))


def _reaching_write(infos: list, j: int, r: int) -> int | None:
    """The body position whose write of LReg r the instruction at j reads: the last write before j, else (a value of
    the previous repetition) the body's last write; None when the body never writes r."""
    bit = 1 << r
    for i in (*range(j - 1, -1, -1), *range(len(infos) - 1, j - 1, -1)):
        if infos[i][1] & bit:
            return i
    return None


def _handed_over(infos: list, chain: set, regs: int) -> int:
    """Of the LRegs `regs` (a mask), those the rest of the body hands over to the chain: each repetition's first access
    is a write by the rest that reads no old value (the previous repetition's chain value is dead), the rest writes
    it only before the chain's first access and reads it only before the chain's first write. The rest, batched,
    then sees only its own values of such an LReg, the chain the rest's last one (which the batch keeps per
    repetition), as in order."""
    out = 0
    for r in range(17):
        bit = 1 << r
        if not regs & bit:
            continue
        seen = [(j in chain, reads & bit, writes & bit) for j, (reads, writes, _) in enumerate(infos)
                if (reads | writes) & bit]
        first_access = next(i for i, (in_chain, _, _) in enumerate(seen) if in_chain)
        first_write = next(i for i, (in_chain, _, w) in enumerate(seen) if in_chain and w)
        if (not seen[0][0] and seen[0][2] and not seen[0][1]
                and not any(w for in_chain, _, w in seen[first_access:] if not in_chain)
                and not any(not in_chain for in_chain, _, _ in seen[first_write:])):
            out |= bit
    return out


class DstView:
    """Tensix.dst: the Tensix's Dst, with the deferred SFPU work executed before any attribute of it is used (so a
    reference kept by someone else, e.g. the tile's RISC-V Dst window, never sees Dst ahead of the SFPU)."""
    __slots__ = ("_tx",)

    def __init__(self, tx: DeferralMixin) -> None:
        object.__setattr__(self, "_tx", tx)

    def __getattr__(self, name: str):
        tx = self._tx
        if tx.deferred:
            tx.flush_deferred()
        return getattr(tx._dst, name)

    def __setattr__(self, name: str, value) -> None:
        tx = self._tx
        if tx.deferred:
            tx.flush_deferred()
        setattr(tx._dst, name, value)


def replay_spec(word: int) -> tuple | None:
    """What sfpu_issue_native.c's replay_push reads of a REPLAY word: (start, count) for one that replays the buffer
    (no load, count 1..32, no reserved bits: FrontendMixin.next_instruction expands it without a check that can
    raise), else None."""
    f = INSTRUCTIONS["REPLAY"].decode(word)
    if f["load_mode"] or f["execute_while_loading"] or not 1 <= f["len"] <= 32 or \
            word & ~INSTRUCTIONS["REPLAY"].used_bits() & 0xFFFFFFFF:
        return None
    return f["start_idx"], f["len"]


def entries_sum(e: tuple) -> tuple:
    """(name, fields) of a queued entry, as sfpu_batch.running_sum takes them."""
    return e[1], e[2]


def uniform_flags(sfpu) -> tuple:
    """(LaneFlags, UseLaneFlagsForLaneEnable) as 0 / 1 when equal on all lanes, else None. (count_nonzero: 0.4 us
    a flag array, where all() and any() cost 3.5 us each; a MOP's drain and a pushed run ask once.)"""
    lf, use = sfpu.lane_flags, sfpu.use_lane_flags
    n, m = np.count_nonzero(lf), np.count_nonzero(use)
    return (1 if n == lf.size else 0 if n == 0 else None, 1 if m == use.size else 0 if m == 0 else None)


def _dq_words(dq) -> tuple:
    """(period, body_of) over the deferred queue dq's words: period(i, n) is _dq_period's (p, k) from entry i of the
    first n, body_of(i, p) the words of dq[i:i + p] as a tuple; a DeferredQueue answers both in C."""
    if isinstance(dq, list):
        words = [e[0] for e in dq]
        return partial(_dq_period, words), lambda i, p: tuple(words[i:i + p])
    return lambda i, n: dq.period(i, n, DQ_MAX_PERIOD), dq.words


def _pack_queue(hi: int, dq, i: int, records: dict) -> tuple:
    """pack_records' (k, bytes) for a DeferredQueue's entries i..hi."""
    return dq.pack(i, hi, records)


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


# push / push_many / drain_deferrable run once per SFPU word: there the calls of the cycle model's rules cost 6-11 %
# of `bench emu` sfpu, sfpu_long and tile_long (measured), so they run with the rules expanded in place, generated
# from the rules' one definition (cycles.TensixTiming; inline.py).
_RULES = {"accept_take": TensixTiming.accept_take, "issue_sfpu": TensixTiming.issue_sfpu}
DeferralMixin.push_python = inline_calls(DeferralMixin.push_python, _RULES)
DeferralMixin.push_many = inline_calls(DeferralMixin.push_many, _RULES, ("tm", TensixTiming.FIXED))
# the push_many functions whose first step, for a run with C facts for its first word reaching an empty thread with
# work queued, is DeferralMixin.push_many's issue_run call (where push_many_entry may do it; fpu_batch adds its own)
ISSUE_RUN_FIRST = {DeferralMixin.push_many}
DeferralMixin.drain_deferrable = inline_calls(DeferralMixin.drain_deferrable, {"issue_sfpu": TensixTiming.issue_sfpu},
                                              ("tm", TensixTiming.FIXED))
