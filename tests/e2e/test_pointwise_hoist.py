"""A long SFPU sequence inside a reduction over loads of one index, recomputed for many kernel elements, runs once per
buffer element in a stage of its own (staged.pointwise_value): the plans, and the values against tinygrad's CPU device.

Tolerance: the hoisted stage computes the same SFPU sequence on the same operands (bit for bit what the one-pass
kernel computed); the sums run in the SFPU's order: rtol = 1e-5 with atol = 1e-5 * the largest |value| of the
reference.
"""
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops

from tt_backend.lowering.families.elementwise import ElementwisePlan
from tt_backend.lowering.families.staged import StagedPlan
from tt_backend.lowering.select import lower

rng = np.random.default_rng(17)
pytestmark = pytest.mark.needs_cc


def kernel_plans(fn, arrays) -> list:
    with Context(DEV="CPU"):
        out = fn(*[Tensor(a, device="CPU").realize() for a in arrays])
        return [lower(c.src[0], "k") for c in Tensor.schedule_linear(out).src
                if c.op is Ops.CALL and c.src[0].op is Ops.SINK]


def run(fn, arrays, device: str) -> np.ndarray:
    with Context(DEV=device.split(":")[0]):   # DEV names the device alone: what follows a colon there is a renderer
        return fn(*[Tensor(a, device=device) for a in arrays]).numpy()


# name: (fn, input arrays, the long op hoisted)
PROGRAMS = {
    # max_pool2d's gradient divides by each window's count of maxima: a gated read (the windows' pads), so the stage
    # also computes the reciprocal of the gated loads' zero into one more element
    "max_pool2d_grad": (lambda x: x.max_pool2d(kernel_size=(3, 2)).sum().gradient(x)[0],
                        [rng.standard_normal((2, 2, 7, 9)).astype(np.float32)], "RECIPROCAL"),
    # a broadcast row read through a plain index: one reciprocal per row element instead of one per product
    "broadcast_reciprocal_sum": (lambda a, b: (a * b.reciprocal()).sum(0),
                                 [rng.standard_normal((48, 40)).astype(np.float32),
                                  rng.uniform(0.5, 2.0, (48, 1)).astype(np.float32)], "RECIPROCAL"),
    "broadcast_sqrt_dot": (lambda a, b: (a * b.sqrt()).sum(1),
                           [rng.standard_normal((64, 33)).astype(np.float32),
                            rng.uniform(0.0, 4.0, (1, 33)).astype(np.float32)], "SQRT"),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_long_op_runs_once_per_buffer_element(name, serial_compile):
    fn, arrays, op = PROGRAMS[name]
    staged = [p for p in kernel_plans(fn, arrays) if isinstance(p, StagedPlan)]
    assert len(staged) == 1, staged
    first, *rest = staged[0].stages
    assert isinstance(first, ElementwisePlan) and op in first.ops, first.ops
    assert all(op not in s.ops for s in rest)
    got, ref = run(fn, arrays, "TT"), run(fn, arrays, "CPU")
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max()))


@pytest.mark.ttsim
@pytest.mark.parametrize("name", ["max_pool2d_grad", "broadcast_sqrt_dot"])   # a gated read, a plain one
def test_ttsim_matches_emulator_bit_for_bit(name, serial_compile):
    fn, arrays, _ = PROGRAMS[name]
    assert run(fn, arrays, "TT:ttsim").tobytes() == run(fn, arrays, "TT:emu").tobytes()
