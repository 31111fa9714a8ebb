"""The issue of the SFPU words a core pushes one at a time, in C (sfpu_issue_native.c, a CPython extension module
built by native.py against this Python's headers): the loader, the per-word facts the C part reads and the lane-flag
state codes it uses.

deferral.py's push_many issues a deferrable SFPU word that reaches an empty thread in about 1.5 us of Python (accept,
issue rule, flag state, queue entry; an SFPLOAD / SFPSTORE through push() and defer(), with its Dst address, rows
written and RWC update, in about 4 us). The C part does the same for a whole run of such words in one call (issue_run)
and hands every other word back to the Python path; push_word does it for a word pushed by its own push() call (a
one-word run); ready_run does the same for a run of such words at the head of a thread's ready queue (a REPLAY's
expansion: deferral.drain_deferrable), which the frontend has taken already. With ISSUE_NATIVE the deferred queue itself
is the C part's (new_queue: sfpu_queue.c's DeferredQueue, packed records; the C issue appends to it without creating
a Python object, and its execution asks it for the period search and sfpu_native's records); on a list (the Python
path's queue) pack_records turns the queued entries into those records in one call. Python stays the
reference (tests/emu/test_sfpu_issue_native.py pins cycles, the deferred queue and bits to it). `ISSUE_NATIVE =
False` (or TT_EMU_SFPU_ISSUE_NATIVE=0) keeps every pushed word on the Python path, `READY_NATIVE = False` (or
TT_EMU_SFPU_READY_NATIVE=0) every word of a ready queue, `REPLAY_NATIVE = False` (or TT_EMU_REPLAY_PUSH_NATIVE=0) a
REPLAY pushed on its own to a thread with work queued (push_one's replay_push: the frontend's expansion and the
drain around ready_run in C), `WORD_MEMO_NATIVE = False` (or TT_EMU_WORD_MEMO_NATIVE=0) makes the C issue look
each word's C facts up in the Tensix's dict instead of its memo (cword_rec); without a host compiler or Python's
headers they stay there
too (`python -m tt_backend info` says which runs, and why).

The same module issues the other words direct issue takes (accel/direct_issue.py: plain_run for pushed words,
drain_run for Tensix._drain's loop), the issue rule of every non-SFPU kind in C, handlers called back in Python, and
runs Tensix.step's loop (step_run: the latches polled, a thread blocked on unchanged Src banks skipped without a
Python drain call); `PLAIN_ISSUE_NATIVE = False` (or TT_EMU_PLAIN_ISSUE_NATIVE=0) keeps them on the Python path.

batch_run (mop_batch_native.c) is mop_batch.batch_sfpu's case where all its memos hit (a MOP of identical REPLAYs
issued again from the same address key and relative cycle-model state); `BATCH_NATIVE = False` (or
TT_EMU_MOP_BATCH_NATIVE=0) leaves every batch to batch_sfpu's Python.
"""
from __future__ import annotations

import ctypes
import functools
import os
import struct
from pathlib import Path

from tt_backend.chip.sfpu_regs import ALL_LREGS
from tt_backend.runtime.emu.accel import native, sfpu_native
from tt_backend.runtime.emu.accel.sfpu_native import DST32_MODES_OF
from tt_backend.chip.numerics.formats import element_bits
from tt_backend.runtime.emu.frontend import FIFO_DEPTH
from tt_backend.runtime.emu.cycles import (FIFO_EFFECTIVE_DEPTH, FPU_DST_READ_LATENCY, FPU_TO_SFPLOAD_GAP,
                                           MOP_TRANSITION_PENALTY, PACK_BYTES_PER_CYCLE, UNPACK_BYTES_PER_CYCLE,
                                           SfpuTimingRules, TensixTiming)
from tt_backend.runtime.emu.tensix_fpu import DST_RWC_MASK, SRC_RWC_MASK, tile_format_tables

SOURCE = Path(__file__).with_name("sfpu_issue_native.c")
ISSUE_NATIVE = os.environ.get("TT_EMU_SFPU_ISSUE_NATIVE", "1") != "0"
READY_NATIVE = os.environ.get("TT_EMU_SFPU_READY_NATIVE", "1") != "0"
PERIOD_NATIVE = os.environ.get("TT_EMU_SFPU_PERIOD_NATIVE", "1") != "0"
PLAIN_ISSUE_NATIVE = os.environ.get("TT_EMU_PLAIN_ISSUE_NATIVE", "1") != "0"
# the RISC-V C core calls plain_run's C entry (plain_run_c: no argument tuple, result tuple or progress list) rather
# than the Python-callable (read when a tile is built, by plain_run_capsule)
PLAIN_ENTRY_NATIVE = os.environ.get("TT_EMU_PLAIN_ENTRY_NATIVE", "1") != "0"
BATCH_NATIVE = os.environ.get("TT_EMU_MOP_BATCH_NATIVE", "1") != "0"
MOP_PUSH_NATIVE = os.environ.get("TT_EMU_MOP_PUSH_NATIVE", "1") != "0"    # a MOP's push in C (mop_batch_native.c)
# mop_push's expansion put in the ready queue only where something else than its batch reads it (lazy_words)
MOP_LAZY_NATIVE = os.environ.get("TT_EMU_MOP_LAZY_NATIVE", "1") != "0"
REPLAY_NATIVE = os.environ.get("TT_EMU_REPLAY_PUSH_NATIVE", "1") != "0"
PUSH_MEMO_NATIVE = os.environ.get("TT_EMU_PUSH_MEMO_NATIVE", "1") != "0"   # push_one's memo (push_memo.c)
WORD_MEMO_NATIVE = os.environ.get("TT_EMU_WORD_MEMO_NATIVE", "1") != "0"   # the issue's memo of word facts (cword_rec)
# plain_run's memos: a run's words' facts by its tuple (run_record), the Tensix's attributes by its dict's version tag
# (tx_parts); else the facts dict looked up for each word and the attributes read at each call
PLAIN_MEMO_NATIVE = os.environ.get("TT_EMU_PLAIN_MEMO_NATIVE", "1") != "0"
# plain_run's and drain_run's reads and writes of the cycle model's rows in its C state directly, else through the views
PLAIN_ROWS_NATIVE = os.environ.get("TT_EMU_PLAIN_ROWS_NATIVE", "1") != "0"
TIMING_NATIVE = os.environ.get("TT_EMU_TIMING_NATIVE", "1") != "0"     # the cycle model's state in C (timing_state.c)
WAIT_NATIVE = os.environ.get("TT_EMU_WAIT_NATIVE", "1") != "0"   # wait words' Latch built, SFPU busy time read in C
# the run's view of the Tensix's containers read at the dict entry each was found at last (tile_handlers.c's hints)
DICT_HINTS_NATIVE = os.environ.get("TT_EMU_DICT_HINTS_NATIVE", "1") != "0"
# plain_run's view of those containers kept from one call to the next while their owners' dicts and classes keep their
# version tags (tile_handlers.c's items; sfpu_issue_native.c's view_reuse); else read anew at each call
VIEW_KEEP_NATIVE = os.environ.get("TT_EMU_VIEW_KEEP_NATIVE", "1") != "0"

# The deferral's abstract lane-flag state (LaneFlags, UseLaneFlagsForLaneEnable), each 0, 1 or None (differs between
# lanes), as the C part codes it: lf * 3 + use, None as 2.
_VALUES = (0, 1, None)
FLAG_STATES = tuple((lf, use) for lf in _VALUES for use in _VALUES)
FLAG_CODE = {s: i for i, s in enumerate(FLAG_STATES)}
_FACTS = struct.Struct("<16q")     # sfpu_issue_native.c's word_facts


@functools.lru_cache(maxsize=None)
def _load() -> tuple[object | None, str]:
    """(the module or None, what `info` says about it)."""
    try:
        mod, path = native.load_extension(SOURCE, "sfpu_issue")
    except OSError as e:
        return None, f"Python: the C part is unavailable: {e}"
    load_modes, store_modes = (sum(1 << m for m in DST32_MODES_OF[s]) for s in (False, True))
    mod.configure(FIFO_EFFECTIVE_DEPTH, MOP_TRANSITION_PENALTY, ALL_LREGS, load_modes, store_modes, DST_RWC_MASK,
                  SRC_RWC_MASK, FPU_TO_SFPLOAD_GAP)
    mod.configure_plain(UNPACK_BYTES_PER_CYCLE, PACK_BYTES_PER_CYCLE, tuple(element_bits(f) for f in range(16)),
                        FPU_DST_READ_LATENCY, FIFO_DEPTH)
    mod.configure_tiles(*tile_format_tables())
    mod.wait_native(WAIT_NATIVE)
    mod.dict_hints_native(DICT_HINTS_NATIVE)
    mod.view_keep_native(VIEW_KEEP_NATIVE)
    return mod, f"C ({path}) for runs of deferrable SFPU words pushed to an empty thread"


@functools.lru_cache(maxsize=None)
def _part(name: str):
    """The C part's `name`, or None when it is unavailable. (Looked up once: deferral.push asks for push_one on every
    word; through _load and getattr each ask cost about 2,300 instructions, now 1,500: callgrind, 100k asks.)"""
    mod = _load()[0]
    return None if mod is None else getattr(mod, name)


def timing_rows(depth: int):
    """The cycle model's state in C (timing_state.c's ThreadTiming, FIFO depth `depth`, on its own) as the views
    tensix_timing_class()'s cycle model binds: (clock, fe, gate, after_mop, first, stalls, issued, taken, unpack_busy,
    work_done, instructions); None when it is off
    (TIMING_NATIVE = False, TT_EMU_TIMING_NATIVE=0: Python lists, and the C issue of SFPU words declines: issue_run,
    push_word, ready_run) or unavailable."""
    mod = _load()[0] if TIMING_NATIVE else None
    return None if mod is None else mod.ThreadTiming(depth).rows()


def tensix_timing_class():
    """cycles.TensixTiming over timing_state.c's ThreadTiming: the state the C issue reads and writes on every word in
    one C struct (event_t, fpu_busy, pack_busy, nop_t and the Tensix's issue_t its int members; its rows() the views
    of the per-thread lists, unpack_busy, work_done and the Tensix's instruction counts, which its __init__ binds;
    SFPU_TIMING sfpu_timing_class()); None when TIMING_NATIVE is off or the C part unavailable (cycles.TensixTiming:
    Python lists and ints)."""
    return _tensix_timing_class() if TIMING_NATIVE else None


@functools.lru_cache(maxsize=None)
def _tensix_timing_class():
    mod = _load()[0]
    if mod is None:
        return None

    def __new__(cls, tensix):
        return mod.ThreadTiming.__new__(cls, FIFO_EFFECTIVE_DEPTH)

    return type("TensixTiming", (mod.ThreadTiming, TensixTiming), {"__new__": __new__,
                                                                    "SFPU_TIMING": _sfpu_timing_class(),
                                                                    "__module__": TensixTiming.__module__})


def sfpu_timing_class():
    """cycles.SfpuTiming's rules over timing_state.c's SfpuTimingState (mad_cycle, mad_writes, mad_macro,
    nop_only_cycle and busy_until as C members, which the C issue reads and writes without converting them); None
    when TIMING_NATIVE is off or the C part unavailable (cycles.SfpuTiming, its __slots__, then)."""
    return _sfpu_timing_class() if TIMING_NATIVE else None


@functools.lru_cache(maxsize=None)
def _sfpu_timing_class():
    mod = _load()[0]
    if mod is None:
        return None
    return type("SfpuTiming", (mod.SfpuTimingState, SfpuTimingRules), {"__slots__": ("strict", "where", "rec"),
                                                                        "__module__": SfpuTimingRules.__module__})


def issue_run():
    """The C part's issue_run (see sfpu_issue_native.c), or None when it is off or unavailable."""
    return _part("issue_run") if ISSUE_NATIVE else None


def push_word():
    """The C part's push_word (issue_run of a one-word run, for deferral.push), or None when it is off or
    unavailable."""
    return _part("push_word") if ISSUE_NATIVE else None


def push_one():
    """The C part's push_one (deferral.push's case that reaches push_word, whole, for a thread with work queued), or
    None when it is off or unavailable."""
    return _part("push_one") if ISSUE_NATIVE else None


def push_entry(deferral_globals: dict, push_python):
    """The C part's push_entry (DeferralMixin.push in C: push_one, else push_python), for a Tensix to bind as its
    `push`, configured with what it reads at each call (this module's ISSUE_NATIVE, REPLAY_NATIVE, READY_NATIVE and
    PUSH_MEMO_NATIVE, deferral's DQ_MAX and uniform_flags in `deferral_globals`) and push()'s Python rest; or None when
    it is off or unavailable."""
    mod = _load()[0] if ISSUE_NATIVE else None
    if mod is None:
        return None
    mod.configure_push(globals(), deferral_globals, push_python)
    return mod.push_entry


def push_many_entry(deferral_globals: dict, push_python):
    """The C part's push_many_entry (DeferralMixin.push_many's issue_run call of a run's head in C, then the class's
    push_many), configured as push_entry is; None when it is off or unavailable."""
    return None if push_entry(deferral_globals, push_python) is None else _load()[0].push_many_entry


def ready_run():
    """The C part's ready_run (see sfpu_issue_native.c), or None when it is off or unavailable."""
    return _part("ready_run") if READY_NATIVE else None


def find_period():
    """The C part's find_period (see sfpu_issue_native.c; mop_batch.find_period is its reference), or None when it is
    off (PERIOD_NATIVE = False, TT_EMU_SFPU_PERIOD_NATIVE=0) or unavailable."""
    return _part("find_period") if PERIOD_NATIVE else None


@functools.lru_cache(maxsize=None)
def _batch_part():
    """batch_run with sfpu_native.c's sfpu_run handed to it, or None when either C part is unavailable."""
    run, lib = _part("batch_run"), sfpu_native._load()[0]
    if run is None or lib is None:
        return None
    _load()[0].configure_batch(ctypes.cast(lib.sfpu_run, ctypes.c_void_p).value, sfpu_native.traffic, new_queue)
    return run


def batch_run():
    """The C part's batch_run (mop_batch_native.c: batch_sfpu's memo-hit case), or None when it is off (BATCH_NATIVE =
    False, TT_EMU_MOP_BATCH_NATIVE=0), sfpu_native's C part is off, or either is unavailable."""
    return _batch_part() if BATCH_NATIVE and sfpu_native.NATIVE_SFPU else None


def mop_push():
    """The C part's mop_push (mop_batch_native.c: FrontendMixin.push of a MOP of identical REPLAYs to an idle thread,
    up to batch_sfpu), or None when it is off (MOP_PUSH_NATIVE = False, TT_EMU_MOP_PUSH_NATIVE=0) or unavailable."""
    return _part("mop_push") if MOP_PUSH_NATIVE else None


def pack_records():
    """The C part's pack_records (see sfpu_issue_native.c), or None when it is off or unavailable."""
    return _part("pack_records") if ISSUE_NATIVE else None


def plain_run():
    """The C part's plain_run (see sfpu_issue_native.c), or None when it is off or unavailable."""
    return _part("plain_run") if PLAIN_ISSUE_NATIVE else None


def plain_run_capsule():
    """plain_run's C entry as a capsule for rv32_native.c's pushes: "sfpu_issue.plain_run_c" (plain_run_c) where
    PLAIN_ENTRY_NATIVE is on, else "sfpu_issue.plain_run" (the Python-callable plain_run, the reference); None as
    plain_run()."""
    return _part("PLAIN_RUN_C_CAPSULE" if PLAIN_ENTRY_NATIVE else "PLAIN_RUN_CAPSULE") if PLAIN_ISSUE_NATIVE else None


def drain_run():
    """The C part's drain_run (see sfpu_issue_native.c), or None when it is off or unavailable."""
    return _part("drain_run") if PLAIN_ISSUE_NATIVE else None


def step_run():
    """The C part's step_run (Tensix.step's loop, see sfpu_issue_native.c), or None when it is off or unavailable."""
    return _part("step_run") if PLAIN_ISSUE_NATIVE else None


def new_queue():
    """An empty deferred queue (deferral.py's `deferred`): the C part's DeferredQueue (sfpu_queue.c: packed records the
    C issue appends to without a Python object per word) where it is built and ISSUE_NATIVE is on, else a list (the
    Python path's, the reference)."""
    mod = _load()[0] if ISSUE_NATIVE else None
    return [] if mod is None else mod.DeferredQueue()


def status() -> str:
    """Which path issues SFPU words pushed one at a time, for `python -m tt_backend info`."""
    if not ISSUE_NATIVE:
        return "Python: TT_EMU_SFPU_ISSUE_NATIVE=0"
    if not TIMING_NATIVE:      # (the C issue runs on the cycle model's C state)
        return "Python: TT_EMU_TIMING_NATIVE=0 (the cycle model's state in Python lists)"
    return _load()[1]


def plain_status() -> str:
    """Which path issues the other words pushed one at a time, for `python -m tt_backend info`."""
    if not PLAIN_ISSUE_NATIVE:
        return "Python: TT_EMU_PLAIN_ISSUE_NATIVE=0"
    mod, why = _load()
    return why if mod is None else ("C for runs of the other words direct issue takes (handlers in Python, but for "
                                    "the tile handlers' common case: see their line)")


def mop_push_status() -> str:
    """Which path takes a MOP pushed to an idle thread, for `python -m tt_backend info`."""
    if not MOP_PUSH_NATIVE:
        return "Python: TT_EMU_MOP_PUSH_NATIVE=0"
    mod, why = _load()
    return why if mod is None else ("C (mop_batch_native.c's mop_push) for a MOP of identical REPLAYs pushed to an idle "
                                    "thread, up to its batch; else Python")


def replay_status() -> str:
    """Which path takes a REPLAY pushed on its own, for `python -m tt_backend info`."""
    for on, switch in ((ISSUE_NATIVE, "TT_EMU_SFPU_ISSUE_NATIVE"), (READY_NATIVE, "TT_EMU_SFPU_READY_NATIVE"),
                       (REPLAY_NATIVE, "TT_EMU_REPLAY_PUSH_NATIVE"), (TIMING_NATIVE, "TT_EMU_TIMING_NATIVE")):
        if not on:
            return f"Python: {switch}=0"
    mod, why = _load()
    return why if mod is None else "C (push_one's replay_push) with SFPU work queued and no batch to try; else Python"


def batch_status() -> str:
    """Which path runs a MOP batch whose memos all hit, for `python -m tt_backend info`."""
    if not BATCH_NATIVE:
        return "Python: TT_EMU_MOP_BATCH_NATIVE=0"
    if not sfpu_native.NATIVE_SFPU:
        return "Python: TT_EMU_SFPU_NATIVE=0"
    if _batch_part() is None:
        return _load()[1] if _load()[0] is None else sfpu_native.status()
    return "C (mop_batch_native.c, in the SFPU issue module) where batch_sfpu's memos all hit; the rest in Python"


def word_facts(info: tuple, block: int, deferral: tuple) -> tuple:
    """What issue_run reads of one word (cached per word by the caller): (name, fields, packed facts). `info`:
    cycles.sfpu_info; `deferral`: DeferralMixin.deferral_of's facts."""
    _, reads, seen, writes, mad, two_cycle, indirect, reads_dst = info
    name, fields, is_mem, is_store, imm, amode, vd, mod0, flag_transfer = deferral
    ftab = -1
    if flag_transfer is not None:
        ftab = sum(FLAG_CODE[flag_transfer(*s)] << 4 * i for i, s in enumerate(FLAG_STATES))
    return name, fields, _FACTS.pack(block, reads, seen, writes, mad, two_cycle, indirect, name == "SFPNOP", ftab,
                                     is_mem, is_store, reads_dst, imm, amode, vd, mod0)
