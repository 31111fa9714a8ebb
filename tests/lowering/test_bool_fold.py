"""Constant boolean formulas folded (lowering/bool_fold.py): random formulas over random atoms fold exactly when a
brute-force evaluation over every assignment of their atoms is constant, and to that constant; the folds keep what
the connectives mean (an atom shared by two branches is one atom); an Invalid constant is an atom, never a value."""
import itertools

import numpy as np
import pytest
from tinygrad.dtype import Invalid, dtypes
from tinygrad.uop.ops import AxisType, Ops, UOp, graph_rewrite

from tt_backend.lowering.bool_fold import MAX_ATOMS, constant_formulas, fold_constant_formula

BINARY = [Ops.AND, Ops.OR, Ops.XOR, Ops.CMPNE, Ops.CMPEQ]
PY = {Ops.AND: lambda a, b: a and b, Ops.OR: lambda a, b: a or b, Ops.XOR: lambda a, b: a != b,
      Ops.CMPNE: lambda a, b: a != b, Ops.CMPEQ: lambda a, b: a == b}


def atoms(n: int) -> list[UOp]:
    """n distinct bool atoms: comparisons of a range with constants."""
    r = UOp.range(64, 0, AxisType.LOOP)
    return [r < UOp.const(k + 1, dtypes.weakint) for k in range(n)]


def random_formula(gen, leaves: list[UOp], depth: int) -> UOp:
    if depth == 0 or gen.random() < 0.2:
        if gen.random() < 0.1: return UOp.const(bool(gen.integers(2)), dtypes.bool)
        return leaves[int(gen.integers(len(leaves)))]
    if gen.random() < 0.2:
        return UOp(Ops.WHERE, dtypes.bool, tuple(random_formula(gen, leaves, depth - 1) for _ in range(3)))
    op = BINARY[int(gen.integers(len(BINARY)))]
    return UOp(op, dtypes.bool, (random_formula(gen, leaves, depth - 1), random_formula(gen, leaves, depth - 1)))


def brute_force(f: UOp, env: dict[UOp, bool]) -> bool:
    if f in env: return env[f]
    if f.op is Ops.CONST: return bool(f.arg)
    v = [brute_force(s, env) for s in f.src]
    return (v[1] if v[0] else v[2]) if f.op is Ops.WHERE else PY[f.op](*v)


@pytest.mark.parametrize("seed", range(6))
def test_folds_exactly_the_constant_formulas(seed):
    gen = np.random.default_rng(seed)
    leaves = atoms(int(gen.integers(1, 5)))
    folded = 0
    for _ in range(150):
        f = random_formula(gen, leaves, int(gen.integers(1, 6)))
        assignments = itertools.product([False, True], repeat=len(leaves))
        values = {brute_force(f, dict(zip(leaves, bits))) for bits in assignments}
        got = fold_constant_formula(f) if f.op is not Ops.CONST and f not in leaves else None
        if got is None:
            assert len(values) == 2 or f.op is Ops.CONST or f in leaves, f
        else:
            folded += 1
            assert got.op is Ops.CONST and got.dtype == dtypes.bool and values == {got.arg}, f
    assert folded > 0


def test_the_lifted_invalid_gate_of_a_pooled_gradient_folds():
    """!a | (a & (!b | (a & b & (c | (a & b & ((c | d) | (a & b))))))): the shape tinygrad leaves in cumprod's
    backward. It is true at every point; the WHERE it gates becomes its value."""
    a, b, c, d = atoms(4)
    t = UOp.const(True, dtypes.bool)
    ab = a & b
    inner = ab & ((c | d) | ab)
    gate = a.ne(t) | (a & (b.ne(t) | (ab & (c | inner))))
    value = UOp.const(2.0, dtypes.float)
    w = UOp(Ops.WHERE, dtypes.float, (gate, value, UOp.const(Invalid, dtypes.bool)))
    assert graph_rewrite(w, constant_formulas).src[0].arg is True


def test_invalid_is_an_atom_and_too_many_atoms_stay():
    a, = atoms(1)
    inv = UOp.const(Invalid, dtypes.bool)
    assert fold_constant_formula(UOp(Ops.WHERE, dtypes.bool, (a, UOp.const(True, dtypes.bool), inv))) is None
    assert fold_constant_formula(UOp(Ops.OR, dtypes.bool, (inv, inv.ne(UOp.const(True, dtypes.bool))))).arg is True
    many = atoms(MAX_ATOMS + 1)
    taut = UOp(Ops.OR, dtypes.bool, (many[0], many[0].ne(UOp.const(True, dtypes.bool))))
    assert fold_constant_formula(taut).arg is True
    for x in many[1:]: taut = taut | x
    assert fold_constant_formula(taut) is None
