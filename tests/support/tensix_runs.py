"""Driving a bare Tensix (no Tile, no RISC-V cores) the way the compute template issues SFPU bodies: `mop_run`
(tests/emu/test_emu_speed.py, tests/emu/test_timeline.py)."""
from __future__ import annotations

import numpy as np

from tt_backend.chip import isa, layout
from tt_backend.runtime.emu import timeline
from tt_backend.runtime.emu.tensix import Tensix

E = isa.encode


def mop_run(body, reps=32, strict=True, dst_rows=512, tiles=2, setup=(), record=False, data=None,
            drain=(), lead=None) -> Tensix:
    """Push `body` as MOP(template 1: reps x REPLAY) straight into thread 1, `tiles` times (each followed by the words
    `drain`; given `lead`, each MOP with those words ahead of it in one push_many 40 cycles after the thread's clock, as
    a TRISC pushes a `.ttinsn` run), over Dst rows of `data` (default: seeded random data); returns the Tensix, with the
    timeline recorder it ran under as `tx.rec` (None unless `record`)."""
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=strict)
    tx.rec = None
    if record:
        tx.rec = tx.tm.rec = tx.tm.sfpu.rec = timeline.TimelineRecorder(0, tx.tm)
    if data is None:
        data = np.random.default_rng(3).standard_normal((dst_rows, 16)).astype(np.float32).view(np.uint32)
    tx.dst.write_rows32(0, data)
    replay = E("REPLAY", load_mode=0, execute_while_loading=0, len=len(body), start_idx=0)
    nop = E("NOP")
    for i, v in enumerate([1, reps, nop, nop, nop, replay, nop, replay, replay]):
        tx.mop_cfg_write(1, i, v)
    words = [E("SETC16", setc16_reg=29, setc16_value=2), *setup,
             E("REPLAY", load_mode=1, execute_while_loading=0, len=len(body), start_idx=0), *body]
    reset = E("SETRWC", rwc_cr=0, rwc_d=0, rwc_b=0, rwc_a=0, bit_mask=4, clear_ab_vld=0)
    for w in words:
        tx.push(1, w)
    for _ in range(tiles):
        tx.push(1, reset)
        mop = E("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0)
        if lead is not None:
            tx.push_many(1, (*lead, mop), tx.tm.clock[1] + 40)
        else:
            tx.push(1, mop)
        for w in drain:
            tx.push(1, w)
    return tx
