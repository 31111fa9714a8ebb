"""The MOP path's speed work must not change results: the MOP expander's cache (frontend._expand_mop) against the
expansion itself (frontend.mop_expansion), a MOP of identical REPLAYs expanded in one extend against the word-by-word
loop, mop_batch's cached C programs against the numpy batch and the one-by-one path, and sfpu_native's bound array
pointers following the arrays the SFPU holds, and batch_sfpu's memo-hit case in C (batch_run) against its Python."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from tt_backend.chip import isa, layout
from tt_backend.chip.errors import EmuUnimplemented
from tt_backend.runtime.emu import frontend, tensix
from tt_backend.runtime.emu import bench
from tt_backend.runtime.emu.accel import deferral, mop_batch, native, sfpu_issue_native, sfpu_native

from tests.emu.test_emu_speed import CLOSED_BODIES, MM_SETUP, _full_state, _same
from tests.support.tensix_runs import mop_run

E = isa.encode
NOP = E("NOP")


def _tensix() -> tensix.Tensix:
    return tensix.Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)


def _random_mop(rng) -> tuple[int, int, list]:
    """(MOP word, mask_hi, MopCfg) drawn from a small pool, so that configurations repeat (cache hits) interleaved
    with others: templates 0 and 1, NOP or non-NOP start / end / alternate-loop words, some unsupported settings."""
    words = [NOP, E("SFPNOP"), E("SETRWC", rwc_cr=0, rwc_d=0, rwc_b=0, rwc_a=0, bit_mask=4, clear_ab_vld=0),
             E("REPLAY", load_mode=0, execute_while_loading=0, len=3, start_idx=0), E("SFPABS", lreg_c=1, lreg_dest=2,
                                                                                     instr_mod1=1)]
    pick = lambda: int(rng.choice(words))
    if rng.integers(2):
        w = E("MOP", mop_type=0, loop_count=int(rng.choice([0, 3, 31, 32])),
              zmask_lo16_or_loop_count=int(rng.choice([0, 0x5A5A, 0xFFFF])))
        cfg = [int(rng.integers(0, 4)), int(rng.choice([0, 1, 2, 3, 4]))] + [pick() for _ in range(7)]
    else:
        w = E("MOP", mop_type=1, loop_count=int(rng.choice([0, 0, 0, 1])), zmask_lo16_or_loop_count=0)
        cfg = [int(rng.choice([1, 2, 32, 33])), int(rng.choice([1, 5, 64, 0]))] + [pick() for _ in range(7)]
    return w, int(rng.choice([0, 0xFFFF, 0x1234])), cfg


@pytest.mark.parametrize("seed", range(3))
def test_mop_expander_cache_equals_expansion(seed):
    """Random MOPs from a small pool, expanded through the cache (misses and hits in any order): the expander's
    output is exactly mop_expansion's for the current word, mask and config; unsupported ones raise every time and
    emit nothing."""
    rng = np.random.default_rng(seed)
    frontend._MOP_EXPANSIONS.clear()
    pool = [_random_mop(rng) for _ in range(12)]
    tx = _tensix()
    th = tx.threads[1]
    hits = raised = 0
    for _ in range(200):
        w, mask_hi, cfg = pool[int(rng.integers(len(pool)))]
        th.mask_hi, th.mop_cfg = mask_hi, list(cfg)
        th.mop_out.clear()
        try:
            want = list(frontend.mop_expansion(w, mask_hi, cfg))
        except EmuUnimplemented as e:
            with pytest.raises(EmuUnimplemented, match=str(e).split(" with ")[0]):
                tx._expand_mop(th, w)
            assert not th.mop_out
            raised += 1
            continue
        hits += (w, mask_hi, *cfg) in frontend._MOP_EXPANSIONS
        tx._expand_mop(th, w)
        assert list(th.mop_out) == want
    assert hits > 50 and raised > 0


def _mop_of_replays(end0: int) -> tuple[tensix.Tensix, list]:
    """A Tensix whose thread 1 holds a recorded 3-word body and a MOP (template 1, 10 REPLAYs of it, then `end0`)
    in its FIFO; and the body."""
    tx = _tensix()
    body = [E("SFPABS", lreg_c=1, lreg_dest=2, instr_mod1=1), E("SFPNOP"), E("SFPMOV", lreg_c=2, lreg_dest=3,
                                                                             instr_mod1=0)]
    replay = E("REPLAY", load_mode=0, execute_while_loading=0, len=3, start_idx=4)
    for i, v in enumerate([1, 10, NOP, end0, NOP, replay, NOP, replay, replay]):
        tx.mop_cfg_write(1, i, v)
    th = tx.threads[1]
    th.replay_buf[4:7] = body
    th.fifo.append(E("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0))
    th.fifo_t.append(0)
    return tx, body


def test_mop_of_identical_replays_expands_as_the_loop():
    """A MOP emitting only identical REPLAYs (one extend) and the same MOP ending in another word (the word-by-word
    loop over the REPLAYs, then that word): the same ready queue and frontend timing up to that word."""
    runs = []
    for end0 in (NOP, E("SFPNOP")):
        tx, body = _mop_of_replays(end0)
        th = tx.threads[1]
        tx.next_instruction(th)
        tm = tx.tm
        runs.append((list(th.ready), list(th.mop_out), tm.fe[1], tm.after_mop[1], tm.clock[1], list(tm.taken[1])))
    (ready_a, mo_a, *tm_a), (ready_b, mo_b, *tm_b) = runs
    assert ready_a == body * 10 and not mo_a
    assert ready_b == body * 10 and mo_b == [E("SFPNOP")]
    assert tm_a == tm_b


@pytest.mark.skipif(native.host_compiler() is None, reason="no host C compiler (cc, clang or gcc)")
@pytest.mark.parametrize("name", ["exp2", "matmul"])
def test_batch_program_cache_identical(name, monkeypatch):
    """Three tiles of one MOP body from the same Dst start: the C program is built once and reused (read only), and
    the state equals the numpy batch's (the C part off) and the one-by-one path's."""
    monkeypatch.setattr(deferral, "NATIVE_BATCH_MIN", 512)
    assert sfpu_native.available(), sfpu_native.status()
    run = lambda: mop_run(CLOSED_BODIES[name], reps=16, setup=MM_SETUP, tiles=3)
    tx = run()
    assert len(tx._batch_runs) == 1
    program, address = next(iter(tx._batch_runs.values()))
    assert not program.flags.writeable and address == program.ctypes.data
    cached = _full_state(tx)
    monkeypatch.setattr(sfpu_native, "NATIVE_SFPU", False)
    _same(cached, _full_state(run()))
    monkeypatch.setattr(tensix.Tensix, "batch_sfpu", lambda self, t, th: 0)
    monkeypatch.setattr(deferral, "DEFER_SFPU", False)
    _same(cached, _full_state(run()))


@pytest.mark.skipif(native.host_compiler() is None, reason="no host C compiler (cc, clang or gcc)")
def test_native_state_follows_the_arrays():
    """The C part's pointers are bound to the arrays last seen: two SFPUs in turn, then an LReg file replaced by a
    copy, each run writes the arrays its SFPU holds now and no other."""
    assert sfpu_native.available(), sfpu_native.status()
    fields = lambda imm: isa.INSTRUCTIONS["SFPLOADI"].decode(E("SFPLOADI", lreg_ind=0, instr_mod0=0, imm16=imm))
    a, b = _tensix().raw_sfpu, _tensix().raw_sfpu
    for sfpu, imm in ((a, 0x3F80), (b, 0x4000), (a, 0x4040)):
        sfpu_native.run(sfpu, [sfpu_native.record("SFPLOADI", fields(imm))])
        assert (sfpu.lreg[0] == imm << 16).all()
    assert (b.lreg[0] == 0x4000 << 16).all()
    old = a.lreg
    a.lreg = old.copy()
    sfpu_native.run(a, [sfpu_native.record("SFPLOADI", fields(0x4080))])
    assert (a.lreg[0] == 0x4080 << 16).all() and (old[0] == 0x4040 << 16).all()



def _timing_state(tx) -> tuple:
    """The cycle model's issue state (with what a MOP's accept and take write: the frontend's cycle, after_mop, the
    FIFO departures, the Wait Gate, event_t), its SFPU issue state and the Tensix's last instruction, beyond
    _full_state's stats."""
    tm, st = tx.tm, tx.tm.sfpu
    return (list(tm.clock), list(tm.stalls), list(tm.issued), list(tm.fe), list(tm.after_mop), list(tm.gate),
            [list(q) for q in tm.taken], tm.event_t, st.mad_cycle, st.mad_writes, st.mad_macro, st.nop_only_cycle,
            st.busy_until, tx.current, sfpu_native.traffic["C"])


def _batch_runs_both(monkeypatch, run, tensixes=lambda tx: (tx,)) -> tuple[dict, tuple, tuple]:
    """run() with batch_run (counted) and with it off: (its outcomes by kind, state with it, state without it: of the
    Tensixes `tensixes` finds in run()'s result); the C traffic counted from zero in each."""
    outcomes = {"ran": 0, "refused": 0, "declined": 0}
    c_run = sfpu_issue_native.batch_run()

    def counted(*args):
        n = c_run(*args)
        outcomes["ran" if n > 0 else "refused" if n == 0 else "declined"] += 1
        return n
    states = []
    for on in (True, False):
        monkeypatch.setattr(sfpu_issue_native, "batch_run", (lambda: counted) if on else (lambda: None))
        monkeypatch.setitem(sfpu_native.traffic, "C", 0)
        states.append(sum((_full_state(tx) + _timing_state(tx) for tx in tensixes(run())), ()))
    return outcomes, states[0], states[1]


@pytest.mark.skipif(native.host_compiler() is None, reason="no host C compiler (cc, clang or gcc)")
@pytest.mark.parametrize("name", sorted(CLOSED_BODIES))
def test_batch_run_equals_batch_sfpu(name, monkeypatch):
    """batch_run (mop_batch_native.c, batch_sfpu's memo-hit case) against batch_sfpu's Python: six tiles of one MOP
    body, the Dst start moving (the RWC reset every other tile) so that both address keys hit; the same Dst, LRegs,
    flags, cycle model, counters and C traffic, and the C part ran the batches whose memos it found."""
    assert sfpu_issue_native.batch_run() is not None, sfpu_issue_native.status()
    reset = E("SETRWC", rwc_cr=0, rwc_d=0, rwc_b=0, rwc_a=0, bit_mask=4, clear_ab_vld=0)
    words = list(CLOSED_BODIES[name])
    outcomes, on, off = _batch_runs_both(monkeypatch, lambda: mop_run(words, reps=8, setup=MM_SETUP, tiles=6,
                                                                      drain=[reset] if name != "spill" else []))
    _same(on, off)
    assert outcomes["ran"] >= 2, outcomes


@pytest.mark.skipif(native.host_compiler() is None, reason="no host C compiler (cc, clang or gcc)")
@pytest.mark.parametrize("case", ["lane_flags", "addr_mod", "recorded", "unwritten", "few_reps"])
def test_batch_run_declines_where_the_memos_do_not_answer(case, monkeypatch):
    """Between the tiles, state the memos are keyed by (or that batch_sfpu refuses on) changes: lane enables
    (SFPENCC, not cached until batch_sfpu asks), the address modifier's step, a timeline recorder, rows a load
    would read never written (strict), fewer repetitions than a batch takes. batch_run declines or refuses there
    and the state equals batch_sfpu's Python path."""
    reset = E("SETRWC", rwc_cr=0, rwc_d=0, rwc_b=0, rwc_a=0, bit_mask=4, clear_ab_vld=0)
    drain = {"lane_flags": [E("SFPENCC", imm12_math=0, lreg_dest=0, instr_mod1=0), reset],
             "addr_mod": [E("SETC16", setc16_reg=29, setc16_value=4), reset],
             "recorded": [reset], "unwritten": [], "few_reps": [reset]}[case]
    kw = {"recorded": {"record": True}, "unwritten": {"dst_rows": 64}, "few_reps": {"reps": 3}}.get(case, {})
    body = bench.exp2_body()
    outcomes, on, off = _batch_runs_both(monkeypatch, lambda: mop_run(body, tiles=5, drain=drain,
                                                                      **{"reps": 8, **kw}))
    _same(on, off)
    assert outcomes["declined"] + outcomes["refused"] >= 1, outcomes


@pytest.mark.skipif(native.host_compiler() is None, reason="no host C compiler (cc, clang or gcc)")
@pytest.mark.parametrize("lanes", ["all", "none"])
def test_batch_run_flushes_the_work_queued_ahead(lanes, monkeypatch):
    """A SFPENCC pushed with the MOP in one run (elementwise512's compute kernel) is deferred, so the queue holds it
    when batch_sfpu tries the MOP's repetitions: batch_run executes it first (its small flush: sfpu_run of the packed
    entry) and caches the lane enables, as batch_sfpu's `self.sfpu` and `enabled()` do. All lanes enabled, it then takes
    the batch; every lane disabled (SFPENCC setting UseLaneFlags with the flags clear), it declines and batch_sfpu's
    Python runs the words one by one. Either way the state equals the Python path's."""
    encc = {"all": E("SFPENCC", imm12_math=0, lreg_dest=0, instr_mod1=0),
            "none": E("SFPENCC", imm12_math=1, lreg_dest=0, instr_mod1=10)}[lanes]
    python_flushes = []          # per run: the queue lengths flush_deferred's Python executed
    words_of = deferral._dq_words

    def counted(dq):             # (called by flush_deferred's Python, not by batch_run's small flush)
        python_flushes[-1].append(len(dq))
        return words_of(dq)
    monkeypatch.setattr(deferral, "_dq_words", counted)

    def run():
        python_flushes.append([])
        return mop_run(bench.exp2_body(), tiles=5, lead=[encc], reps=8)
    outcomes, on, off = _batch_runs_both(monkeypatch, run)
    _same(on, off)
    assert outcomes["ran" if lanes == "all" else "declined"] >= 4, outcomes
    with_c, without = python_flushes
    assert without.count(1) == 5 and with_c.count(1) == 1, python_flushes   # (the first tile: no memos yet)


@pytest.mark.skipif(native.host_compiler() is None, reason="no host C compiler (cc, clang or gcc)")
def test_batch_run_keeps_the_lane_enables_only_where_the_flush_left_them(monkeypatch):
    """batch_run's small flush keeps the SFPU's cached lane enables where the flushed SFPENCC left them as they were
    (enables_unchanged: no enabled() call after it) and drops them where it changed them: tiles whose SFPENCC turns
    every lane on or off in a changing order. Fails if a cache were
    kept stale (a batch would run with the old enables) or kept where the flags changed; the state equals the Python
    path's after every tile, and the cache, where kept, is what enabled() computes."""
    on, off = (E("SFPENCC", imm12_math=0, lreg_dest=0, instr_mod1=0),
               E("SFPENCC", imm12_math=1, lreg_dest=0, instr_mod1=10))
    order = [on, on, off, off, on, off, on, on, on]
    mop = E("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0)
    reset = E("SETRWC", rwc_cr=0, rwc_d=0, rwc_b=0, rwc_a=0, bit_mask=4, clear_ab_vld=0)
    enabled_calls = []
    sfpu_class = type(mop_run(bench.exp2_body(), tiles=0).raw_sfpu)
    enabled = sfpu_class.enabled

    def counted(self):
        enabled_calls[-1] += self._en is None
        return enabled(self)
    monkeypatch.setattr(sfpu_class, "enabled", counted)

    def run():
        enabled_calls.append(0)
        tx = mop_run(bench.exp2_body(), reps=8, tiles=0)
        caches = []
        for i, encc in enumerate(order):
            tx.push(1, reset)
            tx.push_many(1, (encc, mop), tx.tm.clock[1] + 40)
            s = tx.raw_sfpu
            if s._en is not None:
                fresh = (s.lane_flags | ~s.use_lane_flags) & ~s._row_mask
                assert np.array_equal(s._en, fresh) and bool(s.all_enabled) == bool(fresh.all()), i
            caches.append((s._en is None, bool(s.all_enabled), _full_state(tx)))
        return tx, caches
    outcomes, states = {"ran": 0, "declined": 0, "refused": 0}, []
    c_run = sfpu_issue_native.batch_run()

    def counted_run(*args):
        n = c_run(*args)
        outcomes["ran" if n > 0 else "refused" if n == 0 else "declined"] += 1
        return n
    for use_c in (True, False):
        monkeypatch.setattr(sfpu_issue_native, "batch_run", (lambda: counted_run) if use_c else (lambda: None))
        monkeypatch.setitem(sfpu_native.traffic, "C", 0)
        tx, caches = run()
        states.append((_full_state(tx) + _timing_state(tx), [c[1:] for c in caches]))
    _same(states[0][0], states[1][0])
    for a, b in zip(states[0][1], states[1][1]):
        assert a[0] == b[0]
        _same(a[1], b[1])
    assert outcomes["ran"] >= 3 and outcomes["declined"] >= 3, outcomes
    # the flush kept the cache where the tile's SFPENCC repeated the one before (on after on: 3 times), so C asked
    # enabled() that much less often than Python
    assert enabled_calls[0] <= enabled_calls[1] - 3, enabled_calls


@pytest.mark.skipif(native.host_compiler() is None, reason="no host C compiler (cc, clang or gcc)")
@pytest.mark.parametrize("patched", ["new_queue", "is_plain"])
def test_batch_run_small_flush_asks_a_replaced_helper(patched, monkeypatch):
    """batch_run's small flush makes sfpu_issue_native.new_queue's queue and reads SFPU.is_plain's answer itself only
    while they are the module's and the class's own: replaced (a counting wrapper), C calls the replacement from
    inside batch_run, once a tile it takes, and the state is the Python path's."""
    inside, asked = [False], []
    if patched == "new_queue":
        target, original = sfpu_issue_native, sfpu_issue_native.new_queue
    else:
        target = type(mop_run(bench.exp2_body(), tiles=0).raw_sfpu)
        original = target.is_plain

    def counted(*args):
        asked[-1] += inside[0]
        return original(*args)
    monkeypatch.setattr(target, patched, counted)
    c_run = sfpu_issue_native.batch_run()
    ran = []

    def watched(*args):
        inside[0] = True
        try:
            n = c_run(*args)
        finally:
            inside[0] = False
        ran[-1] += n > 0
        return n
    encc = E("SFPENCC", imm12_math=0, lreg_dest=0, instr_mod1=0)
    states = []
    for use_c in (True, False):
        monkeypatch.setattr(sfpu_issue_native, "batch_run", (lambda: watched) if use_c else (lambda: None))
        monkeypatch.setitem(sfpu_native.traffic, "C", 0)
        asked.append(0)
        ran.append(0)
        tx = mop_run(bench.exp2_body(), tiles=4, lead=[encc], reps=8)
        states.append(_full_state(tx) + _timing_state(tx))
    _same(*states)
    assert ran[0] >= 3 and asked[0] >= ran[0], (ran, asked)


@pytest.mark.skipif(native.host_compiler() is None, reason="no host C compiler (cc, clang or gcc)")
@pytest.mark.parametrize("case", ["batch", "alone", "lanes_off", "few_reps", "recorded", "unwritten", "not_sfpu"])
def test_mop_push_equals_the_python_push(case, monkeypatch):
    """mop_push (mop_batch_native.c: a MOP of identical REPLAYs pushed to an idle thread, up to batch_sfpu) against
    push()'s Python path (MOP_PUSH_NATIVE off), the MOP pushed behind a SFPENCC in one push_many as the compute kernel
    does: the whole expansion batched (batch; alone: the MOP pushed on its own, 40 cycles after the thread's clock, so
    that its accept and take set the frontend's cycle), the batch declined with the lanes off or refused with too few
    repetitions and the words left to Tensix.drain (lanes_off, few_reps, unwritten: strict mode's unwritten rows;
    not_sfpu: a body of NOPs, no batch asked), a timeline recorded (recorded: None, Python's path). The same Dst,
    LRegs, flags, cycle model, counters, C traffic and threads' queues, batch_skip and blocked state."""
    assert sfpu_issue_native.mop_push() is not None, sfpu_issue_native.status()
    encc = E("SFPENCC", imm12_math=1 if case == "lanes_off" else 0, lreg_dest=0,
             instr_mod1=10 if case == "lanes_off" else 0)
    kw = {"few_reps": {"reps": 3}, "recorded": {"record": True}, "unwritten": {"dst_rows": 64}}.get(case, {})
    expanded = []                # per run: the MOPs the Python expander expanded (mop_push reads its cache instead)
    expand = frontend.FrontendMixin._expand_mop

    def counted(self, th, w):
        expanded[-1] += 1
        expand(self, th, w)
    monkeypatch.setattr(frontend.FrontendMixin, "_expand_mop", counted)
    states = []
    for on in (True, False):
        monkeypatch.setattr(sfpu_issue_native, "MOP_PUSH_NATIVE", on)     # (read by push_many_entry's C too)
        monkeypatch.setitem(sfpu_native.traffic, "C", 0)
        frontend._MOP_EXPANSIONS.clear()       # (the expander's cache: the first MOP finds nothing, mop_push declines)
        expanded.append(0)
        body = [NOP] * 3 if case == "not_sfpu" else bench.exp2_body()
        tx = mop_run(body, tiles=5, lead=[] if case == "alone" else [encc], **{"reps": 8, **kw})
        threads = tuple((list(th.ready), th.batch_skip, th.blocked, list(th.fifo)) for th in tx.threads)
        states.append(_full_state(tx) + _timing_state(tx) + (threads,))
    _same(*states)
    assert expanded == [5 if case == "recorded" else 1, 5], expanded


def test_mop_push_switch(monkeypatch):
    """MOP_PUSH_NATIVE = False (TT_EMU_MOP_PUSH_NATIVE=0) leaves a MOP's push to Python, and `info` says so."""
    monkeypatch.setattr(sfpu_issue_native, "MOP_PUSH_NATIVE", False)
    assert sfpu_issue_native.mop_push() is None
    assert sfpu_issue_native.mop_push_status() == "Python: TT_EMU_MOP_PUSH_NATIVE=0"


def test_batch_run_switch(monkeypatch):
    """BATCH_NATIVE = False (TT_EMU_MOP_BATCH_NATIVE=0) and the SFPU's C part off each leave batch_sfpu to Python."""
    monkeypatch.setattr(sfpu_issue_native, "BATCH_NATIVE", False)
    assert sfpu_issue_native.batch_run() is None and "TT_EMU_MOP_BATCH_NATIVE=0" in sfpu_issue_native.batch_status()
    monkeypatch.setattr(sfpu_issue_native, "BATCH_NATIVE", True)
    monkeypatch.setattr(sfpu_native, "NATIVE_SFPU", False)
    assert sfpu_issue_native.batch_run() is None


@pytest.mark.skipif(native.host_compiler() is None, reason="no host C compiler (cc, clang or gcc)")
@pytest.mark.parametrize("setting", ["as_built", "closed_form_off", "batch_native_off", "sfpu_native_off",
                                     "native_min_2", "min_reps_64", "max_words_16", "batch_run_replaced",
                                     "class_batch_sfpu", "instance_batch_sfpu"])
def test_mop_push_calls_batch_run_as_batch_sfpu_would(setting, monkeypatch):
    """mop_push asks batch_run itself (mop_batch_sfpu: no batch_sfpu frame) only while batch_sfpu would call it with
    the same arguments: each switch or setting batch_sfpu reads changed, or batch_sfpu or batch_run replaced, it calls
    the method (seen by a profile hook, which replaces nothing), and the state, queues and C traffic equal push()'s
    Python path's (MOP_PUSH_NATIVE off) under the same setting, changed after two tiles (the memos filled), the
    deferred queue and batch_skip after every tile too; as built, batch_sfpu's frame is never entered once the
    memos are filled and the batch still runs in C, and BATCH_MIN_REPS / BATCH_MAX_WORDS, which it passes on, refuse
    the batch there as in batch_sfpu."""
    changes = {"closed_form_off": (mop_batch, "BATCH_CLOSED_FORM", False),
               "batch_native_off": (sfpu_issue_native, "BATCH_NATIVE", False),
               "sfpu_native_off": (sfpu_native, "NATIVE_SFPU", False),
               "native_min_2": (deferral, "NATIVE_BATCH_MIN", 2), "min_reps_64": (mop_batch, "BATCH_MIN_REPS", 64),
               "max_words_16": (mop_batch, "BATCH_MAX_WORDS", 16),
               "batch_run_replaced": (sfpu_issue_native, "batch_run", lambda: None),
               "class_batch_sfpu": (tensix.Tensix, "batch_sfpu", lambda self, t, th: mop_batch.MopBatchMixin.batch_sfpu(
                   self, t, th))}
    code = mop_batch.MopBatchMixin.batch_sfpu.__code__
    frames = []

    def hook(frame, event, arg):
        if event == "call" and frame.f_code is code:
            frames[-1] += 1
    encc = E("SFPENCC", imm12_math=0, lreg_dest=0, instr_mod1=0)
    mop = E("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0)
    reset = E("SETRWC", rwc_cr=0, rwc_d=0, rwc_b=0, rwc_a=0, bit_mask=4, clear_ab_vld=0)
    states = []
    for on in (True, False):
        monkeypatch.setattr(sfpu_issue_native, "MOP_PUSH_NATIVE", on)
        monkeypatch.setitem(sfpu_native.traffic, "C", 0)
        tx = mop_run(bench.exp2_body(), tiles=0)
        trace = []                             # after each tile's push: what is queued, deferred, skipped
        try:
            for tile in range(7):
                if tile == 2:                  # (the change after two tiles, which filled the memos as built)
                    if setting in changes:
                        monkeypatch.setattr(*changes[setting])
                    if setting == "instance_batch_sfpu":
                        tx.batch_sfpu = lambda t, th: mop_batch.MopBatchMixin.batch_sfpu(tx, t, th)
                    frames.append(0)
                    sys.setprofile(hook)
                tx.push(1, reset)
                tx.push_many(1, (encc, mop), tx.tm.clock[1] + 40)
                trace.append((len(tx.deferred), tx.threads[1].batch_skip, len(tx.threads[1].ready)))
        finally:
            sys.setprofile(None)
        threads = tuple((list(th.ready), th.batch_skip, th.blocked, list(th.fifo)) for th in tx.threads)
        states.append(_full_state(tx) + _timing_state(tx) + (threads, trace))
        monkeypatch.undo()                     # (the next pass's first two tiles as built again)
    _same(*states)
    if setting in ("as_built", "min_reps_64", "max_words_16"):     # (the last two: arguments it passes on)
        assert frames == [0, 5], frames
    else:
        assert frames[0] == 5, frames


@pytest.mark.skipif(native.host_compiler() is None, reason="no host C compiler (cc, clang or gcc)")
@pytest.mark.parametrize("change", ["timing_memo", "plans_cleared", "second_tensix"])
def test_batch_run_look_ups_follow_their_dicts(change, monkeypatch):
    """batch_run remembers each memo dict's last look-up (look_memos) only while that dict is unchanged and the same
    one: a timing memo rewritten between tiles (every stall and the clock 5 cycles later), the plans forgotten, or a
    second Tensix's batches between the first one's, and the C path's state (cycles included) is still batch_sfpu's
    Python's with the same change; it fails if a remembered value outlived its dict's change."""
    mop = E("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0)
    reset = E("SETRWC", rwc_cr=0, rwc_d=0, rwc_b=0, rwc_a=0, bit_mask=4, clear_ab_vld=0)
    encc = E("SFPENCC", imm12_math=0, lreg_dest=0, instr_mod1=0)

    def tile(tx):
        tx.push(1, reset)
        tx.push_many(1, (encc, mop), tx.tm.clock[1] + 40)

    def run():
        tx = mop_run(bench.exp2_body(), reps=8, tiles=0)
        ones_to_twos = (np.arange(512 * 16, dtype=np.uint32).reshape(512, 16) & 0x7FFFFF) | 0x3F800000
        other = mop_run(bench.exp2_body(), reps=8, tiles=0, data=ones_to_twos)
        for i in range(8):
            tile(tx)
            if change == "second_tensix":
                tile(other)
            if i == 3 and change == "timing_memo":
                for key, memo in tx._batch_timing.items():
                    d_clock, nop, mad, busy, d_stalls, d_issued, gaps = memo
                    tx._batch_timing[key] = (d_clock + 5, nop, mad, busy + 5, d_stalls + 5, d_issued, gaps)
            if i == 3 and change == "plans_cleared":
                tx._batch_plans.clear()
        return tx, other
    outcomes, *states = _batch_runs_both(monkeypatch, run, tensixes=lambda pair: pair)
    _same(*states)
    assert outcomes["ran"] >= (10 if change == "second_tensix" else 5), outcomes


def _more_tiles(tx, reps: int, tiles: int, lead: list) -> None:
    """mop_run's tiles again on the same Tensix with `reps` repetitions a MOP (the expansion's length changes)."""
    tx.mop_cfg_write(1, 1, reps)
    reset = E("SETRWC", rwc_cr=0, rwc_d=0, rwc_b=0, rwc_a=0, bit_mask=4, clear_ab_vld=0)
    mop = E("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0)
    for _ in range(tiles):
        tx.push(1, reset)
        tx.push_many(1, (*lead, mop), tx.tm.clock[1] + 40)


@pytest.mark.skipif(native.host_compiler() is None, reason="no host C compiler (cc, clang or gcc)")
@pytest.mark.parametrize("case", ["batch", "alone", "lanes_off", "few_reps", "unwritten", "not_sfpu", "short_body",
                                  "capped"])
def test_mop_lazy_equals_the_ready_queue_first(case, monkeypatch):
    """MOP_LAZY_NATIVE (mop_push's expansion put in the ready queue only where something else than its batch reads it,
    and the period search reused for an equal body and length) against the expansion put there first (off): the
    whole expansion batched (batch, alone, short_body: a 2-word body), the batch declined or refused and the words
    left to Tensix.drain (lanes_off; few_reps: 3 repetitions, then 8; unwritten: strict mode's unwritten rows in the
    later tiles), no batch asked (not_sfpu), a batch of 5 repetitions and the rest left to Tensix.drain (capped:
    BATCH_MAX_WORDS; the words issued one by one invalidate the lane enables, and batch_try's enabled() call queues
    the next expansion first). Each as 4 tiles, then 3 more with 5 more repetitions a MOP (the search's memo must not
    answer for the new length), batch_sfpu's plans forgotten after the first of them (the next MOP's batch declined
    before any Python runs). The same Dst, LRegs, flags, cycle model, counters, C traffic and queues; and only the
    words of MOPs not batched by mop_push go through a queue's extend (a counting deque in every thread)."""
    assert sfpu_issue_native.mop_push() is not None, sfpu_issue_native.status()
    from collections import deque
    from tt_backend.runtime.emu import thread_state
    extended = [0]

    class CountingDeque(deque):
        def extend(self, words):
            words = list(words)
            extended[0] += len(words)
            super().extend(words)
    init = thread_state.ThreadState.__init__

    def counting_init(self, *a, **kw):
        init(self, *a, **kw)
        self.ready = CountingDeque()
    monkeypatch.setattr(thread_state.ThreadState, "__init__", counting_init)
    if case == "capped":
        monkeypatch.setattr(mop_batch, "BATCH_MAX_WORDS", 5 * len(bench.exp2_body()))
    encc = E("SFPENCC", imm12_math=1 if case == "lanes_off" else 0, lreg_dest=0,
             instr_mod1=10 if case == "lanes_off" else 0)
    lead = [] if case == "alone" else [encc]
    kw = {"few_reps": {"reps": 3}, "unwritten": {"dst_rows": 64}, "short_body": {"reps": 12}}.get(case, {})
    reps = kw.pop("reps", 8)
    body = {"not_sfpu": [NOP] * 3, "short_body": bench.exp2_body()[:2]}.get(case, bench.exp2_body())
    states, counts = [], []
    for on in (True, False):
        monkeypatch.setattr(sfpu_issue_native, "MOP_LAZY_NATIVE", on)     # (read by mop_push at each push)
        monkeypatch.setitem(sfpu_native.traffic, "C", 0)
        frontend._MOP_EXPANSIONS.clear()
        extended[0] = 0
        tx = mop_run(body, tiles=4, lead=lead, reps=reps, **kw)
        _more_tiles(tx, reps + 5, 1, lead)
        tx._batch_plans.clear()
        _more_tiles(tx, reps + 5, 2, lead)
        counts.append(extended[0])
        threads = tuple((list(th.ready), th.batch_skip, th.blocked, list(th.fifo)) for th in tx.threads)
        states.append(_full_state(tx) + _timing_state(tx) + (threads,))
    _same(*states)
    if case in ("lanes_off", "not_sfpu", "capped"):     # (no batch, or the lane enables asked before each: every
        assert counts[0] == counts[1] > 0, counts         # expansion queued, lazy or not)
    else:                                       # (queued: the two MOPs of a new expansion (Python's push), the one
        first = 4 if case == "few_reps" else 1  # whose plan was forgotten, few_reps' four of 3 repetitions)
        assert counts[0] == (first * reps + 2 * (reps + 5)) * len(body) < counts[1], counts
