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

`DIRECT_ISSUE = False` (or TT_EMU_DIRECT_ISSUE=0) keeps every push on the reference path; tests/emu/test_direct_issue.py
pins bits, cycles and errors of this path to it. Mixed into tensix.Tensix after DeferralMixin (whose push hands the
words it does not take to this one).
"""
from __future__ import annotations

import os

from tt_backend.chip.errors import EmuError
from tt_backend.chip.isa import INSTRUCTIONS
from tt_backend.runtime.emu.cycles import K_SFPU
from tt_backend.runtime.emu.frontend import MOP_EXPANDER_OPS

DIRECT_ISSUE = os.environ.get("TT_EMU_DIRECT_ISSUE", "1") != "0"
_EXPANDER_OPS = MOP_EXPANDER_OPS | {INSTRUCTIONS["REPLAY"].opcode}     # words the expanders act on


class DirectIssueMixin:
    def _init_direct_issue(self) -> None:
        self._direct: dict[int, tuple | None] = {}   # word -> its decode() tuple when direct issue may take it

    def push(self, thread: int, word: int, t: int = 0) -> int:
        """FrontendMixin.push; a plain word reaching an empty thread is issued at once, or recorded into a REPLAY load
        (see the module docstring)."""
        th = self.threads[thread]
        load = th.replay_load
        if th.fifo or th.ready or th.mop_out or not DIRECT_ISSUE or (load is not None and
                                                                      (word >> 24) & 0xFF in MOP_EXPANDER_OPS):
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
