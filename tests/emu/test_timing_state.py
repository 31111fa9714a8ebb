"""The cycle model's state held in C (runtime/emu/accel/timing_state.c: TensixTiming's clock, fe, gate, after_mop,
first, stalls, issued, taken, unpack_busy and work_done, its event_t, fpu_busy, pack_busy and nop_t, the Tensix's
instruction counts, SfpuTiming's mad_cycle .. busy_until) against the Python lists, deques, ints and __slots__ it
replaces (TT_EMU_TIMING_NATIVE=0): the views and members answer as the lists and attributes do, and random programs,
the bench's rows and the decline cases leave the same cycles, Dst bits, cycle-model and thread state."""
from __future__ import annotations

import gc
import random
import weakref
from collections import deque

import numpy as np
import pytest

from tt_backend.chip import isa, layout
from tt_backend.runtime.emu import bench, cycles
from tt_backend.runtime.emu.accel import sfpu_issue_native
from tt_backend.runtime.emu.tensix import Tensix
from tests.emu import test_direct_issue as direct_tests
from tests.emu import test_sfpu_issue_native as issue_tests

pytestmark = pytest.mark.skipif(sfpu_issue_native._load()[0] is None, reason=sfpu_issue_native.status())


@pytest.fixture(autouse=True)
def _state_in_c(monkeypatch):
    """(each test asks for the C state or the lists itself; the C part's own tests run with the C state)"""
    monkeypatch.setattr(sfpu_issue_native, "TIMING_NATIVE", True)


RING = 7          # timing_rows(): the rows, taken (the rings) at 7
SCALARS = ("event_t", "fpu_busy", "pack_busy", "nop_t")


def _lists(depth: int) -> tuple:
    return ([0, 0, 0], [0, 0, 0], [(0, 0), (0, 0), (0, 0)], [False, False, False], [None, None, None], [0, 0, 0],
            [0, 0, 0], [deque(maxlen=depth) for _ in range(3)], [0, 0], [0, 0, 0], [0, 0, 0])


def _item(rng: random.Random, k: int):
    if k == 2:
        return (rng.randrange(-1, 0x200), rng.randrange(1 << 40))
    if k == 3:
        return rng.random() < 0.5
    if k == 4 and rng.random() < 0.3:
        return None
    return rng.randrange(-20, 1 << 40)


def test_views_answer_as_lists():
    """Random item writes, ring appends and reads: every view equals, reads, iterates and prints as its list."""
    rng = random.Random(5)
    depth = 5
    views, lists = sfpu_issue_native.timing_rows(depth), _lists(depth)
    assert len(views) == len(lists)
    for _ in range(3000):
        k = rng.randrange(len(lists))
        t = rng.randrange(len(lists[k]))
        if k == RING:
            v = rng.randrange(1 << 50)
            views[k][t].append(v)
            lists[k][t].append(v)
        else:
            v = _item(rng, k)
            views[k][t] = v
            lists[k][t] = v
        for view, lst in zip(views[:RING] + views[RING + 1:], lists[:RING] + lists[RING + 1:]):
            n = len(lst)
            assert view == lst and list(view) == lst and repr(view) == repr(lst) and len(view) == n
            assert [view[i] for i in range(-n, n)] == [lst[i] for i in range(-n, n)]
            assert [type(x) for x in view] == [type(x) for x in lst]
        for ring, q in zip(views[RING], lists[RING]):
            assert list(ring) == list(q) and len(ring) == len(q) and bool(ring) == bool(q)
            assert ring.maxlen == q.maxlen and (not q or (ring[0], ring[-1]) == (q[0], q[-1]))
    with pytest.raises(IndexError):
        views[0][3]
    with pytest.raises(IndexError):
        views[8][2]                       # (unpack_busy: one entry per unpacker)
    with pytest.raises(IndexError):
        sfpu_issue_native.timing_rows(depth)[7][0][0]
    with pytest.raises(TypeError):
        views[0][0] = "1"
    with pytest.raises(TypeError):
        views[2][0] = (1, 2, 3)


def test_sfpu_timing_members_answer_as_slots():
    """SfpuTiming's state as C members reads back what was written, as its __slots__ class does."""
    native, ref = sfpu_issue_native.sfpu_timing_class()(True), cycles.SfpuTiming(True)
    fields = ("mad_cycle", "mad_writes", "mad_macro", "nop_only_cycle", "busy_until")
    assert [getattr(native, f) for f in fields] == [getattr(ref, f) for f in fields]
    for st in (native, ref):
        st.mad_cycle, st.mad_writes, st.mad_macro, st.nop_only_cycle, st.busy_until = 7, 0x1FFFF, True, -10, 1 << 40
    assert [getattr(native, f) for f in fields] == [getattr(ref, f) for f in fields]
    assert isinstance(native, cycles.SfpuTimingRules) and native.strict and native.where() == "SFPU"


def test_cycle_model_in_c_answers_as_python(monkeypatch):
    """The cycle model with its state in C: its ints are ints that read back what was written, its rows lists of the
    lengths the Python model's have, the Tensix's instruction counts and issue_t the model's; a dropped Tensix is
    collected (the views hold the model they belong to: a cycle the collector follows)."""
    models = {}
    for native in (True, False):
        _with_state(native, monkeypatch)
        tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8))
        tm = models[native] = tx.tm
        assert isinstance(tm, cycles.TensixTiming) and (type(tm) is cycles.TensixTiming) != native
        for k, name in enumerate(SCALARS):
            setattr(tm, name, (k + 3) << 36)
        tm.unpack_busy[1], tm.work_done[2] = 7, 9
        tx.instructions[1] += 5
        tx.issue_t = 1 << 40
        assert tx.instructions is tm.executed and list(tx.instructions) == [0, 5, 0]
        assert tm.issue_t == tx.issue_t == 1 << 40 and type(tx.issue_t) is int
    got = [[(getattr(tm, name), type(getattr(tm, name))) for name in SCALARS]
           + [list(tm.unpack_busy), list(tm.work_done), tm.stats()] for tm in (models[True], models[False])]
    assert got[0] == got[1]
    _with_state(True, monkeypatch)
    with pytest.raises(TypeError):
        models[True].event_t = "1"
    dropped = Tensix(np.zeros(layout.L1_SIZE, np.uint8))
    dropped.push_many(1, (isa.encode("SETDMAREG", reg_index_16b=0, set_signals_mode=0, payload=1),
                          isa.encode("STALLWAIT", wait_res=0x10, stall_res=0x1FF)), 0)
    dropped.step()                      # (it issued: nothing the C issue keeps between calls may hold it)
    assert dropped.instructions[1] == 2
    alive = weakref.ref(dropped.tm)
    del dropped
    gc.collect()
    assert alive() is None


def _with_state(native: bool, monkeypatch) -> None:
    monkeypatch.setattr(sfpu_issue_native, "TIMING_NATIVE", native)


def _kinds(tx: Tensix) -> tuple:
    return type(tx.tm.clock).__name__, type(tx.tm.sfpu).__mro__[1].__name__


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_random_programs_identical(seed, strict, monkeypatch):
    """test_sfpu_issue_native's random programs (snapshots of the frontend, the cycle model, the Vector Unit timing,
    the deferred queue and Dst after every push; errors) with the state in C (the C issue taking the words) and in
    Python lists (the Python path taking them)."""
    runs = {}
    for native in (True, False):
        _with_state(native, monkeypatch)
        assert _kinds(Tensix(np.zeros(layout.L1_SIZE, np.uint8))) == (
            ("TimingRow", "SfpuTimingState") if native else ("list", "SfpuTimingRules"))
        runs[native] = issue_tests._run(seed, strict, True, monkeypatch)
    assert runs[True][0] == runs[False][0]
    assert runs[True][1][0] > 0 and runs[False][1][0] == 0         # (words the C issue took)


@pytest.mark.parametrize("case", ["bias", "fpu_write", "ctocr_clear"])
def test_decline_cases_identical(case, monkeypatch):
    """The words the C issue leaves to Python (an address modifier that raises, a too-early load of FPU-written rows):
    the same traces and state with the state in C and in Python lists."""
    traces = {}
    for native in (True, False):
        _with_state(native, monkeypatch)
        traces[native] = issue_tests._scripted(case, True, monkeypatch)
    assert traces[True] == traces[False]


def _row_state(row: str, native: bool, monkeypatch) -> tuple:
    """A bench emu row on a small size with the state in C or in lists: its result (cycles, checksum) and the cycle
    model's state after it."""
    _with_state(native, monkeypatch)
    made = []
    monkeypatch.setattr(bench, "_recording", lambda emu: made.append(emu) or emu)
    size = {"sfpu_long": 1, "tile_long": 1, "sfpu": 256, "sfpu_mop": 8, "tile": 4}[row]
    r = getattr(bench, "bench_" + row)(size)
    tx = made[0] if isinstance(made[0], Tensix) else made[0].tensix
    tm, st = tx.tm, tx.tm.sfpu
    threads = [(th.latch is None, th.blocked, th.bank_wait, th.replay_load, th.batch_skip) for th in tx.threads]
    return ({k: v for k, v in r.items() if k not in bench.TIMES}, tm.stats(),
            [getattr(tm, name) for name in SCALARS], list(tx.instructions), tx.issue_t, threads,
            [list(x) for x in (tm.clock, tm.fe, tm.gate, tm.after_mop, tm.first, tm.stalls, tm.issued, tm.unpack_busy,
                               tm.work_done)],
            [list(q) for q in tm.taken], (st.mad_cycle, st.mad_writes, st.mad_macro, st.nop_only_cycle, st.busy_until),
            tx.dst.rows32.tobytes())


@pytest.mark.parametrize("row", ["sfpu_long", "tile_long", "sfpu", "sfpu_mop", "tile"])
def test_bench_rows_identical(row, monkeypatch):
    """The bench's rows: the same cycles, checksums, Dst bits and cycle-model state with the state in C and in
    Python lists."""
    assert _row_state(row, True, monkeypatch) == _row_state(row, False, monkeypatch)


@pytest.mark.parametrize("seed,plain_c", [(6, True), (7, True), (2, False)])
def test_plain_programs_identical(seed, plain_c, monkeypatch):
    """test_direct_issue's random programs of plain words (semaphores, Wait Gate latches, MOP and REPLAY expansion,
    deferred SFPU words), issued by the C part (plain_run, drain_run) or by Python: the same state after every step
    with the cycle model's state in C and in Python lists and ints."""
    runs = {}
    for native in (True, False):
        _with_state(native, monkeypatch)
        runs[native] = direct_tests._run(seed, False, True, monkeypatch, plain_c=plain_c, timed=False, wait_share=0.2)
    assert runs[True] == runs[False] and not isinstance(runs[True][-1], str)


@pytest.mark.needs_cc
def test_matmul_grid_identical(monkeypatch):
    """bf16 64^3 on a 2x2 grid (unpacks, MVMUL runs, packs, Src bank waits, semaphores between cores): the same bytes
    and stats with the cycle model's state in C and in Python lists and ints."""
    plan = direct_tests.matmul_plan(64, "HiFi2")
    plan.use_cores(4)
    direct_tests._same_kernel_runs(plan, direct_tests.matmul_arrays(plan), monkeypatch, sfpu_issue_native,
                                   "TIMING_NATIVE")


def _full_fifo_push(native: bool, plain_c: bool, monkeypatch) -> tuple:
    """Thread 1's FIFO full when a run of plain words is pushed (its last FIFO_EFFECTIVE_DEPTH departures, oldest
    first 40, 43, ..., all after the push at 10), then a second run: what push_many returns, the state after each,
    and how many words the C issue (plain_run) took; the dropped Tensix's cycle model is collected."""
    _with_state(native, monkeypatch)
    monkeypatch.setattr(direct_tests.direct_issue, "DIRECT_ISSUE", True)
    monkeypatch.setattr(sfpu_issue_native, "PLAIN_ISSUE_NATIVE", plain_c)
    taken, plain_run = [0], sfpu_issue_native.plain_run

    def counting():
        run = plain_run()
        return None if run is None else lambda *a: (lambda r: (taken.__setitem__(0, taken[0] + r[0] - a[2]), r)[1])(
            run(*a))
    monkeypatch.setattr(sfpu_issue_native, "plain_run", counting)
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8))
    for i in range(cycles.FIFO_EFFECTIVE_DEPTH):
        tx.tm.taken[1].append(40 + 3 * i)
    words = tuple(isa.encode("SETDMAREG", reg_index_16b=i % 8, set_signals_mode=0, payload=i) for i in range(40))
    states = []
    for t in (10, 60):
        ret = tx.push_many(1, words, t)
        states.append(direct_tests._snapshot(tx, ret))
    model = weakref.ref(tx.tm)              # (plain_run's memo of its attributes, tm_lists_get, does not keep it)
    del tx
    gc.collect()
    assert model() is None
    return states, taken[0]


@pytest.mark.skipif(sfpu_issue_native.plain_run() is None, reason=sfpu_issue_native.plain_status())
def test_full_fifo_accept_identical(monkeypatch):
    """A full FIFO holding a direct push (TensixTiming.accept: the oldest departure) and the departures appended
    after it (take), read and pushed directly on the C state's rings by plain_run (fifo_accept, ring_push_ll): the
    same returns and state as the Python path on lists and deques, the hold really taken."""
    c_states, c_taken = _full_fifo_push(True, True, monkeypatch)
    py_states, py_taken = _full_fifo_push(False, False, monkeypatch)
    assert c_taken == 80 and py_taken == 0
    assert c_states == py_states
    assert c_states[0][0] > 40 + 3 * (cycles.FIFO_EFFECTIVE_DEPTH - 1)        # (each push waited for a departure)
