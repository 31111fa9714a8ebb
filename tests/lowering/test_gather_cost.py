"""The launch model's price of a per-datum gather beyond its loop: the stream's index math (lowering/families/
index_cost.py), where the tile pipeline's movers add it (mover_cost.stream_datum_cycles), and the staging-window
reloads of its walk (window_walk.py)."""
from __future__ import annotations

import numpy as np
import pytest

from tt_backend.lowering.families import index_cost, mover_cost
from tt_backend.lowering.families.window_walk import tile_window_loads
from tt_backend.lowering.index import IndexExpr
from tt_backend.lowering.plan import Stream


def test_float_math_once_per_structure_and_loads_at_every_occurrence():
    r = IndexExpr.range_var(0)
    # interpolate's source index, built twice (validity and index): one int -> float, add, multiply, float -> int
    def scaled():
        f = IndexExpr("ADD", "float", (IndexExpr("CAST", "float", (r + 1,)), IndexExpr.const(-1.0)))
        return IndexExpr("CAST", "int", (IndexExpr("MUL", "float", (f, IndexExpr.const(0.8))),))
    c = index_cost
    one = (c.CAST_CYCLES["int", "float"] + c.FLOAT_OP_CYCLES["ADD"] + c.FLOAT_OP_CYCLES["MUL"]
           + c.CAST_CYCLES["float", "int"])
    assert c.index_math_cycles([scaled(), scaled().lt(11), None]) == one
    # constants are folded: float math on constants alone costs nothing
    folded = IndexExpr("CAST", "int", (IndexExpr("MUL", "float", (IndexExpr.const(2.0), IndexExpr.const(0.5))),))
    assert c.index_math_cycles([r + folded]) == 0
    # integer ops are priced for the elementwise gather only (its loop figure holds none): a 2-D pad of a 126-wide
    # buffer, three ops in the index and six in the validity (the conjunction costs nothing of its own)
    r1 = IndexExpr.range_var(1)
    index = r * 126 + r1 + (-127)
    valid = IndexExpr.all_of([IndexExpr("CMPNE", "bool", (r.lt(1), IndexExpr.const(1))),
                              IndexExpr("CMPNE", "bool", (r1.lt(1), IndexExpr.const(1))), r.lt(127), r1.lt(127)])
    assert c.index_math_cycles([index, valid]) == 0
    assert c.index_math_cycles([index, valid], integer=True) == 9 * c.INT_OP_CYCLES
    assert mover_cost.stream_datum_cycles(Stream(buf=0, dtype="float32", index=index, valid=valid),
                                          gather_ranges=2) == 9 * c.INT_OP_CYCLES + 2 * mover_cost.GATHER_PER_RANGE
    # a loaded index wrapped for negative values: three calls in the rendered C, however the DAG shares them, of
    # which the reader runs two (the test and the branch taken)
    ld = IndexExpr("LOAD", "int", (r,), arg=1)
    wrapped = IndexExpr("WHERE", "int", (ld.lt(0), ld + 40, ld))
    assert c.index_math_cycles([wrapped * 33]) == 2 * c.LOAD_CYCLES
    assert c.index_math_cycles([wrapped * 33, wrapped.lt(40)]) == 4 * c.LOAD_CYCLES


def test_loads_priced_as_run_and_inlined_where_gcc_inlines_them():
    r = IndexExpr.range_var(0)
    ld = IndexExpr("LOAD", "int", (r,), arg=1)
    # a gate on loaded data: its test and the costlier branch (the gated value, mostly taken), not the cheap one
    other = IndexExpr("LOAD", "int", (r + 1,), arg=2)
    gated = IndexExpr("WHERE", "int", (ld.lt(0), ld * 3 + other, IndexExpr.const(0)))
    assert index_cost.index_math_cycles([gated]) == 3 * index_cost.LOAD_CYCLES
    # max runs both operands in its test, then the larger once more
    assert index_cost.index_math_cycles([IndexExpr("MAX", "int", (ld, IndexExpr.const(0)))]) == \
        2 * index_cost.LOAD_CYCLES
    # x.gather's index and validity call the loader from three places (inlined); x[idx]'s wrapped index from nine
    valid = IndexExpr.all_of([IndexExpr("CMPNE", "bool", (ld.lt(0), IndexExpr.const(1))), ld.lt(50)])
    assert index_cost.inlined_loads([ld + r * 50, valid]) == {1}
    wrapped = IndexExpr("WHERE", "int", (ld.lt(0), ld + 40, ld))
    assert index_cost.inlined_loads([wrapped * 33, IndexExpr.all_of([wrapped.lt(40), wrapped.lt(0)])]) == frozenset()
    assert index_cost.index_math_cycles([ld + r * 50, valid], inlined=frozenset({1})) == \
        3 * index_cost.LOAD_INLINED_CYCLES


def test_the_per_datum_movers_pay_the_index_math_and_the_float16_conversion():
    r = IndexExpr.range_var(0)
    ld = IndexExpr("LOAD", "int", (r,), arg=1)
    gathered = Stream(buf=0, dtype="float16", index=ld * 33 + IndexExpr.range_var(1))
    extra = mover_cost.stream_datum_cycles(gathered)
    assert extra == index_cost.LOAD_CYCLES + mover_cost.FLOAT16_WIDEN_EXTRA
    assert mover_cost.stream_datum_cycles(Stream(buf=0, dtype="float16", index=r), writer=True) == \
        mover_cost.FLOAT16_NARROW_EXTRA
    plain = mover_cost.tile_read_cycles("gather", "fp32", None)
    assert mover_cost.tile_read_cycles("gather", "fp32", None, extra) == plain + extra * 1024
    # a run walk converts every datum too (a float16 walk of an affine index: no index math, the conversion)
    walk = mover_cost.stream_datum_cycles(Stream(buf=0, dtype="float16", index=r)) + mover_cost.WALK_WIDEN_PER_DATUM
    assert mover_cost.tile_read_cycles("strided", "fp32", {"resident": True, "run": 64}, walk) == \
        mover_cost.tile_read_cycles("strided", "fp32", {"resident": True, "run": 64}) + 13 * 1024
    assert mover_cost.tile_write_cycles("scatter", "fp32", extra, valid=0.5) == \
        mover_cost.tile_write_cycles("scatter", "fp32", valid=0.5) + extra * 512


def test_the_window_walk_reloads_where_the_datums_leave_it():
    # a[:, ::2].T of a 3 x 8000 float32 buffer: datum (r0, r1) at byte 4 * (8000 r1 + 2 r0). A 32 KB window loaded
    # at row 0 still holds row 1's datum (32,000 bytes on), so each r0 reloads twice: a full window at row 0, and at
    # row 2 the rest of the 96,000-byte buffer from the datum's 64-byte line; the tile's last datum (r0 = 341, row 0)
    # once more
    r0, r1 = IndexExpr.range_var(0), IndexExpr.range_var(1)
    loads, moved = tile_window_loads(r1 * 8000 + r0 * 2, None, (4000, 3), 1024, 4, 96000, 32768)
    assert (loads, moved) == (341 * 2 + 1, 342 * 32768 + sum(96000 - ((64000 + 8 * r) & ~63) for r in range(341)))
    # gated datums are not fetched: only row 0's, one reload per 32 KB of it
    assert tile_window_loads(r1 * 8000 + r0 * 2, r1.lt(1), (4000, 3), 1024, 4, 96000, 32768)[0] == 1
    # a buffer the window holds whole is loaded once per launch; a loaded index is unknown on the host
    assert tile_window_loads(r1 * 8000 + r0 * 2, None, (4000, 3), 1024, 4, 32768, 32768) == (0, 0)
    assert tile_window_loads(IndexExpr("LOAD", "int", (r0,), arg=1), None, (4000, 3), 1024, 4, 96000, 32768) == (0, 0)


def test_slots_past_the_end_step_every_range_past_two():
    # a 64-element gather in one tile: its 960 slots past the end store 0 and step the ranges, a loop past two ranges
    def past_end(ranges, loaded=False):
        return mover_cost.tile_read_cycles("gather", "fp32", None, 0.0, ranges, loaded, valid=64 / 1024) - \
            mover_cost.tile_read_cycles("gather", "fp32", None, 0.0, ranges, loaded, valid=1.0) * 64 / 1024
    assert past_end(1) == past_end(2) == 960 * mover_cost.GATHER_PAST_END_PER_SLOT
    step = 960 * mover_cost.GATHER_PAST_END_PER_RANGE
    assert past_end(4) - past_end(3) == pytest.approx(step) and past_end(3) - past_end(2) == pytest.approx(step)
    # a gather by loaded indices compiles its slot past the end to more instructions (r_3_8: 11 against 7)
    assert past_end(1, loaded=True) == pytest.approx(960 * mover_cost.GATHER_LOADED_PAST_END_PER_SLOT)
    assert past_end(3, loaded=True) - past_end(1, loaded=True) == pytest.approx(step)


def test_an_index_behind_its_gate_is_computed_where_the_gate_holds():
    # a 1-D pad of 2 on each side of an 8-wide row: datum r at r - 2, inside for 2 <= r < 10 (8 of 12)
    r = IndexExpr.range_var(0)
    first, second = IndexExpr("CMPNE", "bool", (r.lt(2), IndexExpr.const(1))), r.lt(10)
    index = r + (-2)
    axes = [np.arange(12)]
    cycles = index_cost.gated_math_cycles(index, IndexExpr.all_of([first, second]), axes)
    # the first term's two ops always, the second's one where the first held (10 of 12), the index's one (8 of 12)
    assert cycles == pytest.approx(2 + 10 / 12 + 8 / 12)
    # a term met again is not priced again; without a gate every op is priced
    assert index_cost.gated_math_cycles(index, IndexExpr.all_of([first, first]), axes) == pytest.approx(2 + 10 / 12)
    assert index_cost.gated_math_cycles(index, None, axes) == 1


def test_a_reduction_stream_prices_its_math_as_far_as_its_conjunctions_reach():
    # a conv gradient's padded read over ranges (12, 4): inside for 2 <= r0 < 10, its index computed only there
    r0, r1 = IndexExpr.range_var(0), IndexExpr.range_var(1)
    first, second = IndexExpr("CMPNE", "bool", (r0.lt(2), IndexExpr.const(1))), r0.lt(10)
    gathered = Stream(buf=0, dtype="float32", index=r0 * 4 + r1, valid=IndexExpr.all_of([first, second]))
    # beside its math, the window fetch where inside (8 of 12) and the zero where not
    fetch = 8 / 12 * mover_cost.RED_GATHER_FETCH + 4 / 12 * mover_cost.GATED_OFF
    assert mover_cost.red_datum_math_cycles(gathered, (12, 4)) == pytest.approx(2 + 10 / 12 + 8 / 12 * 2 + fetch)
    # a computed mask stops at its first false term (C's `&&`): the same conjunction as a value
    mask = Stream(buf=0, dtype="float32", index=None, value=IndexExpr.all_of([first, second]))
    assert mover_cost.red_datum_math_cycles(mask, (12, 4)) == pytest.approx(2 + 10 / 12)
    # a loaded index has values the host cannot evaluate: every op priced where the reader has it
    loaded = Stream(buf=0, dtype="float32", index=IndexExpr("LOAD", "int", (r0,), arg=1), valid=first)
    assert mover_cost.red_datum_math_cycles(loaded, (12, 4)) == \
        mover_cost.stream_datum_cycles(loaded, gather_ranges=0) + mover_cost.RED_GATHER_FETCH
