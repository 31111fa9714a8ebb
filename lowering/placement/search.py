"""The placement search: the cheapest placement of an elementwise kernel's ops on the SFPU and the FPU (ELWMUL with
1-4 fidelity phases, ELWADD/ELWSUB; bf16 or tf32 operands straight from the unpackers) whose predicted relative error
stays within SAFETY x the budget (`place`), and its per-node report (`node_reports`, `analytic_bound`).

The predicted error comes from an injected `evaluator(dag, choices, inputs, n_inputs) -> output`
(tt_backend.placement_eval: the bit-exact FPU/SFPU models; `lowering` never imports `runtime`). No budget -> the
float32-faithful placement: an FPU choice is taken only if it reproduces the all-SFPU result bit for bit on the
samples (bf16 x bf16 at HiFi4 into an fp32 Dst is exact) and is cheaper.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from tt_backend.lowering.dag import ValueDAG
from tt_backend.lowering.graph import (fold_negated_add, fpu_candidates, l1_source, live_nodes, reassociate_products,
                                      tile_graph)
from tt_backend.lowering.placement.choice import SFPU, Choice, FpuOp, Split, compile_split, options, split
from tt_backend.lowering.placement.cost import cycles, fpu_op_cycles, sfpu_op_cycles
from tt_backend.lowering.placement.pins import resolve_pins
from tt_backend.lowering.placement.reference import SAMPLE_ELEMENTS, concat_sets, reference, sample_sets, worst_error
from tt_backend.lowering.placement.report import Placement
from tt_backend.lowering.rewrite import keep_uniform_reciprocals
from tt_backend.chip.errors import UnsupportedOp

SAFETY = 0.8            # accept a placement when predicted <= SAFETY * budget: margin for data unlike the samples


Evaluator = Callable[[ValueDAG, dict, list, int], np.ndarray]


@dataclass
class _Scored:
    """A candidate placement, priced at once; its output on the samples (and so its error) evaluated only when the
    search asks (`predict`): the SFPU model is most of a placement's time, and a float32-faithful kernel without an
    exact FPU move needs no prediction to be placed."""
    choices: dict[int, Choice]
    sp: Split
    cyc: dict
    evaluate: Callable[[], tuple[np.ndarray | None, float, float]]
    predicted: tuple[np.ndarray | None, float, float] | None = None

    def predict(self) -> tuple[np.ndarray | None, float, float]:
        """(output on the samples or None when the evaluator failed, relative L2 error, max elementwise error)."""
        if self.predicted is None:
            self.predicted = self.evaluate()
        return self.predicted

    @property
    def out(self) -> np.ndarray | None:
        return self.predict()[0]


def place(kernel: str, dag: ValueDAG, in_dtypes: list[str], out_dtype: str, n_elements: int,
          evaluator: Evaluator | None, budget: float | None = None, pins: dict[str, Choice] | None = None,
          samples: list | None = None, seed: int = 0, uniform: frozenset[int] = frozenset(),
          defer: bool = False, l1_inputs: frozenset[int] | None = None) -> Placement:
    """The cheapest placement whose predicted error <= SAFETY * budget (no budget: the float32-faithful one).
    Without an evaluator only the all-SFPU placement (and pins) can be priced, not checked: pins are then trusted.
    `uniform`: the inputs with one value at every point (choice.Split.uniform), priced with their work hoisted.
    `l1_inputs`: the inputs that are L1 tiles an unpacker can hand to the FPU (None: all); the others are values
    already in Dst (a fused reduction's results, fused_reduce.py), which only the SFPU reads.
    `defer`: a prediction the choice did not need (the all-SFPU placement, which a float32-faithful kernel without an
    exact FPU product takes unevaluated) is made when the report asks for it (Placement.predict), not here."""
    n_in = len(in_dtypes)
    in_formats = ["bf16" if d == "bfloat16" else "fp32" for d in in_dtypes]
    out_format = "bf16" if out_dtype == "bfloat16" else "fp32"
    n_tiles = max(1, -(-n_elements // 1024))
    # samples: a list of sample sets (each one array per input), or one set
    sets = samples if samples is not None else sample_sets(in_dtypes, SAMPLE_ELEMENTS, seed)
    if sets and not isinstance(sets[0], (list, tuple)):
        sets = [sets]
    xs, sizes = concat_sets(sets)
    ref = reference(dag, xs)
    pins = pins or {}
    cache: dict[tuple, _Scored] = {}
    failed: list[str] = []           # the evaluator's error, if it could not run this kernel

    def score(d: ValueDAG, tag: int, choices: dict[int, Choice]) -> _Scored:
        key = (tag, tuple(sorted(choices.items(), key=lambda kv: kv[0])))
        if key not in cache:
            sp = split(d, choices, n_in, uniform)
            prog = compile_split(sp, out_dtype)
            # priced macro-free, every target's default schedule (TT_SFPU_MACRO=1 asks for the macro form, a few
            # cycles per row step fewer: docs/performance.md §8.7)
            cyc = cycles(sp, in_formats, out_format, n_tiles, prog.issue_counts(macro_free=True))
            cache[key] = _Scored(dict(choices), sp, cyc, lambda: evaluate(d, dict(choices)))
        return cache[key]

    def predicted_within_budget(s: _Scored) -> bool:
        """The candidate's error predicted on the samples is within SAFETY x the budget (False when no prediction)."""
        return evaluator is not None and not failed and s.out is not None and s.predict()[1] <= SAFETY * budget

    def evaluate(d: ValueDAG, choices: dict[int, Choice]) -> tuple[np.ndarray | None, float, float]:
        if evaluator is None or failed:
            return None, math.nan, math.nan
        try:
            out = evaluator(d, choices, xs, n_in)
        except Exception as e:      # a model gap must not fail the kernel: price it, trust no FPU move
            failed.append(f"{type(e).__name__}: {e}")
            return None, math.nan, math.nan
        return (out, *worst_error(out, ref, sizes))

    # graph variants the FPU may prefer: exact rewrites (x + y*-1 -> x - y) and the product reassociation
    def shape(v: ValueDAG) -> tuple:
        return tuple((n.op, n.srcs, repr(n.arg)) for n in v.nodes), v.out
    # and, within a budget, a division by a uniform value as a product with its reciprocal (computed once per tile)
    variants, seen = [], set()
    shapes = (dag, fold_negated_add(dag), reassociate_products(dag), reassociate_products(fold_negated_add(dag)))
    for v in shapes + (tuple(keep_uniform_reciprocals(v, uniform) for v in shapes) if budget is not None else ()):
        if shape(v) not in seen:
            seen.add(shape(v))
            variants.append((v, shape(v) != shape(dag)))     # (graph, rewritten)

    base = score(dag, 0, {})
    best: tuple[_Scored, ValueDAG, bool, dict] | None = None
    for tag, (d, reassoc) in enumerate(variants):
        cands = [v for v in fpu_candidates(tile_graph(d))
                 if l1_inputs is None or all(l1_source(d, u).arg in l1_inputs for u in d.nodes[v].srcs)]
        pinned = resolve_pins(pins, d, cands)
        if pinned is None:
            continue
        cur = {v: c for v, c in pinned.items() if c.engine == "FPU"}
        free = [v for v in cands if v not in pinned]
        s_cur = score(d, tag, cur)
        sfpu_only = score(d, tag, {})

        def acceptable(s: _Scored) -> bool:
            if evaluator is None or failed:
                return False
            bound = data_independent_bound(d, s.sp, in_dtypes)   # first: it is free, the evaluation is not
            if budget is None:   # faithful: exact for all data, and bit-identical to the all-SFPU result on the samples
                return bound == 0.0 and s.out is not None and sfpu_only.out is not None and \
                    np.array_equal(np.asarray(s.out).view(np.uint8), np.asarray(sfpu_only.out).view(np.uint8))
            return bound is not None and bound <= budget and predicted_within_budget(s)

        while free:   # greedy: take the single move that saves the most cycles and stays acceptable
            moves = []
            for v in free:
                for o in options(d, v):
                    try:
                        s = score(d, tag, {**cur, v: o})
                    except UnsupportedOp:    # e.g. the FPU result slots leave no Dst room for the SFPU program
                        continue
                    if s.cyc["kernel"] < s_cur.cyc["kernel"] and acceptable(s):
                        moves.append((s.cyc["kernel"], s.predict()[1], v, o, s))
            if not moves:
                break
            _, _, v, o, s_cur = min(moves, key=lambda m: (m[0], m[1]))
            cur[v] = o
            free.remove(v)
        # under a budget a rewritten graph (a kept reciprocal rounds twice) is taken only where its own predicted error
        # meets the budget, like any FPU move
        if reassoc and budget is not None and not predicted_within_budget(s_cur):
            continue
        if best is None or s_cur.cyc["kernel"] < best[0].cyc["kernel"]:
            best = (s_cur, d, reassoc, pinned)
    if best is None:
        raise UnsupportedOp(f"{kernel}: TT_PLACE pins an FPU placement on a node that cannot run on the FPU "
                            f"(FPU candidates are float MUL/ADD/SUB of two L1 tiles)")
    s, d, reassoc, pinned = best

    def complete(p: Placement) -> None:
        _, p.predicted_error, p.predicted_max_rel = s.predict()
        if failed:      # the evaluator could not run the kernel: no error predicted for any node
            p.evaluator_error = failed[0]
            p.nodes = node_reports(p, d, xs, sizes, None, n_in, in_dtypes)

    pl = Placement(kernel, budget, d, s.choices, s.sp, None, None, s.cyc, base.cyc["kernel"],
                   reassociated=reassoc, pinned={v: c for v, c in pinned.items()}, pending=complete)
    pl.evaluator_error = failed[0] if failed else None
    pl.bound = data_independent_bound(d, s.sp, in_dtypes)
    pl.nodes = node_reports(pl, d, xs, sizes, None if failed else evaluator, n_in, in_dtypes)
    if not defer or s.predicted is not None:
        pl.predict()
    return pl


def node_reports(pl: Placement, d: ValueDAG, xs, sizes, evaluator, n_in: int, in_dtypes: list[str]) -> list[dict]:
    """Per op node: engine, fidelity, formats, its own predicted error (the graph with only this node's choice vs the
    float32 reference) and cycles per kernel."""
    ref = reference(d, xs)
    fpu_by_node = {o.node: o for o in pl.split.fpu_ops}
    rows = []
    for i in live_nodes(d):
        n = d.nodes[i]
        if n.op in ("LOAD", "CONST"):
            continue
        c = pl.choices.get(i, SFPU)
        row = {"id": i, "op": n.op, "dtype": n.dtype, "srcs": list(n.srcs), "engine": c.engine,
               "fidelity": c.fidelity, "pinned": i in pl.pinned}
        if c.engine == "FPU":
            o = fpu_by_node[i]
            row["formats"] = {"srca": o.fmt_a, "srcb": o.fmt_b, "dst": "fp32",
                              "l1": [in_dtypes[o.a], in_dtypes[o.b]]}
            row["instruction"] = o.kind
            row["cycles"] = fpu_op_cycles(o) * pl.cycles.get("tiles", 1)
            row["bound"] = analytic_bound(o, in_dtypes)
            if evaluator is not None:
                row["predicted_error"] = worst_error(evaluator(d, {i: c}, xs, n_in), ref, sizes)[0]
        else:
            row["formats"] = {"lreg": "fp32"}
            row["cycles"] = sfpu_op_cycles(n, tuple(d.nodes[s].dtype for s in n.srcs)) * pl.cycles.get("tiles", 1)
            row["predicted_error"] = 0.0 if evaluator is not None else None
        rows.append(row)
    return rows


# worst relative error of one ELWMUL product per fidelity phase count, over all significand pairs (docs/fpu_path.md §10.5,
# "worst case (the bit model)"): bf16 x bf16, and tf32 operands (an upper bound for mixed bf16 x tf32)
ELWMUL_WORST = {"bf16": {1: 5.920e-2, 2: 7.752e-3, 3: 4.020e-4, 4: 0.0},
                "tf32": {1: 7.156e-2, 2: 1.540e-2, 3: 1.743e-3, 4: 9.756e-4}}
UNPACK_TRUNC = {("float32", "tf32"): 2.0 ** -10, ("float32", "bf16"): 2.0 ** -7, ("bfloat16", "bf16"): 0.0}


def analytic_bound(o: FpuOp, in_dtypes: list[str]) -> float | None:
    """Max relative error of the node's own result for normal inputs: operand truncation by the unpacker plus the
    bits the chosen phases drop. Every step truncates toward zero, so the errors add up one-sidedly (bound = sum).
    None for ELWADD/ELWSUB: cancelling operands have no relative bound."""
    if o.kind != "ELWMUL":
        return None
    fid = ELWMUL_WORST["tf32" if "tf32" in (o.fmt_a, o.fmt_b) else "bf16"][o.phases]
    return UNPACK_TRUNC[(in_dtypes[o.a], o.fmt_a)] + UNPACK_TRUNC[(in_dtypes[o.b], o.fmt_b)] + fid


BF16_ULP = 2.0 ** -8     # relative spacing of bfloat16 values: one rounding flip of a perturbed value costs at most this


def data_independent_bound(d: ValueDAG, sp: Split, in_dtypes: list[str]) -> float | None:
    """A bound on every output element's relative error that holds for all finite data (no denormals), or None where
    none exists: each FPU product's analytic bound, carried to the output through ops that do not amplify a relative
    error (products, quotients, reciprocals, square roots, negation, max, float casts, WHERE's value operands; a cast
    to bfloat16 may flip one rounding). An FPU sum or difference (cancellation) or a perturbed value reaching an add,
    a transcendental, a comparison or an integer cast has no such bound: the placement is then data-dependent and the
    search refuses it, so the promise "measured error <= budget" does not rest on the samples alone."""
    own = {o.node: analytic_bound(o, in_dtypes) for o in sp.fpu_ops}
    if any(b is None for b in own.values()):
        return None
    err: dict[int, float] = {}
    for i in sorted(live_nodes(d)):
        n = d.nodes[i]
        e = [err.get(k, 0.0) for k in n.srcs]
        if i in own:
            err[i] = own[i]
        elif not any(e):
            continue
        elif n.op == "MUL":
            err[i] = (1 + e[0]) * (1 + e[1]) - 1
        elif n.op == "DIV" and e[1] < 1:
            err[i] = (1 + e[0]) / (1 - e[1]) - 1
        elif n.op == "RECIPROCAL" and e[0] < 1:
            err[i] = e[0] / (1 - e[0])
        elif n.op in ("SQRT", "NEG", "MAX") or (n.op == "CAST" and n.dtype == "float32"):
            err[i] = max(e)
        elif n.op == "CAST" and n.dtype == "bfloat16":
            err[i] = (1 + e[0]) * (1 + BF16_ULP) - 1
        elif n.op == "WHERE" and e[0] == 0:
            err[i] = max(e[1:])
        else:
            return None
    return err.get(d.out, 0.0)
