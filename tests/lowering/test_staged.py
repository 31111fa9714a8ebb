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
from tt_backend.lowering.frontend import lower_ast
from tt_backend.lowering.select import lower


@pytest.fixture(autouse=True)
def cpu_default_device():
    """Name the default device: left to tinygrad, its first use picks one and writes it into os.environ["DEV"], which
    later tests' subprocesses inherit (DEVICE=TT there would then disagree with DEV=CPU)."""
    with Context(DEV="CPU"):
        yield


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
    outer reduce range too, so its stage iterates it as an output range. (Batch 2: the inner sums do not depend on the
    batch, so merging the two sums would recompute them per batch and the frontend keeps them apart:
    tests/lowering/test_frontend.py, nested sums.)"""
    w, x = E(3, 2, 3, 3), E(2, 2, 6, 6)
    (ast,) = [a for a in asts(x.conv2d(w).sum().gradient(x)[0]) if len(lower(a, "k").launches) > 1]
    plan = lower(ast, "k")
    inner, outer = plan.stages
    assert plan.scratch[0].nbytes == 4 * math.prod(inner.ranges[:-1])        # all of stage 0's output ranges
    assert math.prod(inner.ranges[:-1]) > math.prod(outer.ranges[:2 + 1])   # more than the gradient's elements


def reduces(ast) -> list:
    return [n for n in lower_ast(ast, "k").dag.nodes if n.op == "REDUCE"]


@pytest.mark.parametrize("fn,batch", [(lambda x, w: x.conv2d(w), 1), (lambda x, w: x.conv2d(w).relu(), 2)])
def test_nested_sums_merge_when_no_inner_sum_is_recomputed(fn, batch):
    """conv2d's input gradient at batch 1 (or behind a relu, whose gradient depends on the batch): the inner sums over
    the output channels depend on every range the outer sum over the window runs over, so the frontend makes them one
    sum over (channels, window) (frontend.merge_nested_sum) and a one-pass reduction lowers it: one launch, no scratch.
    """
    w, x = E(3, 2, 3, 3), E(batch, 2, 6, 6)
    (ast,) = [a for a in asts(fn(x, w).sum().gradient(x)[0]) if any(u.op is Ops.REDUCE and
              any(v.op is Ops.REDUCE for v in u.src[0].toposort()) for u in a.toposort())]
    assert not isinstance(lower(ast, "k"), staged.StagedPlan)
    (red,) = reduces(ast)
    assert red.arg[0] == "ADD" and len(red.arg[1]) == 3     # output channel, window row, window column


def test_nested_sums_stay_apart_when_merging_recomputes():
    """conv2d's input gradient at batch 4 with a constant output gradient: the inner sums do not depend on the batch, so
    one merged sum would compute each of them four times, more than a launch's worth (frontend.STAGE_LAUNCH_ELEMENTS;
    a smaller kernel merges); the frontend keeps both sums and the kernel stays staged (the inner sums computed once,
    into scratch)."""
    w, x = E(4, 4, 3, 3), E(4, 4, 11, 11)
    (ast,) = [a for a in asts(x.conv2d(w).sum().gradient(x)[0]) if len(lower(a, "k").launches) > 1]
    assert len(reduces(ast)) == 2


@pytest.mark.parametrize("rows,hoisted", [(6, True), (staged.HOIST_MIN_FACTOR - 1, False)])
def test_broadcast_reduction_is_computed_once(rows, hoisted):
    """The gradient of x @ y with respect to x under .sum() is y's row sums, the same for every row of x: with at least
    HOIST_MIN_FACTOR rows the sums are computed once (stage 0: 8 sums into scratch) and broadcast (stage 1,
    elementwise); with fewer the one-pass reduction recomputes them."""
    x, y = E(rows, 8), E(8, 10)
    (ast,) = asts((x @ y).sum().gradient(x)[0])
    plan = lower(ast, "k")
    assert isinstance(plan, staged.StagedPlan) == hoisted
    if hoisted:
        assert [type(s).__name__ for s in plan.stages] == ["SfpuReducePlan", "ElementwisePlan"]
        assert [b.nbytes for b in plan.scratch] == [4 * 8] and plan.stages[1].ranges == (rows, 8)


def test_computed_streams_count_as_inputs():
    """Few buffers but many integer masks over the ranges (residues of i * j, each a computed input stream of its own:
    lowering/bool_pack.py packs only true/false ones): the load cut counts them with the buffer reads, so the kernel
    is staged instead of refused."""
    i, j = Tensor.arange(12).reshape(12, 1).to("CPU"), Tensor.arange(30).reshape(1, 30).to("CPU")
    x, y = E(12, 30), E(12, 30)
    out = sum((x if p % 2 else y) * ((i * j) % p).float() for p in (3, 5, 7, 11, 13, 17, 19, 23)).sum(1)
    (ast,) = asts(out)
    assert sum(s.value is not None for s in lower_ast(ast, "k").inputs) == 8
    plan = lower(ast, "k")
    assert isinstance(plan, staged.StagedPlan) and all(len(s.inputs) <= 7 for s in plan.stages) and len(plan.stages) > 1


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
