"""Direct issue (the speed layer's path for plain words a core pushes one at a time): a word reaching a thread whose
frontend holds nothing (FIFO, MOP expander output, ready queue empty) goes straight to the Wait Gate, or into the
replay buffer while a REPLAY load records, without the FIFO round trip and the drain loop around it.

What the reference path (frontend.push -> Tensix.drain -> next_instruction -> Tensix.issue_head) does for such a
word, and this path does too: the FIFO accepts it (TensixTiming.accept, full in modelled time or not), the MOP expander
takes it (TensixTiming.take: one word, not a MOP), the replay expander records it if a load is under way
(FrontendMixin.replay_record: then, unless the load executes what it records, that is all) and passes it on, and
issue_head issues it or leaves it blocked at the head of the ready queue; then the drain finds nothing more. (The
thread's batching memo, batch_skip, is 0 already: a drain leaves a thread empty only through next_instruction finding
the ready queue empty, which resets it.) Words the expanders act on (MOP, MOP_CFG; REPLAY unless recorded), SFPU
words (the deferral's and batching's), an MVMUL outside a pushed MVMUL run and any other word inside one (what the drain's
recording wrapper, Tensix.drain, acts on) take the reference path, as does an undecodable word (its error raised where
the reference raises it).

Such words are issued in C where it is built (push_run: sfpu_issue_native.c's plain_run, a run of them pushed in one
go, or one), their handlers called back in Python except the common case of UNPACR, PACR, MVMUL, ELW*, MOVA2D, the
ADC and register setters (SETADC*, SETDMAREG, SETC16, WRCFG), the waits and semaphores (STALLWAIT, SEMWAIT, SEMPOST,
SEMGET), SETRWC and ZEROACC, which runs in C too (tile_handlers.c); it does exactly
what push() does for each of them (TT_EMU_PLAIN_ISSUE_NATIVE=0 keeps them on push(), TT_EMU_TILE_HANDLERS_NATIVE=0
keeps every handler in Python).

`DIRECT_ISSUE = False` (or TT_EMU_DIRECT_ISSUE=0) keeps every push on the reference path; tests/emu/test_direct_issue.py
pins bits, cycles and errors of this path to it. Mixed into tensix.Tensix after DeferralMixin (whose push hands the
words it does not take to this one).
"""
from __future__ import annotations

import os
import struct

from tt_backend.chip.errors import EmuError
from tt_backend.chip.isa import INSTRUCTIONS, OPCODES
from tt_backend.runtime.emu.accel import sfpu_issue_native, tile_native
from tt_backend.runtime.emu.cycles import FPU_DST_WRITERS, K_FPU, K_SFPU, K_UNPACK, SRC_READERS
from tt_backend.runtime.emu.frontend import MOP_EXPANDER_OPS
from tt_backend.runtime.emu import unpack_pack
from tt_backend.runtime.emu.config import ConfigMixin
from tt_backend.runtime.emu.sync import SyncMixin
from tt_backend.runtime.emu.tensix_fpu import FpuMixin

DIRECT_ISSUE = os.environ.get("TT_EMU_DIRECT_ISSUE", "1") != "0"
_EXPANDER_OPS = MOP_EXPANDER_OPS | {INSTRUCTIONS["REPLAY"].opcode}     # words the expanders act on
_PLAIN_FACTS = struct.Struct("<12q")      # sfpu_issue_native.c's plain_facts
# the handlers whose common case tile_handlers.c runs (a word whose handler is another function, e.g. a test's spy,
# keeps calling it)
_C_HANDLED = {"UNPACR": unpack_pack.UnpackPackMixin.UNPACR, "PACR": unpack_pack.UnpackPackMixin.PACR,
              "MVMUL": FpuMixin.MVMUL, "ELWMUL": FpuMixin.ELWMUL, "ELWADD": FpuMixin.ELWADD, "ELWSUB": FpuMixin.ELWSUB,
              "MOVA2D": FpuMixin.MOVA2D, "SETRWC": FpuMixin.SETRWC, "ZEROACC": FpuMixin.ZEROACC,
              **{name: getattr(ConfigMixin, name) for name in ("SETADC", "SETADCXY", "SETADCZW", "SETADCXX",
                                                               "SETDMAREG", "SETC16", "WRCFG")},
              **{name: getattr(SyncMixin, name) for name in ("STALLWAIT", "SEMWAIT", "SEMPOST", "SEMGET")}}


def tile_handlers_in_c() -> bool:
    """Whether the C issue path may run the tile handlers' common case (tile_native.HANDLERS_NATIVE, its C part
    loaded, and the handlers' setup caches, which tile_handlers.c reads, on). Here rather than in tile_native, which
    the handlers' own modules import."""
    return (tile_native.HANDLERS_NATIVE and tile_native.module() is not None and unpack_pack.UNPACK_SETUP_CACHE
            and unpack_pack.PACK_SETUP_CACHE)


def tile_handlers_status() -> str:
    """Where the tile handlers' common case runs, for `python -m tt_backend info` (C only inside the C issue path,
    sfpu_issue_native's plain_run / drain_run, whose own line says whether it runs)."""
    if not tile_native.HANDLERS_NATIVE:
        return "Python: TT_EMU_TILE_HANDLERS_NATIVE=0"
    if not tile_handlers_in_c():
        return "Python: needs the tile data in C and the handlers' setup caches"
    return "C (tile_handlers.c) inside the C issue of the other words; the rest in Python"


class DirectIssueMixin:
    def _init_direct_issue(self) -> None:
        self._direct: dict[int, tuple | None] = {}   # word -> its decode() tuple when direct issue may take it
        self._plain: dict[int, tuple | None] = {}    # word -> its facts for plain_run (None: not plain_run's)
        self._plain_progress = [0, 0]                # plain_run's (j, push time) of the word it was at

    def push(self, thread: int, word: int, t: int = 0) -> int:
        """FrontendMixin.push; a plain word reaching an empty thread is issued at once, or recorded into a REPLAY load
        (see the module docstring); any word reaching a thread with work queued goes through push_run, whose C part
        does what FrontendMixin.push does (accept, FIFO, drain: that drain's test of a thread blocked on unchanged Src
        banks in C)."""
        th = self.threads[thread]
        load = th.replay_load
        if th.fifo or th.ready or th.mop_out:       # queued behind the thread's work, which drains: in C where it can
            r = self.push_run(thread, (word,), 0, t)
            return super().push(thread, word, t) if r is None else r[1] - 1
        if not DIRECT_ISSUE or (load is not None and (word >> 24) & 0xFF in MOP_EXPANDER_OPS):
            return super().push(thread, word, t)
        word &= 0xFFFFFFFF
        if load is not None and not load[2]:        # recorded, not executed: that is all the frontend does with it
            t = self.tm.accept_take(thread, t)
            self.replay_record(th, word)
            return t
        d = self._direct.get(word, False)
        if d is False:
            d = self._direct[word] = self._direct_info(word)
        if d is None or (d[0] == "MVMUL") != (self.mm_record is not None):
            return super().push(thread, word, t)        # (the drain's MVMUL recording: see the module docstring)
        if load is None:
            r = self.push_run(thread, (word,), 0, t)
            if r is not None:
                return r[1] - 1
        t = self.tm.accept_take(thread, t)
        if th.replay_load is not None:
            self.replay_record(th, word)                # (recorded, and issued below)
        th.ready.append(word)
        if self.issue_head(thread, th, word, *d):
            self.instructions[thread] += 1
        return t

    def _direct_info(self, word: int) -> tuple | None:
        """decode(word) when direct issue may take the word, else None."""
        if word >> 24 in _EXPANDER_OPS:
            return None
        try:
            d = self.decode(word)
        except EmuError:
            return None
        return None if d[5] == K_SFPU else d

    def push_run(self, thread: int, words: tuple, j: int, t: int) -> tuple[int, int] | None:
        """push() of words[j], words[j + 1], ... (each pushed the cycle after the previous one was accepted) in C,
        while plain_run takes them (into the FIFO of a thread with work queued, or issued directly): (next j, next
        push time); None when it takes no word (or the C part is off). If a word raises, pm_done / pm_t name it
        (FrontendMixin.push_many's contract)."""
        run = sfpu_issue_native.plain_run()
        if run is None or not DIRECT_ISSUE or not self._c_issue_allowed():
            return None
        facts = self._plain
        word = words[j]
        if word not in facts:
            facts[word] = self._plain_facts(word)
        progress = self._plain_progress
        progress[0], progress[1] = j, t          # what pm_done / pm_t become if the run raises before its first word
        try:
            r = run(self, words, j, t, thread, facts, progress, self.mm_record is not None)
        except BaseException:
            self.pm_done, self.pm_t = progress
            raise
        return r if r[0] > j else None

    def c_push_entry(self) -> tuple | None:
        """What a caller in C needs to do push_run's call itself (rv32_native.c, for a core's `.ttinsn` runs):
        (plain_run's capsule, the facts, the progress list, _c_issue_allowed), or None where push_run never calls
        plain_run (the C part off or not built, direct issue off); the caller asks _c_issue_allowed() before it
        pushes (no timeline recorded, no spied cycle model). It fills no facts: a word without them stops plain_run,
        and push_run (which records them) takes it from there."""
        capsule = sfpu_issue_native.plain_run_capsule()
        if capsule is None or not DIRECT_ISSUE:
            return None
        return capsule, self._plain, self._plain_progress, self._c_issue_allowed

    def never_plain_ops(self) -> bytes | None:
        """Per opcode, 1 where no word of it ever has plain_run's facts (_plain_facts is None for the expanders' words,
        SFPU words and unknown opcodes), so that a caller in C may skip its look-up of such a word's facts
        (rv32_native.c plain_takes); None where _plain_facts, _direct_info or decode is not the class's own (a spy on
        the instance or the class when the tile is built), whose answers this cannot know."""
        cls = type(self)
        if any(n in self.__dict__ for n in ("_plain_facts", "_direct_info", "decode")) or any(
                getattr(cls, n) is not getattr(DirectIssueMixin, n) for n in ("_plain_facts", "_direct_info")) \
                or getattr(cls, "decode", None) is not getattr(cls, "reference_decode", None):
            return None
        return bytes(op in _EXPANDER_OPS or op not in OPCODES or OPCODES[op].unit == "sfpu" for op in range(256))

    def drain_in_c(self):
        """The C part's drain_run (Tensix._drain's loop for the words plain_run takes) where it may run, else None."""
        return sfpu_issue_native.drain_run() if self._c_issue_allowed() else None

    def _c_issue_allowed(self) -> bool:
        """Whether the C issue paths may run: no timeline recorder and no spied cycle model (tests replace
        `tm.issue`), whose calls they would skip."""
        tm = self.tm
        return tm.rec is None and tm.sfpu.rec is None and "issue" not in tm.__dict__

    def _plain_facts(self, word: int) -> tuple | None:
        """What plain_run reads of a word: (name, fields, handler, Tensix.current for each thread, packed facts), or
        None when push() would take the word elsewhere (not direct issue's) or raise at it (reserved bits, no
        handler)."""
        d = self._direct_info(word) if word >> 32 == 0 else None     # (push() masks a wider word: the Python path)
        if d is None:
            return None
        name, fields, handler, block, reserved, kind, info = d
        if handler is None or reserved:
            return None
        facts = _PLAIN_FACTS.pack(block, kind, info if kind == K_UNPACK else 0, name == "UNPACR_NOP",
                                  name == "SEMPOST", fields["sem_sel"] if name == "SEMPOST" else 0,
                                  info[0] if kind == K_FPU else 0, name in FPU_DST_WRITERS, name in SRC_READERS,
                                  name == "MVMUL", fields.get("dst", 0), self._c_handler_code(name, handler))
        return name, fields, handler, tuple((t, word, name) for t in range(3)), facts

    def _c_handler_code(self, name: str, handler) -> int:
        """tile_handlers.c's code for the word's handler when its common case may run in C (the switches on, see
        tile_handlers_in_c, and the handler the reference one, not replaced or wrapped), else 0 (Python)."""
        code = tile_native.HANDLER_CODES.get(name, 0)
        if not code or not tile_handlers_in_c():
            return 0
        return code if getattr(handler, "__func__", None) is _C_HANDLED[name] else 0
