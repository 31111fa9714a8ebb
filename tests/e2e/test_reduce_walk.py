"""The SFPU reduction reader's walk output cell by output cell (templates/blocks/read_gather.c.j2: reduce_affine,
reduce_by_index, reduce_nested, reduce_computed, reduce_mask; lowering/families/tile_streams.py _reduce_walk,
_reduce_nest, reduce_datums): each cell's reduce indices are consecutive, the datum they land in comes from the
layout's table, the ranges (or an affine index) advance by a carry chain or by nested loops.

Per case, a reduction whose input is not contiguous in the (output, reduce index) order, over layouts of every kind
(lanes per output 1, 2, 4, 8, 32; short reductions with fewer row steps; pads; two reduce ranges; outputs that do
not fill the last group): the expected reader modes are chosen, and the result on TT matches tinygrad's CPU device
(max/min exactly, sums within float32 reassociation: rtol 2e-6 * K)."""
from __future__ import annotations

import numpy as np
import pytest

from tinygrad import Tensor
from tinygrad.uop.ops import Ops

from tt_backend.lowering.families.sfpu_reduce import SfpuReducePlan
from tt_backend.lowering.codegen.l1 import STAGING_BYTES
from tt_backend.lowering.families.tile_plan import window_bytes
from tt_backend.lowering.families.tile_streams import reader_mode, reduce_datums, stream_ctx
from tt_backend.lowering.select import lower

rng = np.random.default_rng(3)

# name, fn, input shape, expected reader modes among the reduction's inputs, exact
CASES = [
    ("sum_T_lanes1", lambda x: x.T.sum(1), (40, 37), {"red affine"}, False),           # many outputs, K = 40
    ("max_T_short", lambda x: x.T.max(1), (5, 70), {"red affine"}, True),              # K = 5: short row steps
    ("sum_T_long", lambda x: x.T.sum(1), (3000, 3), {"red affine"}, False),            # K = 3000: 32 lanes, pads
    ("sum_two_axes", lambda x: x.permute(2, 0, 1).sum((1, 2)), (9, 11, 6), {"red affine"}, False),
    ("max_mid", lambda x: x.max(1), (6, 50, 7), {"red affine"}, True),
    # gated, one tile per output: nested loops over the reduce ranges (pads: 0; max: element k = 0 of the output)
    ("sum_pad", lambda x: x.pad(((0, 0), (2, 3))).T.sum(1), (30, 20), {"red gather nested"}, False),
    ("max_pad", lambda x: x.pad(((0, 0), (2, 3))).T.max(1), (30, 20), {"red gather nested"}, True),
    ("sum_pad_two_axes", lambda x: x.pad(((1, 0), (0, 0), (2, 1))).permute(2, 0, 1).sum((1, 2)), (5, 7, 9),
     {"red gather nested"}, False),
    ("sum_pad_long", lambda x: x.pad(((0, 0), (2, 3))).T.sum(1), (1500, 4), {"red gather"}, False),   # K > 1024
    # a 48 KB buffer walked with a 12 KB reduce stride: its window grows to hold it (tile_plan.allocate_l1)
    ("sum_T_wide", lambda x: x.T.sum(1), (4, 3000), {"red affine"}, False),
    ("argmax_T", lambda x: x.T.argmax(1), (33, 21), {"red affine", "red computed"}, True),   # K = 33: two tiles
    ("argmax_T_short", lambda x: x.T.argmax(1), (20, 21), {"red affine", "red computed nested"}, True),
]
IDS = [c[0] for c in CASES]


def _plans(fn, x):
    sched = fn(Tensor(x, device="CPU")).schedule_linear().src
    return [p for n, c in enumerate(sched) if c.op is Ops.CALL and c.src[0].op is Ops.SINK
            for p in [lower(c.src[0], f"k{n}")] if isinstance(p, SfpuReducePlan)]


@pytest.mark.parametrize("name,fn,shape,modes,exact", CASES, ids=IDS)
def test_modes_and_datum_table(name, fn, shape, modes, exact):
    plans = _plans(fn, rng.standard_normal(shape).astype(np.float32))
    assert plans, f"{name}: no SFPU reduction"
    got = {reader_mode(p, j, p.reduce) for p in plans for j in range(len(p.inputs))}
    assert modes <= got, f"{name}: reader modes {got}, expected {modes}"
    for p in plans:
        red, table = p.reduce, reduce_datums(p.reduce)
        kt = red.steps * red.lanes
        for i in range(1024):   # the inverse, from the layout's definition (tile_plan.ReducePlan) in datum order
            step, lane = 2 * (i >> 6) + (i & 1), 8 * ((i >> 4) & 3) + ((i >> 1) & 7)
            c = (step // red.steps) * (32 // red.lanes) + lane // red.lanes
            kk = i if red.lanes == 32 else (step % red.steps) * red.lanes + lane % red.lanes
            assert table[c * kt + kk] == i, (name, i)
        assert "static const uint16_t tt_red_datums[1024]" in p.render()["args.h"]


@pytest.mark.needs_cc
@pytest.mark.parametrize("name,fn,shape,modes,exact", CASES, ids=IDS)
def test_matches_cpu(name, fn, shape, modes, exact, serial_compile):
    x = rng.standard_normal(shape).astype(np.float32)
    got, ref = fn(Tensor(x, device="TT")).numpy(), fn(Tensor(x, device="CPU")).numpy()
    assert got.shape == ref.shape
    if exact:
        np.testing.assert_array_equal(got, ref, err_msg=name)
    else:
        np.testing.assert_allclose(got, ref, rtol=2e-6 * max(shape), atol=1e-6 * max(shape), err_msg=name)


def test_window_holds_a_larger_buffer():
    """A reduction reader's gathered buffer larger than the default staging window gets a window that holds it whole
    (read once, addressed directly) while L1 has room; the window size reaches the reader through args.h."""
    (plan,) = _plans(lambda x: x.T.sum(1), rng.standard_normal((4, 3000)).astype(np.float32))
    nbytes = plan.buffers[plan.inputs[0].buf].nbytes
    assert nbytes > STAGING_BYTES and window_bytes(plan, "in0") >= nbytes + 64
    assert stream_ctx(plan, plan.inputs[0], 0, plan.reduce)["walk"]["resident"]
    assert f"#define IN0_STAGE_BYTES {window_bytes(plan, 'in0')}u" in plan.render()["args.h"]
