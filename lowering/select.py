"""The selector: which plan a kernel becomes. Every registered family (lowering/families/registry.py) is asked
whether the kernel matches and which candidate plans it offers; the cheapest acceptable candidate (predicted cycles,
within the error budget by its family's rule) is built. A candidate the user pinned with TT_PLACE is taken over
unpinned ones. A candidate whose build fails (UnsupportedOp: e.g. it does not fit L1) gives way to the next; when
none is left, the first refusal is raised (a family that could not lower the kernel, or a failed build).
"""
from __future__ import annotations

from tinygrad.uop.ops import UOp

from tt_backend.lowering.families.family import Candidate, Kernel
from tt_backend.lowering.families.registry import REGISTRY
from tt_backend.lowering.placement.placer import Placer
from tt_backend.lowering.plan import Plan
from tt_backend.chip.errors import UnsupportedOp


def offers(kernel: Kernel) -> tuple[list[Candidate], list[UnsupportedOp]]:
    """All families' candidates for the kernel, in registry order, and the refusals of families that match it but
    cannot lower it."""
    out, refusals = [], []
    for family in REGISTRY:
        try:
            m = family.match(kernel)
            if m is not None:
                out += family.candidates(kernel, m)
        except UnsupportedOp as e:
            refusals.append(e)
    return out, refusals


def select(kernel: Kernel) -> Plan:
    candidates, refusals = offers(kernel)
    pinned = [c for c in candidates if c.pinned]
    for c in sorted(pinned or [c for c in candidates if c.acceptable], key=lambda c: c.cycles):   # stable: ties
        try:                                                                                      # keep registry order
            return c.build()
        except UnsupportedOp as e:
            refusals.append(e)
    if refusals:
        raise refusals[0]
    raise UnsupportedOp(f"{kernel.name}: no kernel family lowers this kernel")


def lower(sink: UOp, name: str, placer: Placer | None = None) -> Plan:
    """tinygrad kernel AST -> the selected plan (SFPU programs compiled, L1 allocated). Raises UnsupportedOp naming
    the problem. `placer` (injected by tt_backend: it needs the emulator's numeric models) lets engines be chosen
    by precision and cost; without one everything runs on the SFPU in float32."""
    return select(Kernel(sink, name, placer))
