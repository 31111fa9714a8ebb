"""Matmuls tinygrad fuses into bigger kernels (lowering/families/staged.py, the contraction cut): attention's scaled
scores, softmax(scores) @ v with the softmax inside the sum, a masked operand, batched einsums, a third factor inside
the sum. Each kernel with a contraction runs its operands as elementwise stages, the sum of products as a matmul stage
and the rest of the kernel as a stage reading the sum back.

Checks: the kernels really take a matmul stage (a plan of the SFPU matmul family among the stages); batched matmuls
with fused ops (odd sizes, broadcast batch ranges, transposed operands, two batch ranges, bf16, a computed operand, a
permuted einsum, a constant, a per-batch scalar or a computed (k, n) factor inside the sum, a sum of matmuls) against
tinygrad's CPU device (rtol 1e-5, bf16 1e-2, with atol rtol x the largest |value|); plain batched fp32 and bf16
matmuls against numpy in float64 with the SFPU matmul's bound (K x 2^-24 of sum_k |a b| per element, sfpu_matmul.py;
bf16 results: plus one bf16 rounding); the batch split over cores bit for bit against one core (and against ttsim);
scaled_dot_product_attention forward and backward (plain; causal with GQA; a mask) against tinygrad's CPU device at
small sizes (rtol 1e-5 with atol 1e-5 x the largest |value|: every stage is float32, the sums run in another order
than the CPU's, a softmax and its gradient add a few roundings).
"""
from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops

from tt_backend.bench.kernels import launch_plan
from tt_backend.lowering.codegen.sources import split
from tt_backend.lowering.families.matmul_spec import match_matmul
from tt_backend.lowering.families.sfpu_matmul import SfpuMatmulPlan, plan_sfpu_matmul
from tt_backend.lowering.families.staged import contraction, matmul_stages
from tt_backend.lowering.select import lower
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.targets import make_device

from tests.support import target_params, ttsim_path
from tests.support.matmul_ops import bf16_round, matmul_ast

rng = np.random.default_rng(1717)
pytestmark = pytest.mark.needs_cc


def kernels(t: Tensor) -> list:
    return [c.src[0] for c in t.schedule_linear().src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]


def matmul_launches(fn, arrays) -> int:
    """How many launches of fn's kernels (as scheduled for the CPU device) are SFPU matmuls."""
    plans = [lower(k, "k") for k in kernels(fn(*[Tensor(a, device="CPU") for a in arrays]))]
    return sum(isinstance(s, SfpuMatmulPlan) for p in plans for s in p.launches)


def close(got, ref, rtol=1e-5):
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * float(np.abs(ref).max()))


# (name, fn, operand shapes): batched matmuls with something fused around them
BATCHED = [
    ("scaled", lambda a, b: (a @ b) * 0.125, [(3, 17, 9), (3, 9, 21)]),
    ("broadcast_b_transposed", lambda a, b: (a @ b.transpose(-1, -2)).relu(), [(2, 3, 13, 40), (3, 11, 40)]),
    ("two_batch_ranges_bf16", lambda a, b: (a.cast(dtypes.bfloat16) @ b.cast(dtypes.bfloat16)) + 1,
     [(2, 3, 8, 33), (2, 3, 33, 12)]),
    ("computed_operand", lambda a, b: a.exp() @ (b * 2 - 1), [(4, 10, 7), (4, 7, 19)]),
    ("einsum_permuted_out", lambda a, b: Tensor.einsum("jik,ikl->jil", a, b) * 3, [(6, 2, 5), (2, 5, 9)]),
    # three factors inside the sum (sdpa's masked gradient): a constant, a per-batch scalar, a factor of (k, n)
    ("scale_inside_sum", lambda a, b: (a.unsqueeze(-1) * b.unsqueeze(-3) * 0.3).sum(-2), [(3, 17, 9), (3, 9, 21)]),
    ("batch_scalar_inside_sum", lambda a, b, s: (a.unsqueeze(-1) * b.unsqueeze(-3) * s).sum(-2),
     [(3, 17, 9), (3, 9, 21), (3, 1, 1, 1)]),
    ("kn_factor_inside_sum", lambda a, b, s: (a.unsqueeze(-1) * b.unsqueeze(-3) * s.exp()).sum(-2),
     [(2, 5, 12), (2, 12, 7), (1, 12, 7)]),
    # a sum of matmuls (GQA's key gradient): REDUCE(ADD, REDUCE(ADD, a * b, k), g), one K of g x k
    ("sum_of_matmuls", lambda a, b: (a.transpose(-1, -2) @ b).sum(0), [(4, 9, 7), (4, 9, 5)]),
    ("batched_sum_of_matmuls", lambda a, b: (a.transpose(-1, -2) @ b).sum(1), [(3, 4, 9, 7), (3, 4, 9, 5)]),
]


@pytest.mark.parametrize("name,fn,shapes", BATCHED, ids=[c[0] for c in BATCHED])
def test_batched_matmul_with_fused_ops(name, fn, shapes, serial_compile):
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    assert matmul_launches(fn, arrays) >= 1, "no matmul stage: the contraction cut did not apply"
    got = fn(*[Tensor(x, device="TT") for x in arrays]).numpy()
    ref = fn(*[Tensor(x, device="CPU") for x in arrays]).numpy()
    close(got, ref, 1e-2 if "bf16" in name else 1e-5)   # bf16: a result rounded to bf16 (2^-8) on either side


def test_plain_batched_matmul_against_numpy(serial_compile):
    """A batched, broadcast, transposed matmul with odd sizes: the SFPU matmul's per-element bound against float64."""
    a = rng.standard_normal((3, 1, 19, 45)).astype(np.float32)
    b = rng.standard_normal((4, 23, 45)).astype(np.float32)
    got = (Tensor(a, device="TT") @ Tensor(b, device="TT").transpose(-1, -2)).numpy()
    a64, b64 = a.astype(np.float64), np.swapaxes(b, -1, -2).astype(np.float64)
    err = np.abs(got - a64 @ b64) / np.maximum(np.abs(a64) @ np.abs(b64), 1e-30)
    assert err.max() <= 45 * 2.0 ** -24


def test_bf16_batched_matmul_against_numpy(serial_compile):
    """bf16 operands and result: the fp32 sum rounded once to bf16, so within one bf16 rounding of the float64
    product (plus the fp32 sum's bound)."""
    a = bf16_round(rng.standard_normal((5, 12, 37)))
    b = bf16_round(rng.standard_normal((5, 37, 14)))
    ta, tb = (Tensor(x, device="TT").cast(dtypes.bfloat16) for x in (a, b))
    got = (ta @ tb).float().numpy()
    ref = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert (np.abs(got - ref) <= 2.0 ** -8 * np.abs(ref) + 37 * 2.0 ** -24 * scale).all()


def test_cut_only_where_a_matmul_appears():
    """A plain matmul stays one kernel; a sum of a product whose sides share every range (a row dot product) is no
    contraction; sdpa's score and value kernels are cut into a matmul stage."""
    def ks(fn, shapes): return kernels(fn(*[Tensor.empty(*s, device="CPU") for s in shapes]))
    plain, = ks(lambda a, b: a @ b, [(4, 8, 16), (4, 16, 8)])
    assert contraction(plain) is None and not matmul_stages(plain)
    dot, = ks(lambda a, b: ((a * b).sum(-1) * 2), [(4, 8, 16), (4, 8, 16)])
    assert contraction(dot) is None
    sdpa = ks(lambda q, k, v: q.scaled_dot_product_attention(k, v), [(2, 3, 8, 16)] * 3)
    assert sum(matmul_stages(k) for k in sdpa) == 2


def batch_grid_run(target: str, cores: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b^T (batched) by the SFPU matmul with its batches split over `cores` cores on `target`."""
    spec = match_matmul(matmul_ast(lambda x, y: x @ y.transpose(-1, -2), [a.shape, b.shape], dtypes.float32))
    plan = plan_sfpu_matmul(spec, "mm_batch_grid")
    plan.cores = cores
    dev = make_device(target, lib_path=ttsim_path())
    try:
        raw, _ = launch_plan(dev, plan, {1: a, 2: b}, compile_kernel(*split(plan.render()), plan.name))
    finally:
        if hasattr(dev, "close"): dev.close()
    return np.frombuffer(raw, np.float32).reshape(a.shape[0], a.shape[1], b.shape[1])


@pytest.mark.parametrize("target", target_params("emu"))
def test_batches_split_over_cores(target):
    """Each core runs whole batches: 7 batches on 3 cores (3 + 2 + 2) give the one-core bits, within the SFPU
    matmul's bound of float64 (N = 12: only the first column half's passes run); the family splits as many batches as
    there are cores worth launching."""
    a = rng.standard_normal((7, 20, 40)).astype(np.float32)
    b = rng.standard_normal((7, 12, 40)).astype(np.float32)
    one = batch_grid_run(target, 1, a, b)
    assert batch_grid_run(target, 3, a, b).tobytes() == one.tobytes()
    a64, b64 = a.astype(np.float64), np.swapaxes(b, -1, -2).astype(np.float64)
    assert (np.abs(one - a64 @ b64) <= 40 * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64))).all()
    plan = plan_sfpu_matmul(match_matmul(matmul_ast(lambda x, y: x @ y, [(7, 20, 40), (7, 40, 24)], dtypes.float32)),
                            "k")
    plan.use_cores(64)
    assert plan.cores == 7 and [w[-2:] for w in plan.core_arg_words([0, 0, 0])][:2] == [[0, 1], [1, 2]]
    plan.use_cores(4)
    assert plan.cores == 4


@pytest.mark.ttsim
@pytest.mark.parametrize("n", [33, 16])
def test_batch_grid_is_bit_identical_on_emu_and_ttsim(n):
    a = rng.standard_normal((5, 9, 24)).astype(np.float32)
    b = rng.standard_normal((5, n, 24)).astype(np.float32)
    assert batch_grid_run("emu", 2, a, b).tobytes() == batch_grid_run("ttsim", 2, a, b).tobytes()


SDPA = {   # name: (kwargs builder, q / k / v shapes, with the backward pass)
    "plain": (lambda: {}, [(1, 2, 8, 16)] * 3, True),
    "causal_gqa": (lambda: {"is_causal": True, "enable_gqa": True}, [(1, 4, 8, 16), (1, 2, 8, 16), (1, 2, 8, 16)],
                   True),
    "mask": (lambda: {"attn_mask": Tensor(rng.standard_normal((1, 2, 5, 8)).astype(np.float32))},
             [(1, 2, 5, 16), (1, 2, 8, 16), (1, 2, 8, 16)], True),
}


@pytest.mark.parametrize("name", list(SDPA))
def test_sdpa_forward_backward(name, serial_compile):
    kw, shapes, backward = SDPA[name]
    extra = kw()
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]

    def run(device):
        q, k, v = (Tensor(x, device=device) for x in arrays)
        opts = {key: (val.to(device) if isinstance(val, Tensor) else val) for key, val in extra.items()}
        out = q.scaled_dot_product_attention(k, v, **opts)
        masks = [val for val in opts.values() if isinstance(val, Tensor)]   # a mask's gradient scales inside its sums
        grads = (out * out).sum().gradient(q, k, v, *masks) if backward else []
        return [t.numpy() for t in (out, *grads)]
    for got, ref in zip(run("TT"), run("CPU")):
        close(got, ref)
