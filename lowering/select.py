"""The selector: which plan a kernel becomes. Every registered family (lowering/families/registry.py) is asked
whether the kernel matches and which candidate plans it offers; the cheapest acceptable candidate (predicted cycles,
within the error budget by its family's rule) is built. A candidate the user pinned with TT_PLACE is taken over
unpinned ones. A candidate whose build fails (UnsupportedOp: e.g. it does not fit L1) gives way to the next; when
none is left, the first refusal is raised (a family that could not lower the kernel, or a failed build).
"""
from __future__ import annotations

import math

from tinygrad.uop.ops import UOp

from tt_backend import knobs

from tt_backend.lowering.families.family import Kernel, choose
from tt_backend.lowering.families.fused_reduce import fused
from tt_backend.lowering.families.registry import ONE_PASS, REGISTRY
from tt_backend.lowering.families.staged import hoisted
from tt_backend.lowering.implied_gates import drop_implied_gates
from tt_backend.lowering.index_fold import fold_index_reductions
from tt_backend.lowering.placement.placer import Placer
from tt_backend.lowering.plan import TARGETS, Plan
from tt_backend.lowering.prefix_split import split_prefix_reductions
from tt_backend.lowering.quotient_split import split_quotients
from tt_backend.lowering.stage_inline import inline_stages
from tt_backend.lowering.store_split import split_stored_where


def select(kernel: Kernel, max_cores: int | None = None) -> Plan:
    """Reductions and the elementwise over their elements in one launch where they fuse (fused_reduce.fused), unless
    the launch model prices the staged launches of a hoisted reduction lower (a reader gathering per datum in every
    pass, or a writer scattering per datum, can cost more than a second launch), each launch split over the cores the
    driver will give it (at most `max_cores`: launches_cycles); else a reduction many output elements share is
    computed once first (staged.hoisted); else the selector's rule."""
    one, staged = fused(kernel), hoisted(kernel, ONE_PASS)
    if one is not None and (staged is None or launches_cycles(one, max_cores) <= launches_cycles(staged, max_cores)):
        return one
    return staged or choose(kernel, REGISTRY)


def launches_cycles(plan: Plan, max_cores: int | None = None) -> float:
    """The plan's launches as the launch model prices them (math.inf where a launch has no model), each split as the
    driver splits it (Plan.use_cores over at most `max_cores`, the driver's count for its target: ops_tt passes it;
    default TT_CORES or the emulator's grid, capped at the grid: a fused launch over few output groups and a staged
    pair over many tiles compare at one core, not as they run). Each plan's core count is put back after: the driver
    chooses its own (a count left on the plan would steer the Dst-group choice of the driver's use_cores)."""
    grid = TARGETS["emu"].tiles
    max_cores = max_cores or min(knobs.cores() or grid, grid)
    total = 0.0
    for p in plan.launches:
        if p.launch_cycles() is None:
            return math.inf
        before = p.cores
        p.use_cores(max_cores)
        total += p.launch_cycles()["total"]
        p.cores = before
    return total


def lower(sink: UOp, name: str, placer: Placer | None = None, max_cores: int | None = None) -> Plan:
    """tinygrad kernel AST -> the selected plan (SFPU programs compiled, L1 allocated). Raises UnsupportedOp naming
    the problem. `placer` (injected by tt_backend: it needs the emulator's numeric models) lets engines be chosen
    by precision and cost; without one everything runs on the SFPU in float32. Reductions over pure index math
    are folded to their closed forms first (lowering/index_fold.py), prefix reductions (cumsum) split into blocks
    (lowering/prefix_split.py), quotients and remainders of affine indices made affine where one case survives
    (lowering/quotient_split.py), load gates an enclosing WHERE tests dropped (lowering/implied_gates.py), a stored
    WHERE on a range bound into one STORE per part (lowering/store_split.py), after the reads of local STAGE buffers
    are recomputed in place (lowering/stage_inline.py). `max_cores`: the most cores the driver will split a launch
    over on its target (select prices the fused launch and the staged pair at it)."""
    rewritten = drop_implied_gates(split_quotients(split_prefix_reductions(fold_index_reductions(inline_stages(sink)))))
    return select(Kernel(split_stored_where(rewritten), name, placer), max_cores)
