"""What a kernel family answers, and what the selector hands it.

A `Family` is three answers about a `Kernel`: does it match (`match` -> a match object or None), which candidate plans
does it offer for it (`candidates`: each with predicted cycles, predicted error and whether that is within the error
budget by the family's rule, built only if chosen), and how a plan is rendered (the family's `Plan` subclass's
`render`). The selector (lowering/select.py) takes the cheapest acceptable candidate of all families.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from tinygrad.uop.ops import UOp

from tt_backend.lowering.frontend import LoweredKernel, lower_ast
from tt_backend.lowering.placement.placer import Placer
from tt_backend.lowering.plan import Plan
from tt_backend.chip.errors import UnsupportedOp

T = TypeVar("T")


def _lower(kernel: Kernel) -> LoweredKernel:
    return lower_ast(kernel.sink, kernel.name)


@dataclass(eq=False)
class Kernel:
    """One kernel to lower: tinygrad's SINK AST, its name and the injected placer (None: no engine choices, all SFPU,
    no reports). Families derive what they need from it through `shared`, so work several of them need (the
    frontend's lowered kernel, the matmul spec, the SFPU reduction an FPU sum is priced against) is done once."""
    sink: UOp
    name: str
    placer: Placer | None = None
    _derived: dict = field(default_factory=dict, repr=False)

    @property
    def budget(self) -> float | None:
        return self.placer.budget if self.placer is not None else None

    @property
    def lowered(self) -> LoweredKernel:
        """The frontend's index part + value DAG (lowering.frontend.lower_ast)."""
        return self.shared(_lower)

    def shared(self, derive: Callable[[Kernel], T]) -> T:
        """derive(self), once per kernel; an UnsupportedOp it raises is raised again on every later call."""
        if derive not in self._derived:
            try:
                self._derived[derive] = (derive(self), None)
            except UnsupportedOp as e:
                self._derived[derive] = (None, e)
        value, error = self._derived[derive]
        if error is not None:
            raise error
        return value


@dataclass(frozen=True)
class Candidate:
    family: str
    label: str                      # which option ("FPU HiFi3", "SFPU fp32", ...)
    cycles: float                   # predicted cycles (the family's cost model); math.inf: not priced, family says why
    predicted_error: float | None   # predicted relative error (None: not predicted)
    acceptable: bool                # within the error budget, by the family's rule
    build: Callable[[], Plan]       # the plan, L1 allocated; UnsupportedOp when it cannot be built (e.g. L1 overflow)
    pinned: bool = False            # TT_PLACE names this option: the user's pin beats the cost model


@dataclass(frozen=True)
class Family:
    name: str
    match: Callable[[Kernel], Any]                         # the family's match object, or None
    candidates: Callable[[Kernel, Any], list[Candidate]]   # (kernel, match object) -> the options


def offers(kernel: Kernel, families: tuple[Family, ...]) -> tuple[list[Candidate], list[UnsupportedOp]]:
    """All families' candidates for the kernel, in the given order, and the refusals of families that match it but
    cannot lower it."""
    out, refusals = [], []
    for family in families:
        try:
            m = family.match(kernel)
            if m is not None:
                out += family.candidates(kernel, m)
        except UnsupportedOp as e:
            refusals.append(e)
    return out, refusals


def choose(kernel: Kernel, families: tuple[Family, ...]) -> Plan:
    """The selector's rule (lowering/select.py) over `families`: the pinned candidates if any, else the acceptable
    ones, cheapest first (ties: the families' order); a failed build gives way to the next; when none is left, the
    first refusal is raised. The staged family uses it over the one-pass families for each of its stages."""
    candidates, refusals = offers(kernel, families)
    pinned = [c for c in candidates if c.pinned]
    for c in sorted(pinned or [c for c in candidates if c.acceptable], key=lambda c: c.cycles):   # stable: ties
        try:                                                                                      # keep the order
            return c.build()
        except UnsupportedOp as e:
            refusals.append(e)
    if refusals:
        raise refusals[0]
    raise UnsupportedOp(f"{kernel.name}: no kernel family lowers this kernel")
