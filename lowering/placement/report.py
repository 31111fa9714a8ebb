"""A placement as reported: which engine each op of a kernel runs on, with its predicted error and cycles
(`Placement`, the `Report` of the elementwise and reduction families' plans)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from tt_backend.lowering.dag import ValueDAG
from tt_backend.lowering.placement.choice import Choice, Split
from tt_backend.lowering.plan import Report


@dataclass
class Placement(Report):
    kernel: str
    budget: float | None
    dag: ValueDAG                              # the graph that is run (possibly reassociated)
    choices: dict[int, Choice]                 # FPU nodes only; every other op node runs on the SFPU
    split: Split
    predicted_error: float | None = 0.0        # ||out - ref||_2 / ||ref||_2 on the samples (None: not yet predicted)
    predicted_max_rel: float | None = 0.0
    cycles: dict = field(default_factory=dict)  # per tile: unpack, fpu, sfpu, pack, total; "kernel": total * tiles
    sfpu_cycles_all: int = 0                   # the all-SFPU placement's cycles per kernel (for comparison)
    nodes: list[dict] = field(default_factory=list)
    reassociated: bool = False
    pinned: dict[int, Choice] = field(default_factory=dict)
    bound: float | None = None                 # per-element relative error bound for all finite data (elementwise:
                                               # search.data_independent_bound); None: the prediction is for data
                                               # like the samples (a sum can cancel: no engine bounds it)
    bound_reason: str | None = None            # why `bound` is None when an FPU reduction was placed anyway (the
                                               # user's TT_BUDGET_SAMPLED: lowering.placement.guarantee)
    evaluator_error: str | None = None         # why the error could not be predicted (then: no FPU moves)
    priced_options: list[dict] | None = None   # reductions: the FPU sums priced against this plan (lowering.families.
                                               # fpu_reduce), each with its cycles, predicted error, acceptable; read
                                               # `fpu_options`, which completes a deferred prediction first
    pending: Callable[["Placement"], None] | None = field(default=None, repr=False, compare=False)
                                               # completes a prediction the choice did not need (search.place `defer`,
                                               # fpu_reduce.candidates)

    def predict(self) -> None:
        """Make the deferred prediction, if any: the predicted errors of a placement chosen without them."""
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending(self)

    @property
    def fpu_options(self) -> list[dict] | None:
        self.predict()
        return self.priced_options

    def report(self) -> dict:
        self.predict()
        return {"kernel": self.kernel, "budget": self.budget, "predicted_error": self.predicted_error,
                "predicted_max_rel": self.predicted_max_rel, "predicted_cycles": self.cycles.get("kernel"),
                "predicted_cycles_per_tile": self.cycles, "all_sfpu_cycles": self.sfpu_cycles_all,
                "reassociated": self.reassociated, "evaluator_error": self.evaluator_error,
                "bound_all_data": self.bound, "bound_reason": self.bound_reason, "nodes": self.nodes}
