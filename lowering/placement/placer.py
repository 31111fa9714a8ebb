"""The placer: what tt_backend injects into the lowering so that engines are chosen by precision and cost - the error
budget, the user's TT_PLACE pins and the numeric models that predict an FPU choice's error. The models use the
emulator's bit-exact arithmetic (tt_backend.placement_eval, tt_backend.fpu_reduce_eval: sums and matmuls), which `lowering` may not
import; without them only the all-SFPU choices can be priced."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from tt_backend.chip.errors import TTError
from tt_backend.lowering.dag import ValueDAG
from tt_backend.lowering.frontend import LoweredKernel
from tt_backend.lowering.graph import live_nodes
from tt_backend.lowering.placement.choice import Choice
from tt_backend.lowering.placement.pins import parse_pins
from tt_backend.lowering.placement.reference import SAMPLE_DISTS, SAMPLE_ELEMENTS, sample_sets
from tt_backend.lowering.placement.report import Placement
from tt_backend.lowering.placement.search import Evaluator, place

# the FPU sums' error model: (x (n, K) float32, src_format, data side, phases, outputs per tile) -> n fp32 sum words
ReduceEvaluator = Callable[[np.ndarray, str, str, int, int], np.ndarray]
# the FPU matmul's error model: (a (M, K), b (K, N) float32, src_format, phases) -> (M, N) fp32 Dst words
MatmulEvaluator = Callable[[np.ndarray, np.ndarray, str, int], np.ndarray]


@dataclass(frozen=True)
class Placer:
    budget: float | None = None                 # relative L2 error allowed (None: float32-faithful)
    pins: str | None = None                     # the TT_PLACE spec (lowering.placement.pins.parse_pins)
    evaluator_for: Callable[[list[str]], Evaluator] | None = None   # input dtypes -> the elementwise error model
    reduce_evaluator: ReduceEvaluator | None = None
    sample_dists: tuple[str, ...] = SAMPLE_DISTS   # the sample data is drawn like these (TT_SAMPLE_DIST)
    seed: int = 0
    matmul_evaluator: MatmulEvaluator | None = None
    sampled: bool = False                       # TT_BUDGET_SAMPLED: FPU sums and matmuls may be placed on the samples'
                                                # prediction alone (lowering.placement.guarantee: no all-data bound)

    def pins_for(self, kernel: str) -> dict[str, Choice]:
        return parse_pins(self.pins, kernel)

    def place(self, lk: LoweredKernel) -> Placement:
        """The cheapest placement of an elementwise kernel within the budget (lowering.placement.search.place), its
        error predicted on samples from every distribution of `sample_dists` (the worst counts)."""
        return self.place_graph(lk.name, lk.dag, [s.dtype for s in lk.inputs], math.prod(lk.ranges),
                                lk.uniform_inputs)

    def place_graph(self, kernel: str, dag: ValueDAG, dts: list[str], n_elements: int,
                    uniform: frozenset[int] = frozenset(), l1_inputs: frozenset[int] | None = None) -> Placement:
        """`place` for an elementwise value graph whose LOAD j reads an input of dtype dts[j] (`l1_inputs`: the
        ones that are L1 tiles, search.place; a fused reduction's elementwise pass reads its results from Dst)."""
        xs = sample_sets(dts, SAMPLE_ELEMENTS, self.seed, self.sample_dists)
        evaluator = self.evaluator_for(dts) if self.evaluator_for is not None else None
        pins = self.pins_for(kernel)
        pl = place(kernel, dag, dts, dag.nodes[dag.out].dtype, n_elements, evaluator,
                   self.budget, pins, samples=xs, uniform=uniform, l1_inputs=l1_inputs,
                   defer=True)                      # the report predicts, when one is asked for
        # node ids name nodes of the graph that runs (report.json's): a pin on any other id would be silently void
        ops = [v for v in live_nodes(pl.dag) if pl.dag.nodes[v].op not in ("LOAD", "CONST")]
        if missing := sorted(int(k) for k in pins if k.isdigit() and int(k) not in ops):
            raise TTError(f"TT_PLACE pins {', '.join(f'n{k}' for k in missing)} but kernel {kernel} has no such op "
                          f"node (its op nodes: {', '.join(f'n{v}' for v in ops)}; TT_DUMP's report.json lists them)")
        return pl
