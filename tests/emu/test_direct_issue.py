"""Direct issue (runtime/emu/accel/direct_issue.py, with the deferral's push path) against the reference push path
(FIFO -> drain): after every push of random programs over the three threads (plain words, Wait Gate latches,
semaphores, MOP expansion, REPLAY loads recorded and executed or not, deferred SFPU words, FIFO-full stalls, errors)
the frontend, the cycle model, the timeline and the units hold the same state; whole compiled kernels write the same
bytes with the same cycles on every core. Also the drain's skip of a thread blocked on unchanged Src banks
(tensix.RETRY_ON_BANK_CHANGE): a bank handover step by step, and whole kernels."""
from __future__ import annotations

import ctypes
import functools
import random
import sys
from collections import deque

import numpy as np
import pytest

from tt_backend.bench.emu import elementwise_inputs, elementwise_plan
from tt_backend.bench.kernels import launch_plan, matmul_arrays, matmul_plan
from tt_backend.chip import isa, layout
from tt_backend.chip.errors import EmuError
from tt_backend.lowering.codegen.sources import split
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.emu import frontend, tensix, timeline
from tt_backend.runtime.emu.accel import deferral, direct_issue, sfpu_issue_native, tile_native
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.emu.frontend import FrontendMixin
from tt_backend.runtime.emu.rv32 import Stall
from tt_backend.runtime.emu.tensix import Tensix

from tests.support.timelines import recorded_spans

E = isa.encode
needs_plain_c = pytest.mark.skipif(sfpu_issue_native.plain_run() is None, reason=sfpu_issue_native.plain_status())


def _plain(rng: random.Random, wait_share: float = 0.05) -> int:
    """A random word the direct path may take (or that blocks at the Wait Gate: a share `wait_share` of them)."""
    sem = 1 << rng.randrange(3)
    waits = [
        lambda: E("SEMWAIT", sem_sel=sem, wait_sem_cond=rng.choice((1, 2)), stall_res=rng.randrange(1, 512)),
        lambda: E("STALLWAIT", wait_res=rng.choice((1 << 11, 1 << 4, 1 << 3, 0b110)), stall_res=rng.randrange(1, 512)),
    ]
    if rng.random() < wait_share:
        return rng.choice(waits)()
    return rng.choice([
        lambda: E("SETDMAREG", reg_index_16b=rng.randrange(128), payload=rng.randrange(1 << 16)),
        lambda: E("SETC16", setc16_reg=rng.randrange(2, 28), setc16_value=rng.randrange(1 << 16)),
        lambda: E("SEMINIT", sem_sel=sem, init_value=rng.randrange(3), max_value=rng.randrange(1, 4)),
        lambda: E("SEMPOST", sem_sel=sem),
        lambda: E("SEMGET", sem_sel=sem),
        lambda: E("NOP"),
        lambda: E("SETADCXY", cnt_set_mask=rng.randrange(8), bit_mask=rng.randrange(16), ch0_x=rng.randrange(8),
                  ch0_y=rng.randrange(8), ch1_x=rng.randrange(8), ch1_y=rng.randrange(8)),
        lambda: E("SETADCXX", cnt_set_mask=rng.randrange(8), x_start=0, x_end2=rng.randrange(64)),
        lambda: E("SETRWC", bit_mask=rng.randrange(16), rwc_a=rng.randrange(4), rwc_b=rng.randrange(4),
                  rwc_d=rng.randrange(8), rwc_cr=0, clear_ab_vld=0),
    ])()


def _sfpu(rng: random.Random) -> int:
    """A deferrable SFPU word (the deferral's path, beside the direct one)."""
    reg = lambda: rng.randrange(8)
    return rng.choice([
        lambda: E("SFPMAD", lreg_src_a=reg(), lreg_src_b=reg(), lreg_src_c=reg(), lreg_dest=reg(), instr_mod1=0),
        lambda: E("SFPLOAD", lreg_ind=reg(), instr_mod0=3, sfpu_addr_mode=0, dest_reg_addr=4 * rng.randrange(64)),
        lambda: E("SFPSTORE", lreg_ind=reg(), instr_mod0=3, sfpu_addr_mode=0, dest_reg_addr=4 * rng.randrange(64)),
        lambda: E("SFPNOP"),
    ])()


def _program(seed: int, wait_share: float = 0.05) -> list[tuple[int, tuple[int, ...], int]]:
    """(thread, words pushed in one push_many call or one word, cycles before the push) per step."""
    rng = random.Random(seed)
    _plain = functools.partial(globals()["_plain"], wait_share=wait_share)
    replay = lambda load, n, exe=0: E("REPLAY", load_mode=load, execute_while_loading=exe, len=n, start_idx=0)
    steps = []
    for _ in range(300):
        kind = rng.random()
        if kind < 0.6:
            words = (_plain(rng),)
        elif kind < 0.75:
            words = (_sfpu(rng),)
        elif kind < 0.85:
            words = tuple(rng.choice((_plain, _sfpu))(rng) for _ in range(rng.randrange(2, 9)))
        elif kind < 0.92:                    # recorded for replay (and executed while recording, or not)
            body = tuple(rng.choice((_plain, _sfpu))(rng) for _ in range(3))
            words = (replay(1, 3, rng.randrange(2)), *body, replay(0, 3))
            if rng.random() < 0.5:           # the body pushed one word at a time
                steps += [(thread, (w,), 0) for thread in [rng.randrange(3)] for w in words]
                continue
        else:
            words = (E("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0),)
        steps.append((rng.randrange(3), words, rng.randrange(4)))
    return steps


def _snapshot(tx: Tensix, ret) -> tuple:
    """The frontend's, the cycle model's and the sync unit's state (not Tensix.current, the instruction last started,
    for error messages: a skipped retry of a blocked instruction does not start it again, deferred work runs later)."""
    threads = [(list(th.fifo), list(th.fifo_t), list(th.mop_out), list(th.ready), th.replay_load, th.blocked,
                th.bank_wait, th.batch_skip, None if th.latch is None else
                (th.latch.kind, th.latch.cond, th.latch.block, th.latch.word), list(th.gpr), list(th.cfg),
                repr(th.adc), dict(th.rwc)) for th in tx.threads]
    tm = tx.tm
    return (ret, threads, tm.stats(), list(tm.fe), list(tm.gate), [list(q) for q in tm.taken], list(tm.after_mop),
            tm.event_t, list(tx.instructions), tx.issue_t, list(tx.sem_value),
            list(tx.sem_max))


def _run(seed: int, strict: bool, direct: bool, monkeypatch, plain_c: bool = False, timed: bool = True,
         wait_share: float = 0.05) -> list:
    """The program's trace: a snapshot after every step, then Dst, LRegs and the timeline (or the error's text).
    `direct`: with direct issue and the deferral's push path, else both off (every word through the FIFO).
    `plain_c`: with the C issue of plain words (sfpu_issue_native.plain_run), which a timeline (`timed`) turns off."""
    monkeypatch.setattr(direct_issue, "DIRECT_ISSUE", direct)
    monkeypatch.setattr(deferral, "DEFER_SFPU", direct)
    monkeypatch.setattr(sfpu_issue_native, "PLAIN_ISSUE_NATIVE", plain_c)
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=strict)
    if timed:
        tx.rec = tx.tm.rec = tx.tm.sfpu.rec = timeline.TimelineRecorder(0, tx.tm)
    tx.dst.write_rows32(0, np.random.default_rng(seed).standard_normal((512, 16)).astype(np.float32).view(np.uint32))
    nop, setrwc = E("NOP"), E("SETRWC", bit_mask=4, rwc_a=0, rwc_b=0, rwc_d=0, rwc_cr=0, clear_ab_vld=0)
    for thread in range(3):
        for i, v in enumerate([1, 2, nop, nop, nop, setrwc, nop, E("SETDMAREG", reg_index_16b=3, payload=7), setrwc]):
            tx.mop_cfg_write(thread, i, v)
    clock, trace = [0, 0, 0], []
    try:
        for thread, words, gap in _program(seed, wait_share):
            t = clock[thread] + gap
            try:
                if len(words) == 1:
                    ret = tx.push(thread, words[0], t)
                    clock[thread] = ret + 1
                else:
                    ret = clock[thread] = tx.push_many(thread, words, t)
            except Stall:
                ret = ("stall", tx.step())
            trace.append(_snapshot(tx, ret))
            if thread == 0 and gap == 0:
                trace.append(("step", tx.step()))
    except EmuError as e:
        return trace + [str(e)]
    s = tx.sfpu
    spans = recorded_spans(tx)[0] if timed else None
    return trace + [(tx.dst.rows32.tolist(), s.lreg.tolist(), s.lane_flags.tolist(), spans)]


@pytest.mark.parametrize("seed", range(6))
def test_random_programs_identical(seed, monkeypatch):
    a = _run(seed, False, True, monkeypatch)
    assert a == _run(seed, False, False, monkeypatch)
    assert not isinstance(a[-1], str)


@pytest.mark.parametrize("seed", range(3))
def test_random_programs_same_strict_error(seed, monkeypatch):
    """Strict: the first undefined use (a SEMGET at Value 0, a SEMPOST past Max, ...) raises the same error after
    the same state."""
    a = _run(seed, True, True, monkeypatch)
    assert a == _run(seed, True, False, monkeypatch)
    assert isinstance(a[-1], str)


@needs_plain_c
@pytest.mark.parametrize("seed,strict", [(6, False), (7, False), (0, True), (7, True)])
def test_plain_words_in_c_identical(seed, strict, monkeypatch):
    """The C issue of the words direct issue takes (pushed: plain_run, drained from the FIFO or retried after a
    block: drain_run) against the Python path, state by state (strict: the same error after the same states), and
    both really take words."""
    taken = {"push": 0, "drain": 0}
    loaders = {"push": sfpu_issue_native.plain_run, "drain": sfpu_issue_native.drain_run}

    def counted(path):
        def load():
            run = loaders[path]()

            def run_counted(*args):
                r = run(*args)
                taken[path] += r[0] - args[2] if path == "push" else r[0]
                return r
            return run_counted if run is not None else None
        return load
    for path in taken:
        monkeypatch.setattr(sfpu_issue_native, f"{path.replace('push', 'plain')}_run", counted(path))
    a = _run(seed, strict, True, monkeypatch, plain_c=True, timed=False, wait_share=0.2)
    assert taken["push"] > (5 if strict else 100) and (strict or taken["drain"] > 20)
    assert a == _run(seed, strict, True, monkeypatch, plain_c=False, timed=False, wait_share=0.2)
    assert isinstance(a[-1], str) == strict


@needs_plain_c
@pytest.mark.parametrize("seed,strict", [(6, False), (9, False), (7, True)])
def test_plain_rows_identical(seed, strict, monkeypatch):
    """The C issue's reads and writes of the cycle model's rows in its C state (TT_EMU_PLAIN_ROWS_NATIVE: the FIFO's
    accept and take, the issue rule's clock, front end, Wait Gate, first issue, stalls, issued and instruction counts)
    against the same C issue through the rows' views, and both against the Python path, state by state."""
    runs = []
    for rows in (True, False):
        monkeypatch.setattr(sfpu_issue_native, "PLAIN_ROWS_NATIVE", rows)
        runs.append(_run(seed, strict, True, monkeypatch, plain_c=True, timed=False, wait_share=0.2))
    assert runs[0] == runs[1] == _run(seed, strict, True, monkeypatch, plain_c=False, timed=False, wait_share=0.2)
    assert isinstance(runs[0][-1], str) == strict


def _pushed_behind_trace(monkeypatch, plain_c: bool, rows: bool) -> list:
    """Runs pushed at earlier cycles than the thread's clock: its FIFO's last departures are later than the pushes, so
    that a full FIFO holds each push until its oldest word left (TensixTiming.accept); the state after every push."""
    monkeypatch.setattr(sfpu_issue_native, "PLAIN_ISSUE_NATIVE", plain_c)
    monkeypatch.setattr(sfpu_issue_native, "PLAIN_ROWS_NATIVE", rows)
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
    words = tuple(E("SETDMAREG", reg_index_16b=i, payload=i + 1) for i in range(2 * frontend.FIFO_DEPTH))
    return [_snapshot(tx, tx.push_many(th, words, t)) for th, t in ((0, 1000), (0, 0), (2, 50), (2, 40), (0, 990))]


@needs_plain_c
def test_plain_rows_fifo_hold_identical(monkeypatch):
    """The C state's rows under the FIFO's hold of pushes behind the thread's clock: the same states as through the
    views and as the Python path, and the hold really happened (a push accepted later than it was pushed)."""
    a = _pushed_behind_trace(monkeypatch, True, True)
    assert a == _pushed_behind_trace(monkeypatch, True, False) == _pushed_behind_trace(monkeypatch, False, True)
    assert a[1][0] > 1000          # (the run pushed from cycle 0 was held behind the one pushed at 1000)


@needs_plain_c
def test_plain_words_in_c_error_mid_run(monkeypatch):
    """A handler raising inside a run the C part issues: the words before it took full effect, push_many's
    pm_done / pm_t name it, and the state is the Python path's."""
    words = (E("SEMINIT", sem_sel=1, init_value=0, max_value=1), E("SETDMAREG", reg_index_16b=3, payload=7),
             E("SEMPOST", sem_sel=1), E("SEMPOST", sem_sel=1), E("NOP"))
    states, calls, plain_run = [], [], sfpu_issue_native.plain_run

    def counting():           # the C run, counted: the switched-on pass must really go through it
        run = plain_run()
        return None if run is None else lambda *a: (calls.append(1), run(*a))[1]
    monkeypatch.setattr(sfpu_issue_native, "plain_run", counting)
    for on in (True, False):
        monkeypatch.setattr(sfpu_issue_native, "PLAIN_ISSUE_NATIVE", on)
        calls.clear()
        tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
        with pytest.raises(EmuError, match="SEMPOST on semaphore 0"):
            tx.push_many(1, words, 5)
        states.append((tx.pm_done, tx.pm_t, _snapshot(tx, None)))
        assert bool(calls) == on
    assert states[0] == states[1] and states[0][0] == 3


def _plain_run_c_callable(taken: list):
    """plain_run's C entry (the capsule PLAIN_RUN_C_CAPSULE, which rv32_native.c calls) made callable as plain_run is
    (direct_issue.py push_run's call): (next j, next push time), or the error with progress naming the word that raised;
    each call's words taken counted into `taken`."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    ll = ctypes.POINTER(ctypes.c_longlong)
    entry = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.py_object, ctypes.py_object, ctypes.py_object,
                              ll, ll)(get(sfpu_issue_native._part("PLAIN_RUN_C_CAPSULE"), b"sfpu_issue.plain_run_c"))

    def run(tx, words, j, t, thread, facts, progress, recording):
        assert recording == (tx.mm_record is not None)      # (the C entry reads it from tx itself)
        jj, tt = ctypes.c_longlong(j), ctypes.c_longlong(t)
        try:
            entry(tx, words, thread, facts, ctypes.byref(jj), ctypes.byref(tt))
        except BaseException:
            progress[0], progress[1] = jj.value, tt.value
            raise
        taken.append(jj.value - j)
        return jj.value, tt.value
    return run


@needs_plain_c
@pytest.mark.parametrize("seed,strict", [(6, False), (8, False), (0, True), (7, True)])
def test_plain_run_c_entry_identical(seed, strict, monkeypatch):
    """plain_run's C entry (what rv32_native.c calls for a TRISC's runs: TT_EMU_PLAIN_ENTRY_NATIVE) in push_run's
    place against the Python path, state by state (strict: the same error after the same states, the word that
    raised named by pm_done / pm_t), and it really takes words."""
    taken = []
    monkeypatch.setattr(sfpu_issue_native, "plain_run", lambda: _plain_run_c_callable(taken))
    a = _run(seed, strict, True, monkeypatch, plain_c=True, timed=False, wait_share=0.2)
    assert sum(taken) > (5 if strict else 100)
    assert a == _run(seed, strict, True, monkeypatch, plain_c=False, timed=False, wait_share=0.2)
    assert isinstance(a[-1], str) == strict


@needs_plain_c
@pytest.mark.parametrize("entry", ["python", "c"])
def test_plain_run_reads_replaced_queues(entry, monkeypatch):
    """plain_run reads a thread's queues from their slots at each call: queues replaced between two pushes (a word
    waiting in a new FIFO, then a new empty one) are the ones it sees (a word pushed behind a queued one goes through
    the FIFO and the drain, one pushed to an empty frontend issues directly), the state the Python path's."""
    taken = []
    if entry == "c":
        monkeypatch.setattr(sfpu_issue_native, "plain_run", lambda: _plain_run_c_callable(taken))
    words = (E("SETDMAREG", reg_index_16b=3, payload=7), E("NOP"), E("SEMINIT", sem_sel=1, init_value=0, max_value=2))
    states = []
    for on in (True, False):
        monkeypatch.setattr(sfpu_issue_native, "PLAIN_ISSUE_NATIVE", on)
        tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
        tx.push_many(0, words, 0)
        th = tx.threads[0]
        th.fifo, th.fifo_t = deque([E("SETDMAREG", reg_index_16b=5, payload=9)]), deque([10])
        trace = [_snapshot(tx, tx.push_many(0, words, 10))]
        th.fifo, th.fifo_t, th.ready, th.mop_out = deque(), deque(), deque(), deque()
        trace.append(_snapshot(tx, tx.push_many(0, words, 40)))
        states.append(trace)
    assert states[0] == states[1]
    first, second = states[0]
    assert first[1][0][9][2] == 9 << 16 and first[8] == [7, 0, 0]      # (the new FIFO's SETDMAREG issued, then ours)
    assert second[8] == [10, 0, 0]
    assert entry == "python" or sum(taken) >= 2 * len(words)


@needs_plain_c
@pytest.mark.parametrize("seed", [3, 4])
def test_expanded_words_issue_in_c(seed, monkeypatch):
    """The words the MOP and REPLAY expanders emit that the C part takes (those with facts) are issued by drain_run,
    the first word of an expansion too (never by the drain's Python loop, Tensix._drain -> issue_head), and the state
    is the Python path's."""
    in_python = []
    issue_head = Tensix.issue_head

    def counted(self, t, th, w, *a):
        if self._plain.get(w) is not None and sys._getframe(1).f_code is Tensix._drain.__code__:
            in_python.append(w)
        return issue_head(self, t, th, w, *a)
    monkeypatch.setattr(Tensix, "issue_head", counted)
    program = [w for _, words, _ in _program(seed) for w in words]
    assert any(w >> 24 == isa.INSTRUCTIONS["MOP"].opcode for w in program)
    assert any(w >> 24 == isa.INSTRUCTIONS["REPLAY"].opcode for w in program)
    a = _run(seed, False, True, monkeypatch, plain_c=True, timed=False)
    assert not in_python
    assert a == _run(seed, False, True, monkeypatch, plain_c=False, timed=False)


def _repeated_runs_trace(seed: int, memo: bool, monkeypatch) -> tuple[list, int]:
    """A few fixed tuples of words (one longer than the run memo's RUN_MEMO_WORDS) pushed again and again to random
    threads, the words' facts changed between some pushes (two words' records swapped, so that a stale record would
    issue the other word; a word's taken away, then given back): the state after every push, and the words whose facts
    plain_run's run memo answered (sfpu_issue_native.PLAIN_MEMO_NATIVE `memo`)."""
    monkeypatch.setattr(sfpu_issue_native, "PLAIN_MEMO_NATIVE", memo)
    hits = lambda: sfpu_issue_native._load()[0].plain_memo_hits()[0]     # noqa: E731
    before = hits()
    rng = random.Random(seed)
    runs = [tuple(_plain(rng, 0.02) for _ in range(n)) for n in (1, 3, 8, 40)]
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=False)
    clock, trace = [0, 0, 0], []
    for step in range(300):
        thread, words = rng.randrange(3), rng.choice(runs)
        facts = tx._plain
        if step % 7 == 3 and len(facts) > 1:
            a, b = rng.sample(sorted(facts), 2)
            facts[a], facts[b] = facts[b], facts[a]
        elif step % 11 == 5 and facts:
            facts.pop(rng.choice(sorted(facts)))         # (push_run records it again where a run starts with it)
        try:
            ret = clock[thread] = tx.push_many(thread, words, clock[thread] + rng.randrange(3))
        except Stall:
            ret = ("stall", tx.step())
        trace.append(_snapshot(tx, ret))
        for _ in range(rng.randrange(4)):                # (blocked words retried: the threads' frontends empty)
            trace.append(("step", tx.step()))
    return trace, hits() - before


@needs_plain_c
@pytest.mark.parametrize("seed", [0, 1, 3])
def test_facts_memo_identical(seed, monkeypatch):
    """plain_run's memo of a run's facts by its tuple (TT_EMU_PLAIN_MEMO_NATIVE) against the facts dict looked up for
    each word: the same state push by push where the same tuples come again and their words' facts change between
    pushes; the memo answers only where it is on."""
    on, answered = _repeated_runs_trace(seed, True, monkeypatch)
    off, none = _repeated_runs_trace(seed, False, monkeypatch)
    assert on == off and answered > 200 and none == 0, (answered, none)


def _rebound_trace(memo: bool, monkeypatch) -> tuple[list, int]:
    """The same run given to plain_run again and again (as rv32_native.c does: no Python between the calls) while the
    Tensix's attributes plain_run reads are rebound between some calls (the instruction counts to a list, the threads
    to a new list of the same threads; the cycle model's lists are bound once, TensixTiming.FIXED): the state after
    every call, and the calls whose reads plain_run's Tensix memo answered (sfpu_issue_native.PLAIN_MEMO_NATIVE
    `memo`)."""
    monkeypatch.setattr(sfpu_issue_native, "PLAIN_MEMO_NATIVE", memo)
    hits = lambda: sfpu_issue_native._load()[0].plain_memo_hits()[1]     # noqa: E731
    before = hits()
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
    words = (E("SETDMAREG", reg_index_16b=3, payload=7), E("NOP"), E("SEMINIT", sem_sel=1, init_value=0, max_value=2))
    rebind = [lambda: setattr(tx, "instructions", list(tx.instructions)),
              lambda: setattr(tx, "threads", list(tx.threads)), lambda: setattr(tx, "instructions", [100, 200, 300])]
    run, facts, progress = sfpu_issue_native.plain_run(), tx._plain, [0, 0]
    facts.update((w, tx._plain_facts(w)) for w in words)
    t, trace = 0, []
    for k in range(14):
        if k % 4 == 3:
            rebind[k // 4]()
        j, t = run(tx, words, 0, t + 3, k % 2, facts, progress, False)
        trace.append(_snapshot(tx, (j, t)))
    return trace, hits() - before


@needs_plain_c
def test_plain_memo_follows_rebound_attributes(monkeypatch):
    """plain_run's memo of the Tensix's reads (its cycle model, threads, instruction counts and the model's lists, by
    the instance dicts' version tags) against the reads made at each call: the same state where those attributes are
    rebound between pushes (the rebound lists are the ones counted), and it answers only where it is on."""
    on, answered = _rebound_trace(True, monkeypatch)
    off, none = _rebound_trace(False, monkeypatch)
    assert on == off and answered > 6 and none == 0, (answered, none)
    assert on[-1][8] == [100 + 3, 200 + 2 * 3, 300]      # (counted in the list bound last, by the 3 runs after it)


@needs_plain_c
@pytest.mark.parametrize("memo", [True, False])
def test_plain_run_c_reads_the_recording(memo, monkeypatch):
    """plain_run's C entry reads tx.mm_record (through its Tensix memo where PLAIN_MEMO_NATIVE is on): while an MVMUL
    run records, a NOP is left to the Python path, also on the calls after the first (the memo's hits), and taken again
    once the recording ends."""
    monkeypatch.setattr(sfpu_issue_native, "PLAIN_MEMO_NATIVE", memo)
    taken = []
    run = _plain_run_c_callable(taken)
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
    words = (E("NOP"),)
    tx._plain.update((w, tx._plain_facts(w)) for w in words)
    t, mvmuls = 0, []
    for recording in (None, mvmuls, mvmuls, mvmuls, None, None):
        if tx.mm_record is not recording:          # (set only when it changes: the calls between find tx as it was)
            tx.mm_record = recording
        t = run(tx, words, 0, t + 3, 0, tx._plain, [0, 0], recording is not None)[1]
    assert taken == [1, 0, 0, 0, 1, 1]
    assert not memo or sfpu_issue_native._load()[0].plain_memo_hits()[1] > 0


def test_direct_path_is_taken(monkeypatch):
    """The random programs really exercise the direct path: most words never reach the reference push."""
    reference = {"n": 0}
    push = FrontendMixin.push

    def counted(self, *a):
        reference["n"] += 1
        return push(self, *a)
    monkeypatch.setattr(FrontendMixin, "push", counted)
    _run(1, False, True, monkeypatch)
    pushed = sum(len(words) for _, words, _ in _program(1))
    assert reference["n"] < pushed // 2


def _same_kernel_runs(plan, arrays, monkeypatch, module, switch: str) -> None:
    """The kernel launched twice on a fresh device with module.switch on and off: same bytes, same stats."""
    elfs = compile_kernel(*split(plan.render()), plan.name)
    runs = {}
    for on in (True, False):
        monkeypatch.setattr(module, switch, on)
        dev = EmuDevice()
        out = [launch_plan(dev, plan, arrays, elfs)[0] for _ in range(2)]      # a warm device relaunched too
        runs[on] = (out, dev.stats())
    assert runs[True] == runs[False]


SWITCHES = [(direct_issue, "DIRECT_ISSUE"), (tensix, "RETRY_ON_BANK_CHANGE"),
            (sfpu_issue_native, "PLAIN_ISSUE_NATIVE"), (tile_native, "HANDLERS_NATIVE"),
            (sfpu_issue_native, "PLAIN_ENTRY_NATIVE"), (sfpu_issue_native, "PLAIN_MEMO_NATIVE"),
            (sfpu_issue_native, "PLAIN_ROWS_NATIVE")]


@pytest.mark.needs_cc
@pytest.mark.parametrize("module,switch", SWITCHES)
def test_elementwise_kernel_identical(module, switch, monkeypatch):
    plan = elementwise_plan(72)
    _same_kernel_runs(plan, elementwise_inputs(plan, np.random.default_rng(72)), monkeypatch, module, switch)


@pytest.mark.needs_cc
@pytest.mark.parametrize("module,switch", SWITCHES)
def test_matmul_grid_identical(module, switch, monkeypatch):
    """bf16 64^3 on a 2x2 grid: MVMUL runs, Src bank waits, semaphores between cores."""
    plan = matmul_plan(64, "HiFi2")
    plan.use_cores(4)
    _same_kernel_runs(plan, matmul_arrays(plan), monkeypatch, module, switch)


def _bank_wait_setup():
    """A Tensix whose FPU sees BF16 Src data into a 32-bit Dst, an MVMUL that hands both banks back (clear_dvalid), and
    the UNPACR_NOP (by unpacker) that hands one bank over."""
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=False)
    tx.cfg[72] = tx.cfg[120] = 5                          # the unpackers' formats (BF16) the FPU sees
    tx.cfg[1] |= 1 << 29                                  # a 32-bit Dst
    mvmul = E("MVMUL", dst=0, addr_mode=0, instr_mod19=0, clear_dvalid=3)
    nop = lambda sel: E("UNPACR_NOP", unpack_pop=1, set_dvalid=1, stall_clr_cntrl=1, unpacker_select=sel)
    return tx, mvmul, nop


def _bank_wait_trace(on: bool, monkeypatch) -> list:
    """MVMULs on T1 waiting for SrcA and SrcB, which T0's UNPACR_NOPs hand over one bank at a time (and the MVMULs'
    clear_dvalid hands back): the state after every push and step."""
    monkeypatch.setattr(tensix, "RETRY_ON_BANK_CHANGE", on)
    tx, mvmul, nop = _bank_wait_setup()
    trace = []
    try:
        for thread, word in [(1, mvmul), (1, mvmul), (0, nop(0)), (0, nop(1)), (0, nop(0)), (0, nop(1))]:
            trace.append(_snapshot(tx, tx.push(thread, word)))
            trace.append(("step", tx.step(), _snapshot(tx, None)))
    except EmuError as e:
        trace.append(str(e))
    return trace + [tx.dst.rows32[:8].tolist()]


def test_bank_wait_retried_when_banks_change(monkeypatch):
    """A blocked MVMUL is retried as soon as one Src bank changes (here first SrcA alone, then SrcB): the same states
    as retrying at every drain, and both MVMULs ran."""
    a = _bank_wait_trace(True, monkeypatch)
    assert a == _bank_wait_trace(False, monkeypatch)
    assert a[-2][2][8][1] == 2                            # T1 executed both MVMULs


def _busy_bank_wait_trace(retry: bool, plain_c: bool, monkeypatch) -> tuple[list, int]:
    """MVMULs on T1 blocked on SrcA and SrcB with words pushed behind them (push_many into a busy thread: the FIFO and
    the drain, plain_run's or push()'s) while T0's UNPACR_NOPs hand the banks over one at a time: the state after every
    push, and how often Python's src_bank_state ran (plain_run answers drain's bank test for an unchanged wait)."""
    monkeypatch.setattr(tensix, "RETRY_ON_BANK_CHANGE", retry)
    monkeypatch.setattr(sfpu_issue_native, "PLAIN_ISSUE_NATIVE", plain_c)
    calls, bank_state = [0], Tensix.src_bank_state

    def counted(self):
        calls[0] += 1
        return bank_state(self)
    monkeypatch.setattr(Tensix, "src_bank_state", counted)
    tx, mvmul, nop = _bank_wait_setup()
    behind = lambda k: E("SETDMAREG", reg_index_16b=k, set_signals_mode=0, payload=k + 1)
    program = [(1, mvmul), (1, behind(0)), (1, behind(1)), (0, nop(0)), (1, behind(2)), (1, behind(3)), (0, nop(1)),
               (1, behind(4)), (1, mvmul), (1, behind(5)), (1, behind(6)), (0, nop(1)), (1, behind(7)), (0, nop(0)),
               (1, behind(8)), (1, behind(9))]
    trace, t = [], 0
    for thread, word in program:
        t = tx.push_many(thread, (word,), t)
        trace.append((_snapshot(tx, t), bank_state(tx)))
    return trace + [tx.dst.rows32[:8].tolist()], calls[0]


@needs_plain_c
def test_bank_wait_answered_in_c(monkeypatch):
    """plain_run's own test of a thread blocked on unchanged Src banks (Tensix.drain's first test) gives the states
    of push() and Tensix.drain: it retries once a bank changed (both MVMULs ran, each after its second bank), skips
    Python's test while none did, and with RETRY_ON_BANK_CHANGE off leaves every push's drain to Python."""
    ref_on, n_ref_on = _busy_bank_wait_trace(True, False, monkeypatch)
    c_on, n_c_on = _busy_bank_wait_trace(True, True, monkeypatch)
    ref_off, n_ref_off = _busy_bank_wait_trace(False, False, monkeypatch)
    c_off, n_c_off = _busy_bank_wait_trace(False, True, monkeypatch)
    assert c_on == ref_on == ref_off == c_off
    assert [step[0][8][1] for step in ref_on[:-1]] == [0] * 7 + [6] * 7 + [11, 12]        # (T1's words executed)
    assert n_c_on < n_ref_on and n_c_off == n_ref_off


@pytest.mark.needs_cc
def test_bank_waits_are_skipped(monkeypatch):
    """In a matmul, retries of an instruction blocked on a Src bank that find the banks unchanged are skipped: fewer
    handler calls than with every retry run (how many fewer depends on the plan's B layout: 20-40 % at 64^3)."""
    plan = matmul_plan(64, "HiFi2")
    elfs = compile_kernel(*split(plan.render()), plan.name)
    calls = {}
    banks_ready = Tensix._banks_ready
    monkeypatch.setattr(tile_native, "HANDLERS_NATIVE", False)       # (the handlers' calls, counted, in Python)
    for on in (True, False):
        monkeypatch.setattr(tensix, "RETRY_ON_BANK_CHANGE", on)
        calls[on] = 0

        def counted(self, what, on=on):
            calls[on] += 1
            return banks_ready(self, what)
        monkeypatch.setattr(Tensix, "_banks_ready", counted)
        launch_plan(EmuDevice(), plan, matmul_arrays(plan), elfs)
    assert calls[True] < calls[False]


_NEXT_INSTRUCTION = FrontendMixin.next_instruction      # (each counting wrapper wraps this one, not the last one)


def _fifo_head_replays(monkeypatch) -> dict:
    """What Python's next_instruction finds at a thread's FIFO head with nothing expanded before it and no load under
    way: the REPLAY words that play back ("playback", in order), the number that start a load ("load")."""
    seen = {"playback": [], "load": 0}
    next_instruction = _NEXT_INSTRUCTION
    op = isa.INSTRUCTIONS["REPLAY"].opcode

    def counted(self, th):
        if not th.ready and not th.mop_out and th.fifo and th.replay_load is None and th.fifo[0] >> 24 == op:
            if isa.INSTRUCTIONS["REPLAY"].decode(th.fifo[0])["load_mode"]:
                seen["load"] += 1
            else:
                seen["playback"].append(th.fifo[0])
        return next_instruction(self, th)
    monkeypatch.setattr(FrontendMixin, "next_instruction", counted)
    return seen


@needs_plain_c
@pytest.mark.parametrize("seed", [2, 5])
def test_fifo_replays_expand_in_c(seed, monkeypatch):
    """A REPLAY that plays back from the FIFO's head is expanded by drain_run (its words then issued there too), not
    by Python's next_instruction (except a word's first time: it fills frontend's field cache, which drain_run
    reads); a REPLAY load there is left to Python (declined); the states are the Python path's."""
    frontend._REPLAY_FIELDS.clear()
    seen = _fifo_head_replays(monkeypatch)
    a = _run(seed, False, True, monkeypatch, plain_c=True, timed=False)
    in_c = dict(seen)
    seen.update(playback=[], load=0)
    assert a == _run(seed, False, True, monkeypatch, plain_c=False, timed=False)
    assert len(in_c["playback"]) == len(set(in_c["playback"])) and in_c["load"] > 0
    assert len(seen["playback"]) > 2 * len(in_c["playback"])


def _replay_behind_trace(plain_c: bool, monkeypatch) -> tuple[list, dict]:
    """T1: a REPLAY load of two words, an MVMUL blocked on the Src banks, then pushed behind it (into the FIFO) a
    playback of the two words, another word and a playback with a reserved bit set; T0's UNPACR_NOPs hand the banks
    over, then a step. Strict: the state after every push, then the error; and what Python's next_instruction
    found."""
    monkeypatch.setattr(sfpu_issue_native, "PLAIN_ISSUE_NATIVE", plain_c)
    seen = _fifo_head_replays(monkeypatch)
    tx, mvmul, nop = _bank_wait_setup()
    tx.strict = True
    dma = lambda k: E("SETDMAREG", reg_index_16b=k, set_signals_mode=0, payload=k + 1)
    replay = lambda load, n: E("REPLAY", load_mode=load, execute_while_loading=0, len=n, start_idx=3)
    program = [(1, replay(1, 2)), (1, dma(1)), (1, dma(2)), (1, mvmul), (1, replay(0, 2)), (1, dma(3)),
               (1, replay(0, 2) | 1 << 2), (0, nop(0)), (0, nop(1))]
    trace, t = [], 0
    try:
        for thread, word in program:
            t = tx.push_many(thread, (word,), t)
            trace.append(_snapshot(tx, t))
        tx.step()
    except EmuError as e:
        trace.append(str(e))
    return trace, seen


@needs_plain_c
def test_fifo_replay_declined_where_python_raises(monkeypatch):
    """drain_run expands a valid playback behind a blocked word and leaves to Python one with reserved bits (strict:
    Python raises) and one whose fields frontend has not cached yet: the same states and error as the Python path."""
    frontend._REPLAY_FIELDS.clear()                   # (the valid playback's first time: Python fills the cache)
    c, seen_c = _replay_behind_trace(True, monkeypatch)
    c2, seen_c2 = _replay_behind_trace(True, monkeypatch)
    ref, seen_ref = _replay_behind_trace(False, monkeypatch)
    assert c == c2 == ref and "reserved bits" in c[-1]
    valid = E("REPLAY", load_mode=0, execute_while_loading=0, len=2, start_idx=3)
    assert seen_ref["playback"] == seen_c["playback"] == [valid, valid | 1 << 2]    # (C's first run: a cache miss)
    assert seen_c2["playback"] == [valid | 1 << 2]


def _launches_and_drains(plan, arrays, elfs, monkeypatch, spy: bool) -> tuple:
    """The kernel launched twice on a fresh device (bytes, stats) and how often Tensix.drain's Python code ran; with
    `spy`, Tensix.drain wrapped (a replaced drain: step_run and plain_run then call it, as the Python path does)."""
    code, calls = Tensix.drain.__code__, [0]
    if spy:
        drain = Tensix.drain
        monkeypatch.setattr(Tensix, "drain", lambda self, t: drain(self, t))

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is code:
            calls[0] += 1
    dev = EmuDevice()
    sys.setprofile(profile)
    try:
        out = [launch_plan(dev, plan, arrays, elfs)[0] for _ in range(2)]
    finally:
        sys.setprofile(None)
    return (out, dev.stats()), calls[0]


@needs_plain_c
@pytest.mark.needs_cc
@pytest.mark.parametrize("tile_c", [True, False])
def test_drain_in_c_identical(tile_c, monkeypatch):
    """step_run's and plain_run's drains in C (cdrain_run: the MVMUL recording, drain_run, Tensix._drain for what it
    leaves) give the bytes and stats of Tensix.drain, which they call instead where it is replaced (declined); with
    tile_native off, MVMULs record under the C drain's recording and run at its flush."""
    monkeypatch.setattr(tile_native, "NATIVE", tile_c)
    plan = matmul_plan(64, "HiFi2")
    plan.use_cores(4)
    arrays, elfs = matmul_arrays(plan), compile_kernel(*split(plan.render()), plan.name)
    in_c, n_c = _launches_and_drains(plan, arrays, elfs, monkeypatch, spy=False)
    in_python, n_python = _launches_and_drains(plan, arrays, elfs, monkeypatch, spy=True)
    assert in_c == in_python
    assert n_c < n_python // 2
