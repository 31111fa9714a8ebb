"""The rule for FPU sums and matmuls (lowering/placement/guarantee.py): under a budget they are placed only with an
error bound, relative to float32, that holds for every input; no FPU reduction of loaded values has one, so by
default sums and matmuls stay on the SFPU, and TT_BUDGET_SAMPLED=1 lets the sample-data prediction decide.

  * the table of exact operands agrees with the bit models (one term per output: no alignment, no cancellation),
    against exact float64 arithmetic;
  * exact operands do not give a bound: a cancelling bf16 sum at an exact fidelity, run on the emulator, loses the
    whole result (relative error 1), where float32 keeps it exactly;
  * the selector keeps matmuls on the SFPU under every budget by default and takes the FPU only with the opt-in; the
    report says why there is no all-data bound;
  * the knob is parsed strictly.
"""
import numpy as np
import pytest

from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops

from tt_backend import knobs
from tt_backend.chip.errors import TTError
from tt_backend.chip.numerics.fpu_math import FIDELITY_PHASES
from tt_backend.fpu_reduce_eval import fpu_matmul, fpu_sums
from tt_backend.lowering.families.fpu_matmul import FpuMatmulPlan
from tt_backend.lowering.families.sfpu_matmul import SfpuMatmulPlan
from tt_backend.lowering.placement.guarantee import EXACT_OPERANDS, fpu_reduction_guarantee
from tt_backend.lowering.select import lower
from tt_backend.placement_eval import placer

rng = np.random.default_rng(16)


def bf16_values(n: int) -> np.ndarray:
    """Random bf16 values with every significand bit pattern likely (float32 words with the low 16 bits zero)."""
    x = rng.standard_normal(n).astype(np.float32) * np.float32(2.0) ** rng.integers(-20, 20, n).astype(np.float32)
    return (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


@pytest.mark.parametrize("src_format", ["bf16", "tf32"])
def test_exact_operands_table_matches_the_bit_models(src_format):
    """One term per output, so only the operands' conversion and the fidelity's slices can lose bits: a sum of one
    value is that value, a one-term matmul is the (float32-exact) product of its operands, exactly when the table says
    the fidelity sees every operand bit."""
    n = 1024
    x = bf16_values(n) if src_format == "bf16" else rng.standard_normal(n).astype(np.float32)
    for fid, phases in FIDELITY_PHASES.items():
        for side in ("srca", "srcb"):
            got = fpu_sums(x.reshape(n, 1), src_format, side, phases).view(np.float32)
            assert np.array_equal(got, x) == (fid in EXACT_OPERANDS.get(("sum", src_format, side), ())), (fid, side)
        a, b = x[:64].reshape(64, 1), x[64:128].reshape(1, 64)
        got = fpu_matmul(a, b, src_format, phases).view(np.float32)
        exact = (a.astype(np.float64) * b).astype(np.float32)
        assert np.array_equal(got, exact) == (fid in EXACT_OPERANDS.get(("matmul", src_format, None), ())), fid


@pytest.mark.needs_cc
def test_exact_operands_still_have_no_bound(monkeypatch):
    """bf16 data at HiFi2 with the data in SrcA (exact operands), pinned to the FPU and run on the emulator: in a row
    1, -1, 2^-12 the group of 8 is aligned to 1 at 2^-10 resolution, so the sum is 0 instead of 2^-12 (relative error
    1, docs/fpu_path.md §10.3); float32 (tinygrad's CPU device) keeps 2^-12. Under cancellation nothing bounds the
    FPU's error relative to the float32 result, which is why the rule gives no bound."""
    import tinygrad.codegen as cg
    x = np.zeros((1, 64), np.float32)
    x[0, :3] = (1.0, -1.0, 2.0 ** -12)
    monkeypatch.setenv("TT_ERR_BUDGET", "1e-1")
    monkeypatch.setenv("TT_PLACE", "REDUCE=FPU:HiFi2")
    cg.to_program_cache.clear()
    with Context(PARALLEL=0):
        got = Tensor(x, device="TT").cast(dtypes.bfloat16).realize().float().sum(1).numpy()
    cg.to_program_cache.clear()
    cpu = Tensor(x, device="CPU").sum(1).numpy()
    assert cpu[0] == 2.0 ** -12 and got[0] == 0.0
    g = fpu_reduction_guarantee("sum", "bf16", "HiFi2", "srca")
    assert g.bound is None and "aligns each group of 8" in g.reason


def matmul_ast(dt):
    out = Tensor.empty(64, 96, device="CPU", dtype=dt) @ Tensor.empty(96, 64, device="CPU", dtype=dt)
    return [c.src[0] for c in out.schedule_linear().src if c.op is Ops.CALL][-1]


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.bfloat16])
def test_matmul_stays_on_the_sfpu_without_the_opt_in(dt):
    """Every budget keeps the SFPU matmul by default (no fidelity has an all-data bound); with TT_BUDGET_SAMPLED's
    placer a loose budget takes the FPU, whose report says that its promise rests on the samples and why."""
    ast = matmul_ast(dt)
    for budget in (1e-4, 1e-2, 3e-1):
        assert isinstance(lower(ast, "k", placer(budget)), SfpuMatmulPlan), budget
    plan = lower(ast, "k", placer(3e-1, sampled=True))
    assert isinstance(plan, FpuMatmulPlan)
    rep = plan.placement.report()
    assert rep["bound_all_data"] is None and "cancelling dot product" in rep["bound_reason"]


def test_knob_is_parsed_strictly():
    assert knobs.budget_sampled({}) is False and knobs.budget_sampled({"TT_BUDGET_SAMPLED": "1"}) is True
    assert knobs.budget_sampled({"TT_BUDGET_SAMPLED": "off"}) is False
    with pytest.raises(TTError, match="TT_BUDGET_SAMPLED='2': expected 1"):
        knobs.budget_sampled({"TT_BUDGET_SAMPLED": "2"})
