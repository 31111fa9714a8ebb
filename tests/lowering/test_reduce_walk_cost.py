"""The launch model's price of the SFPU reduction's affine walk over a resident buffer (mover_cost.reduce_walk_cycles,
templates/blocks/read_gather.c.j2 reduce_affine): besides its slots and datums, each output cell a tile visits pays
tt_red_set's division per range of the kernel, and where pads read the output's element 0 (max) that read, in the
layouts of at least mover_cost.RED_WALK_MIN_SLOTS slots per output cell where they were measured."""
from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.uop.ops import Ops

from tt_backend.lowering.families import mover_cost
from tt_backend.lowering.families.sfpu_reduce import SfpuReducePlan
from tt_backend.lowering.families.tile_plan import allocate_l1
from tt_backend.lowering.select import lower


def _reader(shape, fn) -> int:
    """The predicted reader cycles of the one reduction kernel of fn over an fp32 tensor of `shape`, on one core."""
    x = Tensor(np.zeros(shape, np.float32), device="PYTHON").realize()
    (call,) = [c for c in fn(x).schedule_linear().src if c.op is Ops.CALL]
    plan = lower(call.src[0], "k")
    assert isinstance(plan, SfpuReducePlan) and plan.reader_modes() == ["red affine"]
    return allocate_l1(plan, resident_windows=True).launch_cycles(1)["reader"]


def test_each_output_pays_its_ranges_and_a_max_its_pad_read():
    # 120 outputs of 6 over two and over four ranges: the same tile, slots and datums, two more divisions per output
    assert _reader((2, 6, 10, 6), lambda x: x.sum(3)) - _reader((120, 6), lambda x: x.sum(1)) == \
        120 * 2 * mover_cost.RED_WALK_PER_RANGE
    # a max's pads read element 0 of their output (the tile has 8 slots per output, 6 datums): once per output
    assert _reader((120, 6), lambda x: x.max(1)) - _reader((120, 6), lambda x: x.sum(1)) == \
        120 * mover_cost.RED_WALK_PAD_READ
    # no pads (8 datums in 8 slots): no such read
    assert _reader((120, 8), lambda x: x.max(1)) == _reader((120, 8), lambda x: x.sum(1))
    # 4 slots per output (256 cells of x.sum(0) over 3 x 256): loops the compiler unrolls, where the output figures
    # were not measured; only the slots and datums are priced
    assert _reader((3, 256), lambda x: x.max(0)) == _reader((3, 256), lambda x: x.sum(0))


def test_output_figures_apply_only_where_measured(monkeypatch):
    """A larger per-output figure moves the reader of 8 slots per output cell (120 x 6) by exactly that much per
    output, and leaves the 4-slot layout (3 x 256) where it was (the max / sum comparison above cannot tell)."""
    before = {shape: _reader(shape, lambda x: x.sum(len(shape) - 1 if shape == (120, 6) else 0))
              for shape in ((120, 6), (3, 256))}
    monkeypatch.setattr(mover_cost, "RED_WALK_PER_OUTPUT", mover_cost.RED_WALK_PER_OUTPUT + 100)
    assert _reader((120, 6), lambda x: x.sum(1)) - before[(120, 6)] == 120 * 100
    assert _reader((3, 256), lambda x: x.sum(0)) == before[(3, 256)]


def _plan(shape, fn) -> SfpuReducePlan:
    x = Tensor(np.zeros(shape, np.float32), device="PYTHON").realize()
    (call,) = [c for c in fn(x).schedule_linear().src if c.op is Ops.CALL]
    return allocate_l1(lower(call.src[0], "k"), resident_windows=True)



def test_a_carry_chain_walk_is_priced_on_its_slowest_core():
    """A gathered reduction's per-datum walk (mover_cost.RED_PER_DATUM "red gather") on a grid costs what its slowest
    core's groups hold: x.pad(((0, 0), (2, 3))).T.sum(1) of 1500 x 4 (sum_pad_long), 9 outputs of 1500 in groups of
    4 cells, one group per core on 3 cores: cores 0 and 1 4 outputs (2 inside) against the average 3; on one core
    the launch's average."""
    partial = _plan((1500, 4), lambda x: x.pad(((0, 0), (2, 3))).T.sum(1))
    assert partial.reader_modes() == ["red gather"]
    s, ranges = partial.inputs[0], partial.ranges
    # cores 0 and 1 hold 6,000 datums each, half of them inside; core 1's validity reaches its second term on all
    core0, core1 = (mover_cost.red_datum_read_cycles("red gather", 6000 / (6 * 1024),
                                                     mover_cost.red_datum_math_cycles(s, ranges, points))
                    for points in ((0, 6000), (6000, 12000)))
    assert partial.read_cycles(3)[0] == pytest.approx(core1) and core1 > core0
    average = mover_cost.red_datum_read_cycles("red gather", 13500 / (18 * 1024),
                                               mover_cost.red_datum_math_cycles(s, ranges))
    assert partial.read_cycles(1)[0] == pytest.approx(average) and core0 > average
