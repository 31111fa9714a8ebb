"""The launch model's overlaps (lowering/families/mover_cost.py): two Dst groups price the tile pipeline's compute by
its slowest thread (compute_stage with tile_render.dst_overlap, which must decide as the rendered kernel does), cores
released together wait for their bursts at the DRAM banks (lockstep_cycles), and near the knee their reads queue
there (bank_queueing)."""
from __future__ import annotations

import pytest
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops

from tt_backend.lowering.families import mover_cost
from tt_backend.lowering.families.mover_cost import bank_queueing, compute_stage, lockstep_cycles
from tt_backend.lowering.families.tile_render import dst_overlap
from tt_backend.lowering.select import lower
from tt_backend.placement_eval import placer

GROUPS = "two Dst groups in flight"
ON_UNPACKER = "the unpacker's thread issues the FPU op"


def _plan(t: Tensor, budget: float | None = None):
    (call,) = [c for c in t.schedule_linear().src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]
    return lower(call.src[0], "overlap", placer(budget))


def _norm():
    """RMSNorm's x * (1/r) * w over 4 tiles, x*w an ELWMUL at TT_ERR_BUDGET=1e-2 (tests/e2e/test_fpu_on_unpacker)."""
    x = Tensor.empty(4096, device="CPU", dtype=dtypes.bfloat16)
    r, w = Tensor.empty(1, device="CPU"), Tensor.empty(4096, device="CPU")
    return _plan(x.float() * r.reciprocal() * w, 1e-2)


@pytest.mark.parametrize("make", [lambda: _plan(Tensor.empty(64, 64, device="CPU") + 1),
                                  lambda: _plan(Tensor.empty(64, 64, device="CPU").exp2()), _norm])
def test_dst_overlap_decides_as_the_rendered_kernel(make):
    plan = make()
    for cores in (1, plan.n_tiles):           # several tiles per core, then one
        plan.cores = cores
        compute = plan.render()["trisc1"]     # the compute source (TRISC0/2 may run shared programs)
        got = dst_overlap(plan, plan.fpu_ops, plan.dst_inputs, cores)
        assert (got is not None) == (GROUPS in compute)
        assert (got == "fpu_on_unpacker") == (ON_UNPACKER in compute)
    plan.cores = 1
    assert dst_overlap(plan, plan.fpu_ops, plan.dst_inputs, 1) is not None
    assert dst_overlap(plan, plan.fpu_ops, plan.dst_inputs, plan.n_tiles) is None


def test_norm_moves_its_fpu_op_to_the_unpacker():
    plan = _norm()
    plan.cores = 1
    assert dst_overlap(plan, plan.fpu_ops, plan.dst_inputs, 1) == "fpu_on_unpacker"


def test_compute_stage_one_group_sums_two_groups_take_the_slowest_thread():
    c = {"unpack": 64, "fpu": 40, "sfpu": 1000}
    assert compute_stage(c, 1) == 64 + 40 + mover_cost.FPU_OP_HANDOFF + 1000 + mover_cost.TILE_PACK_AND_HANDOFFS
    assert compute_stage(c, 1, "groups") == 1000 + 40 + mover_cost.FPU_OP_HANDOFF + mover_cost.DST_GROUPS_HANDOFF
    assert compute_stage(c, 1, "fpu_on_unpacker") == 1000 + mover_cost.DST_GROUPS_HANDOFF
    light = {"unpack": 64, "fpu": 200, "sfpu": 50}       # the FPU op sets TRISC0's pace once it issues it
    assert compute_stage(light, 1, "fpu_on_unpacker") == 64 + 200 + mover_cost.FPU_OP_HANDOFF \
        + mover_cost.DST_GROUPS_HANDOFF
    assert compute_stage({"unpack": 0, "fpu": 0, "sfpu": 10}, 0, "groups") == mover_cost.PACK_EMULATED \
        + mover_cost.DST_GROUPS_HANDOFF


def test_lockstep_bursts():
    rate = mover_cost.DRAM_BYTES_PER_CYCLE * mover_cost.DRAM_SUSTAINED_SHARE
    assert lockstep_cycles(1, 8192, 4096) == 0
    # the start: every core's window through the banks, less the core's own flits
    start = lockstep_cycles(128, 16384, 0)
    assert start == pytest.approx(128 * 16384 / rate - 16384 / 64)
    # the end: the last tiles' writes beyond the start's stagger only
    assert lockstep_cycles(64, 2048, 4096) == pytest.approx(64 * 2048 / rate - 2048 / 64
                                                            + 64 * 4096 / rate - 64 * 2048 / rate - 4096 / 64)
    assert lockstep_cycles(64, 8192, 4096) == pytest.approx(64 * 8192 / rate - 8192 / 64)
    assert lockstep_cycles(128, 16384, 0) > lockstep_cycles(64, 16384, 0) > 0


def test_bank_queueing_between_the_bounds():
    assert bank_queueing(1000, 1000) == pytest.approx(1000 * 2 ** (1 / mover_cost.BANK_QUEUE_NORM))
    assert bank_queueing(300, 400) == pytest.approx(bank_queueing(400, 300))
    assert 400 < bank_queueing(300, 400) < 700
    assert bank_queueing(100, 10_000) == pytest.approx(10_000, rel=1e-6)    # far apart: the larger bound


def test_grid_choice_goes_past_the_knee():
    """a*b+a over 2048 x 2048 (fp32): the cores' pipelines reach the banks' nominal floor at about 10 cores, where
    the emulator took 159,887 cycles against 149,701 on 13; the queueing keeps the chooser past that knee."""
    a, b = Tensor.empty(2048, 2048, device="CPU"), Tensor.empty(2048, 2048, device="CPU")
    plan = _plan(a * b + a)
    plan.use_cores(140)
    lc = plan.launch_cycles()
    assert plan.cores > 13 and lc["total"] < 1.05 * lc["bank"]
    assert plan.launch_cycles(10)["total"] > 1.15 * lc["bank"]
