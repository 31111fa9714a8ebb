"""The MOP path's speed work must not change results: the MOP expander's cache (frontend._expand_mop) against the
expansion itself (frontend.mop_expansion), a MOP of identical REPLAYs expanded in one extend against the word-by-word
loop, mop_batch's cached C programs against the numpy batch and the one-by-one path, and sfpu_native's bound array
pointers following the arrays the SFPU holds."""
from __future__ import annotations

import numpy as np
import pytest

from tt_backend.chip import isa, layout
from tt_backend.chip.errors import EmuUnimplemented
from tt_backend.runtime.emu import frontend, tensix
from tt_backend.runtime.emu.accel import deferral, native, sfpu_native

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

