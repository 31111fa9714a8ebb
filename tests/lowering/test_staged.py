"""The staged family's decisions (lowering/families/staged.py), no device: which kernels it takes (only those no one-pass
family lowers), how it cuts them (stages, scratch buffers and their sizes, the stage that reads each), and that a
kernel no cut helps keeps the one-pass families' refusal. Results on the device: tests/e2e/test_staged.py."""
import math

import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops

from tt_backend.chip.errors import UnsupportedOp
from tt_backend.lowering.families import staged
from tt_backend.lowering.families.registry import ONE_PASS, REGISTRY
from tt_backend.lowering.select import lower


def asts(t: Tensor) -> list:
    return [c.src[0] for c in t.schedule_linear().src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]


def E(*shape) -> Tensor:
    return Tensor.empty(*shape, device="CPU")


def test_registered_last_and_priced_at_infinity():
    assert REGISTRY[-1].name == "staged" and REGISTRY[:-1] == ONE_PASS
    (c,) = REGISTRY[-1].candidates(None, None)
    assert c.cycles == math.inf and c.acceptable


@pytest.mark.parametrize("fn", [lambda: E(8, 40).softmax(1), lambda: E(8, 40).sum(1) * 2, lambda: E(8, 40).argmax(),
                                lambda: E(16, 32) @ E(32, 8)])
def test_one_pass_plans_stay_preferred(fn):
    for ast in asts(fn()):
        assert not isinstance(lower(ast, "k"), staged.StagedPlan)


def test_reduction_of_reduction_over_other_ranges():
    """(x - x.mean()).square().sum(0): the mean over everything feeds per-column sums; stage 0 stores the mean (one
    float32 of scratch), stage 1 reads it."""
    (ast,) = asts((lambda x: (x - x.mean()).square().sum(0))(E(8, 40)))
    plan = lower(ast, "r")
    assert isinstance(plan, staged.StagedPlan) and [s.name for s in plan.stages] == ["r_s0", "r_s1"]
    assert [(b.dtype, b.nbytes) for b in plan.scratch] == [("float32", 4)]
    where = plan.where()
    assert where[0]["writes"] == "scratch 0 (DRAM)" and "scratch 0 (DRAM)" in where[1]["reads"]
    assert where[1]["writes"] == "slot 0" and plan.out_slots == [0]
    assert 1 in plan.in_slots and 2 not in plan.in_slots       # scratch is no buffer of the kernel
    assert plan.n_tiles == sum(s.n_tiles for s in plan.stages)


def test_three_chained_reductions():
    (ast,) = asts((lambda x: ((x - ((x - x.mean()) ** 2).mean()) ** 2).sum(0))(E(8, 16)))
    plan = lower(ast, "r")
    assert len(plan.stages) == 3 and len(plan.scratch) == 2


def test_inner_reduce_range_becomes_a_loop_of_its_stage():
    """A reduction under another reduction's range (conv2d's input gradient): the inner one's scratch is indexed by the
    outer reduce range too, so its stage iterates it as an output range."""
    w, x = E(3, 2, 3, 3), E(1, 2, 6, 6)
    (ast,) = [a for a in asts(x.conv2d(w).sum().gradient(x)[0]) if len(lower(a, "k").launches) > 1]
    plan = lower(ast, "k")
    inner, outer = plan.stages
    assert plan.scratch[0].nbytes == 4 * math.prod(inner.ranges[:-1])        # all of stage 0's output ranges
    assert math.prod(inner.ranges[:-1]) > math.prod(outer.ranges[:2 + 1])   # more than the gradient's elements


@pytest.mark.parametrize("n", [9, 16, 40])
def test_many_inputs_are_split_by_loads(n):
    """n distinct inputs (tinygrad's split at DEVICE_MAX_BUFS lifted): every stage reads at most 8 of them, each cut
    stores one elementwise intermediate the size of the output."""
    def chain(ts):
        out = ts[0]
        for t in ts[1:]: out = out * 0.75 + t
        return out
    with Context(MAX_KERNEL_BUFFERS=n + 2):
        (ast,) = asts(chain([E(4, 24) for _ in range(n)]))
    plan = lower(ast, "E")
    assert len(plan.stages) > 1 and all(b.nbytes == 4 * 96 for b in plan.scratch)
    assert all(len(s.inputs) <= 8 for s in plan.stages)
    kernel_reads = {slot for s in plan.stages for slot in s.in_slots if slot < len(plan.buffers)}
    assert kernel_reads == set(range(1, n + 1))


def test_a_semantic_refusal_stands():
    """A kernel whose ops have no lowering is not made into stages that fail the same way: its refusal names the op."""
    from tinygrad.dtype import dtypes
    with pytest.raises(UnsupportedOp, match="BITCAST"):
        for ast in asts((Tensor.empty(4, 4, dtype=dtypes.float16, device="CPU") + 1).bitcast(dtypes.int16)):
            lower(ast, "k")


def test_row_major_scratch_index_matches_numpy():
    """The scratch index of a value over ranges (a, b, c) is numpy's C order."""
    from tinygrad.dtype import dtypes
    from tinygrad.uop.ops import AxisType, UOp
    rngs = [UOp(Ops.RANGE, dtypes.weakint, src=(UOp(Ops.CONST, dtypes.weakint, arg=n),), arg=(i, AxisType.LOOP))
            for i, n in enumerate((3, 4, 5))]
    idx = staged.row_major(rngs)
    grid = np.indices((3, 4, 5))
    got = [idx.substitute({r: UOp(Ops.CONST, dtypes.weakint, arg=int(g)) for r, g in zip(rngs, pt)}).simplify().arg
           for pt in zip(*(g.reshape(-1) for g in grid))]
    assert got == list(range(60))
