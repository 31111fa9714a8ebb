"""Boolean formulas that are tautologies or contradictions folded to a constant before the lowering.

tinygrad's symbolic rewrites (`sym`) leave gates such as !a || (a && (!b || (a && b && ...))) standing: they come from
Invalid being lifted out of nested WHEREs (tinygrad's pm_data_invalid) in gradients of padded, pooled views (cumprod's
backward carries one of ten atoms over five nested WHEREs). Such a gate is true at every point, but run as written each
of its atoms is a stream of its own (a computed true/false stream per element, or a load) and the kernel is staged for
the streams alone.

A formula is a tree of the boolean connectives AND, OR, XOR, CMPNE and CMPEQ of two bools, WHERE over bools and bool
constants; every other bool UOp in it is an atom (a comparison of numbers, a loaded bool, index math). When the formula
has the same value under every assignment of its atoms (its truth table, at most MAX_ATOMS atoms), it is that
constant: the atoms' real values are one of those assignments, so the fold holds whatever they are (the same UOp is the
same atom, as tinygrad's UOps are hash-consed). tinygrad's `sym` then removes the WHEREs the constant decides.

This module may import tinygrad's uop/dtype layer, never its device layer, and never `runtime`.
"""
from __future__ import annotations

import numpy as np
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import Ops, PatternMatcher, UOp, UPat

MAX_ATOMS = 12        # a truth table of 4096 rows: numpy, well under a millisecond per formula

CONNECTIVES = {Ops.AND: np.logical_and, Ops.OR: np.logical_or, Ops.XOR: np.logical_xor, Ops.CMPNE: np.not_equal,
               Ops.CMPEQ: np.equal, Ops.WHERE: np.where}


def _connective(u: UOp) -> bool:
    return u.op in CONNECTIVES and u.dtype == dtypes.bool and all(s.dtype == dtypes.bool for s in u.src)


def _constant(u: UOp) -> bool:
    """A bool constant (an Invalid constant is an atom: tinygrad reads it as 0 in a value, pm_remove_invalid)."""
    return u.op is Ops.CONST and not u.is_invalid


def _atoms(formula: UOp) -> list[UOp] | None:
    """The formula's atoms in a fixed order, or None when there are more than MAX_ATOMS."""
    atoms: list[UOp] = []
    seen: set[UOp] = set()
    todo = [formula]
    while todo:
        if (u := todo.pop()) in seen: continue
        seen.add(u)
        if _connective(u): todo.extend(u.src)
        elif not _constant(u):
            if len(atoms) == MAX_ATOMS: return None
            atoms.append(u)
    return atoms


def truth_table(formula: UOp) -> np.ndarray | None:
    """The formula's value for each of the 2**n assignments of its n atoms, or None when it has too many atoms."""
    if (atoms := _atoms(formula)) is None: return None
    rows = np.arange(1 << len(atoms))
    memo: dict[UOp, np.ndarray] = {a: (rows >> k) & 1 == 1 for k, a in enumerate(atoms)}

    def value(u: UOp) -> np.ndarray:
        if (v := memo.get(u)) is None:
            v = memo[u] = np.full(len(rows), bool(u.arg)) if _constant(u) else \
                CONNECTIVES[u.op](*(value(s) for s in u.src))
        return v
    return value(formula)


def fold_constant_formula(f: UOp) -> UOp | None:
    """The bool constant the formula f always equals, or None (not a connective, too many atoms, or not constant)."""
    if not _connective(f) or (table := truth_table(f)) is None: return None
    return UOp.const(bool(table[0]), dtypes.bool) if (table == table[0]).all() else None


# the rule calls through a lambda: tinygrad's PatternMatcher compiles a named function's body against its own globals
constant_formulas = PatternMatcher([(UPat(tuple(CONNECTIVES), dtype=dtypes.bool, name="f"),
                                     lambda f: fold_constant_formula(f))])
