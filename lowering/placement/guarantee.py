"""The rule for FPU sums and matmuls: does the FPU's error have a bound, relative to the float32 result that
TT_ERR_BUDGET is defined against, that holds for every input? (docs/placement.md §3 derives it from the bit models.)

The FPU sum family (lowering/families/fpu_reduce.py) and the FPU matmul's fidelity choice (fpu_matmul.py) both ask
`fpu_reduction_guarantee`; an option is acceptable under a budget only when its bound exists and meets the budget
(and its predicted error on the samples does too), unless the user opted into sample-data placements
(`TT_BUDGET_SAMPLED=1`, `Placer.sampled`): then the prediction on the placer's samples alone decides, as a promise for
data like the samples.

Today no FPU reduction has such a bound: both families take plain loads, whose terms can have either sign, and a sum
that cancels divides the FPU's absolute error (operand truncation, the fidelity's dropped bits, MVMUL's alignment of
each group of 8 products to the largest at 2^-10 resolution) by an arbitrarily small result. Exact operands do not
help: the group alignment alone loses up to 2^-11 of the group's largest product per product
(docs/fpu_path.md §10.3), far above the float32 rounding a float32 engine makes. So the table below gives each case
its reason, and the bound is None for all of them."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Guarantee:
    bound: float | None     # relative error against float32 that holds for every finite input; None: none exists
    reason: str             # why (the report's `bound_reason`)


# (kind, whether the multiplier sees the operands exactly at this fidelity) -> why no bound holds for all data
_NO_BOUND = {
    ("sum", False): "FPU sum of loaded values of either sign: a cancelling sum amplifies the operand truncation "
                    "(fp32 -> tf32 in the unpacker, or the bits the fidelity drops) without limit relative to the "
                    "float32 result",
    ("sum", True): "FPU sum of loaded values of either sign: the operands are exact at this fidelity, but MVMUL "
                   "aligns each group of 8 terms to the largest at 2^-10 resolution (docs/fpu_path.md §10.3), and a "
                   "cancelling sum amplifies that loss without limit relative to the float32 result",
    ("matmul", False): "FPU matmul of loaded operands of either sign: a cancelling dot product amplifies the operand "
                       "truncation and the fidelity's dropped bits without limit relative to the float32 result",
    ("matmul", True): "FPU matmul of loaded operands of either sign: the products are exact at this fidelity, but "
                      "MVMUL aligns each group of 8 products to the largest at 2^-10 resolution "
                      "(docs/fpu_path.md §10.3), and a cancelling dot product amplifies that loss without limit "
                      "relative to the float32 result",
}
# (kind, src_format, data side) -> the fidelities at which the multiplier sees every operand bit (docs/fpu_path.md
# §10.1): a sum multiplies its data by a ones tile, and bf16 data (8 significant bits) is complete in SrcA after 2
# phases, in SrcB after 3; a matmul's bf16 x bf16 products are exact at HiFi4 only; fp32 data is truncated to tf32 by
# the unpacker, so it is never exact.
EXACT_OPERANDS = {("sum", "bf16", "srca"): ("HiFi2", "HiFi3", "HiFi4"), ("sum", "bf16", "srcb"): ("HiFi3", "HiFi4"),
                  ("matmul", "bf16", None): ("HiFi4",)}


def fpu_reduction_guarantee(kind: str, src_format: str, fidelity: str, side: str | None = None) -> Guarantee:
    """The all-data bound of an FPU sum (kind "sum", data on `side`) or matmul ("matmul") of plain loads."""
    exact = fidelity in EXACT_OPERANDS.get((kind, src_format, side), ())
    return Guarantee(None, _NO_BOUND[(kind, exact)])


def prediction_decides(g: Guarantee, budget: float | None, sampled: bool) -> bool:
    """Whether the option's acceptability depends on its prediction on the samples: the user opted into sample-data
    placements (`sampled`), or an all-data bound within the budget (without a budget: 0, float32-faithful for every
    input) exists. Otherwise the option is unacceptable whatever it predicts, and a family need not predict it to
    choose (only to report)."""
    return sampled or (g.bound is not None and g.bound <= (budget or 0.0))


def acceptable(g: Guarantee, predicted: float | None, limit: float | None, budget: float | None,
               sampled: bool) -> bool:
    """The prediction on the samples within `limit` (the family's allowance: SAFETY x the budget, or without a budget
    its float32-faithful limit), where the prediction decides (`prediction_decides`)."""
    if predicted is None or limit is None or predicted > limit:
        return False
    return prediction_decides(g, budget, sampled)
