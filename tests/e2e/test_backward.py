"""Backward passes on Device TT against tinygrad's CPU device: the gradients tinygrad's test_ops checks, at small sizes.

Each case computes fn(*inputs) and fn(*inputs).sum().gradient(*inputs) (tinygrad's test_ops checks both) on TT and
on CPU from the same random inputs. Tolerance: every kernel computes in float32 on the SFPU, its sums in another
order than the CPU's: rtol = 1e-5 with atol = 1e-5 * the largest |value| of the reference gradient.
"""
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops

from tt_backend.lowering.families.sfpu_reduce import SfpuReducePlan
from tt_backend.lowering.families.staged import StagedPlan
from tt_backend.lowering.families.tile_streams import reader_mode
from tt_backend.lowering.select import lower

rng = np.random.default_rng(23)
pytestmark = pytest.mark.needs_cc


# The default device is named for every program (Context(DEV=...)): left to tinygrad, its first use picks one and
# writes it into os.environ["DEV"], which later tests' subprocesses inherit. DEV takes the device alone ("TT"): what
# follows a colon there names a renderer, so "TT:ttsim" goes to the tensors only.

def gradients(fn, arrays, device: str) -> list[np.ndarray]:
    with Context(DEV=device.split(":")[0]):
        ts = [Tensor(a, device=device) for a in arrays]
        grads = fn(*ts).sum().gradient(*ts)
        Tensor.realize(*grads)
        return [g.numpy() for g in grads]


def plans(fn, arrays) -> list:
    """The plans of the gradient kernels, lowered from the CPU device's schedule (no device needed)."""
    with Context(DEV="CPU"):
        ts = [Tensor(a, device="CPU").realize() for a in arrays]
        grads = fn(*ts).sum().gradient(*ts)
        return [lower(c.src[0], "k") for c in Tensor.schedule_linear(*grads).src
                if c.op is Ops.CALL and c.src[0].op is Ops.SINK]


# name: (fn, input shapes, staged launches expected in the gradient kernels)
PROGRAMS = {
    # pooling and padded strided convolution gradients gather through pads and floor division/modulo of the ranges:
    # the reduction reader walks each output by nested loops with the invariant index terms hoisted ("red gather nested");
    # max_pool2d's gradient divides by each window's count of maxima once per count, in a stage before the window sum
    # (staged.pointwise_value)
    "max_pool2d": (lambda x: x.max_pool2d(kernel_size=(3, 3)), [(2, 2, 7, 9)], True),
    # its pad and stride masks, once a stream each (staged for its streams), are one packed stream (lowering/bool_pack.py)
    "conv2d_stride2_pad1": (lambda x, w: x.conv2d(w, stride=2, padding=1), [(1, 2, 7, 7), (3, 2, 3, 3)], False),
    # the input gradient's two sums (output channels, window) are merged into one (frontend.merge_nested_sum)
    "conv2d_batch1": (lambda x, w: x.conv2d(w), [(1, 2, 6, 6), (3, 2, 3, 3)], False),
    # both gradients are sums every row (column) of the other shares: computed once, then broadcast (staged.hoisted)
    "matmul": (lambda x, y: x @ y, [(12, 20), (20, 9)], True),
    # a reduction under a zeroed pad: one STORE for the pad, one for the reduction (lowering/store_split.py)
    "cumprod": (lambda x: x.cumprod(0), [(12,)], True),
}


# gradients read by the nested walk; max_pool2d's gradient sum has terms of either sign, so it accumulates compensated
# (one more register per lane): an op short of registers borrows it (sfpu_codegen `_Alloc.take`), no staging
NESTED = {"conv2d_stride2_pad1", "conv2d_batch1", "cumprod"}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_gradients_match_cpu(name, serial_compile):
    fn, shapes, staged = PROGRAMS[name]
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    lowered = plans(fn, arrays)
    assert any(isinstance(p, StagedPlan) for p in lowered) == staged
    modes = {reader_mode(s, j, s.reduce) for p in lowered for s in p.launches if isinstance(s, SfpuReducePlan)
             for j in range(len(s.inputs))}
    assert "red gather nested" in modes or name not in NESTED, modes
    with Context(DEV="TT"):
        got = fn(*[Tensor(a, device="TT") for a in arrays]).numpy()
    with Context(DEV="CPU"):
        ref = fn(*[Tensor(a, device="CPU") for a in arrays]).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max()))
    for got, ref in zip(gradients(fn, arrays, "TT"), gradients(fn, arrays, "CPU")):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max()))


@pytest.mark.ttsim
@pytest.mark.parametrize("name", ["conv2d_batch1", "matmul"])
def test_ttsim_matches_emulator_bit_for_bit(name, serial_compile):
    fn, shapes, _ = PROGRAMS[name]
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    for sim, emu in zip(gradients(fn, arrays, "TT:ttsim"), gradients(fn, arrays, "TT:emu")):
        assert sim.tobytes() == emu.tobytes()
