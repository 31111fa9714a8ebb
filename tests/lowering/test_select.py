"""The selector (lowering/select.py) over stand-in families: the cheapest acceptable candidate wins, ties keep registry
order, a pinned candidate beats the cost model, a failed build gives way to the next candidate, and when nothing is
left the first refusal is raised. The real families' decisions are pinned by the rest of the suite."""
from __future__ import annotations

import pytest

from tt_backend.lowering import select
from tt_backend.lowering.families.family import Candidate, Family, Kernel
from tt_backend.chip.errors import UnsupportedOp


def family(name: str, *offers: tuple, matches: bool = True, refuse: str | None = None) -> Family:
    """offers: (label, cycles, acceptable, pinned, fails)."""
    def build(label, fails):
        def go():
            if fails:
                raise UnsupportedOp(f"{label} does not fit")
            return label
        return go

    def candidates(kernel, m):
        if refuse:
            raise UnsupportedOp(refuse)
        return [Candidate(name, lbl, cyc, None, ok, build(lbl, fails), pinned) for lbl, cyc, ok, pinned, fails in offers]
    return Family(name, lambda k: "m" if matches else None, candidates)


def pick(monkeypatch, *families: Family):
    """The selector's rule over fake families (no AST: no broadcast reduction to hoist, tests/lowering/test_staged.py,
    no fused reduction, tests/e2e/test_fused_reduce.py)."""
    monkeypatch.setattr(select, "REGISTRY", families)
    monkeypatch.setattr(select, "hoisted", lambda kernel, one_pass: None)
    monkeypatch.setattr(select, "fused", lambda kernel: None)
    return select.select(Kernel(None, "k"))


def test_cheapest_acceptable(monkeypatch):
    assert pick(monkeypatch, family("a", ("slow", 100, True, False, False)),
                family("b", ("fast", 10, True, False, False), ("faster but over budget", 1, False, False, False))) == "fast"


def test_ties_keep_registry_order(monkeypatch):
    assert pick(monkeypatch, family("a", ("first", 10, True, False, False)),
                family("b", ("second", 10, True, False, False))) == "first"


def test_pin_beats_cost(monkeypatch):
    assert pick(monkeypatch, family("a", ("cheap", 1, True, False, False)),
                family("b", ("pinned", 50, False, True, False))) == "pinned"


def test_failed_build_gives_way(monkeypatch):
    assert pick(monkeypatch, family("a", ("too big", 1, True, False, True), ("fallback", 5, True, False, False))) \
        == "fallback"


def test_refusals(monkeypatch):
    with pytest.raises(UnsupportedOp, match="cannot lower"):
        pick(monkeypatch, family("a", matches=False), family("b", refuse="b cannot lower this"),
             family("c", ("too big", 1, True, False, True)))
    with pytest.raises(UnsupportedOp, match="does not fit"):
        pick(monkeypatch, family("a", ("too big", 1, True, False, True)))
    with pytest.raises(UnsupportedOp, match="no kernel family"):
        pick(monkeypatch, family("a", matches=False))
