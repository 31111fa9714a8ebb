"""The C part's issue of SFPU words pushed one at a time (runtime/emu/accel/sfpu_issue_native.c: issue_run in
deferral.push_many, push_word in deferral.push, pack_records when the queue executes) against the Python path
(TT_EMU_SFPU_ISSUE_NATIVE=0): random programs of SFPU words (MAD-class auto-stalls, two-cycle SFPSWAP, lane-flag
writers, Dst loads and stores, words the latched Wait Gate holds) mixed with plain words, pushed in runs (push_many) or
word by word (push) over the three threads, leave the same frontend, cycle
model, Vector Unit timing and deferred queue after every push, the same Dst, LRegs and lane flags at the end, and the
same strict errors; a whole-tile long body and compiled kernels give the same bytes and cycles."""
from __future__ import annotations

import random
from collections import deque

import numpy as np
import pytest

from tt_backend.chip import isa, layout
from tt_backend.chip.errors import EmuError
from tt_backend.runtime.emu import bench
from tt_backend.runtime.emu.accel import deferral, mop_batch, sfpu_issue_native
from tt_backend.runtime.emu.rv32 import Stall
from tt_backend.runtime.emu.tensix import Tensix
from tt_backend.runtime.emu.thread_state import Latch

E = isa.encode
# (the C issue runs on the cycle model's C state: with TT_EMU_TIMING_NATIVE=0 it declines every word)
pytestmark = pytest.mark.skipif(sfpu_issue_native.issue_run() is None or sfpu_issue_native.timing_rows(1) is None,
                                reason=sfpu_issue_native.status())


def _sfpu(rng: random.Random) -> int:
    reg = lambda: rng.randrange(8)
    return rng.choice([
        lambda: E("SFPMAD", lreg_src_a=reg(), lreg_src_b=reg(), lreg_src_c=reg(), lreg_dest=reg(), instr_mod1=0),
        lambda: E("SFPMAD", lreg_src_a=reg(), lreg_src_b=reg(), lreg_src_c=reg(), lreg_dest=reg(), instr_mod1=0),
        lambda: E("SFPLOADI", lreg_ind=reg(), instr_mod0=0, imm16=rng.randrange(1 << 16)),
        lambda: E("SFPEXEXP", lreg_c=reg(), lreg_dest=reg(), instr_mod1=0),
        lambda: E("SFPSETCC", lreg_c=reg(), lreg_dest=0, instr_mod1=rng.choice((0, 4, 8)), imm12_math=0),
        lambda: E("SFPENCC", lreg_dest=0, instr_mod1=rng.choice((0, 2, 10)), imm12_math=rng.randrange(4)),
        lambda: E("SFPSWAP", lreg_src_c=reg(), lreg_dest=reg(), instr_mod1=rng.randrange(2)),
        lambda: E("SFPIADD", lreg_c=reg(), lreg_dest=reg(), instr_mod1=4, imm12_math=0),   # (stall-blind: VD)
        lambda: E("SFPNOP"),
        lambda: E("SFPLOAD", lreg_ind=reg(), instr_mod0=rng.choice((3, 3, 0, 4, 12, 1)),
                  sfpu_addr_mode=rng.randrange(4), dest_reg_addr=4 * rng.randrange(128)),
        lambda: E("SFPSTORE", lreg_ind=reg(), instr_mod0=rng.choice((3, 3, 0, 4, 7, 12, 1)),
                  sfpu_addr_mode=rng.randrange(4), dest_reg_addr=4 * rng.randrange(128)),
    ])()


def _plain(rng: random.Random) -> int:
    return rng.choice([
        lambda: E("STALLWAIT", wait_res=rng.choice((1 << 11, 1 << 4, 0b110)), stall_res=rng.randrange(1, 512)),
        lambda: E("SETRWC", bit_mask=rng.randrange(16), rwc_a=0, rwc_b=0, rwc_d=rng.randrange(8), rwc_cr=0,
                  clear_ab_vld=0),
        lambda: E("SETDMAREG", reg_index_16b=rng.randrange(128), payload=rng.randrange(1 << 16)),
        # the SFPLOAD / SFPSTORE address modifiers: Dst += 2 or 4, also with Clear, CR or CToCR (which refuses those)
        lambda: E("SETC16", setc16_reg=28 + rng.randrange(1, 4),
                  setc16_value=rng.choice((2, 4, 0x802, 0x402, 0x1002, 0x1802))),
        lambda: E("SETC16", setc16_reg=12 + rng.randrange(1, 4), setc16_value=rng.randrange(1 << 16)),
        lambda: E("SETC16", setc16_reg=47 + rng.randrange(1, 4), setc16_value=int(rng.random() < 0.3)),    # (bias)
        lambda: E("SETC16", setc16_reg=1, setc16_value=rng.choice((0, 4, 16))),                      # Dst base
        lambda: E("NOP"),
        lambda: E("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0),    # (then a MOP transition)
    ])()


def _program(seed: int) -> list[tuple[int, tuple[int, ...], int]]:
    """(thread, words pushed in one push_many call, cycles before the push) per step: mostly runs of SFPU words, drawn
    from a few distinct words as a kernel's body repeats them (the C part takes a word once the Python path has seen
    it)."""
    rng = random.Random(seed)
    sfpu, plain = [_sfpu(rng) for _ in range(24)], [_plain(rng) for _ in range(8)]
    nop = E("SFPNOP")
    steps = [(1, tuple(x for w in sfpu for x in (w, nop, nop)), 0)]     # each word seen once (then C's to take)
    for _ in range(120):
        n = rng.choice((1, 2, rng.randrange(3, 40), rng.randrange(40, 200)))
        words = tuple(rng.choice(plain) if rng.random() < 0.04 else rng.choice(sfpu) for _ in range(n))
        steps.append((rng.choice((1, 1, 1, 0, 2)), words, rng.choice((0, 0, 1, 30))))
    return steps


def _snapshot(tx: Tensix, ret) -> tuple:
    """Frontend, cycle model, Vector Unit timing, the deferred queue and Dst's rows written, as they stand (the queue
    not executed)."""
    tm, st = tx.tm, tx.tm.sfpu
    threads = [(list(th.fifo), list(th.ready), th.blocked, None if th.latch is None else th.latch.block, dict(th.rwc))
               for th in tx.threads]
    return (ret, threads, tm.stats(), list(tm.clock), list(tm.fe), list(tm.gate), [list(q) for q in tm.taken],
            list(tm.after_mop), list(tm.first), list(tm.stalls), list(tm.issued), tm.event_t,
            (st.mad_cycle, st.mad_writes, st.mad_macro, st.nop_only_cycle, st.busy_until),
            list(tx.deferred), tx._dq_flags, list(tx.instructions), tx.issue_t, tx._dst.written.tolist())


_DST_ACCESS = {isa.INSTRUCTIONS[n].opcode for n in ("SFPLOAD", "SFPSTORE")}


def _push_words(tx: Tensix, thread: int, words: tuple, t: int) -> int:
    """push() of each word in turn, as push_many pushes them in one call (pm_done / pm_t as it leaves them on an
    error)."""
    for k, w in enumerate(words):
        try:
            t = tx.push(thread, w, t) + 1
        except BaseException:
            tx.pm_done, tx.pm_t = k, t
            raise
    return t


def _run(seed: int, strict: bool, native: bool, monkeypatch, entry: bool = False) -> tuple[list, list]:
    """The program's trace (a snapshot after every push, then Dst, LRegs and lane flags, or the error's text) and how
    many words the C part issued: [all, SFPLOAD / SFPSTORE, those of all pushed on their own (push_word, push_one)].
    Every third step pushes its words one push() at a time. Without `entry` the Tensix's push is DeferralMixin.push
    (which calls push_one through the counting loader) and its push_many the class's, with it the C part's push_entry
    and push_many_entry (push_one and their issue_run calls not counted)."""
    monkeypatch.setattr(sfpu_issue_native, "ISSUE_NATIVE", native)
    if not entry:
        monkeypatch.setattr(sfpu_issue_native, "push_entry", lambda *_: None)
    taken = [0, 0, 0]
    real = sfpu_issue_native._load()[0].issue_run

    def counting_one_word(c_call, word_arg: int):
        """c_call (push_word / push_one: one word pushed on its own, its word argument at word_arg) counted."""
        def counted_word(*a):
            r = c_call(*a)
            if r is not None:
                taken[0] += 1
                taken[1] += a[word_arg] >> 24 in _DST_ACCESS
                taken[2] += 1
            return r
        return counted_word
    for name, word_arg in (("push_word", 1), ("push_one", 2)):
        counted_word = counting_one_word(getattr(sfpu_issue_native._load()[0], name), word_arg)
        monkeypatch.setattr(sfpu_issue_native, name, lambda f=counted_word: f if native else None)

    def counted(*a):
        r = real(*a)
        if r is not None:
            taken[0] += r[0] - a[2]
            taken[1] += sum(w >> 24 in _DST_ACCESS for w in a[1][a[2]:r[0]])
        return r
    monkeypatch.setattr(sfpu_issue_native, "issue_run", lambda: counted if native else None)
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=strict)
    many = (lambda tx, *a: tx.push_many(*a)) if entry else Tensix.push_many      # (the instance's: push_many_entry)
    # (half of Dst written: a strict load of the rest raises unless a store with every lane enabled wrote it first)
    tx.dst.write_rows32(0, np.random.default_rng(seed).standard_normal((256, 16)).astype(np.float32).view(np.uint32))
    rng = random.Random(seed)
    nop = E("NOP")
    for thread in range(3):
        for i, v in enumerate([1, 2, nop, nop, nop, nop, nop, E("SETDMAREG", reg_index_16b=3, payload=7), nop]):
            tx.mop_cfg_write(thread, i, v)
    clock, trace = [0, 0, 0], []
    try:
        for i, (thread, words, gap) in enumerate(_program(seed)):
            if i % 8 == 7:     # as if the FPU had just written a Dst block: an SFPLOAD of it too soon is a strict error
                tx.tm.dst_fpu_write[rng.randrange(64)] = max(tx.tm.clock) - rng.randrange(3)
            try:
                push = _push_words if i % 3 == 2 else many
                ret = clock[thread] = push(tx, thread, words, clock[thread] + gap)
            except Stall:
                ret = ("stall", tx.pm_done, tx.pm_t, tx.step())
            trace.append(_snapshot(tx, ret))
            if gap:
                trace.append(("step", tx.step()))
    except EmuError as e:
        return trace + [(str(e), tx.pm_done, tx.pm_t)], taken
    s = tx.sfpu
    return trace + [(tx.dst.rows32.tolist(), s.lreg.tolist(), s.lane_flags.tolist())], taken


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_random_programs_identical(seed, strict, monkeypatch):
    """The same trace with the C part on and off, and with push() as the C part's push_entry; an error (strict: a
    stall-blind read after a MAD; an address modifier with a bias or CToCR combined; an odd Dst address) is raised
    after the same state at the same word (the C part leaves that word to the Python path)."""
    a, _ = _run(seed, strict, True, monkeypatch)
    b, none = _run(seed, strict, False, monkeypatch)
    assert a == b
    assert none == [0, 0, 0]
    monkeypatch.undo()
    assert _run(seed, strict, True, monkeypatch, entry=True)[0] == b       # (push() as push_entry)


def _many_words_trace(monkeypatch, memo: bool) -> list:
    """More distinct words than the C issue's memo of word facts holds (cword_rec: 1,024 slots), each decoded by a
    first pass, then pushed again in runs (push_many's issue_run) and one at a time, interleaved with words of a small
    body: a snapshot after every run, then the bits."""
    monkeypatch.setattr(sfpu_issue_native, "WORD_MEMO_NATIVE", memo)
    rng = random.Random(5)
    many = list(dict.fromkeys(E("SFPLOADI", lreg_ind=rng.randrange(8), instr_mod0=rng.choice((0, 2, 8, 10)),
                                imm16=rng.randrange(1 << 16)) for _ in range(2500)))
    body = [_sfpu(rng) for _ in range(12)]
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=False)
    trace, t = [], 0
    for k in range(0, len(many), 50):
        t = tx.push_many(1, tuple(many[k:k + 50]) + tuple(body), t)
    for k in range(0, len(many), 50):
        run = tuple(w for pair in zip(many[k:k + 50], rng.choices(body, k=50)) for w in pair)
        t = tx.push_many(1, run, t) if k % 100 else _push_words(tx, 1, run, t)
        trace.append(_snapshot(tx, t))
    s = tx.sfpu
    return trace + [(tx.dst.rows32.tolist(), s.lreg.tolist(), s.lane_flags.tolist())]


def _changed_facts_trace(monkeypatch, memo: bool) -> list:
    """Two words pushed (in runs and one at a time) until the memos hold them, then the Tensix's C facts of the two
    swapped (the queue executed first: its word table keeps a word's first facts) and pushed again, twice: a snapshot
    after every run, then the bits. The C issue must read the dict as it is now, also for the same tuple of words
    pushed again (its memo of a run's records by position, block_memo)."""
    monkeypatch.setattr(sfpu_issue_native, "WORD_MEMO_NATIVE", memo)
    a = E("SFPMAD", lreg_src_a=1, lreg_src_b=2, lreg_src_c=3, lreg_dest=4, instr_mod1=0)
    b = E("SFPLOADI", lreg_ind=4, instr_mod0=0, imm16=0x3F80)
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=False)
    trace, t, run = [], 0, (a, b) * 8
    for k, how in enumerate("pmmppmmpm"):   # (each swap's first words through push(), then push_many, in turn)
        if k in (4, 7):
            tx.settle()
            tx._cword[a], tx._cword[b] = tx._cword[b], tx._cword[a]
        t = tx.push_many(1, run, t) if how == "m" else _push_words(tx, 1, run, t)
        trace.append(_snapshot(tx, t))
    s = tx.sfpu
    return trace + [(tx.dst.rows32.tolist(), s.lreg.tolist(), s.lane_flags.tolist())]


def test_word_memo_identical(monkeypatch):
    """The C issue's memo of word facts (cword_rec, TT_EMU_WORD_MEMO_NATIVE): the same trace on and off for the
    random programs, for more distinct words than it holds, for words whose facts the Tensix changed, and the same
    tile_long row, strict and not; the memo answers look-ups only where it is on (word_memo_hits)."""
    hits = sfpu_issue_native._load()[0].word_memo_hits
    assert _changed_facts_trace(monkeypatch, True) == _changed_facts_trace(monkeypatch, False)
    for seed in range(4):
        runs, answered = [], []
        for memo in (True, False):
            monkeypatch.setattr(sfpu_issue_native, "WORD_MEMO_NATIVE", memo)
            before = hits()
            runs.append(_run(seed, seed % 2 == 0, True, monkeypatch, entry=True))
            answered.append(hits() - before)
            monkeypatch.undo()
        assert runs[0] == runs[1] and answered[0] > 0 and answered[1] == 0, answered
    assert _many_words_trace(monkeypatch, True) == _many_words_trace(monkeypatch, False)
    rows, answered = [], []
    for memo in (True, False):
        monkeypatch.setattr(sfpu_issue_native, "WORD_MEMO_NATIVE", memo)
        before = hits()
        row = bench.bench_tile_long(2)
        rows.append({k: v for k, v in row.items() if k not in bench.TIMES})
        answered.append(hits() - before)
    assert rows[0] == rows[1] and answered[0] > 1000 and answered[1] == 0, answered


def test_push_many_entry_takes_runs(monkeypatch):
    """The Tensix's push_many is the C part's push_many_entry (not with TT_EMU_SFPU_ISSUE_NATIVE=0): many runs it
    issues whole, without the class's push_many (test_random_programs_identical: the same trace as the Python
    path's)."""
    monkeypatch.setattr(sfpu_issue_native, "ISSUE_NATIVE", False)
    assert "push_many" not in vars(Tensix(np.zeros(layout.L1_SIZE, np.uint8)))
    monkeypatch.undo()
    calls = [0]
    cls_many = Tensix.push_many

    def counted(tx, *a):
        calls[0] += 1
        return cls_many(tx, *a)
    monkeypatch.setattr(Tensix, "push_many", counted)
    monkeypatch.setattr(deferral, "ISSUE_RUN_FIRST", deferral.ISSUE_RUN_FIRST | {counted})
    runs = 0
    for seed in range(4):
        trace, _ = _run(seed, False, True, monkeypatch, entry=True)
        pushes = sum(1 for e in trace[:-1] if e[0] != "step")      # the steps reached (the last entry: the end)
        runs += sum(1 for i in range(pushes) if i % 3 != 2)         # (every third step: push() per word)
    assert runs > 300 and calls[0] < runs - 100    # (the class's push_many: every run without the entry)


def test_random_programs_reach_the_c_part(monkeypatch):
    """Most of the random words, SFPLOAD / SFPSTORE among them, are issued by the C part, also words pushed on their
    own, and the programs end in errors as well as in final states."""
    runs = [_run(seed, strict, True, monkeypatch) for seed in range(6) for strict in (False, True)]
    assert sum(t[0] for _, t in runs) > 15000 and sum(t[1] for _, t in runs) > 1000
    assert sum(t[2] for _, t in runs) > 3000
    ends = [isinstance(trace[-1][0], str) for trace, _ in runs]
    assert any(ends) and not all(ends)


def test_tile_long_identical(monkeypatch):
    """The bench's whole-tile long body (TRISC1 pushing 171 SFPU words per row step): same cycles and Dst."""
    runs = {}
    for on in (True, False):
        monkeypatch.setattr(sfpu_issue_native, "ISSUE_NATIVE", on)
        r = bench.bench_tile_long(2)
        runs[on] = {k: v for k, v in r.items() if k not in bench.TIMES}
    assert runs[True] == runs[False]


@pytest.mark.needs_cc
@pytest.mark.parametrize("kernel", ["where_exp", "cumsum"])
def test_kernels_identical(kernel, monkeypatch):
    """Compiled kernels (tests/emu/test_native_sfpu.py's): the same output bytes and the same cycles of every core
    and Tensix thread with the C part on and off."""
    from tests.emu.test_native_sfpu import _kernel_both
    runs = _kernel_both(kernel, sfpu_issue_native, "ISSUE_NATIVE", monkeypatch)
    assert runs[True][:2] == runs[False][:2]


def _scripted(case: str, native: bool, monkeypatch) -> list:
    """A warmed-up run of known words, then the case's cause and a run of the same words: the traces."""
    monkeypatch.setattr(sfpu_issue_native, "ISSUE_NATIVE", native)
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
    tx.dst.write_rows32(0, np.arange(512 * 16, dtype=np.uint32).reshape(512, 16))
    mad = E("SFPMAD", lreg_src_a=1, lreg_src_b=2, lreg_src_c=3, lreg_dest=4, instr_mod1=0)
    load = E("SFPLOAD", lreg_ind=1, instr_mod0=3, sfpu_addr_mode=1, dest_reg_addr=64)
    store = E("SFPSTORE", lreg_ind=4, instr_mod0=3, sfpu_addr_mode=1, dest_reg_addr=128)
    body = (mad, E("SFPNOP"), load, store) * 4
    trace = []
    try:
        t = tx.push_many(1, body, 0)
        t = tx.push_many(1, body, t)
        trace.append(_snapshot(tx, t))
        if case == "bias":
            t = tx.push_many(1, (E("SETC16", setc16_reg=47 + 1, setc16_value=1),), t)
        elif case == "fpu_write":          # the FPU wrote the loaded rows' block just now
            tx.tm.dst_fpu_write[64 >> 3] = tx.tm.clock[1] + 1
        elif case == "ctocr_clear":
            t = tx.push_many(1, (E("SETC16", setc16_reg=28 + 1, setc16_value=0x1802),), t)
        trace.append(_snapshot(tx, tx.push_many(1, body, t)))
    except EmuError as e:
        trace.append((str(e), tx.pm_done, tx.pm_t, _snapshot(tx, None)))
    return trace


@pytest.mark.parametrize("case", ["bias", "fpu_write", "ctocr_clear"])
def test_refused_words_raise_as_in_python(case, monkeypatch):
    """A word whose address modifier raises (a bias; CToCR with Clear) or whose load reads Dst rows the FPU wrote too
    recently: the C part leaves it to the Python path, which raises after the same state."""
    a = _scripted(case, True, monkeypatch)
    assert a == _scripted(case, False, monkeypatch)
    assert isinstance(a[-1][0], str) and a[-1][1] > 0      # (after words of the run were issued)


def _replay_program(seed: int) -> list[tuple[int, tuple[int, ...]]]:
    """(thread, words pushed) per step: REPLAY loads of random SFPU bodies (some executed while loading) into two
    slots of the replay buffer, then mostly REPLAYs of them (whole or in part), host-pushed MOPs of REPLAYs (their
    row steps reach the ready queue together: batching attempts, then drain_deferrable) and a few plain words."""
    rng = random.Random(seed)
    sfpu, plain = [_sfpu(rng) for _ in range(20)], [_plain(rng) for _ in range(6)]
    steps = []
    for thread in (1, 0):
        for start in (0, 16):
            body = tuple(rng.choice(sfpu) for _ in range(rng.randrange(12, 17)))    # (a REPLAY reads <= 12 of it)
            load = E("REPLAY", load_mode=1, execute_while_loading=rng.randrange(2), len=len(body), start_idx=start)
            steps.append((thread, (load,) + body))
    for _ in range(90):
        r = rng.random()
        start, n = rng.choice((0, 16)), rng.randrange(1, 13)
        replay = E("REPLAY", load_mode=0, execute_while_loading=0, len=n, start_idx=start)
        if r < 0.1:
            words = (rng.choice(plain),)
        elif r < 0.2:
            words = (E("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0),)
        else:
            words = (replay,) * rng.randrange(1, 4)
        steps.append((rng.choice((1, 1, 0)), words))
    return steps


def _replay_run(seed: int, strict: bool, native: bool, monkeypatch) -> tuple[list, int]:
    """The REPLAY program's trace (as _run's) and how many words ready_run issued (drain_deferrable's: replay_push,
    which push_many's REPLAYs reach, is off; test_replay_push_* cover it)."""
    monkeypatch.setattr(sfpu_issue_native, "READY_NATIVE", native)
    monkeypatch.setattr(sfpu_issue_native, "REPLAY_NATIVE", False)
    taken = [0]
    real = sfpu_issue_native._load()[0].ready_run

    def counted(*a):
        r = real(*a)
        taken[0] += 0 if r is None else r[0]
        return r
    monkeypatch.setattr(sfpu_issue_native, "ready_run", lambda: counted if native else None)
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=strict)
    tx.dst.write_rows32(0, np.random.default_rng(seed).standard_normal((256, 16)).astype(np.float32).view(np.uint32))
    rng = random.Random(seed)
    nop = E("NOP")
    for thread in range(3):      # the MOP's row step: a REPLAY (1 word: a MOP transition follows) or an SFPU word
        replay = rng.choice((E("REPLAY", load_mode=0, execute_while_loading=0, len=rng.randrange(1, 12), start_idx=0),
                             _sfpu(rng)))
        for i, v in enumerate([1, rng.randrange(4, 12), nop, nop, nop, replay, nop, replay, replay]):
            tx.mop_cfg_write(thread, i, v)
    clock, trace = [0, 0, 0], []
    try:
        for thread, words in _replay_program(seed):
            clock[thread] = tx.push_many(thread, words, clock[thread] + 1)
            trace.append(_snapshot(tx, clock[thread]))
    except EmuError as e:
        return trace + [(str(e), tx.pm_done, tx.pm_t)], taken[0]
    s = tx.sfpu
    return trace + [(tx.dst.rows32.tolist(), s.lreg.tolist(), s.lane_flags.tolist())], taken[0]


@pytest.mark.parametrize("seed", range(6))
def test_replay_programs_identical(seed, monkeypatch):
    """Words expanded from REPLAYs into the ready queue (drain_deferrable): the same trace after every push with
    ready_run on and off, strict errors included (a program may end early in one), and ready_run issued many."""
    taken = 0
    for strict in (False, True):
        a, n = _replay_run(seed, strict, True, monkeypatch)
        b, none = _replay_run(seed, strict, False, monkeypatch)
        assert a == b
        assert none == 0 and n > 0
        taken += n
    assert taken > 500


def test_find_period_matches_python(monkeypatch):
    """The C part's find_period (batch_sfpu's period detection) against mop_batch.find_period on random word lists:
    bodies of 1-40 words repeated 1-12 times, a tail of other words, a repetition broken in the middle, and the
    first `most` items of a deque; the bench's MOP row the same with it on and off."""
    runs = {}
    for on in (True, False):
        monkeypatch.setattr(sfpu_issue_native, "PERIOD_NATIVE", on)
        r = bench.bench_sfpu_mop(8)
        runs[on] = {k: v for k, v in r.items() if k not in bench.TIMES}
    assert runs[True] == runs[False]
    monkeypatch.setattr(sfpu_issue_native, "PERIOD_NATIVE", True)
    from tt_backend.runtime.emu.accel.mop_batch import find_period
    period = sfpu_issue_native.find_period()
    rng = random.Random(0)
    for _ in range(3000):
        pool = [rng.randrange(1 << 32) for _ in range(rng.randrange(1, 5))]
        body = [rng.choice(pool) for _ in range(rng.randrange(1, 41))]
        words = body * rng.randrange(1, 13) + [rng.choice(pool) for _ in range(rng.randrange(4))]
        if rng.random() < 0.3 and words:
            words[rng.randrange(len(words))] = rng.randrange(1 << 32)
        most = rng.choice((len(words), rng.randrange(len(words) + 1), 4096))
        assert period(deque(words), most) == find_period(words[:most]), (words, most)
        assert period(words, most) == find_period(words[:most]), (words, most)      # (a list: read in place)


def test_deferred_queue_is_the_list():
    """The C part's DeferredQueue (sfpu_queue.c) against the Python path's list of the same entries: the same items
    (indexing, negative indices, slices, iteration), the same period search as deferral._dq_period from every entry,
    the same body words, and the same sfpu_native records as pack_records, stopping at the same entry."""
    from tt_backend.runtime.emu.accel import deferral
    rng = random.Random(5)
    names = {w: (f"OP{w % 7}", {"f": w % 5}) for w in range(40, 52)}
    records = {w: tuple(rng.randrange(-9, 1 << 20) for _ in range(8)) for w in range(40, 50)}
    records[50] = None                                     # (51: no record yet)
    for _ in range(20):
        body = [rng.randrange(40, 52) for _ in range(rng.randrange(1, 12))]
        words = body * rng.randrange(1, 6) + [rng.randrange(40, 52) for _ in range(rng.randrange(0, 8))]
        lst, q = [], sfpu_issue_native._load()[0].DeferredQueue()
        for w in words:
            mem = (rng.random() < 0.5, rng.randrange(8), rng.randrange(64), rng.randrange(512)) \
                if rng.random() < 0.3 else None
            e = (w, *names[w], mem, rng.randrange(1024) if mem else 0, rng.randrange(1 << 40), rng.randrange(1 << 32),
                 rng.randrange(1 << 32), rng.randrange(3))
            lst.append(e)
            q.append(e)
        n = len(lst)
        assert len(q) == n and list(q) == lst and q[-1] == lst[-1] and q[1:n - 1] == lst[1:n - 1]
        for i in range(n):
            assert q.period(i, n, deferral.DQ_MAX_PERIOD) == deferral._dq_period(words, i, n)
            assert q.words(i, n - i) == tuple(words[i:])
            for hi in (i, n):
                assert q.pack(i, hi, records) == sfpu_issue_native.pack_records()(lst[:hi], i, records)
    with pytest.raises(IndexError):
        q[n]
    with pytest.raises(ValueError):
        q.append((40, *names[40], None, 0, 0, 0, 0, 1 << 20))   # a thread the record cannot hold


def test_deferred_queue_word_memo_collisions():
    """The queue's word table behind its memo of recent words (sfpu_queue.c's memo_w: a hash of the word and the next
    three slots): more words sharing a first slot than those four slots hold, words whose first slot is the next one,
    interleaved, and more distinct words than the memo has slots, give back the entries appended, each with its own
    name and fields."""
    slot = lambda w: (w * 2654435761 & 0xFFFFFFFF) >> 22
    same = [w for w in range(1 << 16) if slot(w) == slot(7)][:6]
    near = [w for w in range(1 << 16) if slot(w) == (slot(7) + 1) % 1024][:3]
    rng = random.Random(3)
    mixed = same + near
    words = mixed * 5 + rng.sample(mixed * 4, 36) + rng.sample(range(1 << 20, 1 << 21), 1500) + mixed[::-1] * 3
    lst, q = [], sfpu_issue_native._load()[0].DeferredQueue()
    for w in words:
        e = (w, f"OP{w}", {"w": w}, None, 0, rng.randrange(1 << 40), 1, 2, 1)
        lst.append(e)
        q.append(e)
    assert len(same) == 6 and len(near) == 3 and list(q) == lst and q.words(0, len(words)) == tuple(words)


def test_deferred_queue_freed_and_taken_again_is_fresh():
    """A freed queue is kept whole for the next new one (sfpu_queue.c's dq_kept), its word memo slots and word table
    emptied: queues made one after the other, each from words of the last one's (memo hits would find the last one's
    indices: another word's entries, or past the table's end) and from new ones, few distinct words or more than
    dq_forget clears slot by slot (then the whole memo), give back exactly the entries appended."""
    rng = random.Random(11)
    pool = rng.sample(range(1 << 24), 600)
    last = []
    for trial in range(60):
        fresh = rng.sample(pool, rng.choice((1, 3, 20, 300)))
        words = [rng.choice(last) if last and rng.random() < 0.6 else rng.choice(fresh)
                 for _ in range(rng.choice((40, 400)))]
        q = sfpu_issue_native._load()[0].DeferredQueue()
        lst = []
        for w in words:
            e = (w, f"OP{w}", {"w": w, "t": trial}, None, 0, rng.randrange(1 << 40), 1, 2, 1)
            lst.append(e)
            q.append(e)
        assert list(q) == lst and q.words(0, len(words)) == tuple(words), trial
        del q                                  # (freed: kept for the next queue)
        last = words


def test_push_one_honours_class_attributes_defined_later():
    """push_one reads the Tensix's attributes from its instance dict only while no class in its MRO defines them (a
    memo checked against the type's version tag): a property defined on the class afterwards is read through, and
    deleting it brings the instance's value back."""
    class Spied(Tensix):
        pass
    tx = Spied(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
    w = E("SFPMAD", lreg_src_a=1, lreg_src_b=2, lreg_src_c=3, lreg_dest=4, instr_mod1=0)
    push_one = sfpu_issue_native._load()[0].push_one
    t = tx.push(1, w) + 1                      # (the Python path: nothing queued yet)
    assert push_one(tx, 1, w, t, 100, False) is not None and len(tx.deferred) == 2
    Spied._fast = property(lambda self: {})    # no facts for any word: push() would not take it either
    assert tx._fast == {}                      # (a type look-up: the class has a valid version tag again, a new one)
    assert push_one(tx, 1, w, t + 1, 100, False) is None and len(tx.deferred) == 2
    del Spied._fast
    assert push_one(tx, 1, w, t + 2, 100, False) is not None and len(tx.deferred) == 3


_OP_REPLAY = isa.INSTRUCTIONS["REPLAY"].opcode


def _replay_push_program(seed: int) -> list[tuple[int, tuple[int, ...]]]:
    """(thread, words pushed one push() each) per step: REPLAY loads of 16-word bodies into three slots of the replay
    buffer (one wrapping round its end; a few plain words among the SFPU words, which ready_run does not issue; one
    body of a word and an SFPNOP alternating, whose replays of 8 or more words batch_sfpu tries), then mostly
    REPLAYs of them pushed on their own (whole or in part), SFPU words (so that work is queued) and plain words (no
    MOP: no MOP config here)."""
    rng = random.Random(seed)
    mop = isa.INSTRUCTIONS["MOP"].opcode
    sfpu, plain = [_sfpu(rng) for _ in range(20)], [w for w in (_plain(rng) for _ in range(8)) if w >> 24 != mop]
    starts = (0, 12, 28)
    steps = []
    for thread in (1, 0):
        for start in starts:
            if start == 12:
                body = (rng.choice(sfpu), E("SFPNOP")) * 8
            else:
                body = tuple(rng.choice(plain) if rng.random() < 0.06 else rng.choice(sfpu) for _ in range(16))
            steps.append((thread, (E("REPLAY", load_mode=1, execute_while_loading=0, len=16, start_idx=start),)
                          + body))
    for _ in range(120):
        r = rng.random()
        if r < 0.06:
            words = (rng.choice(plain),)
        elif r < 0.2:
            words = (rng.choice(sfpu),)
        else:
            replay = E("REPLAY", load_mode=0, execute_while_loading=0, len=rng.randrange(1, 17),
                       start_idx=rng.choice(starts))
            words = (replay,) * rng.randrange(1, 3)
        steps.append((rng.choice((1, 1, 0)), words))
    return steps


def _replay_push_run(seed: int, strict: bool, native: bool, monkeypatch, entry: bool = False,
                     many: bool = False) -> tuple[list, list]:
    """The program's trace (a snapshot after every step, with each thread's batch_skip and Tensix.current, then Dst,
    LRegs and lane flags, or the error's text) and how many REPLAYs push_one took: [all, those whose expansion ready_run
    left in part to Tensix.drain] (not counted with `entry`: push() as push_entry, as in _run). `many`: each step's
    words in one push_many call (a core's `.ttinsn` run), else one push() each."""
    monkeypatch.setattr(sfpu_issue_native, "REPLAY_NATIVE", native)
    # a Tensix that meets each word first here, whatever other tests left in the facts it could adopt (the counts
    # below depend on which words have facts when a REPLAY expands; the trace does not)
    monkeypatch.setattr(deferral, "_SHARED_TABLES", {})
    if not entry:
        monkeypatch.setattr(sfpu_issue_native, "push_entry", lambda *_: None)
    taken, inside = [0, 0], [False]
    real = sfpu_issue_native._load()[0].push_one

    def counted(*a):
        inside[0] = a[2] >> 24 == _OP_REPLAY
        try:
            r = real(*a)
        finally:
            inside[0] = False
        taken[0] += r is not None and a[2] >> 24 == _OP_REPLAY
        return r
    monkeypatch.setattr(sfpu_issue_native, "push_one", lambda: counted)
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=strict)
    tx.dst.write_rows32(0, np.random.default_rng(seed).standard_normal((256, 16)).astype(np.float32).view(np.uint32))
    drain = tx.drain

    def drain_counted(thread: int) -> int:
        taken[1] += inside[0]
        return drain(thread)
    tx.drain = drain_counted
    clock, trace = [0, 0, 0], []
    try:
        for thread, words in _replay_push_program(seed):
            try:
                t = clock[thread] + 1
                ret = clock[thread] = tx.push_many(thread, words, t) if many else _push_words(tx, thread, words, t)
            except Stall:
                ret = ("stall", tx.pm_done, tx.pm_t, tx.step())
            trace.append((_snapshot(tx, ret), [th.batch_skip for th in tx.threads], tx.current))
    except EmuError as e:
        return trace + [(str(e), tx.pm_done, tx.pm_t)], taken
    s = tx.sfpu
    return trace + [(tx.dst.rows32.tolist(), s.lreg.tolist(), s.lane_flags.tolist())], taken


@pytest.mark.parametrize("seed", range(6))
def test_replay_push_identical(seed, monkeypatch):
    """A REPLAY pushed on its own (push_one's replay_push, TT_EMU_REPLAY_PUSH_NATIVE): the same trace after every push
    with it on and off, strict errors included; it took REPLAYs, some of them only in part (a plain word or a word
    ready_run leaves to Python in the expansion), and declined others (a batch to try, nothing queued)."""
    taken = [0, 0]
    for strict in (False, True):
        a, n = _replay_push_run(seed, strict, True, monkeypatch)
        b, none = _replay_push_run(seed, strict, False, monkeypatch)
        assert a == b
        assert none == [0, 0]
        assert _replay_push_run(seed, strict, True, monkeypatch, entry=True)[0] == b
        taken = [x + y for x, y in zip(taken, n)]
    assert taken[0] > 20 and taken[1] > 0


@pytest.mark.parametrize("seed", range(3))
def test_replay_push_from_push_many_identical(seed, monkeypatch):
    """The REPLAYs of a run pushed in one push_many call (a TRISC's `.ttinsn` run) reach push() and so replay_push:
    the same trace as pushing the words one push() each on the Python path, and replay_push took REPLAYs there."""
    taken = 0
    for strict in (False, True):
        a, n = _replay_push_run(seed, strict, True, monkeypatch, many=True)
        assert a == _replay_push_run(seed, strict, False, monkeypatch)[0]
        assert _replay_push_run(seed, strict, True, monkeypatch, entry=True, many=True)[0] == a
        taken += n[0]
    assert taken > 20


def test_replay_push_declines_a_batch(monkeypatch):
    """A REPLAY whose expansion batch_sfpu would batch (8 or more words, at least BATCH_MIN_REPS repetitions) is left
    to the Python path, with nothing changed; a shorter one of the same body is taken."""
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
    w = E("SFPMAD", lreg_src_a=1, lreg_src_b=2, lreg_src_c=3, lreg_dest=4, instr_mod1=0)
    nop = E("SFPNOP")
    t = _push_words(tx, 1, (E("REPLAY", load_mode=1, execute_while_loading=0, len=8, start_idx=0),) + (w, nop) * 4, 0)
    replay = lambda n: E("REPLAY", load_mode=0, execute_while_loading=0, len=n, start_idx=0)
    t = _push_words(tx, 1, (replay(8), replay(6), w), t)     # (the Python path: the words' facts; then work queued)
    push_one = sfpu_issue_native._load()[0].push_one
    before = _snapshot(tx, None)
    assert push_one(tx, 1, replay(8), t, 100000, True) is None and _snapshot(tx, None) == before
    assert push_one(tx, 1, replay(6), t, 100000, False) is None and _snapshot(tx, None) == before
    assert push_one(tx, 1, replay(6), t, 100000, True) == t and len(tx.deferred) == len(before[13]) + 6
    monkeypatch.setattr(sfpu_issue_native, "REPLAY_NATIVE", False)       # (what `python -m tt_backend info` says)
    assert "TT_EMU_REPLAY_PUSH_NATIVE=0" in sfpu_issue_native.replay_status()


def test_replay_push_reads_batch_min_reps_at_each_push(monkeypatch):
    """BATCH_MIN_REPS changed after the Tensix was built: replay_push leaves to batch_sfpu the REPLAY it would now
    batch (two repetitions of a 4-word body), so the state is the Python path's."""
    def run(replay_native):
        monkeypatch.setattr(sfpu_issue_native, "REPLAY_NATIVE", replay_native)
        monkeypatch.setattr(mop_batch, "BATCH_MIN_REPS", 4)
        tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=False)
        monkeypatch.setattr(mop_batch, "BATCH_MIN_REPS", 2)
        w = E("SFPMAD", lreg_src_a=1, lreg_src_b=2, lreg_src_c=3, lreg_dest=4, instr_mod1=0)
        w2 = E("SFPMAD", lreg_src_a=1, lreg_src_b=2, lreg_src_c=3, lreg_dest=5, instr_mod1=0)
        nop = E("SFPNOP")
        t = _push_words(tx, 1, (E("REPLAY", load_mode=1, execute_while_loading=0, len=8, start_idx=0),)
                        + (w, nop, w2, nop) * 2, 0)
        replay = E("REPLAY", load_mode=0, execute_while_loading=0, len=8, start_idx=0)
        t = _push_words(tx, 1, (replay, w), t)        # the words' facts learnt, work queued
        t = _push_words(tx, 1, (replay,), t)
        return _snapshot(tx, t), tx.dst.rows32.tolist(), tx.sfpu.lreg.tolist()
    assert run(True) == run(False)


def test_bench_sfpu_identical(monkeypatch):
    """bench emu's sfpu row (a REPLAY of three exp2 row bodies pushed on its own, again and again): the same cycles,
    cycle model, Dst, LRegs and lane flags with replay_push on and off."""
    runs = {}
    for on in (True, False):
        monkeypatch.setattr(sfpu_issue_native, "REPLAY_NATIVE", on)
        made = []
        monkeypatch.setattr(bench, "Tensix", lambda *a, **k: made.append(Tensix(*a, **k)) or made[-1])
        r = bench.bench_sfpu(384)
        tx = made[0]
        s = tx.sfpu
        runs[on] = (r["cycles"], r["sfpu_instructions"], _snapshot(tx, None), tx.dst.rows32.tolist(),
                    s.lreg.tolist(), s.lane_flags.tolist())
    assert runs[True] == runs[False]


def test_push_entry_is_push(monkeypatch):
    """A Tensix's push as the C part's push_entry: bound where DeferralMixin.push is the class's push (a subclass that
    overrides it keeps its own); positional and keyword arguments and the switches flipped after the Tensix was made
    (ISSUE_NATIVE read at each call) give the same state after every push as DeferralMixin.push itself."""
    class Own(Tensix):
        def push(self, thread, word, t=0):
            return Tensix.push(self, thread, word, t)
    assert "push" not in vars(Own(np.zeros(layout.L1_SIZE, np.uint8)))
    rng = random.Random(7)
    words = [_sfpu(rng) for _ in range(12)]
    program = [rng.choice(words) for _ in range(300)]
    traces = []
    for entry in (True, False):
        monkeypatch.setattr(sfpu_issue_native, "ISSUE_NATIVE", True)
        tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=False)
        if not entry:
            tx.push = Tensix.push.__get__(tx)
        assert ("push_entry" in str(tx.push)) == entry
        trace, t = [], 0
        for i, w in enumerate(program):
            if i == 200:
                monkeypatch.setattr(sfpu_issue_native, "ISSUE_NATIVE", False)
            t = (tx.push(1, w, t=t) if i % 5 == 0 else tx.push(1, w) if i % 7 == 0 else tx.push(1, w, t)) + 1
            trace.append(_snapshot(tx, t))
        s = tx.sfpu
        traces.append(trace + [(tx.dst.rows32.tolist(), s.lreg.tolist(), s.lane_flags.tolist())])
    assert traces[0] == traces[1]


def _long_pushes(memo: bool, native: bool, monkeypatch) -> tuple[list, list]:
    """bench emu's sfpu_long shape for two tiles (the second with the first's STALLWAIT still latched), each word by
    its own push(), with the state changed from outside now and then as Python code may change it between pushes (the
    cycle model's event_t with the thread blocked, the thread's latch, a new config word 1, the Tensix's _dq_flags
    rebound to an equal tuple): (ret, clock, issued, issue_t, flag state) after every push and a whole snapshot
    every 97th, then Dst, LRegs and lane flags."""
    monkeypatch.setattr(sfpu_issue_native, "ISSUE_NATIVE", native)
    monkeypatch.setattr(sfpu_issue_native, "PUSH_MEMO_NATIVE", memo)
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
    tx.dst.write_rows32(0, bench.long_inputs())
    tx.cfg_write(1, bench.LONG_CFG1)
    tx.push(1, 0xB21D0002)
    words = (bench.LONG_PROLOGUE + bench.LONG_SETUP + bench.LONG_BODY * 6 + bench.LONG_EPILOGUE) * 2
    trace, th = [], tx.threads[1]
    for i, w in enumerate(words):
        if i % 211 == 17:
            th.blocked, tx.tm.event_t = "test", max(tx.tm.clock) + 5
        if i % 307 == 31:
            tx._dq_flags = tuple(tx._dq_flags) if tx._dq_flags is not None else None
        if i % 401 == 47 and th.latch is None:
            th.latch = Latch("STALLWAIT", 0, (), 0, 0)         # (blocks nothing)
        elif i % 401 == 99 and th.latch is not None and th.latch.block == 0:
            th.latch = None
        if i == 700:
            tx.cfg_write(1, bench.LONG_CFG1)
        r = tx.push(1, w)
        trace.append((r, list(tx.tm.clock), list(tx.tm.issued), tx.issue_t, tx._dq_flags, tx.current, dict(th.rwc),
                      len(tx.deferred)))
        if i % 97 == 0:
            trace.append(_snapshot(tx, r))
    tx.settle()
    s = tx.sfpu
    return trace + [(tx.dst.rows32.tolist(), s.lreg.tolist(), s.lane_flags.tolist())]


def test_push_memo_identical(monkeypatch):
    """push_one's memo of the Tensix's state (push_memo.c, TT_EMU_PUSH_MEMO_NATIVE): the long body's words pushed one
    at a time give the same results, cycle model and queue after every push, and the same bits, with the memo on,
    off and with the Python path, also where the state changes between pushes; the memo takes most of the words."""
    counts = sfpu_issue_native._load()[0].push_memo_counts
    before = counts()
    on = _long_pushes(True, True, monkeypatch)
    taken, filled = (a - b for a, b in zip(counts(), before))
    assert taken > 1850 and filled < taken / 20         # (of some 2,100 words, SFPLOAD / SFPSTORE too)
    before = counts()
    assert _long_pushes(False, True, monkeypatch) == on and counts() == before
    assert _long_pushes(True, False, monkeypatch) == on


def test_push_memo_follows_class_and_instance_changes():
    """The memo is not used once the Tensix's class defines one of the attributes it reads (the class's version tag),
    nor after the cycle model or the thread's latch changed; push_one decides as it would without it."""
    class Spied(Tensix):
        pass
    tx = Spied(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
    w = E("SFPMAD", lreg_src_a=1, lreg_src_b=2, lreg_src_c=3, lreg_dest=4, instr_mod1=0)
    push_one = sfpu_issue_native._load()[0].push_one
    t = tx.push(1, w) + 1
    for k in range(3):                         # (the first fills the memo, the next take it)
        assert push_one(tx, 1, w, t + k, 100, False, True) is not None
    Spied._fast = property(lambda self: {})
    assert push_one(tx, 1, w, t + 3, 100, False, True) is None and len(tx.deferred) == 4
    del Spied._fast
    assert push_one(tx, 1, w, t + 4, 100, False, True) is not None and len(tx.deferred) == 5
    tx.tm.sfpu.rec = object()                  # (a timeline's recorder: the Python path's)
    assert push_one(tx, 1, w, t + 5, 100, False, True) is None
    tx.tm.sfpu.rec = None
    th = tx.threads[1]
    for queue in (th.fifo, th.ready, th.mop_out):      # (a word waiting in the frontend: push() queues behind it)
        queue.append(w)
        assert push_one(tx, 1, w, t + 6, 100, False, True) is None and len(tx.deferred) == 5
        queue.clear()
    th.ready = [w]                                     # (a list, not a deque: its truth all the same)
    assert push_one(tx, 1, w, t + 6, 100, False, True) is None and len(tx.deferred) == 5
    th.ready = deque()
    assert push_one(tx, 1, w, t + 6, 100, False, True) is not None and len(tx.deferred) == 6
    tx.threads[1].latch = Latch("STALLWAIT", 0, (), 0xFFFF, 0)    # (holds every word)
    assert push_one(tx, 1, w, t + 7, 100, False, True) is None and len(tx.deferred) == 6


@pytest.mark.parametrize("lanes", [(0, 0), (1, 1), (1, 0), (0, 1), ("mixed", 0), ("mixed", 1), (0, "mixed"),
                                   ("mixed", "mixed")])
def test_push_many_lane_flags_read_as_uniform_flags(lanes, monkeypatch):
    """A run of SFPU words pushed with nothing queued (push_many's `many_one`) reads the SFPU's lane flags and their
    use as deferral.uniform_flags gives them (counted in C while it is deferral's own function): under every
    combination of all-clear, all-set and mixed flags, the same queue, flag state kept with it (`_dq_flags`), Dst,
    LRegs and cycles as with the function called (a wrapper in its place, which C then calls); the wrapper asked once
    per run."""
    from tests.emu.test_emu_speed import _full_state, _same
    from tests.support.tensix_runs import mop_run
    uniform, calls = deferral.uniform_flags, []

    def wrapped(sfpu):
        calls.append(1)
        return uniform(sfpu)
    rng = np.random.default_rng(sum(hash(str(v)) & 0xFF for v in lanes))
    pattern = rng.integers(0, 2, 32).astype(bool)
    pattern[:2] = (False, True)                             # (mixed: neither all clear nor all set)
    states = []
    for replaced in (False, True):
        if replaced:
            monkeypatch.setattr(deferral, "uniform_flags", wrapped)
        tx = mop_run(bench.exp2_body(), tiles=0)
        s = tx.raw_sfpu
        for arr, v in ((s.lane_flags, lanes[0]), (s.use_lane_flags, lanes[1])):
            arr[:] = pattern if v == "mixed" else bool(v)
        s.invalidate()
        queued = []                            # after each run: the queue's length and the flag state it keeps
        for _ in range(3):
            tx.push_many(1, tuple(bench.exp2_body()), tx.tm.clock[1] + 40)
            queued.append((len(tx.deferred), tx._dq_flags))
            tx.settle()
        states.append(_full_state(tx) + (list(tx.tm.clock), list(tx.tm.stalls), queued))
    assert len(calls) >= 3, calls
    _same(*states)
